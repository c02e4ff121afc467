"""Expected values per profile, and the check of every table cell against them.

An expected-values file (data/expected/<profile>.csv) holds, for every cell (towers.verdicts.cells.cell) of every
table a profile makes, the value it should have and a tolerance; `expected` writes one from a finished run:

  metric cells  tolerance = z times the standard error of a rebuild: from the spread over seeds where a cell
                averages seeds (sqrt(2) x std / sqrt(seeds): two independent means differ by that much), and
                at least the bootstrap standard error over queries (or steps); never below two items' worth
  counts        exact (deterministic: data statistics, index sizes)
  timings       within 100% (they follow the machine and its load, not the method)

With basis 'exact' (the test configuration, deterministic on one kind of machine) every cell must come out
the same to 1e-6, timings aside (not checked).

Builds on different kinds of CPU (AVX2, AVX-512) differ at float level, which the mini's short trainings carry
into the tables; `make expected ALSO=<another machine's file>` centres each cell between the builds and widens
its tolerance to their range (across_builds).

The paper profile's file (data/expected/paper.yaml) is a policy instead: each cell's expected value is the
paper's (the tables' "<metric> paper" values, from data/papers) and its tolerance a declared share of it.

The check reports each cell as OK (within the tolerance), OKish (within 1.5 times it), FAIL (beyond, either
way: a rise is as unexpected as a drop), MISSING (an expected cell the tables no longer have) or NEW (a cell
without an expected value); the run fails when any cell FAILs or goes MISSING."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..io import StageError
from .cells import samples_of

COLUMNS = ["table", "row", "column", "kind", "expected", "tolerance", "basis"]
OKISH = 1.5            # OKish: beyond the tolerance but within this multiple of it
TIMING_SHARE = 1.0     # timings: within 100% of the expected value
EXACT = 1e-6


def row_text(row: dict) -> str:
    """A cell's row labels as one field: 'split=1-99; encoder=BM-25'."""
    return "; ".join(f"{k}={v}" for k, v in row.items())


def bootstrap_se(values: np.ndarray, seed: int = 0) -> float:
    """The bootstrap standard error of a mean over items (scipy.stats.bootstrap, seeded)."""
    from scipy import stats

    if len(values) < 2 or np.allclose(values, values[0]):
        return 0.0
    result = stats.bootstrap((values,), np.mean, n_resamples=2000, method="percentile",
                             random_state=np.random.default_rng(seed))
    return float(result.standard_error)


def seed_se(source: dict) -> float:
    """How far two rebuilds' means over seeds differ (one standard deviation): sqrt(2) * std / sqrt(seeds)."""
    from ..io import read_json

    if source.get("kind") != "queries" or len(source["files"]) < 2:
        return 0.0
    means = [source["scale"] * np.mean([v[source["measure"]] for v in read_json(f)["per_query"].values()])
             for f in source["files"]]
    return float(math.sqrt(2) * np.std(means, ddof=1) / math.sqrt(len(means)))


def tolerance_of(cell: dict, basis: str, z: float) -> tuple[float | None, str]:
    """A cell's tolerance and what it rests on."""
    value = cell["value"]
    if value is None:
        return None, "no value"
    if cell["kind"] == "timing":
        if basis == "exact":
            return None, "not checked: timings of the test configuration"
        return abs(value) * TIMING_SHARE, "declared: timings follow the machine"
    if basis == "exact" or cell["kind"] == "count":
        return EXACT, "exact: deterministic" if cell["kind"] == "count" else "exact: test configuration"
    source = cell.get("samples")
    if not source:
        return abs(value) * 0.05, "declared: 5%, no per-item values"
    items = np.array(list(samples_of(source).values()))
    spread, sampled = seed_se(source), bootstrap_se(items)
    floor = 2 * source.get("scale", 1.0) / max(1, len(items)) if source["kind"] == "queries" else 0.0
    unit = "steps" if source["kind"] == "steps" else "queries"
    what = f"spread over {len(source['files'])} seeds" if spread > sampled else f"bootstrap over {len(items)} {unit}"
    return max(z * max(spread, sampled), floor, EXACT), what


def expected_values(cells: dict[str, list[dict]], basis: str, z: float) -> pd.DataFrame:
    """Every cell's value as expected, with its tolerance."""
    rows = []
    for table, table_cells in cells.items():
        for cell in table_cells:
            tolerance, what = tolerance_of(cell, basis, z)
            rows.append({"table": table, "row": row_text(cell["row"]), "column": cell["column"], "kind": cell["kind"],
                         "expected": cell["value"], "tolerance": None if tolerance is None else round(tolerance, 6),
                         "basis": what})
    return pd.DataFrame(rows, columns=COLUMNS)


def across_builds(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Expected values from builds of one profile on different machines (kinds of CPU: torch and Faiss compute
    with other vector instructions, and trained models differ at float level) or at another inference precision
    (params inference_precision: hard negatives mined in bf16 train other models). A metric or timing cell's
    expected value is the builds' mean, its tolerance the widest of theirs and of the builds' own range, so each
    build sits inside it; counts must agree. Cells some builds lack keep the others' values."""
    stacked = pd.concat([f.assign(build=i) for i, f in enumerate(frames)], ignore_index=True)
    rows = []
    for (table, row, column), group in stacked.groupby(["table", "row", "column"], sort=False):
        values, tolerances = group["expected"].dropna(), group["tolerance"].dropna()
        first = group.iloc[0]
        entry = {"table": table, "row": row, "column": column, "kind": first["kind"], "basis": first["basis"]}
        if values.empty or tolerances.empty or len(group) == 1:
            rows.append({**entry, "expected": first["expected"], "tolerance": first["tolerance"]})
            continue
        spread = float(values.max() - values.min())
        if first["kind"] == "count" and spread > EXACT:
            raise ValueError(f"{table}, {row}, {column}: a count that differs between builds ({values.tolist()})")
        widest = group.loc[tolerances.idxmax()]
        tolerance = max(float(widest["tolerance"]), spread)
        basis = widest["basis"] if tolerance == widest["tolerance"] or first["kind"] == "timing" else \
            f"spread over {len(values)} builds (other vector kernels or inference precision)"
        rows.append({**entry, "expected": round(float(values.mean()), 6), "tolerance": round(tolerance, 6),
                     "basis": basis})
    return pd.DataFrame(rows, columns=COLUMNS)


def across_seeds(frame: pd.DataFrame, seeds: list[pd.DataFrame], builds: int = 2, z: float = 2.0) -> pd.DataFrame:
    """`frame`'s cells that the `seeds` (expected values of the same cells at other seeds) also hold, each
    tolerance widened to what another seed would move it: z standard deviations over the seeds (the build's own
    value one of them) times sqrt(1 + 1/builds), as the expected value is a mean over `builds` builds. For
    trajectories that float noise sends elsewhere (LTRe Figure 3's asynchronous refresh), where a rebuild on
    another machine is as far off as another seed."""
    key = ["table", "row", "column"]
    values = pd.concat([f.set_index(key)["expected"] for f in (frame, *seeds)], axis=1, join="inner")
    if values.shape[1] < 3:
        raise ValueError("fewer than three seeds: a spread needs the build and two others")
    by_seeds = values.std(axis=1, ddof=1) * z * math.sqrt(1 + 1 / builds)   # a tolerance a cell
    out = frame.set_index(key)
    wider = (by_seeds.reindex(out.index).fillna(0.0) > out["tolerance"]) & (out["kind"] == "metric")
    out.loc[wider, "tolerance"] = by_seeds[wider[wider].index].round(6)
    out.loc[wider, "basis"] = f"spread over {values.shape[1]} seeds"
    return out.reset_index()[COLUMNS]


def as_numbers(column: pd.Series, finite: bool = False) -> tuple[pd.Series, object]:
    """A column of a file read as numbers, and the index of its first entry that is not one (with `finite`: nor
    nan or inf), or None; empty entries stay empty."""
    numbers = pd.to_numeric(column, errors="coerce")
    bad = column.index[column.notna() & (~np.isfinite(numbers) if finite else numbers.isna())]
    return numbers, (bad[0] if len(bad) else None)


def read_expected(path) -> pd.DataFrame | dict:
    """An expected-values CSV, or a paper policy (YAML)."""
    path = Path(path)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            policy = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise StageError(path, f"cannot read the policy ({str(err).splitlines()[0]})") from None
        if not isinstance(policy, dict) or policy.get("values") != "paper" or "tolerance" not in policy:
            raise StageError(path, "a policy needs 'values: paper' and a 'tolerance' section")
        return policy
    try:
        frame = pd.read_csv(path, dtype={"row": str, "column": str, "table": str, "expected": str, "tolerance": str},
                            keep_default_na=False, na_values={"expected": [""], "tolerance": [""]})
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise StageError(path, f"cannot read the expected values ({err})") from None
    missing = [c for c in COLUMNS if c not in frame]
    if missing:
        raise StageError(path, f"no {missing[0]!r} column")

    def cell_at(index) -> str:   # line 1 is the header
        entry = frame.loc[index]
        return f"line {index + 2}, cell {entry['table']} [{entry['row']}] {entry['column']}"

    # an empty field is "no value" (shown, not judged); anything else must be a number the check can compare
    for column in ("expected", "tolerance"):
        numbers, bad = as_numbers(frame[column], finite=True)
        if bad is not None:
            raise StageError(path, f"{cell_at(bad)}: {column} {frame.loc[bad, column]!r} is not a finite number "
                                   "(leave it empty for none)")
        frame[column] = numbers.astype(float)
    negative = frame.index[frame["tolerance"] < 0]
    if len(negative):
        raise StageError(path, f"{cell_at(negative[0])}: tolerance {frame.loc[negative[0], 'tolerance']:g} is negative")
    first_at = {}
    for index, key in zip(frame.index, zip(frame["table"], frame["row"], frame["column"])):
        if key in first_at:   # the check would judge one of the two values and silently drop the other
            raise StageError(path, f"{cell_at(first_at[key])} is listed again on line {index + 2}")
        first_at[key] = index
    return frame


def paper_expectations(cells: dict[str, list[dict]], policy: dict) -> pd.DataFrame:
    """The paper profile's expectations: each cell's paper value, within the policy's share of it."""
    shares = policy["tolerance"]
    rows = []
    for table, table_cells in cells.items():
        for cell in table_cells:
            if cell.get("paper") is None:
                continue
            share = shares.get(table, {}).get(cell["kind"]) if isinstance(shares.get(table), dict) else None
            share = share if share is not None else shares[cell["kind"]]
            rows.append({"table": table, "row": row_text(cell["row"]), "column": cell["column"], "kind": cell["kind"],
                         "expected": cell["paper"], "tolerance": abs(cell["paper"]) * share,
                         "basis": f"the paper's value, {share:.0%} declared"})
    return pd.DataFrame(rows, columns=COLUMNS)


def status(difference: float, tolerance: float) -> str:
    if abs(difference) <= tolerance:
        return "OK"
    return "OKish" if abs(difference) <= OKISH * tolerance else "FAIL"


def check(cells: dict[str, list[dict]], expected: pd.DataFrame | dict) -> pd.DataFrame:
    """One row per cell (and per expected cell no table has any more) with its status."""
    if isinstance(expected, dict):
        expected = paper_expectations(cells, expected)
    wanted = {(r.table, r.row, r.column): r for r in expected.itertuples(index=False)}
    rows, seen = [], set()
    for table, table_cells in cells.items():
        for cell in table_cells:
            key = (table, row_text(cell["row"]), cell["column"])
            seen.add(key)
            value, entry = cell["value"], wanted.get(key)
            row = {"table": key[0], "row": key[1], "column": key[2], "reproduced": value}
            if entry is None or pd.isna(entry.expected) or pd.isna(entry.tolerance):
                rows.append({**row, "status": "NEW" if entry is None else "--"})
                continue
            if value is None:
                rows.append({**row, "expected": entry.expected, "tolerance": entry.tolerance, "status": "MISSING"})
                continue
            difference = value - entry.expected
            rows.append({**row, "expected": entry.expected, "difference": round(difference, 6),
                         "tolerance": entry.tolerance, "status": status(difference, entry.tolerance),
                         "basis": entry.basis})
    for key, entry in wanted.items():
        if key not in seen:
            rows.append({"table": key[0], "row": key[1], "column": key[2], "expected": entry.expected,
                         "tolerance": entry.tolerance, "status": "MISSING"})
    columns = ["status", "table", "row", "column", "reproduced", "expected", "difference", "tolerance", "basis"]
    return pd.DataFrame(rows).reindex(columns=columns)


def line(row) -> str:
    """One printed line of the check: status, cell, and how it compares."""
    where = f"{row['table']} [{row['row']}] {row['column']}"
    if row["status"] in ("NEW", "--"):
        return f"[{row['status']}] {where}: {row['reproduced']} (no expected value)"
    if row["status"] == "MISSING":
        return f"[MISSING] {where}: expected {row['expected']}, not in the tables"
    direction = "higher" if row["difference"] > 0 else "lower" if row["difference"] < 0 else "equal"
    return (f"[{row['status']}] {where}: {row['reproduced']} vs expected {row['expected']} "
            f"({row['difference']:+g}, {direction}; tolerance {row['tolerance']:g})")


def failures(report: pd.DataFrame) -> pd.DataFrame:
    return report[report["status"].isin(["FAIL", "MISSING"])]


def summary(report: pd.DataFrame) -> str:
    counts = report["status"].value_counts()
    return ", ".join(f"{counts[s]} {s}" for s in ("OK", "OKish", "FAIL", "MISSING", "NEW", "--") if s in counts)
