"""Fault injection on the test configuration (`python -m benchmarks.run --part faults`, or `python -m benchmarks.faults`).
The cases live in a module a group (faults_params, faults_inputs, faults_runs, faults_edge) over the shared
workspace and classification (faults_harness), the input group's as data (faults_input_cases: a file, a spoiler,
the stage that reads it); this module runs them and counts the outcomes.

Tried as a new user would, in a fresh copy of the workflow built once on tests/fixtures/tiny.yaml:
- bad params: wrong types and ranges, misspelt keys at every level, keys of another dataset kind, names of
  undefined datasets, splits and indexes, broken config files, and injection attempts through every params
  string that reaches a shell (those run for real, with a marker file as the payload);
- bad input files of every format the stages read (MediaWiki dumps, question sets, JSONL, TSV, TREC runs and
  qrels, NumPy matrices, Faiss and Lucene indexes, safetensors weights, training checkpoints, tables' JSON),
  truncated, malformed, inconsistent or missing, each fed to the stage that reads it;
- faults during runs: kill -9 of a training stage (resume must reach bit-identical weights), of one job of
  several during a params change, of Snakemake itself; failures during a change through Snakemake and
  `dvc repro`; Ctrl-C; a read-only output folder; edits inside a local_dir collection; a tampered checkpoint;
- edge cases (group "edge"): nested-alias and deeply nested config and claims files, a key given twice, a NUL in
  a params string, byte-order marks, a BEIR query judged only -1, an artifact edited after the build, a question
  file edited while the clock went back, an input dated in the future, a full disk (a tmpfs, root only).

Each outcome is classified automatically:
  clear error         non-zero exit, no traceback, the last line names the bad file or key
  unclear error       non-zero exit, no traceback, but the message names neither, or runs to many lines
  traceback           a Python traceback (or Snakemake's report of one)
  silent wrong result exit 0 over bad input, or a table or record not current with its inputs after a fault
  injection executed  the marker file a params value tried to create exists
  partial output      an output of a failed stage left behind
  handled             a fault recovered as it should (bit-identical resume, rebuilt table, warning counted),
                      or a legitimate but unusual value (quotes, spaces) run safely
Counts per class go to benchmarks/results.json under "faults"; every case's outcome and last message too."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path


from .faults_edge import edge_cases
from .faults_harness import CHANG3, Workspace, build
from .faults_inputs import input_cases
from .faults_params import run_params
from .faults_runs import fault_cases
from .workflow_harness import ROOT


# --- the whole run ------------------------------------------------------------------------------------------

CLASSES = ["clear error", "unclear error", "traceback", "silent wrong result", "injection executed", "partial output",
           "handled", "harness error"]


def summary(cases: list[dict]) -> dict:
    def count(group_filter):
        chosen = [c for c in cases if group_filter(c["group"])]
        return {"tried": len(chosen), **{k: sum(c["outcome"] == k for c in chosen) for k in CLASSES}}
    return {"bad_inputs": count(lambda g: g != "fault"), "faults": count(lambda g: g == "fault"),
            "all": count(lambda g: True)}


GROUPS = {"params": run_params, "input": input_cases, "fault": fault_cases, "edge": edge_cases}


def run(cores: int = 2, src: Path | None = None, groups=tuple(GROUPS), keep: Path | None = None) -> dict:
    """Build the tiny workspace from the checkout of `src` (default: this one; its workflow and src/ are
    snapshotted) and try every case. `keep`: a folder that holds (or will hold) the built workspace, reused."""
    began = time.time()
    with tempfile.TemporaryDirectory(prefix="towers-faults-") as name:
        tmp = Path(name)
        home = keep or tmp / "base"
        snapshot = home / "checkout" / "src"
        if not (home / "work" / CHANG3).exists():
            shutil.rmtree(home, ignore_errors=True)
            base = (src or ROOT / "src").parent
            shutil.copytree(base / "src", snapshot, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            for part in ("Snakefile", "params.yaml", "workflow", "data", "config", "profiles", "envs", "dvc.yaml",
                         "tests/fixtures"):
                (shutil.copytree if (base / part).is_dir() else shutil.copy)(base / part, snapshot.parent / part)
            build(home, snapshot, cores)
        ws = Workspace(home / "work", snapshot)
        built = round(time.time() - began, 1)
        cases = [case for group in groups for case in GROUPS[group](ws, tmp)]
    return {"configuration": "tests/fixtures/tiny.yaml", "base_build_seconds": built,
            "seconds": round(time.time() - began, 1), "counts": summary(cases), "cases": cases}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--src", type=Path, default=None, help="another checkout's src/ (e.g. an older commit's)")
    parser.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    parser.add_argument("--groups", default="params,input,fault,edge", help="which groups of cases, comma-separated")
    parser.add_argument("--keep", type=Path, default=None, help="build the workspace here once, and reuse it")
    args = parser.parse_args()
    result = run(args.cores, args.src, args.groups.split(","), args.keep)
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps(result["counts"], indent=2))
