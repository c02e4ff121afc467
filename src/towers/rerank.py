"""A BERT cross-encoder (query as segment A, passage as segment B, relevance from the [CLS] head) that
reranks the top of a first-stage run: RepBERT sec. 4.4 reranks with Nogueira and Cho's BERT Large
(castorini/monobert-large-msmarco on the hub, a 2-label BertForSequenceClassification).

Relevance is the log-odds of "relevant": the logit of a 1-label head, logit 1 - logit 0 of a 2-label
head (the softmax probability of label 1 is sigmoid of that difference, so both rank alike; the
difference does not saturate at 1.0 as a float32 probability does, which would tie top passages).

Training (`train`) draws B training queries per step from (seed, step), for each one relevant passage
and negatives drawn from the query's top-k of a first-stage run with the relevant passages removed (how
MS MARCO's training triples were made from BM25). loss "pointwise" is monoBERT's: one negative per
query, binary cross-entropy on the relevance logit (for a 2-label head exactly the 2-class softmax
cross-entropy). loss "listwise" scores the relevant passage against `group_size - 1` negatives of the
same query and takes the softmax cross-entropy of the group (Gao et al. 2021's localized contrastive
estimation): every step compares passages of one query, which a small model learns from faster.

Reranking at several depths scores each (query, passage) once: the deepest reranking of a run holds the
cross-encoder's score of every passage a shallower one needs (`rerank_from_scores`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .io import StageError
from .training import distributed, loop

VALID_STREAM = 7_777_777   # the validation draws' own seed stream, fixed across checkpoints


def relevance(logits: torch.Tensor) -> torch.Tensor:
    """Log-odds of relevance from a 1-logit or 2-logit head."""
    if logits.shape[-1] == 1:
        return logits[:, 0]
    if logits.shape[-1] == 2:
        return logits[:, 1] - logits[:, 0]
    raise ValueError(f"a cross-encoder head has 1 or 2 labels, not {logits.shape[-1]}")


def first_line(err: Exception) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def load(model_name, tokenizer_name=None, num_labels: int | None = None):
    """A sequence-pair classifier and its tokenizer from a folder or a hub name (one-line error if not).
    `num_labels` is given when a new head starts on a plain encoder (training)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    extra = {"num_labels": num_labels} if num_labels else {}
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(model_name), **extra)
    except (OSError, ValueError, KeyError, RuntimeError) as err:   # RuntimeError: a head of another size
        raise StageError(model_name, f"cannot load a sequence classifier ({first_line(err)})") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_name or model_name))
    except (OSError, ValueError, KeyError) as err:
        raise StageError(tokenizer_name or model_name, f"cannot load the tokenizer ({first_line(err)})") from None
    if model.config.num_labels not in (1, 2):
        raise StageError(model_name, f"a cross-encoder head has 1 or 2 labels, not {model.config.num_labels}")
    return model, tokenizer


def usable_length(model, max_length: int) -> int:
    """`max_length`, cut to what the model's position embeddings allow."""
    return min(max_length, getattr(model.config, "max_position_embeddings", max_length))


def tokenize_pairs(tokenizer, queries: list[str], passages: list[str], max_length: int, dev):
    """Query as segment A, passage as segment B: [CLS] q [SEP] p [SEP], the longer one truncated first."""
    batch = tokenizer(queries, passages, max_length=max_length, truncation="longest_first", padding=True,
                      return_tensors="pt")
    return {k: v.to(dev) for k, v in batch.items()}


@torch.no_grad()
def score_pairs(model, tokenizer, pairs: list[tuple[str, str]], max_length: int, batch_size: int,
                desc: str = "rerank") -> np.ndarray:
    """Relevance of each (query, passage), batched longest first (less padding), in input order."""
    from tqdm import tqdm

    dev = loop.device()
    model = model.to(dev).eval()
    order = np.argsort(-np.asarray([len(q) + len(p) for q, p in pairs]), kind="stable")
    out = np.zeros(len(pairs), dtype=np.float64)
    use_amp = dev.type == "cuda"
    for start in tqdm(range(0, len(pairs), batch_size), desc=desc, unit="batch", mininterval=5):
        idx = order[start:start + batch_size]
        batch = tokenize_pairs(tokenizer, [pairs[i][0] for i in idx], [pairs[i][1] for i in idx], max_length, dev)
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
            logits = model(**batch).logits
        out[idx] = relevance(logits.float()).cpu().numpy()
    return out


def reorder(tops: dict[str, list[tuple[str, float]]], score) -> dict[str, list[tuple[str, float]]]:
    """Each query's documents sorted by score(qid, doc), highest first; ties keep the run's order."""
    return {qid: sorted(((doc, score(qid, doc)) for doc, _ in top), key=lambda pair: -pair[1])
            for qid, top in tops.items()}


def rerank(run: dict[str, list[tuple[str, float]]], queries: dict[str, str], passages: dict[str, str], model,
           tokenizer, depth: int, max_length: int, batch_size: int) -> dict[str, list[tuple[str, float]]]:
    """Each query's top-`depth` of `run`, reordered by the cross-encoder; what lies below `depth` is dropped."""
    tops = {qid: ranked[:depth] for qid, ranked in run.items()}
    pairs = [(qid, doc) for qid, top in tops.items() for doc, _ in top]
    scores = score_pairs(model, tokenizer, [(queries[q], passages[d]) for q, d in pairs], max_length, batch_size)
    by_pair = dict(zip(pairs, scores.tolist()))
    return reorder(tops, lambda qid, doc: by_pair[(qid, doc)])


def rerank_from_scores(run: dict, scored: dict, depth: int, run_path, scores_path) -> dict:
    """rerank() at `depth` with the cross-encoder scores of a deeper reranking of the same run (`scored`,
    a run as read_run gives); a top-`depth` passage it did not score is an error, not a guess."""
    lookup = {qid: dict(ranked) for qid, ranked in scored.items()}
    tops = {qid: ranked[:depth] for qid, ranked in run.items()}
    for qid, top in tops.items():
        missing = [doc for doc, _ in top if doc not in lookup.get(qid, {})]
        if missing:
            raise StageError(scores_path, f"query {qid}: no score for {missing[0]} of {run_path}'s top {depth} "
                                          f"(rerank --scores needs a deeper reranking of the same run)")
    return reorder(tops, lambda qid, doc: lookup[qid][doc])


def check_run(run: dict, queries: dict, passages: dict, run_path, queries_path, candidates_path) -> None:
    """Every query of the run has a text and every document of it a passage."""
    for qid, ranked in run.items():
        if qid not in queries:
            raise StageError(run_path, f"query {qid} is not in {queries_path}")
        for doc, _ in ranked:
            if doc not in passages:
                raise StageError(run_path, f"query {qid}: document {doc} is not in {candidates_path}")


def training_examples(queries: dict[str, str], qrels: dict, run: dict, depth: int) -> list[dict]:
    """A split's queries with their relevant passages and the non-relevant passages of their run's
    top-`depth` (the negatives); a query with either list empty is left out."""
    examples = []
    for qid, text in queries.items():
        positives = sorted(d for d, rel in qrels.get(qid, {}).items() if rel > 0)
        negatives = [d for d, _ in run.get(qid, [])[:depth] if qrels.get(qid, {}).get(d, 0) <= 0]
        if positives and negatives:
            examples.append({"qid": qid, "query": text, "positives": positives, "negatives": negatives})
    return examples


def draw(example: dict, rng, negatives: int = 1) -> tuple[str, ...]:
    """(relevant, negative, ...) passage ids for one query: `negatives` distinct negatives where the query
    has that many, else drawn with repeats."""
    positive = example["positives"][int(rng.integers(len(example["positives"])))]
    pool = example["negatives"]
    picked = rng.choice(len(pool), size=negatives, replace=len(pool) < negatives)
    return (positive, *(pool[int(i)] for i in picked))


def train(examples: list[dict], valid: list[dict], passages: dict[str, str], start, out_dir, state_dir,
          train_cfg: dict, seed: int, log_path=None, stop_after_step=None) -> dict:
    """examples: training_examples(); passages: doc id -> text. `start`: an encoder folder (the MLM
    encoder; the head is new) or hub name, or a cross-encoder to continue."""
    torch.manual_seed(seed)   # the new head's (and pooler's) initial weights
    model, tokenizer = load(start, num_labels=train_cfg["num_labels"])
    model = model.to(loop.device())
    max_length = usable_length(model, train_cfg["max_length"])

    listwise = train_cfg["loss"] == "listwise"
    negatives = train_cfg["group_size"] - 1 if listwise else 1

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
        rng = np.random.default_rng([seed, step])
        chosen = rng.choice(len(examples), size=min(train_cfg["batch_size"], len(examples)), replace=False)
        rows = [examples[i] for i in chosen]
        return batch_loss(*distributed.mine(rows, [draw(r, rng, negatives) for r in rows]))

    valid_rng = np.random.default_rng([seed, VALID_STREAM])
    valid_picks = [draw(r, valid_rng, negatives) for r in valid]

    def validate(step: int) -> dict:
        return loop.fixed_draw_valid_loss(batch_loss, valid, valid_picks, train_cfg["batch_size"])

    start_key = loop.folder_digest(start) if Path(start).is_dir() else str(start)
    settings = {"train": {**train_cfg, "max_length": max_length}, "seed": seed, "start": start_key,
                "examples": loop.fingerprint(examples), "valid": loop.fingerprint(valid)}
    report = loop.run(model, loss_fn, steps=train_cfg["steps"], lr=train_cfg["lr"],
                      warmup_ratio=train_cfg["warmup_ratio"], seed=seed, state_dir=state_dir,
                      checkpoint_every=train_cfg["checkpoint_every"], settings=settings, log_path=log_path,
                      on_checkpoint=validate, stop_after_step=stop_after_step, desc="cross-encoder")
    model.cpu().save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report.update(train_queries=len(examples), valid_queries=len(valid), max_length=max_length,
                  num_labels=model.config.num_labels)
    return report
