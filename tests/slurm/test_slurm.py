"""The workflow through a real one-node Slurm (tests/slurm/local_cluster.py: Debian's slurmctld, slurmd and munge on
this machine, no accounting) with the user's profile, profiles/slurm, as shipped and the test cluster's settings in
a second profile (tests/slurm/profile). On the tiny profile's zero-shot table and Chang et al.'s Table 1:

- every job goes through sbatch (counted from slurmctld's own log, and its job-completion records);
- the outputs are the local executor's, byte for byte (Lucene's index files and the stage records aside);
- a second run submits nothing;
- on a fresh copy, a job cancelled with scancel while it runs is retried (the profile's `retries`), and the node
  set DOWN mid-build, then resumed, loses no finished job; the build completes with the same outputs;
- on another, slurmctld restarted without its job records under a running job (the job leaves squeue, as when its
  record expires): the run fails that job in one line naming it, within a few status checks, and its retry
  completes the build (towers.launch.slurm; the plugin alone waits for the job for good).

The faults meet running jobs however fast the machine: a gate (a sitecustomize.py on the jobs' PYTHONPATH) holds a
job's first Python process while a file the test controls is there.

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
from benchmarks.workflow_harness import fresh_copy, job_counts

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_cluster

pytestmark = [pytest.mark.extended, pytest.mark.snakemake]

HERE = Path(__file__).resolve().parent
OVERLAY = HERE / "profile"
TARGETS = ["results/zeroshot/beir-tiny.csv", "results/chang2020/table1.csv"]
FAULT_TARGETS = ["results/chang2020/table1.csv"]
# the rules profiles/slurm sends to the `gpu` partition that these targets run
GPU_PARTITION_RULES = {"checkpoint_model", "encode_candidates", "dense_search"}
RUN_LIMIT = 40 * 60   # seconds; one build here takes minutes
DROP_TARGETS = ["artifacts/enwiki-mini/corpus/stats.json"]   # one job (parse_wiki)
DROP_LIMIT = 10 * 60   # seconds: a run that still waits for a job slurmctld forgot is stopped and fails the test


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


def environment(cluster, work: Path, gate=None) -> dict:
    env = cluster.env()
    first = [str(gate.folder)] if gate else []
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*first, str(work / "src"), os.environ.get("PYTHONPATH", "")) if p)
    if gate:
        env["TOWERS_TEST_GATE"] = str(gate.file)
    return env


HOLD = '''import os, time
_gate, _job = os.environ.get("TOWERS_TEST_GATE"), os.environ.get("SLURM_JOB_ID")
if _gate and _job and os.path.exists(_gate) and not os.path.exists(f"{_gate}.held/{_job}"):   # once a job
    open(f"{_gate}.held/{_job}", "w").close()
    _until = time.time() + 600
    while os.path.exists(_gate) and time.time() < _until:
        time.sleep(0.2)
'''


class Gate:
    """While `file` is there, every Slurm job of a run started with environment(..., gate) that starts holds (running,
    as far as Slurm knows) until the file goes, once a job (not again when Slurm requeues it); `held()` names the
    jobs that held."""
    def __init__(self, folder: Path):
        self.folder, self.file = folder, folder / "gate"
        (folder / "gate.held").mkdir(parents=True)
        (folder / "sitecustomize.py").write_text(HOLD)

    @property
    def closed(self) -> bool:
        return self.file.exists()

    def close(self):
        self.file.touch()

    def open(self):
        self.file.unlink(missing_ok=True)

    def held(self) -> set[int]:
        return {int(p.name) for p in (self.folder / "gate.held").iterdir() if p.name.isdigit()}


def run(command, work: Path, env: dict, during=None, limit: float = RUN_LIMIT) -> dict:
    """Run `command` in `work` to its end, or `limit` seconds (`during(process, deadline)` called while it runs):
    exit status, standard error, wall seconds and whether it was stopped at the limit."""
    began = time.perf_counter()
    with open(work / "snakemake.err", "w+") as err:
        process = subprocess.Popen([str(c) for c in command], cwd=work, env=env, stdout=subprocess.DEVNULL,
                                   stderr=err, text=True)
        events, stopped = {}, False
        try:
            if during:
                events = during(process, began + limit)
            process.wait(timeout=max(1.0, limit - (time.perf_counter() - began)))
        except subprocess.TimeoutExpired:
            stopped = True
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:   # SIGTERM: "Will exit after finishing currently running jobs"
                    process.kill()
                    process.wait(60)
        err.seek(0)
        return {"returncode": process.returncode, "stderr": err.read(),
                "wall": round(time.perf_counter() - began, 1), "events": events, "stopped_at_limit": stopped}


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


def drive_faults(cluster, first_job: int, gate: Gate):
    """While a build runs, its first jobs held by `gate` (closed before it starts): scancel a held job once it runs
    and open the gate; once a later job has completed, close the gate again and, once a job it holds runs, set the
    node DOWN for a few seconds (the gate opened meanwhile) and resume it."""
    def during(process, deadline):
        events, held_before = {}, set()
        while process.poll() is None and time.perf_counter() < deadline:
            jobs = {i: s for i, s in squeue(cluster).items() if i >= first_job}
            held = sorted(j for j in gate.held() - held_before if jobs.get(j) == "RUNNING")
            if "cancelled" not in events:
                if held:
                    cluster.run("scancel", held[0])
                    events["cancelled"] = held[0]
                    gate.open()
            elif "down" not in events:
                completed = {int(r["JobId"]) for r in cluster.completions()
                             if int(r["JobId"]) >= first_job and r["JobState"] == "COMPLETED"}
                if completed and not gate.closed:
                    held_before = gate.held()
                    gate.close()
                elif gate.closed and held:
                    cluster.run("scontrol", "update", f"nodename={cluster.node}", "state=down", "reason=towers-test")
                    events.update(down=held, completed_before_down=sorted(completed),
                                  state_while_down=cluster.node_state())
                    gate.open()
                    time.sleep(5)
                    cluster.run("scontrol", "update", f"nodename={cluster.node}", "state=resume")
                    events["state_after_resume"] = cluster.node_state()
            time.sleep(0.5)
        gate.open()
        return events
    return during


@pytest.fixture(scope="module")
def faulted(cluster, builds, tmp_path_factory):
    work = workflow(tmp_path_factory.mktemp("faults"))
    gate = Gate(tmp_path_factory.mktemp("gate"))
    env = environment(cluster, work, gate)
    jobs = planned(work, env, FAULT_TARGETS)
    before = cluster.submitted()
    first = max(before, default=0) + 1
    gate.close()
    done = run(on_slurm(*FAULT_TARGETS), work, env, during=drive_faults(cluster, first, gate))
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
    assert len(again) == 1 and states[again[0]][-1] == "COMPLETED", (names, states)   # (the node may fail under it)
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


def drive_drop(cluster, first_job: int, gate: Gate, work: Path):
    """While a build runs, its first job held by `gate`: once a held job runs, restart slurmctld without its job
    records (every job of the run leaves squeue; slurmctld ends the running one, an orphan now), then open the gate."""
    def during(process, deadline):
        events, began = {}, time.perf_counter()
        while process.poll() is None and time.perf_counter() < deadline:
            jobs = {i: s for i, s in squeue(cluster).items() if i >= first_job}
            if "dropped" not in events and any(jobs.get(j) == "RUNNING" for j in gate.held()):
                names = job_names(work)
                events["dropped"] = {job: names.get(job) for job in jobs}
                events["state_after_restart"] = local_cluster.restart_controller(cluster, forget_jobs=True)
                events["squeue_after_restart"] = squeue(cluster)
                events["dropped_at_s"] = round(time.perf_counter() - began, 1)
                gate.open()
            time.sleep(0.5)
        gate.open()
        return events
    return during


@pytest.fixture(scope="module")
def dropped(cluster, builds, tmp_path_factory):
    """A fresh copy's one-job build with slurmctld restarted from a clean state under its running job (run last:
    every job record of the earlier builds goes with it)."""
    work = workflow(tmp_path_factory.mktemp("dropped"))
    gate = Gate(tmp_path_factory.mktemp("gate"))
    env = environment(cluster, work, gate)
    first = max(cluster.submitted(), default=0) + 1
    gate.close()
    done = run(on_slurm(*DROP_TARGETS), work, env, during=drive_drop(cluster, first, gate, work), limit=DROP_LIMIT)
    return {"work": work, "run": done}


def test_a_job_slurmctld_forgets_fails_in_one_line_and_its_retry_completes_the_build(builds, dropped):
    """Before (the plugin alone): the run waited for the forgotten job for good (squeue lists it no more, the plugin
    takes it for one not listed yet), and SIGTERM only said it would exit after the running jobs."""
    done, events = dropped["run"], dropped["run"]["events"]
    assert events.get("dropped"), events
    assert not done["stopped_at_limit"], f"still waiting after {DROP_LIMIT} s: " + done["stderr"][-3000:]
    assert done["returncode"] == 0, done["stderr"][-3000:]
    assert all(events["dropped"].values()) and not set(events["dropped"]) & set(events["squeue_after_restart"]), events
    for job, name in events["dropped"].items():   # one line each: its Slurm job id and rule
        rule = name.split("/")[0].removeprefix("rule_")
        line = [l for l in done["stderr"].splitlines()
                if f"SLURM job {job}, rule {rule} (" in l and "gone from squeue" in l]
        assert len(line) == 1 and "unknown to sacct for 3 status checks in a row" in line[0], done["stderr"][-3000:]
    assert restarts(done["stderr"]) == len(events["dropped"])
    assert same_outputs(dropped["work"], builds["local"], DROP_TARGETS) == []


def test_report_the_numbers(builds, faulted, dropped):
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
        "drop_targets": DROP_TARGETS, "dropped": dropped["run"]["events"].get("dropped"),
        "dropped_at_s": dropped["run"]["events"].get("dropped_at_s"), "drop_wall_s": dropped["run"]["wall"],
        "load_average": os.getloadavg(),
    }
    (builds["work"] / "slurm-numbers.json").write_text(json.dumps(numbers, indent=2))
    print("\nslurm test:", json.dumps(numbers))
