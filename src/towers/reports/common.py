"""What every paper's tables share: the papers' typed-in values, a table's cells (the numbers the claims and the
expected-value check read) and where their per-query values come from, and figures of curves."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import StageError, read_json, read_jsonl

def read_paper(path, dtype=None) -> pd.DataFrame:
    """A paper's numbers, typed in from its text (data/papers/)."""
    try:
        return pd.read_csv(path, dtype=dtype or {"split": str})
    except (OSError, pd.errors.ParserError) as err:
        raise StageError(path, f"cannot read the paper's values ({err})") from None


def paper_values(path, table: str) -> pd.DataFrame:
    frame = read_paper(path)
    frame = frame[frame["table"] == table]
    if frame.empty:
        raise StageError(path, f"no values for {table}")
    return frame


def paper_value(paper: pd.DataFrame, table: str, **key) -> float | None:
    rows = paper[paper["table"] == table]
    for column, value in key.items():
        rows = rows[rows[column] == str(value)]
    return float(rows["value"].iloc[0]) if len(rows) else None


def metric(path, name: str) -> float:
    result = read_json(path)
    if name not in result["metrics"]:
        raise StageError(path, f"no {name} in this evaluation (evaluate with it in the metrics list)")
    return result["metrics"][name]


def query_samples(evals, measure: str, scale: float = 1.0) -> dict:
    """Where a metric cell's per-query values are: evaluation JSONs (one per seed, averaged), the measure's name in
    them, and the factor that turns it into the table's unit (100 for percent)."""
    return {"kind": "queries", "files": [str(e) for e in evals], "measure": measure, "scale": scale}


def cell(row: dict, column: str, value, paper=None, samples: dict | None = None, kind: str = "metric") -> dict:
    """One number of a table, as the claims and the expected-value check read it (the stage's meta record):
    the row's labels, the column, the value shown, the paper's value, where its samples come from, and its kind
    (metric: ranking quality; count: a deterministic count or size; timing: seconds or milliseconds)."""
    found = {"row": {k: row_label(v) for k, v in row.items()}, "column": column, "value": value, "kind": kind,
             "paper": None if paper is None or pd.isna(paper) else float(paper)}
    if samples:
        found["samples"] = samples
    return found


def row_label(value) -> str:
    """A row label as text; numbers the way a table shows them (0.1, 5, not 0.10 or 5.0)."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


# Claims on training curves (LTRe Figure 3) compare the start of training with its end: the first and the
# last fifth of the steps
WINDOW_FRACTION = 0.2


def window_steps(steps: pd.Series, window: str) -> pd.Series:
    """Which of a run's steps fall in its 'first' or 'last' fifth, or 'all' of it."""
    span = max(1, int(np.ceil(WINDOW_FRACTION * steps.max())))
    return {"first": steps <= span, "last": steps > steps.max() - span, "all": steps > 0}[window]


_SAMPLES: dict = {}


def samples_of(source: dict) -> dict[str, float]:
    """A cell's per-item values, as its `samples` names them (cached: many claims and checks read the same
    evaluation): per query, per query's time, per query's overlap with BM25, or per training step."""
    key = repr(sorted(source.items()))
    if key not in _SAMPLES:
        _SAMPLES[key] = _read_samples(source)
    return _SAMPLES[key]


def _read_samples(source: dict) -> dict[str, float]:
    kind = source["kind"]
    if kind == "queries":   # evaluation JSONs, one per seed: each query's value averaged over seeds
        per_file = []
        for path in source["files"]:
            result = read_json(path)
            per_query = result.get("per_query", {})
            if any(source["measure"] not in values for values in per_query.values()):
                raise StageError(path, f"no per-query {source['measure']}")
            per_file.append({q: v[source["measure"]] for q, v in per_query.items()})
        qids = set(per_file[0])
        if any(set(p) != qids for p in per_file[1:]):
            raise StageError(source["files"][0], "the seeds' evaluations cover different queries")
        return {q: source["scale"] * float(np.mean([p[q] for p in per_file])) for q in sorted(qids)}
    if kind == "latency":
        result = read_json(source["file"])
        if "per_query_ms" not in result:
            raise StageError(source["file"], "no per-query times (made before latency recorded them: rerun it)")
        return {q: float(v) for q, v in result["per_query_ms"].items()}
    if kind == "consistency":
        result = read_json(source["file"])
        if "per_query" not in result:
            raise StageError(source["file"], "no per-query consistency (made before it was recorded: rerun it)")
        return {q: float(v) for q, v in result["per_query"][source["depth"]].items()}
    if kind == "steps":
        log = pd.DataFrame(list(read_jsonl(source["file"])))
        if source["field"] not in log:
            raise StageError(source["file"], f"no {source['field']} in this step log")
        chosen = log[window_steps(log["step"], source.get("window", "all"))]
        return {str(int(s)): float(v) for s, v in zip(chosen["step"], chosen[source["field"]])}
    raise StageError("cells", f"unknown kind of samples {kind!r}")


def plot(frame: pd.DataFrame, x: str, y: str, title: str, ax, log_x: bool = True) -> None:
    for method, part in frame.groupby("method", sort=False):
        ax.plot(part[x], part[y], marker="o" if log_x else None, label=method)
    ax.set_xscale("log" if log_x else "linear")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title)
    ax.legend()
    ax.grid(True, alpha=0.3)


def save_figure(panels: list[tuple[pd.DataFrame, str, str, str]], csv_path, png_path, note: str,
                log_x: bool = True) -> None:
    """One PNG with a panel per (frame, x, y, title), and the CSV behind it (all panels, long form)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..io import atomic_path

    figure, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for (frame, x, y, title), ax in zip(panels, axes[0]):
        plot(frame, x, y, title, ax, log_x)
    figure.text(0.01, 0.01, note, fontsize=7, wrap=True)
    figure.tight_layout(rect=(0, 0.08, 1, 1))
    with atomic_path(png_path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)
    plt.close(figure)
    data = pd.concat([frame.assign(panel=title, measure=y).rename(columns={y: "value"})
                      for frame, _, y, title in panels], ignore_index=True)
    with atomic_path(csv_path) as tmp:
        data.to_csv(tmp, index=False)
