"""LTRe (Learning To Retrieve; Zhan et al. 2020, Algorithm 1): train the query tower against a fixed index.

Each step retrieves the top-n documents of a query with the fixed index, makes sure one of them is
relevant, and trains the query tower with a pairwise loss over that ranked list (losses.pairwise_loss:
RankNet, or LambdaRank, which weights each pair by how much swapping it would change MRR@10 or
NDCG@10). The same loop samples negatives instead for the paper's Figure 3 baselines."""
from __future__ import annotations

import hashlib
import time

import numpy as np
import torch

from ..io import StageError
from .losses import CUTOFF, pairwise_count, pairwise_loss
from ..modeling.tokens import tokenize_queries
from ..retrieval import vector_index
from ..retrieval.matrix import require_finite
from .settings import LearningToRetrieve
from . import distributed, loop
from .sampling import TrainingData, sample_negatives


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


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean share of row i of `a` that row i of `b` also holds (Figure 3c/3d's top-200 overlap)."""
    return float(np.mean([len(set(map(int, x)) & set(map(int, y))) / max(len(x), 1) for x, y in zip(a, b)]))


def recall(ranked: np.ndarray, relevant: list[set[int]]) -> float:
    """Mean share of each query's relevant rows that its ranked row holds."""
    return float(np.mean([len(rel & set(map(int, row))) / len(rel) for row, rel in zip(ranked, relevant)]))


def sampled_lists(picks, relevant, pools, count: int, n_docs: int, rng, depth: int | None = None) -> np.ndarray:
    """(B, 1 + count): a relevant row then `count` negatives of each picked query, from the first `depth` rows
    of its pool (pools[i]; None: uniformly from the corpus, Rand Neg). relevant[i]: query i's relevant rows."""
    lists = []
    for i in picks:
        positive = int(rng.choice(sorted(relevant[i])))
        pool = pools[i][:depth] if pools is not None else ()
        lists.append([positive, *sample_negatives(pool, count, n_docs, relevant[i], rng)])
    return np.asarray(lists, dtype=np.int64)


def asynchronous_retrieval(encode_queries, count: int, search, n_docs: int) -> np.ndarray:
    """(count, depth) rows retrieved for every training query: `encode_queries(start, stop)` gives the vectors of
    queries [start, stop), `search(vectors)` their ranked rows. Data-parallel ranks each take their share of the
    queries and gather the rows; int32 where n_docs rows fit (MS MARCO: 502,939 x 200 is 0.4 GB, not 0.8)."""
    start, stop = distributed.my_rows(count)
    ranked = search(encode_queries(start, stop)).astype(np.int32 if n_docs < 2**31 else np.int64)
    return distributed.gather_rows(ranked, count)


def train(query_tower, tokenizer, data: TrainingData, doc_embeddings: np.ndarray, index, cfg: LearningToRetrieve,
          run: loop.Run) -> dict:
    """Train only `query_tower` against fixed doc embeddings (row i is doc i of `data`; a memory map serves) and a
    fixed Faiss index over those rows. Each step draws cfg.batch_size queries from (seed, step), encodes them and
    retrieves their top documents from the whole index, then builds each query's list for the
    pairwise loss by cfg.negatives:
      ltre: Algorithm 1, the top_n retrieved, a relevant doc put last in a list holding none;
      rand / bm25 / async: a relevant doc and negatives_per_query negatives drawn uniformly from the
      corpus, from BM25's top negative_depth (data.bm25), or from the top negative_depth of the last
      asynchronous retrieval (every refresh_every steps, all training queries, current weights in eval mode,
      the queries shared out over data-parallel ranks; ANCE's negatives, here with the doc side fixed as in the
      paper's Figure 3). Sampled lists are sorted by their current scores, so LambdaRank's positions
      are ranks. RankNet over one (relevant, negative) pair is the 2-way softmax loss those baselines use.
    A step touches only its own queries' judgements and pools (compact arrays built once, sampling.TrainingData).
    Scores are inner products with the stored doc vectors. The step log carries encode_s, search_s,
    step_s and, of the lists as retrieved (before any replacement), mrr@10_batch; with probe_depth > 0
    also r@<probe>_batch, bm25_overlap (with data.bm25) and async_overlap (with refresh_every) at that depth
    (the paper's Figure 3). The tower is left on loop.device(), in eval mode.
    A resumed async run retrieves anew at its first step (the table is not checkpointed)."""
    steps = FullRetrievalSteps(query_tower, tokenizer, data, doc_embeddings, index, cfg, run)
    method = cfg.negatives
    report = loop.run(query_tower, steps.loss, cfg, run, identity=steps.identity,
                      desc=f"ltre-{method}" if method != "ltre" else "ltre")
    report.update(train_queries=len(data.queries), top_n=cfg.top_n, negatives=method,
                  seconds_per_step=seconds_per_step(steps.timed))
    return report


class FullRetrievalSteps:
    """train's steps: each encodes its queries, retrieves from the whole index, and scores the lists its negative
    sampling makes (`loss`, loop.run's loss_fn); `timed` holds every step's extras."""

    def __init__(self, query_tower, tokenizer, data: TrainingData, doc_embeddings: np.ndarray, index,
                 cfg: LearningToRetrieve, run: loop.Run):
        n_docs = data.n_docs
        if doc_embeddings.ndim != 2 or len(doc_embeddings) != n_docs or index.ntotal != n_docs:
            raise ValueError(f"{n_docs} doc ids, doc matrix {doc_embeddings.shape}, index of {index.ntotal}")
        # a row of NaN scores nowhere: its document would never be retrieved nor be a negative (the digest below
        # reads every page anyway)
        require_finite(doc_embeddings, getattr(doc_embeddings, "filename", None) or "doc embeddings")
        if cfg.negatives == "bm25" and data.bm25 is None:
            raise ValueError("BM25 negatives need a BM25 run")
        if cfg.negatives == "async" and not cfg.refresh_every:
            raise ValueError("asynchronous negatives need refresh_every > 0")
        self.identity = {"ltre": cfg.as_dict(), "seed": run.seed, **data.key,
                         "doc_embeddings": _digest([doc_embeddings]), "start": _digest(_weights(query_tower))}
        self.dev = loop.device()
        query_tower.to(self.dev)
        self.tower, self.tokenizer, self.data, self.docs, self.index, self.cfg, self.seed = \
            query_tower, tokenizer, data, doc_embeddings, index, cfg, run.seed
        self.size = min(cfg.batch_size, len(data.queries))
        self.depth = max(cfg.top_n, cfg.probe_depth)
        self.timed = []   # this run's per-step extras; loop.run adds each step's step_s to them
        self.ranked = None   # the last asynchronous retrieval of every training query

    def encode_queries(self, start: int, stop: int) -> np.ndarray:
        queries, length = self.data.queries, self.cfg.query_length
        with torch.no_grad():
            parts = [self.tower(**tokenize_queries(self.tokenizer, [q["text"] for q in queries[i:min(i + 256, stop)]],
                                                   length, self.dev)).float().cpu().numpy()
                     for i in range(start, stop, 256)]
        return np.ascontiguousarray(np.concatenate(parts)) if parts else \
            np.zeros((0, self.docs.shape[1]), np.float32)

    def refresh(self) -> None:
        cfg, was_training = self.cfg, self.tower.training
        self.tower.eval()
        self.ranked = asynchronous_retrieval(
            self.encode_queries, len(self.data.queries),
            lambda vectors: vector_index.search(self.index, vectors, max(cfg.probe_depth, cfg.negative_depth),
                                                cfg.nprobe or None)[1], self.data.n_docs)
        self.tower.train(was_training)

    def loss(self, step: int):
        cfg, queries, judgements = self.cfg, self.data.queries, self.data.judgements
        extras = {}
        if cfg.refresh_every and (step % cfg.refresh_every == 0 or self.ranked is None):
            began = time.perf_counter()
            self.refresh()
            extras["refresh_s"] = time.perf_counter() - began
        rng = np.random.default_rng([self.seed, step])
        picks = rng.choice(len(queries), size=self.size, replace=False)
        began = time.perf_counter()
        mine = distributed.share(self.size)   # this process encodes its share; every process searches them all
        batch = tokenize_queries(self.tokenizer, [queries[i]["text"] for i in picks[mine]], cfg.query_length, self.dev)
        q = self.tower(**batch)
        # the copy waits for the GPU
        vectors = np.ascontiguousarray(distributed.gather(q.detach()).float().cpu().numpy())
        encoded = time.perf_counter()
        _, ranked = vector_index.search(self.index, vectors, self.depth, cfg.nprobe or None)
        searched = time.perf_counter()
        if (ranked[:, :cfg.top_n] < 0).any():
            raise StageError("index", f"step {step + 1}: fewer than {cfg.top_n} docs retrieved; raise nprobe")
        relevant = {int(i): judgements.relevant(i) for i in picks}
        extras.update(encode_s=encoded - began, search_s=searched - encoded,
                      **{"mrr@10_batch": round(batch_mrr10(judgements.labels(ranked[:, :max(cfg.top_n, CUTOFF)],
                                                                             picks)), 5)})
        extras.update(self.probed(ranked, picks, relevant))
        loss = self.pairwise(q, self.lists(ranked, picks, relevant, rng), picks, mine)
        self.timed.append(extras)
        return loss, extras

    def probed(self, ranked: np.ndarray, picks: np.ndarray, relevant: dict) -> dict:
        """The paper's Figure 3 at probe_depth: recall, and overlap with BM25's and the asynchronous top."""
        probe, bm25_rows = self.cfg.probe_depth, self.data.bm25
        if not probe:
            return {}
        extras = {f"r@{probe}_batch": round(recall(ranked[:, :probe], [relevant[i] for i in picks]), 5)}
        if bm25_rows is not None:
            extras["bm25_overlap"] = round(overlap(ranked[:, :probe], [bm25_rows[i][:probe] for i in picks]), 5)
        if self.cfg.refresh_every:
            extras["async_overlap"] = round(overlap(self.ranked[picks, :probe], ranked[:, :probe]), 5)
        return extras

    def lists(self, ranked: np.ndarray, picks: np.ndarray, relevant: dict, rng) -> np.ndarray:
        """Each query's list for the pairwise loss: LTRe's top_n as retrieved, or a relevant doc and sampled
        negatives (uniform, BM25's or the asynchronous top)."""
        cfg = self.cfg
        if cfg.negatives == "ltre":
            return ensure_relevant(ranked[:, :cfg.top_n], [relevant[i] for i in picks], rng)
        pools = {"rand": None, "bm25": self.data.bm25, "async": self.ranked}[cfg.negatives]
        return sampled_lists(picks, relevant, pools, cfg.negatives_per_query, self.data.n_docs, rng,
                             cfg.negative_depth)

    def pairwise(self, q: torch.Tensor, lists: np.ndarray, picks: np.ndarray, mine) -> torch.Tensor:
        """The pairwise loss of this process's queries over their lists, scored against the stored doc vectors."""
        cfg = self.cfg
        labels = torch.from_numpy(self.data.judgements.labels(lists, picks))[mine]
        docs = torch.from_numpy(np.asarray(self.docs[lists[mine]])).to(self.dev)   # (B, n, d): a copy, never trained
        # an elementwise product and sum stay float32 under autocast, unlike a bmm
        scores = (q.float().unsqueeze(1) * docs).sum(-1)
        if cfg.negatives != "ltre":   # ranks for LambdaRank's positions
            order = scores.detach().argsort(dim=1, descending=True)
            scores, labels = scores.gather(1, order), labels.gather(1, order.cpu())
        loss = pairwise_loss(scores, labels, cfg.loss, cfg.metric, cfg.reduction)
        return loss * distributed.share_weight(pairwise_count(labels, cfg.reduction))   # processes' counts differ


def seconds_per_step(timed: list[dict]) -> dict:
    """Means over the steps run: encode, search, the rest of the step (loss, backward, optimiser
    step: update), the whole step and, when there were any, the asynchronous retrievals (refresh)."""
    if not timed:
        return {k: None for k in ("encode", "search", "update", "total")}
    mean = {k: float(np.mean([t.get(k, 0.0) for t in timed])) for k in ("encode_s", "search_s", "step_s", "refresh_s")}
    out = {"encode": round(mean["encode_s"], 6), "search": round(mean["search_s"], 6),
           "update": round(mean["step_s"] - mean["encode_s"] - mean["search_s"] - mean["refresh_s"], 6),
           "total": round(mean["step_s"], 6)}
    if any("refresh_s" in t for t in timed):   # asynchronous retrievals, spread over the steps
        out["refresh"] = round(mean["refresh_s"], 6)
    return out
