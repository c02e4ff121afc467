"""A table's cells: the numbers the claims and the expected-value check read, and where their per-item values
come from. Every table stage writes its cells (`cell`) into its meta record: the row's labels, the column, the
value shown, the paper's value and where the per-query (or per-step) values are (`query_samples`, read back by
`samples_of`). A side of a claim's comparison is a cell or the difference of two (`Term`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import digests
from ..io import StageError, read_json, read_jsonl


# --- what a table stage records ---------------------------------------------------------------------------

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
        # the files a record names are stage outputs: read only as their writers recorded them
        digests.verify([f for f in source.get("files") or [source.get("file")] if f])
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
        scale = source.get("scale", 1.0)   # a step's seconds as hours, the table's unit
        return {str(int(s)): scale * float(v) for s, v in zip(chosen["step"], chosen[source["field"]])}
    raise StageError("cells", f"unknown kind of samples {kind!r}")


# --- a profile's cells, and the terms a claim compares --------------------------------------------------

def load_cells(tables: dict[str, Path]) -> dict[str, list[dict]]:
    """Table name (e.g. 'chang2020/table3') -> its cells, from '<csv>.meta.json', each value (and paper value)
    checked against the CSV itself: the record is no protected file, and the check and the claims must judge the
    numbers the table shows. A record that disagrees with its table is refused, naming both.
    Where a cell's per-item values are (`samples`) can only come from the record: the table does not name them.
    It is trusted for that; the files it names are stage outputs, checked against the digests their writers
    recorded when they are read (samples_of)."""
    found = {}
    for name, csv in tables.items():
        meta = Path(f"{csv}.meta.json")
        record = read_json(meta)
        if not isinstance(record, dict) or "cells" not in record:
            raise StageError(meta, "no cells in this meta record (made before tables recorded them: rebuild the table)")
        try:
            frame = pd.read_csv(csv, dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
            raise StageError(csv, f"cannot read the table ({str(err).strip().splitlines()[0][:200]})") from None
        for c in record["cells"]:
            problem = disagreement(frame, c, record.get("context") or {})
            if problem:
                where = f"cell [{'; '.join(f'{k}={v}' for k, v in c['row'].items())}] {c['column']}"
                raise StageError(meta, f"{where} {problem.format(table=csv)}; the record was edited or is stale: "
                                       "rebuild the table")
        found[name] = record["cells"]
    return found


SCALES = {"M": 1e6, "B": 1e9}   # millions, billions: Chang et al.'s Table 1 (50.2M pairs), read back by _same


def count_text(count: int | None) -> str | None:
    """A count as Chang et al.'s Table 1 prints it: one decimal of millions or billions (50.2M, 11.2B)."""
    if count is None or count < SCALES["M"]:
        return None if count is None else str(count)
    return f"{count / SCALES['B']:.1f}B" if count >= SCALES["B"] else f"{count / SCALES['M']:.1f}M"


def _same(text: str, value, rounded: bool = False) -> bool:
    """A table's text against a recorded label or number: equal (as text, or as numbers to float noise), or both
    empty; `rounded`: a value the table prints rounded, equal at the decimals it shows."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return text.strip().lower() in ("", "nan")
    if isinstance(value, str) and text == value:
        return True
    digits = text.strip()
    scale = SCALES.get(digits[-1:], 1.0) if rounded else 1.0   # '50.2M': a count as the paper prints it
    digits = digits[:-1] if scale != 1.0 else digits
    try:
        shown, recorded = float(digits) * scale, float(value)
    except (TypeError, ValueError):
        return False
    places = len(digits.partition(".")[2]) if rounded and "e" not in digits.lower() else None
    # half a unit of the last printed decimal, and float noise
    slack = 0.5 * 10.0 ** -places * scale if places is not None else 0.0
    return abs(shown - recorded) <= slack + 1e-9 * max(1.0, abs(recorded))


def disagreement(frame: pd.DataFrame, found: dict, context: dict | None = None) -> str:
    """Why a recorded cell is not what the table shows ('' when it is); '{table}' stands for the table's path.
    The cell is the table's row with its labels in its column (a figure's or a long table's: the 'value' of the
    row whose 'measure' is its column, the paper's in 'paper'), its paper value in '<column> paper' (or '<column>
    published'). A label the table says once for all rows (its `context`) is checked there, not in the rows.
    Rows a profile repeats (one dataset standing in for two) may each hold it."""
    context = context or {}
    if found["column"] in context and found["column"] not in frame.columns:   # a count every row shares
        shown = context[found["column"]]
        return "" if _same(str(shown), found["value"]) else f"is {found['value']} here but {shown} in {{table}}"
    in_rows = {k: v for k, v in found["row"].items() if k not in context or k in frame.columns}
    for key in found["row"].keys() - in_rows.keys():
        if not _same(str(context[key]), found["row"][key]):
            return f"has {key}={found['row'][key]} but {{table}} says {key}={context[key]} for every row"
    rows = frame if all(key in frame.columns for key in in_rows) else frame.iloc[:0]
    for key, label in in_rows.items():
        rows = rows[[_same(text, label) for text in rows[key]]] if len(rows) else rows
    column = value_column = found["column"]
    # the paper's value, or one published elsewhere (zero-shot table)
    paper_column = next((c for c in (f"{column} paper", f"{column} published") if c in frame.columns), "")
    if column not in frame.columns:   # a figure's data or a long table: one row a measure, named in 'measure'
        rows = rows[rows["measure"] == column] if {"measure", "value"} <= set(frame.columns) else rows.iloc[:0]
        value_column = "value"
        paper_column = next((c for c in ("paper", "published") if c in frame.columns), "")
    if rows.empty:
        return steps_disagreement(found) if (found.get("samples") or {}).get("kind") == "steps" else \
            "is not in {table}"
    for value_of, column_of in (("value", value_column), ("paper", paper_column)):
        if column_of in frame.columns and not any(_same(text, found.get(value_of), rounded=True)
                                                  for text in rows[column_of]):
            return f"is {found.get(value_of)} here but {rows[column_of].iloc[0] or 'empty'} in {{table}}" \
                if value_of == "value" else \
                f"has paper value {found.get('paper')} here but {rows[column_of].iloc[0] or 'none'} in {{table}}"
    return ""


def steps_disagreement(found: dict) -> str:
    """A cell the table does not show, a mean over a window of training steps (LTRe Figure 3: its CSV holds the
    smoothed curves): checked against the step log it averages."""
    if found["value"] is None:
        return ""
    values = list(samples_of(found["samples"]).values())
    mean = float(np.mean(values)) if values else float("nan")
    if values and abs(mean - found["value"]) <= 1e-5:   # the figure rounds to 5 places
        return ""
    return f"is {found['value']} here but {round(mean, 5)} in its step log {found['samples']['file']} (not in {{table}})"


def matches(row: dict, selector: dict) -> bool:
    """A row's labels against a selector: every key present and equal (a list: any of its values)."""
    for key, wanted in selector.items():
        values = [str(v) for v in wanted] if isinstance(wanted, list) else [str(wanted)]
        if key not in row or row[key] not in values:
            return False
    return True


def not_given(table: str) -> str:
    return f"{table} is not among the tables given (not built in this profile, or left out)"


class Missing(Exception):
    """A cell a claim needs is not in this profile's tables: the part is not measurable."""


@dataclass
class Term:
    """One side of a comparison: a cell, or the difference of two (a gain). Values are in the table's unit."""
    label: str
    value: float | None
    paper: float | None
    samples: dict[str, float] | None   # key (query, step) -> value; None when the cell has no per-item values
    sources: tuple = ()
    pairing: str = "queries"
    dataset: str = ""                  # whose queries the samples are ('' when unknown, or two datasets' mixed)


def pick(cells: dict[str, list[dict]], table: str, selector: dict, column: str) -> dict:
    if table not in cells:
        raise Missing(not_given(table))
    found = [c for c in cells[table] if c["column"] == column and matches(c["row"], selector)]
    if not found:
        shown = ", ".join(f"{k}={v}" for k, v in selector.items())
        raise Missing(f"no {column} of {shown} in {table}")
    if len(found) > 1:
        raise StageError(table, f"the selector {selector} matches {len(found)} rows for {column}; narrow it")
    return found[0]


def cell_term(cells, table: str, selector: dict, column: str) -> Term:
    found = pick(cells, table, selector, column)
    source = found.get("samples")
    pairing = {"steps": "steps", None: "none"}.get(source and source["kind"], "queries")
    label = "/".join(f"{v}" for v in selector.values()) or table
    return Term(label=label, value=found["value"], paper=found.get("paper"),
                samples=samples_of(source) if source else None, pairing=pairing,
                dataset=dataset_of(source) if pairing == "queries" else "",
                # what the value rests on: its per-item values, or the cell itself where it has none
                sources=(repr(source) if source else repr((table, sorted(found["row"].items()), column)),))


def difference(a: Term, b: Term, label: str | None = None) -> Term:
    """a - b, item by item (their common items)."""
    samples = None
    if a.samples is not None and b.samples is not None:
        common = [k for k in a.samples if k in b.samples]
        samples = {k: a.samples[k] - b.samples[k] for k in common}
    return Term(label=label or f"({a.label} - {b.label})", value=minus(a.value, b.value),
                paper=minus(a.paper, b.paper), samples=samples, sources=a.sources + ("-",) + b.sources,
                pairing=a.pairing, dataset=a.dataset if a.dataset == b.dataset else "")


def dataset_of(source: dict) -> str:
    """The dataset whose queries a cell's per-query values are: the folder under artifacts/ of the file they are
    read from (every stage output lies in artifacts/<dataset>/..., towers.plan.paths); '' where none is."""
    parts = Path((source.get("files") or [source.get("file") or ""])[0]).parts
    return parts[parts.index("artifacts") + 1] if "artifacts" in parts[:-1] else ""


def minus(a, b):
    return None if a is None or b is None else a - b
