"""Tensor core of LTRe (Learning To Retrieve; Zhan et al. 2020, Algorithm 1), with no model or index.

Each step retrieves the top-n documents of a query with the fixed index, makes sure one of them is
relevant, and trains the query tower with a pairwise loss over that ranked list: RankNet, or
LambdaRank, which weights each pair by how much swapping it would change MRR@10 or NDCG@10."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

METRICS = ("mrr@10", "ndcg@10")
LOSSES = ("ranknet", "lambdarank")
REDUCTIONS = ("query-sum", "pair-mean")
CUTOFF = 10


def _check(kind: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; expected one of {', '.join(allowed)}")


def ensure_relevant(ranked: np.ndarray, relevant: list[set[int]], rng: np.random.Generator) -> np.ndarray:
    """A copy of ranked (B, n) where a row holding no relevant id has its last id replaced by a
    relevant one drawn with rng, so every query has at least one positive pair to learn from."""
    if len(relevant) != len(ranked):
        raise ValueError(f"{len(ranked)} ranked rows but {len(relevant)} relevant sets")
    out = np.array(ranked, copy=True)
    for i, (row, rel) in enumerate(zip(out, relevant)):
        if not rel:
            raise ValueError(f"query {i} has no relevant document")
        if not any(int(d) in rel for d in row):
            # sorted so the same rng state picks the same id whatever the set's iteration order
            out[i, -1] = rng.choice(sorted(rel))
    return out


def labels_of(ranked: np.ndarray, qrels: list[dict[int, int]]) -> np.ndarray:
    """(B, n) float32 graded labels of the ranked ids; 0 where a document is not judged."""
    labels = [[qrel.get(int(d), 0) for d in row] for row, qrel in zip(ranked, qrels)]
    return np.asarray(labels, dtype=np.float32).reshape(np.shape(ranked))


def _ranks(labels: torch.Tensor) -> torch.Tensor:
    return torch.arange(1, min(labels.shape[-1], CUTOFF) + 1, dtype=labels.dtype, device=labels.device)


def _dcg10(labels: torch.Tensor) -> torch.Tensor:
    return ((2.0 ** labels[..., :CUTOFF] - 1.0) / torch.log2(_ranks(labels) + 1.0)).sum(-1)


def _metric_at10(labels: torch.Tensor, metric: str, ideal: torch.Tensor) -> torch.Tensor:
    """MRR@10 or NDCG@10 of lists labels (..., n); ideal is the ideal DCG@10, broadcast over (...)."""
    if metric == "mrr@10":
        top = labels[..., :CUTOFF]
        # the largest reciprocal rank among relevant documents is that of the first one
        return torch.where(top > 0, 1.0 / _ranks(labels), torch.zeros_like(top)).amax(-1)
    dcg = _dcg10(labels)
    return torch.where(ideal > 0, dcg / ideal.clamp_min(1e-12), torch.zeros_like(dcg))


@torch.no_grad()
def delta_metric(labels: torch.Tensor, metric: str) -> torch.Tensor:
    """(B, n, n): |metric change| when positions s and t of each ranked list are swapped."""
    _check("metric", metric, METRICS)
    labels = labels.detach()
    labels = labels if labels.is_floating_point() else labels.float()
    b, n = labels.shape
    # a swap leaves the label multiset, hence the ideal DCG, unchanged: compute it once
    ideal = _dcg10(labels.sort(dim=-1, descending=True).values)
    base = _metric_at10(labels, metric, ideal)
    delta = torch.zeros(b, n, n, dtype=labels.dtype, device=labels.device)
    k = min(n, CUTOFF)
    t, top = torch.arange(n, device=labels.device), torch.arange(k, device=labels.device)
    # both metrics only see ranks 1..10, so a swap of two positions past rank 10 changes nothing,
    # and each swapped list needs only its first k positions
    for s in range(k):
        swapped = labels[:, :k].unsqueeze(1).repeat(1, n, 1)   # [b, t]: top k of list b, s and t swapped
        swapped[:, t, s] = labels
        swapped[:, top, top] = labels[:, s:s + 1].expand(b, k)
        change = (_metric_at10(swapped, metric, ideal.unsqueeze(1)) - base.unsqueeze(1)).abs()
        delta[:, s, :] = change
        delta[:, :, s] = change
    delta[:, t, t] = 0.0
    return delta


def pairwise_loss(scores: torch.Tensor, labels: torch.Tensor, loss: str = "ranknet", metric: str = "mrr@10",
                  reduction: str = "query-sum") -> torch.Tensor:
    """RankNet (or metric-weighted LambdaRank) loss over every pair (s, t) with labels s > t."""
    _check("loss", loss, LOSSES)
    _check("metric", metric, METRICS)
    _check("reduction", reduction, REDUCTIONS)
    if scores.shape != labels.shape or scores.dim() != 2:
        raise ValueError(f"scores {tuple(scores.shape)} and labels {tuple(labels.shape)} must both be (B, n)")
    labels = labels.to(scores.device)
    valid = labels.unsqueeze(2) > labels.unsqueeze(1)                  # [b, s, t]
    terms = F.softplus(scores.unsqueeze(1) - scores.unsqueeze(2))      # log(1 + exp(r_t - r_s))
    if loss == "lambdarank":
        terms = terms * delta_metric(labels, metric).to(terms.dtype)
    terms = torch.where(valid, terms, torch.zeros_like(terms))
    if reduction == "pair-mean":
        count = int(valid.sum())
        return terms.sum() / count if count else terms.sum()
    has_pair = valid.flatten(1).any(1)
    # queries without a pair would only dilute the mean
    return terms.flatten(1).sum(1)[has_pair].mean() if bool(has_pair.any()) else terms.sum()
