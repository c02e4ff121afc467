"""The workflow through a real one-node Slurm (tests/slurm/local_cluster.py: Debian's slurmctld, slurmd and munge on
this machine, no accounting) with the user's profile, profiles/slurm, as shipped and the test cluster's settings in
a second profile (tests/slurm/profile). On the tiny profile's zero-shot table and Chang et al.'s Table 1:

- every job goes through sbatch (counted from slurmctld's own log, and its job-completion records);
- the outputs are the local executor's, byte for byte (Lucene's index files and the stage records aside);
- a second run submits nothing;
- on a fresh copy, a job cancelled with scancel while it runs is retried (the profile's `retries`), and the node
  set DOWN mid-build, then resumed, loses no finished job; the build completes with the same outputs.

`make test-slurm` (root: it installs the packages where missing and starts the daemons); skips with one line where
Slurm cannot be installed or started. The numbers it prints are in docs/clusters.md."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from workflow_helpers import fresh_copy, job_counts

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_cluster  # noqa: E402

pytestmark = [pytest.mark.extended, pytest.mark.snakemake]

HERE = Path(__file__).resolve().parent
OVERLAY = HERE / "profile"
TARGETS = ["results/zeroshot/beir-tiny.csv", "results/chang2020/table1.csv"]
FAULT_TARGETS = ["results/chang2020/table1.csv"]
# the rules profiles/slurm sends to the `gpu` partition that these targets run
GPU_PARTITION_RULES = {"checkpoint_model", "encode_candidates", "dense_search"}
RUN_LIMIT = 40 * 60   # seconds; one build here takes minutes


def snakemake(*args) -> list[str]:
    return [sys.executable, "-m", "snakemake", *map(str, args), "--configfile", "fixtures/tiny.yaml"]


def on_slurm(*args) -> list[str]:
    return snakemake(*args, "--profile", "profiles/slurm", "--profile", OVERLAY)


def workflow(dest: Path) -> Path:
    """A copy of the workflow with a snapshot of src/ (put first on PYTHONPATH: the jobs import it, so edits in the
    checkout during the minutes a build takes do not reach them) and the tiny profile's fixtures."""
    fresh_copy(dest)
    shutil.copytree(FIXTURES, dest / "fixtures")
    return dest


def environment(cluster, work: Path) -> dict:
    env = cluster.env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(work / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return env


def run(command, work: Path, env: dict, during=None) -> dict:
    """Run `command` in `work` to its end (`during(process)` called while it runs): exit status, standard error
    and wall seconds."""
    began = time.perf_counter()
    with open(work / "snakemake.err", "w+") as err:
        process = subprocess.Popen([str(c) for c in command], cwd=work, env=env, stdout=subprocess.DEVNULL,
                                   stderr=err, text=True)
        events = {}
        try:
            if during:
                events = during(process)
            process.wait(timeout=RUN_LIMIT)
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait(60)
        err.seek(0)
        return {"returncode": process.returncode, "stderr": err.read(),
                "wall": round(time.perf_counter() - began, 1), "events": events}


def planned(work: Path, env: dict, targets, *extra) -> int:
    plan = subprocess.run(on_slurm(*targets, *extra, "-n"), cwd=work, env=env, capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr[-2000:]
    return sum(job_counts(plan.stdout).values())


def job_names(work: Path) -> dict[int, str]:
    """Slurm job id -> the Snakemake job it ran (rule and wildcards), from the plugin's log files
    (.snakemake/slurm_logs/rule_<rule>/<wildcards>/<id>.log; the overlay keeps them)."""
    logs = work / ".snakemake/slurm_logs"
    return {int(p.stem): str(p.parent.relative_to(logs)) for p in logs.rglob("*.log") if p.stem.isdigit()}


def same_outputs(work: Path, reference: Path, targets) -> list[str]:
    """Files of `reference`'s build that `work` lacks or holds otherwise (stage records, with their timings, and
    Lucene's index files, which carry random segment ids, aside); and the targets themselves must be there."""
    assert all((work / t).exists() for t in targets)
    differ = []
    for path in sorted(p for p in (reference / "artifacts").rglob("*") if p.is_file()):
        rel = path.relative_to(reference)
        if path.name.endswith(".meta.json") or "/bm25/index/" in f"/{rel.as_posix()}":
            continue
        if not (work / rel).exists():
            continue   # built by the reference for targets this run did not ask
        if (work / rel).read_bytes() != path.read_bytes():
            differ.append(str(rel))
    for target in targets:
        for twin in (target, target.replace(".csv", ".json")):
            if (work / twin).read_bytes() != (reference / twin).read_bytes():
                differ.append(twin)
    return differ


def restarts(stderr: str) -> int:
    return len(re.findall(r"^Trying to restart job", stderr, re.M))


def squeue(cluster) -> dict[int, str]:
    out = cluster.run("squeue", "-h", "--states=all", "-o", "%i|%T", check=False)
    return {int(i): state for i, state in (line.split("|", 1) for line in out.split() if "|" in line)}


@pytest.fixture(scope="module")
def cluster():
    try:
        started = local_cluster.start(install_missing=os.environ.get("TOWERS_SLURM_INSTALL", "1") != "0")
    except local_cluster.Unavailable as why:
        pytest.skip(f"no local Slurm here: {why}")
    yield started
    local_cluster.stop(started.folder)


@pytest.fixture(scope="module")
def builds(cluster, tmp_path_factory):
    """The local executor's build, then the same targets through Slurm in another copy, then that run again."""
    local = workflow(tmp_path_factory.mktemp("local"))
    local_run = run(snakemake(*TARGETS, "--cores", 2), local, environment(cluster, local))
    assert local_run["returncode"] == 0, local_run["stderr"][-3000:]

    work = workflow(tmp_path_factory.mktemp("slurm"))
    env = environment(cluster, work)
    jobs = planned(work, env, TARGETS)
    before = len(cluster.submitted())
    slurm_run = run(on_slurm(*TARGETS), work, env)
    submitted = cluster.submitted()[before:]
    again = run(on_slurm(*TARGETS), work, env)
    return {"local": local, "work": work, "local_run": local_run, "slurm_run": slurm_run, "planned": jobs,
            "submitted": submitted, "again": again, "resubmitted": cluster.submitted()[before + len(submitted):]}


def test_every_job_goes_through_sbatch(cluster, builds):
    done = builds["slurm_run"]
    assert done["returncode"] == 0, done["stderr"][-3000:]
    assert "Using profiles profiles/slurm and" in done["stderr"]
    # slurmctld accepted one batch job a planned job, and the plugin says it submitted exactly those
    assert builds["planned"] > 10, builds["planned"]
    assert len(builds["submitted"]) == builds["planned"], (builds["submitted"], builds["planned"])
    plugin = sorted(int(i) for i in re.findall(r"submitted with SLURM jobid (\d+)", done["stderr"]))
    assert plugin == sorted(builds["submitted"])
    assert restarts(done["stderr"]) == 0
    assert not re.search(r"^localrule ", done["stderr"], re.M)   # nothing ran beside Slurm
    records = {int(r["JobId"]): r for r in cluster.completions() if int(r["JobId"]) in builds["submitted"]}
    assert sorted(records) == sorted(builds["submitted"])
    assert {r["JobState"] for r in records.values()} == {"COMPLETED"}
    assert {r["ProcCnt"] for r in records.values()} == {"1"}   # the overlay's one CPU a job
    # the user profile's routing: GPU rules to the `gpu` partition, the rest to the default-resources' `cpu`
    names = job_names(builds["work"])
    for job, record in records.items():
        rule = names[job].split("/")[0].removeprefix("rule_")
        assert record["Partition"] == ("gpu" if rule in GPU_PARTITION_RULES else "cpu"), (rule, record)
    # no accounting here: why the profile asks squeue, not sacct, for job status
    sacct = subprocess.run(["sacct"], env=cluster.env(), capture_output=True, text=True)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr + sacct.stdout


def test_slurm_outputs_are_the_local_executors(builds):
    assert builds["slurm_run"]["returncode"] == 0
    assert same_outputs(builds["work"], builds["local"], TARGETS) == []


def test_a_second_run_submits_nothing(builds):
    again = builds["again"]
    assert again["returncode"] == 0, again["stderr"][-3000:]
    assert "Nothing to be done" in again["stderr"]
    assert builds["resubmitted"] == []


def drive_faults(cluster, first_job: int, cancel_after: float = 10.0):
    """While a build runs: scancel the first job once it has run `cancel_after` seconds; then, once a later job has
    completed and another runs, set the node DOWN for a few seconds and resume it."""
    def during(process):
        events, running_since = {}, {}
        while process.poll() is None:
            now, jobs = time.time(), {i: s for i, s in squeue(cluster).items() if i >= first_job}
            for job, state in jobs.items():
                if state == "RUNNING":
                    running_since.setdefault(job, now)
            if "cancelled" not in events:
                ready = [j for j, t in running_since.items() if jobs.get(j) == "RUNNING" and now - t >= cancel_after]
                if ready:
                    cluster.run("scancel", ready[0])
                    events["cancelled"] = ready[0]
            elif "down" not in events:
                completed = {int(r["JobId"]) for r in cluster.completions()
                             if int(r["JobId"]) >= first_job and r["JobState"] == "COMPLETED"}
                running = [j for j, s in jobs.items() if s == "RUNNING" and now - running_since[j] >= 3]
                if completed and running:
                    cluster.run("scontrol", "update", f"nodename={cluster.node}", "state=down", "reason=towers-test")
                    events.update(down=running, completed_before_down=sorted(completed),
                                  state_while_down=cluster.node_state())
                    time.sleep(5)
                    cluster.run("scontrol", "update", f"nodename={cluster.node}", "state=resume")
                    events["state_after_resume"] = cluster.node_state()
            time.sleep(0.5)
        return events
    return during


@pytest.fixture(scope="module")
def faulted(cluster, builds, tmp_path_factory):
    work = workflow(tmp_path_factory.mktemp("faults"))
    env = environment(cluster, work)
    jobs = planned(work, env, FAULT_TARGETS)
    before = cluster.submitted()
    first = max(before, default=0) + 1
    done = run(on_slurm(*FAULT_TARGETS), work, env, during=drive_faults(cluster, first))
    return {"work": work, "run": done, "planned": jobs, "submitted": cluster.submitted()[len(before):],
            "first": first}


def test_a_cancelled_job_is_retried_and_a_downed_node_loses_no_finished_work(cluster, builds, faulted):
    done, events = faulted["run"], faulted["run"]["events"]
    assert done["returncode"] == 0, done["stderr"][-3000:]
    assert "cancelled" in events and "down" in events, events
    assert events["state_while_down"].startswith("down") and events["state_after_resume"] != "down", events
    names = job_names(faulted["work"])
    records = [r for r in cluster.completions() if int(r["JobId"]) >= faulted["first"]]
    states = {}
    for record in records:
        states.setdefault(int(record["JobId"]), []).append(record["JobState"])
    # scancel: Slurm records the job CANCELLED; Snakemake submits it again (retries: 2 in the profile)
    cancelled = events["cancelled"]
    assert states[cancelled] == ["CANCELLED"], states
    assert restarts(done["stderr"]) == 1, done["stderr"][-3000:]
    again = [j for j, name in names.items() if name == names[cancelled] and j != cancelled]
    assert len(again) == 1 and states[again[0]] == ["COMPLETED"], (names, states)
    # node down: Slurm requeues the job it was running (NODE_FAIL, then the same job id again once resumed)
    for job in events["down"]:
        assert states[job][0] == "NODE_FAIL" and states[job][-1] == "COMPLETED", (job, states)
    # nothing that had finished ran again: one submission a Snakemake job, the cancelled one's two aside
    per_job = {}
    for job in faulted["submitted"]:
        per_job.setdefault(names[job], []).append(job)
    assert len(per_job) == faulted["planned"], per_job
    assert {name: len(ids) for name, ids in per_job.items() if len(ids) > 1} == {names[cancelled]: 2}
    for job in events["completed_before_down"]:   # its Snakemake job was never submitted after it
        assert per_job[names[job]][-1] == job, (job, per_job)
    assert len(faulted["submitted"]) == faulted["planned"] + 1
    assert same_outputs(faulted["work"], builds["local"], FAULT_TARGETS) == []


def test_report_the_numbers(builds, faulted):
    """Not a check: the numbers docs/clusters.md quotes, printed (make test-slurm shows them) and kept beside the
    copies."""
    events = faulted["run"]["events"]
    numbers = {
        "targets": TARGETS, "jobs": builds["planned"], "submitted": len(builds["submitted"]),
        "local_executor_wall_s": builds["local_run"]["wall"], "slurm_wall_s": builds["slurm_run"]["wall"],
        "second_run_submitted": len(builds["resubmitted"]), "second_run_wall_s": builds["again"]["wall"],
        "fault_targets": FAULT_TARGETS, "fault_jobs": faulted["planned"], "fault_submitted": len(faulted["submitted"]),
        "fault_restarts": restarts(faulted["run"]["stderr"]), "fault_wall_s": faulted["run"]["wall"],
        "cancelled": events.get("cancelled"), "node_down_hit": events.get("down"),
        "completed_before_down": events.get("completed_before_down"),
        "load_average": os.getloadavg(),
    }
    (builds["work"] / "slurm-numbers.json").write_text(json.dumps(numbers, indent=2))
    print("\nslurm test:", json.dumps(numbers))
