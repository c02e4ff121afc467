"""Encode texts with one tower into float32 embeddings, batching by token length.

Sorting by length before batching means each batch pads only to its own longest text; the
embeddings are put back in input order. A corpus is encoded in chunks of SORT_CHUNK texts, each
sorted on its own (`encode_corpus`), so memory does not grow with the corpus. While one chunk's forward passes
run on a GPU, the next is read and tokenised in a background thread (`overlaps`), and within a chunk the next
batch is padded while one runs (`forward`), so the GPU does not wait."""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Callable, Iterable

import numpy as np
import torch
from tqdm import tqdm

from ..io import StageError, atomic_open
from ..modeling.models import prepare_texts
from ..modeling.tokens import Tokenised, cached_tokens, tokenize_docs, tokenize_queries, with_segment
from ..runtime import device
from .matrix import NpyWriter, first_nonfinite

SORT_CHUNK = 65536    # texts sorted by length together; a corpus up to this size is sorted as one
KEPT_ROWS = 65536     # vectors kept on a GPU before one copy back (200 MB at 768 dimensions)


def length_order(lengths: list[int]) -> np.ndarray:
    return np.argsort(-np.asarray(lengths), kind="stable")


@dataclass
class Prepared:
    """Texts ready for the forward passes: as the tower reads them, their tokens (None: tokenised batch by batch)
    and the order they are batched in."""
    items: list
    tokenised: Tokenised | None
    order: np.ndarray


def prepare(tokenizer, items: list, kind: str, max_length: int, sort_by_length: bool = True, prefix: str = "",
            lowercase: bool = False, cache=None) -> Prepared:
    """The CPU half of `encode`: texts prepared, tokenised once (or read from `cache`, a folder: cached_tokens)
    and ordered by length."""
    items = prepare_texts(items, prefix, lowercase)
    tokenised = cached_tokens(tokenizer, items, kind, max_length, cache) if sort_by_length else None
    order = length_order(tokenised.lengths) if tokenised is not None else np.arange(len(items))
    if not Tokenised.fits(tokenizer, items, kind):
        tokenised = None   # its lengths only: batches tokenised one by one
    return Prepared(items, tokenised, order)


@torch.no_grad()
def encode(tower, tokenizer, items: list, kind: str, max_length: int, batch_size: int,
           sort_by_length: bool = True, desc: str = "encode", segment: int = 0, prefix: str = "",
           lowercase: bool = False) -> np.ndarray:
    """items: query strings (kind='query'), doc strings or (sentence, paragraph) tuples (kind='doc').
    `segment`: the segment id of doc tokens (the model's doc_segment; queries always have 0);
    `prefix`, `lowercase`: a pretrained checkpoint's prompt and casing (models.text_options)."""
    return forward(tower, tokenizer, prepare(tokenizer, items, kind, max_length, sort_by_length, prefix, lowercase),
                   kind, max_length, batch_size, desc, segment)


@torch.no_grad()
def forward(tower, tokenizer, prepared: Prepared, kind: str, max_length: int, batch_size: int,
            desc: str | None = "encode", segment: int = 0, ahead: bool | None = None,
            into: np.ndarray | None = None) -> np.ndarray:
    """The device half of `encode`: the tower over `prepared`, a batch at a time, rows back in input order.
    `ahead` (default: on a GPU) keeps the host ahead of the device: a thread pads the next batch (in page-locked
    memory on a GPU, copied without waiting) while this one runs, and the vectors stay on the device, copied back
    KEPT_ROWS at a time, not batch by batch (each copy back waits for the device). The same vectors either way.
    `into`: a float32 matrix of at least as many rows, of the vectors' width, whose first rows are written and returned
    (encode_corpus's, chunk after chunk: fresh memory is faulted in a page at a time, about 0.3 s a chunk of 65,536
    rows on the 2-core machine, more than padding them)."""
    items, tokenised, order = prepared.items, prepared.tokenised, prepared.order
    dev = device()
    tower = tower.to(dev).eval()
    use_amp = dev.type == "cuda"
    ahead = use_amp if ahead is None else ahead
    starts = range(0, len(items), batch_size)

    def host_batch(start: int) -> tuple[np.ndarray, dict]:
        idx = order[start:start + batch_size]
        if tokenised is not None:
            return idx, tokenised.batch(idx, pin=use_amp)
        chunk = [items[i] for i in idx]
        return idx, (tokenize_queries(tokenizer, chunk, max_length, "cpu") if kind == "query"
                     else tokenize_docs(tokenizer, chunk, max_length, "cpu", segment))

    out = None   # sized by the first batch: the head (linear, MLP or none) decides the width
    kept, kept_from = None, 0   # with `ahead`: vectors of rows order[kept_from:] not yet copied back, in batch order
    # one worker: batches are padded in order; the device works on one while the next is padded
    with ThreadPoolExecutor(max_workers=1) if ahead else contextlib.nullcontext() as pool:
        pending = pool.submit(host_batch, 0) if ahead and starts else None
        for start in tqdm(starts, desc=desc, unit="batch", mininterval=5, disable=desc is None):
            idx, batch = pending.result() if ahead else host_batch(start)
            if ahead and start + batch_size < len(items):
                pending = pool.submit(host_batch, start + batch_size)
            batch = {key: value.to(dev, non_blocking=True) for key, value in batch.items()}
            if tokenised is not None and kind != "query":
                batch = with_segment(batch, segment)
            # no weight cache: autocast keys its cache by weight, not dtype, so fp16 copies cached by a refresh
            # inside a bf16 training step (ANCE's) would be handed back to that step's forward
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp, cache_enabled=False):
                vectors = tower(**batch).float()
            if out is None:   # every row is written
                fits = into is not None and into.shape[1:] == vectors.shape[1:] and len(into) >= len(items)
                out = into[:len(items)] if fits else np.empty((len(items), vectors.shape[1]), dtype=np.float32)
            if not ahead:
                out[idx] = vectors.cpu().numpy()
                continue
            if kept is None:   # whole batches between copies back
                window = max(batch_size, KEPT_ROWS // batch_size * batch_size)
                kept = torch.empty((min(window, len(items)), vectors.shape[1]), dtype=torch.float32,
                                   device=vectors.device)
            kept[start - kept_from:start - kept_from + len(idx)] = vectors
            done = start + len(idx)
            if done - kept_from == len(kept) or done == len(items):
                out[order[kept_from:done]] = kept[:done - kept_from].cpu().numpy()
                kept_from = done
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def overlaps() -> bool:
    """Whether to tokenise the next chunk beside the forward passes: on a GPU only. On the CPU the thread takes
    turns with torch and with the jobs beside it (2 cores, a job a core): paired runs were no faster, often slower
    (benchmarks/encode_overlap.py, benchmarks/results.json `encode_overlap`)."""
    return device().type == "cuda"


def shard_range(count: int, shard: int, shards: int) -> tuple[int, int]:
    """[start, stop) of part `shard` of `count` items cut into `shards` near-equal contiguous parts."""
    if shards < 1 or not 0 <= shard < shards:
        raise StageError("--shard", f"must be in 0..{shards - 1} (--shards {shards}), not {shard}")
    return count * shard // shards, count * (shard + 1) // shards


def encode_corpus(tower, tokenizer, rows: Iterable[dict], count: int, doc_of: Callable[[dict], object],
                  embeddings_path, ids_path, max_length: int, batch_size: int, chunk: int = SORT_CHUNK,
                  overlap: bool | None = None, desc: str | None = "encode", segment: int = 0, **options) -> int:
    """Encode `count` candidate rows (streamed) with a doc tower, `chunk` at a time, appending each chunk's
    embeddings to the .npy at `embeddings_path` and its ids to `ids_path` (both written atomically).
    `doc_of` gives what the tower reads of a row; `options` go to `prepare` (sort_by_length, prefix, lowercase,
    cache).
    `overlap` (default: `overlaps()`): the next chunk is read and tokenised in a background thread meanwhile;
    the chunks and their batches are the same either way, so are the bytes. Returns the width."""
    if count < 1:
        raise StageError(embeddings_path, "no candidates to encode")
    rows = iter(rows)

    def next_chunk() -> tuple[list, Prepared | None]:
        part = list(islice(rows, chunk))
        return part, prepare(tokenizer, [doc_of(row) for row in part], "doc", max_length, **options) if part else None

    overlap = overlaps() if overlap is None else overlap
    # one worker: chunks are read in order, and the rows iterator is only ever read by one thread at a time
    with ThreadPoolExecutor(max_workers=1) as pool, NpyWriter(embeddings_path, count) as matrix, \
            atomic_open(ids_path) as ids:
        pending = pool.submit(next_chunk) if overlap else None
        vectors = None   # the last chunk's, written: its memory takes the next chunk's
        while True:
            part, prepared = pending.result() if overlap else next_chunk()
            if not part:
                break
            if overlap:
                pending = pool.submit(next_chunk)
            vectors = forward(tower, tokenizer, prepared, "doc", max_length, batch_size, desc, segment, into=vectors)
            bad = first_nonfinite(vectors)
            if bad is not None:   # written, it would silently drop out of every ranking
                raise StageError(embeddings_path, f"the embedding of candidate {part[bad]['id']} (row "
                                                  f"{matrix.written + bad}) holds NaN or inf: the model gives no "
                                                  f"usable vector for it")
            matrix.append(vectors)
            ids.writelines(f"{row['id']}\n" for row in part)
    return matrix.width
