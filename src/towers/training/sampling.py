"""Training queries' judgements by row of the doc matrix, and negative draws: what LTRe (ltre.py) and the
negative-sampling baselines (negatives.py) both take their lists from."""
from __future__ import annotations

import numpy as np

from ..io import StageError


def labels_of(ranked: np.ndarray, qrels: list[dict[int, int]]) -> np.ndarray:
    """(B, n) float32 graded labels of the ranked ids; 0 where a document is not judged."""
    labels = [[qrel.get(int(d), 0) for d in row] for row, qrel in zip(ranked, qrels)]
    return np.asarray(labels, dtype=np.float32).reshape(np.shape(ranked))


def judged_rows(queries: list[dict], qrels: dict[str, dict[str, int]], doc_ids: list[str]) -> list[dict[int, int]]:
    """Each query's judgements keyed by row of the doc matrix; a query with no relevant indexed doc
    could never get a positive pair, so it stops the stage."""
    row_of = {doc: i for i, doc in enumerate(doc_ids)}
    judged = []
    for q in queries:
        rows = {row_of[d]: int(g) for d, g in qrels.get(q["qid"], {}).items() if d in row_of}
        if not any(g > 0 for g in rows.values()):
            raise StageError("qrels", f"training query {q['qid']} has no relevant document among the "
                                      f"{len(doc_ids)} indexed docs")
        judged.append(rows)
    return judged


def indexed_judgements(queries: list[dict], qrels: dict[str, dict[str, int]], doc_ids: list[str],
                       bm25: dict[str, list[str]] | None):
    """Per training query: its judgements by doc row, its relevant rows, and BM25's ranked rows (None
    without a run), the row-indexed views both LTRe and the baselines draw from."""
    judged = judged_rows(queries, qrels, doc_ids)
    relevant = [{row for row, g in rows.items() if g > 0} for rows in judged]
    row_of = {doc: i for i, doc in enumerate(doc_ids)}
    bm25_rows = None if bm25 is None else [[row_of[d] for d in bm25.get(q["qid"], []) if d in row_of] for q in queries]
    return judged, relevant, bm25_rows


def sample_negatives(pool, count: int, n_docs: int, excluded: set[int], rng) -> list[int]:
    """`count` distinct rows from `pool` (ranked rows: BM25's or an asynchronous retrieval's top) outside
    `excluded`; random rows of the corpus make up a pool too short for it."""
    pool = [int(r) for r in pool if int(r) not in excluded]
    picked = [pool[int(i)] for i in rng.choice(len(pool), size=min(count, len(pool)), replace=False)] if pool else []
    while len(picked) < count:
        row = int(rng.integers(n_docs))
        if row not in excluded and row not in picked:
            picked.append(row)
    return picked
