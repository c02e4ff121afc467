# Included first. Fixes to Snakemake's scheduler and Slurm executor, global wildcard patterns, the clean-up before a
# run, and the profile marker every table depends on. What the rules read, write and pass their stages is planned
# in src/towers/plan/ (one Plan of the config, Plan.of(workflow), which each rule file asks for by name); rule
# files hold rules only.

import os
import shlex
import sys
import time

from towers.launch import warm
from towers.plan import Plan, future_dated, mark_profile
from towers.launch.scheduler import keep_one_pending_look
from towers.launch.slurm import bound_vanished_jobs, missing_client_commands

plan = Plan.of(workflow)
# A warm-start socket inherited from the shell (another checkout's run, a shell opened from one of its jobs) is
# not this run's: its jobs would run that checkout's code. Only a server this run starts (onstart, below) is
# passed on; the job processes Snakemake spawns itself (`run:` rules: exec mode subprocess) keep what it gave them.
if not workflow.subprocess_exec:
    os.environ.pop(warm.ENV, None)
if plan.software.offline:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a profile that names no hub model never reaches the hub

# --- the scheduler ----------------------------------------------------------------------------------

# At most one pending re-check of the ready jobs: Snakemake's own scheduler adds a timer with every finished job
# while others wait for cores, and its growing busyness takes a share of the cores (towers.launch.scheduler). Where this
# Snakemake's method is not the one the fix replaces, one warning line says so and the scheduler runs as it is.
keep_one_pending_look()

# On Slurm, a job that leaves squeue (its record expired or lost by slurmctld) is settled through sacct or failed
# after a few status checks, in one line naming it, instead of keeping the run waiting for good (towers.launch.slurm).
bound_vanished_jobs()


wildcard_constraints:
    dataset="[a-z0-9-]+",
    split=plan.data.any_split,  # "dev": a passage dataset's one split; "all": every question
    kind="emb|bert",
    margin=r"[0-9]+(\.[0-9]+)?",
    seed="[0-9]+",
    index="[a-z0-9]+",
    model="[a-z0-9.+-]+",


# --- before a run -----------------------------------------------------------------------------------


# Nothing stale after a failure. Snakemake does not rerun a present output only because an input of it is
# missing, and schedules a job whose output is missing only when a job that must run asks for it. So when a
# run that rebuilds A -> B -> table (say, after a params change) stops at A (a bug, a kill -9, an out-of-memory
# kill, Ctrl-C), the old B and table look finished to the next run ("Nothing to be done"), or a table is
# rebuilt from some new and some old rows. Hence, before any job starts, every output of every job this run
# will run is removed, as Snakemake removes each job's outputs just before that job: a stop part-way leaves
# those outputs missing, and the next run rebuilds them. Dry runs (-n, which run no hook) and --touch remove
# nothing; training state (train-state/) is no output, so training still resumes. `dvc repro` runs this too.
#
# Then local runs of the pip route fork their stages from one process that has imported torch and transformers
# (towers.launch.warm; about 3 CPU seconds a model job less). Jobs started before it listens, and every job where it does
# not run (clusters, conda, `warm_start: false`), start a process of their own.
onstart:
    no_slurm = missing_client_commands(workflow.executor_plugin.name)
    if no_slurm:  # else every job fails at submission, after the clean-up below has removed its outputs
        sys.exit(f"error: {no_slurm}")
    future = future_dated([f for job in workflow.dag.needrun_jobs() for f in job.input])
    if future:  # else every job ends in Snakemake's clock-skew error, and every rerun too, until that date
        sys.exit(
            f"error: {future[0]}: modified in the future ({future[1]}, now {time.strftime('%Y-%m-%d %H:%M:%S')}); "
            f"set its time to now with: touch {shlex.quote(future[0])}"
            + (" (and the files under it)" if os.path.isdir(future[0]) else "")
        )
    if not workflow.touch:
        for job in list(workflow.dag.needrun_jobs()):
            workflow.async_run(job.remove_existing_output())
    if config.get("warm_start", True) and workflow.local_exec and not workflow.touch and not plan.software.conda:
        os.makedirs("logs", exist_ok=True)
        with open("logs/warm-start.log", "a") as log:
            socket_path = warm.launch(os.getpid(), log)  # in a folder of this user's alone
        if socket_path:
            os.environ.update({warm.ENV: socket_path})  # set, not read: the jobs' shells inherit it


# Every table and figure depends on a marker file of the profile they are made with (plan.profile_marker), written
# here when it is missing. A table committed and found in a fresh clone (Snakemake has no record of it there, and
# would take it as up to date) is then older than the marker and is rebuilt; a table another profile made has
# another marker as input, so switching profiles reruns the tables, while the jobs below them keep their own
# records. One marker a profile, never rewritten: a dry run of another profile leaves this one's tables alone. (A
# file made by a rule would not do; Snakemake does not rerun a finished target only because an input of it is
# missing.) Rules name it as local(plan.profile_marker): written where snakemake parses this file, never through a
# storage provider.
mark_profile(plan.profile_marker, config["profile"])
