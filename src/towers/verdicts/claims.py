"""A paper's findings as checkable statements, tested on the tables a profile made.

A claims file (data/papers/<paper>.claims.yaml) lists each finding with its source in the paper and the
table cells it compares. Each claim expands into comparisons ("parts": one per split, metric, row, ...);
each part tests a difference of per-query values (seeds averaged, as the tables average them) with a paired
test from scipy, two-sided, Holm-corrected over all parts of the paper (statsmodels), and gets a verdict:

  holds                          significant, in the claimed direction
  same direction, not significant
  not supported                  no difference, or the other direction without significance
  contradicted                   significant, in the other direction
  not measurable                 the profile lacks a cell the claim needs (or the claim says why)

A claim's verdict is its weakest part's. Every part is also worked out on the paper's own numbers, so a
claims file that misreads the paper shows up (column 'paper agrees'), and states the smallest difference its
paired test detects at 80% power, from its own per-query differences and counted by article (`power`).

Where the cells come from: every table stage writes its cells (towers.verdicts.cells.cell) into its meta record:
the row's labels, the column, the value shown, the paper's value and where the per-query values are. The terms a
part compares are built from them in cells.py; its test and verdict are significance.py's."""
from __future__ import annotations

import dataclasses
import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..io import StageError
from .cells import Missing, Term, cell_term, difference, matches, minus, not_given
from .significance import (Test, detectable, detectable_clustered, holm, paired_differences, test_difference,
                           verdict, weakest)

VERDICTS = ["holds", "same direction, not significant", "not supported", "contradicted", "not measurable"]
FORMS = ("higher", "order", "not_worse", "ratio", "sweep", "diagonal")


def add_subset_reading(records: list[dict], subset: list[dict], name: str) -> None:
    """Each comparison's reading on a subset of its queries beside it ('<name> n', '... difference', '... p (Holm)',
    '... detectable', '... detectable clustered', '... verdict', '... claim verdict'); a claim none of whose
    comparisons reads the subset has no such verdict."""
    for whole, part in zip(records, subset):
        measured = part["verdict"] != "not measurable"
        whole.update({f"{name} {key}": part.get(key) if measured else None
                      for key in ("n", "difference", "p (Holm)", "detectable", "detectable clustered")})
        whole.update({f"{name} verdict": part["verdict"] if measured else "",
                      f"{name} claim verdict": part["claim verdict"]})
    read_there = {(r["paper"], r["claim"]) for r in records if r[f"{name} verdict"]}
    for r in records:
        if (r["paper"], r["claim"]) not in read_there:
            r[f"{name} claim verdict"] = ""


def verdict_counts(frame) -> dict:
    """claims.json (`dvc metrics`, numbers only): per paper, how many claims got each verdict (a claim's verdict is
    on each of its rows)."""
    twin = {"papers": {}}
    for (paper, _), part in frame.groupby(["paper", "claim"], sort=False):
        counts = twin["papers"].setdefault(paper, {v: 0 for v in VERDICTS})
        counts[part["claim verdict"].iloc[0]] += 1
    return twin


# --- claims -> parts ----------------------------------------------------------------------------------

@dataclass
class Part:
    """One comparison of a claim: higher - lower - shift > 0 is what the paper says."""
    claim: dict
    where: str                      # the group and metric it is about
    higher: Term | None = None
    lower: Term | None = None
    shift: float = 0.0
    bound: str = ""                 # what the shift means ("by at least 5", "within 0.02")
    missing: str = ""               # why it cannot be measured
    test: Test | None = None
    p_adjusted: float | None = None
    duplicate_of: str = ""
    extra: dict = field(default_factory=dict)

    def signature(self) -> tuple:
        return (self.higher.sources, self.lower.sources, self.shift) if self.higher and self.lower else ()


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def expand(claim: dict, cells: dict[str, list[dict]]) -> list[Part]:
    """A claim's parts on this profile's cells: one per metric (globs allowed), group of `for_each` values and
    comparison the claim's form makes."""
    if claim.get("not_measurable"):
        return [Part(claim, "", missing=claim["not_measurable"])]
    tables = as_list(claim.get("tables") or claim.get("table"))
    parts = []
    for table in tables:
        if table not in cells:
            parts.append(Part(claim, table, missing=not_given(table)))
            continue
        for column in columns_of(cells[table], claim["metrics"]):
            for group in groups(cells[table], claim, column):
                where = ", ".join([table, *(f"{k}={v}" for k, v in group.items()), column])
                parts += form_parts(claim, cells, table, group, column, where)
        if not any(p.where.startswith(table) for p in parts):
            parts.append(Part(claim, table, missing=f"no cell of {table} matches the claim's metrics and rows"))
    return parts


def columns_of(table_cells: list[dict], patterns: list[str]) -> list[str]:
    """The table's columns that the claim's metric names (or glob patterns, e.g. 'R@100 *') match, in order."""
    present = list(dict.fromkeys(c["column"] for c in table_cells))
    return [c for c in present if any(fnmatch.fnmatchcase(c, p) for p in patterns)]


def groups(table_cells: list[dict], claim: dict, column: str) -> list[dict]:
    """Each combination of the claim's `for_each` labels present in the table (with `where` applied)."""
    keys = claim.get("for_each", [])
    where = claim.get("where", {})
    seen = []
    for c in table_cells:
        if c["column"] == column and matches(c["row"], where) and all(k in c["row"] for k in keys):
            group = {k: c["row"][k] for k in keys}
            if group not in seen:
                seen.append(group)
    return seen or ([{}] if not keys else [])


def term(cells, claim: dict, default_table: str, group: dict, column: str, spec) -> Term:
    """A side of a comparison: a selector (row labels; 'table' and 'column' may differ from the claim's), or
    {'gain': [selector, selector]} for a difference of two cells."""
    if isinstance(spec, dict) and "gain" in spec:
        a, b = (term(cells, claim, default_table, group, column, s) for s in spec["gain"])
        return difference(a, b)
    spec = dict(spec)
    table = spec.pop("table", default_table)
    chosen = spec.pop("column", column)
    labels = {k for c in cells.get(table, []) for k in c["row"]}   # another table may not have the group's labels
    shared = {**claim.get("where", {}), **group}
    context = {k: v for k, v in shared.items() if k not in spec and k in labels}
    # '$label' stands for the group's value of that label (a row of another table named differently)
    spec = {k: shared.get(v[1:], v) if isinstance(v, str) and v.startswith("$") else v for k, v in spec.items()}
    selector = {**context, **spec}
    found = cell_term(cells, table, selector, chosen)
    found.label = "/".join(str(v) for v in spec.values()) or found.label
    return found


def form_parts(claim: dict, cells, table: str, group: dict, column: str, where: str) -> list[Part]:
    """The comparisons a claim's form makes in one group."""
    parts = []

    def add(higher_spec, lower_spec, shift=0.0, bound="", **extra):
        part = Part(claim, where, shift=shift, bound=bound, extra=extra)
        try:
            part.higher = term(cells, claim, table, group, column, higher_spec)
            part.lower = term(cells, claim, table, group, column, lower_spec)
        except Missing as why:
            part.missing = str(why)
        parts.append(part)

    if "higher" in claim:
        for higher in as_list(claim["higher"]):
            for lower in as_list(claim["lower"]):
                add(higher, lower, claim.get("by", 0.0), f"by at least {claim['by']}" if claim.get("by") else "")
    elif "order" in claim:
        for higher, lower in zip(claim["order"], claim["order"][1:]):
            add(higher, lower)
    elif "not_worse" in claim:
        for than in as_list(claim["than"]):
            add(claim["not_worse"], than, -claim["within"], f"not worse by more than {claim['within']}")
    elif "ratio" in claim:
        parts += ratio_parts(claim, cells, table, group, column, where)
    elif "sweep" in claim:
        parts += sweep_parts(claim, cells, table, group, column, where)
    elif "diagonal" in claim:
        parts += diagonal_parts(claim, cells, table, group, column, where)
    return parts


def ratio_parts(claim, cells, table, group, column, where) -> list[Part]:
    """'Of the same order': log(a / b) above log(low) and below log(high), item by item (two parts)."""
    spec = claim["ratio"]
    low, high = spec["within"]
    try:
        a = term(cells, claim, table, group, column, spec["of"])
        b = term(cells, claim, table, group, column, spec["to"])
    except Missing as why:
        return [Part(claim, where, missing=str(why))]
    log_a, log_b = log_term(a), log_term(b)
    ratio = difference(log_a, log_b, f"log({a.label} / {b.label})")
    zero = Term("0", 0.0, 0.0, {k: 0.0 for k in (ratio.samples or {})}, ("0",), ratio.pairing, ratio.dataset)
    low_part = Part(claim, where, higher=ratio, lower=zero, shift=math.log(low), bound=f"ratio at least {low}",
                    extra={"ratio": _ratio(a.value, b.value), "paper ratio": _ratio(a.paper, b.paper)})
    high_part = Part(claim, where, higher=zero, lower=ratio, shift=-math.log(high), bound=f"ratio at most {high}",
                     extra=low_part.extra)
    return [low_part, high_part]


def log_term(t: Term) -> Term:
    return Term(f"log {t.label}", _log(t.value), _log(t.paper),
                None if t.samples is None else {k: math.log(v) for k, v in t.samples.items() if v > 0},
                t.sources + ("log",), t.pairing, t.dataset)


def _log(v):
    return None if v is None or v <= 0 else math.log(v)


def _ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def sweep_parts(claim, cells, table, group, column, where) -> list[Part]:
    """A sweep over one row label (e.g. the margin): the best value inside a range beats the best outside it
    (best_in), or the best beats the worst by at least some amount (spread_at_least). Best and worst are
    picked on this profile's values, and separately on the paper's for the paper's side."""
    spec = claim["sweep"]
    key = spec["over"]
    context = {**claim.get("where", {}), **group}
    rows = [c for c in cells[table] if c["column"] == column and matches(c["row"], context) and key in c["row"]]
    if len(rows) < 2:
        return [Part(claim, where, missing=f"fewer than two values of {key} in {table}")]

    def best(chosen, on="value", worst=False):
        chosen = [c for c in chosen if c.get(on) is not None]
        if not chosen:
            return None
        return (min if worst else max)(chosen, key=lambda c: c[on])

    if "best_in" in spec:
        low, high = spec["best_in"]
        inside = [c for c in rows if low < float(c["row"][key]) <= high]
        outside = [c for c in rows if not low < float(c["row"][key]) <= high]
        pairs = {"value": (best(inside), best(outside)), "paper": (best(inside, "paper"), best(outside, "paper"))}
        bound, shift = f"best {key} in ({low}, {high}]", 0.0
    else:
        pairs = {"value": (best(rows), best(rows, worst=True)),
                 "paper": (best(rows, "paper"), best(rows, "paper", worst=True))}
        bound, shift = f"best minus worst {key} at least {spec['spread_at_least']}", spec["spread_at_least"]
    higher, lower = pairs["value"]
    if higher is None or lower is None:
        return [Part(claim, where, missing=f"no {key} on one side of the range in {table}")]
    part = Part(claim, where, shift=shift, bound=bound,
                extra={"picked": f"{key}={higher['row'][key]} vs {key}={lower['row'][key]}"})
    part.higher = cell_term(cells, table, higher["row"], column)
    part.lower = cell_term(cells, table, lower["row"], column)
    part.higher.label, part.lower.label = f"{key}={higher['row'][key]}", f"{key}={lower['row'][key]}"
    paper_high, paper_low = pairs["paper"]
    part.higher.paper = paper_high["paper"] if paper_high else None
    part.lower.paper = paper_low["paper"] if paper_low else None
    if paper_high and paper_low:
        part.extra["paper picked"] = f"{key}={paper_high['row'][key]} vs {key}={paper_low['row'][key]}"
    return [part]


def diagonal_parts(claim, cells, table, group, column, where) -> list[Part]:
    """A train x evaluation grid (LTRe Table 4): in each evaluation column, the model trained on the same index
    beats each model trained on another one."""
    spec = claim["diagonal"]
    rows_key, columns_key = spec["rows"], spec["columns"]
    grid = [c for c in cells[table] if c["column"] == column and rows_key in c["row"] and columns_key in c["row"]]
    trained = {c["row"][rows_key] for c in grid}
    parts = []
    for evaluated in dict.fromkeys(c["row"][columns_key] for c in grid):
        if evaluated not in trained:
            continue
        here = f"{where}, {columns_key}={evaluated}"
        for other in dict.fromkeys(c["row"][rows_key] for c in grid if c["row"][columns_key] == evaluated):
            if other == evaluated:
                continue
            part = Part(claim, here)
            part.higher = cell_term(cells, table, {rows_key: evaluated, columns_key: evaluated}, column)
            part.lower = cell_term(cells, table, {rows_key: other, columns_key: evaluated}, column)
            part.higher.label, part.lower.label = f"{rows_key}={evaluated}", f"{rows_key}={other}"
            parts.append(part)
    return parts or [Part(claim, where, missing=f"no {rows_key} equals a {columns_key} in {table}")]


# --- verdicts -----------------------------------------------------------------------------------------

def restricted(part: Part, only: set[str]) -> Part:
    """The part over the queries of `only` alone (its other terms as they are); one whose per-query values hold
    none of them cannot be measured there."""
    if part.missing or not part.higher or not part.lower:
        return part
    terms = [part.higher, part.lower]
    if not any(t.pairing == "queries" and t.samples and only & set(t.samples) for t in terms):
        return dataclasses.replace(part, missing="none of its queries is in the subset")
    higher, lower = (dataclasses.replace(t, samples={k: v for k, v in t.samples.items() if k in only})
                     if t.pairing == "queries" and t.samples else t for t in terms)
    return dataclasses.replace(part, higher=higher, lower=lower, extra=dict(part.extra))


def evaluate(claim_files: list[dict], cells: dict[str, list[dict]], test: str, alpha: float,
             only: set[str] | None = None, articles: dict[str, dict[str, str]] | None = None) -> list[dict]:
    """Every part of every claim with its test, Holm-adjusted p (within each paper) and verdict; one record a part.
    With `only`, every comparison of per-query values is read on those queries alone (a subset's verdicts).
    `articles`: dataset -> query -> its article (datasets.reqa.query_articles), for the power counted clustered by article."""
    records = []
    for document in claim_files:
        parts = [part for claim in document["claims"] for part in expand(claim, cells)]
        if only is not None:
            parts = [restricted(part, only) for part in parts]
        seen: dict[tuple, str] = {}
        for index, part in enumerate(parts):
            if part.missing:
                continue
            part.test = test_difference(part.higher, part.lower, part.shift, test)
            signature = part.signature()
            if signature in seen:   # the same cells again (one dataset standing in for two): counted once
                part.duplicate_of = seen[signature]
            else:
                seen[signature] = f"{part.claim['id']} ({part.where})"
        tested = [p for p in parts if p.test and p.test.p is not None and not p.duplicate_of]
        for part, adjusted in zip(tested, holm([p.test.p for p in tested])):
            part.p_adjusted = adjusted
        by_signature = {p.signature(): p for p in tested}
        for part in parts:
            if part.duplicate_of and part.signature() in by_signature:   # (untested: no per-item values)
                part.p_adjusted = by_signature[part.signature()].p_adjusted
        records += [record(document, part, alpha, articles or {}) for part in parts]
    by_claim: dict[tuple, list[str]] = {}
    for r in records:
        by_claim.setdefault((r["paper"], r["claim"]), []).append(r["verdict"])
    for r in records:
        verdicts = by_claim[(r["paper"], r["claim"])]
        r["claim verdict"] = weakest(verdicts)
        r["claim parts"] = summary(verdicts)
    return records


def summary(verdicts: list[str]) -> str:
    counts = {v: verdicts.count(v) for v in VERDICTS if v in verdicts}
    return ", ".join(f"{n} {v}" for v, n in counts.items())


def record(document: dict, part: Part, alpha: float, articles: dict[str, dict[str, str]] | None = None) -> dict:
    claim = part.claim
    out = {"paper": document["paper"], "claim": claim["id"], "statement": claim["statement"],
           "source": claim["source"], "part": part.where, "bound": part.bound}
    if part.missing:
        return {**out, "verdict": "not measurable", "reason": part.missing}
    t = part.test
    shifted = None if t.effect is None else t.effect - part.shift
    paper_diff = minus(part.higher.paper, part.lower.paper)
    paper_shifted = None if paper_diff is None else paper_diff - part.shift
    out.update({
        "higher": part.higher.label, "lower": part.lower.label,
        "value higher": _round(part.higher.value), "value lower": _round(part.lower.value),
        "difference": _round(t.effect), "effect size": _round(t.effect_size), "effect size measure": t.effect_size_name,
        "n": t.n, "pairing": t.pairing, "test": t.name, "p": _significant(t.p), "p (Holm)": _significant(part.p_adjusted),
        "verdict": verdict(shifted, part.p_adjusted if t.p is not None else None, alpha, t.effect_size),
        "paper higher": _round(part.higher.paper), "paper lower": _round(part.lower.paper),
        "paper difference": _round(paper_diff),
        "paper agrees": "n.a." if paper_shifted is None else ("yes" if paper_shifted > 0 else "no"),
        **power(part, articles or {}),
        "reason": f"same cells as {part.duplicate_of}" if part.duplicate_of else "",
        **{k: (_round(v) if isinstance(v, float) else v) for k, v in part.extra.items()}})
    return out


def power(part: Part, articles: dict[str, dict[str, str]]) -> dict:
    """The part's own power (columns 'detectable', 'detectable clustered', 'articles'): the smallest difference
    its paired test detects at 80% power from its own per-item differences, and again with the questions of one
    article counted as correlated, over how many articles. Empty where it is not paired (no power is stated for
    an unpaired test) or, for the clustered value, where the article of one of its queries is unknown (another
    dataset, or a pairing over training steps)."""
    d = paired_differences(part.higher, part.lower) if part.test.pairing in ("queries", "steps") else {}
    size = detectable(list(d.values())) if d else None
    # a query id names a question within its dataset only (q0001 is another question in another dataset)
    same = part.test.pairing == "queries" and part.higher.dataset == part.lower.dataset
    known = articles.get(part.higher.dataset, {}) if same else {}
    clustered, count = None, None
    if size is not None and known and all(q in known for q in d):
        clusters = [known[q] for q in d]
        clustered, count = detectable_clustered(list(d.values()), clusters), len(set(clusters))
    return {"detectable": _round(size), "detectable clustered": _round(clustered), "articles": count}


def _significant(p):
    """A p-value to four significant digits (small ones matter in their exponent)."""
    return None if p is None or math.isnan(p) else float(f"{p:.4g}")


def _round(value, places: int = 4):
    """`places` decimals; below 0.01, three significant digits (LTRe's per-step hours would round to 0)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), places) if abs(value) >= 0.01 or value == 0 else float(f"{float(value):.3g}")


# --- claims files -------------------------------------------------------------------------------------

def load_claims(path, schema_path) -> dict:
    """A claims file, checked against its schema (workflow/schemas/claims.schema.yaml); one line naming the
    problem."""
    import jsonschema

    from ..config.params_check import bounded, read_yaml

    path = Path(path)
    # bounded: a repeated key, deep nesting or nested aliases ("billion laughs") refused before they expand
    document = read_yaml(path, lambda where, problem: StageError(path, f"cannot read the claims ({problem})"))
    schema = read_yaml(schema_path, StageError)
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as err:
        where = bounded("/".join(str(p) for p in err.absolute_path), 120) or "top level"
        raise StageError(path, f"{where}: {bounded(err.message.splitlines()[0] if err.message else err.validator)}") from None
    ids = [c["id"] for c in document["claims"]]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise StageError(path, f"claim id {repeated[0]} is used twice")
    return document
