"""Fusing and comparing first-stage runs (RepBERT, Zhan et al. 2020, sec. 4.4.3 and 4.5).

A run is {qid: [(docid, score), ...]} ordered best first, as towers.io.read_run returns it. A query that
some runs lack is fused from the runs that have it."""
from __future__ import annotations

import math
from itertools import zip_longest
from statistics import fmean, pstdev

from ..io import StageError

Run = dict[str, list[tuple[str, float]]]
METHODS = ("alternate", "rrf", "combsum")
NORMALISATIONS = ("minmax", "zscore", "none")


def _check(runs, depth: int) -> None:
    if len(runs) < 2:
        raise StageError("--runs", f"fusion needs at least two runs, not {len(runs)}")
    if depth < 1:
        raise StageError("--depth", f"must be at least 1, not {depth}")


def _qids(runs) -> list[str]:
    """Every query of any run, in order of first appearance."""
    return list(dict.fromkeys(q for run in runs for q in run))


def _top(ranked, depth: int) -> dict[str, float]:
    """The first `depth` rows as docid -> score, best first; a repeated doc keeps its first (best) row."""
    top: dict[str, float] = {}
    for doc, score in ranked[:depth]:
        top.setdefault(doc, score)
    return top


def _summed(runs, depth: int, contribution) -> Run:
    """Per query, sum each run's `contribution(top docs)`; best first, ties by doc id (deterministic)."""
    fused = {}
    for qid in _qids(runs):
        terms: dict[str, list[float]] = {}
        for run in runs:
            for doc, value in contribution(_top(run.get(qid, []), depth)).items():
                terms.setdefault(doc, []).append(value)
        # fsum is correctly rounded, so a sum never depends on the order of the runs and true ties stay ties
        scores = {doc: math.fsum(values) for doc, values in terms.items()}
        fused[qid] = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:depth]
    return fused


def alternating_merge(runs, depth: int = 1000, truncate: bool = True) -> Run:
    """RepBERT eq. 6 for two or more runs: interleave the runs' top `depth` (run 1 rank 1, run 2 rank 1,
    run 1 rank 2, ...), keep each doc's first occurrence, then keep the top `depth` (or, with
    truncate=False, the whole union). Run order matters: runs[0] wins every tie.

    Scores are len(list) - rank + 1: they carry only the order, strictly decreasing so that TREC tools,
    which re-sort by score, keep it."""
    _check(runs, depth)
    fused = {}
    for qid in _qids(runs):
        tops = [_top(run.get(qid, []), depth) for run in runs]
        merged = list(dict.fromkeys(doc for row in zip_longest(*tops) for doc in row if doc is not None))
        if truncate:
            merged = merged[:depth]
        fused[qid] = [(doc, float(len(merged) - i)) for i, doc in enumerate(merged)]
    return fused


def reciprocal_rank_fusion(runs, k: float = 60, depth: int = 1000) -> Run:
    """Cormack et al. 2009: score(d) = sum over runs of 1 / (k + rank of d in the run's top `depth`)."""
    _check(runs, depth)
    if k < 0:
        raise StageError("--rrf-k", f"must be 0 or more, not {k}")
    return _summed(runs, depth, lambda top: {doc: 1 / (k + rank) for rank, doc in enumerate(top, 1)})


def _normalise(scores: dict[str, float], normalisation: str) -> dict[str, float]:
    if not scores or normalisation == "none":
        return scores
    values = list(scores.values())
    if normalisation == "minmax":
        low, high = min(values), max(values)
        # equal scores: every retrieved doc counts fully (a doc the run missed still counts 0)
        return {d: (s - low) / (high - low) if high > low else 1.0 for d, s in scores.items()}
    mean, spread = fmean(values), pstdev(values)
    return {d: (s - mean) / spread if spread > 0 else 0.0 for d, s in scores.items()}


def combsum(runs, normalisation: str = "minmax", depth: int = 1000) -> Run:
    """CombSUM: per query, the sum of each run's normalised scores over its top `depth`; a doc missing from
    a run gets 0 from it. minmax maps a run's scores to [0, 1], zscore to mean 0 and standard deviation 1."""
    _check(runs, depth)
    if normalisation not in NORMALISATIONS:
        raise StageError("--normalisation", f"unknown normalisation {normalisation!r}; "
                                            f"choose from {', '.join(NORMALISATIONS)}")
    return _summed(runs, depth, lambda top: _normalise(top, normalisation))


def fuse(runs, method: str, depth: int = 1000, truncate: bool = True, k: float = 60,
         normalisation: str = "minmax") -> Run:
    if method == "alternate":
        return alternating_merge(runs, depth, truncate)
    if method == "rrf":
        return reciprocal_rank_fusion(runs, k, depth)
    if method == "combsum":
        return combsum(runs, normalisation, depth)
    raise StageError("--method", f"unknown fusion method {method!r}; choose from {', '.join(METHODS)}")


def strictly_decreasing(run: Run, places: int = 6) -> Run:
    """The same rankings, with scores that stay strictly decreasing when written with `places` decimals.

    trec_eval and ir-measures re-sort by score and break ties by doc id, so tied (or, once rounded,
    near-tied) fused scores would be re-ordered; a score is lowered by one unit of the last place only
    where needed."""
    unit = 10 ** places
    out = {}
    for qid, ranked in run.items():
        rows, last = [], math.inf
        for doc, score in ranked:
            last = min(round(score * unit), last - 1)
            rows.append((doc, last / unit))
        out[qid] = rows
    return out


def consistency_shares(run: Run, reference: Run, depths, reference_depth: int = 1000) -> dict[int, dict[str, float]]:
    """RepBERT eq. 5 per query: for each depth n and each query the run ranks, |D_run,q,n ∩ D_ref,q,reference_depth|
    / |D_run,q,n|. A query with no ranking is skipped; a query the reference lacks has no overlap (0)."""
    if not run:
        raise StageError("--run", "the run has no rankings")
    if not depths or min(depths) < 1:
        raise StageError("--depths", f"give depths of at least 1, not {list(depths)}")
    if reference_depth < 1:
        raise StageError("--reference-depth", f"must be at least 1, not {reference_depth}")
    pools = {qid: {doc for doc, _ in ranked[:reference_depth]} for qid, ranked in reference.items()}
    return {n: {qid: len(top & pools.get(qid, set())) / len(top)
                for qid, ranked in run.items() if (top := {doc for doc, _ in ranked[:n]})} for n in depths}


def mean_shares(shares: dict[int, dict[str, float]]) -> dict[int, float | None]:
    """C(f, n): each depth's mean over queries of consistency_shares; None where no query counts."""
    return {n: fmean(by_query.values()) if by_query else None for n, by_query in shares.items()}


def consistency_factor(run: Run, reference: Run, depths, reference_depth: int = 1000) -> dict[int, float | None]:
    """RepBERT eq. 5 (see consistency_shares), averaged over queries."""
    return mean_shares(consistency_shares(run, reference, depths, reference_depth))
