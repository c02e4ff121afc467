"""Hard-negative mining: each training question's candidate set C_i from a model's own index,
gold sentences removed (QuadrupletBERT sec. 4.1). Reusable by any method that wants hard negatives."""
from __future__ import annotations


def exclude_positives(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """qid -> retrieved candidate ids in rank order, without the question's relevant ones."""
    return {qid: [doc for doc, _ in ranked if qrels.get(qid, {}).get(doc, 0) <= 0] for qid, ranked in run.items()}
