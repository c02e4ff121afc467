"""Issue 40: one NaN row in an embedding matrix silently dropped its passage from every ranking, and a run's NaN score
or repeated document gave metrics that disagree. Each is now one line where it first appears."""
import copy
import json

import numpy as np
import pytest

from towers.io import StageError
from towers.modeling.models import TwoTower
from towers.retrieval import vector_index
from towers.retrieval import matrix as matrices

from conftest import run_stage
from test_encode import TEXTS, tower  # noqa: F401  (the module's tiny tower, a fixture)

DROPS = "holds NaN or inf, not an embedding: its document would drop out of every ranking"


def one_line_error(result, line):
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == f"error: {line}", result.stderr[-500:]


def matrix_with(bad_row, value=np.nan, rows=7):
    matrix = np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32)
    matrix[bad_row, 2] = value
    return matrix


def test_the_first_row_not_finite_is_found_in_blocks_and_large_finite_values_are_not_mistaken():
    assert matrices.first_nonfinite(matrix_with(5), rows=2) == 5 and matrices.first_nonfinite(matrix_with(0, -np.inf), rows=3) == 0
    assert matrices.first_nonfinite(np.full((4, 3), 3e38, dtype=np.float32), rows=2) is None   # a block sum overflows
    assert matrices.first_nonfinite(np.zeros((0, 3), dtype=np.float32)) is None


def test_a_matrix_read_in_blocks_names_its_first_bad_row(tmp_path):
    np.save(tmp_path / "e.npy", matrix_with(5))
    with pytest.raises(StageError) as err:
        list(matrices.read_blocks(tmp_path / "e.npy", rows=2))
    assert str(err.value) == f"{tmp_path / 'e.npy'}: row 5 {DROPS}"
    with pytest.raises(StageError, match=f"embeddings: row 3 {DROPS}"):
        vector_index.build(matrix_with(3), "Flat")


@pytest.mark.parametrize("factory", ["Flat", "IVF2,Flat", "SQ8"])
def test_build_index_refuses_a_matrix_holding_nan_and_leaves_nothing(tmp_path, factory):
    np.save(tmp_path / "e.npy", matrix_with(4, rows=100))
    result = run_stage("build-index", "--embeddings", tmp_path / "e.npy", "--factory", factory, "--out",
                       tmp_path / "i.faiss")
    one_line_error(result, f"{tmp_path / 'e.npy'}: row 4 {DROPS}")
    assert not (tmp_path / "i.faiss").exists()


def test_merge_embeddings_refuses_a_part_holding_inf(tmp_path):
    np.save(tmp_path / "a.npy", matrix_with(1, np.inf, rows=3))
    (tmp_path / "a.ids").write_text("x\ny\nz\n")
    result = run_stage("merge-embeddings", "--parts", tmp_path / "a.npy", "--part-ids", tmp_path / "a.ids",
                       "--embeddings", tmp_path / "m.npy", "--ids", tmp_path / "m.ids")
    one_line_error(result, f"{tmp_path / 'a.npy'}: row 1 {DROPS}")
    assert not (tmp_path / "m.npy").exists()


def test_encoding_names_the_candidate_whose_vector_is_nan_and_writes_nothing(tmp_path, tower):  # noqa: F811
    model, tok = tower
    model = copy.deepcopy(model)
    word = model.encoder.embeddings.word_embeddings.weight
    word.data[tok.convert_tokens_to_ids("x")] = float("nan")   # only TEXTS[3], "x", reads that token
    TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                           "doc_length": 32, "doc_text": "sentence"}).save(tmp_path / "m", tok)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "sentence": t}) + "\n"
                                              for i, t in enumerate(TEXTS * 2)))
    result = run_stage("encode-candidates", "--model", tmp_path / "m", "--candidates", tmp_path / "c.jsonl",
                       "--embeddings", tmp_path / "e.npy", "--ids", tmp_path / "e.ids", "--chunk", 2)
    one_line_error(result, f"{tmp_path / 'e.npy'}: the embedding of candidate d3 (row 3) holds NaN or inf: the model "
                           f"gives no usable vector for it")
    assert not (tmp_path / "e.npy").exists() and not (tmp_path / "e.ids").exists()


def test_dense_search_names_the_query_whose_vector_is_nan_and_writes_no_run(tmp_path, tower):  # noqa: F811
    model, tok = tower
    model = copy.deepcopy(model)
    model.encoder.embeddings.word_embeddings.weight.data[tok.convert_tokens_to_ids("x")] = float("nan")
    TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                           "doc_length": 32, "doc_text": "sentence"}).save(tmp_path / "m", tok)
    np.save(tmp_path / "e.npy", np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32))
    (tmp_path / "e.ids").write_text("d0\nd1\nd2\nd3\n")
    assert run_stage("build-index", "--embeddings", tmp_path / "e.npy", "--factory", "Flat", "--out",
                     tmp_path / "i.faiss").returncode == 0
    (tmp_path / "q.tsv").write_text(f"q1\t{TEXTS[0]}\nq2\tx\n")
    result = run_stage("dense-search", "--model", tmp_path / "m", "--index", tmp_path / "i.faiss", "--ids",
                       tmp_path / "e.ids", "--queries", tmp_path / "q.tsv", "--run", tmp_path / "r.trec", "--depth", 2)
    one_line_error(result, f"{tmp_path / 'm'}: the query tower gives NaN or inf for query q2: no usable vector to "
                           f"search with")
    assert not (tmp_path / "r.trec").exists()


# ---- runs and qrels read by the stages: evaluation, fusion, reranking

def judged(tmp_path, run_lines, qrels_lines=("q1 0 d1 1", "q2 0 d3 1")):
    (tmp_path / "run.trec").write_text("".join(line + "\n" for line in run_lines))
    (tmp_path / "qrels.txt").write_text("".join(line + "\n" for line in qrels_lines))
    (tmp_path / "test.tsv").write_text("q1\tfirst\nq2\tsecond\n")
    return run_stage("evaluate", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt", "--queries",
                     tmp_path / "test.tsv", "--metrics", "R@1", "RR@10", "--out", tmp_path / "e.json")


CLEAN = ["q1 Q0 d1 1 2.0 t", "q1 Q0 d2 2 1.0 t", "q2 Q0 d3 1 2.0 t", "q2 Q0 d4 2 1.0 t"]


def test_evaluate_refuses_a_nan_score_a_repeated_document_and_a_pair_judged_twice(tmp_path):
    assert judged(tmp_path, CLEAN).returncode == 0
    assert json.loads((tmp_path / "e.json").read_text())["metrics"] == {"R@1": 1.0, "RR@10": 1.0}
    (tmp_path / "e.json").unlink()
    run = tmp_path / "run.trec"
    one_line_error(judged(tmp_path, CLEAN[:2] + ["q2 Q0 d3 1 nan t"] + CLEAN[3:]),
                   f"{run}: line 3: score nan of document d3 for query q2 is not a finite number")
    one_line_error(judged(tmp_path, CLEAN + ["q1 Q0 d1 3 0.5 t"]), f"{run}: line 5: document d1 appears twice for query q1")
    one_line_error(judged(tmp_path, CLEAN, ["q1 0 d1 1", "q2 0 d3 1", "q1 0 d1 0"]),
                   f"{tmp_path / 'qrels.txt'}: line 3: document d1 is judged twice for query q1 (1 and 0)")
    assert not (tmp_path / "e.json").exists()


def test_fusion_and_reranking_refuse_them_too(tmp_path):
    good, bad = tmp_path / "good.trec", tmp_path / "bad.trec"
    good.write_text("".join(line + "\n" for line in CLEAN))
    bad.write_text("".join(line + "\n" for line in CLEAN + ["q2 Q0 d3 3 0.5 t"]))
    result = run_stage("fuse-runs", "--runs", good, bad, "--method", "rrf", "--out", tmp_path / "f.trec")
    one_line_error(result, f"{bad}: line 5: document d3 appears twice for query q2")
    bad.write_text("".join(line + "\n" for line in CLEAN[:1] + ["q1 Q0 d2 2 -inf t"] + CLEAN[2:]))
    (tmp_path / "q.tsv").write_text("q1\tfirst\nq2\tsecond\n")
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": "x"}) + "\n" for i in range(5)))
    result = run_stage("rerank", "--scores", bad, "--run", good, "--candidates", tmp_path / "c.jsonl", "--queries",
                       tmp_path / "q.tsv", "--depth", 2, "--out", tmp_path / "r.trec")
    one_line_error(result, f"{bad}: line 2: score -inf of document d2 for query q1 is not a finite number")
    assert not (tmp_path / "f.trec").exists() and not (tmp_path / "r.trec").exists()
