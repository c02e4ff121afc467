"""Run evaluation with ir-measures (pytrec_eval underneath): aggregate and per-query values."""
from __future__ import annotations

import re

import ir_measures

from .io import StageError

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
