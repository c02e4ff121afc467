"""Margin training with cosine distance over (q, p, n) or (q, p, n, hn): Three-T Emb and Three-T BERT
(triplets) and QuadrupletBERT (quadruplets, eq. 3).

Each step draws its questions, a gold sentence p, a random non-gold candidate n and, with mined
candidate lists, a hard negative hn from the question's list, all from (seed, step)."""
from __future__ import annotations

import numpy as np
import torch

from .losses import quadruplet
from ..modeling.models import TwoTower, doc_input
from ..modeling.tokens import tokenize_docs, tokenize_queries
from .settings import Margin
from . import distributed, loop

VALID_STREAM = 7_777_777   # the validation draws' own seed stream, fixed across checkpoints
VALID_CHUNK = 256          # texts a forward pass when validating


def random_negative(rng, count: int, positives: set[int]) -> int:
    while True:
        pick = int(rng.integers(count))
        if pick not in positives:
            return pick


def draw(example: dict, rng, count: int, mined: dict | None) -> tuple[int, int, int | None]:
    """(positive, negative, hard negative) candidate indices for one question."""
    positives = example["positives"]
    p = positives[int(rng.integers(len(positives)))]
    n = random_negative(rng, count, set(positives))
    if mined is None:
        return p, n, None
    pool = mined.get(example["qid"]) or []
    # a question whose list is empty (all gold) gets a second random negative
    hn = pool[int(rng.integers(len(pool)))] if pool else random_negative(rng, count, set(positives) | {n})
    return p, n, hn


def validation_grid(example: dict, rng, count: int, mined: dict | None, negatives: int) -> tuple[list, list, list | None]:
    """One validation question's fixed draw: every positive, `negatives` random non-gold candidates and, with mined
    lists, as many hard negatives from its list (without repeats where the list is long enough)."""
    positives = example["positives"]
    gold = set(positives)
    randoms = [random_negative(rng, count, gold) for _ in range(negatives)]
    if mined is None:
        return positives, randoms, None
    pool = mined.get(example["qid"]) or []
    if not pool:   # as in training: a question whose list is empty gets random ones instead
        return positives, randoms, [random_negative(rng, count, gold) for _ in range(negatives)]
    picks = rng.choice(len(pool), size=negatives, replace=len(pool) < negatives)
    return positives, randoms, [pool[int(i)] for i in picks]


def grid_valid_loss(queries: torch.Tensor, docs: torch.Tensor, grids: list[tuple], margin: float) -> float:
    """The mean over questions of each question's mean eq. 3 loss over every (positive, negative, hard negative)
    of its grid: `queries` [questions, dim], `docs` rows indexed by the grids' entries."""
    per_question = []
    for row, (positives, negatives, hard) in enumerate(grids):
        parts = [torch.tensor(positives), torch.tensor(negatives)] + ([torch.tensor(hard)] if hard is not None else [])
        combos = torch.cartesian_prod(*parts).reshape(-1, len(parts))
        q = queries[row].expand(len(combos), -1)
        hn = docs[combos[:, 2]] if hard is not None else None
        per_question.append(float(quadruplet(q, docs[combos[:, 0]], docs[combos[:, 1]], hn, margin, "mean")))
    return sum(per_question) / len(per_question)


def train(model: TwoTower, tokenizer, examples: list[dict], valid: list[dict], candidates: list[dict],
          settings: Margin, run: loop.Run, start_key: str, mined: dict[str, list[int]] | None = None) -> dict:
    """examples: {'qid', 'query', 'positives': [candidate indices]}; mined: qid -> candidate indices
    (gold excluded). The towers start from an encoder folder or a saved model (phase 2): `start_key`."""
    model_cfg = model.config
    model = model.to(loop.device())
    docs = [doc_input(c, model_cfg["doc_text"]) for c in candidates]

    def batch_loss(rows: list[dict], picks: list[tuple]) -> torch.Tensor:
        q = model.query(**tokenize_queries(tokenizer, [r["query"] for r in rows], model_cfg["query_length"]))
        hard = mined is not None
        texts = [docs[p] for p, _, _ in picks] + [docs[n] for _, n, _ in picks]
        texts += [docs[h] for _, _, h in picks] if hard else []
        d = model.doc(**tokenize_docs(tokenizer, texts, model_cfg["doc_length"]))
        k = len(rows)
        return quadruplet(q, d[:k], d[k:2 * k], d[2 * k:] if hard else None, settings.margin, settings.reduction)

    def loss_fn(step: int) -> torch.Tensor:
        rng = np.random.default_rng([run.seed, step])
        chosen = rng.choice(len(examples), size=min(settings.batch_size, len(examples)), replace=False)
        rows = [examples[i] for i in chosen]
        loss = batch_loss(*distributed.mine(rows, [draw(r, rng, len(docs), mined) for r in rows]))
        # a sum over this process's share: times the processes, so averaging gradients gives the batch's sum
        return loss * distributed.world() if settings.reduction == "sum" else loss

    valid_rng = np.random.default_rng([run.seed, VALID_STREAM])
    if settings.valid_negatives:
        grids = [validation_grid(r, valid_rng, len(docs), mined, settings.valid_negatives) for r in valid]
        # each candidate of any grid encoded once a check; the grids index into these rows
        valid_ids = sorted({i for grid in grids for part in grid if part is not None for i in part})
        row_of = {i: j for j, i in enumerate(valid_ids)}
        grids = [tuple([row_of[i] for i in part] if part is not None else None for part in grid) for grid in grids]
    else:
        valid_picks = [draw(r, valid_rng, len(docs), mined) for r in valid]

    def encode(tower, tokenize, texts: list, length: int) -> torch.Tensor:
        return torch.cat([tower(**tokenize(tokenizer, texts[i:i + VALID_CHUNK], length))
                          for i in range(0, len(texts), VALID_CHUNK)])

    def validate(step: int) -> dict:
        if not valid:
            return {}
        if not settings.valid_negatives:
            return loop.fixed_draw_valid_loss(batch_loss, valid, valid_picks, settings.batch_size)
        with torch.no_grad():
            queries = encode(model.query, tokenize_queries, [r["query"] for r in valid], model_cfg["query_length"])
            rows = encode(model.doc, tokenize_docs, [docs[i] for i in valid_ids], model_cfg["doc_length"])
        return {"valid_loss": round(grid_valid_loss(queries, rows, grids, settings.margin), 5)}

    identity = {"model": model_cfg, "train": settings.as_dict(), "seed": run.seed, "examples": loop.fingerprint(examples),
                "mined": loop.fingerprint(mined), "start": start_key}
    report = loop.run(model, loss_fn, settings, run, identity=identity, on_checkpoint=validate,
                      patience=settings.patience, desc="hard" if mined is not None else "triplet")
    report.update(train_questions=len(examples), valid_questions=len(valid), hard_negatives=mined is not None)
    return report
