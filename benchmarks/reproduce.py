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
number) is replaced only with --record. This module holds the timed build and its analysis; the other modes
measure in modules of their own, which this command runs: benchmarks.reruns (--warm, --rerun-step, --scheduler),
benchmarks.compare_builds (--before-after), benchmarks.projection (--project); benchmarks.build_records reads a
finished build (Snakemake's log, the stage records) for all of them and for benchmarks.cores.

Per paper minutes are the wall time of building that paper's targets after the papers before it, so jobs
shared between papers (the collection, BM25, the tokenizer) count for the first paper that needs them; of a
--whole run, each paper's share of the job seconds (the same attribution) times the run's wall."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from towers.config.config_yaml import ParamsError
from towers.reports import papers as paper_list
from towers.retrieval.latency import cpu_model
from .build_records import (build_logs, forked, jobs_of, kernels_of, model_stack_import_seconds,
                            positive, record_of, steps_of)
from .compare_builds import before_after, committed_bytes, compared_with_commit, verdicts_moved
from .projection import job_key, jobs_by_paper, project
from .reruns import rerun_step, scheduler_load, warm_starts
from .workflow_harness import RESULTS, ROOT, read_results, record


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
        "how": "python -m benchmarks.reproduce --run DIR && python -m benchmarks.reproduce --analyse DIR; start-up of a job: its "
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


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reproduce", description=__doc__.splitlines()[0])
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
