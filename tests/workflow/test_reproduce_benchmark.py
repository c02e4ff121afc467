"""benchmarks/reproduce.py reads Snakemake's own log: each finished job's rule, outputs and wall seconds."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks import build_records, compare_builds, projection, reproduce

LOG = """Building DAG of jobs...
Execute 2 jobs...
[Wed Nov 25 14:48:43 2026]
localrule parse_wiki:
    output: artifacts/a/corpus/articles.jsonl, artifacts/a/corpus/stats.json
    log: logs/a/parse_wiki.log
    jobid: 5
    reason: Missing output files: artifacts/a/corpus/articles.jsonl
[Wed Nov 25 14:48:43 2026]
rule checkpoint_model:
    output: artifacts/a/dense/ckpt/all/model
    jobid: 9
[Wed Nov 25 14:48:53 2026]
Finished jobid: 9 (Rule: checkpoint_model)
[Wed Nov 25 14:49:05 2026]
Finished jobid: 5 (Rule: parse_wiki)
[Wed Nov 25 14:49:06 2026]
localrule all:
    input: x
    jobid: 0
"""


def test_jobs_of_pairs_starts_with_finishes(tmp_path):
    log = tmp_path / "run.snakemake.log"
    log.write_text(LOG)
    jobs = build_records.jobs_of(log)
    assert [(j["rule"], j["wall"]) for j in jobs] == [("checkpoint_model", 10.0), ("parse_wiki", 22.0)]
    assert jobs[1]["outputs"] == ["artifacts/a/corpus/articles.jsonl", "artifacts/a/corpus/stats.json"]


def test_record_of_finds_the_stage_record_beside_any_output(tmp_path):
    (tmp_path / "artifacts/a/corpus").mkdir(parents=True)
    (tmp_path / "artifacts/a/corpus/stats.json.meta.json").write_text(json.dumps({"seconds": 3.5}))
    assert build_records.record_of(tmp_path, ["artifacts/a/corpus/articles.jsonl", "artifacts/a/corpus/stats.json"]) == {"seconds": 3.5}
    assert build_records.record_of(tmp_path, ["artifacts/a/dense/ckpt/all/model/"]) is None


def test_record_sets_one_nested_entry_and_leaves_the_rest(tmp_path, monkeypatch):
    from benchmarks import workflow_harness

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"machine": {"cpu_count": 2}, "scale": {"data": {"1000": 1}}}))
    monkeypatch.setattr(workflow_harness, "RESULTS", results)
    workflow_harness.record(("scale", "wikipedia"), {"parts": 4}, replace=True)
    workflow_harness.record("reproduce", {"clean_run_seconds": 1.0}, replace=True)
    assert json.loads(results.read_text()) == {"machine": {"cpu_count": 2}, "reproduce": {"clean_run_seconds": 1.0},
                                               "scale": {"data": {"1000": 1}, "wikipedia": {"parts": 4}}}


def test_before_after_compares_two_builds_file_by_file(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for folder, cell in ((old, "0.25"), (new, "0.26")):
        (folder / "results").mkdir(parents=True)
        (folder / "results/table1.csv").write_text(f"method,R@1,R@10\na,{cell},0.5\nb,0.1,0.2\n")
        (folder / "results/table2.csv").write_text("method,R@1\na,0.3\n")
        (folder / "reproduce-times.json").write_text(json.dumps({"commit": folder.name}))
    (old / "results/table1.json").write_text("{}")   # in one build only
    found = compare_builds.before_after(old, new)
    assert (found["before"], found["after"]) == ("old", "new")
    assert found["compared"] == 2 and found["identical"] == 1 and found["moved"] == ["results/table1.csv"]
    assert found["cells_moved"] == {"results/table1.csv": 1} and "results/table1.json" in found["missing"]


def test_a_job_forked_from_the_warm_start_server_paid_no_import():
    assert build_records.forked({"warm_start": True, "torch_loaded": True, "startup_seconds": 0.4})
    assert not build_records.forked({"warm_start": False, "torch_loaded": True, "startup_seconds": 0.05})
    # records from before they said so: a fork is young at main and always has torch loaded
    assert build_records.forked({"torch_loaded": True, "startup_seconds": 0.05})
    assert not build_records.forked({"torch_loaded": True, "startup_seconds": 0.45})
    assert not build_records.forked({"torch_loaded": False, "startup_seconds": 0.05})
    assert not build_records.forked({})


def test_machine_speed_compares_the_same_work_on_both_runs():
    def row(jobs, cpu, startup):
        return {"jobs": jobs, "cpu_seconds": cpu, "process_startup_seconds": startup}

    before = {"finetune": row(4, 110.0, 10.0), "train_ltre": row(2, 50.0, 0.0), "encode_candidates": row(3, 30.0, 0.0)}
    now = {"finetune": row(4, 150.0, 0.0), "train_ltre": row(3, 90.0, 0.0), "encode_candidates": row(3, 90.0, 0.0)}
    speed = reproduce.machine_speed(now, before)
    # train_ltre ran other jobs; encode_candidates is not the same work across the two commits
    assert speed["rules"] == ["finetune"] and speed["slower_by"] == 1.5 and speed["per_rule_slower_by"] == {"finetune": 1.5}


def test_a_stopped_step_counts_its_part_and_the_rerun(tmp_path):
    times = {"steps": [{"name": "setup", "began": 100.0, "seconds": 50.0, "rc": 0}]}
    log = tmp_path / "reproduce-paper.log"
    log.write_text("half a build\n")
    os.utime(log, (400.0, 400.0))   # the machine stopped at 400 s, 250 s into the step
    reproduce.keep_interrupted(tmp_path, times, "paper", log)
    assert not log.exists() and (tmp_path / "reproduce-paper.interrupted-2.log").exists()
    times["steps"].append({"name": "paper", "began": 1000.0, "seconds": 100.0, "rc": 0})
    steps = build_records.steps_of(times)
    assert steps["paper"]["seconds"] == 350.0 and steps["paper"]["began"] == 150.0 and steps["paper"]["rc"] == 0
    assert steps["setup"]["seconds"] == 50.0


def test_only_the_timed_steps_logs_are_read(tmp_path):
    logs = tmp_path / ".snakemake/log"
    logs.mkdir(parents=True)
    times = {"steps": [{"name": "setup", "began": 1000.0, "seconds": 50.0, "rc": 0},
                       {"name": "paper", "began": 1050.0, "seconds": 100.0, "rc": 0}]}
    for name, written in (("before", 900.0), ("paper", 1149.0), ("rerun", 2000.0)):
        log = logs / f"{name}.snakemake.log"
        log.write_text("")
        os.utime(log, (written, written))
    assert [log.name for log in build_records.build_logs(tmp_path, times)] == ["paper.snakemake.log"]


MEASURED = {"commit": "c", "job_seconds": 400.0, "clean_run_seconds": 200.0, "startup_seconds": 10.0, "jobs": 10}


def plan_two_papers(monkeypatch):
    """Papers p (target a.csv: a model trained) and q (b.csv: a table of it), then `all` (no files)."""
    plans = {("a.csv",): [{"rule": "train", "outputs": ["m/model"]}],
             ("a.csv", "b.csv"): [{"rule": "train", "outputs": ["m/model"]}, {"rule": "table", "outputs": ["t.csv"]}]}
    monkeypatch.setattr(reproduce.paper_list, "load", lambda root: {"p": {"id": "p", "t": ["a.csv"]}, "q": {"id": "q", "t": ["b.csv"]}})
    monkeypatch.setattr(reproduce.paper_list, "targets", lambda paper: paper["t"])
    monkeypatch.setattr(projection, "clean_build_jobs", lambda folder, targets: plans.get(tuple(targets), [
        *plans[("a.csv", "b.csv")], {"rule": "all", "outputs": []}]))


def test_a_projection_counts_each_job_once_for_the_first_paper_that_needs_it(tmp_path, monkeypatch):
    (tmp_path / "m").mkdir()
    (tmp_path / "m/model.meta.json").write_text(json.dumps({"seconds": 100.0}))
    (tmp_path / "t.csv.meta.json").write_text(json.dumps({"seconds": 20.0}))
    plan_two_papers(monkeypatch)
    projected = projection.project(tmp_path, MEASURED)
    # parallelism 2, one second of overhead a job: (100 + 1) / 2, (20 + 1) / 2, then the record-less `all` (0 + 1) / 2
    assert projected["per_paper_minutes"] == {"p": round(50.5 / 60, 1), "q": round(10.5 / 60, 1),
                                              "rest": round(0.5 / 60, 1)}
    assert projected["projected_clean_run_seconds"] == 61.5
    assert projected["jobs"] == 3 and projected["jobs_without_record"] == 1
    assert projected["per_rule"]["train"] == {"jobs": 1, "job_seconds": 101.0}


def test_a_whole_run_splits_its_wall_by_each_papers_share_of_the_job_seconds(tmp_path, monkeypatch):
    plans = {("a.csv",): [{"rule": "train", "outputs": ["m/model"]}],
             ("a.csv", "b.csv"): [{"rule": "train", "outputs": ["m/model"]}, {"rule": "table", "outputs": ["t.csv"]}]}
    monkeypatch.setattr(reproduce.paper_list, "load", lambda root: {"p": {"id": "p", "t": ["a.csv"]}, "q": {"id": "q", "t": ["b.csv"]}})
    monkeypatch.setattr(reproduce.paper_list, "targets", lambda paper: paper["t"])
    monkeypatch.setattr(projection, "clean_build_jobs", lambda folder, targets: plans[tuple(targets)])
    jobs = [{"rule": "train", "outputs": ["m/model"], "wall": 90.0}, {"rule": "table", "outputs": ["t.csv"], "wall": 20.0},
            {"rule": "check", "outputs": ["c.txt"], "wall": 10.0}]
    # 120 job-seconds over a 60-second wall: the model is p's (3/4), the table q's, the check nobody's
    assert reproduce.paper_shares(tmp_path, jobs, 60 * 60) == {"p": 45.0, "q": 10.0, "rest": 5.0}


def test_verdicts_before_and_after_are_counted_and_each_moved_claim_named(tmp_path):
    rows = "paper,claim,claim verdict\np,p-1,holds\np,p-1,holds\np,p-2,contradicted\nq,q-1,not supported\n"
    for name, text in (("old", rows), ("new", rows.replace("p,p-2,contradicted", "p,p-2,holds"))):
        (tmp_path / name / "results").mkdir(parents=True)
        (tmp_path / name / "results/claims.csv").write_text(text)
    verdicts = compare_builds.verdicts_moved(tmp_path / "new", tmp_path / "old")
    assert verdicts["moved"] == {"p-2": "contradicted -> holds"}
    assert verdicts["counts"]["p"] == {"before": {"holds": 1, "contradicted": 1}, "after": {"holds": 2}}


def test_a_dry_runs_job_blocks_give_each_jobs_rule_and_outputs():
    blocks = [value for kind, value in build_records.job_blocks(LOG.splitlines()) if kind == "job"]
    assert [(b["rule"], b["outputs"], b["jobid"]) for b in blocks] == [
        ("parse_wiki", ["artifacts/a/corpus/articles.jsonl", "artifacts/a/corpus/stats.json"], "5"),
        ("checkpoint_model", ["artifacts/a/dense/ckpt/all/model"], "9"), ("all", [], "0")]


# Issue 56: --project on a build with 935 of 941 jobs unrecorded replaced the committed projection (8,229 s) with
# 213 s, unasked; with no argument the script printed nothing; bad arguments ended in tracebacks

def a_build(folder: Path) -> Path:
    """A folder that looks like a finished build to the argument checks (nothing in it runs)."""
    for name in ("Snakefile", ".venv/bin/snakemake", ".venv/bin/python", "data/papers/papers.yaml",
                 "reproduce-times.json"):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("")
    for name in (".git", ".snakemake/log", "results"):
        (folder / name).mkdir(parents=True)
    return folder


@pytest.fixture
def results(tmp_path, monkeypatch):
    """benchmarks/results.json stood in for by a file holding a measured run and a committed projection."""
    from benchmarks import workflow_harness

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"reproduce": MEASURED, "reproduce_projection": {"projected_clean_run_seconds": 8228.9}}))
    monkeypatch.setattr(workflow_harness, "RESULTS", path)
    monkeypatch.setattr(reproduce, "RESULTS", path)
    return path


def test_a_build_whose_jobs_have_no_records_is_not_projected(tmp_path, monkeypatch, results):
    build = a_build(tmp_path / "build")
    (build / "m").mkdir()
    (build / "m/model.meta.json").write_text(json.dumps({"seconds": 100.0}))   # t.csv's job never ran here
    plan_two_papers(monkeypatch)
    kept = results.read_text()
    with pytest.raises(SystemExit) as stopped:
        reproduce.main(["--project", str(build), "--record"])
    assert stopped.value.code == (f"error: {build}: 1 of 3 jobs have no stage record (the first: rule table, t.csv): "
                                  "not a finished build of this checkout's plan; nothing projected")
    assert results.read_text() == kept


def test_a_kept_result_is_replaced_only_with_record(tmp_path, monkeypatch, results, capsys):
    build = a_build(tmp_path / "build")
    (build / "m").mkdir()
    (build / "m/model.meta.json").write_text(json.dumps({"seconds": 100.0}))
    (build / "t.csv.meta.json").write_text(json.dumps({"seconds": 20.0}))
    plan_two_papers(monkeypatch)
    reproduce.main(["--project", str(build)])
    out, err = capsys.readouterr()
    assert json.loads(out)["projected_clean_run_seconds"] == 61.5   # printed,
    assert json.loads(results.read_text())["reproduce_projection"] == {"projected_clean_run_seconds": 8228.9}   # not kept
    assert err.strip() == (f"not recorded: {results} holds 'reproduce_projection' already; to replace it, run this "
                           "again with --record (or --key NEW to keep both where the command takes --key)")
    reproduce.main(["--project", str(build), "--key", "projection_here"])   # a new key needs no --record
    reproduce.main(["--project", str(build), "--record"])
    kept = json.loads(results.read_text())
    assert kept["reproduce_projection"]["projected_clean_run_seconds"] == 61.5 == \
        kept["projection_here"]["projected_clean_run_seconds"]


def test_a_broken_results_file_stops_an_analysis_before_it_measures(tmp_path, monkeypatch, results, capsys):
    """Issue 68: a traceback after the printed result; now one line naming the file and where its JSON breaks."""
    build = a_build(tmp_path / "build")
    results.write_text('{"reproduce": 1,}')
    monkeypatch.setattr(reproduce, "project", lambda *_: pytest.fail("measured despite a broken results file"))
    with pytest.raises(SystemExit) as stopped:
        reproduce.main(["--project", str(build), "--record"])
    assert stopped.value.code == (f"error: {results}: not valid JSON: Expecting property name enclosed in double "
                                  "quotes (line 1, column 17)")
    assert capsys.readouterr().out == ""


def refusal(argv, capsys) -> str:
    """The one line reproduce.py stops with: its own (sys.exit), or argparse's error after the usage."""
    with pytest.raises(SystemExit) as stopped:
        reproduce.main([str(a) for a in argv])
    if isinstance(stopped.value.code, str):
        return stopped.value.code
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.startswith("usage: "), err
    return err.strip().splitlines()[-1]


def test_no_argument_prints_the_usage(capsys):
    assert refusal([], capsys) == ("python -m benchmarks.reproduce: error: one of the arguments --run --resume --analyse --warm "
                                   "--scheduler --rerun-step --before-after --project is required")


@pytest.mark.parametrize("argv, expected", [
    (["--project", "{tmp}/nowhere"], "error: --project {tmp}/nowhere: no such folder"),
    (["--project", "{tmp}"], "error: --project {tmp}: not a build of this workflow (no Snakefile)"),
    (["--analyse", "{tmp}/nowhere"], "error: --analyse {tmp}/nowhere: no such folder"),
    (["--analyse", "{build}", "--before", "nokey"], "error: {results}: no key 'nokey' (--before)"),
    (["--run", "{build}"], "error: --run {build}: exists already (--run clones into a new folder; --resume goes on)"),
    (["--run", "{tmp}/new", "--commit", "no-such-commit"], "error: --commit no-such-commit: not a commit of"),
    (["--project", "{build}", "--cores", "0"], "argument --cores: a whole number of at least 1, not '0'"),
    (["--warm", "{build}", "--jobs", "x"], "argument --jobs: a whole number of at least 1, not 'x'"),
    (["--rerun-step", "nosuch", "{build}"], "error: --rerun-step {build}: not a build of this workflow (no "
                                            "reproduce-nosuch.log)"),
    (["--before-after", "{tmp}/nowhere", "{build}"], "error: --before-after {tmp}/nowhere: no such folder"),
    (["--warm", "{build}", "--configfile", "missing.yaml"], "error: --configfile missing.yaml: no such file in {build}"),
    (["--resume", "{tmp}"], "error: --resume {tmp}: not a build of this workflow (no Snakefile)"),
    (["--project", "{build}", "--analyse", "{build}"], "argument --analyse: not allowed with argument --project"),
    (["--project", "{build}", "--bogus"], "python -m benchmarks.reproduce: error: unrecognized arguments: --bogus"),
])
def test_a_bad_argument_is_one_line(tmp_path, results, capsys, argv, expected):
    names = {"tmp": tmp_path, "build": a_build(tmp_path / "build"), "results": results}
    line = refusal([a.format(**names) for a in argv], capsys)
    assert expected.format(**names) in line and "\n" not in line, line


def test_a_projection_needs_the_measured_run(tmp_path, results, capsys):
    results.write_text("{}")
    assert refusal(["--project", a_build(tmp_path / "build")], capsys) == (
        f"error: {results}: no key 'reproduce' (the measured clean run a projection is calibrated on)")


def _git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_results_are_compared_with_the_commit_they_name(tmp_path):
    checkout, build = tmp_path / "checkout", tmp_path / "build"
    (checkout / "results").mkdir(parents=True)
    (checkout / "results/table1.csv").write_text("method,R@1\na,0.25\nb,0.5\n")
    (checkout / "results/claims.csv").write_text("paper,claim,claim verdict\np,p-1,holds\n")
    _git("init", "-q", cwd=checkout)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "add", "results", cwd=checkout)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results", cwd=checkout)
    (checkout / "results/table1.csv").unlink()   # the working tree moved on: a build under way removed it
    (checkout / "results/claims.csv").write_text("paper,claim,claim verdict\np,p-1,contradicted\n")
    (build / "results").mkdir(parents=True)
    (build / "results/table1.csv").write_text("method,R@1\na,0.26\nb,0.5\n")
    (build / "results/claims.csv").write_text("paper,claim,claim verdict\np,p-1,holds\n")
    (build / "results/new.csv").write_text("x\n1\n")
    found = compare_builds.compared_with_commit(build, ["results/table1.csv", "results/claims.csv", "results/new.csv"],
                                           root=checkout)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=checkout, capture_output=True, text=True).stdout.strip()
    assert found["results_moved_against"] == head
    assert found["results_moved"] == ["results/table1.csv"]           # claims.csv is as committed
    assert found["cells_moved"] == {"results/table1.csv": 1}
    assert found["results_not_compared"] == ["results/new.csv"]       # not at that commit: not called moved
    before = compare_builds.committed_bytes(head, "results/claims.csv", root=checkout)
    assert compare_builds.verdicts_moved(build, before_csv=before)["moved"] == {}
