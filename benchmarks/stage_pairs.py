"""Stages of a built tree run again from their records, two settings in turn: the helpers of malloc_setting.py and
training_switches.py.

A stage record (`<output>.meta.json`) holds the stage's arguments; `command` rebuilds its command line with some
arguments changed and every output moved into a scratch folder, and `run_once` runs it as a process of its own
(one thread, never forked from a warm-start server) with the environment a side of the comparison adds."""
from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from towers.launch import warm


def command(record: dict, changes: dict, outputs: tuple, scratch: Path) -> list[str]:
    """The stage's command line from its record's arguments, with `changes` and every output moved into `scratch`."""
    arguments = {**record["arguments"], **changes}
    for name in outputs:
        if arguments.get(name):
            arguments[name] = str(scratch / Path(arguments[name]).name)
    argv = [sys.executable, "-m", "towers", record["stage"]]
    for name, value in arguments.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False or value == "":
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, list):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def digest(paths: list[Path]) -> str:
    """One sha256 over the outputs' bytes (a folder's files in name order), stage records left out."""
    h = hashlib.sha256()
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if not f.name.endswith(".meta.json"):
                h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def run_once(tree: Path, argv: list[str], outputs: list[Path], env_added: dict, env_removed: set,
             kept_aside: set[str]) -> dict:
    """One run in `tree`: its record's seconds, page faults and outputs' digest. `kept_aside`: outputs left out of
    the digest (training state, and step logs that record seconds)."""
    for out in outputs:   # a training stage would resume from its own state: every run starts clean
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in env_removed}
    env["OMP_NUM_THREADS"] = "1"
    env.pop(warm.ENV, None)   # a process of its own, never a fork of a warm-start server
    env.update(env_added)
    faults_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(argv)}\n{done.stderr[-2000:]}")
    record = json.loads(Path(f"{outputs[0]}.meta.json").read_text())
    return {"seconds": record["seconds"],
            "page_faults": resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults_before,
            "digest": digest([out for out in outputs if out.name not in kept_aside])}


def pair_row(tree: Path, record_path: str, changes: dict, output_names: tuple, scratch: Path, pairs: int,
             sides: dict[str, dict], env_removed: set, side_changes: dict[str, dict] | None = None,
             kept: dict[str, Path] | None = None) -> dict:
    """One stage run `pairs` times on each of the two `sides` (name -> environment added), in turn, the first
    side first: each side's median seconds and page faults, the pair-by-pair ratios first/second, and whether
    each side, and both, wrote the same bytes every time. `side_changes`: arguments a side changes besides
    `changes` (name -> changes); `kept`: where each side's last first output is copied (name -> path)."""
    record = json.loads((tree / record_path).read_text())
    scratch.mkdir(parents=True, exist_ok=True)
    argvs = {name: command(record, {**changes, **(side_changes or {}).get(name, {})}, output_names, scratch)
             for name in sides}
    outputs = [scratch / Path(record["arguments"][n]).name for n in output_names if record["arguments"].get(n)]
    aside = {Path(record["arguments"][n]).name for n in ("state_dir", "log") if record["arguments"].get(n)}
    runs = {name: [] for name in sides}
    for _ in range(pairs):
        for name, env in sides.items():
            runs[name].append(run_once(tree, argvs[name], outputs, env, env_removed, aside))
            if kept and name in kept:
                shutil.copy(outputs[0], kept[name])
    first, second = sides
    ratios = [a["seconds"] / b["seconds"] for a, b in zip(runs[first], runs[second])]
    row = {"stage": record["stage"], "record": record_path, "changes": changes}
    for name in sides:
        row[f"seconds_{name}"] = statistics.median(r["seconds"] for r in runs[name])
        row[f"page_faults_{name}"] = statistics.median(r["page_faults"] for r in runs[name])
        row[f"repeatable_{name}"] = len({r["digest"] for r in runs[name]}) == 1
    row.update({"speedup_median": round(statistics.median(ratios), 3),
                "speedup_range": [round(min(ratios), 3), round(max(ratios), 3)],
                "byte_identical": len({r["digest"] for side in runs.values() for r in side}) == 1})
    return row
