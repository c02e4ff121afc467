"""The stages' malloc settings (towers.cli.keep_freed_memory) against glibc's defaults, on jobs of a built tree.

    python -m benchmarks.malloc_setting --tree DIR [--pairs 3] [--record]

DIR is a checkout after `make reproduce` (its artifacts and stage records). One job of each heavy rule is run
again from its record, shortened where a whole one would take minutes (fewer training steps, a quarter of an
encoding, reranking at depth 50), into a scratch folder: glibc's defaults and the setting forced on any stage
(glibc's own MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ set to towers.cli.MALLOC_SETTINGS' values, which
the stages leave alone) in turn, `--pairs` times. Reported per stage: the stage's own seconds
(its record, start-up excluded) and page faults, the median of the pair-by-pair ratios, and whether every run
wrote the same bytes (the outputs, not the training state or step log, which records seconds). The ratios of
the stages that keep the setting when asked (TOWERS_MALLOC=keep: towers.cli.KEEP_FREED_MEMORY, chosen from
these rows), applied to the work seconds of their rules in results.json's clean `reproduce`, give the minutes it
would take off that run (`--record` keeps all of it under its own key, `malloc_setting`, which a new `reproduce`
leaves alone). About 4 of the 955a638 build's 148 minutes: why the setting is opt-in."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from .stage_pairs import pair_row
from .workflow_harness import RESULTS, record

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


def setting_env(on: bool) -> dict[str, str]:
    """The environment a side of the comparison adds: glibc's own knobs at cli.MALLOC_SETTINGS' values (every stage
    takes them, as glibc reads them at start-up), or nothing (glibc's defaults)."""
    return {name: str(value) for name, (_, value) in MALLOC_SETTINGS.items()} if on else {}


def measure(tree: Path, pairs: int) -> list[dict]:
    rows = []
    removed = set(MALLOC_SETTINGS) | {"TOWERS_MALLOC"}
    with tempfile.TemporaryDirectory(prefix="allocator-") as scratch_root:
        for record_path, rule, changes, output_names in JOBS:
            row = {"rule": rule, **pair_row(tree, record_path, changes, output_names, Path(scratch_root) / rule, pairs,
                                            {"glibc": setting_env(False), "set": setting_env(True)}, removed)}
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
               "how": f"python -m benchmarks.malloc_setting --tree DIR --pairs {a.pairs}"}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if a.record:
        record("malloc_setting", summary, replace=True)
    return 0 if all(r["byte_identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
