"""A finished build as the benchmarks read it: Snakemake's log (each finished job's rule, inputs, outputs, threads,
start and wall), the stage records beside the outputs, the vector kernels torch used, whether a stage was forked
from the warm-start server, and the steps benchmarks.reproduce timed."""
from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]$")
STARTED = re.compile(r"^(?:local)?rule (\w+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)")
# A stage forked from the warm-start server is at most this old at main (0.04-0.07 s seen); one in a process of
# its own is 0.3-0.6 s old (interpreter, imports). For records written before they said so (`warm_start`).
FORK_AGE = 0.15


def kernels_of(folder: Path) -> str:
    """The vector kernels torch computed with in a build (its stage records name them)."""
    for meta in sorted((folder / "artifacts").glob("*/dense/*/*/model.meta.json")):
        kernels = json.loads(meta.read_text()).get("torch_cpu_kernels")
        if kernels:
            return kernels
    return "unknown"


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


def forked(meta: dict) -> bool:
    """Whether a job's stage ran in a fork of the warm-start server (torch's import not paid, not in its seconds)."""
    if "warm_start" in meta:
        return meta["warm_start"]
    return bool(meta.get("torch_loaded")) and meta.get("startup_seconds") is not None and \
        meta["startup_seconds"] < FORK_AGE


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


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)
