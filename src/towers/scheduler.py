"""A fix to Snakemake's job scheduler, applied by the workflow (workflow/rules/common.smk) as it is read.

Snakemake's submission limit (--max-jobs-per-timespan, 100/1s by default) makes the scheduler look at the ready
jobs again a second after each look that left jobs waiting, through a new timer every time. While jobs wait for
cores, every finished job adds one more of these timers, and each keeps starting another when it fires: after a
few hundred jobs of a local build, a hundred timers made the scheduler look a hundred times a second and keep
25-40% of one of two cores busy, away from the jobs (snakemake/snakemake#2967 reports the same growth). One
pending look is enough to honour the limit; the fix keeps at most one."""
from __future__ import annotations

import threading

_pending = threading.Lock()


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


def keep_one_pending_look() -> bool:
    """Patch Snakemake's scheduler class (once); False where this Snakemake has no such method to patch."""
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    if not hasattr(JobScheduler, "_schedule_reevalutation"):   # (sic) Snakemake's own spelling
        return False
    JobScheduler._schedule_reevalutation = one_look_pending
    return True
