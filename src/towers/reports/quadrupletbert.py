"""QuadrupletBERT's Tables 1 and 2 (results/table1.csv, results/table2.csv): every cell the mean over seeds with
its standard deviation, and a paired test of QuadrupletBERT against Three-T BERT over queries."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import StageError, read_json
from ..verdicts.cells import cell, query_samples
from ..verdicts.significance import paired_p
from .common import labels, paper_values

def seed_summary(paths: list, metrics: list[str]) -> tuple[dict, dict, dict, int]:
    """Mean and sample standard deviation over seeds (in %), and each query's value averaged over seeds."""
    results = [read_json(p) for p in paths]
    values = {m: [100 * r["metrics"][m] for r in results] for m in metrics}
    mean = {m: float(np.mean(v)) for m, v in values.items()}
    std = {m: float(np.std(v, ddof=1)) if len(v) > 1 else 0.0 for m, v in values.items()}
    qids = sorted(results[0]["per_query"])
    for path, r in zip(paths, results):
        if sorted(r["per_query"]) != qids:
            raise StageError(path, "evaluated on other queries than the other seeds")
    per_query = {m: np.array([np.mean([r["per_query"][q][m] for r in results]) for q in qids]) for m in metrics}
    return mean, std, per_query, len(qids)


def paired_p_value(a: np.ndarray, b: np.ndarray, test: str) -> float:
    """Two-sided paired test over per-query values (the claims' test: verdicts.significance.paired_p); 1.0 when
    the two never differ."""
    if np.allclose(a, b):
        return 1.0
    return paired_p(a - b, test)


SEEDED_KEY = ["dataset", "paper_dataset", "split", "model", "margin", "index"]


def seeded_table(rows: list[dict], paper_csv, table: str, metrics: list[str], profile: str, note: str,
                 compare: tuple[str, str] | None, test: str, alpha: float,
                 exact_index: str) -> tuple[pd.DataFrame, dict, list[dict]]:
    """rows: SEEDED_KEY fields plus 'evals' (one evaluation JSON per seed).

    Each metric gets the mean over seeds, its standard deviation and the paper's value; rows of
    model compare[0] get the p-value of a paired test against compare[1] on the same dataset,
    split and index; rows on another index than `exact_index` get the recall lost against it."""
    paper = paper_values(paper_csv, table)
    paper["margin"] = paper["margin"].map(lambda m: "" if pd.isna(m) else f"{float(m):g}")
    by_margin = paper["margin"].ne("").any()   # Table 2's rows are margins; Table 1's are not
    paper = paper.set_index(["dataset", "split", "model", "margin"])
    summaries = {tuple(r[k] for k in SEEDED_KEY): seed_summary(r["evals"], metrics) for r in rows}
    by_model = {(k[0], k[2], k[3], k[4], k[5]): v for k, v in summaries.items()}
    records, twin, cells = [], {"table": table, "profile": profile, "rows": {}}, []
    spread = any(len(r["evals"]) > 1 for r in rows)   # one seed a row (Table 2's sweep): no std columns
    # the metrics twin names a row without its margin unless the margin is what tells rows apart
    # (Table 2), so `dvc metrics diff` pairs a row with itself when Table 1's margin is edited
    unmargined = {tuple(r[k] for k in SEEDED_KEY if k != "margin") for r in rows}
    twin_fields = [k for k in SEEDED_KEY if k != "margin" or len(unmargined) < len(rows)]
    for r in rows:
        key = tuple(r[k] for k in SEEDED_KEY)
        mean, std, per_query, queries = summaries[key]
        record = labels(r, SEEDED_KEY)
        record.update(seeds=len(r["evals"]), queries=queries, profile=profile)
        paper_key = (r["paper_dataset"], r["split"], r["model"], r["margin"] if by_margin else "")
        other = by_model.get((r["dataset"], r["split"], compare[1], r["margin"], r["index"])) if compare else None
        exact = by_model.get((r["dataset"], r["split"], r["model"], r["margin"], exact_index))
        twin_row = {}
        for m in metrics:
            record[m] = twin_row[m] = round(mean[m], 2)
            if spread:
                record[f"{m} std"] = round(std[m], 2)
            record[f"{m} paper"] = float(paper.loc[paper_key, m]) if paper_key in paper.index else None
            cells.append(cell(labels(r, SEEDED_KEY), m, record[m], record[f"{m} paper"],
                              query_samples(r["evals"], m, 100)))
            if compare and other is not None:
                record[f"{m} p"] = paired_p_value(per_query[m], other[2][m], test) \
                    if r["model"] == compare[0] else None
            if r["index"] != exact_index and exact is not None:   # the recall a compressed index loses: the twin's
                twin_row[f"{m} lost to quantization"] = round(exact[0][m] - mean[m], 2)
        records.append(record)
        twin["rows"]["/".join(str(r[k]) for k in twin_fields if r[k] != "")] = twin_row
    frame = pd.DataFrame(records)
    tested = f"; <measure> p: {test} test (two-sided, paired over queries) of {compare[0]} against {compare[1]} " \
             f"on the same dataset, split and index, alpha {alpha}" if compare else ""
    seeds = "; <measure> std: standard deviation over seeds" if spread else "; one seed a row"
    frame["note"] = f"{note}{seeds}{tested}"
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
