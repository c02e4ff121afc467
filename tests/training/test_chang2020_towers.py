"""Chang et al.'s two-tower pre-training (ICT/BFS/WLP pairs, in-batch softmax), BoW-MLP, and the
fine-tuning that starts from pre-trained towers."""
import json

import pytest
import torch
from safetensors.torch import load_file

from towers.datasets.pretraining_pairs import PairFile
from towers.modeling.models import FeatureHasher, TwoTower, random_bag_of_words, random_encoder
from towers.modeling.tokens import tokenize_docs
from towers.reports.chang2020 import ablation_table
from towers.modeling.tokenizer import train_wordpiece

from conftest import run_stage, write_lighthouse_split

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(60)]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}


def pair(i, task):
    return {"query": f"lighthouse {i} was lit", "doc": TEXTS[i], "title": f"Light {i}", "task": task,
            "query_article": str(i), "doc_article": str(i)}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("chang")
    train_wordpiece(TEXTS, root / "tok", vocab_size=200, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", ARCH, seed=1)
    random_bag_of_words(root / "bow", buckets=512, dim=16, max_features=64, seed=1, char_ngram=0, word_bigrams=False)
    for task, rows in (("ict", range(0, 40)), ("bfs", range(40, 50)), ("wlp", range(50, 53))):
        (root / f"{task}.jsonl").write_text("".join(json.dumps(pair(i, task)) + "\n" for i in rows))
    write_lighthouse_split(root, TEXTS, train=50)
    return root


def towers(dim=16, head="linear"):
    return ["--query-length", 16, "--doc-length", 32, "--embedding-dim", dim, "--pooling", "mean",
            "--normalize", 1, "--head", head]


def pretrain(root, out, start="enc", pairs=("ict", "bfs", "wlp"), steps=6, head="linear"):
    return run_stage("pretrain-two-tower", "--start", root / start, "--pairs", *[root / f"{p}.jsonl" for p in pairs],
                     "--out", out, "--state-dir", f"{out}.state", "--seed", 5, "--steps", steps, "--batch-size", 8,
                     "--lr", 1e-3, "--warmup-ratio", 0.1, "--checkpoint-every", 3, "--temperature", 0.1,
                     *towers(head=head))


def test_pair_file_reads_any_pair_without_loading_the_file(setup):
    pairs = PairFile(setup / "bfs.jsonl")
    assert len(pairs) == 10
    assert pairs[3] == pair(43, "bfs") and pairs[0] == pair(40, "bfs")
    assert PairFile(setup / "bfs.jsonl").digest == pairs.digest


def test_pair_file_names_the_file_and_pair_on_bad_input(tmp_path):
    from towers.io import StageError

    bad = tmp_path / "pairs.jsonl"
    bad.write_text(json.dumps(pair(1, "ict")) + "\n" + json.dumps({"query": "q"}) + "\n")
    with pytest.raises(StageError, match=r"pairs.jsonl.*pair 2 lacks"):
        PairFile(bad)[1]
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(StageError, match="no pairs"):
        PairFile(tmp_path / "empty.jsonl")


def test_a_task_mixture_batch_mixes_title_pairs_and_plain_passages(setup):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(setup / "tok")
    batch = tokenize_docs(tok, [("Light 1", TEXTS[1]), TEXTS[2]], 32, torch.device("cpu"))
    assert batch["input_ids"].shape[0] == 2
    first = tok.convert_ids_to_tokens(batch["input_ids"][0])
    assert first.count("[SEP]") == 2                      # title [SEP] passage [SEP]
    assert batch["token_type_ids"][0].max() == 1 and batch["token_type_ids"][1].max() == 0
    hashed = tokenize_docs(FeatureHasher(64, char_ngram=0, word_bigrams=False), [("a b", "c"), "d"], 32,
                           torch.device("cpu"))
    assert hashed["attention_mask"].sum(1).tolist() == [3, 1]   # the hasher reads a pair as one text


def test_a_training_run_tokenises_each_text_once_into_the_same_tensors(setup, monkeypatch):
    from transformers import AutoTokenizer

    from towers.modeling import tokens
    from towers.modeling.tokens import token_memo, tokenize_queries

    tok = AutoTokenizer.from_pretrained(setup / "tok")
    cpu = torch.device("cpu")
    batches = [("docs", [("Light 1", TEXTS[1]), ("Light 2", TEXTS[2] * 3)], 12),   # pairs, the second truncated
               ("docs", [("Light 1", TEXTS[1]), TEXTS[3]], 32),                     # a task mixture
               ("docs", [TEXTS[4], TEXTS[5] * 2, TEXTS[4]], 20),                    # texts, one twice, one cut
               ("queries", ["lighthouse 4 was lit", "lighthouse 40"], 16),
               ("docs", [("Light 1", TEXTS[1]), ("Light 3", TEXTS[3])], 12)]        # one pair again
    tokenize = {"docs": tokenize_docs, "queries": tokenize_queries}
    memo = {}
    for kind, items, length in batches:
        plain = tokenize[kind](tok, items, length, cpu)
        with token_memo(memo):
            kept = tokenize[kind](tok, items, length, cpu)
        assert kept.keys() == plain.keys()
        for name in plain:
            assert kept[name].dtype == plain[name].dtype and torch.equal(kept[name], plain[name]), (kind, items, name)
    assert len(memo) == 9   # each distinct (text or pair, length) once; ("Light 1", TEXTS[1]) at 12 and at 32
    monkeypatch.setattr(tokens, "MEMO_LIMIT", 9)   # full: new texts are tokenised for their batch, not kept
    with token_memo(memo):
        kept = tokenize_queries(tok, ["lighthouse 4 was lit", "a text never seen"], 16, cpu)
    assert torch.equal(kept["input_ids"], tokenize_queries(tok, ["lighthouse 4 was lit", "a text never seen"], 16,
                                                           cpu)["input_ids"]) and len(memo) == 9


def test_unigram_hasher_has_only_word_features():
    words = FeatureHasher(1000, char_ngram=0, word_bigrams=False).features("red fox red")
    assert len(words) == 3 and words[0] == words[2]
    assert len(FeatureHasher(1000).features("red fox")) > 3      # bigrams and char trigrams by default


@pytest.mark.parametrize("max_features", [256, 7, 3])
def test_hashed_features_are_the_crc32_of_each_gram_in_order(max_features):
    """The memoised hasher gives exactly the ids of its definition: unigrams, bigrams, then '#word#' trigrams."""
    import zlib

    text = "The Red fox, the red FOX; jumps"
    words = ["the", "red", "fox", "the", "red", "fox", "jumps"]
    grams = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
    grams += [f"#{w}#"[i:i + 3] for w in words for i in range(len(w))]
    expected = [1 + zlib.crc32(g.encode()) % 999 for g in grams][:max_features]
    hasher = FeatureHasher(1000, max_features=max_features)
    assert hasher.features(text) == expected and hasher.features(text) == expected   # and again, from the memo
    assert FeatureHasher(1000).features("...") == [1]   # no word: the one feature that is not padding


def test_pretraining_then_finetuning_keeps_the_pretrained_towers(setup):
    out = setup / "pre"
    result = pretrain(setup, out)
    assert result.returncode == 0, result.stderr
    meta = json.loads((setup / "pre.meta.json").read_text())
    assert meta["counts"]["task_pairs"] == {"ict": 40, "bfs": 10, "wlp": 3}
    again = pretrain(setup, setup / "pre-again")
    assert again.returncode == 0, again.stderr
    for key, value in load_file(str(out / "heads.safetensors")).items():   # seeded: repeatable
        assert torch.equal(value, load_file(str(setup / "pre-again" / "heads.safetensors"))[key])

    tuned = setup / "tuned"
    result = run_stage("finetune", "--encoder", out, "--candidates", setup / "candidates.jsonl",
                       "--qrels", setup / "qrels.txt", "--train", setup / "train.tsv", "--valid", setup / "valid.tsv",
                       "--out", tuned, "--state-dir", f"{tuned}.state", "--seed", 3, "--steps", 2, "--batch-size", 8,
                       "--lr", 1e-3, "--warmup-ratio", 0.1, "--checkpoint-every", 2, *towers(dim=99))
    assert result.returncode == 0, result.stderr
    model, _ = TwoTower.load(tuned)
    assert model.config["embedding_dim"] == 16          # the pre-trained architecture wins over the flags
    pre, _ = TwoTower.load(out)
    moved = [not torch.equal(a, b) for a, b in zip(pre.query.parameters(), model.query.parameters())]
    assert any(moved) and not all(torch.equal(a, b) for a, b in zip(pre.doc.projection.parameters(),
                                                                       model.doc.projection.parameters()))


def test_bow_mlp_pretrains_with_a_tanh_mlp_head(setup):
    out = setup / "bow-pre"
    result = pretrain(setup, out, start="bow", pairs=("ict", "bfs"), steps=3, head="mlp")
    assert result.returncode == 0, result.stderr
    model, hasher = TwoTower.load(out)
    assert isinstance(model.query.projection[1], torch.nn.Tanh)
    assert model.query.projection[2].out_features == 16
    vectors = model.query(**hasher(["red fox"], return_tensors="pt"))
    assert vectors.shape == (1, 16)


def test_pretraining_rejects_two_files_of_one_task(setup):
    result = pretrain(setup, setup / "dup", pairs=("ict", "ict"))
    assert result.returncode == 1
    assert "error:" in result.stderr and "ict.jsonl" in result.stderr and "a second file of task 'ict'" in result.stderr
    assert not (setup / "dup").exists()


def test_ablation_table_puts_each_split_beside_the_paper(tmp_path):
    from conftest import ROOT

    rows = []
    for split, value in (("1-99", 0.5), ("80-20", 0.75)):
        path = tmp_path / f"{split}.json"
        path.write_text(json.dumps({"queries": 4, "metrics": {"R@100": value}}))
        rows.append({"index": "6", "layers": "2", "pretraining": "ICT", "emb_dim": "32", "split": split,
                     "eval": str(path)})
    frame, twin, _ = ablation_table(rows, ROOT / "data/papers/chang2020_table5.csv", "table5", "mini", "n",
                                    dataset="enwiki-mini", metric="R@100")
    row = frame.iloc[0]
    assert row["R@100 1-99"] == 50.0 and row["R@100 1-99 paper"] == 79.80
    assert row["R@100 80-20"] == 75.0 and row["R@100 80-20 paper"] == 93.91
    assert row["layers paper"] == 12 and row["emb dim paper"] == 128
    assert twin["rows"]["6/2/ICT/32"] == {"R@100 1-99": 50.0, "R@100 80-20": 75.0}
