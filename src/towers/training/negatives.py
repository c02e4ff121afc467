"""Negative-sampling baselines of LTRe's Table 1: one shared encoder for queries and documents (as
ANCE's BM25 Neg), trained on (relevant, negative) lists, both sides updated.

negatives (settings.NegativeSampling.negatives):
  rand       random documents of the corpus (Rand Neg);
  bm25       documents of BM25's top negative_depth (BM25 Neg);
  nce        the highest-scored other document of the batch (NCE Neg: in-batch, no extra encoding);
  bm25+rand  BM25 and random negatives 1:1 (alternate queries of a batch take one or the other);
  async      the top negative_depth of an asynchronous retrieval: every refresh_every steps the whole
             corpus is re-encoded with the current weights, an index built and every training query
             searched (ANCE's Async ANN); the refresh's seconds are part of the step that does it.
Warm starts ("BM25 -> X") are a saved model as the start. The loss is pairwise (ltre.pairwise_loss):
RankNet over one (relevant, negative) pair is the 2-way softmax loss these baselines were trained with."""
from __future__ import annotations

import time

import numpy as np
import torch

from .. import vector_index
from ..encode import encode
from ..io import StageError
from ..losses import pairwise_count, pairwise_loss
from ..models import TwoTower, tokenize_docs, tokenize_queries
from ..settings import NegativeSampling
from . import distributed, loop
from .sampling import indexed_judgements, labels_of, sample_negatives

ENCODE_BATCH = 128   # texts a forward pass when a refresh re-encodes the corpus and the queries


def pools_for(method: str, position: int, bm25_rows, async_rows):
    """Where query number `position` of a batch draws its negatives: a ranked pool, or None (random)."""
    if method == "bm25+rand":
        return bm25_rows if position % 2 == 0 else None
    return {"rand": None, "bm25": bm25_rows, "async": async_rows}[method]


def hardest_in_batch(scores: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """For each row of the (B, B) query x in-batch-doc scores, the column of the highest-scored doc
    that is not relevant to it; -1 where every doc of the batch is relevant."""
    masked = scores.detach().masked_fill(relevant, float("-inf"))
    best = masked.argmax(1)
    return torch.where(torch.isinf(masked.max(1).values), torch.full_like(best, -1), best)


def train(model: TwoTower, tokenizer, queries: list[dict], qrels: dict[str, dict[str, int]], doc_ids: list[str],
          docs: list, cfg: NegativeSampling, run: loop.Run, start_key: str,
          bm25: dict[str, list[str]] | None = None) -> dict:
    """queries: {'qid', 'text'}; docs[i]: what the doc tower reads for doc_ids[i]. Trains `model` (shared
    towers) in place; returns the loop's report with seconds per step and refresh counts."""
    method = cfg.negatives
    if method in ("bm25", "bm25+rand") and bm25 is None:
        raise ValueError(f"{method} negatives need a BM25 run")
    if method == "async" and not cfg.refresh_every:
        raise ValueError("asynchronous negatives need refresh_every > 0")
    judged, relevant, bm25_rows = indexed_judgements(queries, qrels, doc_ids, bm25)
    dev = loop.device()
    model.to(dev)
    size = min(cfg.batch_size, len(queries))
    depth, count = cfg.negative_depth, cfg.negatives_per_query
    segment = model.config.get("doc_segment", 0)
    asynchronous = {"ranked": None, "refreshes": 0}
    timed = []   # this run's per-step extras

    def refresh() -> None:
        """ANCE's refresh: re-encode the corpus and every training query, index, retrieve."""
        vectors = encode(model.doc, tokenizer, docs, "doc", model.config["doc_length"], ENCODE_BATCH,
                         desc=None, segment=segment)
        index = vector_index.build(vectors, cfg.index)
        qv = encode(model.query, tokenizer, [q["text"] for q in queries], "query", model.config["query_length"],
                    ENCODE_BATCH, desc=None)
        asynchronous["ranked"] = vector_index.search(index, qv, depth, cfg.nprobe or None)[1]
        asynchronous["refreshes"] += 1
        model.train()

    def loss_fn(step: int):
        extras = {}
        if method == "async" and (step % cfg.refresh_every == 0 or asynchronous["ranked"] is None):
            began = time.perf_counter()
            refresh()
            extras["refresh_s"] = time.perf_counter() - began
        rng = np.random.default_rng([run.seed, step])
        picks = rng.choice(len(queries), size=size, replace=False)
        positives = [int(rng.choice(sorted(relevant[i]))) for i in picks]
        mine = distributed.share(size)   # this process's queries (all of them in one process)
        q = model.query(**tokenize_queries(tokenizer, [queries[i]["text"] for i in picks[mine]],
                                           model.config["query_length"]))
        if method == "nce":
            d = distributed.gather(model.doc(**tokenize_docs(tokenizer, [docs[r] for r in positives[mine]],
                                                             model.config["doc_length"], segment=segment)))
            scores = q.float() @ d.float().T
            in_batch_relevant = torch.tensor([[positives[j] in relevant[i] for j in range(size)] for i in picks[mine]],
                                             device=scores.device)
            hardest = hardest_in_batch(scores, in_batch_relevant)
            keep = hardest >= 0
            own = scores[torch.arange(len(q)), torch.arange(mine.start, mine.stop)]
            lists = torch.stack([own, scores.gather(1, hardest.clamp_min(0).unsqueeze(1)).squeeze(1)], 1)[keep]
            labels = torch.tensor([[1.0, 0.0]] * int(keep.sum()))
        else:
            rows = []
            for position, (i, positive) in enumerate(zip(picks, positives)):
                pool = pools_for(method, position, bm25_rows, asynchronous["ranked"])
                negatives = sample_negatives(() if pool is None else pool[i][:depth], count, len(doc_ids),
                                             relevant[i], rng)
                rows.append([positive, *negatives])
            ranked = np.asarray(rows, dtype=np.int64)[mine]
            d = model.doc(**tokenize_docs(tokenizer, [docs[r] for r in ranked.reshape(-1)], model.config["doc_length"],
                                          segment=segment)).view(len(ranked), ranked.shape[1], -1)
            lists = (q.float().unsqueeze(1) * d.float()).sum(-1)
            labels = torch.from_numpy(labels_of(ranked, [judged[i] for i in picks[mine]]))
        loss = pairwise_loss(lists, labels, cfg.loss, cfg.metric, cfg.reduction)
        loss = loss * distributed.share_weight(pairwise_count(labels, cfg.reduction))   # processes' counts differ
        timed.append(extras)   # loop.run adds the step's step_s to it
        return loss, extras

    identity = {"negatives": cfg.as_dict(), "seed": run.seed, "start": start_key, "queries": loop.fingerprint(queries),
                "qrels": loop.fingerprint(judged), "doc_ids": loop.fingerprint(doc_ids),
                "docs": loop.fingerprint(docs), "bm25": loop.fingerprint(bm25_rows)}
    report = loop.run(model, loss_fn, cfg, run, identity=identity, desc=f"neg-{method}")
    steps = [t["step_s"] for t in timed]
    refreshes = [t["refresh_s"] for t in timed if "refresh_s" in t]
    report.update(train_queries=len(queries), negatives=method, refreshes=asynchronous["refreshes"],
                  seconds_per_step=round(float(np.mean(steps)), 6) if steps else None,
                  refresh_seconds=round(float(np.sum(refreshes)), 3))
    return report


def require_shared(model: TwoTower, where) -> None:
    if not model.shared:
        raise StageError(where, "the negative-sampling baselines train one shared encoder; this model has two")
