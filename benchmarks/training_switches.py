"""Two training switches against their off side, on jobs of a built tree: the token memo and fused AdamW on a CPU.

    python -m benchmarks.training_switches --tree DIR --switch memo|fused [--pairs 3] [--record]

DIR is a checkout after `make reproduce` (its artifacts and stage records). Each job below is run again from its
record into a scratch folder (whole, as the build ran it, except pre-training, cut to 100 of its 400 steps), the
switch on and off in turn, `--pairs` times:
- memo: a training run keeps each text's token ids (tokens.token_memo, the default) against
  TOWERS_TOKEN_MEMO=off; the trained weights must be the same bytes (exit 1 if not);
- fused: AdamW's fused kernel (TOWERS_SPEED='--fused-adamw 1', off in params.yaml) against the loop's own
  AdamW; the weights move by rounding, so only each side's repeatability is checked.
Reported per job: each side's median seconds (its record, start-up excluded), the median of the pair-by-pair
ratios off/on, and the work seconds the job's whole rule would lose in DIR at that ratio (its stage records
summed); `--record` keeps it under `training_switches.<switch>` in benchmarks/results.json."""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from .stage_pairs import pair_row
from .workflow_harness import RESULTS, record

TRAINING = ("out", "state_dir", "log")
# stage record (under DIR) -> the rule it stands for (records whose folder matches `family` are summed), changes.
# Three-T Emb's hashed words are no HF tokenizer, so the memo leaves them alone: for `memo` its row is a control
# (how far two sides of one setting differ on this machine), and saves nothing
JOBS = [
    ("artifacts/enwiki-mini/dense/transformer-ict+bfs+wlp-l2-d128/80-20/model.meta.json",
     "finetune", "/dense/transformer-", {}),
    ("artifacts/enwiki-mini/pretrained/transformer-ict+bfs+wlp-l2-d128/model.meta.json",
     "pretrain_two_tower", "/pretrained/transformer-", {"steps": 100}),
    ("artifacts/enwiki-mini/dense/quadbert-m0.1-s13/80-20/model.meta.json",
     "train_margin_quadbert", "/dense/quadbert-", {}),
    ("artifacts/enwiki-mini/dense/threet-emb-m0.1-s14/80-20/model.meta.json",
     "train_margin_threet (Three-T Emb)", "/dense/threet-emb-", {}),
]
CONTROLS = {"memo": {"train_margin_threet (Three-T Emb)"}}   # switch -> rules it does not touch
SWITCHES = {   # name -> (environment of the "on" side, of the "off" side, variables removed first)
    "memo": ({}, {"TOWERS_TOKEN_MEMO": "off"}, {"TOWERS_TOKEN_MEMO"}),
    "fused": ({"TOWERS_SPEED": "--fused-adamw 1"}, {}, {"TOWERS_SPEED"}),
}


def rule_seconds(tree: Path, stage: str, family: str) -> float:
    """The record seconds of every `stage` job in `tree` whose output folder holds `family`."""
    total = 0.0
    for path in tree.glob("artifacts/**/*.meta.json"):
        if family in str(path.relative_to(tree)):
            meta = json.loads(path.read_text())
            total += meta.get("seconds", 0) if meta.get("stage") == stage else 0
    return total


def measure(tree: Path, switch: str, pairs: int) -> list[dict]:
    on, off, removed = SWITCHES[switch]
    rows = []
    with tempfile.TemporaryDirectory(prefix="switches-") as scratch_root:
        for n, (record_path, rule, family, changes) in enumerate(JOBS):
            row = pair_row(tree, record_path, changes, TRAINING, Path(scratch_root) / str(n), pairs,
                           {"off": off, "on": on}, removed)
            whole = rule_seconds(tree, row["stage"], family)
            control = rule in CONTROLS.get(switch, ())
            row.update({"rule": rule, "control": control, "rule_record_seconds": round(whole, 1),
                        "rule_seconds_saved": 0.0 if control else round(whole * (1 - 1 / row["speedup_median"]), 1)})
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", type=Path, required=True)
    p.add_argument("--switch", choices=sorted(SWITCHES), required=True)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--record", action="store_true")
    a = p.parse_args(argv)
    rows = measure(a.tree.resolve(), a.switch, a.pairs)
    reproduce = json.loads(RESULTS.read_text())["reproduce"]
    busy = reproduce["job_seconds"] / reproduce["clean_run_seconds"]
    saved = sum(r["rule_seconds_saved"] for r in rows)
    summary = {"rows": rows, "job_seconds_saved": round(saved, 1),
               "wall_minutes_saved": round(saved / busy / 60, 1),
               "how": f"python -m benchmarks.training_switches --tree DIR --switch {a.switch} --pairs {a.pairs}: speed-ups "
                      "off/on; saved = each rule's record seconds in DIR x (1 - 1/speed-up), over the clean run's "
                      "parallelism (key reproduce)"}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    if a.record:
        record(("training_switches", a.switch), summary, replace=True)
    if a.switch == "memo":
        return 0 if all(r["byte_identical"] for r in rows) else 1
    return 0 if all(r["repeatable_on"] and r["repeatable_off"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
