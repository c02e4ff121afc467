"""What every paper's tables share: the papers' typed-in values, the metrics of evaluations, and figures of
curves. A table's cells (the numbers the claims and the expected-value check read) are verdicts.cells'."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

import pandas as pd

from ..io import StageError, read_json, write_json

# the printed name of a row label where its field name differs (one spelling of each header: words and spaces)
LABELS = {"paper_dataset": "paper dataset", "emb_dim": "emb dim"}


@dataclass(frozen=True)
class Option:
    """A setting a table's layout takes beside its rows (`--option NAME=VALUE`): one value, several (`many`: the
    option repeated) or several JSON objects of `fields` (values published elsewhere); `optional`: a `many` one may
    be given none."""
    name: str
    many: bool = False
    fields: tuple[str, ...] = ()
    optional: bool = False


@dataclass(frozen=True)
class Layout:
    """One table's shape, declared once in its paper's module (LAYOUTS: table name -> Layout): the fields of a row
    (the plan builds rows of them, the stage reads them), those that may be empty or are lists, the options it
    takes, whether its measures are percentages and whether it sits beside a paper's values (`paper`), and
    `build(rows, paper, table, profile, note, **options)` -> (frame, JSON twin, cells), the one signature of every
    layout."""
    fields: tuple[str, ...]
    build: Callable
    percent: bool = False
    paper: bool = True
    may_be_empty: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()


def labels(row: dict, fields: list[str]) -> dict:
    """A row's labels as the table prints them (and as its cells and the expected values name them)."""
    return {LABELS.get(f, f): row[f] for f in fields}


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


def measure_names(evaluations: list, metrics: list[str]) -> dict[str, str]:
    """Each asked metric's ir-measures name as the evaluations computed it (their `computed_as`, less a graded
    set's parameter: 'Success(rel=2)@1' is Success@1): the name a table prints, so R@k asked under the success
    convention is shown as Success@k. Evaluations of one table that computed a metric two ways are refused."""
    names: dict[str, tuple[str, object]] = {}
    for path in evaluations:
        computed = read_json(path).get("computed_as") or {}
        for m in metrics:
            name = re.sub(r"\([^)]*\)", "", computed.get(m, m))
            if names.setdefault(m, (name, path))[0] != name:
                raise StageError(path, f"{m} computed as {name}, but as {names[m][0]} in {names[m][1]}: one "
                                       "column cannot hold both (one recall convention a table)")
    return {m: names.get(m, (m, None))[0] for m in metrics}


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


# --- a table as the paper prints it -------------------------------------------------------------------------

MEASURE = re.compile(r"^(quality )?(R|RR|nDCG|P|AP|Success)@\d+( \S+)?$")   # ir_measures names, Table 5's '<m> <split>'
COUNTS = {"pairs", "tokens", "queries", "candidates", "tuples", "steps", "seeds", "depth", "layers",
          "emb dim", "index"}
ONE_DECIMAL = {"ms/query", "speed-up", "vs first alone (%)"}
# LTRe Table 3 in the paper's units: an embedded index is kilobytes (6 decimals of GB), a run seconds (5 of hours)
PLACES = {"memory GB": 6, "train hours": 5}
SCREEN = 160   # characters: one screen width (a terminal beside an editor, a 1366-pixel window), for `column -s, -t`
SIDES = (" paper", " sd", " published", " p")   # what sits beside a value: the paper's, its spread, a p-value
SIDE_NAMES = tuple(side.strip() for side in SIDES)   # their columns in a long table (long_form)


def decimals(column: str, percent: bool) -> int | None:
    """How many decimals a column is printed with: the papers' own precision (measures in percent with 2, as
    Chang et al. and QuadrupletBERT print them; as fractions with 3, as RepBERT and LTRe do); None: a label, or a
    p-value (two significant digits)."""
    if column.endswith(" p"):
        return None   # a p-value: two significant digits, however small (printed)
    base = next((column[:-len(s)] for s in SIDES if column.endswith(s)), column)
    if base in COUNTS:
        return 0
    if base in PLACES:   # the paper's own values as it prints them: one decimal
        return 1 if column.endswith(" paper") else PLACES[base]
    if base in ONE_DECIMAL:
        return 1
    if base.startswith("avg ") or base in ("C", "query tokens", "doc tokens"):
        return 2
    if MEASURE.match(base):
        return 2 if percent else 3
    return None


def p_text(value) -> str:
    """A p-value as tables and the report print it: two significant digits, however small; empty for none."""
    return "" if value is None or pd.isna(value) else f"{float(value):.2g}"


def printed(frame: pd.DataFrame, cells: list[dict], percent: bool) -> tuple[pd.DataFrame, dict]:
    """The table a reader sees, and its context: a column that holds one value in every row (the profile, a
    dataset, one split, a margin, a step count) leaves the rows for the context, said once in the record and the
    report's caption; a measured column (a cell's, counts aside) and the values beside it always stay, but for a
    paper column empty in every row. Numbers get their column's fixed decimals, p-values two significant digits
    (p_text). A comma inside a cell would break `column -s, -t`, so none may hold one."""
    measured = {c["column"] for c in cells if c["kind"] != "count"}
    counted = {c["column"] for c in cells if c["kind"] == "count"}
    shown, context = frame.copy(), {}
    for column in frame.columns:
        base = next((column[:-len(s)] for s in SIDES if column.endswith(s)), column)
        sides = [f"{column}{s}" for s in SIDES if f"{column}{s}" in frame.columns]
        values = frame[column].unique()
        shared = len(frame) > 1 or column == "profile"   # one row cannot tell a shared column from a label
        if shared and len(values) == 1 and frame[column].notna().all() and base not in measured \
                and not (column in counted and sides):
            context[column] = values[0].item() if hasattr(values[0], "item") else values[0]
            shown = shown.drop(columns=column)
    empty = [c for c in shown.columns if c.endswith((" paper", " published")) and shown[c].isna().all()]
    shown = shown.drop(columns=empty)   # a paper value no row has (RepBERT's R@2000) is no column
    # beside values published to 4 decimals (Pyserini's regressions), fractions print 4, so both can be compared
    published = any(c.endswith(" published") for c in shown.columns)
    for column in shown.columns:
        places = decimals(column, percent)
        places = 4 if published and places == 3 else places
        if column.endswith(" p") and pd.api.types.is_numeric_dtype(shown[column]):   # down to 1e-30: 2 digits
            shown[column] = [p_text(v) for v in shown[column]]
        elif places is not None and pd.api.types.is_numeric_dtype(shown[column]):
            shown[column] = [("" if pd.isna(v) else f"{float(v):.{places}f}") for v in shown[column]]
        texts = shown[column].dropna().astype(str)
        if texts.str.contains(",").any():
            raise ValueError(f"column {column!r} holds a comma ({texts[texts.str.contains(',')].iloc[0]!r}): "
                             "a printed table's cells may not")
    texts = [list(map(str, shown.columns)), *[["" if pd.isna(v) else str(v) for v in row]
                                             for row in shown.itertuples(index=False)]]
    if printed_width(texts) > SCREEN:
        shown = long_form(shown, {c["column"] for c in cells}, measured)
    return shown, context


def printed_width(rows: list[list[str]]) -> int:
    """How wide `column -s, -t` prints a table's rows of text (the header first): each column its widest text, two
    spaces between."""
    widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
    return sum(widths) + 2 * (len(widths) - 1)


def long_form(shown: pd.DataFrame, cell_columns: set, measured: set) -> pd.DataFrame:
    """A table too wide for one screen, one row a (row, measure): the row's labels, the measure's name in
    'measure', its value in 'value' and what sits beside it in 'paper', 'sd', 'published', 'p' (a figure's
    layout; the report lays it out wide again). A measure is a measured column or a count with the paper's
    value beside it; other counts (a row's queries) stay labels. A measure a row has no value of, here or in the
    paper (LTRe's training time of the start model), is no row."""
    melted = [c for c in shown.columns if c in cell_columns
              and (c in measured or any(f"{c}{s}" in shown.columns for s in SIDES))]
    sides = [s for s in SIDES if any(f"{c}{s}" in shown.columns for c in melted)]
    beside = {f"{c}{s}" for c in melted for s in SIDES}
    keys = [c for c in shown.columns if c not in melted and c not in beside]
    rows = [{**{k: row[k] for k in keys}, "measure": c, "value": row[c],
             **{s.strip(): row.get(f"{c}{s}", "") for s in sides}}
            for _, row in shown.iterrows() for c in melted
            if any(not pd.isna(v) and v != "" for v in [row[c], *(row.get(f"{c}{s}", "") for s in sides)])]
    return pd.DataFrame(rows, columns=[*keys, "measure", "value", *(s.strip() for s in sides)])


def wide_again(table: pd.DataFrame) -> pd.DataFrame:
    """A table printed long for the terminal (reports.common.long_form: a row a measure) laid out wide again, as
    the paper prints it: a column a measure, its paper value and spread beside it; rows in their first order
    (a measure a row lacks: NaN)."""
    if not {"measure", "value"} <= set(table.columns):
        return table
    sides = [c for c in SIDE_NAMES if c in table.columns]
    keys = [c for c in table.columns if c not in ("measure", "value", *sides)]
    rows: dict[tuple, dict] = {}
    for _, long in table.iterrows():
        row = rows.setdefault(tuple(long[k] for k in keys), {k: long[k] for k in keys})
        row[long["measure"]] = long["value"]
        row.update({f"{long['measure']} {side}": long[side] for side in sides})
    return pd.DataFrame(list(rows.values()))


def read_table(csv_path) -> pd.DataFrame:
    """A printed table wide (a long one laid out wide again: wide_again) with the columns its rows share put back
    (its record's context), for a reader who wants every label in the frame."""
    record = read_json(f"{csv_path}.meta.json")
    frame = wide_again(pd.read_csv(csv_path, dtype={"split": str}))
    for column, value in (record.get("context") or {}).items():
        frame[column] = value
    return frame


def non_numbers(value, key: str = "") -> list[str]:
    """The keys (dotted) of a metrics file's values that are not numbers: text, lists, true or false. Null, a cell
    without a value, is none (`dvc metrics` skips it)."""
    if isinstance(value, dict):
        return [bad for k, v in value.items() for bad in non_numbers(v, f"{key}.{k}" if key else str(k))]
    return [] if value is None or isinstance(value, (int, float)) and not isinstance(value, bool) else [key or "."]


def write_metrics(path, values: dict) -> None:
    """A metrics file (`dvc metrics`): nested objects of numbers only, so `dvc metrics diff` prints numbers. Its
    text (note, context, labels) belongs in the stage's record; a value that is not a number is refused."""
    if bad := (non_numbers(values) if isinstance(values, dict) else ["."]):
        raise ValueError(f"{path}: a metrics file holds numbers only, not {', '.join(bad[:3])}")
    write_json(path, values)


MEASURE_NAMES = {"MRR@10": "RR@10", "test_queries": "queries", "dev_queries": "queries"}   # spelt otherwise once


def layout_problems(csv_path, width: int = SCREEN) -> list[str]:
    """What keeps a printed table from reading like the paper's: a note or profile in its rows, a cell holding a
    comma (`column -s, -t` would split it), a header spelt two ways or with an underscore, a measure printed with
    varying decimals, or a layout wider than `width`."""
    import csv

    with open(csv_path, newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], rows[1:]
    problems = [f"column {c!r} repeats what the record says once" for c in header if c in ("note", "profile")]
    problems += [f"column {c!r} is spelt {MEASURE_NAMES[c]!r} elsewhere" for c in header if c in MEASURE_NAMES]
    problems += [f"column {c!r} has an underscore" for c in header if "_" in c]
    problems += [f"row {i + 2} holds a comma" for i, row in enumerate(body) if any("," in cell for cell in row)]
    # a long table (long_form) prints each measure in 'value' and its sides: decimals are a measure's own
    named = header.index("measure") if "measure" in header else None
    for j, column in enumerate(header):
        grouped = named is not None and column in ("value", *SIDE_NAMES) and column != "p"   # p: 2 digits
        for measure in sorted({row[named] for row in body}) if grouped else [column]:
            texts = [row[j] for row in body if row[j] and (not grouped or row[named] == measure)]
            # a label (a margin, a depth) prints as it is named
            if decimals(measure, percent=True) is not None and texts \
                    and all(re.fullmatch(r"-?\d+(\.\d+)?", t) for t in texts):
                places = {len(t.partition(".")[2]) for t in texts}
                if len(places) > 1:
                    problems.append(f"column {column!r} is printed with {sorted(places)} decimals"
                                    + (f" for {measure}" if named is not None else ""))
    wide = printed_width(rows)
    if wide > width:
        problems.append(f"{wide} characters wide in `column -s, -t` (at most {width})")
    return problems
