"""RepBERT (Zhan et al. 2020): MultiLabelMarginLoss with in-batch positives, segment ids 0/1 for
query/doc tokens, the train-repbert stage, and the cross-encoder reranker (train-cross-encoder, rerank)."""
import json
import math

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from towers.training.losses import multilabel_margin
from towers.modeling.models import TwoTower, doc_input, random_encoder
from towers.modeling.tokens import tokenize_docs, tokenize_queries
from towers.retrieval.encode import encode
from towers.retrieval.rerank import relevance
from towers.modeling.tokenizer import train_wordpiece
from towers.training.repbert import positives_matrix

from conftest import run_stage

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(40)]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}
CPU = torch.device("cpu")


# --- loss ---------------------------------------------------------------------------------------

SCORES = torch.tensor([[2.0, 1.5, 1.2],
                       [0.5, 2.0, 1.5],
                       [1.0, 3.0, 0.0]])
# row 0's own doc is 0, and doc 2 (another pair's) is relevant to query 0 too
POSITIVES = torch.tensor([[True, False, True],
                          [False, True, False],
                          [False, False, True]])


def test_multilabel_margin_matches_hand_computation_with_an_in_batch_positive():
    # n = 3 documents; per row (1/3) * sum over positive i, negative j of max(0, 1 - (s_i - s_j)):
    # row 0: positives {0, 2}, negative {1}: max(0, 1 - (2 - 1.5)) + max(0, 1 - (1.2 - 1.5)) = 0.5 + 1.3 = 1.8
    # row 1: positive {1}, negatives {0, 2}: max(0, 1 - (2 - 0.5)) + max(0, 1 - (2 - 1.5)) = 0 + 0.5 = 0.5
    # row 2: positive {2}, negatives {0, 1}: max(0, 1 - (0 - 1)) + max(0, 1 - (0 - 3)) = 2 + 4 = 6
    expected = (1.8 / 3 + 0.5 / 3 + 6 / 3) / 3            # = 0.92222
    assert math.isclose(float(multilabel_margin(SCORES, POSITIVES)), expected, rel_tol=1e-6)
    # exactly torch's MultiLabelMarginLoss (targets: positive columns, ended by -1)
    target = torch.tensor([[0, 2, -1], [1, -1, -1], [2, -1, -1]])
    assert math.isclose(float(multilabel_margin(SCORES, POSITIVES)),
                        float(torch.nn.MultiLabelMarginLoss()(SCORES, target)), rel_tol=1e-6)
    # had doc 2 been a negative of row 0: max(0, 1 - 0.5) + max(0, 1 - (2 - 1.2)) = 0.5 + 0.2 = 0.7
    diagonal = (0.7 / 3 + 0.5 / 3 + 6 / 3) / 3
    assert math.isclose(float(multilabel_margin(SCORES, torch.eye(3, dtype=torch.bool))), diagonal, rel_tol=1e-6)


def test_multilabel_margin_equals_torch_on_random_batches_and_all_positive_rows_add_nothing():
    gen = torch.Generator().manual_seed(0)
    scores = torch.randn(6, 6, generator=gen)
    positives = torch.rand(6, 6, generator=gen) < 0.3
    positives |= torch.eye(6, dtype=torch.bool)
    positives[4] = True                                       # no negative: the row adds 0
    target = torch.full((6, 6), -1)
    for i in range(6):
        cols = positives[i].nonzero().flatten()
        target[i, :len(cols)] = cols
    assert torch.allclose(multilabel_margin(scores, positives), torch.nn.MultiLabelMarginLoss()(scores, target))
    assert float(multilabel_margin(scores[4:5], positives[4:5])) == 0.0


def test_positives_come_from_the_qrels():
    rows = [{"qid": "q1", "doc_id": "a"}, {"qid": "q2", "doc_id": "b"}, {"qid": "q1", "doc_id": "c"}]
    qrels = {"q1": {"a": 1, "c": 1, "b": 0}, "q2": {"b": 2}}
    assert positives_matrix(rows, qrels).tolist() == [[True, False, True], [False, True, False], [True, False, True]]


# --- segment ids --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("repbert")
    train_wordpiece(TEXTS, root / "tok", vocab_size=200, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", ARCH, seed=1)
    (root / "candidates.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": t}) + "\n"
                                                   for i, t in enumerate(TEXTS)))
    # q0 has a second relevant passage, d30: when both land in one batch, d30 is q0's in-batch positive
    (root / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(40)) + "q0 0 d30 1\n")
    (root / "train.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(30)))
    (root / "valid.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(30, 36)))
    (root / "test.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(36, 40)))
    # a first-stage run: each query's own passage first, then nine others
    (root / "bm25.run").write_text("".join(f"q{i} Q0 d{(i + k) % 40} {k + 1} {10 - k}.0 bm25\n"
                                           for i in range(40) for k in range(10)))
    return root


def test_doc_tokens_get_segment_1_and_queries_0(setup):
    tok = AutoTokenizer.from_pretrained(setup / "tok")
    docs = [TEXTS[0], TEXTS[1][:20]]
    plain, marked = tokenize_docs(tok, docs, 32, CPU), tokenize_docs(tok, docs, 32, CPU, segment=1)
    assert torch.equal(marked["token_type_ids"], marked["attention_mask"])   # 1 on tokens, 0 on padding
    assert marked["attention_mask"][1].min() == 0                          # the short doc is padded
    assert torch.equal(marked["input_ids"], plain["input_ids"])
    # without the setting: the tokenizer's ids, all 0 for a single text, exactly as before
    expected = tok(docs, max_length=32, truncation=True, padding=True, return_tensors="pt")
    assert all(torch.equal(plain[k], expected[k]) for k in expected) and plain["token_type_ids"].max() == 0
    assert tokenize_queries(tok, ["when was it lit?"], 20, CPU)["token_type_ids"].max() == 0


def test_encode_honours_the_doc_segment(setup):
    tok = AutoTokenizer.from_pretrained(setup / "tok")
    cfg = {"pooling": "mean", "embedding_dim": 0, "shared": True, "normalize": False}
    tower = TwoTower.from_encoder(setup / "enc", cfg, seed=0).doc.eval()
    docs = TEXTS[:5]
    zero, one = (encode(tower, tok, docs, "doc", 32, 2, segment=s) for s in (0, 1))
    assert np.array_equal(zero, encode(tower, tok, docs, "doc", 32, 2))    # default unchanged
    assert not np.allclose(zero, one)
    with torch.no_grad():
        batch = tok([docs[3]], return_tensors="pt")
        batch["token_type_ids"] = torch.ones_like(batch["input_ids"])
        assert np.allclose(one[3], tower(**batch)[0].numpy(), atol=1e-5)


def test_doc_input_reads_a_passage_collections_contents():
    assert doc_input({"id": "d1", "contents": "a passage"}, "contents") == "a passage"


# --- train-repbert ------------------------------------------------------------------------------

def train_repbert(root, out, *extra):
    return run_stage("train-repbert", "--start", root / "enc", "--candidates", root / "candidates.jsonl",
                     "--qrels", root / "qrels.txt", "--train", root / "train.tsv", "--valid", root / "valid.tsv",
                     "--out", out, "--state-dir", f"{out}.state", "--seed", 4, "--steps", 4, "--batch-size", 8,
                     "--lr", 1e-3, "--warmup-ratio", 0.25, "--checkpoint-every", 2, "--query-length", 16,
                     "--doc-length", 32, *extra)


def test_train_repbert_then_encode_candidates_and_dense_search(setup):
    out = setup / "repbert"
    result = train_repbert(setup, out)
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "towers.json").read_text())
    assert config == {"pooling": "mean", "embedding_dim": 0, "shared": True, "normalize": False, "query_length": 16,
                      "doc_length": 32, "doc_text": "contents", "head": "linear", "doc_segment": 1}
    assert (out / "query").is_dir() and not (out / "doc").exists()       # one shared encoder
    meta = json.loads((setup / "repbert.meta.json").read_text())
    assert meta["counts"]["train_pairs"] == 31 and meta["counts"]["valid_pairs"] == 6
    assert "valid_loss" in meta["counts"]["history"][-1]
    model, tok = TwoTower.load(out)
    start = TwoTower.from_encoder(setup / "enc", config, seed=0)
    assert any(not torch.equal(a, b) for a, b in zip(start.query.parameters(), model.query.parameters()))

    emb, ids = setup / "repbert.npy", setup / "repbert.ids"
    result = run_stage("encode-candidates", "--model", out, "--candidates", setup / "candidates.jsonl",
                       "--embeddings", emb, "--ids", ids, "--batch-size", 16)
    assert result.returncode == 0, result.stderr
    vectors = np.load(emb)
    assert vectors.shape == (40, ARCH["hidden"]) and ids.read_text().split()[:2] == ["d0", "d1"]
    with torch.no_grad():   # mean of the doc tokens' vectors, read with segment id 1, not normalised
        batch = tok([TEXTS[7]], max_length=32, truncation=True, return_tensors="pt")
        batch["token_type_ids"] = torch.ones_like(batch["input_ids"])
        hidden = model.doc.encoder(**batch).last_hidden_state
        assert np.allclose(vectors[7], hidden.mean(1)[0].numpy(), atol=1e-5)

    index, run = setup / "repbert.faiss", setup / "repbert.run"
    assert run_stage("build-index", "--embeddings", emb, "--factory", "Flat", "--out", index).returncode == 0
    result = run_stage("dense-search", "--model", out, "--index", index, "--ids", ids, "--queries", setup / "test.tsv",
                       "--run", run, "--depth", 5)
    assert result.returncode == 0, result.stderr
    assert len(run.read_text().splitlines()) == 4 * 5


def test_train_repbert_with_a_relevant_passage_missing_from_the_candidates(setup, tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text((setup / "qrels.txt").read_text() + "q3 0 gone 1\n")
    out = tmp_path / "model"
    result = run_stage("train-repbert", "--start", setup / "enc", "--candidates", setup / "candidates.jsonl",
                       "--qrels", qrels, "--train", setup / "train.tsv", "--valid", setup / "valid.tsv",
                       "--out", out, "--state-dir", tmp_path / "state", "--seed", 4, "--steps", 2, "--batch-size", 4,
                       "--lr", 1e-3, "--warmup-ratio", 0.1)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {qrels}: 1 of its documents are not in {setup / 'candidates.jsonl'} (first: gone)"]
    assert not out.exists()


# --- cross-encoder reranking --------------------------------------------------------------------

def relevance_of(model_dir, query, passage):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        return float(relevance(model(**tok([query], [passage], return_tensors="pt")).logits)[0])


def test_relevance_is_the_logit_or_the_log_odds_of_label_1():
    logits = torch.tensor([[0.5, 2.0], [1.0, -1.0]])
    assert relevance(logits).tolist() == [1.5, -2.0]
    assert torch.allclose(torch.sigmoid(relevance(logits)), logits.softmax(-1)[:, 1])   # softmax of logit 1
    assert relevance(torch.tensor([[0.25], [-3.0]])).tolist() == [0.25, -3.0]


def test_rerank_batches_keep_each_query_to_itself_longest_first():
    from towers.retrieval.rerank import plan_batches

    lengths = [5, 9, 1, 7, 3, 8, 2]
    groups = ["a", "a", "b", "a", "b", "c", "a"]
    batches = plan_batches(lengths, 2, groups)
    assert [b.tolist() for b in batches] == [[1, 3], [0, 6], [4, 2], [5]]   # a's four, b's two, c's one
    assert sorted(i for b in batches for i in b) == list(range(7))
    alone = plan_batches([lengths[i] for i in (2, 4)], 2, ["b", "b"])   # b's batches without the others
    assert [b.tolist() for b in alone] == [[1, 0]]
    assert [b.tolist() for b in plan_batches(lengths, 3)] == [[1, 5, 3], [0, 4, 6], [2]]   # ungrouped: longest first


def test_cross_encoder_examples_by_row_are_the_examples_by_id(tmp_path):
    """The stage's compact examples (rows of the candidates, the run read into rows) against the id-based ones:
    same queries, order, positives and negatives; a relevant document missing from the candidates is one line."""
    from towers.io import StageError, read_run
    from towers.training import cross_encoder
    from towers.training.sampling import CandidateTexts

    ids = [f"d{i}" for i in (3, 1, 4, 0, 5, 9, 2, 6, 8, 7)]   # rows in another order than the ids
    candidates = tmp_path / "candidates.jsonl"
    candidates.write_text("".join(json.dumps({"id": d, "contents": f"text of {d}"}) + "\n" for d in ids))
    qrels = {"q0": {"d1": 1, "d0": 2, "d2": 0}, "q1": {"d5": 1}, "q2": {"d7": 1}, "q3": {}}
    run = tmp_path / "first.trec"   # q1's ranks out of file order; q2 has no negative within depth 3
    run.write_text("".join(f"{q} Q0 {d} {r} {10 - r} bm25\n" for q, hits in
                           {"q0": "d2 d0 d9 d1 d8", "q1": "d6 d5 d3", "q2": "d7", "q3": "d4 d5"}.items()
                           for r, d in enumerate(hits.split(), 1)).replace("q1 Q0 d6 1", "q1 Q0 d6 4"))
    splits = [{"q0": "first", "q1": "second", "q2": "third"}, {"q3": "fourth", "q0": "first"}]
    texts = CandidateTexts(candidates)
    by_row = cross_encoder.examples_by_row(splits, qrels, run, texts, depth=3)
    by_id = [cross_encoder.training_examples(split, qrels, read_run(run), depth=3) for split in splits]
    as_ids = [[{**e, "positives": [ids[r] for r in e["positives"]], "negatives": [ids[r] for r in e["negatives"]]}
               for e in examples] for examples in by_row]
    assert as_ids == by_id
    assert [[e["qid"] for e in examples] for examples in by_row] == [["q0", "q1"], ["q0"]]
    assert by_id[0][0]["negatives"] == ["d2", "d9"] and by_id[0][1]["negatives"] == ["d3", "d6"]
    assert texts[by_row[0][0]["positives"][0]] == "text of d0"
    assert cross_encoder.examples_key(by_row[0]) != cross_encoder.examples_key(by_row[1])
    with pytest.raises(StageError, match=r"qrels.txt: relevant document d11 of query q1 is not in .*candidates.jsonl"):
        cross_encoder.examples_by_row(splits, {**qrels, "q1": {"d11": 1}}, run, texts, 3, "qrels.txt")


@pytest.mark.extended
def test_train_cross_encoder_then_rerank_keeps_the_top_k_reordered_and_repeatably(setup):
    ce = setup / "ce"
    train = setup / "train-and-unjudged.tsv"   # one more query, judged nowhere: left out, and said so
    train.write_text((setup / "train.tsv").read_text() + "q-unjudged\twhere is no lighthouse?\n")
    result = run_stage("train-cross-encoder", "--start", setup / "enc", "--candidates", setup / "candidates.jsonl",
                       "--qrels", setup / "qrels.txt", "--train", train, "--valid", setup / "valid.tsv",
                       "--run", setup / "bm25.run", "--negatives-depth", 10, "--max-length", 48, "--out", ce,
                       "--state-dir", f"{ce}.state", "--seed", 2, "--steps", 3, "--batch-size", 4, "--lr", 1e-3,
                       "--warmup-ratio", 0.1, "--checkpoint-every", 3)
    assert result.returncode == 0, result.stderr
    meta = json.loads((setup / "ce.meta.json").read_text())["counts"]
    assert meta["train_queries"] == 30 and meta["num_labels"] == 1 and meta["max_length"] == 48
    assert meta["queries_left_out"] == {"train": 1, "valid": 0}
    assert "left out 1 of 31 training and 0 of" in result.stdout + result.stderr

    queries = setup / "all.tsv"   # the run covers all 40 queries
    queries.write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(40)))
    runs = [setup / "reranked0.run", setup / "reranked1.run"]
    for out in runs:
        result = run_stage("rerank", "--model", ce, "--run", setup / "bm25.run", "--candidates",
                           setup / "candidates.jsonl", "--queries", queries, "--depth", 4, "--batch-size", 3,
                           "--max-length", 48, "--out", out)
        assert result.returncode == 0, result.stderr
        assert "rerank" in result.stderr                                   # the progress bar
    assert runs[0].read_bytes() == runs[1].read_bytes()                     # repeatable
    bf16 = setup / "reranked-bf16.run"   # the embedded default's precision: the same pairs, scores within bf16's digits
    result = run_stage("rerank", "--model", ce, "--run", setup / "bm25.run", "--candidates", setup / "candidates.jsonl",
                       "--queries", queries, "--depth", 4, "--batch-size", 3, "--max-length", 48,
                       "--precision", "bfloat16", "--out", bf16)
    assert result.returncode == 0, result.stderr
    scored = [{(r[0], r[2]): float(r[4]) for r in map(str.split, run.read_text().splitlines())} for run in (runs[0], bf16)]
    assert scored[0].keys() == scored[1].keys() and scored[0] != scored[1]
    assert max(abs(scored[0][k] - scored[1][k]) for k in scored[0]) < 0.05
    assert json.loads((setup / "reranked-bf16.run.meta.json").read_text())["arguments"]["precision"] == "bfloat16"
    parts = [setup / f"reranked-part{k}.run" for k in range(3)]                # split by query, joined: the same bytes
    for k, part in enumerate(parts):
        result = run_stage("rerank", "--model", ce, "--run", setup / "bm25.run", "--candidates",
                           setup / "candidates.jsonl", "--queries", queries, "--depth", 4, "--batch-size", 3,
                           "--max-length", 48, "--shard", k, "--shards", 3, "--out", part)
        assert result.returncode == 0, result.stderr
    assert len({line.split()[0] for line in parts[1].read_text().splitlines()}) == 13   # 40 queries in 13/13/14
    assert run_stage("merge-runs", "--parts", *parts, "--run", setup / "joined.run").returncode == 0
    assert (setup / "joined.run").read_bytes() == runs[0].read_bytes()
    lines = [line.split() for line in runs[0].read_text().splitlines()]
    assert len(lines) == 40 * 4
    q5 = [line for line in lines if line[0] == "q5"]
    assert sorted(d for _, _, d, _, _, _ in q5) == ["d5", "d6", "d7", "d8"]   # only the run's top 4
    expected = sorted(((relevance_of(ce, "when was lighthouse 5 lit?", TEXTS[i]), f"d{i}") for i in range(5, 9)),
                      reverse=True)
    assert [d for _, _, d, _, _, _ in q5] == [d for _, d in expected]        # ordered by the cross-encoder
    assert [int(r) for _, _, _, r, _, _ in q5] == [1, 2, 3, 4]
    reordered = [qid for qid in {line[0] for line in lines}
                 if [line[2] for line in lines if line[0] == qid] != [f"d{(int(qid[1:]) + k) % 40}" for k in range(4)]]
    assert reordered                                                         # not the run's order
    assert all(math.isclose(float(s), e, abs_tol=1e-5) for (_, _, _, _, s, _), (e, _) in zip(q5, expected))

    # a shallower reranking from the deeper one's scores is the one the cross-encoder gives directly
    shallow = {}
    for how, source in (("model", ["--model", ce]), ("scores", ["--scores", runs[0]])):
        shallow[how] = setup / f"shallow-{how}.run"
        result = run_stage("rerank", *source, "--run", setup / "bm25.run", "--candidates", setup / "candidates.jsonl",
                           "--queries", queries, "--depth", 2, "--max-length", 48, "--out", shallow[how])
        assert result.returncode == 0, result.stderr
    direct, reused = ({(r[0], r[2]): float(r[4]) for r in map(str.split, shallow[h].read_text().splitlines())}
                      for h in ("model", "scores"))
    assert len(direct) == 40 * 2 and direct.keys() == reused.keys()   # each query's top 2 of the run
    assert all(math.isclose(direct[k], reused[k], abs_tol=1e-5) for k in direct)   # the same scores (to padding noise)
    reused_lines = [line.split() for line in shallow["scores"].read_text().splitlines()]
    for first, second in zip(reused_lines[::2], reused_lines[1::2]):
        assert first[0] == second[0] and float(first[4]) >= float(second[4])   # sorted by them

    # scores that do not cover the run's top k: one line naming the scores file, nothing written
    out = setup / "too-deep.run"
    result = run_stage("rerank", "--scores", shallow["scores"], "--run", setup / "bm25.run", "--candidates",
                       setup / "candidates.jsonl", "--queries", queries, "--depth", 3, "--out", out)
    assert result.returncode != 0 and "shallow-scores.run" in result.stderr and "no score for" in result.stderr
    assert not out.exists()


def test_listwise_cross_encoder_training(setup):
    ce = setup / "ce-listwise"
    common = ["--start", setup / "enc", "--candidates", setup / "candidates.jsonl", "--qrels", setup / "qrels.txt",
              "--train", setup / "train.tsv", "--valid", setup / "valid.tsv", "--run", setup / "bm25.run",
              "--negatives-depth", 10, "--max-length", 48, "--out", ce, "--state-dir", f"{ce}.state", "--seed", 2,
              "--steps", 2, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0.1, "--checkpoint-every", 2]
    result = run_stage("train-cross-encoder", *common, "--loss", "listwise", "--group-size", 1)
    assert result.returncode != 0 and "--group-size" in result.stderr and not ce.exists()
    result = run_stage("train-cross-encoder", *common, "--loss", "listwise", "--group-size", 4)
    assert result.returncode == 0, result.stderr
    history = json.loads((setup / "ce-listwise.meta.json").read_text())["counts"]["history"]
    # the relevant passage against 3 negatives: an untrained head is near uniform, ln 4
    assert abs(history[-1]["valid_loss"] - math.log(4)) < 0.5


@pytest.mark.parametrize("labels", [1, 2])
def test_rerank_with_a_one_or_two_logit_head(setup, tmp_path, labels):
    torch.manual_seed(labels)
    folder = tmp_path / "clf"
    config = BertConfig(vocab_size=len(AutoTokenizer.from_pretrained(setup / "tok")), hidden_size=32,
                        num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                        num_labels=labels)
    BertForSequenceClassification(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(setup / "tok").save_pretrained(folder)
    run = tmp_path / "in.run"
    run.write_text("".join(f"q1 Q0 d{i} {i + 1} {20 - i}.0 bm25\n" for i in range(6)))
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\twhen was lighthouse 3 lit?\n")
    out = tmp_path / "out.run"
    result = run_stage("rerank", "--model", folder, "--run", run, "--candidates", setup / "candidates.jsonl",
                       "--queries", queries, "--depth", 3, "--max-length", 512, "--out", out)   # cut to 64
    assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "out.run.meta.json").read_text())["counts"]
    assert meta["num_labels"] == labels and meta["max_length"] == 64
    ranked = [line.split() for line in out.read_text().splitlines()]
    expected = sorted(((relevance_of(folder, "when was lighthouse 3 lit?", TEXTS[i]), f"d{i}") for i in range(3)),
                      reverse=True)
    assert [r[2] for r in ranked] == [d for _, d in expected]
    assert all(math.isclose(float(r[4]), e, abs_tol=1e-5) for r, (e, _) in zip(ranked, expected))


def test_rerank_with_a_document_or_query_missing_gives_one_line_and_no_output(setup, tmp_path):
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\twhen was lighthouse 1 lit?\n")
    run = tmp_path / "bad.run"
    run.write_text("q1 Q0 d1 1 3.0 bm25\nq1 Q0 nowhere 2 2.0 bm25\n")
    out = tmp_path / "out.run"
    result = run_stage("rerank", "--model", setup / "no-such-model", "--run", run, "--candidates",
                       setup / "candidates.jsonl", "--queries", queries, "--depth", 10, "--out", out)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: {run}: 1 of its documents are not in {setup / 'candidates.jsonl'} (first: nowhere)"]
    assert not out.exists() and not (tmp_path / "out.run.meta.json").exists()

    run.write_text("q3 Q0 d1 1 3.0 bm25\nq2 Q0 d2 1 2.0 bm25\n")
    result = run_stage("rerank", "--model", setup / "no-such-model", "--run", run, "--candidates",
                       setup / "candidates.jsonl", "--queries", queries, "--depth", 10, "--out", out)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"error: {run}: none of its queries is in {queries}"]

    run.write_text("q1 Q0 d1 1 3.0 bm25\n")
    result = run_stage("rerank", "--model", setup / "no-such-model", "--run", run, "--candidates",
                       setup / "candidates.jsonl", "--queries", queries, "--depth", 10, "--out", out)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(f"error: {setup / 'no-such-model'}: cannot load a sequence classifier")
    assert not out.exists()
