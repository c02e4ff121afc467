"""Stages that measure and report: evaluation, paper tables and figures, the HTML report."""
from __future__ import annotations

import sys
from pathlib import Path

from ..io import StageError, atomic_path, read_json, read_qrels, read_queries, read_run, require_file, write_json
from . import arg, stage


def warn(path, problem: str) -> None:
    print(f"warning: {path}: {problem}", file=sys.stderr)


@stage("evaluate", arg("--run", required=True), arg("--qrels", required=True), arg("--queries", required=True),
       arg("--metrics", required=True, nargs="+"), arg("--out", required=True),
       arg("--candidates", default="", help="the collection the run searched: ranked documents outside it are "
                                            "counted, and a run of none of its documents refused"))
def evaluate(a):
    """Metrics of a run on the test queries. Ids that do not meet (test queries without judgements, judged ones
    the run does not answer, ranked documents outside the collection) score 0 or drop out silently in the
    metrics: each kind is warned about and counted, and a run that matches none is refused."""
    from ..evaluate import evaluate as score

    run, qrels, queries = read_run(a.run), read_qrels(a.qrels), list(read_queries(a.queries))
    judged = [q for q in queries if q in qrels]
    if not judged:
        raise StageError(a.qrels, f"none of the {len(queries)} test queries of {a.queries} is judged here "
                                  f"(first: {queries[0]})")
    if len(judged) < len(queries):
        first = next(q for q in queries if q not in qrels)
        warn(a.qrels, f"{len(queries) - len(judged)} of the {len(queries)} test queries of {a.queries} are not "
                      f"judged (first: {first}); they are left out of every metric")
    answered = [q for q in judged if q in run]
    if not answered:
        raise StageError(a.run, f"none of its {len(run)} queries is one of the {len(judged)} judged test queries of "
                                f"{a.queries} (first here: {next(iter(run), 'none')}, first there: {judged[0]})")
    if len(answered) < len(judged):
        first = next(q for q in judged if q not in run)
        warn(a.run, f"{len(judged) - len(answered)} of the {len(judged)} judged test queries have no ranking in it "
                    f"(first: {first}); they score 0")
    unknown = []
    if a.candidates:
        from ..passages import CollectionWriter

        ranked = list(dict.fromkeys(doc for q in answered for doc, _ in run[q]))
        unknown = CollectionWriter.of_candidates(a.candidates).missing(ranked)
        if ranked and len(unknown) == len(ranked):
            raise StageError(a.run, f"none of the {len(ranked)} documents it ranks for the test queries is in "
                                    f"{a.candidates} (first: {unknown[0]})")
        if unknown:
            warn(a.run, f"{len(unknown)} of the {len(ranked)} documents it ranks for the test queries are not in "
                        f"{a.candidates} (first: {unknown[0]}); they count as not relevant")
    result = score(run, qrels, queries, a.metrics)
    checks = {"queries_not_judged": len(queries) - len(judged), "queries_missing_from_run": len(judged) - len(answered),
              "documents_not_in_collection": len(unknown)}
    write_json(a.out, {"run": str(a.run), **result, **checks})
    return a.out, {"queries": result["queries"], **checks, **result["metrics"]}


def parse_rows(specs: list[str], fields: list[str], may_be_empty=()) -> list[dict]:
    """A table stage's --row values, each '|'-separated with one value per field."""
    rows = []
    for spec in specs:
        values = spec.split("|")
        if len(values) != len(fields) or not all(v or f in may_be_empty for f, v in zip(fields, values)):
            raise StageError("--row", f"{spec!r} needs {len(fields)} non-empty '|'-separated fields: {'|'.join(fields)}")
        rows.append(dict(zip(fields, values)))
    return rows


def write_table(frame, twin: dict, csv_path, json_path):
    """A paper table as CSV, and its numeric JSON twin for `dvc metrics`."""
    with atomic_path(csv_path) as tmp:
        frame.to_csv(tmp, index=False)
    write_json(json_path, twin)
    return csv_path, {"rows": len(frame)}


@stage("table", arg("--table", required=True), arg("--paper", required=True), arg("--profile", required=True),
       arg("--dataset", required=True), arg("--note", required=True), arg("--metrics", required=True, nargs="+"),
       arg("--row", required=True, action="append", help="split|encoder|pretraining|eval.json"),
       arg("--csv", required=True), arg("--json", required=True))
def table(a):
    from ..tables import build_table

    rows = parse_rows(a.row, ["split", "encoder", "pretraining", "eval"])
    frame, twin = build_table(rows, a.paper, a.table, a.metrics, a.profile, a.dataset, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("reqa-statistics", arg("--candidates", required=True), arg("--queries", required=True),
       arg("--qrels", required=True), arg("--tokenizer", required=True, help="the dataset's WordPiece tokenizer folder"),
       arg("--batch-size", type=int, default=1024), arg("--out", required=True))
def reqa_statistics(a):
    """Chang et al. Table 2: a ReQA dataset's #query, #candidate, #tuples and average WordPiece tokens."""
    from ..reqa import reqa_statistics as count

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


@stage("reqa-table", arg("--paper", required=True), arg("--profile", required=True), arg("--note", required=True),
       arg("--row", required=True, action="append", help="dataset|paper_dataset|reqa-statistics JSON"),
       arg("--csv", required=True), arg("--json", required=True))
def reqa_table(a):
    """Chang et al. Table 2: ReQA statistics beside the paper's."""
    from ..tables import reqa_table as build

    frame, twin = build(parse_rows(a.row, ["dataset", "paper_dataset", "stats"]), a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("pairs-table", arg("--paper", required=True), arg("--profile", required=True), arg("--note", required=True),
       arg("--stats", required=True, nargs="+", help="pretraining-pairs statistics JSON, one per task"),
       arg("--csv", required=True), arg("--json", required=True))
def pairs_table(a):
    """Chang et al. Table 1: pre-training pair statistics beside the paper's."""
    from ..tables import pairs_table as build

    frame, twin = build([read_json(path) for path in a.stats], a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("ablation-table", arg("--paper", required=True), arg("--profile", required=True), arg("--dataset", required=True),
       arg("--note", required=True), arg("--metric", default="R@100"),
       arg("--row", required=True, action="append", help="index|layers|pretraining|emb_dim|split|eval.json"),
       arg("--csv", required=True), arg("--json", required=True))
def ablation_table(a):
    """Chang et al. Table 5: one metric per split for each ablation configuration, beside the paper's."""
    from ..tables import ABLATION_KEY, ablation_table as build

    frame, twin = build(parse_rows(a.row, ABLATION_KEY + ["split", "eval"]), a.paper, a.metric, a.profile,
                        a.dataset, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("seeded-table", arg("--table", required=True), arg("--paper", required=True), arg("--profile", required=True),
       arg("--note", required=True), arg("--metrics", required=True, nargs="+"),
       arg("--row", required=True, action="append",
           help="dataset|paper_dataset|split|model|margin|index|eval.json,eval.json,... (one per seed)"),
       arg("--compare", default="", help="'A|B': paired test of model A against model B"),
       arg("--test", default="wilcoxon", choices=["wilcoxon", "ttest"]), arg("--alpha", type=float, default=0.05),
       arg("--exact-index", default="flat"), arg("--csv", required=True), arg("--json", required=True))
def seeded_table(a):
    """A table whose cells are means over seeds, with standard deviations and paired significance tests."""
    from ..tables import SEEDED_KEY, seeded_table as build

    rows = parse_rows(a.row, SEEDED_KEY + ["evals"], may_be_empty=["margin"])
    for row in rows:
        row["evals"] = row["evals"].split(",")
        row["margin"] = f"{float(row['margin']):g}" if row["margin"] else ""
    compare = tuple(a.compare.split("|")) if a.compare else None
    frame, twin = build(rows, a.paper, a.table, a.metrics, a.profile, a.note, compare, a.test, a.alpha, a.exact_index)
    return write_table(frame, twin, a.csv, a.json)


REPBERT_ROWS = {"table1": ["method", "eval", "latency"], "table2": ["method", "depth", "eval"],
                "table3": ["first", "second", "fusion", "eval"], "table4": ["first", "second", "fusion", "eval"]}


def paper_table_args(rows: dict, name: str):
    """A paper's table stage: --table (a key of `rows`), its paper values, the profile and note, --row
    values ('|'-separated fields, one list of fields per table in `rows`) and the CSV and JSON out."""
    return (arg("--table", required=True, choices=sorted(rows)), arg("--paper", required=True),
            arg("--profile", required=True), arg("--note", required=True),
            arg("--row", required=True, action="append", help=f"'|'-separated fields; see {name}"),
            arg("--csv", required=True), arg("--json", required=True))


@stage("repbert-table", *paper_table_args(REPBERT_ROWS, "REPBERT_ROWS"))
def repbert_table(a):
    """RepBERT Tables 1-4: first-stage retrieval, reranking by depth, run fusion."""
    from .. import repbert_report as report

    rows = parse_rows(a.row, REPBERT_ROWS[a.table], may_be_empty=["second"])
    if a.table in ("table3", "table4"):
        frame, twin = report.fusion_table(a.table, rows, a.paper, a.profile, a.note)
    else:
        frame, twin = getattr(report, a.table)(rows, a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("repbert-figure", arg("--figure", required=True, choices=["figure1", "figure2"]), arg("--note", required=True),
       arg("--recall", action="append", default=[], help="figure1: method|eval.json of a first-stage run"),
       arg("--depths", type=int, nargs="+", default=[], help="figure1: recall depths"),
       arg("--rerank", action="append", default=[], help="figure1: method|depth|eval.json of a reranked run"),
       arg("--consistency", action="append", default=[], help="figure2: method|consistency.json"),
       arg("--csv", required=True), arg("--png", required=True))
def repbert_figure(a):
    """RepBERT Figure 1 (recall and reranking MRR@10 by depth) or Figure 2 (consistency with BM25 by depth)."""
    import pandas as pd

    from .. import repbert_report as report

    if a.figure == "figure1":
        recall = report.recall_curve(parse_rows(a.recall, ["method", "eval"]), a.depths)
        reranked = pd.DataFrame([{"method": r["method"], "depth": int(r["depth"]),
                                  "MRR@10": round(report.metric(r["eval"], "RR@10"), 4)}
                                 for r in parse_rows(a.rerank, ["method", "depth", "eval"])])
        panels = [(recall, "depth", "recall", "(a) first-stage recall"),
                  (reranked, "depth", "MRR@10", "(b) reranking MRR@10")]
    else:
        rows = parse_rows(a.consistency, ["method", "json"])
        frame = pd.DataFrame([{"method": r["method"], "depth": int(n), "C": value}
                              for r in rows for n, value in read_json(r["json"])["depths"].items()])
        panels = [(frame, "depth", "C", "consistency with BM25's top 1000")]
    report.save_figure(panels, a.csv, a.png, a.note)
    return a.csv, {"panels": len(panels)}


LTRE_ROWS = {"table1": ["key", "eval", "graded"], "table3": ["key", "eval", "steps", "index", "before"],
             "table4": ["train", "test", "eval", "graded"]}


@stage("ltre-table", *paper_table_args(LTRE_ROWS, "LTRE_ROWS"))
def ltre_table(a):
    """LTRe Tables 1, 3 and 4: baselines and LTRe, training indexes and time, train x evaluation index."""
    from .. import ltre_report as report

    rows = parse_rows(a.row, LTRE_ROWS[a.table], may_be_empty=["before", "graded"])
    frame, twin = getattr(report, a.table)(rows, a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("ltre-figure", arg("--run", required=True, action="append", help="method|step log of train-ltre"),
       arg("--probe-depth", type=int, required=True), arg("--note", required=True),
       arg("--csv", required=True), arg("--png", required=True))
def ltre_figure(a):
    """LTRe Figure 3: per training step, MRR@10, R@depth, overlap with BM25 and with the async retrieval."""
    from .. import ltre_report as report
    from ..repbert_report import save_figure

    frame = report.figure3_frame(parse_rows(a.run, ["method", "steps"]), a.probe_depth)
    window = report.window_for(frame)
    titles = {"MRR@10": "(a) MRR@10", f"R@{a.probe_depth}": f"(b) R@{a.probe_depth}",
              "BM25 overlap": f"(c) overlap with BM25's top {a.probe_depth}",
              "async overlap": f"(d) overlap with the async top {a.probe_depth}"}
    panels = [(report.smoothed(frame, measure, window), "step", measure, title) for measure, title in titles.items()]
    save_figure(panels, a.csv, a.png, f"{a.note}; batch values, running mean over {window} steps", log_x=False)
    return a.csv, {"methods": int(frame["method"].nunique()), "steps": int(frame["step"].max())}


@stage("report", arg("--table", action="append", default=[], help="a results CSV (repeatable)"),
       arg("--figure", action="append", default=[], help="a results PNG (repeatable)"),
       arg("--rulegraph", required=True, help="`snakemake --rulegraph` output (Graphviz dot text)"),
       arg("--dag-png", required=True), arg("--title", required=True), arg("--note", required=True),
       arg("--out", required=True))
def report(a):
    """Every table (reproduced vs paper, difference coloured), figure, the rule graph, versions and hardware."""
    from .. import report as html_report

    tables, figures = [require_file(t) for t in a.table], [require_file(f) for f in a.figure]
    dot = require_file(a.rulegraph).read_text()
    if not html_report.parse_rulegraph(dot)[0]:
        raise StageError(a.rulegraph, "no rules in it (expected `snakemake --rulegraph` output)")
    html_report.draw_rulegraph(dot, Path(a.dag_png))
    html_report.write(tables, figures, Path(a.dag_png), Path(a.out), a.title, a.note)
    return a.out, {"tables": len(tables), "figures": len(figures)}
