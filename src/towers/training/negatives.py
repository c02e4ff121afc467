"""Negative-sampling baselines of LTRe's Table 1: one shared encoder for queries and documents (as
ANCE's BM25 Neg), trained on (relevant, negative) lists, both sides updated.

negatives (settings.NegativeSampling.negatives):
  rand       random documents of the corpus (Rand Neg);
  bm25       documents of BM25's top negative_depth (BM25 Neg);
  nce        the highest-scored other document of the batch (NCE Neg: in-batch, no extra encoding);
  bm25+rand  BM25 and random negatives 1:1 (alternate queries of a batch take one or the other);
  async      the top negative_depth of an asynchronous retrieval: every refresh_every steps the whole
             corpus is re-encoded with the current weights, an index built and every training query
             searched (ANCE's Async ANN); data-parallel ranks each encode their slice of the corpus into
             one shared memory-mapped matrix and search their share of the queries; the refresh's seconds
             are part of the step that does it.
Warm starts ("BM25 -> X") are a saved model as the start. The loss is pairwise (ltre.pairwise_loss):
RankNet over one (relevant, negative) pair is the 2-way softmax loss these baselines were trained with."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..io import StageError
from .losses import inner_products, pairwise_count, pairwise_loss
from ..modeling.models import TwoTower
from ..modeling.tokens import tokenize_docs, tokenize_queries
from ..retrieval import vector_index
from ..retrieval.encode import encode
from .settings import NegativeSampling
from . import distributed, loop
from .ltre import asynchronous_retrieval
from .sampling import TrainingData, sample_negatives

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


def refresh_search(vectors: np.ndarray, queries: np.ndarray, factory: str, depth: int, nprobe: int) -> np.ndarray:
    """Ranked rows of `queries` over `vectors` (a refresh's doc matrix, possibly a shared memory map): an exact
    search reads the matrix where it lies (faiss.knn: the same search an IndexFlatIP runs, with no copy), any
    other factory string builds its index from it."""
    import faiss

    if factory == "Flat":
        return faiss.knn(queries, vectors, min(depth, len(vectors)), metric=faiss.METRIC_INNER_PRODUCT)[1]
    return vector_index.search(vector_index.build(np.ascontiguousarray(vectors), factory), queries, depth,
                               nprobe or None)[1]


REFRESH_FILE = "refresh-docs.npy"   # in the state folder: the doc vectors data-parallel ranks write by slices


def train(model: TwoTower, tokenizer, data: TrainingData, docs: Sequence, cfg: NegativeSampling, run: loop.Run,
          start_key: str) -> dict:
    """docs[i]: what the doc tower reads for doc row i of `data` (a list, or sampling.CandidateTexts reading rows
    from the file when asked). Trains `model` (shared towers) in place; returns the loop's report with seconds per
    step and refresh counts. A step reads only its own queries' judgements and pools, and its lists' texts."""
    steps = SampledSteps(model, tokenizer, data, docs, cfg, run)
    identity = {"negatives": cfg.as_dict(), "seed": run.seed, "start": start_key, **data.key,
                "docs": docs.key if hasattr(docs, "key") else loop.fingerprint(list(docs))}
    try:
        report = loop.run(model, steps.loss, cfg, run, identity=identity, desc=f"neg-{cfg.negatives}")
    finally:
        steps.shared_file.unlink(missing_ok=True)
    seconds = [t["step_s"] for t in steps.timed]
    refreshes = [t["refresh_s"] for t in steps.timed if "refresh_s" in t]
    report.update(train_queries=len(data.queries), negatives=cfg.negatives, refreshes=steps.refreshes,
                  seconds_per_step=round(float(np.mean(seconds)), 6) if seconds else None,
                  refresh_seconds=round(float(np.sum(refreshes)), 3))
    return report


class SampledSteps:
    """train's steps: a relevant document and negatives sampled as cfg.negatives says, both towers trained
    (`loss`, loop.run's loss_fn); `timed` holds every step's extras, `refreshes` ANCE's re-encodings."""

    def __init__(self, model: TwoTower, tokenizer, data: TrainingData, docs: Sequence, cfg: NegativeSampling,
                 run: loop.Run):
        method = cfg.negatives
        if len(docs) != data.n_docs:
            raise ValueError(f"{len(docs)} doc texts for {data.n_docs} doc ids")
        if method in ("bm25", "bm25+rand") and data.bm25 is None:
            raise ValueError(f"{method} negatives need a BM25 run")
        if method == "async" and not cfg.refresh_every:
            raise ValueError("asynchronous negatives need refresh_every > 0")
        self.dev = loop.device()
        model.to(self.dev)
        self.model, self.tokenizer, self.data, self.docs, self.cfg, self.seed = model, tokenizer, data, docs, cfg, run.seed
        self.size = min(cfg.batch_size, len(data.queries))
        self.segment = model.config.get("doc_segment", 0)
        self.ranked, self.refreshes = None, 0   # the last asynchronous retrieval of every training query
        self.timed = []   # this run's per-step extras
        self.shared_file = Path(run.state_dir) / REFRESH_FILE

    def refresh(self) -> None:
        """ANCE's refresh: re-encode the corpus and every training query, index, retrieve (each rank its share)."""
        model, tokenizer, docs, queries, cfg = self.model, self.tokenizer, self.docs, self.data.queries, self.cfg
        start, stop = distributed.my_rows(len(docs))
        part = encode(model.doc, tokenizer, docs[start:stop], "doc", model.config["doc_length"], ENCODE_BATCH,
                      desc=None, segment=self.segment)
        vectors = distributed.shared_matrix(part, len(docs), self.shared_file)
        del part
        self.ranked = asynchronous_retrieval(
            lambda first, last: encode(model.query, tokenizer, [q["text"] for q in queries[first:last]], "query",
                                       model.config["query_length"], ENCODE_BATCH, desc=None),
            len(queries), lambda qv: refresh_search(vectors, qv, cfg.index, cfg.negative_depth, cfg.nprobe),
            len(docs))
        self.refreshes += 1
        model.train()

    def loss(self, step: int):
        cfg, queries, judgements = self.cfg, self.data.queries, self.data.judgements
        extras = {}
        if cfg.negatives == "async" and (step % cfg.refresh_every == 0 or self.ranked is None):
            began = time.perf_counter()
            self.refresh()
            extras["refresh_s"] = time.perf_counter() - began
        rng = np.random.default_rng([self.seed, step])
        picks = rng.choice(len(queries), size=self.size, replace=False)
        relevant = {int(i): judgements.relevant(i) for i in picks}
        positives = [int(rng.choice(sorted(relevant[i]))) for i in picks]
        mine = distributed.share(self.size)   # this process's queries (all of them in one process)
        q = self.model.query(**tokenize_queries(self.tokenizer, [queries[i]["text"] for i in picks[mine]],
                                                self.model.config["query_length"]))
        if cfg.negatives == "nce":
            lists, labels = self.nce_lists(q, picks, positives, relevant, mine)
        else:
            lists, labels = self.sampled(q, picks, positives, relevant, mine, rng)
        loss = pairwise_loss(lists, labels, cfg.loss, cfg.metric, cfg.reduction)
        loss = loss * distributed.share_weight(pairwise_count(labels, cfg.reduction))   # processes' counts differ
        self.timed.append(extras)   # loop.run adds the step's step_s to it
        return loss, extras

    def nce_lists(self, q, picks, positives, relevant, mine) -> tuple[torch.Tensor, torch.Tensor]:
        """NCE: each query's own document against the highest-scored other in-batch document not relevant to it."""
        d = distributed.gather(self.model.doc(**tokenize_docs(self.tokenizer, [self.docs[r] for r in positives[mine]],
                                                              self.model.config["doc_length"], segment=self.segment)))
        scores = inner_products(q, d)
        in_batch_relevant = torch.tensor([[positives[j] in relevant[i] for j in range(self.size)]
                                          for i in picks[mine]], device=scores.device)
        hardest = hardest_in_batch(scores, in_batch_relevant)
        keep = hardest >= 0
        own = scores[torch.arange(len(q)), torch.arange(mine.start, mine.stop)]
        lists = torch.stack([own, scores.gather(1, hardest.clamp_min(0).unsqueeze(1)).squeeze(1)], 1)[keep]
        return lists, torch.tensor([[1.0, 0.0]] * int(keep.sum()))

    def sampled(self, q, picks, positives, relevant, mine, rng) -> tuple[torch.Tensor, torch.Tensor]:
        """A relevant document and negatives_per_query drawn from the method's pool (none: the whole corpus)."""
        cfg, rows = self.cfg, []
        for position, (i, positive) in enumerate(zip(picks, positives)):
            pool = pools_for(cfg.negatives, position, self.data.bm25, self.ranked)
            negatives = sample_negatives(() if pool is None else pool[i][:cfg.negative_depth], cfg.negatives_per_query,
                                         len(self.docs), relevant[i], rng)
            rows.append([positive, *negatives])
        ranked = np.asarray(rows, dtype=np.int64)[mine]
        d = self.model.doc(**tokenize_docs(self.tokenizer, [self.docs[r] for r in ranked.reshape(-1)],
                                           self.model.config["doc_length"], segment=self.segment)
                           ).view(len(ranked), ranked.shape[1], -1)
        lists = (q.float().unsqueeze(1) * d.float()).sum(-1)
        return lists, torch.from_numpy(self.data.judgements.labels(ranked, picks[mine]))


def require_shared(model: TwoTower, where) -> None:
    if not model.shared:
        raise StageError(where, "the negative-sampling baselines train one shared encoder; this model has two")
