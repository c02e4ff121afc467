"""Inference in float32 against bfloat16 autocast (params `inference_precision`, towers.runtime.cpu_scoring), on
jobs of a built tree.

    python -m benchmarks.precision --tree DIR [--pairs 2] [--record]

DIR is a checkout after `make reproduce`. One job of each inference rule is run again from its stage record
(stage_pairs.pair_row: one thread, a process of its own, outputs in a scratch folder), `--precision float32` and
`--precision bfloat16` in turn, `--pairs` times: each side's median stage seconds (start-up excluded) and their
pair-by-pair ratio float32/bfloat16. What bfloat16 changes is measured on the outputs: for an encoding, the
largest difference of a coordinate and the smallest cosine between a candidate's two vectors; for a reranking,
the mean and largest score difference and the share of queries whose top 10 keep their order. The ratios, applied
to the work seconds of their rules in results.json's `reproduce` (a float32 build), give the work seconds
bfloat16 takes off a build; `--record` keeps it all under `inference_precision`."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

from .stage_pairs import pair_row
from .workflow_harness import RESULTS, record

SIDES = ("float32", "bfloat16")
# stage record (under DIR) -> the rule it stands for, what its run changes, its outputs (the first compared)
JOBS = [
    ("artifacts/enwiki-mini-nq/dense/transformer-ict+bfs+wlp-l2-d128/80-20/candidates.npy.meta.json",
     "encode_candidates", {}, ("embeddings", "ids")),
    ("artifacts/enwiki-mini/dense/quadbert-m0.1-s13/5-95/candidates.npy.meta.json",
     "encode_candidates", {}, ("embeddings", "ids")),
    ("artifacts/enwiki-mini/dense/ckpt-minilm/all/candidates.npy.meta.json",
     "encode_candidates", {"shards": 4, "shard": 0}, ("embeddings", "ids")),
    ("artifacts/enwiki-mini-passages/rerank/bm25-d1000/dev.shards/0.trec.meta.json",
     "rerank_shard", {"depth": 100}, ("out",)),
]


def vectors_changed(a: Path, b: Path) -> dict:
    x, y = np.load(a), np.load(b)
    cosines = (x * y).sum(1) / np.maximum(np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1), 1e-12)
    return {"largest_coordinate_difference": float(np.abs(x - y).max()), "smallest_cosine": float(cosines.min())}


def scores_changed(a: Path, b: Path) -> dict:
    from towers.io import read_run

    x, y = read_run(a), read_run(b)
    pairs = [(dict(x[q])[d], s) for q in y for d, s in y[q]]
    differences = np.abs(np.array([p[0] - p[1] for p in pairs]))
    same_top10 = np.mean([[d for d, _ in x[q][:10]] == [d for d, _ in y[q][:10]] for q in y])
    return {"mean_score_difference": float(differences.mean()), "largest_score_difference": float(differences.max()),
            "queries_with_the_same_top10": round(float(same_top10), 4)}


def job_row(tree: Path, record_path: str, rule: str, changes: dict, output_names: tuple, scratch: Path,
            pairs: int) -> dict:
    """One job `pairs` times on each side, float32 first (stage_pairs.pair_row): median seconds, ratios, and
    what bfloat16 changed in its first output."""
    kept = {side: scratch / f"{side}-{Path(output_names[0]).name}" for side in SIDES}
    row = pair_row(tree, record_path, changes, output_names, scratch / "run", pairs, {side: {} for side in SIDES}, set(),
                   side_changes={side: {"precision": side} for side in SIDES}, kept=kept)
    first = json.loads((tree / record_path).read_text())["arguments"][output_names[0]]
    compare = vectors_changed if first.endswith(".npy") else scores_changed
    return {"rule": rule, **row, **compare(kept["float32"], kept["bfloat16"])}


def projected(rows: list[dict], reproduce: dict) -> dict:
    """Work seconds of each measured rule in a float32 build, and what the rule's median speed-up leaves of them."""
    per_rule = reproduce["per_rule"]
    speedups = {}
    for row in rows:
        speedups.setdefault(row["rule"], []).append(row["speedup_median"])
    saved = {rule: per_rule[rule]["work_seconds"] * (1 - 1 / statistics.median(values))
             for rule, values in speedups.items() if rule in per_rule}
    return {"float32_build": reproduce["commit"],
            "work_seconds_saved": {rule: round(value, 1) for rule, value in saved.items()},
            "work_seconds_before": reproduce["job_seconds"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.precision", description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--record", action="store_true")
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="precision-") as scratch:
        for number, (record_path, rule, changes, outputs) in enumerate(JOBS):
            rows.append(job_row(a.tree.resolve(), record_path, rule, changes, outputs, Path(scratch) / str(number),
                                a.pairs))
            print(json.dumps(rows[-1]), flush=True)
    summary = {"rows": rows, **projected(rows, json.loads(RESULTS.read_text())["reproduce"]),
               "how": f"python -m benchmarks.precision --tree DIR --pairs {a.pairs}"}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if a.record:
        record("inference_precision", summary, replace=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
