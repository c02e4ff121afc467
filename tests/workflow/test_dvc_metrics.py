"""Metrics files hold numbers: `dvc metrics diff` between two commits prints numbers only, while a table's note,
context and labels stay in its stage record (`<table>.csv.meta.json`), where dvc does not read them."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from towers.reports.common import write_metrics

from conftest import ROOT, run_stage

PAPER = ROOT / "data" / "papers" / "chang2020_table2.csv"
DVC = Path(sys.executable).with_name("dvc")   # the venv's dvc


def sh(cwd, *args) -> str:
    done = subprocess.run(list(map(str, args)), cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    return done.stdout


def leaves(value, key=""):
    """(dotted key, value) of every value that is not an object."""
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in leaves(v, f"{key}.{k}" if key else k)]
    return [(key, value)]


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def build_table(repo: Path, queries: int, note: str):
    """Chang et al.'s Table 2 through its stage (stages.tables.write_table), its twin where dvc.yaml lists it."""
    stats = repo / "stats.json"
    stats.write_text(json.dumps({"queries": queries, "candidates": 3, "tuples": queries, "avg_query_tokens": 3.0,
                                 "avg_doc_tokens": 15.67}))
    row = json.dumps({"dataset": "enwiki-mini", "paper_dataset": "squad", "stats": str(stats)})
    done = run_stage("chang2020-table", "--table", "table2", "--paper", PAPER, "--profile", "mini", "--note", note, "--row", row,
                     "--csv", repo / "table2.csv", "--json", repo / "table2.json")
    assert done.returncode == 0, done.stderr[-2000:]


def commit(repo: Path, message: str):
    sh(repo, "git", "add", "-A")
    sh(repo, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def test_dvc_metrics_diff_between_two_commits_prints_numbers_only(tmp_path):
    sh(tmp_path, "git", "init", "-q")
    sh(tmp_path, DVC, "init", "-q")
    (tmp_path / "dvc.yaml").write_text("stages:\n  table2:\n    cmd: 'true'\n"
                                       "    metrics: [{table2.json: {cache: false}}]\n")
    build_table(tmp_path, 2, "first build's note, a long text")
    commit(tmp_path, "first")
    build_table(tmp_path, 5, "second build's note, another long text")
    commit(tmp_path, "second")

    diff = json.loads(sh(tmp_path, DVC, "metrics", "diff", "HEAD~1", "--all", "--json"))
    values = leaves(diff["table2.json"])   # metric.old, metric.new, metric.diff
    assert any(k.endswith("queries.new") and v == 5 for k, v in values), diff   # the diff is not empty
    assert all(is_number(v) for _, v in values), [(k, v) for k, v in values if not is_number(v)]
    printed = sh(tmp_path, DVC, "metrics", "diff", "HEAD~1", "--all", "--md")
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in printed.splitlines()
            if line.startswith("| table2.json")]
    assert rows and all(is_number(float(c)) for row in rows for c in row[2:]), printed   # before, after, change
    assert all(row[1].startswith("rows.") for row in rows) and "build's note" not in printed, printed
    record = json.loads((tmp_path / "table2.csv.meta.json").read_text())   # the text, where dvc does not look
    assert record["note"].startswith("second build's note") and record["context"]["profile"] == "mini"
    assert record["labels"] == {"table": "table2", "profile": "mini"}


def test_a_metrics_file_refuses_text(tmp_path):
    with pytest.raises(ValueError, match=r"numbers only, not note, rows\.a\.label"):
        write_metrics(tmp_path / "m.json", {"note": "words", "rows": {"a": {"R@1": 0.5, "label": "x"}}})
    with pytest.raises(ValueError, match=r"not rows\.a"):
        write_metrics(tmp_path / "m.json", {"rows": {"a": ["R@1"]}})
    assert not (tmp_path / "m.json").exists()
    write_metrics(tmp_path / "m.json", {"rows": {"a": {"R@1": 0.5, "train seconds": None, "queries": 3}}})
    assert json.loads((tmp_path / "m.json").read_text())["rows"]["a"]["queries"] == 3


def committed_metrics() -> list[str]:
    """The metrics files dvc.yaml lists, as DVC reads it (foreach stages expanded)."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        return sorted({out.def_path for stage in repo.index.stages for out in stage.outs if out.metric})


def test_every_committed_metrics_file_holds_numbers_only():
    listed = committed_metrics()
    assert "results/claims.json" in listed and "results/ltre/table3.json" in listed, listed
    for path in listed:
        values = json.loads((ROOT / path).read_text())
        wrong = [(k, v) for k, v in leaves(values) if not (v is None or is_number(v))]   # null: a cell without one
        assert isinstance(values, dict) and not wrong, f"{path}: {wrong[:3]}"
        record = json.loads((ROOT / (path[:-len(".json")] + ".csv.meta.json")).read_text())
        # the twin's text moved to the stage's record (towers.ops.ci paper-verdicts nests the claims stage's)
        assert "labels" in record or "labels" in record.get("rebuilt", {}), path
