"""benchmarks/cores.py: a build's own jobs and DAG, list-scheduled on more cores; a log of a build that did not
finish, cores that are not a positive number and a broken results file refused in one line (issue 68)."""
import json

import pytest

from benchmarks import cores
from benchmarks import reproduce
from benchmarks import workflow_harness

LOG = """[Wed Nov 25 14:00:00 2026]
rule parse:
    output: a/corpus.jsonl
    jobid: 1
[Wed Nov 25 14:00:10 2026]
Finished jobid: 1 (Rule: parse)
1 of 4 steps (25%) done
[Wed Nov 25 14:00:10 2026]
rule train:
    input: a/corpus.jsonl
    output: a/model
    threads: 2
    jobid: 2
[Wed Nov 25 14:00:10 2026]
rule bm25:
    input: a/corpus.jsonl
    output: a/run.txt
    jobid: 3
[Wed Nov 25 14:00:30 2026]
Finished jobid: 3 (Rule: bm25)
2 of 4 steps (50%) done
[Wed Nov 25 14:01:10 2026]
Finished jobid: 2 (Rule: train)
3 of 4 steps (75%) done
[Wed Nov 25 14:01:10 2026]
rule table:
    input: a/model/config.json, a/run.txt
    output: t.csv
    jobid: 4
[Wed Nov 25 14:01:15 2026]
Finished jobid: 4 (Rule: table)
4 of 4 steps (100%) done
"""


def jobs(tmp_path):
    log = tmp_path / "x.snakemake.log"
    log.write_text(LOG)
    return cores.log_jobs(log)


def test_a_log_gives_each_job_its_seconds_threads_and_parents(tmp_path):
    found, wall = jobs(tmp_path)
    assert wall == 75
    assert [(j["rule"], j["wall"], j["threads"]) for j in found] == [
        ("parse", 10, 1), ("bm25", 20, 1), ("train", 60, 2), ("table", 5, 1)]
    # the table reads a file inside the model folder: its parent is the job that wrote the folder
    assert cores.parents(found) == [set(), {0}, {0}, {1, 2}]


def test_the_simulation_waits_for_cores_and_for_parents(tmp_path):
    found, _ = jobs(tmp_path)
    before = cores.parents(found)
    # one core: every job in turn; two: bm25 cannot run beside the 2-thread training; four: it can
    assert cores.simulate(found, before, 1, {}) == 95
    assert cores.simulate(found, before, 2, {}) == 95
    assert cores.simulate(found, before, 4, {}) == 75
    assert max(cores.tails(found, before)) == 75
    assert cores.critical_path(found, before) == ["parse (10 s)", "train (60 s)", "table (5 s)"]


def test_uncontended_takes_away_what_a_job_waited_for_a_core(tmp_path):
    found, _ = jobs(tmp_path)
    (tmp_path / "a").mkdir()
    (tmp_path / "a/run.txt.meta.json").write_text(json.dumps({"seconds": 18.0, "cpu_seconds": 8.0}))   # waited 10 s
    (tmp_path / "a/model.meta.json").write_text(json.dumps({"seconds": 59.0, "cpu_seconds": 110.0}))  # two threads
    alone = cores.uncontended(tmp_path, found)
    assert [j["wall"] for j in alone] == [10, 10.0, 60, 5]   # no record: its wall; more CPU than wall: its wall


def test_a_priority_starts_its_rule_first(tmp_path):
    found, _ = jobs(tmp_path)
    found[2]["threads"] = 1
    found.append({"rule": "other", "inputs": ["a/corpus.jsonl"], "outputs": ["o"], "threads": 1, "began": 0, "wall": 50})
    before = cores.parents(found)
    # by rank alone train (65 s to the end) and other (50) start first, bm25 waits: 10 + 50 + 20 + 5
    assert cores.simulate(found, before, 2, {}) == 85
    # bm25 first: the table waits only for the training, and other ends last: 10 + 20 + 50
    assert cores.simulate(found, before, 2, {"bm25": 50}) == 80


def a_build(tmp_path, log: str = LOG):
    build = tmp_path / "build"
    (build / ".snakemake/log").mkdir(parents=True)
    (build / "Snakefile").write_text("rule table:\n    priority: 1\n")
    (build / ".snakemake/log/x.snakemake.log").write_text(log)
    return build


@pytest.fixture
def results(tmp_path, monkeypatch):
    """benchmarks/results.json stood in for by a copy holding an older measurement under `cores_here`."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"cores_here": {"jobs": 1}, "other": {"kept": True}}))
    monkeypatch.setattr(workflow_harness, "RESULTS", path)
    monkeypatch.setattr(reproduce, "RESULTS", path)
    return path


def test_a_truncated_log_is_refused_as_a_build_that_did_not_finish(tmp_path):
    """A build killed after 2 of its 4 jobs measured as a whole build would say its 2-core wall is 30 s."""
    cut = LOG.split("[Wed Nov 25 14:01:10 2026]")[0]
    log = tmp_path / "cut.snakemake.log"
    log.write_text(cut)
    with pytest.raises(SystemExit) as stopped:
        cores.log_jobs(log)
    assert stopped.value.code == (f"error: {log}: an incomplete build: 2 of 4 jobs finished (a whole build's log is "
                                  "needed)")
    log.write_text("\n".join(line for line in LOG.splitlines() if "steps (" not in line))
    with pytest.raises(SystemExit) as stopped:
        cores.log_jobs(log)
    assert stopped.value.code == (f"error: {log}: 4 jobs finished, but no 'N of M steps done' line says of how many: "
                                  "not a whole build's Snakemake log")


@pytest.mark.parametrize("flag", ["--cores", "--built-cores"])
@pytest.mark.parametrize("cores_given", ["0", "-4", "two"])
def test_cores_that_are_not_a_positive_number_are_refused(tmp_path, capsys, flag, cores_given):
    """0 or -4 cores simulated as many as the jobs want: refused by the argument's type, in argparse's one line."""
    with pytest.raises(SystemExit) as stopped:
        cores.main([str(a_build(tmp_path)), flag, cores_given])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: argument {flag}: a whole number of at least 1, not {cores_given!r}")


def test_record_refreshes_the_key_it_names(tmp_path, capsys, results):
    """`--record KEY` on a key the file holds replaced it (the advice of a --key flag cores.py lacks is gone)."""
    cores.main([str(a_build(tmp_path)), "--cores", "1", "4", "--record", "cores_here"])
    out, err = capsys.readouterr()
    kept = json.loads(results.read_text())
    assert kept["other"] == {"kept": True}
    assert kept["cores_here"]["jobs"] == 4 and kept["cores_here"]["simulated_minutes"] == {"1": 1.58, "2": 1.58,
                                                                                          "4": 1.25}
    assert "not recorded" not in err and "--key" not in err
    assert json.loads(out)["jobs"] == 4


def test_a_broken_results_file_stops_the_run_before_it_measures(tmp_path, capsys, results):
    results.write_text('{"cores_here": {"jobs": 1}\n"other": 2}')
    with pytest.raises(SystemExit) as stopped:
        cores.main([str(a_build(tmp_path)), "--record", "cores_here"])
    assert stopped.value.code == (f"error: {results}: not valid JSON: Expecting ',' delimiter (line 2, column 1)")
    assert capsys.readouterr().out == ""   # nothing measured, nothing printed
