"""How long a build takes on more cores: its own jobs and DAG, list-scheduled on 2 / 4 / 8 / 16 cores.

    python -m benchmarks.cores BUILD [--log LOG] [--cores 2 4 8 16] [--record KEY]

BUILD is a finished build (a clone after `make reproduce`, or a copy of the workflow built with a profile); LOG is
Snakemake's log of that build (default: the newest with finished jobs under BUILD/.snakemake/log). Each job's seconds are its wall in
the log (start to finish stamps, one-second resolution); its parents are the jobs that wrote one of its inputs (a
file, or a folder holding it). The simulation starts, whenever cores are free, the ready job with the highest
`priority`, then the longest remaining path to the end of the build (as Snakemake's own priorities and a
critical-path-first list scheduler would), each job taking its `threads` (at most the cores). Its answer at the
build's own cores is checked against the build's measured wall: the ratio says how far the model is off.
`uncontended`: the same with each job's time less what its stage record shows it waiting for a core (a build that
shared its machine with other work), an estimate of the build on a machine of its own.
Prints a JSON summary; `--record KEY` also writes it to benchmarks/results.json under KEY, replacing what KEY held
(naming the key is the purpose, as reproduce.py's --record). A log of a build that did not finish (fewer jobs
finished than its plan's total) is refused: its wall is not a whole build's."""
from __future__ import annotations

import argparse
import heapq
import json
import re
import subprocess
from pathlib import Path

from .build_records import jobs_of, positive, record_of
from .reproduce import save
from .workflow_harness import read_results, refuse

PROGRESS = re.compile(r"^(\d+) of (\d+) steps \(\d+%\) done$", re.M)


def log_jobs(log: Path) -> tuple[list[dict], float]:
    """Every finished job of a Snakemake log (build_records.jobs_of: rule, inputs, outputs, threads, began, wall
    seconds), and the build's wall from its first job's start to its last job's end."""
    jobs = jobs_of(log)
    if not jobs:
        refuse(log, "no finished job in this Snakemake log")
    # Snakemake's own "N of M steps done" lines give the plan's total: a killed or failed build has fewer
    progress = PROGRESS.findall(log.read_text())
    if not progress:
        refuse(log, f"{len(jobs)} jobs finished, but no 'N of M steps done' line says of how many: not a whole "
               "build's Snakemake log")
    if len(jobs) < (total := int(progress[-1][1])):
        refuse(log, f"an incomplete build: {len(jobs)} of {total} jobs finished (a whole build's log is needed)")
    return jobs, max(j["began"] + j["wall"] for j in jobs) - min(j["began"] for j in jobs)


def parents(jobs: list[dict]) -> list[set[int]]:
    """For each job, the jobs that wrote one of its inputs: the same path, or a folder output above it."""
    writer = {out.rstrip("/"): i for i, job in enumerate(jobs) for out in job["outputs"]}
    found = []
    for i, job in enumerate(jobs):
        mine = set()
        for path in job["inputs"]:
            path = path.rstrip("/")
            while path and path not in writer:   # an input inside a directory() output
                path = path.rpartition("/")[0]
            if path and writer[path] != i:
                mine.add(writer[path])
        found.append(mine)
    return found


def children(before: list[set[int]]) -> list[list[int]]:
    after = [[] for _ in before]
    for i, mine in enumerate(before):
        for j in mine:
            after[j].append(i)
    return after


def tails(jobs: list[dict], before: list[set[int]]) -> list[float]:
    """Each job's seconds plus the longest chain of jobs after it (the critical-path rank)."""
    after, rank = children(before), {}
    waiting = [len(mine) for mine in after]   # children not ranked yet: rank from the last jobs back
    todo = [i for i in range(len(jobs)) if not waiting[i]]
    while todo:
        i = todo.pop()
        rank[i] = jobs[i]["wall"] + max((rank[k] for k in after[i]), default=0.0)
        for j in before[i]:
            waiting[j] -= 1
            if not waiting[j]:
                todo.append(j)
    return [rank[i] for i in range(len(jobs))]


def simulate(jobs: list[dict], before: list[set[int]], cores: int, priority: dict[str, int]) -> float:
    """The makespan of list-scheduling the jobs on `cores`: ready jobs by (rule priority, critical-path rank),
    a job that does not fit the free cores passed over for the next one that does."""
    rank, after = tails(jobs, before), children(before)
    waiting = [len(mine) for mine in before]
    ready = [i for i in range(len(jobs)) if not waiting[i]]
    running: list[tuple[float, int, int]] = []   # (finish time, job, threads), a heap
    now, free = 0.0, cores
    while ready or running:
        for i in sorted(ready, key=lambda k: (-priority.get(jobs[k]["rule"], 0), -rank[k], k)):
            need = min(jobs[i]["threads"], cores)
            if need <= free:
                ready.remove(i)
                heapq.heappush(running, (now + jobs[i]["wall"], i, need))
                free -= need
        now, i, need = heapq.heappop(running)
        free += need
        for k in after[i]:
            waiting[k] -= 1
            if not waiting[k]:
                ready.append(k)
    return now


def rule_priorities(build: Path) -> dict[str, int]:
    """`priority:` of each rule in the build's workflow files (0 where none is set)."""
    found, rule = {}, None
    for path in [build / "Snakefile", *sorted((build / "workflow/rules").glob("*.smk"))]:
        for line in path.read_text().splitlines():
            if line.startswith("rule ") and line.rstrip().endswith(":"):
                rule = line[5:].rstrip(":").strip()
            elif rule and line.strip().startswith("priority:"):
                found[rule] = int(line.split(":", 1)[1].split("#")[0])
    return found


def critical_path(jobs: list[dict], before: list[set[int]]) -> list[str]:
    """The rules along the longest chain of jobs, first to last."""
    rank, after = tails(jobs, before), children(before)
    i = max(range(len(jobs)), key=lambda k: (rank[k], not before[k]))
    chain = [i]
    while after[i]:
        i = max(after[i], key=lambda k: rank[k])
        chain.append(i)
    return [f"{jobs[k]['rule']} ({jobs[k]['wall']:.0f} s)" for k in chain]


def uncontended(build: Path, jobs: list[dict]) -> list[dict]:
    """The jobs as they would run with a core each to themselves: a job whose stage record shows it computing for
    less of its wall than it ran (CPU seconds under seconds: it waited for a core that something else held) loses
    the difference. Multi-threaded stages (CPU seconds over seconds) and jobs without a record keep their wall.
    An estimate for a build that shared its machine; a build that did not is its own answer."""
    out = []
    for job in jobs:
        record = record_of(build, job["outputs"]) or {}
        waited = record.get("seconds", 0.0) - record.get("cpu_seconds", record.get("seconds", 0.0))
        out.append({**job, "wall": max(1.0, job["wall"] - waited) if waited > 0 else job["wall"]})
    return out


def measure(build: Path, log: Path, cores_list: list[int], built_cores: int) -> dict:
    jobs, wall = log_jobs(log)
    before = parents(jobs)
    priority = rule_priorities(build)
    simulated = {str(c): round(simulate(jobs, before, c, priority) / 60, 2) for c in sorted({*cores_list, built_cores})}
    alone = uncontended(build, jobs)
    times = build / "reproduce-times.json"   # python -m benchmarks.reproduce --run: the commit it built
    commit = (json.loads(times.read_text())["commit"] if times.is_file() else
              subprocess.run(["git", "rev-parse", "HEAD"], cwd=build, capture_output=True, text=True).stdout.strip())
    return {
        "log": str(log.relative_to(build)) if log.is_relative_to(build) else str(log),
        "commit": commit,
        "jobs": len(jobs),
        "job_seconds": round(sum(j["wall"] for j in jobs), 1),
        "measured_minutes": round(wall / 60, 2),
        "measured_cores": built_cores,
        "critical_path_minutes": round(max(tails(jobs, before)) / 60, 2),
        "critical_path": critical_path(jobs, before),
        "simulated_minutes": simulated,
        "simulated_over_measured": round(simulated[str(built_cores)] * 60 / wall, 3),
        "uncontended": {"job_seconds": round(sum(j["wall"] for j in alone), 1),
                        "critical_path_minutes": round(max(tails(alone, before)) / 60, 2),
                        "simulated_minutes": {str(c): round(simulate(alone, before, c, priority) / 60, 2)
                                              for c in sorted({*cores_list, built_cores})}},
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=Path, help="a finished build (a folder with .snakemake/log)")
    parser.add_argument("--log", type=Path, help="Snakemake's log of the build (default: the newest)")
    # positive: 0 or -4 cores would simulate as unlimited ones
    parser.add_argument("--built-cores", type=positive, default=2, help="the --cores the build ran with (default 2)")
    parser.add_argument("--cores", type=positive, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--record", metavar="KEY", help="write the summary to benchmarks/results.json under KEY "
                        "(replacing what KEY held)")
    args = parser.parse_args(argv)
    if not (args.build / "Snakefile").is_file():
        refuse(args.build, "not a build of this workflow (no Snakefile)")
    if args.record:
        read_results()   # a broken results file stops here, before the measurement
    # the newest log that ran jobs (a dry run or the report's own Snakemake call writes one too)
    logs = [p for p in sorted((args.build / ".snakemake/log").glob("*.snakemake.log")) if "Finished jobid" in p.read_text()]
    log = args.log or (logs[-1] if logs else None)
    if log is None or not log.is_file():
        refuse(args.log or args.build / ".snakemake/log", "no Snakemake log of a build there")
    summary = measure(args.build, log, args.cores, args.built_cores)
    if args.record:   # printed by save, once
        save(args.record, summary, replace=True)   # --record names the key: a refresh replaces it
    else:
        print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
