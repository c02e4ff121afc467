import numpy as np
import pytest
import torch

from towers.modeling.models import Tower, TwoTower, random_encoder
from towers.retrieval.encode import encode, length_order
from towers.modeling.tokenizer import train_wordpiece
from transformers import AutoModel, AutoTokenizer

TEXTS = ["short one.", "a much longer sentence about the harbour lighthouse and its keepers in winter.",
         "mid length text here.", "x", "another fairly long line that talks about herring boats and markets."]


@pytest.fixture(scope="module")
def tower(tmp_path_factory):
    root = tmp_path_factory.mktemp("enc")
    train_wordpiece(TEXTS * 5, root / "tok", vocab_size=150, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64,
                                                "max_positions": 64}, seed=0)
    torch.manual_seed(0)
    return Tower(AutoModel.from_pretrained(root / "enc"), "cls", 8).eval(), AutoTokenizer.from_pretrained(root / "tok")


def test_length_sorting_keeps_input_order(tower):
    model, tok = tower
    sorted_ = encode(model, tok, TEXTS, "query", 32, batch_size=2, sort_by_length=True)
    plain = encode(model, tok, TEXTS, "query", 32, batch_size=2, sort_by_length=False)
    one_by_one = np.vstack([encode(model, tok, [t], "query", 32, batch_size=1) for t in TEXTS])
    assert np.allclose(sorted_, one_by_one, atol=1e-5) and np.allclose(plain, one_by_one, atol=1e-5)


def test_length_order_is_longest_first():
    assert list(length_order([3, 9, 1, 9])) == [1, 3, 0, 2]


def test_two_tower_save_and_load(tmp_path, tower):
    model, tok = tower
    pair = TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                                   "doc_length": 32})
    pair.save(tmp_path / "m", tok)
    loaded, tok2 = TwoTower.load(tmp_path / "m")
    assert loaded.shared
    a = encode(pair.query, tok, TEXTS, "query", 16, 4)
    b = encode(loaded.query, tok2, TEXTS, "query", 16, 4)
    assert np.allclose(a, b, atol=1e-6)


def test_shards_cover_every_row_once():
    from towers.retrieval.encode import shard_range

    for count, shards in [(10, 3), (7, 7), (5, 8), (0, 2)]:
        rows = [i for s in range(shards) for i in range(*shard_range(count, s, shards))]
        assert rows == list(range(count))


@pytest.mark.extended
def test_sharded_encoding_merges_to_the_whole_encoding(tmp_path, tower):
    """encode-candidates --shard i --shards 3, then merge-embeddings: the matrix and ids of one job."""
    import json
    from conftest import run_stage

    model, tok = tower
    TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                           "doc_length": 32, "doc_text": "sentence"}).save(tmp_path / "m", tok)
    candidates = tmp_path / "c.jsonl"
    candidates.write_text("".join(json.dumps({"id": f"d{i}", "sentence": t}) + "\n" for i, t in enumerate(TEXTS * 2)))
    common = ["encode-candidates", "--model", tmp_path / "m", "--candidates", candidates, "--batch-size", 3]
    assert run_stage(*common, "--embeddings", tmp_path / "all.npy", "--ids", tmp_path / "all.ids").returncode == 0
    for shard in range(3):
        done = run_stage(*common, "--embeddings", tmp_path / f"{shard}.npy", "--ids", tmp_path / f"{shard}.ids",
                         "--shard", shard, "--shards", 3)
        assert done.returncode == 0, done.stderr
    merged = run_stage("merge-embeddings", "--parts", *[tmp_path / f"{s}.npy" for s in range(3)],
                       "--part-ids", *[tmp_path / f"{s}.ids" for s in range(3)],
                       "--embeddings", tmp_path / "merged.npy", "--ids", tmp_path / "merged.ids")
    assert merged.returncode == 0, merged.stderr
    assert (tmp_path / "merged.ids").read_text() == (tmp_path / "all.ids").read_text()
    assert np.allclose(np.load(tmp_path / "merged.npy"), np.load(tmp_path / "all.npy"), atol=1e-5)


def test_merge_refuses_a_part_that_does_not_match_its_ids(tmp_path):
    from conftest import run_stage

    np.save(tmp_path / "a.npy", np.zeros((3, 4), dtype=np.float32))
    (tmp_path / "a.ids").write_text("x\ny\n")
    result = run_stage("merge-embeddings", "--parts", tmp_path / "a.npy", "--part-ids", tmp_path / "a.ids",
                       "--embeddings", tmp_path / "m.npy", "--ids", tmp_path / "m.ids")
    assert result.returncode != 0 and "a.npy" in result.stderr and "does not match" in result.stderr
    assert not (tmp_path / "m.npy").exists() and not (tmp_path / "m.ids").exists()


def test_a_shard_outside_the_range_is_refused(tmp_path):
    from conftest import run_stage

    result = run_stage("encode-candidates", "--model", tmp_path / "m", "--candidates", tmp_path / "c.jsonl",
                       "--embeddings", tmp_path / "e.npy", "--ids", tmp_path / "e.ids", "--shard", 3, "--shards", 3)
    assert result.returncode != 0 and "--shard" in result.stderr and "0..2" in result.stderr


def _saved_model(tmp_path, tower):
    import json

    model, tok = tower
    TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                           "doc_length": 32, "doc_text": "sentence"}).save(tmp_path / "m", tok)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "sentence": t}) + "\n"
                                              for i, t in enumerate(TEXTS)))
    (tmp_path / "q.tsv").write_text("q1\tthe lighthouse\n")
    return tmp_path / "m"


def _one_line_error(result, path, problem):
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {path}: {problem}"), result.stderr[-500:]


def test_truncated_weights_are_one_line_naming_the_folder(tmp_path, tower):
    from conftest import run_stage

    folder = _saved_model(tmp_path, tower)
    weights = folder / "query" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])   # a copy cut short
    result = run_stage("encode-candidates", "--model", folder, "--candidates", tmp_path / "c.jsonl",
                       "--embeddings", tmp_path / "e.npy", "--ids", tmp_path / "e.ids")
    _one_line_error(result, folder / "query", "cannot load the encoder, damaged or incomplete")
    assert not (tmp_path / "e.npy").exists() and not (tmp_path / "e.ids").exists()


def test_a_truncated_faiss_index_is_one_line_naming_it(tmp_path, tower):
    import faiss

    from conftest import run_stage

    folder = _saved_model(tmp_path, tower)
    index = faiss.IndexFlatIP(8)
    index.add(np.random.default_rng(0).standard_normal((len(TEXTS), 8)).astype(np.float32))
    data = faiss.serialize_index(index).tobytes()
    (tmp_path / "i.faiss").write_bytes(data[:len(data) // 2])
    (tmp_path / "i.ids").write_text("".join(f"d{i}\n" for i in range(len(TEXTS))))
    result = run_stage("dense-search", "--model", folder, "--index", tmp_path / "i.faiss", "--ids", tmp_path / "i.ids",
                       "--queries", tmp_path / "q.tsv", "--run", tmp_path / "r.trec", "--depth", 3)
    _one_line_error(result, tmp_path / "i.faiss", "not a readable Faiss index, truncated or corrupt")
    assert not (tmp_path / "r.trec").exists()


def test_lengths_counted_in_steps_are_the_lengths_of_one_call(tower):
    from towers.modeling.tokens import token_lengths

    _, tok = tower
    whole = [len(ids) for ids in tok(TEXTS * 3, truncation=True, max_length=12)["input_ids"]]
    assert list(token_lengths(tok, TEXTS * 3, "query", 12, step=4)) == whole
    pairs = [(t, t[::-1]) for t in TEXTS]
    whole = [len(ids) for ids in tok([s for s, _ in pairs], [p for _, p in pairs], truncation="longest_first",
                                     max_length=12)["input_ids"]]
    assert list(token_lengths(tok, pairs, "doc", 12, step=2)) == whole


def test_texts_tokenised_once_are_padded_as_the_tokenizer_pads_them(tower, monkeypatch):
    """Tokenised.batch gives the tensors the towers' own tokenising gives (texts and pairs, any order of
    rows, segment ids included), so encoding from it writes the same bytes."""
    from towers.modeling.tokens import tokenize_docs, tokenize_queries
    from towers.modeling.tokens import Tokenised

    model, tok = tower
    pairs = [(t, t[::-1]) for t in TEXTS * 2]
    for items, kind in ((TEXTS * 2, "query"), (pairs, "doc")):
        tokenised = Tokenised(tok, items, kind, 12, step=3)
        assert Tokenised.fits(tok, items, kind)
        for idx in (np.array([1, 4, 0]), np.array([3]), np.arange(len(items))[::-1]):
            chunk = [items[i] for i in idx]
            expected = (tokenize_queries(tok, chunk, 12, "cpu") if kind == "query"
                        else tokenize_docs(tok, chunk, 12, "cpu"))
            got = tokenised.batch(idx, "cpu")
            assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)
    assert not Tokenised.fits(tok, ["a text", ("a", "pair")], "doc")   # a task mixture: batch by batch
    once = [encode(model, tok, pairs, "doc", 12, 4, segment=segment) for segment in (0, 1)]
    monkeypatch.setattr(Tokenised, "fits", staticmethod(lambda *_: False))   # the batch-by-batch tokenising
    per_batch = [encode(model, tok, pairs, "doc", 12, 4, segment=segment) for segment in (0, 1)]
    assert [a.tobytes() for a in once] == [b.tobytes() for b in per_batch] and once[0].tobytes() != once[1].tobytes()


def test_a_corpus_in_one_chunk_is_written_as_one_encoding_saved_whole(tmp_path, tower):
    """encode_corpus's bytes when the corpus fits a chunk: np.save of encode() over every text, as before
    chunking; smaller chunks sort (and so batch) differently, which moves floats by rounding only."""
    from towers.retrieval.encode import encode_corpus

    model, tok = tower
    rows = [{"id": f"d{i}", "sentence": t} for i, t in enumerate(TEXTS * 4)]
    np.save(tmp_path / "whole.npy", encode(model, tok, [r["sentence"] for r in rows], "doc", 32, 3))
    for chunk in (len(rows), 7):
        width = encode_corpus(model, tok, iter(rows), len(rows), lambda r: r["sentence"], tmp_path / f"{chunk}.npy",
                              tmp_path / f"{chunk}.ids", 32, 3, chunk=chunk)
        assert width == 8 and (tmp_path / f"{chunk}.ids").read_text().split() == [r["id"] for r in rows]
    assert (tmp_path / f"{len(rows)}.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()
    assert np.allclose(np.load(tmp_path / "7.npy"), np.load(tmp_path / "whole.npy"), atol=1e-5)


def test_chunks_prepared_in_the_background_write_the_serial_bytes(tmp_path, tower):
    """The next chunk tokenised beside the forward passes: several hundred texts over several chunks (pairs with
    a segment, and a prefix) give the bytes of the serial loop and of encode() chunk by chunk, as before."""
    from towers.retrieval.encode import encode_corpus

    model, tok = tower
    rng = np.random.default_rng(0)
    words = " ".join(TEXTS).split()
    rows = [{"id": f"d{i}", "sentence": " ".join(rng.choice(words, rng.integers(1, 30))), "paragraph": TEXTS[i % 5]}
            for i in range(300)]
    doc_of = lambda r: (r["sentence"], r["paragraph"])   # noqa: E731
    options = {"segment": 1, "prefix": "passage: ", "desc": None}
    for overlap in (True, False):
        encode_corpus(model, tok, iter(rows), len(rows), doc_of, tmp_path / f"{overlap}.npy", tmp_path / f"{overlap}.ids",
                      24, 7, chunk=64, overlap=overlap, **options)
    by_chunk = np.vstack([encode(model, tok, [doc_of(r) for r in rows[i:i + 64]], "doc", 24, 7, **options)
                          for i in range(0, len(rows), 64)])
    assert np.load(tmp_path / "True.npy").tobytes() == np.load(tmp_path / "False.npy").tobytes() == by_chunk.tobytes()
    assert (tmp_path / "True.ids").read_text() == (tmp_path / "False.ids").read_text()
    assert (tmp_path / "True.ids").read_text().split() == [r["id"] for r in rows]


def test_an_error_reading_the_next_chunk_in_the_background_is_the_stage_error(tmp_path, tower):
    from towers.io import StageError
    from towers.retrieval.encode import encode_corpus

    model, tok = tower
    rows = [{"id": f"d{i}", "sentence": TEXTS[i % 5]} for i in range(20)] + [{"id": "bad"}]
    with pytest.raises(StageError, match="candidate bad lacks"):
        encode_corpus(model, tok, iter(rows), len(rows), lambda r: r.get("sentence") or _lacks(r), tmp_path / "e.npy",
                      tmp_path / "e.ids", 24, 4, chunk=8, overlap=True, desc=None)
    assert not (tmp_path / "e.npy").exists() and not (tmp_path / "e.ids").exists()


def _lacks(row):
    from towers.io import StageError

    raise StageError("c.jsonl", f"candidate {row['id']} lacks a sentence")


def test_the_background_thread_is_used_on_a_gpu_only(monkeypatch):
    from towers.retrieval import encode as module

    monkeypatch.setattr(module, "device", lambda: torch.device("cuda"))
    assert module.overlaps()
    monkeypatch.setattr(module, "device", lambda: torch.device("cpu"))
    assert not module.overlaps()


def test_a_shard_reads_its_own_rows_only(tmp_path):
    """Rows outside the slice are skipped unparsed: broken JSON there does not stop a shard."""
    from towers.io import count_jsonl, read_jsonl_slice

    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "a"}\n\n{"id": "b"}\n{"id": "c"}\nnot json\n')
    assert count_jsonl(path) == 4
    assert [r["id"] for r in read_jsonl_slice(path, 1, 3)] == ["b", "c"]
    with pytest.raises(Exception, match="line 5 is not valid JSON"):
        list(read_jsonl_slice(path, 2, 4))


def test_an_empty_shard_is_refused(tmp_path, tower):
    from conftest import run_stage

    folder = _saved_model(tmp_path, tower)
    result = run_stage("encode-candidates", "--model", folder, "--candidates", tmp_path / "c.jsonl",
                       "--embeddings", tmp_path / "e.npy", "--ids", tmp_path / "e.ids", "--shard", 0, "--shards", 8)
    _one_line_error(result, "--shards", "8 shards of 5 candidates leave shard 0 empty")
    assert not (tmp_path / "e.npy").exists()


def test_token_ids_kept_beside_the_corpus_give_the_same_bytes_and_are_read_back(tmp_path, tower, monkeypatch):
    """cached_tokens: the first encoding of a corpus keeps its ids (one file a chunk), the next reads them instead
    of tokenising, and both write the bytes of an encoding without the cache; another length cut, other texts or
    a damaged file are tokenised again."""
    from towers.modeling import tokens
    from towers.retrieval import encode as enc

    model, tok = tower
    rows = [{"id": f"d{i}", "sentence": TEXTS[i % 5], "paragraph": TEXTS[(i + 2) % 5]} for i in range(40)]
    doc_of = lambda r: (r["sentence"], r["paragraph"])   # noqa: E731
    cache = tmp_path / ".tokens"

    def run(name, length=24, cached=cache, texts=rows):
        enc.encode_corpus(model, tok, iter(texts), len(texts), doc_of, tmp_path / f"{name}.npy", tmp_path / f"{name}.ids",
                          length, 7, chunk=16, desc=None, segment=1, cache=cached)
        return (tmp_path / f"{name}.npy").read_bytes()

    plain = run("plain", cached=None)
    assert not cache.exists()
    assert run("cold") == plain and len(list(cache.glob("*.npz"))) == 3          # 40 rows in chunks of 16
    made, tokenised = [], tokens.Tokenised
    monkeypatch.setattr(tokens, "Tokenised", type("Counted", (tokenised,), {
        "__init__": lambda self, *a, **k: (made.append(1), tokenised.__init__(self, *a, **k))[1]}))
    assert run("warm") == plain and made == []                                  # read back, not tokenised
    tok(["a", "b c"], padding=True, truncation=True, max_length=5)               # the last call's padding and cut
    assert run("after a padded call") == plain and made == []                   # are no part of the key
    run("shorter", length=16)
    run("others", texts=[{**r, "sentence": r["sentence"] + " more"} for r in rows])
    assert len(made) == 6 and len(list(cache.glob("*.npz"))) == 9               # their own keys
    for path in cache.glob("*.npz"):
        path.write_bytes(path.read_bytes()[:100])                               # damaged: tokenised again
    assert run("damaged") == plain and len(made) == 9
    assert tokens.token_cache(tmp_path / "candidates.jsonl") == tmp_path / ".tokens"
    monkeypatch.setenv("TOWERS_TOKEN_CACHE", "off")
    assert tokens.token_cache(tmp_path / "candidates.jsonl") is None


def test_bfloat16_scoring_is_close_to_float32_and_recorded(tmp_path, tower):
    """encode-candidates --precision bfloat16 (the embedded default's): the matrix products in bf16 autocast, so
    the vectors differ from float32's in their last digits only; float32 is the default and the record says which."""
    import json
    from conftest import run_stage

    model = _saved_model(tmp_path, tower)
    common = ["encode-candidates", "--model", model, "--candidates", tmp_path / "c.jsonl", "--batch-size", 2]
    for name, extra in [("plain", []), ("f32", ["--precision", "float32"]), ("bf16", ["--precision", "bfloat16"])]:
        done = run_stage(*common, *extra, "--embeddings", tmp_path / f"{name}.npy", "--ids", tmp_path / f"{name}.ids")
        assert done.returncode == 0, done.stderr
    plain, f32, bf16 = (np.load(tmp_path / f"{name}.npy") for name in ("plain", "f32", "bf16"))
    assert bf16.dtype == np.float32 and np.array_equal(plain, f32)
    assert not np.array_equal(f32, bf16) and np.abs(f32 - bf16).max() < 0.05
    cosines = (f32 * bf16).sum(1) / np.linalg.norm(f32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cosines.min() > 0.999
    record = json.loads((tmp_path / "bf16.npy.meta.json").read_text())
    assert record["arguments"]["precision"] == "bfloat16"


def test_an_unknown_precision_is_refused():
    from towers.runtime import cpu_scoring

    with pytest.raises(ValueError, match="float16"):
        cpu_scoring("float16")
