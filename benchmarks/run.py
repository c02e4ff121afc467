"""Benchmarks. Run with `make bench` (all parts) or `benchmarks/run.py --part NAME`; each part
updates its own key of benchmarks/results.json.

pipeline: wall time of a clean `snakemake results/chang2020/table3.csv` on the embedded default, in a
   fresh copy of the workflow (goal: <= 15 min on 2 cores), and of the no-op dry run that follows
   (goal: <= 10 s);
encoding: candidate-encoding throughput of the pipeline's length-sorted batching against two loops in
   input order on the same model, texts and run: a naive one that pads every batch to the maximum
   length, and one that pads each batch to its own longest text (goal: >= 1.5x);
quadrupletbert: in a fresh copy, wall time of a clean `snakemake results/table1.csv` (goal: <= 20 min),
   then of `results/table2.csv` reusing table1's pre-training and models (goal: <= 40 min), and the
   jobs a dry run plans after only the margin list changes (goal: only the new margin's training,
   encoding, indexing, search and evaluation, plus the table).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "results/chang2020/table3.csv"


def copy_workflow(dest: Path) -> None:
    for name in ["Snakefile", "params.yaml", "workflow", "data", "config"]:
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, dest / name, **(
            {"ignore": shutil.ignore_patterns("raw")} if source.is_dir() else {}))


def timed(cmd, cwd) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"benchmark command failed: {' '.join(map(str, cmd))}\n{done.stderr[-3000:]}")
    return time.perf_counter() - began, done


def pipeline(cores: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        copy_workflow(Path(tmp))
        snake = [sys.executable, "-m", "snakemake", TARGET, "--cores", str(cores)]
        clean, _ = timed(snake, tmp)
        noop, plan = timed([*snake, "-n"], tmp)
        table = (Path(tmp) / TARGET).read_text()
        model = Path(tmp) / "artifacts/enwiki-mini/dense/twotower-mlm/80-20/model"
        kept = ROOT / "benchmarks/out/model"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(model, kept)
        candidates = ROOT / "benchmarks/out/candidates.jsonl"
        shutil.copy(Path(tmp) / "artifacts/enwiki-mini/reqa/candidates.jsonl", candidates)
    return {"clean_run_seconds": round(clean, 1), "clean_run_goal_seconds": 900,
            "noop_dry_run_seconds": round(noop, 2), "noop_dry_run_goal_seconds": 10,
            "noop_says_nothing_to_do": "Nothing to be done" in plan.stdout + plan.stderr, "table": table}


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table snakemake prints."""
    import re

    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def quadrupletbert(cores: int) -> dict:
    out = {"goal_seconds": {"table1": 1200, "table2": 2400}}
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        copy_workflow(Path(tmp))
        for table in ("table1", "table2"):
            target = f"results/{table}.csv"
            _, plan = timed([sys.executable, "-m", "snakemake", target, "--cores", str(cores), "-n"], tmp)
            seconds, _ = timed([sys.executable, "-m", "snakemake", target, "--cores", str(cores)], tmp)
            out[table] = {"seconds": round(seconds, 1), "jobs": job_counts(plan.stdout)}
            for suffix in (".csv", ".json"):   # kept: the committed tables can be compared with them
                shutil.copy(Path(tmp) / f"results/{table}{suffix}", ROOT / f"benchmarks/out/{table}{suffix}")
        params = Path(tmp) / "params.yaml"
        text = params.read_text()
        old = "margins: [0, 0.1, 0.2, 1, 1.5, 2]"
        if old not in text:
            sys.exit(f"params.yaml no longer holds {old!r}; update the benchmark")
        params.write_text(text.replace(old, "margins: [0, 0.1, 0.2, 1, 1.5, 2, 3]"))
        _, plan = timed([sys.executable, "-m", "snakemake", "results/table1.csv", "results/table2.csv",
                         "--cores", str(cores), "-n"], tmp)
        out["margin_list_change"] = {"change": "margins + [3]", "jobs": job_counts(plan.stdout)}
    return out


def naive_encode(tower, tokenizer, items, max_length: int, batch_size: int):
    """The loop one writes first: input order, every batch padded to max_length."""
    import numpy as np
    import torch

    out = []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            batch = tokenizer([s for s, _ in chunk], [p for _, p in chunk], max_length=max_length,
                              truncation="longest_first", padding="max_length", return_tensors="pt")
            out.append(tower(**batch).numpy())
    return np.vstack(out)


def encoding(model_dir: Path, candidates_path: Path, limit: int, threads: int, repeats: int = 3) -> dict:
    import torch

    from towers.encode import encode
    from towers.io import read_jsonl
    from towers.models import TwoTower

    torch.set_num_threads(threads)
    model, tok = TwoTower.load(model_dir)
    items = [(c["sentence"], c["paragraph"]) for c in read_jsonl(candidates_path)][:limit]
    out = {"candidates": len(items), "threads": threads, "repeats": repeats, "rate": "median"}
    # the profile's doc length, and the longest the model takes (closer to the paper's 288)
    for doc_length in (model.config["doc_length"], model.doc.encoder.config.max_position_embeddings):
        loops = {
            "naive_pad_to_max": lambda: naive_encode(model.doc, tok, items, doc_length, 128),
            "input_order_pad_to_batch": lambda: encode(model.doc, tok, items, "doc", doc_length, 128,
                                                       sort_by_length=False),
            "length_sorted": lambda: encode(model.doc, tok, items, "doc", doc_length, 128, sort_by_length=True),
        }
        vectors = {}
        encode(model.doc, tok, items[:256], "doc", doc_length, 128)   # warm-up
        timings = {name: [] for name in loops}
        for _ in range(repeats):   # interleaved, so drifting machine load hits every loop alike
            for name, run in loops.items():
                began = time.perf_counter()
                vectors[name] = run()
                timings[name].append(time.perf_counter() - began)
        rates = {name: len(items) / statistics.median(seconds) for name, seconds in timings.items()}
        reference = vectors["length_sorted"]
        out[f"doc_length_{doc_length}"] = {
            **{f"{name}_per_second": round(rate, 1) for name, rate in rates.items()},
            "speedup_vs_naive": round(rates["length_sorted"] / rates["naive_pad_to_max"], 2),
            "speedup_vs_input_order": round(rates["length_sorted"] / rates["input_order_pad_to_batch"], 2),
            "same_embeddings": all(bool(abs(v - reference).max() < 1e-4) for v in vectors.values())}
    out["goal_speedup"] = 1.5
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--encode-limit", type=int, default=4000)
    parser.add_argument("--part", choices=["all", "pipeline", "encoding", "quadrupletbert"], default="all",
                        help="encoding reuses the model the pipeline part left in benchmarks/out")
    args = parser.parse_args()
    (ROOT / "benchmarks/out").mkdir(parents=True, exist_ok=True)
    out = ROOT / "benchmarks/results.json"
    results = json.loads(out.read_text()) if out.exists() else {}
    results["machine"] = {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                          "python": platform.python_version()}
    parts = {"pipeline": lambda: pipeline(args.cores),
             "encoding": lambda: encoding(ROOT / "benchmarks/out/model", ROOT / "benchmarks/out/candidates.jsonl",
                                          args.encode_limit, threads=1),
             "quadrupletbert": lambda: quadrupletbert(args.cores)}
    for name, run in parts.items():
        if args.part in ("all", name):
            results[name] = run()
            out.write_text(json.dumps(results, indent=2) + "\n")   # kept even if a later part fails
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
