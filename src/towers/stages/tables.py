"""Stages that measure and report: evaluation, paper tables and figures, the HTML report."""
from __future__ import annotations

import json
from pathlib import Path

from ..digests import file_digest
from ..io import StageError, atomic_path, read_json, read_qrels, read_queries, read_run, require_file, write_json
from ..config.params_check import bounded
from . import arg, stage


@stage("evaluate", arg("--run", required=True), arg("--qrels", required=True), arg("--queries", required=True),
       arg("--metrics", required=True, nargs="+"), arg("--out", required=True),
       arg("--recall", default="fraction", choices=["success", "fraction"],
           help="R@k as Success@k (any relevant in the top k: ReQA's Recall@k) or ir-measures R@k (share found)"),
       arg("--candidates", default="", help="the collection the run searched: ranked documents outside it are "
                                            "counted, and a run of none of its documents refused"))
def evaluate(a):
    """Metrics of a run on the test queries; ids that do not meet are warned about, counted and, when none
    do, refused (towers.retrieval.evaluate.check_ids)."""
    from ..retrieval.evaluate import check_ids, evaluate as score

    run, qrels, queries = read_run(a.run), read_qrels(a.qrels), list(read_queries(a.queries))
    missing = None
    if a.candidates:
        from ..datasets.collection import CollectionWriter

        missing = CollectionWriter.of_candidates(a.candidates).missing
    checks = check_ids(run, qrels, queries, {"run": a.run, "qrels": a.qrels, "queries": a.queries,
                                             "candidates": a.candidates}, missing)
    result = score(run, qrels, queries, a.metrics, a.recall)
    write_json(a.out, {"run": str(a.run), **result, **checks})
    return a.out, {"queries": result["queries"], **checks, **result["metrics"]}


def parse_rows(specs: list[str], fields: list[str], may_be_empty=(), lists=(), flag="--row") -> list[dict]:
    """A table stage's --row values (or another flag's), each a JSON object of exactly `fields`: strings,
    non-empty unless in `may_be_empty`; a field of `lists` is a non-empty list of non-empty strings. Each row
    comes back as a dict in the order of `fields`."""
    rows = []
    for spec in specs:
        try:
            row = json.loads(spec)
        except ValueError:
            row = None
        problem = "" if isinstance(row, dict) else "is not a JSON object"
        if not problem and set(row) != set(fields):
            missing, unknown = [f for f in fields if f not in row], [k for k in row if k not in fields]
            problem = "; ".join(([f"lacks {', '.join(missing)}"] if missing else [])
                                + ([f"has no field {', '.join(map(repr, unknown))}"] if unknown else []))
        for field in fields if not problem else ():
            value = row[field]
            if field in lists:
                if not (isinstance(value, list) and (value or field in may_be_empty)
                        and all(isinstance(v, str) and v for v in value)):
                    problem = (f"field {field!r} must be a {'' if field in may_be_empty else 'non-empty '}list of "
                               "non-empty strings")
            elif not isinstance(value, str) or not (value or field in may_be_empty):
                problem = f"field {field!r} must be a {'' if field in may_be_empty else 'non-empty '}string"
            if problem:
                break
        if problem:
            raise StageError(flag, f"{bounded(spec)} {problem} (a row is a JSON object of {', '.join(fields)})")
        rows.append({field: row[field] for field in fields})
    return rows


def rows_help(*fields: str) -> str:
    return "a JSON object of " + ", ".join(fields)


def write_table(frame, twin: dict, cells: list[dict], csv_path, json_path, percent: bool = False):
    """A paper table as CSV, printed as the paper prints it (reports.common.printed: fixed decimals, columns of one
    value and the note, with what its query count resolves, said once), and its numbers alone as the JSON twin
    `dvc metrics` reads; the stage's record holds its text: note, context, the twin's labels (table, profile...)
    and cells (verdicts.cells.cell), which the claims and the expected check read. `percent`: 2 decimals, else 3."""
    from ..reports.common import printed, write_metrics
    from ..verdicts.significance import power_note

    notes = frame.pop("note").dropna().unique().tolist() if "note" in frame else []
    note = "; ".join(part for part in [*notes, power_note(cells)] if part)
    shown, context = printed(frame, cells, percent)
    with atomic_path(csv_path) as tmp:
        shown.to_csv(tmp, index=False)
    labels = {k: v for k, v in twin.items() if isinstance(v, str)}
    write_metrics(json_path, {k: v for k, v in twin.items() if k not in labels})
    return csv_path, {"rows": len(frame), "labels": labels, "note": note, "context": context, "cells": cells}


# --- the paper tables: one argument set, each table laid out by its paper's module -------------------------

TABLE_ARGS = (arg("--table", required=True, help="the table's name (its output's: table3, or a zero-shot dataset)"),
              arg("--paper", default="", help="the paper's values (data/papers/<paper>.csv); none for a zero-shot table"),
              arg("--profile", required=True), arg("--note", required=True),
              arg("--row", required=True, action="append", help="a row: a JSON object of the layout's fields"),
              arg("--option", action="append", default=[], metavar="NAME=VALUE",
                  help="a setting the layout takes (towers.reports.common.Option; repeated for several values)"),
              arg("--csv", required=True), arg("--json", required=True))
NOT_PAPERS = {"common", "page", "papers", "verdict_pages"}   # the reports modules that lay out no table


def table_layouts() -> list[str]:
    """The modules of towers.reports that lay out tables (a paper's, and zeroshot's): each has a stage
    `<module>-table` taking TABLE_ARGS, found by listing the package (nothing is imported until a stage runs)."""
    import pkgutil

    from .. import reports

    return sorted(m.name for m in pkgutil.iter_modules(reports.__path__) if m.name not in NOT_PAPERS)


def parse_options(layout, specs: list[str]) -> dict:
    """--option NAME=VALUE words as the layout's keywords: each declared option once (a `many` one as a list, of
    JSON objects where it has fields); an option it does not take, or one missing, is refused in one line."""
    given: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise StageError("--option", f"{bounded(spec)!r} is not NAME=VALUE")
        given.setdefault(name, []).append(value)
    declared = {o.name: o for o in layout.options}
    if unknown := [n for n in given if n not in declared]:
        raise StageError("--option", f"{unknown[0]!r} is not an option of this table ({', '.join(declared) or 'none'})")
    options = {}
    for name, option in declared.items():
        values = given.get(name, [])
        if option.fields:
            values = parse_rows(values, list(option.fields), flag=f"--option {name}")
        if not option.many and len(values) != 1:
            raise StageError("--option", f"{name} is given {len(values)} times; the table takes it once")
        if option.many and not values and not option.optional:
            raise StageError("--option", f"{name} is not given; the table takes it once or more")
        options[name] = values if option.many else values[0]
    return options


def table_stage(module: str):
    """The stage `<module>-table`: a table of towers.reports.<module>'s LAYOUTS (by name, or its '*' layout) from
    its rows and options, written by write_table."""
    def run(a):
        import importlib

        layouts = importlib.import_module(f"..reports.{module}", __package__).LAYOUTS
        layout = layouts.get(a.table) or layouts.get("*")
        if layout is None:
            raise StageError("--table", f"{a.table!r} is not a table of {module} ({', '.join(sorted(layouts))})")
        if layout.paper and not a.paper:
            raise StageError("--paper", f"the paper's values are needed for {module}'s {a.table}")
        rows = parse_rows(a.row, list(layout.fields), may_be_empty=layout.may_be_empty, lists=layout.lists)
        built = layout.build(rows, a.paper, a.table, a.profile, a.note, **parse_options(layout, a.option))
        return write_table(*built, a.csv, a.json, percent=layout.percent)

    run.__doc__ = f"A table of {module}'s, laid out as its LAYOUTS say (towers.reports.{module})."
    return run


for _module in table_layouts():
    stage(f"{_module}-table", *TABLE_ARGS)(table_stage(_module))


@stage("reqa-statistics", arg("--candidates", required=True), arg("--queries", required=True),
       arg("--qrels", required=True), arg("--tokenizer", required=True, help="the dataset's WordPiece tokenizer folder"),
       arg("--batch-size", type=int, default=1024), arg("--out", required=True))
def reqa_statistics(a):
    """Chang et al. Table 2: a ReQA dataset's #query, #candidate, #tuples and average WordPiece tokens."""
    from ..datasets.reqa import reqa_statistics as count

    if a.batch_size < 1:
        raise StageError("--batch-size", f"must be at least 1, not {a.batch_size}")
    # doc tokens count the candidate's sentence plus its paragraph (the pair the doc tower reads)
    stats = count(a.candidates, a.queries, a.qrels, load_tokenizer(a.tokenizer), a.batch_size, progress=True)
    write_json(a.out, stats)
    return a.out, stats


def load_tokenizer(path):
    """A saved HF tokenizer folder, or one line saying why it cannot be loaded."""
    from transformers import AutoTokenizer

    if not Path(path).is_dir():
        raise StageError(path, "tokenizer folder is missing")
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StageError(path, f"cannot load the tokenizer ({first})") from None


@stage("quadrupletbert-phase2", arg("--run", required=True, action="append",
                                   help=rows_help("dataset", "split", "seed", "model (a phase-2 model folder)",
                                                  "curve (the CSV its checks go to)")),
       arg("--note", required=True), arg("--csv", required=True, help="one row a run: where it stopped"),
       arg("--png", required=True))
def quadrupletbert_phase2(a):
    """QuadrupletBERT's phase 2 stopped by validation: each Table 1 run's validation curve and stopping step."""
    from ..reports import quadrupletbert as report

    summary = report.write_phase2(parse_rows(a.run, report.PHASE2_KEY + ["model", "curve"], flag="--run"), a.csv,
                                  a.png, a.note)
    return a.csv, {"runs": len(summary), "note": a.note, "cells": report.phase2_cells(summary)}


@stage("repbert-figure", arg("--figure", required=True, choices=["figure1", "figure2"]), arg("--note", required=True),
       arg("--recall", action="append", default=[], help="figure1, a first-stage run: " + rows_help("method", "eval")),
       arg("--depths", type=int, nargs="+", default=[], help="figure1: recall depths"),
       arg("--rerank", action="append", default=[],
           help="figure1, a reranked run: " + rows_help("method", "depth", "eval")),
       arg("--consistency", action="append", default=[], help="figure2: " + rows_help("method", "json")),
       arg("--csv", required=True), arg("--png", required=True))
def repbert_figure(a):
    """RepBERT Figure 1 (recall and reranking RR@10 by depth) or Figure 2 (consistency with BM25 by depth)."""
    import pandas as pd

    from ..reports import repbert as report
    from ..reports.common import metric, save_figure
    from ..verdicts.cells import query_samples

    if a.figure == "figure1":
        first = {r["method"]: r["eval"] for r in parse_rows(a.recall, ["method", "eval"], flag="--recall")}
        recall = report.recall_curve([{"method": m, "eval": e} for m, e in first.items()], a.depths)
        reranked_rows = parse_rows(a.rerank, ["method", "depth", "eval"], flag="--rerank")
        reranked = pd.DataFrame([{"method": r["method"], "depth": int(r["depth"]),
                                  "RR@10": round(metric(r["eval"], "RR@10"), 4)} for r in reranked_rows])
        panels = [(recall, "depth", "recall", "(a) first-stage recall"),
                  (reranked, "depth", "RR@10", "(b) reranking RR@10")]
        by_depth = {(r["method"], int(r["depth"])): r["eval"] for r in reranked_rows}
        cells = report.curve_cells(recall, "recall", lambda m, d: query_samples([first[m]], f"R@{d}")) + \
            report.curve_cells(reranked, "RR@10", lambda m, d: query_samples([by_depth[m, d]], "RR@10"))
    else:
        rows = parse_rows(a.consistency, ["method", "json"], flag="--consistency")
        frame = pd.DataFrame([{"method": r["method"], "depth": int(n), "C": round(value, 4)}
                              for r in rows for n, value in read_json(r["json"])["depths"].items()])
        panels = [(frame, "depth", "C", "consistency with BM25's top 1000")]
        sources = {r["method"]: r["json"] for r in rows}
        cells = report.curve_cells(frame, "C", lambda m, d: {"kind": "consistency", "file": sources[m], "depth": str(d)})
    save_figure(panels, a.csv, a.png, a.note)
    return a.csv, {"panels": len(panels), "cells": cells}


@stage("ltre-figure", arg("--run", required=True, action="append", help=rows_help("method", "steps (train-ltre's log)")),
       arg("--probe-depth", type=int, required=True), arg("--note", required=True),
       arg("--csv", required=True), arg("--png", required=True))
def ltre_figure(a):
    """LTRe Figure 3: per training step, RR@10, R@depth, overlap with BM25 and with the async retrieval."""
    from ..reports import ltre as report
    from ..reports.common import save_figure

    runs = parse_rows(a.run, ["method", "steps"], flag="--run")
    frame = report.figure3_frame(runs, a.probe_depth)
    window = report.window_for(frame)
    titles = {"RR@10": "(a) RR@10", f"R@{a.probe_depth}": f"(b) R@{a.probe_depth}",
              "BM25 overlap": f"(c) overlap with BM25's top {a.probe_depth}",
              "async overlap": f"(d) overlap with the async top {a.probe_depth}"}
    panels = [(report.smoothed(frame, measure, window), "step", measure, title) for measure, title in titles.items()]
    save_figure(panels, a.csv, a.png, f"{a.note}; batch values, running mean over {window} steps", log_x=False)
    return a.csv, {"methods": int(frame["method"].nunique()), "steps": int(frame["step"].max()),
                   "cells": report.figure3_cells(frame, runs, a.probe_depth)}


@stage("report", arg("--paper", action="append", default=[], help="a paper, in the page's order: "
                     + rows_help("id", "title", "tables", "figures (lists of paths)")),
       arg("--table", action="append", default=[], help="a results CSV of no paper (repeatable)"),
       arg("--figure", action="append", default=[], help="a results PNG of no paper (repeatable)"),
       arg("--claims", required=True, help="results/claims.csv"), arg("--check", default="", help="results/check.csv"),
       arg("--rulegraph", required=True, help="`snakemake --rulegraph` output (Graphviz dot text)"),
       arg("--dag-png", required=True), arg("--title", required=True), arg("--profile", required=True), arg("--note",
       required=True), arg("--out", required=True), arg("--build-record", default="", help="benchmarks/results.json"))
def report(a):
    """One page: the claims' verdicts, every table laid out like the paper's, figures, the rule graph, versions."""
    from ..reports import page as html_report

    papers = parse_rows(a.paper, ["id", "title", "tables", "figures"], may_be_empty=["figures"],
                        lists=["tables", "figures"], flag="--paper")
    for paper in papers:
        paper["tables"] = [require_file(t) for t in paper["tables"]]
        paper["figures"] = [require_file(f) for f in paper["figures"]]
    tables, figures = [require_file(t) for t in a.table], [require_file(f) for f in a.figure]
    dot = require_file(a.rulegraph).read_text()
    if not html_report.parse_rulegraph(dot)[0]:
        raise StageError(a.rulegraph, "no rules in it (expected `snakemake --rulegraph` output)")
    drawn_by = html_report.draw_rulegraph(dot, Path(a.dag_png))
    html_report.write(papers, tables, figures, require_file(a.claims), Path(a.check) if a.check else None,
                      Path(a.dag_png), drawn_by, Path(a.out), a.title, a.profile, a.note, a.build_record)
    shown = [*tables, *figures, *(f for p in papers for f in p["tables"] + p["figures"]), a.claims, a.check]
    return a.out, {"papers": len(papers), "tables": len(tables) + sum(len(p["tables"]) for p in papers),
                   "figures": len(figures) + sum(len(p["figures"]) for p in papers), "rule graph": drawn_by,
                   # what the page was made from: a test holds the committed report to the committed files
                   "read": {str(path): file_digest(path)["sha256"] for path in shown if path}}


def named_tables(specs: list[str]) -> dict[str, Path]:
    """--table values 'name=path' (e.g. chang2020/table3=results/chang2020/table3.csv)."""
    tables = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise StageError("--table", f"{spec!r} is not 'name=path of a table CSV'")
        tables[name] = require_file(path)
    return tables


TABLES_ARG = arg("--table", required=True, action="append", help="name=CSV of a table or figure (repeatable)")


@stage("claims", arg("--claims", required=True, nargs="+", help="claims files (data/papers/<paper>.claims.yaml)"),
       arg("--schema", required=True, help="workflow/schemas/claims.schema.yaml"), TABLES_ARG,
       arg("--profile", required=True), arg("--test", default="wilcoxon", choices=["wilcoxon", "ttest"]),
       arg("--alpha", type=float, default=0.05), arg("--unexposed", nargs="*", default=[], help="passage datasets' "
           "unexposed.json (or stats.json): test queries no training query taught, read on their own too"),
       arg("--articles", nargs=3, action="append", default=[], metavar=("DATASET", "PREFIX", "TSV"),
           help="a dataset's queries <PREFIX><row> are the questions of TSV, each asked of its row's article: power "
                "is stated counted by article too (repeatable)"),
       arg("--csv", required=True), arg("--json", required=True))
def claims(a):
    """Every claim tested on the profile's tables, a row a comparison: its verdict, the smallest difference its test
    detects ('detectable', by --articles 'detectable clustered'), and by --unexposed its reading on those alone."""
    import pandas as pd

    from ..datasets import reqa
    from ..reports.common import write_metrics
    from ..verdicts import claims as checker
    from ..verdicts.cells import load_cells

    if not 0 < a.alpha < 1:
        raise StageError("--alpha", f"must lie between 0 and 1, not {a.alpha}")
    documents = [checker.load_claims(path, a.schema) for path in a.claims]
    cells, articles = load_cells(named_tables(a.table)), reqa.query_articles(a.articles)
    records = checker.evaluate(documents, cells, a.test, a.alpha, articles=articles)
    if a.unexposed:
        only = set()
        for path in a.unexposed:
            stats = read_json(path)
            if "unexposed_test_queries" not in stats:
                raise StageError(path, "has no unexposed_test_queries (not a wikipedia-passages dataset's stats)")
            only |= set(stats["unexposed_test_queries"])
        checker.add_subset_reading(records, checker.evaluate(documents, cells, a.test, a.alpha, only, articles),
                                   "unexposed")
    (frame := pd.DataFrame(records)).insert(2, "profile", a.profile)
    twin = checker.verdict_counts(frame)
    with atomic_path(a.csv) as tmp:
        frame.to_csv(tmp, index=False)
    write_metrics(a.json, twin)
    return a.csv, {"claims": int(frame.groupby(["paper", "claim"]).ngroups), "parts": len(frame), "labels": {
        "profile": a.profile}, **{f"claims {v}": sum(c[v] for c in twin["papers"].values()) for v in checker.VERDICTS}}


@stage("expected", TABLES_ARG, arg("--basis", default="estimate", choices=["estimate", "exact"],
                                   help="estimate: tolerances from seeds and bootstrap; exact: deterministic runs"),
       arg("--z", type=float, default=2.0, help="tolerance = z standard errors"), arg("--out", required=True))
def expected(a):
    """Expected values and tolerances of every cell of a finished run (data/expected/<profile>.csv)."""
    from ..verdicts import checks
    from ..verdicts.cells import load_cells

    frame = checks.expected_values(load_cells(named_tables(a.table)), a.basis, a.z)
    with atomic_path(a.out) as tmp:
        frame.to_csv(tmp, index=False)
    return a.out, {"cells written": len(frame), **frame["basis"].str.split(":").str[0].value_counts().to_dict()}


@stage("check-cells", TABLES_ARG, arg("--expected", required=True, help="data/expected/<profile>.csv or a paper policy"),
       arg("--csv", required=True), arg("--quiet", action="store_true", help="print only cells that are not OK"))
def check_cells(a):
    """Every cell against its expected value: [OK], [OKish], [FAIL] with the difference, both ways."""
    from ..verdicts import checks
    from ..verdicts.cells import load_cells

    report = checks.check(load_cells(named_tables(a.table)), checks.read_expected(a.expected))
    for _, row in report.iterrows():
        if not a.quiet or row["status"] != "OK":
            print(checks.line(row))
    with atomic_path(a.csv) as tmp:
        report.to_csv(tmp, index=False)
    print(f"check against {a.expected}: {checks.summary(report)}")
    return a.csv, {"cells checked": len(report), **report["status"].value_counts().to_dict()}


@stage("check", arg("--csv", required=True, help="results/check.csv"))
def check(a):
    """Fail (exit 1) when a cell of the check FAILed or went MISSING."""
    import pandas as pd

    from ..verdicts import checks

    report = pd.read_csv(require_file(a.csv), keep_default_na=False, na_values={"difference": [""]})
    bad = checks.failures(report)
    summary = checks.summary(report)
    if len(bad):
        cells = "; ".join(f"{r['table']} [{r['row']}] {r['column']}" for _, r in bad.head(5).iterrows())
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise StageError(a.csv, f"{len(bad)} cells outside their tolerance ({summary}): {cells}{more}")
    print(f"check passed: {summary}")
    return None, {"cells checked": len(report)}
