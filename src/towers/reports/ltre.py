"""LTRe's tables and figure (results/ltre/): reproduced values beside the paper's.

table1: RR@10 (the paper's MRR@10), R@1000 and nDCG@10 of BM25, every negative-sampling baseline and LTRe on the dev queries;
table3: per training index, its size, its search quality before training (the start model through it),
        LTRe's measured training time and speed-up against the asynchronous-refresh baseline (ANCE), and
        the trained model's quality through the exact index;
table4: the LTRe model trained with each index, evaluated through each index;
figure3: per training step, the batch's RR@10 and R@<depth> under full retrieval, the overlap of the
        dense top-<depth> with BM25's, and with the last asynchronous retrieval's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..io import StageError, read_json, read_jsonl
from ..verdicts.cells import WINDOW_FRACTION, cell, query_samples, window_steps
from .common import Layout, metric, paper_value, read_paper

LABELS = {"rand": "Rand Neg", "bm25": "BM25 Neg", "nce": "NCE Neg", "bm25+rand": "BM25 + Rand Neg",
          "async": "Async ANN"}


METRICS = ("RR@10", "R@1000", "nDCG@10")


def label(key: str) -> str:
    """'bm25.async' -> 'BM25 Neg -> Async ANN'; 'ltre:bm25' -> 'LTRe (BM25 Neg)'."""
    if key.startswith("ltre:"):
        return f"LTRe ({label(key[5:])})"
    return " -> ".join(LABELS.get(part, part) for part in key.split("."))


def paper_lookup(paper_csv, table: str):
    """value(key, metric) -> the paper's number for `table`, or None where the paper has none."""
    paper = read_paper(paper_csv, dtype=str)
    if not (paper["table"] == table).any():
        raise StageError(paper_csv, f"no values for {table}")
    return lambda key, name: paper_value(paper, table, key=key, metric=name)


def read_step_log(path) -> list[dict]:
    """A training run's step log (loop.run's records, one JSON line a step)."""
    return list(read_jsonl(path))


def steps_seconds(path) -> tuple[int, float]:
    """Steps and wall seconds of a training run, from its step log (loop.run's step_s per step)."""
    records = read_step_log(path)
    if not records or any("step_s" not in r for r in records):
        raise StageError(path, "not a step log with step_s (train-negatives / train-ltre --log)")
    return records[-1]["step"], float(sum(r["step_s"] for r in records))


def size_of(path) -> int:
    """Bytes of an index file, or of every file in an index folder (Lucene's)."""
    path = Path(path)
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def ndcg_source(row: dict) -> str:
    """The evaluation nDCG@10 comes from: the graded set's (TREC DL 2019) where the row has one."""
    return row.get("graded") or row["eval"]


def ndcg_note(rows: list[dict]) -> str:
    graded = next((r["graded"] for r in rows if r.get("graded")), "")
    if graded:
        return f"nDCG@10 on the graded queries of {Path(graded).parts[-5]} (the paper's: TREC DL 2019)"
    return "the paper's nDCG@10 is TREC DL 2019's (graded), here nDCG@10 of the same dev queries' qrels"


def metric_cells(key: dict, row: dict, record: dict) -> list[dict]:
    """The cells of a row's METRICS (nDCG@10 from the graded evaluation where the row has one)."""
    return [cell(key, name, record[name], record[f"{name} paper"],
                 query_samples([ndcg_source(row) if name == "nDCG@10" else row["eval"]], name)) for name in METRICS]


def table1(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'key', 'eval', 'graded'}; key 'BM25', a baseline chain, or 'ltre:<start chain>'; nDCG@10 from
    'graded' (a TREC DL evaluation of the same run's model) where given."""
    paper = paper_lookup(paper_csv, "table1")
    records, twin, cells = [], {"table": "table1", "profile": profile, "rows": {}}, []
    for row in rows:
        result = read_json(row["eval"])
        record = {"method": label(row["key"]), "key": row["key"], "profile": profile, "queries": result["queries"]}
        for name in METRICS:
            record[name] = round(metric(ndcg_source(row) if name == "nDCG@10" else row["eval"], name), 4)
            record[f"{name} paper"] = paper(row["key"], name)
        records.append(record)
        twin["rows"][row["key"]] = {name: record[name] for name in METRICS}
        cells += metric_cells({"key": row["key"]}, row, record)
    frame = pd.DataFrame(records)
    frame["note"] = f"{note}; RR@10 and R@1000 on the dev queries; {ndcg_note(rows)}"
    return frame, twin, cells


def table3(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'key', 'eval', 'steps', 'index', 'before'}: 'start:<chain>' (the fixed start, with the BM25
    index its negatives came from), 'async:<chain>' (ANCE) and 'ltre:<index>' rows; 'before' is the
    evaluation of what the index serves before training (BM25; the start model through the index)."""
    paper = paper_lookup(paper_csv, "table3")
    anchor = next((r for r in rows if r["key"].startswith("async:")), None)
    anchor_seconds = steps_seconds(anchor["steps"])[1] if anchor else None
    start_eval = next((r["eval"] for r in rows if r["key"].startswith("start:")), None)
    records, twin, cells = [], {"table": "table3", "profile": profile, "rows": {}}, []
    for row in rows:
        kind, _, name = row["key"].partition(":")
        steps, seconds = steps_seconds(row["steps"])
        size = size_of(row["index"])
        before = row.get("before") or (start_eval if kind == "async" else row["eval"])
        record = {"method": {"start": label(name), "async": label(name)}.get(kind, f"LTRe with {name}"),
                  "key": row["key"], "profile": profile,
                  "memory GB": size / 1e9, "memory GB paper": paper(row["key"], "memory GB"),
                  "quality RR@10": round(metric(before, "RR@10"), 4),
                  "quality RR@10 paper": paper(row["key"], "quality RR@10"),
                  "steps": steps, "train hours": seconds / 3600 if kind != "start" else None,
                  "train hours paper": paper(row["key"], "hours"),
                  "speed-up": (round(anchor_seconds / seconds, 2) if anchor_seconds and kind != "start" else None),
                  "speed-up paper": paper(row["key"], "speed-up")}
        for name_ in METRICS:
            record[name_] = round(metric(row["eval"], name_), 4)
            record[f"{name_} paper"] = paper(row["key"], name_)
        records.append(record)
        key = {"key": row["key"]}
        cells += [cell(key, "memory GB", record["memory GB"], record["memory GB paper"], kind="count"),
                  cell(key, "quality RR@10", record["quality RR@10"], record["quality RR@10 paper"],
                       query_samples([before], "RR@10")),
                  cell(key, "steps", steps, kind="count"),
                  *metric_cells(key, {"eval": row["eval"]}, record)]
        if kind != "start":   # the start's step log trained it, but the table times only what follows it
            cells += [cell(key, "train hours", record["train hours"], record["train hours paper"],
                           {"kind": "steps", "file": str(row["steps"]), "field": "step_s", "scale": 1 / 3600},
                           kind="timing"),
                      cell(key, "speed-up", record["speed-up"], record["speed-up paper"], kind="timing")]
        twin["rows"][row["key"]] = {k: record[k] for k in ("memory GB", "quality RR@10", "train hours", "speed-up",
                                                           *METRICS)}
    frame = pd.DataFrame(records)
    frame["note"] = (note + "; quality = RR@10 of the start model searched through the index, before training "
                     "(ANCE: its start through the exact index; BM25 Neg: BM25 through its Lucene index); memory GB: the "
                     "index file's size; train hours: the step log's wall time on this machine (ANCE's includes "
                     "its re-encoding and re-indexing), in the paper's unit; speed-up = ANCE's time over the "
                     "row's; after-training metrics through the exact index")
    return frame, twin, cells


def table4(rows: list[dict], paper_csv, table: str, profile: str, note: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: {'train', 'test', 'eval'}: the LTRe model trained with index `train`, searched through `test`."""
    paper = paper_lookup(paper_csv, "table4")
    records, twin, cells = [], {"table": "table4", "profile": profile, "rows": {}}, []
    for row in rows:
        key = f"{row['train']}|{row['test']}"
        record = {"train index": row["train"], "eval index": row["test"], "profile": profile,
                  "nDCG@10": round(metric(ndcg_source(row), "nDCG@10"), 4), "nDCG@10 paper": paper(key, "nDCG@10"),
                  "RR@10": round(metric(row["eval"], "RR@10"), 4)}
        records.append(record)
        twin["rows"][key] = {"nDCG@10": record["nDCG@10"], "RR@10": record["RR@10"]}
        labels = {"train index": row["train"], "eval index": row["test"]}
        cells += [cell(labels, "nDCG@10", record["nDCG@10"], record["nDCG@10 paper"],
                       query_samples([ndcg_source(row)], "nDCG@10")),
                  cell(labels, "RR@10", record["RR@10"], samples=query_samples([row["eval"]], "RR@10"))]
    frame = pd.DataFrame(records)
    frame["note"] = f"{note}; {ndcg_note(rows)}"
    return frame, twin, cells


LAYOUTS = {"table1": Layout(("key", "eval", "graded"), table1, may_be_empty=("graded",)),
           "table3": Layout(("key", "eval", "steps", "index", "before"), table3, may_be_empty=("before",)),
           "table4": Layout(("train", "test", "eval", "graded"), table4, may_be_empty=("graded",))}


def figure3_frame(runs: list[dict], depth: int) -> pd.DataFrame:
    """runs: {'method', 'steps'}: one row per (method, step) with Figure 3's four measures."""
    columns = {"mrr@10_batch": "RR@10", f"r@{depth}_batch": f"R@{depth}", "bm25_overlap": "BM25 overlap",
               "async_overlap": "async overlap"}
    rows = []
    for run in runs:
        records = read_step_log(run["steps"])
        missing = [c for c in columns if records and c not in records[0]]
        if not records or missing:
            raise StageError(run["steps"], f"a step log without {', '.join(missing) or 'steps'} "
                                           f"(train-ltre with --probe-depth {depth} and --refresh-every)")
        rows += [{"method": run["method"], "step": r["step"], **{name: r[c] for c, name in columns.items()}}
                 for r in records]
    return pd.DataFrame(rows)


def smoothed(frame: pd.DataFrame, measure: str, window: int) -> pd.DataFrame:
    """A measure's running mean over `window` steps per method (batch metrics are noisy)."""
    out = frame[["method", "step"]].copy()
    out[measure] = frame.groupby("method", sort=False)[measure].transform(
        lambda s: s.rolling(window, min_periods=1).mean()).round(5)
    return out


def window_for(frame: pd.DataFrame) -> int:
    return max(1, int(np.ceil(frame["step"].max() / 20)))


def figure3_cells(frame: pd.DataFrame, runs: list[dict], depth: int) -> list[dict]:
    """Each method's Figure 3 measures averaged over the first fifth, the last fifth and all of its steps, with
    the step log as samples (one value a step: methods trained with the same seed see the same batches)."""
    fields = {"RR@10": "mrr@10_batch", f"R@{depth}": f"r@{depth}_batch", "BM25 overlap": "bm25_overlap",
              "async overlap": "async_overlap"}
    logs = {r["method"]: r["steps"] for r in runs}
    cells = []
    for method, part in frame.groupby("method", sort=False):
        for window in ("first", "last", "all"):
            chosen = part[window_steps(part["step"], window)]
            for measure, field in fields.items():
                cells.append(cell({"method": method, "window": window}, measure, round(float(chosen[measure].mean()), 5),
                                  samples={"kind": "steps", "file": str(logs[method]), "field": field,
                                           "window": window, "fraction": WINDOW_FRACTION}))
    return cells
