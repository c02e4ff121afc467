"""Reruns inside a finished build (`python -m benchmarks.reproduce --warm`, `--rerun-step`, `--scheduler`): jobs run
again with warm starts off and on, a step's jobs after a fix, and Snakemake's scheduler with and without the fix;
seconds, and whether every output came back byte-identical."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from towers.reports import papers as paper_list

from .build_records import forked, jobs_of, record_of, steps_of
from .workflow_harness import ROOT, watched


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
            "how": "python -m benchmarks.reproduce --warm DIR after --run DIR: the same jobs forced to rerun, off/on/off/on"}


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
            "how": f"python -m benchmarks.reproduce --rerun-step {name} DIR: the jobs of reproduce-{name}.log forced to "
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
            "how": "python -m benchmarks.reproduce --scheduler DIR after --run DIR at a commit before the fix: the same jobs "
                   "forced to rerun with Snakemake's scheduler as it is and with towers.launch.scheduler's fix, alternated; "
                   "Snakemake's own CPU seconds and threads from psutil"}
