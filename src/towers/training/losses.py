"""Training losses, one place for all regimes."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .settings import LOSSES, METRICS, REDUCTIONS, check_choice


def inner_products(query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
    """Every query's inner product with every doc, in float32 even under the training loop's bf16 autocast
    (which would compute a matmul of float32 inputs in bf16): scores of unnormalised vectors reach the
    hundreds, where bf16's ~3 digits round by 1-4 and blur a softmax or a hinge."""
    with torch.autocast(device_type=query.device.type, enabled=False):
        return query.float() @ doc.float().T


def in_batch_softmax(query: torch.Tensor, doc: torch.Tensor, doc_keys: list | None = None,
                     temperature: float = 1.0, first: int = 0) -> torch.Tensor:
    """Sampled softmax over in-batch documents (Chang et al. eq. 3 with D = the batch's documents).

    Query i's positive is document i. With in-batch sampling every positive is drawn with the same
    probability, so the log-Q correction is a constant and cancels. When two rows share a document
    (same key), the copy is masked out of the other row's denominator instead of counted as negative.
    In data-parallel training `query` is one rank's share, rows first .. first + len(query) of the
    batch, while `doc` (and `doc_keys`) hold the whole batch."""
    scores = inner_products(query, doc) / temperature
    own = torch.arange(first, first + len(query), device=scores.device)
    if doc_keys is not None:
        same = torch.tensor([[a == b for b in doc_keys] for a in doc_keys[first:first + len(query)]],
                            device=scores.device)
        same[torch.arange(len(query), device=scores.device), own] = False
        scores = scores.masked_fill(same, float("-inf"))
    return F.cross_entropy(scores, own)


def cosine_distance(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Row-wise 1 - cos(x, y) (QuadrupletBERT eq. 4)."""
    return 1 - F.cosine_similarity(x, y, dim=-1)


def quadruplet(query: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
               hard_negative: torch.Tensor | None, margin: float, reduction: str = "mean") -> torch.Tensor:
    """QuadrupletBERT eq. 3 as written: max(loss^h, loss^n) per example, with
    loss^n = [d(q,p) - d(q,n) + m]_+ and loss^h = [d(q,p) - d(hn,n) + m]_+ (d^h between hn and n).

    Without hard negatives loss^h = 0, which leaves the three-tower triplet loss with cosine
    distance (Three-T BERT, and QuadrupletBERT's first phase). Eq. 3 sums over examples; "mean"
    divides by the batch size, which AdamW ignores but gradient clipping does not."""
    d_p = cosine_distance(query, positive)
    per_example = (d_p - cosine_distance(query, negative) + margin).clamp(min=0)
    if hard_negative is not None:
        loss_h = (d_p - cosine_distance(hard_negative, negative) + margin).clamp(min=0)
        per_example = torch.maximum(loss_h, per_example)
    if reduction == "sum":
        return per_example.sum()
    if reduction == "mean":
        return per_example.mean()
    raise ValueError(f"unknown reduction {reduction!r}")


def multilabel_margin(scores: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """RepBERT eq. 4, averaged over the batch's queries: for each row (a query's scores against the
    batch's n documents), (1/n) * sum over positives i and negatives j of max(0, 1 - (s_i - s_j)).

    `positives` is a boolean matrix of the scores' shape: the row's own document plus any other
    in-batch document relevant to its query (RepBERT sec. 3.2, "In-batch Negatives"). This is
    torch.nn.MultiLabelMarginLoss, whose target lists each row's positive columns, ended by -1.
    A row with no negative (every document relevant) adds 0."""
    if scores.shape != positives.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and positives {tuple(positives.shape)} differ in shape")
    positives = positives.to(device=scores.device, dtype=torch.bool)
    columns = torch.arange(scores.shape[1], device=scores.device).expand_as(scores)
    # each row's positive columns first (in column order), then -1 which ends the target list
    order = torch.sort((~positives).to(torch.int8), dim=1, stable=True).indices
    target = torch.where(torch.gather(positives, 1, order), torch.gather(columns, 1, order), -1)
    return F.multilabel_margin_loss(scores.float(), target)


# --- pairwise losses over ranked lists (LTRe, sec. 4.3) ---------------------------------------

CUTOFF = 10


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
    check_choice("metric", metric, METRICS)
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


def pairwise_count(labels: torch.Tensor, reduction: str = "query-sum") -> int:
    """What pairwise_loss averages over: queries with a pair ("query-sum") or pairs ("pair-mean")."""
    valid = labels.unsqueeze(2) > labels.unsqueeze(1)
    return int(valid.sum()) if reduction == "pair-mean" else int(valid.flatten(1).any(1).sum())


def pairwise_loss(scores: torch.Tensor, labels: torch.Tensor, loss: str = "ranknet", metric: str = "mrr@10",
                  reduction: str = "query-sum") -> torch.Tensor:
    """RankNet (or metric-weighted LambdaRank) loss over every pair (s, t) with labels s > t."""
    check_choice("loss", loss, LOSSES)
    check_choice("metric", metric, METRICS)
    check_choice("reduction", reduction, REDUCTIONS)
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
