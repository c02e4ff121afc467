"""A BERT cross-encoder (query as segment A, passage as segment B, relevance from the [CLS] head) that
reranks the top of a first-stage run: RepBERT sec. 4.4 reranks with Nogueira and Cho's BERT Large
(castorini/monobert-large-msmarco on the hub, a 2-label BertForSequenceClassification).

Relevance is the log-odds of "relevant": the logit of a 1-label head, logit 1 - logit 0 of a 2-label
head (the softmax probability of label 1 is sigmoid of that difference, so both rank alike; the
difference does not saturate at 1.0 as a float32 probability does, which would tie top passages).

Training it: training/cross_encoder.py.

Reranking at several depths scores each (query, passage) once: the deepest reranking of a run holds the
cross-encoder's score of every passage a shallower one needs (`rerank_from_scores`)."""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from ..io import StageError
from ..modeling.tokens import to_bucket
from ..runtime import device


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
    return {k: v.to(dev) for k, v in to_bucket(batch, tokenizer).items()}


AHEAD_PAIRS = 16384   # pairs tokenised at once, before their batches are scored


def plan_batches(lengths, batch_size: int, groups: list | None = None) -> list[np.ndarray]:
    """Indices of each batch, longest first (less padding). With `groups` (a key per item, e.g. its query) a batch
    never holds two groups, so a group's batches, and so its scores, are the same whichever other groups are
    scored beside it (reranking split by query shards gives the unsplit run byte for byte)."""
    lengths = np.asarray(lengths)
    if groups is None:
        order = np.argsort(-lengths, kind="stable")
        return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]
    members: dict = {}
    for i, key in enumerate(groups):
        members.setdefault(key, []).append(i)
    batches = []
    for idx in members.values():
        idx = np.asarray(idx)
        idx = idx[np.argsort(-lengths[idx], kind="stable")]
        batches += [idx[start:start + batch_size] for start in range(0, len(idx), batch_size)]
    return batches


def blocks_of(batches: list[np.ndarray], size: int) -> list[list[np.ndarray]]:
    """Consecutive batches in blocks of at most `size` items (a batch larger than that alone)."""
    blocks, current, count = [], [], 0
    for batch in batches:
        if current and count + len(batch) > size:
            blocks.append(current)
            current, count = [], 0
        current.append(batch)
        count += len(batch)
    return blocks + [current] if current else blocks


@torch.no_grad()
def score_pairs(model, tokenizer, pairs: list[tuple[str, str]], max_length: int, batch_size: int,
                desc: str | None = "rerank", ahead: bool | None = None, groups: list | None = None) -> np.ndarray:
    """Relevance of each (query, passage), batched longest first (less padding; within each of `groups`, see
    plan_batches), in input order. The pairs are tokenised AHEAD_PAIRS at a time before their batches, each batch
    then one gather (tokens.Tokenised: the tensors the tokenizer's padded call gives). `ahead` (default: on a
    GPU) tokenises the next block in a thread while this one is scored, copies batches without waiting and keeps
    the scores on the device until the block ends."""
    from tqdm import tqdm

    from ..modeling.tokens import Tokenised

    dev = device()
    model = model.to(dev).eval()
    batches = plan_batches([len(q) + len(p) for q, p in pairs], batch_size, groups)
    out = np.zeros(len(pairs), dtype=np.float64)
    use_amp = dev.type == "cuda"
    ahead = use_amp if ahead is None else ahead
    bar = tqdm(total=len(batches), desc=desc, unit="batch", mininterval=5, disable=desc is None)

    def score(batch: dict) -> torch.Tensor:
        batch = {k: v.to(dev, non_blocking=True) for k, v in to_bucket(batch, tokenizer).items()}
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
            logits = model(**batch).logits
        bar.update(1)
        return relevance(logits.float())

    if not Tokenised.fits(tokenizer, pairs, "doc"):   # a tokenizer that pads otherwise: batch by batch
        for idx in batches:
            out[idx] = score(tokenize_pairs(tokenizer, [pairs[i][0] for i in idx], [pairs[i][1] for i in idx],
                                            max_length, "cpu")).cpu().numpy()
        bar.close()
        return out
    # whole batches a block: the same batches as one block
    blocks = blocks_of(batches, max(batch_size, AHEAD_PAIRS // batch_size * batch_size))

    def tokenised(block: list[np.ndarray]) -> Tokenised:
        return Tokenised(tokenizer, [pairs[i] for i in np.concatenate(block)], "doc", max_length)

    with ThreadPoolExecutor(max_workers=1) if ahead else contextlib.nullcontext() as pool:
        pending = pool.submit(tokenised, blocks[0]) if ahead and blocks else None
        for number, block in enumerate(blocks):
            tokens = pending.result() if ahead else tokenised(block)
            if ahead and number + 1 < len(blocks):
                pending = pool.submit(tokenised, blocks[number + 1])
            starts = np.cumsum([0] + [len(batch) for batch in block])
            scores = [score(tokens.batch(np.arange(first, last), pin=use_amp)) for first, last in zip(starts, starts[1:])]
            out[np.concatenate(block)] = torch.cat(scores).cpu().numpy()   # one wait for the device a block
    bar.close()
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
    # batched query by query: a query's scores do not depend on which queries share its job (rerank --shard)
    scores = score_pairs(model, tokenizer, [(queries[q], passages[d]) for q, d in pairs], max_length, batch_size,
                         groups=[qid for qid, _ in pairs])
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
