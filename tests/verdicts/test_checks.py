"""The expected-value check (towers.verdicts.checks) on hand-made cells: each status, both directions, and the line that
names a failing cell (the end-to-end version, a changed learning rate failing `snakemake check`, is in
test_workflow.py under make test-extended)."""
import math

import numpy as np
import pandas as pd
import pytest

from towers.verdicts import checks
from towers.verdicts.cells import cell


def _cells(values: dict) -> dict:
    return {"ltre/table1": [cell({"key": key}, "RR@10", value) for key, value in values.items()]}


@pytest.fixture
def expected():
    built = checks.expected_values(_cells({"a": 0.30, "b": 0.30, "c": 0.30, "d": 0.30, "gone": 0.30}), "exact", 3.0)
    built["tolerance"] = 0.02   # as a mini profile's file would hold it
    return built


def test_each_status_and_both_directions(expected):
    report = checks.check(_cells({"a": 0.31, "b": 0.329, "c": 0.25, "d": 0.36, "new": 0.1}), expected)
    status = dict(zip(report["row"], report["status"]))
    assert status == {"key=a": "OK", "key=b": "OKish", "key=c": "FAIL", "key=d": "FAIL", "key=new": "NEW",
                      "key=gone": "MISSING"}
    failed = checks.failures(report)
    assert sorted(failed["row"]) == ["key=c", "key=d", "key=gone"]   # a rise fails as a drop does
    lines = [checks.line(row) for _, row in failed.iterrows()]
    assert "[FAIL] ltre/table1 [key=c] RR@10: 0.25 vs expected 0.3 (-0.05, lower; tolerance 0.02)" in lines
    assert "[FAIL] ltre/table1 [key=d] RR@10: 0.36 vs expected 0.3 (+0.06, higher; tolerance 0.02)" in lines
    assert "[MISSING] ltre/table1 [key=gone] RR@10: expected 0.3, not in the tables" in lines
    assert checks.summary(report) == "1 OK, 1 OKish, 2 FAIL, 1 MISSING, 1 NEW"


def test_an_exact_basis_allows_only_float_noise():
    built = checks.expected_values(_cells({"a": 0.3}), "exact", 3.0)
    assert built["tolerance"].tolist() == [pytest.approx(1e-6)]
    assert checks.check(_cells({"a": 0.3 + 5e-7}), built)["status"].tolist() == ["OK"]
    assert checks.check(_cells({"a": 0.3 + 1e-4}), built)["status"].tolist() == ["FAIL"]


def test_a_cell_without_a_tolerance_is_shown_not_judged(expected):
    expected.loc[expected["row"] == "key=a", "tolerance"] = float("nan")
    report = checks.check(_cells({"a": 0.9}), expected)
    assert report.set_index("row").loc["key=a", "status"] == "--"
    assert isinstance(report, pd.DataFrame)


def test_check_reads_the_cells_check_and_leaves_its_record(tmp_path):
    """check only reads results/check.csv: the record the check-cells stage wrote beside it stays."""
    from conftest import run_stage

    csv = tmp_path / "check.csv"
    pd.DataFrame({"table": ["t"], "row": ["r"], "column": ["c"], "status": ["OK"]}).to_csv(csv, index=False)
    (tmp_path / "check.csv.meta.json").write_text("{}")
    done = run_stage("check", "--csv", str(csv))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "check.csv.meta.json").exists()
    pd.DataFrame({"table": ["t"], "row": ["r"], "column": ["c"], "status": ["FAIL"]}).to_csv(csv, index=False)
    assert run_stage("check", "--csv", str(csv)).returncode == 1


def _expected(rows) -> pd.DataFrame:
    return pd.DataFrame([dict(zip(["table", "row", "column", "kind", "expected", "tolerance", "basis"], r)) for r in rows],
                        columns=checks.COLUMNS)


def test_builds_on_two_machines_centre_each_cell_between_them_and_cover_their_range():
    avx2 = _expected([("t", "a", "RR@10", "metric", 0.060, 0.01, "bootstrap over 60 steps"),
                      ("t", "b", "RR@10", "metric", 0.500, 0.03, "bootstrap over 60 steps"),
                      ("t", "c", "pairs", "count", 10.0, 1e-6, "exact: deterministic"),
                      ("t", "only", "RR@10", "metric", 0.2, 0.01, "bootstrap over 60 steps")])
    avx512 = _expected([("t", "a", "RR@10", "metric", 0.092, 0.012, "bootstrap over 60 steps"),
                        ("t", "b", "RR@10", "metric", 0.510, 0.02, "bootstrap over 60 steps"),
                        ("t", "c", "pairs", "count", 10.0, 1e-6, "exact: deterministic")])
    both = checks.across_builds([avx2, avx512]).set_index("row")
    assert both.loc["a", "expected"] == pytest.approx(0.076) and both.loc["a", "tolerance"] == pytest.approx(0.032)
    assert both.loc["a", "basis"] == "spread over 2 builds (other vector kernels or inference precision)"
    assert both.loc["b", "expected"] == pytest.approx(0.505) and both.loc["b", "tolerance"] == 0.03   # theirs is wider
    assert both.loc["b", "basis"] == "bootstrap over 60 steps"
    assert both.loc["c", "expected"] == 10.0 and both.loc["only", "expected"] == 0.2
    # each build, checked against the combination, passes every cell
    for build in (avx2, avx512):
        for r in build.itertuples():
            assert checks.status(r.expected - both.loc[r.row, "expected"], both.loc[r.row, "tolerance"]) == "OK"


def test_a_count_that_differs_between_builds_is_refused():
    one = _expected([("t", "c", "pairs", "count", 10.0, 1e-6, "exact: deterministic")])
    other = _expected([("t", "c", "pairs", "count", 11.0, 1e-6, "exact: deterministic")])
    with pytest.raises(ValueError, match="t, c, pairs: a count that differs"):
        checks.across_builds([one, other])


def test_a_trajectory_that_another_seed_moves_is_held_to_the_seeds_spread():
    build = _expected([("f", "async", "R@200", "metric", 0.10, 0.01, "bootstrap over 60 steps"),
                       ("f", "ltre", "R@200", "metric", 0.90, 0.05, "bootstrap over 60 steps"),
                       ("f", "ltre", "steps", "count", 300.0, 1e-6, "exact: deterministic"),
                       ("t", "other", "R@1", "metric", 0.3, 0.02, "bootstrap over 700 queries")])
    seeds = [_expected([("f", "async", "R@200", "metric", v, 0.01, "x"), ("f", "ltre", "R@200", "metric", w, 0.01, "x"),
                        ("f", "ltre", "steps", "count", 300.0, 1e-6, "x")]) for v, w in ((0.20, 0.91), (0.30, 0.89))]
    wide = checks.across_seeds(build, seeds, builds=2).set_index("row")
    sd = float(np.std([0.10, 0.20, 0.30], ddof=1))
    assert wide.loc["async", "tolerance"] == pytest.approx(2 * sd * math.sqrt(1.5), abs=1e-6)
    assert wide.loc["async", "basis"] == "spread over 3 seeds"
    assert wide.loc["ltre", "tolerance"].tolist() == [0.05, 1e-6]           # its own is wider; a count stays exact
    assert wide.loc["other", "tolerance"] == 0.02                            # a cell no seed holds is as it was
    with pytest.raises(ValueError, match="fewer than three seeds"):
        checks.across_seeds(build, seeds[:1])


# --- an expected-values file the check cannot judge by is refused, naming the file and the cell ---------------

HEADER = ",".join(checks.COLUMNS)


@pytest.mark.parametrize("rows, problem", [
    (["t,a,R@1,metric,nan,0.1,x"], "line 2, cell t [a] R@1: expected 'nan' is not a finite number"),
    (["t,a,R@1,metric,0.3,0.1,x", "t,b,R@1,metric,0.3,nan,x"], "line 3, cell t [b] R@1: tolerance 'nan' is not a"),
    (["t,a,R@1,metric,0.3,about 0.1,x"], "line 2, cell t [a] R@1: tolerance 'about 0.1' is not a finite number"),
    (["t,a,R@1,metric,inf,0.1,x"], "line 2, cell t [a] R@1: expected 'inf' is not a finite number"),
    (["t,a,R@1,metric,0.3,-0.02,x"], "line 2, cell t [a] R@1: tolerance -0.02 is negative"),
    (["t,a,R@1,metric,0.3,0.02,x", "t,b,R@1,metric,0.3,0.02,x", "t,a,R@1,metric,0.9,0.02,x"],
     "line 2, cell t [a] R@1 is listed again on line 4"),
])
def test_an_expected_value_the_check_cannot_use_is_refused(tmp_path, rows, problem):
    """Before: nan gave a TypeError mid-check; a negative tolerance FAILed every value and a cell listed twice
    was judged by its last row, both silently."""
    from towers.io import StageError

    path = tmp_path / "expected.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    with pytest.raises(StageError) as caught:
        checks.read_expected(path)
    assert str(caught.value).startswith(f"{path}: {problem}")


def test_an_empty_expected_value_or_tolerance_is_none_and_numbers_are_floats(tmp_path):
    path = tmp_path / "expected.csv"
    path.write_text(f"{HEADER}\nt,a,s,timing,12.5,,not checked\nt,b,R@1,metric,,,no value\nt,c,R@1,metric,1,0,x\n")
    frame = checks.read_expected(path)
    assert frame["expected"].dtype == frame["tolerance"].dtype == float
    assert frame["expected"].tolist()[::2] == [12.5, 1.0] and frame["tolerance"].tolist()[2] == 0.0
    assert frame[["expected", "tolerance"]].isna().values.tolist() == [[False, True], [True, True], [False, False]]


# --- the cells come from the tables: a record edited by hand is refused, not judged ---------------------------

def _zeroshot(tmp_path):
    """A real table: two runs evaluated and tabled by the zero-shot stage, its expected values, a claim on it."""
    import json

    from conftest import ROOT, run_stage

    (tmp_path / "qrels.txt").write_text("".join(f"q{q} 0 d{q} 1\n" for q in range(8)))
    (tmp_path / "test.tsv").write_text("".join(f"q{q}\tquestion {q}\n" for q in range(8)))
    rows = []
    for name, found in (("good", 6), ("bad", 2)):
        run = tmp_path / f"{name}.trec"
        run.write_text("".join(f"q{q} Q0 d{q if q < found else 99} 1 1.0 {name}\n" for q in range(8)))
        assert run_stage("evaluate", "--run", run, "--qrels", tmp_path / "qrels.txt", "--queries", tmp_path / "test.tsv",
                         "--metrics", "R@1", "--out", tmp_path / f"{name}.json").returncode == 0
        rows += ["--row", json.dumps({"model": name, "label": name, "caveat": "", "eval": str(tmp_path / f"{name}.json")})]
    table = tmp_path / "results/t.csv"
    published = json.dumps({"model": "good", "metric": "R@1", "value": "0.7", "source": "x"})
    built = run_stage("zeroshot-table", "--table", "d", "--profile", "tiny", "--note", "n", "--option", "split=s",
                      "--option", "metrics=R@1", *rows, "--option", f"published={published}",
                      "--csv", table, "--json", tmp_path / "results/t.json")
    assert built.returncode == 0, built.stderr[-2000:]
    assert run_stage("expected", "--table", f"t={table}", "--basis", "exact", "--out",
                     tmp_path / "expected.csv").returncode == 0
    claims = tmp_path / "p.claims.yaml"
    claims.write_text(json.dumps({"paper": "p", "title": "t", "claims": [
        {"id": "p-1", "source": "s", "statement": "good beats bad", "table": "t", "metrics": ["R@1"],
         "higher": {"model": "good"}, "lower": {"model": "bad"}}]}))

    def check():
        return run_stage("check-cells", "--table", f"t={table}", "--expected", tmp_path / "expected.csv",
                         "--csv", tmp_path / "check.csv")

    def verdicts():
        return run_stage("claims", "--claims", claims, "--schema", ROOT / "workflow/schemas/claims.schema.yaml",
                         "--table", f"t={table}", "--profile", "tiny", "--csv", tmp_path / "claims.csv",
                         "--json", tmp_path / "claims.json")

    return table, check, verdicts


def _edit_cell(record, field, value):
    import json

    meta = json.loads(record.read_text())
    meta["cells"][0][field] = value   # good's R@1: 0.75 in the table (printed 0.7500 beside the published 0.7)
    record.write_text(json.dumps(meta))


def _one_line(result) -> str:
    text = result.stderr.strip()
    assert result.returncode == 1 and "Traceback" not in text and "\n" not in text, text[-2000:]
    return text


def test_check_and_claims_refuse_a_record_whose_cells_disagree_with_its_table(tmp_path):
    table, check, verdicts = _zeroshot(tmp_path)
    assert check().returncode == 0 and verdicts().returncode == 0
    record = tmp_path / "results/t.csv.meta.json"
    _edit_cell(record, "value", 0.5)   # before: check FAILed this cell, the table still showing 0.75
    expected = (f"error: {record}: cell [model=good] R@1 is 0.5 here but 0.7500 in {table}; the record was edited or "
                "is stale: rebuild the table")
    assert _one_line(check()) == expected
    assert _one_line(verdicts()) == expected
    _edit_cell(record, "value", 0.75)
    _edit_cell(record, "paper", 0.9)   # the paper profile's check reads paper values as the expected ones
    assert _one_line(check()) == (f"error: {record}: cell [model=good] R@1 has paper value 0.9 here but 0.7000 in "
                                  f"{table}; the record was edited or is stale: rebuild the table")
    _edit_cell(record, "paper", 0.7)
    _edit_cell(record, "row", {"model": "best"})
    assert _one_line(check()).startswith(f"error: {record}: cell [model=best] R@1 is not in {table}; ")
    _edit_cell(record, "row", {"model": "good"})
    assert check().returncode == 0
    # the per-query values come from the evaluations the record names, each as its stage wrote it
    from towers.verdicts import cells

    cells._SAMPLES.clear()   # (cached in this test process; a stage's own process starts without)
    evaluation = tmp_path / "bad.json"
    was = evaluation.read_text()
    evaluation.write_text(was.replace('"R@1": 0.0', '"R@1": 1.0'))
    assert evaluation.read_text() != was
    assert _one_line(verdicts()).startswith(f"error: {evaluation}: changed after stage evaluate wrote it")


def test_the_check_stage_names_an_expected_nan_in_one_line(tmp_path):
    table, check, _ = _zeroshot(tmp_path)
    expected = tmp_path / "expected.csv"
    rows = expected.read_text().splitlines()
    header = rows[0].split(",")
    first = dict(zip(header, rows[1].split(",")))   # (no commas inside these cells)
    rows[1] = rows[1].replace(f",{first['expected']},", ",nan,", 1)
    expected.write_text("\n".join(rows) + "\n")
    (tmp_path / "expected.csv.meta.json").unlink()   # edited by hand, as data/expected/mini.csv is kept
    assert _one_line(check()) == (f"error: {expected}: line 2, cell {first['table']} [{first['row']}] "
                                  f"{first['column']}: expected 'nan' is not a finite number "
                                  "(leave it empty for none)")
    assert not (tmp_path / "check.csv").exists()


def test_long_tables_and_step_windows_are_checked_too(tmp_path):
    """Figures are long tables (a measure column, a value column); LTRe Figure 3's window means are not in its CSV
    (it holds the smoothed curves) and are checked against the step log they average."""
    import json

    from towers.io import StageError
    from towers.verdicts.cells import cell, load_cells

    figure = tmp_path / "figure.csv"
    figure.write_text("method,depth,value,panel,measure\nA,1,0.5,p,recall\nA,5,0.75,p,recall\nA,1,0.25,q,MRR@10\n")
    cells = [cell({"method": "A", "depth": 1}, "recall", 0.5), cell({"method": "A", "depth": 5}, "recall", 0.75),
             cell({"method": "A", "depth": 1}, "MRR@10", 0.25)]
    record = tmp_path / "figure.csv.meta.json"
    record.write_text(json.dumps({"cells": cells}))
    assert len(load_cells({"f": figure})["f"]) == 3
    cells[2]["value"] = 0.5
    record.write_text(json.dumps({"cells": cells}))
    with pytest.raises(StageError, match=r"cell \[method=A; depth=1\] MRR@10 is 0.5 here but 0.25 in "):
        load_cells({"f": figure})
    log = tmp_path / "steps.jsonl"
    log.write_text("".join(json.dumps({"step": s, "mrr": s / 100}) + "\n" for s in range(1, 11)))
    curve = tmp_path / "curve.csv"
    curve.write_text("method,step,value,panel,measure\nltre,1,0.01,p,MRR@10\n")
    steps = [cell({"method": "ltre", "window": w}, "MRR@10", value,
                  samples={"kind": "steps", "file": str(log), "field": "mrr", "window": w})
             for w, value in (("first", 0.015), ("last", 0.095))]
    (tmp_path / "curve.csv.meta.json").write_text(json.dumps({"cells": steps}))
    assert len(load_cells({"c": curve})["c"]) == 2
    steps[1]["value"] = 0.2
    (tmp_path / "curve.csv.meta.json").write_text(json.dumps({"cells": steps}))
    with pytest.raises(StageError, match=r"window=last\] MRR@10 is 0.2 here but 0.095 in its step log .*steps.jsonl"):
        load_cells({"c": curve})


def test_a_tables_note_says_the_smallest_difference_its_queries_resolve(tmp_path):
    import math

    import numpy as np

    from towers.verdicts.significance import DETECTABLE_Z, detectable_differences, power_note

    rng = np.random.default_rng(0)
    files = []
    for name in ("a", "b", "c"):
        values = {f"q{i}": float(v) for i, v in enumerate(rng.integers(0, 2, 100))}
        path = tmp_path / f"{name}.json"
        path.write_text(__import__("json").dumps({"per_query": {q: {"R@1": v} for q, v in values.items()}}))
        files.append((path, values))
    cells = [{"row": {"model": n}, "column": "R@1", "kind": "metric", "value": 0.0,
              "samples": {"kind": "queries", "files": [str(p)], "measure": "R@1", "scale": 100}} for n, (p, _) in
             zip("abc", files)]
    spreads = sorted(np.std([100 * (x[q] - y[q]) for q in x], ddof=1)
                     for (_, x), (_, y) in [(files[0], files[1]), (files[0], files[2]), (files[1], files[2])])
    found = detectable_differences(cells)
    # the most and the least alike pair of rows: the paired SD of the dissimilar pair is not averaged away
    low, high = (DETECTABLE_Z * spread / math.sqrt(100) for spread in (spreads[0], spreads[-1]))
    assert found["R@1"] == {100: (pytest.approx(low), pytest.approx(high))} and low < high
    note = power_note(cells)
    assert f"R@1 {low:.2g} to {high:.2g} at 100" in note and "paired SD" in note and "median" not in note
    # a row with the same per-query values as another has nothing to detect: it widens nothing
    twin = {**cells[0], "row": {"model": "a again"}}
    assert detectable_differences([*cells, twin]) == found
    # rows on other queries (another split) are never paired; a count has no per-query values
    other = {**cells[2], "samples": {**cells[2]["samples"], "files": [str(tmp_path / "d.json")]}}
    (tmp_path / "d.json").write_text('{"per_query": {"x1": {"R@1": 1}, "x2": {"R@1": 0}}}')
    assert detectable_differences([cells[0], other]) == {} and power_note([cells[0], other]) == ""
    assert power_note([{"row": {}, "column": "pairs", "kind": "count", "value": 3}]) == ""


def test_detectable_is_two_point_eight_paired_sds_over_the_root_of_the_count():
    import math

    from towers.verdicts.significance import detectable

    # differences 1, 0, 0, 1: mean 0.5, paired SD sqrt((4 * 0.25) / 3) = sqrt(1/3), over sqrt(4) = 2
    assert detectable([1.0, 0.0, 0.0, 1.0]) == pytest.approx((1.959964 + 0.841621) * math.sqrt(1 / 3) / 2)
    assert detectable([0.3, 0.3, 0.3]) == 0.0 and detectable([1.0]) is None


def test_clustered_se_by_hand():
    import math

    import numpy as np

    from towers.verdicts.significance import DETECTABLE_Z, clustered_se, detectable, detectable_clustered

    # d = 1, 2 | 0, 3 | -1, 2 in articles A, B, C: mean 7/6; residual sums per article 4/6, 4/6, -8/6, squares
    # summing to 96/36 = 8/3; CR1 SE = sqrt(G / (G - 1) * 8/3) / n = sqrt(3/2 * 8/3) / 6 = 1/3
    d, articles = [1.0, 2.0, 0.0, 3.0, -1.0, 2.0], ["A", "A", "B", "B", "C", "C"]
    assert clustered_se(d, articles) == pytest.approx(1 / 3)
    assert detectable_clustered(d, articles) == pytest.approx(DETECTABLE_Z / 3)
    # every question its own article: the paired SD over the root of n, as unclustered
    assert clustered_se(d, list("abcdef")) == pytest.approx(np.std(d, ddof=1) / math.sqrt(6))
    assert detectable_clustered(d, list("abcdef")) == pytest.approx(detectable(d))
    # questions of one article won and lost together count for less than as many independent ones
    together = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    grouped = [g for g in "ABCD" for _ in range(3)]
    assert detectable_clustered(together, grouped) > detectable(together)
    assert detectable_clustered(d, ["A"] * 6) is None   # one article: no spread between articles to read
