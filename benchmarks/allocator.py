"""The stages' malloc settings (towers.cli.keep_freed_memory) against glibc's defaults, on jobs of a built tree.

    benchmarks/allocator.py --tree DIR [--pairs 3] [--record]

DIR is a checkout after `make reproduce` (its artifacts and stage records). One job of each heavy rule is run
again from its record, shortened where a whole one would take minutes (fewer training steps, a quarter of an
encoding, reranking at depth 50), into a scratch folder: glibc's defaults and the setting forced on any stage
(glibc's own MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set to towers.cli.MALLOC_SETTINGS' values, which
the stages leave alone) in turn, `--pairs` times. Reported per stage: the stage's own seconds
(its record, start-up excluded) and page faults, the median of the pair-by-pair ratios, and whether every run
wrote the same bytes (the outputs, not the training state or step log, which records seconds). The ratios of
the stages that keep the setting when asked (TOWERS_MALLOC=keep: towers.cli.KEEP_FREED_MEMORY, chosen from
these rows), applied to the work seconds of their rules in results.json's clean `reproduce`, give the minutes it
would take off that run (`--record` keeps all of it under `reproduce.allocator`). About 4 of ~148 minutes: why
the setting is opt-in."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from workflow_helpers import RESULTS, keep_result

from towers import warm
from towers.cli import KEEP_FREED_MEMORY, MALLOC_SETTINGS

# stage record (under DIR) -> the reproduce rule it stands for, what its run changes, which arguments it writes
JOBS = [
    ("artifacts/enwiki-mini-open/dense/transformer-ict+bfs+wlp-l2-d128/1-99/candidates.npy.meta.json",
     "encode_candidates", {"shards": 4, "shard": 0}, ("embeddings", "ids")),
    ("artifacts/enwiki-mini/pretrained/transformer-ict+bfs+wlp-l2-d128/model.meta.json",
     "pretrain_two_tower", {"steps": 40}, ("out", "state_dir", "log")),
    ("artifacts/enwiki-mini/dense/quadbert-m0-s13/5-95/model.meta.json",
     "train_margin_quadbert", {"steps": 40}, ("out", "state_dir", "log")),
    ("artifacts/enwiki-mini-passages/dense/neg-bm25+rand/dev/model.meta.json",
     "train_negatives", {"steps": 40}, ("out", "state_dir", "log")),
    ("artifacts/enwiki-mini-passages/rerank/bm25-d1000/dev.trec.meta.json",
     "rerank", {"depth": 50}, ("out",)),
    ("artifacts/enwiki-mini-open/dense/transformer-ict+bfs+wlp-l2-d128/1-99/run-flat.trec.meta.json",
     "dense_search", {}, ("run",)),
]


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


def setting_env(on: bool) -> dict[str, str]:
    """The environment a side of the comparison adds: glibc's own knobs at cli.MALLOC_SETTINGS' values (every stage
    takes them, as glibc reads them at start-up), or nothing (glibc's defaults)."""
    return {name: str(value) for name, (_, value) in MALLOC_SETTINGS.items()} if on else {}


def run_once(tree: Path, argv: list[str], outputs: list[Path], baseline: bool, kept_aside: set[str]) -> dict:
    """`kept_aside`: outputs left out of the comparison (training state, and step logs that record seconds)."""
    for out in outputs:   # a training stage would resume from its own state: every run starts clean
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_SETTINGS and k != "TOWERS_MALLOC"}
    env["OMP_NUM_THREADS"] = "1"
    env.pop(warm.ENV, None)   # a process of its own, never a fork of a warm-start server
    env.update(setting_env(not baseline))   # the setting tried on every stage, not only its own
    faults_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(argv)}\n{done.stderr[-2000:]}")
    record = json.loads(Path(f"{outputs[0]}.meta.json").read_text())
    return {"seconds": record["seconds"],
            "page_faults": resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - faults_before,
            "digest": digest([out for out in outputs if out.name not in kept_aside])}


def measure(tree: Path, pairs: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="allocator-") as scratch_root:
        for record_path, rule, changes, output_names in JOBS:
            record = json.loads((tree / record_path).read_text())
            scratch = Path(scratch_root) / rule
            scratch.mkdir()
            argv = command(record, changes, output_names, scratch)
            outputs = [scratch / Path(record["arguments"][n]).name for n in output_names if record["arguments"].get(n)]
            aside = {Path(record["arguments"][n]).name for n in ("state_dir", "log") if record["arguments"].get(n)}
            runs = {"glibc": [], "set": []}
            for _ in range(pairs):
                runs["glibc"].append(run_once(tree, argv, outputs, True, aside))
                runs["set"].append(run_once(tree, argv, outputs, False, aside))
            ratios = [a["seconds"] / b["seconds"] for a, b in zip(runs["glibc"], runs["set"])]
            row = {"rule": rule, "stage": record["stage"], "changes": changes,
                   "seconds_glibc": statistics.median(r["seconds"] for r in runs["glibc"]),
                   "seconds_set": statistics.median(r["seconds"] for r in runs["set"]),
                   "page_faults_glibc": statistics.median(r["page_faults"] for r in runs["glibc"]),
                   "page_faults_set": statistics.median(r["page_faults"] for r in runs["set"]),
                   "speedup_median": round(statistics.median(ratios), 3),
                   "speedup_range": [round(min(ratios), 3), round(max(ratios), 3)],
                   "byte_identical": len({r["digest"] for r in runs["glibc"] + runs["set"]}) == 1}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def projected(rows: list[dict], reproduce: dict) -> dict:
    """Work seconds each measured rule whose stage keeps freed memory (cli.KEEP_FREED_MEMORY) would lose at its
    median speed-up, and the wall minutes that makes on the clean run's cores (the run kept them ~95% busy: its
    job seconds over its wall seconds)."""
    per_rule = reproduce["per_rule"]
    saved = {r["rule"]: per_rule[r["rule"]]["work_seconds"] * (1 - 1 / r["speedup_median"])
             for r in rows if r["rule"] in per_rule and r["stage"] in KEEP_FREED_MEMORY}
    busy = reproduce["job_seconds"] / reproduce["clean_run_seconds"]
    return {"work_seconds_saved": {k: round(v, 1) for k, v in saved.items()},
            "wall_minutes_saved": round(sum(saved.values()) / busy / 60, 1),
            "clean_run_minutes_before": round(reproduce["clean_run_seconds"] / 60, 1),
            "clean_run_minutes_projected": round((reproduce["clean_run_seconds"] - sum(saved.values()) / busy) / 60, 1),
            "applied_to": list(KEEP_FREED_MEMORY),
            "not_counted": "the other rules keep their time: their stages keep glibc's defaults"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--record", action="store_true")
    a = p.parse_args(argv)
    rows = measure(a.tree.resolve(), a.pairs)
    summary = {"rows": rows, **projected(rows, json.loads(RESULTS.read_text())["reproduce"]),
               "how": f"benchmarks/allocator.py --tree DIR --pairs {a.pairs}"}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if a.record:
        keep_result(("reproduce", "allocator"), summary)
    return 0 if all(r["byte_identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
