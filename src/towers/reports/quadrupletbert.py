"""QuadrupletBERT's Tables 1 and 2 (results/table1.csv, results/table2.csv): every cell the mean over seeds with
its standard deviation over seeds and the paper's value (the comparisons are the claims')."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..config.params_check import bounded
from ..io import StageError, read_json
from ..verdicts.cells import cell, query_samples
from .common import Layout, Option, paper_values


def seed_summary(paths: list, metrics: list[str]) -> tuple[dict, dict, int]:
    """Mean and sample standard deviation over seeds (in %), and the query count the seeds share."""
    results = [read_json(p) for p in paths]
    values = {m: [100 * r["metrics"][m] for r in results] for m in metrics}
    mean = {m: float(np.mean(v)) for m, v in values.items()}
    std = {m: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for m, v in values.items()}
    qids = sorted(results[0]["per_query"])
    for path, r in zip(paths, results):
        if sorted(r["per_query"]) != qids:
            raise StageError(path, "evaluated on other queries than the other seeds")
    return mean, std, len(qids)


SEEDED_KEY = ["dataset", "paper_dataset", "split", "model", "margin", "index"]


def margin_text(margin: str) -> str:
    """A row's margin as the paper's values name it ('0.10' is 0.1), '' for none."""
    try:
        return f"{float(margin):g}" if margin else ""
    except ValueError:
        raise StageError("--row", f"margin {bounded(margin, 80)!r} is not a number") from None


def seeded_table(rows: list[dict], paper_csv, table: str, profile: str, note: str, *, metrics: list[str],
                 exact_index: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: SEEDED_KEY fields plus 'evals' (one evaluation JSON per seed).

    Each metric gets the mean over seeds, its standard deviation (`<measure> sd`) and the paper's value; a row is
    named by the paper's dataset (the profile's stand-in in the note), and by its margin only where the margins
    are what the table sweeps (Table 2; Table 1's margins are settings, said in the note). Rows on another index
    than `exact_index` have no paper value (the paper reports exact search) and their twin the recall lost against
    it. Significance is the claims' (results/claims.csv: paired over queries, Holm-corrected)."""
    rows = [{**row, "margin": margin_text(row["margin"])} for row in rows]
    paper = paper_values(paper_csv, table)
    paper["margin"] = paper["margin"].map(lambda m: "" if pd.isna(m) else f"{float(m):g}")
    by_margin = paper["margin"].ne("").any()   # Table 2's rows are margins; Table 1's are not
    paper = paper.set_index(["dataset", "split", "model", "margin"])
    shown_key = ["paper_dataset", "split", "model", *(["margin"] if by_margin else []), "index"]
    summaries = {tuple(r[k] for k in SEEDED_KEY): seed_summary(r["evals"], metrics) for r in rows}
    by_model = {(k[0], k[2], k[3], k[4], k[5]): v for k, v in summaries.items()}
    records, twin, cells = [], {"table": table, "profile": profile, "rows": {}}, []
    spread = any(len(r["evals"]) > 1 for r in rows)   # one seed a row (Table 2's sweep): no sd columns
    # the metrics twin names a row without its margin unless the margin is what tells rows apart
    # (Table 2), so `dvc metrics diff` pairs a row with itself when Table 1's margin is edited
    unmargined = {tuple(r[k] for k in SEEDED_KEY if k != "margin") for r in rows}
    twin_fields = [k for k in SEEDED_KEY if k != "margin" or len(unmargined) < len(rows)]
    for r in rows:
        key = tuple(r[k] for k in SEEDED_KEY)
        mean, std, queries = summaries[key]
        row = {("dataset" if k == "paper_dataset" else k): r[k] for k in shown_key}
        record = {**row, "seeds": len(r["evals"]), "queries": queries, "profile": profile}
        paper_key = (r["paper_dataset"], r["split"], r["model"], r["margin"] if by_margin else "")
        exact = by_model.get((r["dataset"], r["split"], r["model"], r["margin"], exact_index))
        twin_row = {}
        for m in metrics:
            record[m] = twin_row[m] = round(mean[m], 2)
            if spread:
                record[f"{m} sd"] = round(std[m], 2)
            record[f"{m} paper"] = float(paper.loc[paper_key, m]) \
                if paper_key in paper.index and r["index"] == exact_index else None
            cells.append(cell(row, m, record[m], record[f"{m} paper"], query_samples(r["evals"], m, 100)))
            if r["index"] != exact_index and exact is not None:   # the recall a compressed index loses: the twin's
                twin_row[f"{m} lost to quantization"] = round(exact[0][m] - mean[m], 2)
        records.append(record)
        twin["rows"]["/".join(str(r[k]) for k in twin_fields if r[k] != "")] = twin_row
    frame = pd.DataFrame(records)
    parts = [f"{note}; <measure> sd: standard deviation over seeds" if spread else f"{note}; one seed a row"]
    parts += sorted({f"{r['paper_dataset']}: {r['dataset']}" for r in rows if r["dataset"] != r["paper_dataset"]})
    if not by_margin:
        parts.append("margins: " + ", ".join(sorted({f"{r['model']} {r['margin']} on {r['paper_dataset']}"
                                                     for r in rows})))
    quantized = sorted({r["index"] for r in rows} - {exact_index})
    if quantized:
        parts.append(f"rows through {', '.join(quantized)}: no paper value (the paper reports {exact_index} search)")
    frame["note"] = "; ".join(parts)
    return frame, twin, cells


# --- phase 2's validation: when each Table 1 run stopped -------------------------------------------------------

PHASE2_KEY = ["dataset", "split", "seed"]


def phase2_frames(runs: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """runs: PHASE2_KEY fields and 'model' (a phase-2 model folder, its training record beside it). The validation
    loss at every check, and one row a run: its training and validation questions, the check whose weights were
    kept (best step), where it stopped and its ceiling (steps)."""
    from pathlib import Path

    checks, summary = [], []
    for run in runs:
        record = Path(str(run["model"]).rstrip("/") + ".meta.json")
        counts = read_json(record).get("counts", {})
        if "history" not in counts:
            raise StageError(record, "no training history in this record (not a train-margin model's?)")
        scored = [h for h in counts["history"] if "valid_loss" in h]
        key = {k: run[k] for k in PHASE2_KEY}
        checks += [{**key, "step": h["step"], "train loss": h.get("loss"), "valid loss": h["valid_loss"]} for h in scored]
        best = min(scored, key=lambda h: h["valid_loss"]) if scored else None
        last = counts["history"][-1]["step"] if counts["history"] else 0
        summary.append({**key, "train questions": counts.get("train_questions"),
                        "valid questions": counts.get("valid_questions"),
                        "best step": counts.get("best_step", best["step"] if best else last),
                        "stopped at": counts.get("stopped_at_step", last), "steps": counts["steps"],
                        "best valid loss": best["valid_loss"] if best else None})
    return pd.DataFrame(checks, columns=PHASE2_KEY + ["step", "train loss", "valid loss"]), pd.DataFrame(summary)


def checks_of(checks: pd.DataFrame, run: dict) -> pd.DataFrame:
    """One run's rows of the checks."""
    return checks[(checks[PHASE2_KEY] == [run[k] for k in PHASE2_KEY]).all(axis=1)]


def phase2_cells(summary: pd.DataFrame) -> list[dict]:
    """Each run's stopping point and best validation loss, as the check reads them (no per-item values)."""
    return [cell({k: row[k] for k in PHASE2_KEY}, column, row[column])
            for row in summary.to_dict("records") for column in ("best step", "best valid loss")
            if row[column] is not None and not pd.isna(row[column])]


def draw_phase2(checks: pd.DataFrame, summary: pd.DataFrame, png_path, note: str) -> None:
    """A panel a (dataset, split): each seed's validation loss by step, its kept check marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    panels = list(summary.groupby(["dataset", "split"], sort=False))
    figure, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.5 * max(1, len(panels)), 4), squeeze=False)
    for ((dataset, split), runs), ax in zip(panels, axes[0]):
        for run in runs.to_dict("records"):
            part = checks_of(checks, run)
            line, = ax.plot(part["step"], part["valid loss"], label=f"seed {run['seed']}")
            kept = part[part["step"] == run["best step"]]
            ax.plot(kept["step"], kept["valid loss"], marker="o", color=line.get_color())
        ax.set_title(f"{dataset} {split} ({runs['valid questions'].iloc[0]} valid questions)", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("validation loss")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
    figure.text(0.01, 0.01, note, fontsize=7, wrap=True)
    figure.tight_layout(rect=(0, 0.1, 1, 1))
    with atomic_path(png_path) as tmp:
        figure.savefig(tmp, format="png", dpi=110)
    plt.close(figure)


def write_phase2(runs: list[dict], csv_path, png_path, note: str) -> pd.DataFrame:
    """The figure, one row a run (csv_path) and each run's checks in its own CSV (its 'curve', which `dvc plots
    show` draws: dvc.yaml's plots); returns the rows."""
    from ..io import atomic_path

    checks, summary = phase2_frames(runs)
    draw_phase2(checks, summary, png_path, note)
    for run in runs:
        with atomic_path(run["curve"]) as tmp:
            checks_of(checks, run).drop(columns=PHASE2_KEY).to_csv(tmp, index=False)
    with atomic_path(csv_path) as tmp:
        summary.to_csv(tmp, index=False)
    return summary


SEEDED = Layout((*SEEDED_KEY, "evals"), seeded_table, percent=True, may_be_empty=("margin",), lists=("evals",),
                options=(Option("metrics", many=True), Option("exact_index")))
LAYOUTS = {"table1": SEEDED, "table2": SEEDED}
