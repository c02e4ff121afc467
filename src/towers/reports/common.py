"""What every paper's tables share: the papers' typed-in values, a table's cells (the numbers the claims and the
expected-value check read) and where their per-query values come from, and figures of curves."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import StageError, read_json

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
