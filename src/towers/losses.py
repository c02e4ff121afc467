"""Training losses, one place for all regimes."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def in_batch_softmax(query: torch.Tensor, doc: torch.Tensor, doc_keys: list | None = None,
                     temperature: float = 1.0) -> torch.Tensor:
    """Sampled softmax over in-batch documents (Chang et al. eq. 3 with D = the batch's documents).

    Query i's positive is document i. With in-batch sampling every positive is drawn with the same
    probability, so the log-Q correction is a constant and cancels. When two rows share a document
    (same key), the copy is masked out of the other row's denominator instead of counted as negative."""
    scores = query @ doc.T / temperature
    if doc_keys is not None:
        same = torch.tensor([[a == b for b in doc_keys] for a in doc_keys], device=scores.device)
        same.fill_diagonal_(False)
        scores = scores.masked_fill(same, float("-inf"))
    return F.cross_entropy(scores, torch.arange(len(query), device=scores.device))


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
