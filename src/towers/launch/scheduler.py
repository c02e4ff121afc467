"""A fix to Snakemake's job scheduler, applied by the workflow (workflow/rules/common.smk) as it is read.

Snakemake's submission limit (--max-jobs-per-timespan, 100/1s by default) makes the scheduler look at the ready
jobs again a second after each look that left jobs waiting, through a new timer every time. While jobs wait for
cores, every finished job adds one more of these timers, and each keeps starting another when it fires: after a
few hundred jobs of a local build, a hundred timers made the scheduler look a hundred times a second and keep
25-40% of one of two cores busy, away from the jobs (snakemake/snakemake#2967 reports the same growth). One
pending look is enough to honour the limit; the fix keeps at most one.

The method it replaces is private: the fix applies only where that method is still the one it was written
against (REPLACED, Snakemake 9.27.1's), and says so in one line on standard error where it is not, once a
process. tests/workflow/test_scheduler.py fails on a Snakemake whose method differs."""
from __future__ import annotations

import inspect
import sys
import textwrap
import threading

METHOD = "_schedule_reevalutation"   # (sic) Snakemake's own spelling
REVIEWED_ON = "9.27.1"   # requirements.txt's Snakemake, whose method REPLACED is
REPLACED = ("def _schedule_reevalutation(self, delay: int) -> None:\n"
            "    threading.Timer(\n"
            "        delay,\n"
            "        lambda: self._open_jobs.release(),\n"
            "    ).start()\n")

_pending = threading.Lock()
_warned = False


def one_look_pending(scheduler, delay: float) -> None:
    """JobScheduler._schedule_reevalutation with at most one timer pending per scheduler."""
    with _pending:
        if getattr(scheduler, "_towers_look_pending", False):
            return
        scheduler._towers_look_pending = True

    def look():
        with _pending:
            scheduler._towers_look_pending = False
        scheduler._open_jobs.release()

    threading.Timer(delay, look).start()


def snakemake_version() -> str:
    try:
        from importlib.metadata import version
        return version("snakemake")
    except Exception:   # not installed as a distribution: say so rather than fail the workflow
        return "(unknown version)"


def not_replaceable(scheduler_class) -> str | None:
    """Why the fix cannot replace `scheduler_class`'s method (None: it can, or already has)."""
    method = getattr(scheduler_class, METHOD, None)
    if method is None:
        return "has no such method"
    if method is one_look_pending:
        return None
    try:
        source = textwrap.dedent(inspect.getsource(method))
    except (OSError, TypeError):
        return "cannot be read to check it"
    if source != REPLACED:
        return f"differs from Snakemake {REVIEWED_ON}'s, the one the fix replaces"
    return None


def keep_one_pending_look(scheduler_class=None) -> bool:
    """Patch Snakemake's scheduler class (once); False, with one warning line a process, where this Snakemake's
    method is missing or not the one the fix was written against (left as it is then)."""
    global _warned
    if scheduler_class is None:
        try:
            from snakemake.scheduling.job_scheduler import JobScheduler as scheduler_class
        except ImportError:
            pass
    why = not_replaceable(scheduler_class) if scheduler_class else "is not there (no snakemake.scheduling.job_scheduler)"
    if why is None:
        setattr(scheduler_class, METHOD, one_look_pending)
        return True
    if not _warned:
        _warned = True
        print(f"warning: towers.launch.scheduler: Snakemake {snakemake_version()}: JobScheduler.{METHOD} {why}; the fix "
              "is not applied (its scheduler adds a timer a finished job while jobs wait: more of its own CPU on "
              "long local builds)", file=sys.stderr)
    return False
