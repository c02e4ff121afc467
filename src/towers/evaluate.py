"""Run evaluation with ir-measures (pytrec_eval underneath): aggregate and per-query values."""
from __future__ import annotations

import ir_measures

from .io import StageError


def evaluate(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]], qids: list[str],
             metrics: list[str]) -> dict:
    """Score `run` on the queries `qids`; a query the run does not answer scores 0 (not skipped)."""
    try:
        measures = [ir_measures.parse_measure(m) for m in metrics]
    except (ValueError, NameError, SyntaxError) as err:
        raise StageError("metrics", f"unknown measure in {metrics} ({err})") from None
    wanted = [q for q in qids if q in qrels]
    if not wanted:
        raise StageError("qrels", "none of the evaluated queries has relevance judgements")
    sub_qrels = {q: qrels[q] for q in wanted}
    # ir-measures skips queries absent from the run; give each at least an empty ranking via a sentinel.
    sub_run = {q: {doc: score for doc, score in run.get(q, [])} or {"__no_result__": 0.0} for q in wanted}
    per_query: dict[str, dict[str, float]] = {q: {} for q in wanted}
    for metric in ir_measures.iter_calc(measures, sub_qrels, sub_run):
        per_query[metric.query_id][str(metric.measure)] = float(metric.value)
    aggregate = {str(m): float(v) for m, v in ir_measures.calc_aggregate(measures, sub_qrels, sub_run).items()}
    return {"queries": len(wanted), "queries_missing_from_run": sum(1 for q in wanted if q not in run),
            "metrics": {m: aggregate[str(ir_measures.parse_measure(m))] for m in metrics},
            "per_query": per_query}
