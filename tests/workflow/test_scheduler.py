"""towers.scheduler keeps one re-check of the ready jobs pending where Snakemake's scheduler would add a timer
with every finished job while others wait for cores; the workflow applies it as it is read."""
import sys
import threading

import pytest

from towers import scheduler
from workflow_helpers import watched


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
    fixed = most_threads(tmp_path / "fixed", "from towers.scheduler import keep_one_pending_look\nkeep_one_pending_look()")
    assert as_is >= fixed + 15, (as_is, fixed)
