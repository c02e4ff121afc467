"""A clean `make reproduce` in a fresh clone, timed: total wall, per paper, per rule, and the share of each job
that is process start-up.

    python -m benchmarks.reproduce --run DIR        clone this checkout's HEAD into DIR, `make setup`, then build each
                                                    paper's targets in papers.yaml order, then `all check` and the
                                                    report (what `make reproduce` builds); times go to
                                                    DIR/reproduce-times.json; with --whole: `make setup`, then one
                                                    `make reproduce`, as a user runs it (no paper waits for the last
                                                    job of the one before)
    python -m benchmarks.reproduce --analyse DIR    read those times, Snakemake's logs and the stage records; compare
                                                    the tables and figures byte for byte with those committed at this
                                                    checkout's HEAD (results_moved_against); write the key
                                                    `reproduce` of benchmarks/results.json (--key another;
                                                    --before KEY sets an earlier run's totals beside it)
    python -m benchmarks.reproduce --warm DIR       in that finished build, rerun a few encoding and dense-search jobs
                                                    with warm starts off, then on, twice over (`warm_start`, towers.launch.warm):
                                                    wall seconds of each, and whether every output came back
                                                    byte-identical (key `warm_start`); --configfile F: a
                                                    fresh_copy built on that profile (the tiny one), its src/ used;
                                                    --key K: write under K
    python -m benchmarks.reproduce --scheduler DIR  in a build of a commit before towers.launch.scheduler's fix, Chang et al.'s
                                                    dense searches and evaluations rerun with Snakemake's scheduler as
                                                    it is and with the fix, alternated: wall seconds, and Snakemake's
                                                    own CPU seconds and threads (key `scheduler_load`)
    python -m benchmarks.reproduce --run DIR --target T...  `make setup`, then one `snakemake T...` (the headline:
                                                    --target results/table1.csv, --analyse DIR --key reproduce_table1)
    python -m benchmarks.reproduce --run DIR --commit REV   the same clean build of an older commit (a baseline)
    python -m benchmarks.reproduce --resume DIR     go on with a --run the machine stopped (steps_resumed names it)
    python -m benchmarks.reproduce --rerun-step NAME DIR   force a finished step's jobs to rerun (after copying a fix
                                                    into DIR): its seconds then and now, warm starts, identical results
    python -m benchmarks.reproduce --before-after OLD NEW   every tracked result of two finished builds, file by file:
                                                    identical or not, and how many cells of a table moved
                                                    (key `reproduce_tables_compared`, or --key)
    python -m benchmarks.reproduce --project DIR    a projection, not a measurement: the clean run's minutes, per paper,
                                                    from a finished build's stage records (incremental builds too: each
                                                    job's record is the one its last run wrote) and the measured clean
                                                    run's parallelism and per-job overhead (key `reproduce`); the records
                                                    carry that build machine's speed (key `reproduce_projection`);
                                                    refused where a job of the plan has no record

A result is printed and kept in benchmarks/results.json under its key; a key the file holds already (a committed
number) is replaced only with --record.

Per paper minutes are the wall time of building that paper's targets after the papers before it, so jobs
shared between papers (the collection, BM25, the tokenizer) count for the first paper that needs them; of a
--whole run, each paper's share of the job seconds (the same attribution) times the run's wall."""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from towers.config.config_yaml import ParamsError  # noqa: E402
from towers.reports import papers as paper_list  # noqa: E402
from towers.retrieval.latency import cpu_model  # noqa: E402
from .workflow_harness import RESULTS, record, read_results, watched  # noqa: E402


def kernels_of(folder: Path) -> str:
    """The vector kernels torch computed with in a build (its stage records name them)."""
    for meta in sorted((folder / "artifacts").glob("*/dense/*/*/model.meta.json")):
        kernels = json.loads(meta.read_text()).get("torch_cpu_kernels")
        if kernels:
            return kernels
    return "unknown"


def run(folder: Path, cores: int, commit: str | None = None, resume: bool = False, whole: bool = False,
        targets: list[str] = ()) -> None:
    times_file = folder / "reproduce-times.json"
    if resume:
        times = json.loads(times_file.read_text())
    else:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(folder)], check=True)
        if commit:
            subprocess.run(["git", "checkout", "-q", commit], cwd=folder, check=True)
        times = {"commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                          check=True).stdout.strip(), "cores": cores, "cpu": cpu_model(),
                 "steps": [], "whole": whole,
                 "targets": list(targets)}
    done_steps = {s["name"] for s in times["steps"] if not s["rc"] and not s.get("interrupted")}
    snakemake = [str(folder / ".venv/bin/snakemake"), "--cores", str(cores)]

    def step(name: str, cmd: list[str]) -> None:
        if name in done_steps:
            return
        log_path = folder / f"reproduce-{name}.log"
        if resume and log_path.exists():
            keep_interrupted(folder, times, name, log_path)
            subprocess.run([*snakemake, "--unlock"], cwd=folder, check=True, capture_output=True)
            cmd = [*cmd, "--rerun-incomplete"]
        began = time.time()
        with open(log_path, "w") as log:
            done = subprocess.run(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
        times["steps"].append({"name": name, "began": began, "seconds": round(time.time() - began, 1),
                               "rc": done.returncode})
        times_file.write_text(json.dumps(times, indent=1) + "\n")
        if done.returncode:
            sys.exit(f"{name} failed (exit {done.returncode}): see {log_path}")

    step("setup", ["make", "setup"])
    if times.get("whole"):   # what a user runs: one Snakemake over every target (no idle tail between papers)
        step("reproduce", ["make", "reproduce", f"CORES={cores}"])
        return
    if times.get("targets"):   # one Snakemake run over the targets a user names (snakemake results/table1.csv)
        step("targets", [*snakemake, *times["targets"]])
        return
    papers_of = folder if (folder / paper_list.PAPERS_FILE).exists() else ROOT   # before papers.yaml: same targets
    for paper in paper_list.load(root=papers_of).values():
        step(paper["id"], [*snakemake, *paper_list.targets(paper)])
    step("rest", [*snakemake, "all", "check", "results/report.html"])


def keep_interrupted(folder: Path, times: dict, name: str, log_path: Path) -> None:
    """A step the machine stopped in the middle (no time recorded): its part counts from the end of the step
    before it to its log's last write, marked interrupted; its log moves aside for the analysis."""
    last = times["steps"][-1]
    began = last["began"] + last["seconds"]
    times["steps"].append({"name": name, "began": began, "seconds": round(log_path.stat().st_mtime - began, 1),
                           "rc": None, "interrupted": True})
    log_path.rename(folder / f"reproduce-{name}.interrupted-{len(times['steps'])}.log")


STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")
STARTED = re.compile(r"^(?:local)?rule (\w+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")


def job_blocks(lines):
    """Snakemake's job blocks (a log or a dry run), in order: ("job", {rule, inputs, outputs, threads, jobid}) when
    a block's jobid line ends it, ("stamp", seconds) for a time stamp, ("finished", jobid) for a finished job."""
    current = None
    for line in lines:
        if m := STAMP.match(line):
            yield "stamp", datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y").timestamp()
        elif m := STARTED.match(line):
            current = {"rule": m.group(1), "inputs": [], "outputs": [], "threads": 1}
        elif current and line.startswith(("    input: ", "    output: ")):
            field, paths = line.strip().split(": ", 1)
            current[field + "s"] = paths.split(", ")
        elif current and line.startswith("    threads: "):
            current["threads"] = int(line.split()[-1])
        elif current and line.startswith("    jobid: "):
            yield "job", {**current, "jobid": line.split()[-1]}
            current = None
        elif m := FINISHED.match(line):
            yield "finished", m.group(1)


def jobs_of(log: Path) -> list[dict]:
    """Each finished job of a Snakemake log: rule, outputs, and wall seconds from its start and finish stamps
    (the log's one-second resolution)."""
    jobs, started, stamp = [], {}, None
    for kind, value in job_blocks(log.read_text().splitlines()):
        if kind == "stamp":
            stamp = value
        elif kind == "job":
            started[value.pop("jobid")] = {**value, "began": stamp}
        else:
            job = started.pop(value)
            jobs.append({**job, "wall": stamp - job["began"]})
    return jobs


def record_of(folder: Path, outputs: list[str]) -> dict | None:
    """The stage record (<output>.meta.json) a job wrote, if its stage writes one."""
    for output in outputs:
        meta = folder / (output.rstrip("/") + ".meta.json")
        if meta.exists():
            return json.loads(meta.read_text())
    return None


def model_stack_import_seconds(folder: Path) -> float:
    """Importing torch and transformers' BERT in a fresh process of the clone's venv, the median of 3: what a
    stage that loads a model pays before its work (inside its record's seconds)."""
    code = ("import time; t = time.perf_counter(); import torch, transformers; from transformers import BertModel; "
            "print(time.perf_counter() - t)")
    return statistics.median(float(subprocess.run([str(folder / ".venv/bin/python"), "-c", code], capture_output=True,
                                                  text=True, check=True).stdout) for _ in range(3))


def cells_moved(folder: Path, tables: list[str], old_bytes) -> dict[str, int]:
    """Per rebuilt table CSV that differs from its old version (`old_bytes(path)`): how many of its cells differ."""
    import pandas as pd

    moved = {}
    for table in tables:
        old, new = pd.read_csv(io.BytesIO(old_bytes(table)), dtype=str), pd.read_csv(folder / table, dtype=str)
        if old.shape != new.shape or list(old.columns) != list(new.columns):
            moved[table] = -1   # the shape itself changed
        else:
            moved[table] = int((old.fillna("") != new.fillna("")).to_numpy().sum())
    return moved


def committed_bytes(commit: str, path: str, root: Path = ROOT) -> bytes:
    """A file as `commit` of the checkout at `root` holds it (not as the working tree has it)."""
    return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, check=True).stdout


def compared_with_commit(folder: Path, tracked: list[str], root: Path = ROOT) -> dict:
    """The build's result files byte for byte against those committed at the HEAD of the checkout at `root`: the
    commit, the files that differ (and how many cells of each table), and the files that commit does not hold,
    which were not compared."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                            check=True).stdout.strip()
    committed = set(subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, "--", "results"], cwd=root,
                                   capture_output=True, text=True, check=True).stdout.split())
    moved = [f for f in tracked if f in committed and (folder / f).read_bytes() != committed_bytes(commit, f, root)]
    return {"results_moved_against": commit, "results_moved": moved,
            "results_not_compared": [f for f in tracked if f not in committed],
            "cells_moved": cells_moved(folder, [f for f in moved if f.endswith(".csv")],
                                       lambda f: committed_bytes(commit, f, root))}


def verdicts_moved(folder: Path, against: Path = ROOT, before_csv: bytes | None = None) -> dict:
    """Each paper's claim verdicts in `against`'s results/claims.csv (or `before_csv`, that file's bytes as a commit
    holds it) before and the build's after, counted, and every claim whose verdict moved ("before -> after")."""
    import pandas as pd

    def verdicts(source) -> pd.Series:
        claims = pd.read_csv(source)
        return claims.groupby(["paper", "claim"], sort=False)["claim verdict"].first()

    before = verdicts(io.BytesIO(before_csv) if before_csv is not None else against / "results/claims.csv")
    after = verdicts(folder / "results/claims.csv")
    counts = {paper: {"before": before[paper].value_counts().to_dict(), "after": after[paper].value_counts().to_dict()}
              for paper in after.index.get_level_values(0).unique()}
    moved = {claim: f"{before.get((paper, claim), 'absent')} -> {verdict}" for (paper, claim), verdict in after.items()
             if before.get((paper, claim)) != verdict}
    return {"counts": counts, "moved": moved}


# A stage forked from the warm-start server is at most this old at main (0.04-0.07 s seen); one in a process of
# its own is 0.3-0.6 s old (interpreter, imports). For records written before they said so (`warm_start`).
FORK_AGE = 0.15


def forked(meta: dict) -> bool:
    """Whether a job's stage ran in a fork of the warm-start server (torch's import not paid, not in its seconds)."""
    if "warm_start" in meta:
        return meta["warm_start"]
    return bool(meta.get("torch_loaded")) and meta.get("startup_seconds") is not None and \
        meta["startup_seconds"] < FORK_AGE


def analyse(folder: Path, before: dict | None = None) -> dict:
    """The build's times, per paper and per rule; `before`: an earlier run's analysis to set beside it."""
    times = json.loads((folder / "reproduce-times.json").read_text())
    steps = steps_of(times)
    logs = build_logs(folder, times)
    torch_import = model_stack_import_seconds(folder)
    rules: dict[str, dict] = {}
    warm_jobs = 0
    for job in (j for log in logs for j in jobs_of(log)):
        meta = record_of(folder, job["outputs"]) or {}
        process = meta.get("startup_seconds") or 0.0
        warm_jobs += forked(meta)
        imports = torch_import if meta.get("torch_loaded") and not forked(meta) else 0.0
        work = max(0.0, meta.get("seconds", job["wall"]) - imports) if meta else job["wall"]
        row = rules.setdefault(job["rule"], {"jobs": 0, "wall_seconds": 0.0, "work_seconds": 0.0, "startup_seconds": 0.0,
                                             "cpu_seconds": 0.0, "process_startup_seconds": 0.0})
        row["jobs"] += 1
        row["wall_seconds"] += job["wall"]
        row["work_seconds"] += work
        row["startup_seconds"] += max(0.0, job["wall"] - work) if meta else 0.0
        row["cpu_seconds"] += meta.get("cpu_seconds", 0.0)
        row["process_startup_seconds"] += process + imports
    job_seconds = sum(r["wall_seconds"] for r in rules.values())
    startup = sum(r["startup_seconds"] for r in rules.values())
    build = [s for name, s in steps.items() if name != "setup"]
    resumed = [s["name"] for s in times["steps"] if s.get("interrupted")]
    tracked = subprocess.run(["git", "ls-files", "results"], cwd=folder, capture_output=True, text=True,
                             check=True).stdout.split()
    built_after = steps["setup"]["began"] + steps["setup"]["seconds"]
    missing = [f for f in tracked if not (folder / f).exists()]   # a failed job's outputs are removed
    tracked = [f for f in tracked if f not in missing]
    not_rebuilt = [f for f in tracked if (folder / f).stat().st_mtime < built_after]
    measured = {
        "commit": times["commit"], "cores": times["cores"],
        "cpu": f"{times.get('cpu') or cpu_model()}, {kernels_of(folder)} kernels",
        "date": datetime.fromtimestamp(steps["setup"]["began"], tz=timezone.utc).strftime("%Y-%m-%d"),
        "targets": times.get("targets") or [],   # --target: the targets of its one step; else every table
        "clean_run_seconds": round(sum(s["seconds"] for s in build), 1),
        "clean_run_goal_seconds": 5400,
        "setup_seconds": steps["setup"]["seconds"],
        "per_paper_minutes": (paper_shares(folder, [j for log in logs for j in jobs_of(log)],
                                           sum(s["seconds"] for s in build))
                              if times.get("whole") or times.get("targets")   # one Snakemake run: shared by jobs
                              else {s["name"]: round(s["seconds"] / 60, 1) for s in build}),
        "jobs": sum(r["jobs"] for r in rules.values()),
        "job_seconds": round(job_seconds, 1),
        "startup_share_of_job_seconds": round(startup / job_seconds, 3),
        "startup_seconds": round(startup, 1),
        "warm_started_jobs": warm_jobs,
        "model_stack_import_seconds": round(torch_import, 2),
        "per_rule": {name: {k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}
                     for name, row in sorted(rules.items(), key=lambda kv: -kv[1]["wall_seconds"])},
        "results_files": len(tracked), "results_not_rebuilt": not_rebuilt, "results_missing": missing,
        "steps_failed": [s["name"] for s in build if s["rc"]],
        "steps_resumed": resumed,
        **compared_with_commit(folder, tracked),
        "verdicts": None,
        "how": "benchmarks/reproduce.py --run DIR && benchmarks/reproduce.py --analyse DIR; start-up of a job: its "
               "wall (Snakemake log) less its stage's work (record seconds less the torch + transformers import "
               "when the stage loaded torch in a process of its own, not in a fork of the warm-start server); jobs "
               "without a record count as work; results_moved: the build's tracked results that differ byte for "
               "byte from those committed at results_moved_against (the analysing checkout's HEAD)",
    }
    claims = "results/claims.csv"
    if claims in tracked and claims not in measured["results_not_compared"]:   # before: as that commit holds it
        measured["verdicts"] = verdicts_moved(folder, before_csv=committed_bytes(measured["results_moved_against"],
                                                                                 claims))
    if before:
        measured["before"] = {k: before[k] for k in ("commit", "clean_run_seconds", "per_paper_minutes", "jobs",
                                                      "job_seconds", "startup_share_of_job_seconds", "startup_seconds")}
        measured["machine"] = machine_speed(measured["per_rule"], before["per_rule"])
    return measured


def paper_shares(folder: Path, jobs: list[dict], seconds: float) -> dict[str, float]:
    """Per paper minutes of one whole run: each job counts for the first paper (papers.yaml order) whose targets
    need it, the rest for "rest"; a paper's minutes are its share of the job seconds times the run's wall."""
    owner = {key: name for key, (name, _) in jobs_by_paper(folder, rest=False).items()}
    walls: dict[str, float] = {}
    for job in jobs:
        name = owner.get(job_key(job), "rest")
        walls[name] = walls.get(name, 0.0) + job["wall"]
    total = sum(walls.values()) or 1.0
    return {name: round(wall / total * seconds / 60, 1) for name, wall in walls.items()}


def build_logs(folder: Path, times: dict) -> list[Path]:
    """Snakemake's logs of the timed steps: those last written while they ran, not of runs after them (a rerun
    or an `expected` in the same folder)."""
    began = times["steps"][0]["began"]
    ended = max(s["began"] + s["seconds"] for s in times["steps"]) + 5   # the log's last line, a moment after
    return sorted(log for log in (folder / ".snakemake/log").glob("*.snakemake.log")
                  if began <= log.stat().st_mtime <= ended)


def steps_of(times: dict) -> dict[str, dict]:
    """Each step of a run by name; a step the machine stopped and --resume finished sums its parts' seconds (the
    jobs the stop killed count twice, once in the part they died in and once when they reran)."""
    steps: dict[str, dict] = {}
    for part in times["steps"]:
        if part["name"] in steps:
            steps[part["name"]] = {**part, "began": steps[part["name"]]["began"],
                                   "seconds": round(steps[part["name"]]["seconds"] + part["seconds"], 1)}
        else:
            steps[part["name"]] = dict(part)
    return steps


# Training stages: the same work at both commits of the start-up comparison (src/towers/training unchanged), so
# their CPU seconds compare the two machines rather than the two commits
SAME_WORK_RULES = ("pretrain_two_tower", "pretrain_mlm", "pretrain_mlm_nsp", "finetune", "train_margin_threet",
                   "train_margin_quadbert", "train_negatives", "train_ltre", "train_repbert", "train_cross_encoder")


def machine_speed(now: dict, before: dict) -> dict:
    """How much slower this machine did the same work than the earlier run's: the work CPU seconds (CPU less
    process start-up) of SAME_WORK_RULES, where both runs ran the same jobs."""
    same = [r for r in SAME_WORK_RULES if r in now and r in before and now[r]["jobs"] == before[r]["jobs"]]

    def work_cpu(rows, rules=same):
        return sum(max(0.0, rows[r]["cpu_seconds"] - rows[r]["process_startup_seconds"]) for r in rules)

    return {"rules": same, "work_cpu_seconds": round(work_cpu(now), 1),
            "before_work_cpu_seconds": round(work_cpu(before), 1),
            "slower_by": round(work_cpu(now) / work_cpu(before), 3),
            "per_rule_slower_by": {r: round(work_cpu(now, [r]) / max(1e-9, work_cpu(before, [r])), 2) for r in same}}


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
        for job in planned_jobs(folder, targets):
            owned.setdefault(job_key(job), (name, job))
    return owned


def planned_jobs(folder: Path, targets: list[str]) -> list[dict]:
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
            "how": "benchmarks/reproduce.py --project DIR: a forced dry run per paper step, each job's stage record "
                   "seconds + the measured run's start-up a job, divided by its parallelism (job seconds over "
                   "clean-run seconds); setup excluded, as in clean_run_seconds. A projection on the machine "
                   "that wrote the records, not a measurement"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def warm_starts(folder: Path, jobs: int, cores: int, configfiles: list[str] = ()) -> dict:
    """Jobs of a finished build rerun as Snakemake runs them (--forcerun), warm starts off and on, interleaved.
    `configfiles`: the build's profile (a fresh_copy built on tests/fixtures/tiny.yaml: its src/ snapshot is used)."""
    dense = sorted(folder.glob("artifacts/*/dense/transformer-*/*/run-flat.trec"))
    encoded, searched = dense[:jobs], dense[jobs:2 * jobs]   # disjoint models: no job reruns another's input
    targets = [str((run.parent / "candidates.npy").relative_to(folder)) for run in encoded] + \
              [str(run.relative_to(folder)) for run in searched]
    built = {t: sha256(folder / t) for t in targets}
    snapshot = folder / "src"
    env = {**os.environ, "PYTHONPATH": str(snapshot)} if snapshot.is_dir() else None
    snakemake = [str(folder / ".venv/bin/snakemake")] if (folder / ".venv").exists() else [sys.executable, "-m", "snakemake"]
    profile = ["--configfile", *configfiles] if configfiles else []
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    for setting in ("off", "on", "off", "on"):
        began = time.perf_counter()
        done = subprocess.run([*snakemake, *targets, "--forcerun", *targets, "--cores", str(cores), "--quiet",
                               "--config", f"warm_start={setting == 'on'}", *profile], cwd=folder,
                              capture_output=True, text=True, env=env)   # True and False: booleans to Snakemake
        if done.returncode:
            sys.exit(f"warm_start={setting}: Snakemake failed:\n{done.stderr[-3000:]}")
        seconds[setting].append(round(time.perf_counter() - began, 1))
        moved = [t for t in targets if sha256(folder / t) != built[t]]
        if moved:
            sys.exit(f"warm_start={setting}: {len(moved)} outputs differ from the build's, first {moved[0]}")
    forked_on = sum(forked(json.loads((folder / (t + ".meta.json")).read_text())) for t in targets)
    off, on = statistics.median(seconds["off"]), statistics.median(seconds["on"])
    return {"jobs": {"encode_candidates": len(encoded), "dense_search": len(searched)}, "cores": cores,
            "profile": configfiles or "mini", "forked_warm_in_last_run": forked_on,
            "seconds_off": seconds["off"], "seconds_on": seconds["on"], "ratio_on_to_off": round(on / off, 3),
            "saved_seconds_a_job": round((off - on) * cores / len(targets), 2), "outputs_byte_identical": True,
            "how": "benchmarks/reproduce.py --warm DIR after --run DIR: the same jobs forced to rerun, off/on/off/on"}


def model_records(folder: Path, outputs: list[str]) -> list[dict]:
    """The stage records of those jobs whose stage ran with torch loaded (forked ones always do)."""
    return [meta for meta in (record_of(folder, [output]) for output in outputs) if meta and meta.get("torch_loaded")]


def rerun_step(folder: Path, name: str, cores: int) -> dict:
    """Every job a finished step of the build ran, forced to rerun with this checkout's code as the build has it
    (copy fixes in first): the step's wall seconds then and now, warm starts before and after, and which of the
    paper's result files came back byte-identical."""
    jobs = jobs_of(folder / f"reproduce-{name}.log")
    outputs = [job["outputs"][0] for job in jobs]
    paper = paper_list.load(root=folder)[name]
    targets = paper_list.targets(paper)
    results = sorted({f for f in subprocess.run(["git", "ls-files", *{str(Path(t).parent) for t in targets}],
                                                cwd=folder, capture_output=True, text=True, check=True).stdout.split()
                      if not f.endswith(".meta.json")})
    kept = {f: sha256(folder / f) for f in results}
    warm_before = sum(forked(meta) for meta in model_records(folder, outputs))
    began = time.perf_counter()
    subprocess.run([str(folder / ".venv/bin/snakemake"), *targets, "--forcerun", *outputs, "--cores", str(cores),
                    "--quiet"], cwd=folder, check=True, capture_output=True)
    seconds = round(time.perf_counter() - began, 1)
    records = model_records(folder, outputs)
    return {"step": name, "jobs": len(jobs), "seconds_in_run": steps_of(json.loads(
                (folder / "reproduce-times.json").read_text()))[name]["seconds"],
            "seconds_rerun": seconds, "jobs_with_torch_loaded": len(records), "forked_warm_before": warm_before,
            "forked_warm_rerun": sum(forked(meta) for meta in records),
            "results_byte_identical": [f for f in results if sha256(folder / f) == kept[f]],
            "results_moved": [f for f in results if sha256(folder / f) != kept[f]],
            "how": f"benchmarks/reproduce.py --rerun-step {name} DIR: the jobs of reproduce-{name}.log forced to "
                   "rerun (snakemake <its targets> --forcerun <each job's first output>), nothing else running"}


def scheduler_load(folder: Path, cores: int) -> dict:
    """Snakemake's own load while jobs wait for cores: every dense search of the build's enwiki-mini models and
    its evaluation forced to rerun, with Snakemake's scheduler as it is (the build's own workflow/rules/common.smk,
    from before the fix) and with towers.launch.scheduler's fix (that file with the fix's two lines added; this checkout's
    common.smk no longer fits an older build's rule files, which took its helpers from it), alternated."""
    runs = sorted((folder / "artifacts/enwiki-mini/dense").glob("*/*/run-flat.trec"))
    targets = [f"artifacts/enwiki-mini/eval/{run.parent.parent.name}/{run.parent.name}/flat.json" for run in runs]
    built = {t: sha256(folder / t) for t in targets}
    common = folder / "workflow/rules/common.smk"
    kept = common.read_text()
    as_is = subprocess.run(["git", "show", "HEAD:workflow/rules/common.smk"], cwd=folder, check=True,
                           capture_output=True, text=True).stdout
    rules = {"as_is": as_is, "fixed": "from towers.launch.scheduler import keep_one_pending_look\nkeep_one_pending_look()\n" + as_is}
    if "keep_one_pending_look" in rules["as_is"]:
        sys.exit(f"{folder} was built at a commit that has the fix already: build one from before it")
    shutil.copy(ROOT / "src/towers/launch/scheduler.py", folder / "src/towers/launch/scheduler.py")
    command = [str(folder / ".venv/bin/snakemake"), *targets, "--forcerun", "dense_search", "--cores", str(cores)]
    seen: dict[str, list[dict]] = {"as_is": [], "fixed": []}
    try:
        for setting in ("as_is", "fixed", "as_is", "fixed"):
            common.write_text(rules[setting])
            done = watched(command, folder)
            if done.pop("returncode"):
                sys.exit(f"{setting}: snakemake failed: {done['stderr'][-1000:]}")
            seen[setting].append({k: v for k, v in done.items() if k != "stderr"})
            moved = [t for t in targets if sha256(folder / t) != built[t]]
            if moved:
                sys.exit(f"{setting}: {len(moved)} evaluations differ from the build's, first {moved[0]}")
    finally:
        common.write_text(kept)

    def median(setting, key):
        return statistics.median(run[key] for run in seen[setting])

    return {"jobs": 2 * len(targets), "cores": cores, "as_is": seen["as_is"], "fixed": seen["fixed"],
            "wall_ratio_fixed_to_as_is": round(median("fixed", "wall") / median("as_is", "wall"), 3),
            "snakemake_cpu_ratio_fixed_to_as_is": round(median("fixed", "cpu") / max(0.1, median("as_is", "cpu")), 3),
            "outputs_byte_identical": True,
            "how": "benchmarks/reproduce.py --scheduler DIR after --run DIR at a commit before the fix: the same jobs "
                   "forced to rerun with Snakemake's scheduler as it is and with towers.launch.scheduler's fix, alternated; "
                   "Snakemake's own CPU seconds and threads from psutil"}


def before_after(old: Path, new: Path) -> dict:
    """The tracked results (tables, their JSON twins, figures and their CSVs, claims, check; not the records
    beside them, which hold times) of two finished builds, file by file."""
    tracked = [f for f in subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                                         check=True).stdout.split() if not f.endswith(".meta.json")]
    missing = [f for f in tracked if not (old / f).exists() or not (new / f).exists()]
    compared = [f for f in tracked if f not in missing]
    moved = [f for f in compared if (old / f).read_bytes() != (new / f).read_bytes()]
    commits = [json.loads((d / "reproduce-times.json").read_text())["commit"] if (d / "reproduce-times.json").exists()
               else subprocess.run(["git", "rev-parse", "HEAD"], cwd=d, capture_output=True, text=True).stdout.strip()
               for d in (old, new)]
    return {"before": commits[0], "after": commits[1], "compared": len(compared),
            "identical": len(compared) - len(moved), "moved": moved, "missing": missing,
            "cells_moved": cells_moved(new, [f for f in moved if f.endswith(".csv")], lambda f: (old / f).read_bytes()),
            "largest_move": {f: largest_move(old / f, new / f) for f in moved if f.endswith(".csv")},
            "verdicts": (verdicts_moved(new, against=old) if all((d / "results/claims.csv").exists() for d in (old, new))
                         else None),
            "how": "benchmarks/reproduce.py --run OLD --commit REV; --run NEW; --before-after OLD NEW"}


def largest_move(old_csv: Path, new_csv: Path) -> float | None:
    """The largest absolute difference between two builds' numeric cells of one table (None: shapes differ)."""
    import pandas as pd

    old, new = pd.read_csv(old_csv), pd.read_csv(new_csv)
    if old.shape != new.shape or list(old.columns) != list(new.columns):
        return None
    numeric = [c for c in old.columns if pd.api.types.is_numeric_dtype(old[c]) and pd.api.types.is_numeric_dtype(new[c])]
    return round(float((old[numeric] - new[numeric]).abs().max().max()), 6) if numeric else 0.0


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/reproduce.py", description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", type=Path, help="a folder that does not exist yet")
    what.add_argument("--resume", type=Path, help="go on with a --run the machine stopped: steps that finished "
                      "are kept, the stopped one counts its part and reruns what did not finish")
    what.add_argument("--analyse", type=Path)
    what.add_argument("--warm", type=Path, help="a folder --run finished")
    what.add_argument("--scheduler", type=Path, help="a folder --run built (Chang et al.'s step at least)")
    what.add_argument("--rerun-step", nargs=2, metavar=("NAME", "DIR"), help="force every job of a finished "
                      "build's step to rerun (a fix copied into DIR first): its time then and now (key "
                      "reproduce_rerun_<NAME>)")
    what.add_argument("--before-after", type=Path, nargs=2, metavar=("OLD", "NEW"))
    what.add_argument("--project", type=Path, help="a finished build (any): its clean run projected")
    parser.add_argument("--jobs", type=positive, default=8, help="--warm: encoding jobs, and as many dense searches")
    parser.add_argument("--configfile", nargs="+", default=[], help="--warm: the build's profile (its config files)")
    parser.add_argument("--cores", type=positive, default=2)
    parser.add_argument("--key", default="reproduce", help="the key of benchmarks/results.json to write")
    parser.add_argument("--record", action="store_true", help="replace the key where benchmarks/results.json holds "
                        "it already (without: the result is printed, the file left as it is)")
    parser.add_argument("--before", metavar="KEY", help="--analyse: an earlier run's key of benchmarks/results.json "
                        "to set beside this one (under `before`)")
    parser.add_argument("--commit", help="--run: build this commit instead of HEAD")
    parser.add_argument("--target", nargs="+", default=[], help="--run: `make setup`, then one Snakemake run over "
                        "these targets alone (e.g. results/table1.csv: the headline's time where users run it)")
    parser.add_argument("--whole", action="store_true", help="--run: one `make reproduce` after `make setup` (per "
                        "paper minutes then come from each paper's share of the job seconds: --analyse)")
    return parser.parse_args(argv)


def build_folder(folder: Path, flag: str, *needs: str) -> Path:
    """`folder` as `flag` names it, a build of this workflow holding `needs`; else the one line that says why not."""
    if not folder.is_dir():
        sys.exit(f"error: {flag} {folder}: no such folder")
    for need in ("Snakefile", *needs):
        if not (folder / need).exists():
            sys.exit(f"error: {flag} {folder}: not a build of this workflow (no {need})")
    return folder


def result_named(key: str, why: str) -> dict:
    results = read_results()
    if key not in results:
        sys.exit(f"error: {RESULTS}: no key {key!r} ({why})")
    return results[key]


def main(argv=None) -> None:
    args = parse(argv)
    if not (args.run or args.resume):   # these record: a broken results file stops here, not after the measurement
        read_results()
    try:
        act(args)
    except subprocess.CalledProcessError as failed:   # Snakemake or git in the build: its last words, not ours
        said = (failed.stderr or "").strip().splitlines() if isinstance(failed.stderr, str) else []
        sys.exit(f"error: {' '.join(map(str, failed.cmd))[:200]}: exit {failed.returncode}"
                 + (f": {said[-1][:300]}" if said else ""))
    except ParamsError as err:   # the build's papers.yaml
        sys.exit(f"error: {err}")
    except OSError as err:
        if not err.filename:
            raise
        sys.exit(f"error: {err.filename}: {err.strerror or type(err).__name__}")


def act(args: argparse.Namespace) -> None:
    if args.run:
        if args.run.exists():
            sys.exit(f"error: --run {args.run}: exists already (--run clones into a new folder; --resume goes on)")
        if args.commit and subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{args.commit}^{{commit}}"],
                                          cwd=ROOT, capture_output=True).returncode:
            sys.exit(f"error: --commit {args.commit}: not a commit of {ROOT}")
        if args.whole and args.target:
            sys.exit("error: --whole and --target: one or the other (--whole builds every target)")
        run(args.run, args.cores, args.commit, whole=args.whole, targets=args.target)
    if args.resume:
        run(build_folder(args.resume, "--resume", "reproduce-times.json"), args.cores, resume=True)
    if args.analyse:
        before = result_named(args.before, "--before") if args.before else None
        folder = build_folder(args.analyse, "--analyse", "reproduce-times.json", ".snakemake/log", ".venv/bin/python",
                              ".git")
        save(args.key, analyse(folder, before), args.record)
    if args.warm:
        build_folder(args.warm, "--warm")
        if missing := [f for f in args.configfile if not (args.warm / f).is_file()]:
            sys.exit(f"error: --configfile {missing[0]}: no such file in {args.warm}")
        save(args.key if args.key != "reproduce" else "warm_start",
             warm_starts(args.warm, args.jobs, args.cores, args.configfile), args.record)
    if args.scheduler:
        build_folder(args.scheduler, "--scheduler", ".venv/bin/snakemake", "workflow/rules/common.smk", ".git")
        save("scheduler_load", scheduler_load(args.scheduler, args.cores), args.record)
    if args.rerun_step:
        name, folder = args.rerun_step
        build_folder(Path(folder), "--rerun-step", ".venv/bin/snakemake", paper_list.PAPERS_FILE, ".git",
                     "reproduce-times.json", f"reproduce-{name}.log")
        if name not in paper_list.load(root=Path(folder)):
            sys.exit(f"error: --rerun-step {name}: not a paper of {folder}/{paper_list.PAPERS_FILE}")
        save(f"reproduce_rerun_{name}", rerun_step(Path(folder), name, args.cores), args.record)
    if args.before_after:
        old, new = (build_folder(folder, "--before-after", "results") for folder in args.before_after)
        save(args.key if args.key != "reproduce" else "reproduce_tables_compared", before_after(old, new), args.record)
    if args.project:
        measured = result_named("reproduce", "the measured clean run a projection is calibrated on")
        folder = build_folder(args.project, "--project", ".venv/bin/snakemake", paper_list.PAPERS_FILE)
        save(args.key if args.key != "reproduce" else "reproduce_projection", project(folder, measured), args.record)


def save(key: str, measured: dict, replace: bool = False) -> None:
    """Print the result (less its per-rule detail) and record it under `key`: a key there already is replaced only
    with --record (a committed number is replaced on purpose)."""
    print(json.dumps({k: v for k, v in measured.items() if k != "per_rule"}, indent=1))
    record(key, measured, replace=replace)


if __name__ == "__main__":
    main()
