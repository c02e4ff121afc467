"""What every paper's tables share: the papers' typed-in values, the metrics of evaluations, and figures of
curves. A table's cells (the numbers the claims and the expected-value check read) are verdicts.cells'."""
from __future__ import annotations

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
