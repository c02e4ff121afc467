"""The expected-value check (towers.verdicts.checks) on hand-made cells: each status, both directions, and the line that
names a failing cell (the end-to-end version, a changed learning rate failing `snakemake check`, is in
test_workflow.py under make test-extended)."""
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


def test_check_status_reads_the_check_and_leaves_its_record(tmp_path):
    """check-status only reads results/check.csv: the record the check stage wrote beside it stays."""
    from conftest import run_stage

    csv = tmp_path / "check.csv"
    pd.DataFrame({"table": ["t"], "row": ["r"], "column": ["c"], "status": ["OK"]}).to_csv(csv, index=False)
    (tmp_path / "check.csv.meta.json").write_text("{}")
    done = run_stage("check-status", "--csv", str(csv))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "check.csv.meta.json").exists()
    pd.DataFrame({"table": ["t"], "row": ["r"], "column": ["c"], "status": ["FAIL"]}).to_csv(csv, index=False)
    assert run_stage("check-status", "--csv", str(csv)).returncode == 1


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
    assert both.loc["a", "basis"] == "spread over 2 builds on different machines"
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
