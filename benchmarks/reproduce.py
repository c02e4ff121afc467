"""A clean `make reproduce` in a fresh clone, timed: total wall, per paper, per rule, and the share of each job
that is process start-up (issue 28).

    benchmarks/reproduce.py --run DIR        clone this checkout's HEAD into DIR, `make setup`, then build each
                                             paper's targets in papers.yaml order, then `all check` (what
                                             `make reproduce` builds); times go to DIR/reproduce-times.json
    benchmarks/reproduce.py --analyse DIR    read those times, Snakemake's logs and the stage records; compare
                                             the tables and figures with this checkout's; write the key
                                             `reproduce` of benchmarks/results.json

Per paper minutes are the wall time of building that paper's targets after the papers before it, so jobs
shared between papers (the collection, BM25, the tokenizer) count for the first paper that needs them."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from towers.reports import papers as paper_list  # noqa: E402


def run(folder: Path, cores: int) -> None:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(folder)], check=True)
    times = {"commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                      check=True).stdout.strip(), "cores": cores, "steps": []}
    record = folder / "reproduce-times.json"

    def step(name: str, cmd: list[str]) -> None:
        began = time.time()
        with open(folder / f"reproduce-{name}.log", "w") as log:
            done = subprocess.run(cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT)
        times["steps"].append({"name": name, "began": began, "seconds": round(time.time() - began, 1),
                               "rc": done.returncode})
        record.write_text(json.dumps(times, indent=1) + "\n")
        if done.returncode:
            sys.exit(f"{name} failed (exit {done.returncode}): see {folder}/reproduce-{name}.log")

    step("setup", ["make", "setup"])
    snakemake = [str(folder / ".venv/bin/snakemake"), "--cores", str(cores)]
    for paper in paper_list.load(root=folder).values():
        step(paper["id"], [*snakemake, *paper_list.targets(paper)])
    step("rest", [*snakemake, "all", "check"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a folder that does not exist yet")
    parser.add_argument("--analyse", type=Path)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    if args.run:
        run(args.run, args.cores)


if __name__ == "__main__":
    main()
