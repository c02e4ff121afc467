"""Two fixes for runs on Slurm (profiles/slurm, snakemake-executor-plugin-slurm), applied by the workflow
(workflow/rules/common.smk).

A job that leaves squeue. The plugin takes a job missing from its status query's answer for one the query does not
show yet, and waits for it: a job whose record slurmctld dropped (finished more than MinJobAge ago, a slurmctld
restart that lost its state) kept a run waiting for good, SIGTERM included. Here a job the plugin still waits on and
squeue no longer lists is asked of sacct, which knows finished jobs where accounting is on; where sacct has not seen
it finish, it fails once squeue has missed it MISSED_CHECKS status checks in a row, in one line naming its Slurm job
id and rule (the profile's `retries` then submit it again). sacct's PENDING or RUNNING does not keep it waiting:
accounting never hears the end of a job slurmctld lost. A squeue that does not answer (slurmctld down or
restarting) counts as no check. `scontrol show job` reads the same records as squeue, so it is not asked.

Slurm's commands missing. Without them on PATH the plugin fails each job's submission only after the workflow's
clean-up has removed that run's outputs; missing_client_commands is the line the workflow stops with before."""
from __future__ import annotations

import inspect
import shutil
import subprocess
import sys

REVIEWED_ON = "2.8.0"   # requirements.txt's snakemake-executor-plugin-slurm, whose executor this extends
MISSED_CHECKS = 3       # status checks in a row (the plugin's: 40 s apart at first, then 10 s more each)
MISSED = "towers_missed_checks"   # key of a job's count in its SubmittedJobInfo.aux
# what profiles/slurm runs: sbatch submits, squeue follows the jobs (slurm-status-command), scancel cancels them on
# Ctrl-C, and sacct guesses the account where the profile sets no slurm_account
CLIENT_COMMANDS = ("sbatch", "squeue", "scancel", "sacct")
# sacct's states of a job that ended otherwise than COMPLETED (the plugin's own list; PREEMPTED jobs are requeued)
FAILED_STATES = {"BOOT_FAIL", "CANCELLED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "ERROR"}

_warned = False


def missing_client_commands(executor: str, path: str | None = None) -> str | None:
    """The line a run on `executor` stops with where Slurm's client commands are not on PATH (`path`: os.environ's
    by default); None where none is missing or the executor is not slurm."""
    if executor != "slurm":
        return None
    missing = [name for name in CLIENT_COMMANDS if shutil.which(name, path=path) is None]
    if not missing:
        return None
    return (f"executor slurm: {', '.join(missing)} not found on PATH (profiles/slurm submits with sbatch, follows "
            "jobs with squeue, cancels with scancel, finds the account with sacct); run from a Slurm login node or "
            "put Slurm's client commands on PATH; nothing was removed")


def sacct_state(job_id: str) -> str:
    """The job's state as Slurm's accounting has it: '' where sacct is missing, fails (no accounting) or does not
    know the job."""
    try:
        done = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    words = done.stdout.split() if done.returncode == 0 else []
    return words[0] if words else ""   # "CANCELLED by 0" -> CANCELLED


def described(job) -> str:
    """'rule <name> (<wildcard>=<value>, ...)' of a Snakemake job."""
    wildcards = ", ".join(f"{k}={v}" for k, v in (getattr(job, "wildcards_dict", None) or {}).items())
    return f"rule {job.name}" + (f" ({wildcards})" if wildcards else "")


def settle(job_info, listed: dict | None, state_of=None) -> tuple[str, str | None]:
    """What becomes of a job the plugin still waits on, given squeue's answer this check (Slurm job id -> state;
    None: squeue did not answer; `state_of`: sacct_state by default): ("waiting", None), ("completed", None) or
    ("failed", the line it fails with)."""
    job_id = job_info.external_jobid
    if listed is None:
        return "waiting", None
    if job_id in listed or job_id.split("_")[0] in listed:   # an array task may be listed under its array's id
        job_info.aux.pop(MISSED, None)
        return "waiting", None
    state = (state_of or sacct_state)(job_id)
    if state == "COMPLETED":
        return "completed", None
    if state in FAILED_STATES:
        return "failed", f"SLURM job {job_id}, {described(job_info.job)}: gone from squeue, {state} in sacct. "
    # unknown to sacct, or still pending or running there: accounting never hears the end of a job slurmctld lost
    missed = job_info.aux[MISSED] = job_info.aux.get(MISSED, 0) + 1
    if missed < MISSED_CHECKS:
        return "waiting", None
    known = f"{state} in sacct" if state else "unknown to sacct"
    return "failed", (f"SLURM job {job_id}, {described(job_info.job)}: gone from squeue and {known} for {missed} "
                      "status checks in a row (its record expired, MinJobAge, or slurmctld lost it); outcome "
                      "unknown, so it counts as failed. ")   # Snakemake appends its own sentence


def bounded(base, query_job_status, squeue_command):
    """`base` (the plugin's Executor) with the jobs it still waits on settled (settle) after each status check:
    `query_job_status(command, logger)` and `squeue_command(run_id)` are the plugin's own."""

    class Executor(base):
        towers_bounded = True

        async def check_active_jobs(self, active_jobs):
            waiting = [job async for job in super().check_active_jobs(active_jobs)]
            listed = None
            if waiting:
                async with self.status_rate_limiter:
                    listed, _ = await query_job_status(squeue_command(self.run_uuid), self.logger)
            for job in waiting:
                outcome, line = settle(job, listed)
                if outcome == "completed":
                    self.report_job_success(job)
                elif outcome == "failed":
                    log = job.aux.get("slurm_logfile")
                    self.report_job_error(job, msg=line, aux_logs=[str(log)] if log else [])
                else:
                    yield job

    Executor.__name__ = Executor.__qualname__ = f"Bounded{base.__name__}"
    return Executor


def not_extendable(plugin) -> str | None:
    """Why the plugin module's executor cannot be extended here (None: it can)."""
    status = getattr(plugin, "job_status_query", None)
    if not inspect.isasyncgenfunction(getattr(getattr(plugin, "Executor", None), "check_active_jobs", None)):
        return "Executor.check_active_jobs is not an async generator"
    if not all(callable(getattr(status, name, None)) for name in ("query_job_status", "query_job_status_squeue")):
        return "job_status_query lacks query_job_status or query_job_status_squeue"
    return None


def plugin_version() -> str:
    try:
        from importlib.metadata import version
        return version("snakemake-executor-plugin-slurm")
    except Exception:   # not installed as a distribution: say so rather than fail the workflow
        return "(unknown version)"


def bound_vanished_jobs(registry=None) -> bool:
    """Make the registered Slurm executor this module's (once). False where the plugin is not installed (no run can
    use it then), or, with one warning line a process, where it lacks what the extension builds on (left as it is)."""
    global _warned
    try:
        import snakemake_executor_plugin_slurm as plugin
        if registry is None:
            from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry
            registry = ExecutorPluginRegistry()
    except ImportError:
        return False
    if not registry.is_installed("slurm"):
        return False
    entry = registry.get_plugin("slurm")
    if getattr(entry.executor, "towers_bounded", False):
        return True
    why = not_extendable(plugin)
    if why is None:
        status = plugin.job_status_query
        entry.executor = bounded(entry.executor, status.query_job_status, status.query_job_status_squeue)
        return True
    if not _warned:
        _warned = True
        print(f"warning: towers.launch.slurm: snakemake-executor-plugin-slurm {plugin_version()}: {why}; a job that leaves "
              "squeue is not settled (the run waits for it)", file=sys.stderr)
    return False
