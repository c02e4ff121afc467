"""LTRe Figure 3 at other seeds: how far its cells move when only the seed changes.

    python -m benchmarks.figure3_seeds --build DIR --seeds 14 15 16 [--out DIR] [--no-record]

Figure 3's four query-tower runs (LTRe, random, BM25 and asynchronous negatives) are re-run from a finished build's
own inputs with each other seed (the commands are the build's own, taken from `snakemake -n -p`; outputs go to
--out, never into the build), each seed's figure is drawn and its expected values written
(`<out>/expected-<seed>.csv`), and the spread of every cell over the build's seed and the others is recorded in
benchmarks/results.json under `figure3_seeds`, one entry a cell family (method and measure).

An asynchronous refresh turns float noise into another trajectory, so a rebuild on another float path is no
closer to the build than another seed is: `towers.ops.ci keep-expected --seeds <out>/expected-*.csv` sizes Figure 3's
tolerances from this spread (towers.verdicts.checks.across_seeds)."""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd


from towers.verdicts import checks
from .workflow_harness import record

TABLE = "ltre/figure3"
FIGURE = "results/ltre/figure3.csv"


def build_commands(build: Path) -> tuple[list[str], str]:
    """The build's commands for Figure 3's training runs and for the figure itself."""
    from towers.plan.ltre import FIGURE3_MODELS

    steps = sorted((build / "artifacts").glob("*/ltre/steps/*-flat-*.jsonl"))
    wanted = [str(p.relative_to(build)) for p in steps if p.name.split("-", 1)[0] in FIGURE3_MODELS.values()]

    def planned(*targets, rules):
        done = subprocess.run([str(build / ".venv/bin/snakemake"), "-n", "-p", "-f", *targets, "--allowed-rules", rules],
                              cwd=build, capture_output=True, text=True, check=True)
        return [line.split("Shell command: ", 1)[1] for line in done.stdout.splitlines() if "Shell command: " in line]
    return planned(*wanted, rules="train_ltre"), planned(FIGURE, rules="ltre_figure")[0]


def moved(command: str, seed: int, out: Path) -> tuple[str, str, str]:
    """A build command re-pointed at another seed and at `out` (its model, state and step log there): the
    command, the build's step log and the moved one."""
    log = re.search(r"--log (\S+)", command).group(1)
    stem = out / Path(log).stem
    for flag, path in (("--seed", seed), ("--out", f"{stem}/model"), ("--state-dir", f"{stem}/state"),
                       ("--log", f"{stem}.jsonl")):
        command = re.sub(rf"{flag} \S+", f"{flag} {path}", command)
    return re.sub(r"2>&1 \| tee \S+", f"> {stem}.txt 2>&1", command), log, f"{stem}.jsonl"


def run_seed(build: Path, commands: tuple[list[str], str], seed: int, out: Path) -> Path:
    training, figure = commands
    folder = out / f"seed-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    for command in training:
        command, log, moved_log = moved(command, seed, folder)
        if not Path(moved_log[:-len(".jsonl")], "model").is_dir():   # a run cut short is run again
            print(f"seed {seed}: {Path(log).name}", flush=True)
            subprocess.run(command, shell=True, cwd=build, check=True)
        figure = figure.replace(log, moved_log)
    figure = re.sub(r"--csv \S+ --png \S+", f"--csv {folder}/figure3.csv --png {folder}/figure3.png", figure)
    subprocess.run(figure.split(" 2>&1")[0], shell=True, cwd=build, check=True, capture_output=True)
    expected = out / f"expected-{seed}.csv"
    subprocess.run([sys.executable, "-m", "towers", "expected", "--table", f"{TABLE}={folder}/figure3.csv",
                    "--out", str(expected)], cwd=build, check=True, capture_output=True)
    return expected


def spread(build_expected: Path, seed_files: list[Path]) -> dict:
    """Per cell family (method, measure): the seeds, the largest standard deviation over seeds of a cell, and the
    largest tolerance across_seeds gives the family against the build's own."""
    own = checks.read_expected(build_expected)
    own = own[own["table"] == TABLE]
    seeds = [checks.read_expected(path) for path in seed_files]
    widened = checks.across_seeds(own, seeds)
    cells = pd.concat([f.assign(seed=i) for i, f in enumerate([own, *seeds])])
    sd = cells.groupby(["row", "column"])["expected"].std(ddof=1)
    families = {}
    for (row, column), value in sd.items():
        method = row.split(";")[0].split("=")[1]
        key = f"{method}, {column}"
        was = own.set_index(["row", "column"]).loc[(row, column), "tolerance"]
        now = widened.set_index(["row", "column"]).loc[(row, column), "tolerance"]
        entry = families.setdefault(key, {"cells": 0, "largest seed SD": 0.0, "bootstrap tolerance": 0.0,
                                          "tolerance": 0.0})
        entry["cells"] += 1
        entry["largest seed SD"] = round(max(entry["largest seed SD"], float(value)), 4)
        entry["bootstrap tolerance"] = round(max(entry["bootstrap tolerance"], float(was)), 4)
        entry["tolerance"] = round(max(entry["tolerance"], float(now)), 4)
    return {"seeds": 1 + len(seed_files), "families": families}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, required=True, help="a finished build (its own seed is the first)")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--out", type=Path, default=Path("/tmp/figure3-seeds"))
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    build = args.build.resolve()
    commands = build_commands(build)
    files = [run_seed(build, commands, seed, args.out.resolve()) for seed in args.seeds]
    result = spread(build / "results/expected-values.csv", files)
    result["build"] = str(build.name)
    result["seed list"] = args.seeds
    print(json.dumps(result, indent=2))
    if not args.no_record:
        record("figure3_seeds", result, replace=True)


if __name__ == "__main__":
    main()
