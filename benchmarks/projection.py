"""`python -m benchmarks.reproduce --project DIR`: the clean run's minutes per paper projected from a finished
build's stage records and the measured clean run's parallelism and per-job overhead (a projection, not a
measurement)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from towers.reports import papers as paper_list

from .build_records import job_blocks, record_of


def job_key(job: dict) -> str:
    return job["rule"] + ":" + ",".join(job["outputs"])


def jobs_by_paper(folder: Path, rest: bool = True) -> dict[str, tuple[str, dict]]:
    """Every job a clean build plans, by job_key, with the first paper (papers.yaml order) whose targets need it;
    with `rest`, then the jobs `all`, the check and the report add, as "rest"."""
    steps = [(paper["id"], paper_list.targets(paper)) for paper in paper_list.load(root=folder).values()]
    if rest:
        steps.append(("rest", ["all", "check", "results/report.html"]))
    owned: dict[str, tuple[str, dict]] = {}
    targets: list[str] = []
    for name, more in steps:
        targets += more
        for job in clean_build_jobs(folder, targets):
            owned.setdefault(job_key(job), (name, job))
    return owned


def clean_build_jobs(folder: Path, targets: list[str]) -> list[dict]:
    """Every job a clean build of `targets` runs (a forced dry run in `folder`): rule and outputs."""
    dry = subprocess.run([str(folder / ".venv/bin/snakemake"), "-n", "--forceall", "--cores", "2", *targets],
                         cwd=folder, capture_output=True, text=True, check=True).stdout
    return [{"rule": job["rule"], "outputs": job["outputs"]}
            for kind, job in job_blocks(dry.splitlines()) if kind == "job"]


def project(folder: Path, measured: dict) -> dict:
    """The clean run's seconds a build's records imply: each paper's new jobs (papers.yaml order, as --run builds
    them) summed from their stage records, plus the measured run's overhead a job, over its parallelism. A build
    where a job that writes files has no record (not built, or another profile's) is refused: its jobs would
    count as overhead only."""
    parallel = measured["job_seconds"] / measured["clean_run_seconds"]
    overhead = measured["startup_seconds"] / measured["jobs"]
    owned = jobs_by_paper(folder)
    seconds = dict.fromkeys([*(p["id"] for p in paper_list.load(root=folder).values()), "rest"], 0.0)
    unrecorded = [job for _, job in owned.values() if job["outputs"] and record_of(folder, job["outputs"]) is None]
    if unrecorded:   # a job that writes files writes its stage's record beside them: these never ran here
        first = unrecorded[0]
        sys.exit(f"error: {folder}: {len(unrecorded)} of {len(owned)} jobs have no stage record (the first: rule "
                 f"{first['rule']}, {first['outputs'][0]}): not a finished build of this checkout's plan; nothing "
                 "projected")
    per_rule, without_record = {}, 0
    for name, job in owned.values():
        meta = record_of(folder, job["outputs"])
        without_record += meta is None
        work = (meta or {}).get("seconds", 0.0) + overhead
        seconds[name] += work
        row = per_rule.setdefault(job["rule"], {"jobs": 0, "job_seconds": 0.0})
        row["jobs"] += 1
        row["job_seconds"] += work
    per_paper = {name: s / parallel for name, s in seconds.items()}
    return {"projected_clean_run_seconds": round(sum(per_paper.values()), 1), "clean_run_goal_seconds": 5400,
            "per_paper_minutes": {k: round(v / 60, 1) for k, v in per_paper.items()}, "jobs": len(owned), "jobs_without_record": without_record,
            "calibrated_on": {"commit": measured["commit"], "parallelism": round(parallel, 3),
                              "overhead_seconds_a_job": round(overhead, 2)},
            "per_rule": {k: {"jobs": v["jobs"], "job_seconds": round(v["job_seconds"], 1)}
                         for k, v in sorted(per_rule.items(), key=lambda kv: -kv[1]["job_seconds"])},
            "how": "python -m benchmarks.reproduce --project DIR: a forced dry run per paper step, each job's stage record "
                   "seconds + the measured run's start-up a job, divided by its parallelism (job seconds over "
                   "clean-run seconds); setup excluded, as in clean_run_seconds. A projection on the machine "
                   "that wrote the records, not a measurement"}
