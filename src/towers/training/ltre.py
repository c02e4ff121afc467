"""LTRe (Learning To Retrieve; Zhan et al. 2020, Algorithm 1): the tensor core, and train().

Each step retrieves the top-n documents of a query with the fixed index, makes sure one of them is
relevant, and trains the query tower with a pairwise loss over that ranked list: RankNet, or
LambdaRank, which weights each pair by how much swapping it would change MRR@10 or NDCG@10."""
from __future__ import annotations

import hashlib
import time

import numpy as np
import torch
import torch.nn.functional as F

from .. import vector_index
from ..io import StageError
from . import inbatch, loop

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


def batch_mrr10(labels: np.ndarray) -> float:
    """Mean MRR@10 of ranked lists given their (B, n) labels (relevant: label > 0)."""
    top = np.asarray(labels)[:, :CUTOFF] > 0
    first = top.argmax(1)
    return float(np.where(top.any(1), 1.0 / (first + 1), 0.0).mean()) if len(top) else 0.0


def _digest(arrays) -> str:
    """sha256 of arrays' bytes, shapes and dtypes (the doc matrix, the starting weights)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(memoryview(a.reshape(-1).view(np.uint8)))
    return h.hexdigest()[:16]


def _weights(module: torch.nn.Module):
    # bytes as uint8, since numpy has no bfloat16
    return (t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy() for t in module.state_dict().values())


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


def train(query_tower, tokenizer, queries: list[dict], qrels: dict[str, dict[str, int]], doc_ids: list[str],
          doc_embeddings: np.ndarray, index, state_dir, cfg: dict, seed: int, log_path=None,
          stop_after_step=None) -> dict:
    """Algorithm 1: train only `query_tower` against fixed doc embeddings (row i is doc_ids[i]) and a
    fixed Faiss index over those rows. Each step draws cfg["batch_size"] queries from (seed, step),
    encodes them, retrieves their top_n docs, puts a relevant doc last in a list holding none, scores
    the lists against the stored doc vectors and applies the pairwise loss. The step log carries
    encode_s, search_s, step_s and mrr@10_batch (of the lists as retrieved, before the replacement).
    The tower is left on loop.device(), in eval mode."""
    for name, allowed in (("loss", LOSSES), ("metric", METRICS), ("reduction", REDUCTIONS)):
        _check(name, cfg[name], allowed)
    if doc_embeddings.ndim != 2 or len(doc_embeddings) != len(doc_ids) or index.ntotal != len(doc_ids):
        raise ValueError(f"{len(doc_ids)} doc ids, doc matrix {doc_embeddings.shape}, index of {index.ntotal}")
    judged = judged_rows(queries, qrels, doc_ids)
    relevant = [{row for row, g in rows.items() if g > 0} for rows in judged]
    settings = {"ltre": cfg, "seed": seed, "queries": loop.fingerprint(queries),
                "qrels": loop.fingerprint(judged), "doc_ids": loop.fingerprint(doc_ids),
                "doc_embeddings": _digest([doc_embeddings]), "start": _digest(_weights(query_tower))}
    dev = loop.device()
    query_tower.to(dev)
    size = min(cfg["batch_size"], len(queries))
    timed = []   # this run's per-step extras; loop.run adds each step's step_s to them

    def loss_fn(step: int):
        rng = np.random.default_rng([seed, step])
        picks = rng.choice(len(queries), size=size, replace=False)
        began = time.perf_counter()
        batch = inbatch.tokenize_queries(tokenizer, [queries[i]["text"] for i in picks], cfg["query_length"], dev)
        q = query_tower(**batch)
        vectors = np.ascontiguousarray(q.detach().float().cpu().numpy())   # the copy waits for the GPU
        encoded = time.perf_counter()
        _, ranked = vector_index.search(index, vectors, cfg["top_n"], cfg["nprobe"] or None)
        searched = time.perf_counter()
        if (ranked < 0).any():
            raise StageError("index", f"step {step + 1}: fewer than {cfg['top_n']} docs retrieved; raise nprobe")
        rows = [judged[i] for i in picks]
        mrr = batch_mrr10(labels_of(ranked, rows))
        ranked = ensure_relevant(ranked, [relevant[i] for i in picks], rng)
        labels = torch.from_numpy(labels_of(ranked, rows))
        docs = torch.from_numpy(doc_embeddings[ranked]).to(dev)   # (B, n, d): a copy, never trained
        # an elementwise product and sum stay float32 under autocast, unlike a bmm
        scores = (q.float().unsqueeze(1) * docs).sum(-1)
        loss = pairwise_loss(scores, labels, cfg["loss"], cfg["metric"], cfg["reduction"])
        extras = {"encode_s": encoded - began, "search_s": searched - encoded, "mrr@10_batch": round(mrr, 5)}
        timed.append(extras)
        return loss, extras

    report = loop.run(query_tower, loss_fn, steps=cfg["steps"], lr=cfg["lr"], warmup_ratio=cfg["warmup_ratio"],
                      seed=seed, state_dir=state_dir, checkpoint_every=cfg["checkpoint_every"], settings=settings,
                      weight_decay=cfg.get("weight_decay", 0.01), log_path=log_path,
                      stop_after_step=stop_after_step, desc="ltre")
    report.update(train_queries=len(queries), top_n=cfg["top_n"], seconds_per_step=seconds_per_step(timed))
    return report


def seconds_per_step(timed: list[dict]) -> dict:
    """Means over the steps run: encode, search, the rest of the step (loss, backward, optimiser
    step: update) and the whole step."""
    if not timed:
        return {k: None for k in ("encode", "search", "update", "total")}
    mean = {k: float(np.mean([t[k] for t in timed])) for k in ("encode_s", "search_s", "step_s")}
    return {"encode": round(mean["encode_s"], 6), "search": round(mean["search_s"], 6),
            "update": round(mean["step_s"] - mean["encode_s"] - mean["search_s"], 6),
            "total": round(mean["step_s"], 6)}
