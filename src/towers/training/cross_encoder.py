"""Training the cross-encoder that retrieval/rerank.py scores with: `train` draws B training queries per step from (seed,
step), for each one relevant passage and negatives drawn from the query's top-k of a first-stage run with the
relevant passages removed (how MS MARCO's training triples were made from BM25). loss "pointwise" is
monoBERT's: one negative per query, binary cross-entropy on the relevance logit (for a 2-label head exactly
the 2-class softmax cross-entropy). loss "listwise" scores the relevant passage against `group_size - 1`
negatives of the same query and takes the softmax cross-entropy of the group (Gao et al. 2021's localized
contrastive estimation): every step compares passages of one query, which a small model learns from faster."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from ..io import StageError, with_relevant
from ..retrieval.rerank import load, relevance, tokenize_pairs, usable_length
from .settings import CrossEncoder
from . import distributed, loop
from .sampling import CandidateTexts, run_rows

VALID_STREAM = 7_777_777   # the validation draws' own seed stream, fixed across checkpoints


def training_examples(queries: dict[str, str], qrels: dict, run: dict, depth: int) -> list[dict]:
    """A split's queries with their relevant passages and the non-relevant passages of their run's
    top-`depth` (the negatives), as doc ids; a query with either list empty is left out."""
    examples = []
    for qid, text, positives in with_relevant(queries, qrels):
        negatives = [d for d, _ in run.get(qid, [])[:depth] if d not in positives]
        if positives and negatives:
            examples.append({"qid": qid, "query": text, "positives": positives, "negatives": negatives})
    return examples


def examples_by_row(splits: list[dict[str, str]], qrels: dict, run_path, texts: CandidateTexts, depth: int,
                    qrels_path="qrels") -> list[list[dict]]:
    """training_examples of each split's queries by row of `texts`, the run read once for all of them straight
    into rows (sampling.run_rows; documents the candidates lack are dropped): a query keeps a few hundred bytes
    and its negatives 4 bytes each, where ids and (id, score) tuples took ~200 bytes a hit (~100 GB for MS MARCO's
    training queries at depth 1000). Same examples, in the same order, as training_examples on the same inputs."""
    qids = list(dict.fromkeys(qid for split in splits for qid in split))
    ranked = run_rows(run_path, qids, texts.lookup, depth)
    position = {qid: i for i, qid in enumerate(qids)}
    found = []
    for split in splits:
        examples = []
        for qid, text, positives in with_relevant(split, qrels):
            rows = texts.lookup.rows_of(positives)   # ids sorted, as training_examples keeps them
            if (rows < 0).any():
                raise StageError(qrels_path, f"relevant document {positives[int(np.argmax(rows < 0))]} of query {qid} "
                                             f"is not in {texts.path}")
            hits = ranked[position[qid]]
            negatives = hits[~np.isin(hits, rows)]
            if len(rows) and len(negatives):
                examples.append({"qid": qid, "query": text, "positives": rows, "negatives": negatives})
        found.append(examples)
    return found


def examples_key(examples: list[dict]) -> str:
    """Digest of examples by id or by row (numbers hashed as bytes: a JSON dump of MS MARCO's would take minutes)."""
    h = hashlib.sha256()
    for e in examples:
        h.update(json.dumps([e["qid"], e["query"]]).encode())
        for docs in (e["positives"], e["negatives"]):
            h.update(np.asarray(docs, dtype=np.int64).tobytes() if isinstance(docs, np.ndarray)
                     else json.dumps(list(docs)).encode())
    return h.hexdigest()[:16]


def draw(example: dict, rng, negatives: int = 1) -> tuple[str, ...]:
    """(relevant, negative, ...) passage ids for one query: `negatives` distinct negatives where the query
    has that many, else drawn with repeats."""
    positive = example["positives"][int(rng.integers(len(example["positives"])))]
    pool = example["negatives"]
    picked = rng.choice(len(pool), size=negatives, replace=len(pool) < negatives)
    return (positive, *(pool[int(i)] for i in picked))


def start(source, settings: CrossEncoder, seed: int):
    """The model and tokenizer to train from `source`: an encoder folder (the MLM encoder; the head is new)
    or hub name, or a cross-encoder to continue."""
    torch.manual_seed(seed)   # the new head's (and pooler's) initial weights
    return load(source, num_labels=settings.num_labels)


def save(model, tokenizer, folder) -> None:
    model.cpu().save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def train(model, tokenizer, examples: list[dict], valid: list[dict], passages: dict[str, str], settings: CrossEncoder,
          run: loop.Run, start_key: str) -> dict:
    """examples: training_examples() with `passages` doc id -> text, or examples_by_row() with `passages` the
    CandidateTexts they index; the model from start(), named by `start_key`."""
    model = model.to(loop.device())
    max_length = usable_length(model, settings.max_length)

    listwise = settings.loss == "listwise"
    negatives = settings.group_size - 1

    def batch_loss(rows: list[dict], picks: list[tuple[str, ...]]) -> torch.Tensor:
        group = 1 + negatives   # row-major: each query's passages side by side, the relevant one first
        queries = [r["query"] for r in rows for _ in range(group)]
        docs = [passages[p] for pick in picks for p in pick]
        logits = model(**tokenize_pairs(tokenizer, queries, docs, max_length, loop.device())).logits
        scores = relevance(logits.float()).view(len(rows), group)
        if listwise:
            return torch.nn.functional.cross_entropy(scores, torch.zeros(len(rows), dtype=torch.long, device=scores.device))
        labels = torch.zeros_like(scores)
        labels[:, 0] = 1.0
        return torch.nn.functional.binary_cross_entropy_with_logits(scores, labels)

    def loss_fn(step: int) -> torch.Tensor:
        rng = np.random.default_rng([run.seed, step])
        chosen = rng.choice(len(examples), size=min(settings.batch_size, len(examples)), replace=False)
        rows = [examples[i] for i in chosen]
        return batch_loss(*distributed.mine(rows, [draw(r, rng, negatives) for r in rows]))

    valid_rng = np.random.default_rng([run.seed, VALID_STREAM])
    valid_picks = [draw(r, valid_rng, negatives) for r in valid]

    def validate(step: int) -> dict:
        return loop.fixed_draw_valid_loss(batch_loss, valid, valid_picks, settings.batch_size)

    identity = {"train": {**settings.as_dict(), "max_length": max_length}, "seed": run.seed, "start": start_key,
                "examples": examples_key(examples), "valid": examples_key(valid),
                "candidates": getattr(passages, "key", None)}
    report = loop.run(model, loss_fn, settings, run, identity=identity, on_checkpoint=validate, desc="cross-encoder")
    report.update(train_queries=len(examples), valid_queries=len(valid), max_length=max_length,
                  num_labels=model.config.num_labels)
    return report
