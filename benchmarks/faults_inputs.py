"""Fault cases, group "input": bad input files of every format the stages read, truncated, malformed,
inconsistent or missing, each fed to the stage that reads it. The cases are data (benchmarks.faults_input_cases);
this module runs them."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from .faults_harness import MLM_MODEL, Workspace, classify_failure
from .faults_input_cases import CASES, Case, fill


def places(ws: Workspace, tmp: Path) -> dict[str, Path]:
    """What the cases' templates name, but for the case's own folder {f} and spoilt input {x}."""
    model = ws.root / MLM_MODEL
    return {"root": ws.root, "art": ws.root / "artifacts/enwiki-mini", "model": model, "dense": model.parent,
            "tmp": tmp, "inputs": tmp / "inputs"}


def prepare(case: Case, at: dict) -> dict:
    """Make the case's folder and its spoilt input; the places with {f} and {x} added."""
    f = at["inputs"] / re.sub(r"[^a-z0-9]+", "-", (case.folder or case.name).lower())
    f.mkdir(parents=True, exist_ok=True)   # a shared folder already is
    here = {**at, "f": f}
    if case.at:
        x = here["x"] = Path(fill(case.at, here))
        x.parent.mkdir(parents=True, exist_ok=True)
        if case.source:
            source = Path(fill(case.source, here))
            (shutil.copytree if source.is_dir() else shutil.copy)(source, x)
        if case.spoil:
            case.spoil(x, here)
    return here


def warned(result, bad: str) -> tuple[str, str]:
    """A bad input the stage reads on with a warning: handled when it exits 0 with a warning line naming it."""
    said = any(l.startswith("warning: ") and bad in l for l in result.stderr.splitlines())
    outcome = "handled" if result.returncode == 0 and said else (
        "silent wrong result" if result.returncode == 0 else classify_failure(result, [bad])[0])
    return outcome, (result.stderr.strip().splitlines() or [""])[-1]


def run_case(ws: Workspace, case: Case, at: dict) -> dict:
    here = prepare(case, at)
    bad = fill(case.bad, here)
    result = ws.stage(*(fill(arg, here) for arg in case.argv))
    if case.expect == "warn":
        outcome, last = warned(result, bad)
    else:
        outputs = [Path(fill(path, here)) for path in case.outputs]
        outcome, last = classify_failure(result, [bad, *(fill(name, here) for name in case.extra)], outputs)
    if case.marker and Path(fill(case.marker, here)).exists():
        outcome = "injection executed"   # the pickled payload ran while the stage read the checkpoint
    return {"group": "input", "case": case.name, "outcome": outcome, "message": last[:300]}


def input_cases(ws: Workspace, tmp: Path) -> list[dict]:
    """Each case: a folder with copies of real artifacts, one of them spoilt, and the stage that reads it."""
    at = places(ws, tmp)
    return [run_case(ws, case, at) for case in CASES]
