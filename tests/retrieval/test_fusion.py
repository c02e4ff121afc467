"""Run fusion (RepBERT eq. 6, RRF, CombSUM) and the consistency factor (RepBERT eq. 5), as functions and stages."""
import json

import pytest
from conftest import run_stage

from towers.io import StageError, read_run, write_run
from towers.retrieval.fusion import alternating_merge, combsum, consistency_factor, fuse, reciprocal_rank_fusion


def ranking(*docs):
    """A ranking with descending placeholder scores."""
    return [(d, float(len(docs) - i)) for i, d in enumerate(docs)]


def docs(run, qid="q"):
    return [d for d, _ in run[qid]]


def assert_one_line_error(result, expected):
    assert result.returncode == 1
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert "Traceback" not in result.stderr
    assert lines[-1] == f"error: {expected}", result.stderr


# --- alternating merge (eq. 6) -------------------------------------------------------------------

def test_the_papers_example():
    fused = alternating_merge([{"q": ranking("a", "c", "d")}, {"q": ranking("b", "a", "c")}], depth=3, truncate=False)
    assert fused == {"q": [("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)]}


def test_truncation_and_the_union():
    runs = [{"q": ranking("a", "b", "c")}, {"q": ranking("d", "e", "f")}]
    assert docs(alternating_merge(runs, depth=3)) == ["a", "d", "b"]
    assert docs(alternating_merge(runs, depth=3, truncate=False)) == ["a", "d", "b", "e", "c", "f"]   # 2 x depth
    # only each run's top `depth` is merged: 'd' (rank 3 of the first run) is not in the union at depth 2
    runs = [{"q": ranking("a", "c", "d")}, {"q": ranking("b", "a", "c")}]
    assert docs(alternating_merge(runs, depth=2, truncate=False)) == ["a", "b", "c"]


def test_run_order_matters():
    a, b = {"q": ranking("x", "y", "z")}, {"q": ranking("y", "w", "x")}
    assert docs(alternating_merge([a, b])) == ["x", "y", "w", "z"]
    assert docs(alternating_merge([b, a])) == ["y", "x", "w", "z"]


def test_three_runs_and_a_query_one_run_lacks():
    runs = [{"q": ranking("a", "b"), "p": ranking("m")}, {"q": ranking("c", "a")}, {"q": ranking("b", "d")}]
    fused = alternating_merge(runs)
    assert docs(fused) == ["a", "c", "b", "d"] and docs(fused, "p") == ["m"]
    assert [s for _, s in fused["q"]] == [4.0, 3.0, 2.0, 1.0]


# --- reciprocal rank fusion and CombSUM ----------------------------------------------------------

def test_rrf_by_hand():
    runs = [{"q": ranking("x", "y", "z")}, {"q": ranking("y", "w")}]
    # k = 1: x 1/2, y 1/3 + 1/2 = 5/6, z 1/4, w 1/3
    fused = reciprocal_rank_fusion(runs, k=1)
    assert docs(fused) == ["y", "x", "w", "z"]
    assert [s for _, s in fused["q"]] == pytest.approx([5 / 6, 1 / 2, 1 / 3, 1 / 4])
    # k = 60, depth 2: z (rank 3) is not read; y 1/62 + 1/61, x 1/61, w 1/62, and the output is cut to 2
    fused = reciprocal_rank_fusion(runs, depth=2)
    assert docs(fused) == ["y", "x"]
    assert [s for _, s in fused["q"]] == pytest.approx([1 / 62 + 1 / 61, 1 / 61])


def test_rrf_ties_go_by_doc_id():
    runs = [{"q": ranking("b", "a", "c")}, {"q": ranking("a", "b", "d")}, {"q": ranking("c", "d")}]
    # a = b = 1/61 + 1/62 (a tie: a first, though b leads the first run); c 1/61 + 1/63; d 1/62 + 1/63
    assert docs(reciprocal_rank_fusion(runs)) == ["a", "b", "c", "d"]
    assert docs(reciprocal_rank_fusion(runs[::-1])) == ["a", "b", "c", "d"]


def test_combsum_by_hand():
    runs = [{"q": [("x", 10.0), ("y", 6.0), ("z", 2.0)]}, {"q": [("y", 0.9), ("w", 0.5), ("x", 0.1)]}]
    # min-max: first run x 1, y 0.5, z 0; second y 1, w 0.5, x 0; w missing from the first counts 0
    assert combsum(runs) == {"q": [("y", 1.5), ("x", 1.0), ("w", 0.5), ("z", 0.0)]}
    # none: raw sums x 10.1, y 6.9, z 2, w 0.5
    fused = combsum(runs, "none")
    assert docs(fused) == ["x", "y", "z", "w"]
    assert [s for _, s in fused["q"]] == pytest.approx([10.1, 6.9, 2.0, 0.5])
    # z-score: each run is (+1.2247, 0, -1.2247) (sqrt(3/2), population deviation); x and w sum to 0
    fused = dict(combsum(runs, "zscore")["q"])
    assert fused == pytest.approx({"y": 1.5 ** 0.5, "x": 0.0, "w": 0.0, "z": -(1.5 ** 0.5)})


def test_combsum_ties_and_equal_scores():
    runs = [{"q": [("b", 2.0), ("a", 1.0)]}, {"q": [("a", 2.0), ("b", 1.0)]}]
    assert combsum(runs) == {"q": [("a", 1.0), ("b", 1.0)]}   # tied at 1 + 0: by doc id
    # one doc (max = min): it counts fully, like a run's best
    assert combsum([{"q": [("a", 3.0)]}, {"q": [("b", 7.0), ("a", 5.0)]}]) == {"q": [("a", 1.0), ("b", 1.0)]}


def test_bad_arguments():
    with pytest.raises(StageError, match="at least two runs"):
        alternating_merge([{"q": ranking("a")}])
    with pytest.raises(StageError, match="unknown fusion method 'borda'"):
        fuse([{}, {}], "borda")
    with pytest.raises(StageError, match="unknown normalisation 'l2'"):
        combsum([{}, {}], "l2")
    with pytest.raises(StageError, match="--depth: must be at least 1"):
        reciprocal_rank_fusion([{}, {}], depth=0)


# --- consistency factor (eq. 5) ------------------------------------------------------------------

def test_consistency_factor_by_hand():
    run = {"q1": ranking("a", "b", "c"), "q2": ranking("d", "e", "f")}
    reference = {"q1": ranking("b", "a", "x"), "q2": ranking("e", "z", "f")}   # top 2: {a, b} and {e, z}
    # q1: 1/1, 2/2, 2/3; q2: 0/1, 1/2, 1/3 (f is below the reference depth)
    assert consistency_factor(run, reference, [1, 2, 3], reference_depth=2) == pytest.approx(
        {1: 0.5, 2: 0.75, 3: 0.5})
    # whole reference at depth 3: q1 {a, b, c} & {b, a, x} = 2/3; q2 {d, e, f} & {e, z, f} = 2/3
    assert consistency_factor(run, reference, [3])[3] == pytest.approx((2 / 3 + 2 / 3) / 2)


def test_consistency_factor_missing_and_empty_queries():
    run = {"q1": ranking("a", "b"), "q2": ranking("c"), "q3": []}
    reference = {"q1": ranking("a")}
    # q2 is not in the reference (0); q3 has no documents (skipped); q2 has 1 doc at every depth
    assert consistency_factor(run, reference, [1, 2]) == pytest.approx({1: 0.5, 2: 0.25})


# --- stages --------------------------------------------------------------------------------------

def write_runs(tmp_path):
    a, b = tmp_path / "a.trec", tmp_path / "b.trec"
    write_run(a, {"q1": ranking("a", "c", "d"), "q2": ranking("x", "y")}, "A")
    write_run(b, {"q1": ranking("b", "a", "c"), "q2": ranking("y", "x")}, "B")
    return a, b


def test_fuse_runs_stage(tmp_path):
    a, b = write_runs(tmp_path)
    out = tmp_path / "fused" / "alt.trec"
    result = run_stage("fuse-runs", "--runs", a, b, "--method", "alternate", "--depth", 3, "--no-truncate",
                       "--out", out)
    assert result.returncode == 0, result.stderr
    assert docs(read_run(out), "q1") == ["a", "b", "c", "d"] and docs(read_run(out), "q2") == ["x", "y"]
    assert out.read_text().splitlines()[0] == "q1 Q0 a 1 4.000000 fused-alternate"
    meta = json.loads(out.with_name("alt.trec.meta.json").read_text())
    assert meta["stage"] == "fuse-runs" and meta["counts"] == {"runs": 2, "queries": 2, "documents": 6}

    # RRF ties (q2: x and y both 1/61 + 1/62 = 0.0325225) are written with strictly decreasing scores
    out = tmp_path / "rrf.trec"
    result = run_stage("fuse-runs", "--runs", a, b, "--method", "rrf", "--tag", "mine", "--out", out)
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in out.read_text().splitlines() if line.startswith("q2")]
    assert [(r[2], r[4], r[5]) for r in rows] == [("x", "0.032522", "mine"), ("y", "0.032521", "mine")]


def test_consistency_stage(tmp_path):
    a, b = write_runs(tmp_path)
    out = tmp_path / "consistency.json"
    result = run_stage("consistency", "--run", a, "--reference", b, "--depths", 1, 3, "--reference-depth", 1,
                       "--out", out)
    assert result.returncode == 0, result.stderr
    # reference top 1: q1 {b}, q2 {y}; depth 1: a, x -> 0; depth 3: {a, c, d} 0/3, {x, y} 1/2
    assert json.loads(out.read_text()) == {"depths": {"1": 0.0, "3": 0.25}, "queries": 2,
                                           "per_query": {"1": {"q1": 0.0, "q2": 0.0}, "3": {"q1": 0.0, "q2": 0.5}}}


def test_fuse_runs_with_bad_input_leaves_nothing(tmp_path):
    a, b = write_runs(tmp_path)
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 a 1 0.5\n")
    out = tmp_path / "out.trec"
    before = sorted(tmp_path.iterdir())
    result = run_stage("fuse-runs", "--runs", a, bad, "--method", "rrf", "--out", out)
    assert_one_line_error(result, f"{bad}: line 1 is not 'qid Q0 docid rank score tag'")
    result = run_stage("fuse-runs", "--runs", a, tmp_path / "nope.trec", "--method", "combsum", "--out", out)
    assert_one_line_error(result, f"{tmp_path / 'nope.trec'}: input file is missing")
    result = run_stage("fuse-runs", "--runs", a, "--method", "alternate", "--out", out)
    assert_one_line_error(result, "--runs: fusion needs at least two runs, not 1")
    result = run_stage("fuse-runs", "--runs", a, b, "--method", "rrf", "--no-truncate", "--out", out)
    assert_one_line_error(result, "--no-truncate: applies to --method alternate only, not rrf")
    assert sorted(tmp_path.iterdir()) == before
