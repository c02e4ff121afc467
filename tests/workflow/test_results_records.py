"""benchmarks/results.json as the benchmarks keep it (issue 68): two writers at once lose nothing, a broken file is
named in one line (where its JSON breaks) before anything is measured or written, an empty measurement is never
recorded. Every test works on a copy in tmp_path (workflow_harness.RESULTS pointed there), never the committed file."""
import json
import subprocess
import sys
import time

import pytest

from benchmarks import workflow_harness
from benchmarks.workflow_harness import ROOT

WRITER = """
import sys, time
from pathlib import Path
sys.path[:0] = [{root!r}, {src!r}]
from benchmarks import workflow_harness
workflow_harness.RESULTS = Path({results!r})
Path({go!r} + "-{name}").touch()
while not Path({go!r}).exists():   # both writers start together
    time.sleep(0.001)
for i in range(200):
    workflow_harness.record(("runs", f"{name}-{{i}}"), i)
"""


@pytest.fixture
def results(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"committed": {"value": 1}}, indent=2) + "\n")
    monkeypatch.setattr(workflow_harness, "RESULTS", path)
    return path


def test_two_benchmarks_writing_at_once_keep_every_key(tmp_path, results):
    """Unlocked, the second writer's read-modify-write wrote back the file as it was before the first's keys
    (195 of 400 lost): under the lock every key of both stays."""
    go = tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER.format(
        root=str(ROOT), src=str(ROOT / "src"), results=str(results), go=str(go), name=name)])
        for name in ("a", "b")]
    while not all(go.with_name(f"go-{name}").exists() for name in "ab"):   # both ready: then both go
        assert all(w.poll() is None for w in writers)
        time.sleep(0.01)
    go.touch()
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    kept = json.loads(results.read_text())
    assert kept["committed"] == {"value": 1}
    assert sorted(kept["runs"]) == sorted(f"{n}-{i}" for n in "ab" for i in range(200))
    assert not list(tmp_path.glob(".results.json.tmp*"))   # written through a temporary file, renamed into place


def test_a_broken_results_file_is_named_with_where_its_json_breaks(results):
    results.write_text('{"committed": {"value": 1},\n  "cut": ')
    with pytest.raises(SystemExit) as stopped:
        workflow_harness.record("x", {"a": 1})
    assert stopped.value.code == f"error: {results}: not valid JSON: Expecting value (line 2, column 10)"
    assert results.read_text() == '{"committed": {"value": 1},\n  "cut": '   # left as it was
    results.write_text("[1, 2]")
    with pytest.raises(SystemExit) as stopped:
        workflow_harness.read_results()
    assert stopped.value.code == f"error: {results}: not a JSON object of results (a list)"


def test_a_measurement_of_nothing_is_not_recorded(results):
    kept = results.read_text()
    for nothing in ({}, [], None):
        with pytest.raises(SystemExit) as stopped:
            workflow_harness.record("committed", nothing, replace=True)
        assert stopped.value.code == f"error: {results}: nothing measured for 'committed': not recorded"
    assert results.read_text() == kept


def test_an_entry_there_already_stays_unless_replaced(results):
    assert workflow_harness.record("committed", {"value": 2}) is False   # a committed number stays
    assert json.loads(results.read_text())["committed"] == {"value": 1}
    assert workflow_harness.record("committed", {"value": 2}, replace=True) is True   # replaced on purpose
    assert json.loads(results.read_text())["committed"] == {"value": 2}


def test_the_lock_file_is_ignored_by_git():
    done = subprocess.run(["git", "check-ignore", "-q", "benchmarks/results.json.lock"], cwd=ROOT)
    assert done.returncode == 0


def test_benchmarks_are_one_package_that_edits_no_import_path():
    """benchmarks/ is a package run as `python -m benchmarks.<name>` from the repository root: its modules import
    each other relatively and towers as installed, with no sys.path edits, keep results through one record(), and
    no module is over 450 lines."""
    import re

    here = ROOT / "benchmarks"
    assert (here / "__init__.py").is_file()
    for path in sorted(here.glob("*.py")):
        text = path.read_text()
        assert len(text.splitlines()) <= 450, f"{path.name}: {len(text.splitlines())} lines (at most 450)"
        assert "sys.path" not in text, path.name
        # results.json is written by workflow_harness.record (and write_results, which it calls) alone
        assert not re.search(r"def (keep_result|show_and_keep)\b", text), path.name
        assert "write_results(" not in text or path.name == "workflow_harness.py", path.name
