"""towers.launch.scheduler keeps one re-check of the ready jobs pending where Snakemake's scheduler would add a timer
with every finished job while others wait for cores; the workflow applies it as it is read."""
import inspect
import sys
import textwrap
import threading

import pytest

from towers.launch import scheduler
from benchmarks.workflow_harness import watched

from conftest import ROOT


class Waiting:
    """What the fix touches of a JobScheduler: the semaphore its loop waits on."""
    def __init__(self):
        self._open_jobs = threading.Semaphore(0)


def released(semaphore) -> int:
    count = 0
    while semaphore.acquire(timeout=0.3):
        count += 1
    return count


def test_many_looks_asked_for_while_one_is_pending_start_one_timer():
    waiting, before = Waiting(), threading.active_count()
    for _ in range(50):
        scheduler.one_look_pending(waiting, 0.2)
    assert threading.active_count() - before <= 1
    assert released(waiting._open_jobs) == 1   # the loop looks once
    scheduler.one_look_pending(waiting, 0.05)   # once it has fired, the next wait asks for another
    assert released(waiting._open_jobs) == 1


def requirement(name: str) -> str:
    pins = dict(line.split("#")[0].strip().split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line.split("#")[0])
    return pins[name]


def test_snakemakes_method_is_still_the_one_the_fix_replaces():
    """The fix swaps a private method of Snakemake's: on an upgrade that changes it, this fails here (and the
    workflow says so in one warning line and runs unpatched) instead of patching what it was not written for.
    Read the new method; where the fix still holds, update scheduler.REPLACED and REVIEWED_ON."""
    from snakemake.scheduling.job_scheduler import JobScheduler

    assert scheduler.REVIEWED_ON == requirement("snakemake") == scheduler.snakemake_version()
    method = JobScheduler.__dict__[scheduler.METHOD]
    if method is not scheduler.one_look_pending:   # (patched already where this process read a Snakefile)
        assert list(inspect.signature(method).parameters) == ["self", "delay"]
        assert textwrap.dedent(inspect.getsource(method)) == scheduler.REPLACED
    assert scheduler.not_replaceable(JobScheduler) is None


class AsReviewed:
    """A class whose method is word for word Snakemake 9.27.1's."""
    def _schedule_reevalutation(self, delay: int) -> None:
        threading.Timer(
            delay,
            lambda: self._open_jobs.release(),
        ).start()


class Changed:
    def _schedule_reevalutation(self, delay: int) -> None:
        threading.Timer(delay, self._open_jobs.release).start()


def test_the_fix_applies_to_the_method_as_reviewed_and_again_without_a_word(capsys, monkeypatch):
    monkeypatch.setattr(scheduler, "_warned", False)
    assert scheduler.keep_one_pending_look(AsReviewed) and scheduler.keep_one_pending_look(AsReviewed)
    assert AsReviewed._schedule_reevalutation is scheduler.one_look_pending
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("scheduler_class", [Changed, type("Missing", (), {})])
def test_a_changed_or_missing_method_is_left_alone_and_said_in_one_line_once(scheduler_class, capsys, monkeypatch):
    monkeypatch.setattr(scheduler, "_warned", False)
    was = scheduler_class.__dict__.get(scheduler.METHOD)
    assert not scheduler.keep_one_pending_look(scheduler_class) and not scheduler.keep_one_pending_look(scheduler_class)
    assert scheduler_class.__dict__.get(scheduler.METHOD) is was
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: towers.launch.scheduler: Snakemake ")
    assert f"Snakemake {scheduler.snakemake_version()}: JobScheduler._schedule_reevalutation " in lines[0]


def test_two_schedulers_each_keep_their_own():
    first, second = Waiting(), Waiting()
    scheduler.one_look_pending(first, 0.05)
    scheduler.one_look_pending(second, 0.05)
    assert released(first._open_jobs) == 1 and released(second._open_jobs) == 1


SLEEPS = """
{fix}
rule all:
    input: expand("out/{{i}}.txt", i=range(40))
rule sleep:
    output: "out/{{i}}.txt"
    shell: "sleep 0.3; touch {{output}}"
"""


def most_threads(workdir, fix: str) -> int:
    workdir.mkdir()
    (workdir / "Snakefile").write_text(SLEEPS.format(fix=fix))
    done = watched([sys.executable, "-m", "snakemake", "--cores", 2, "--quiet"], workdir)
    assert done["returncode"] == 0, done["stderr"][-2000:]
    return done["threads"]


@pytest.mark.snakemake
def test_a_run_with_jobs_waiting_keeps_its_thread_count(tmp_path):
    """40 short jobs on 2 cores: Snakemake's own scheduler grows a timer thread a finished job; with the fix the
    count stays where a few jobs put it (the tiny end-to-end run checks the workflow applies it)."""
    as_is = most_threads(tmp_path / "as_is", "")
    fixed = most_threads(tmp_path / "fixed", "from towers.launch.scheduler import keep_one_pending_look\nkeep_one_pending_look()")
    assert as_is >= fixed + 15, (as_is, fixed)
