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
