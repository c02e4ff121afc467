"""Run evaluation with ir-measures (pytrec_eval underneath): aggregate and per-query values."""
from __future__ import annotations

import re
import sys
from typing import Callable

import ir_measures

from ..io import StageError, answer_grade

# How a table's R@k is computed (params: conventions). "success": a query counts as found when any of its
# relevant documents is in the top k (ir-measures Success@k): ReQA's Recall@k as Chang et al. report it.
# "fraction": the share of its relevant documents in the top k (ir-measures R@k): QuadrupletBERT's eq. 5,
# RepBERT's and LTRe's R@1000. They differ only on queries with two or more relevant documents.
RECALL_CONVENTIONS = {"success": "Success@{k}", "fraction": "R@{k}"}


def measure_name(metric: str, recall: str = "fraction") -> str:
    """The ir-measures name a table's metric is computed as under the recall convention."""
    if recall not in RECALL_CONVENTIONS:
        raise StageError("--recall", f"unknown convention {recall!r} ({', '.join(RECALL_CONVENTIONS)})")
    found = re.fullmatch(r"R@(\d+)", metric)
    return RECALL_CONVENTIONS[recall].format(k=found[1]) if found else metric


def evaluate(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]], qids: list[str],
             metrics: list[str], recall: str = "fraction") -> dict:
    """Score `run` on the queries `qids`; a query the run does not answer scores 0 (not skipped).
    Results keep the names asked for (R@k), computed as `recall` says (measure_name)."""
    names = {m: measure_name(m, recall) for m in metrics}
    try:
        measures = {m: ir_measures.parse_measure(name) for m, name in names.items()}
    except (ValueError, NameError, SyntaxError) as err:
        raise StageError("metrics", f"unknown measure in {metrics} ({err})") from None
    grade = answer_grade(qrels)
    if grade > 1:         # graded qrels: yes-or-no measures count answers, nDCG reads every grade (io.answer_grade)
        measures = {m: measure if measure.NAME == "nDCG" else measure(rel=grade) for m, measure in measures.items()}
    wanted = [q for q in qids if q in qrels]
    if not wanted:
        raise StageError("qrels", "none of the evaluated queries has relevance judgements")
    sub_qrels = {q: qrels[q] for q in wanted}
    # ir-measures skips queries absent from the run; give each at least an empty ranking via a sentinel.
    sub_run = {q: {doc: score for doc, score in run.get(q, [])} or {"__no_result__": 0.0} for q in wanted}
    asked = {str(measure): m for m, measure in measures.items()}
    per_query: dict[str, dict[str, float]] = {q: {} for q in wanted}
    for metric in ir_measures.iter_calc(list(measures.values()), sub_qrels, sub_run):
        per_query[metric.query_id][asked[str(metric.measure)]] = float(metric.value)
    aggregate = {str(m): float(v) for m, v in ir_measures.calc_aggregate(list(measures.values()), sub_qrels,
                                                                          sub_run).items()}
    return {"queries": len(wanted), "queries_missing_from_run": sum(1 for q in wanted if q not in run),
            "metrics": {m: aggregate[str(measures[m])] for m in metrics},
            "computed_as": {m: str(measures[m]) for m in metrics if str(measures[m]) != m},
            "per_query": per_query}


def warn(path, problem: str) -> None:
    print(f"warning: {path}: {problem}", file=sys.stderr)


def check_ids(run: dict, qrels: dict, queries: list[str], names: dict[str, str],
              missing_documents: Callable[[list[str]], list[str]] | None = None) -> dict[str, int]:
    """Ids that do not meet score 0 or drop out silently in the metrics: test queries without judgements, judged
    ones the run does not answer, ranked documents outside the collection (`missing_documents` returns those of
    a list not in it). Each kind is warned about (naming the file: `names` maps run, qrels, queries and
    candidates to paths) and counted; a run that matches none is refused."""
    judged = [q for q in queries if q in qrels]
    if not judged:
        raise StageError(names["qrels"], f"none of the {len(queries)} test queries of {names['queries']} is judged "
                                         f"here (first: {queries[0]})")
    if len(judged) < len(queries):
        first = next(q for q in queries if q not in qrels)
        warn(names["qrels"], f"{len(queries) - len(judged)} of the {len(queries)} test queries of {names['queries']} "
                             f"are not judged (first: {first}); they are left out of every metric")
    answered = [q for q in judged if q in run]
    if not answered:
        raise StageError(names["run"], f"none of its {len(run)} queries is one of the {len(judged)} judged test "
                                       f"queries of {names['queries']} (first here: {next(iter(run), 'none')}, "
                                       f"first there: {judged[0]})")
    if len(answered) < len(judged):
        first = next(q for q in judged if q not in run)
        warn(names["run"], f"{len(judged) - len(answered)} of the {len(judged)} judged test queries have no ranking "
                           f"in it (first: {first}); they score 0")
    unknown = []
    if missing_documents is not None:
        ranked = list(dict.fromkeys(doc for q in answered for doc, _ in run[q]))
        unknown = missing_documents(ranked)
        if ranked and len(unknown) == len(ranked):
            raise StageError(names["run"], f"none of the {len(ranked)} documents it ranks for the test queries is in "
                                           f"{names['candidates']} (first: {unknown[0]})")
        if unknown:
            warn(names["run"], f"{len(unknown)} of the {len(ranked)} documents it ranks for the test queries are not "
                               f"in {names['candidates']} (first: {unknown[0]}); they count as not relevant")
    return {"queries_not_judged": len(queries) - len(judged), "queries_missing_from_run": len(judged) - len(answered),
            "documents_not_in_collection": len(unknown)}
