"""towers.launch.slurm, the workflow's two fixes for runs on Slurm (issue 56): a job the Slurm executor plugin waits on that
squeue no longer lists is settled through sacct or failed after MISSED_CHECKS status checks, in one line naming it
(the plugin alone waits for it for good); and a run on executor slurm without Slurm's commands on PATH stops in
one line before the clean-up removes anything. tests/slurm runs the first against a real Slurm (a slurmctld
restarted without its job records under a running job)."""
import asyncio
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from towers.launch import slurm
from benchmarks.workflow_harness import copy_workflow

from conftest import FIXTURES, ROOT


class Job:
    """What settle reads of a Snakemake job."""
    def __init__(self, name="parse_wiki", wildcards=None):
        self.name, self.wildcards_dict = name, wildcards if wildcards is not None else {"dataset": "enwiki-mini"}


def submitted(job_id="123", job=None):
    return types.SimpleNamespace(external_jobid=job_id, job=job or Job(), aux={"slurm_logfile": Path(f"{job_id}.log")})


def unknown(job_id):   # sacct where accounting is off, or that has no record of the job
    return ""


def test_a_job_gone_from_squeue_and_unknown_to_sacct_fails_after_three_checks_in_one_line():
    job = submitted()
    outcomes = [slurm.settle(job, {"99": "RUNNING"}, unknown) for _ in range(slurm.MISSED_CHECKS)]
    assert [o for o, _ in outcomes] == ["waiting"] * (slurm.MISSED_CHECKS - 1) + ["failed"]
    line = outcomes[-1][1]
    assert "\n" not in line and len(line) < 400, line
    assert line.startswith("SLURM job 123, rule parse_wiki (dataset=enwiki-mini): gone from squeue and unknown to "
                           "sacct for 3 status checks in a row"), line


def test_a_job_listed_again_or_squeue_not_answering_starts_no_failure():
    job = submitted()
    for listed in ({}, {}, {"123": "RUNNING"}, {}, None, None, None, {}):   # listed again: the count starts over
        assert slurm.settle(job, listed, unknown) == ("waiting", None)
    assert slurm.settle(job, {}, unknown)[0] == "failed"
    array_task = submitted("7_3")
    for _ in range(5):   # squeue may list an array's tasks under the array's id
        assert slurm.settle(array_task, {"7": "PENDING"}, unknown) == ("waiting", None)


@pytest.mark.parametrize("state, outcome", [("COMPLETED", "completed"), ("FAILED", "failed"), ("CANCELLED", "failed")])
def test_a_job_gone_from_squeue_that_sacct_has_finished_is_settled_at_once(state, outcome):
    got, line = slurm.settle(submitted(), {}, lambda job_id: state)
    assert got == outcome, (state, got, line)
    if outcome == "failed":
        assert line.startswith(f"SLURM job 123, rule parse_wiki (dataset=enwiki-mini): gone from squeue, {state} in "
                               "sacct"), line


@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_a_job_gone_from_squeue_that_sacct_still_has_running_fails_as_well(state):
    """Accounting never hears the end of a job slurmctld lost: its RUNNING there would keep the run waiting."""
    job = submitted()
    outcomes = [slurm.settle(job, {}, lambda job_id: state) for _ in range(slurm.MISSED_CHECKS)]
    assert [o for o, _ in outcomes] == ["waiting"] * (slurm.MISSED_CHECKS - 1) + ["failed"]
    assert outcomes[-1][1].startswith(f"SLURM job 123, rule parse_wiki (dataset=enwiki-mini): gone from squeue and "
                                      f"{state} in sacct for 3 status checks in a row"), outcomes[-1][1]


def test_sacct_state_reads_one_job_and_is_empty_where_sacct_is_missing_or_fails(tmp_path, monkeypatch):
    sacct = tmp_path / "sacct"
    sacct.write_text('#!/bin/sh\n[ "$2" = 41 ] && echo "CANCELLED by 0" && exit 0\n'
                     'echo "Slurm accounting storage is disabled" >&2; exit 1\n')
    sacct.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm.sacct_state("41") == "CANCELLED" and slurm.sacct_state("42") == ""
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert slurm.sacct_state("41") == ""


class PluginExecutor:
    """What bounded builds on of the plugin's Executor: check_active_jobs yields every job (as the plugin does for a
    job missing from its status query), a rate limiter, the run's id, the reports."""
    def __init__(self):
        self.run_uuid, self.logger, self.reports = "run-1", None, []
        self.status_rate_limiter = asyncio.Lock()

    async def check_active_jobs(self, active_jobs):
        for job in active_jobs:
            yield job

    def report_job_success(self, job):
        self.reports.append(("success", job.external_jobid, None))

    def report_job_error(self, job, msg=None, **kwargs):
        self.reports.append(("error", job.external_jobid, msg))


def test_the_executor_fails_the_job_squeue_lost_and_keeps_the_one_it_lists(monkeypatch):
    queries = []

    async def squeue_answer(command, logger):
        queries.append(command)
        return {"2": "RUNNING"}, 0.01

    monkeypatch.setattr(slurm, "sacct_state", unknown)
    executor = slurm.bounded(PluginExecutor, squeue_answer, lambda run_id: f"squeue --name {run_id}")()
    lost, listed = submitted("1"), submitted("2", Job("dense_search", {}))
    active = [lost, listed]
    for _ in range(slurm.MISSED_CHECKS):
        active = asyncio.run(collect(executor.check_active_jobs(active)))
    assert active == [listed] and queries == ["squeue --name run-1"] * slurm.MISSED_CHECKS
    assert [(kind, job_id) for kind, job_id, _ in executor.reports] == [("error", "1")]
    assert "SLURM job 1, rule parse_wiki (dataset=enwiki-mini): gone from squeue" in executor.reports[0][2]


async def collect(generator):
    return [item async for item in generator]


def test_the_workflow_extends_the_registered_slurm_executor_once(monkeypatch):
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry
    import snakemake_executor_plugin_slurm as plugin

    entry = ExecutorPluginRegistry().get_plugin("slurm")
    monkeypatch.setattr(entry, "executor", plugin.Executor)
    assert slurm.bound_vanished_jobs() and slurm.bound_vanished_jobs()
    assert entry.executor.towers_bounded and entry.executor.__bases__ == (plugin.Executor,)


def requirement(name: str) -> str:
    pins = dict(line.split("#")[0].strip().split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line.split("#")[0])
    return pins[name]


def test_the_plugin_is_the_version_the_extension_was_written_against():
    """On an upgrade of snakemake-executor-plugin-slurm this fails: read its check_active_jobs (does it still yield
    a job missing from its status query? does it settle such jobs itself now?), then update REVIEWED_ON."""
    import snakemake_executor_plugin_slurm as plugin

    assert slurm.REVIEWED_ON == requirement("snakemake-executor-plugin-slurm") == slurm.plugin_version()
    assert slurm.not_extendable(plugin) is None
    changed = types.SimpleNamespace(Executor=type("Executor", (), {"check_active_jobs": lambda self, jobs: []}))
    assert "not an async generator" in slurm.not_extendable(changed)


def test_an_executor_the_extension_does_not_fit_is_left_alone_and_said_in_one_line_once(monkeypatch, capsys):
    from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry

    entry = ExecutorPluginRegistry().get_plugin("slurm")
    monkeypatch.setattr(slurm, "_warned", False)
    monkeypatch.setattr(slurm, "not_extendable", lambda plugin: "job_status_query lacks query_job_status")
    monkeypatch.setattr(entry, "executor", type("Executor", (), {}))
    kept = entry.executor
    assert not slurm.bound_vanished_jobs() and not slurm.bound_vanished_jobs()
    assert entry.executor is kept
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: towers.launch.slurm: snakemake-executor-plugin-slurm "), lines


SLURM_COMMANDS = {"sbatch", "squeue", "scancel", "sacct", "sinfo", "scontrol", "srun", "salloc", "sacctmgr", "sshare"}


def commands(folder: Path, names) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\nexit 0\n")
        (folder / name).chmod(0o755)
    return str(folder)


def test_missing_client_commands_names_each_missing_one_on_slurm_only(tmp_path):
    assert slurm.missing_client_commands("slurm", commands(tmp_path / "all", slurm.CLIENT_COMMANDS)) is None
    assert slurm.missing_client_commands("local", str(tmp_path / "none")) is None
    line = slurm.missing_client_commands("slurm", commands(tmp_path / "two", ["sbatch", "squeue"]))
    assert line.startswith("executor slurm: scancel, sacct not found on PATH") and "nothing was removed" in line


def path_without_slurm(folder: Path) -> str:
    """PATH's commands, Slurm's client commands aside (links in one folder)."""
    folder.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if entry.name not in SLURM_COMMANDS and not os.path.lexists(link) and os.access(entry.path, os.X_OK):
                link.symlink_to(entry.path)
    return str(folder)


@pytest.mark.snakemake
def test_a_slurm_run_without_slurms_commands_stops_in_one_line_before_removing_anything(tmp_path):
    """Before: each job failed at submission ("No such file or directory: 'sacct'") after the clean-up had removed
    the run's outputs."""
    work = copy_workflow(tmp_path)
    shutil.copytree(FIXTURES, work / "fixtures")
    corpus = work / "artifacts/enwiki-mini/corpus"
    stale = [corpus / name for name in ("articles.jsonl", "redirects.json", "stats.json")]
    day_ago = time.time() - 86400   # older than the dump: the run would build them again, removing them first
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("old\n")
        os.utime(path, (day_ago, day_ago))
    env = {**os.environ, "PATH": path_without_slurm(tmp_path / "path")}
    result = subprocess.run([sys.executable, "-m", "snakemake", "artifacts/enwiki-mini/corpus/stats.json", "--profile",
                             "profiles/slurm", "--configfile", "fixtures/tiny.yaml"], cwd=work, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 1, result.stderr[-3000:]
    lines = [l for l in result.stderr.splitlines() if l.startswith("error: executor slurm:")]
    assert lines == ["error: executor slurm: sbatch, squeue, scancel, sacct not found on PATH (profiles/slurm submits "
                     "with sbatch, follows jobs with squeue, cancels with scancel, finds the account with sacct); run "
                     "from a Slurm login node or put Slurm's client commands on PATH; nothing was removed"], \
        result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "has been submitted" not in result.stderr
    assert all(path.read_text() == "old\n" for path in stale)
