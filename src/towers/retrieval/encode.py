"""Encode texts with one tower into float32 embeddings, batching by token length.

Sorting by length before batching means each batch pads only to its own longest text; the
embeddings are put back in input order. A corpus is encoded in chunks of SORT_CHUNK texts, each
sorted on its own (`encode_corpus`), so memory does not grow with the corpus. While one chunk's forward passes
run on a GPU, the next is read and tokenised in a background thread (`overlaps`), so the GPU does not wait."""
from __future__ import annotations

import hashlib
import json
import os
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from tqdm import tqdm

from ..io import StageError, atomic_open, atomic_path
from ..models import (pad_ids_of, pad_right, prepare_texts, tokenize_docs, tokenize_queries, tokenize_unpadded,
                      with_segment)
from ..runtime import device
from .matrix import NpyWriter, first_nonfinite

SORT_CHUNK = 65536    # texts sorted by length together; a corpus up to this size is sorted as one
LENGTH_STEP = 4096    # texts tokenised at once for the length pass (~20 KB of token lists a passage)
TOKEN_CACHE = "TOWERS_TOKEN_CACHE"   # "off": every encoding tokenises its corpus itself (see cached_tokens)


def length_order(lengths: list[int]) -> np.ndarray:
    return np.argsort(-np.asarray(lengths), kind="stable")


def _are_pairs(items: list, kind: str) -> bool:
    return kind != "query" and bool(items) and not isinstance(items[0], str)


def token_lengths(tokenizer, items: list, kind: str, max_length: int, step: int = LENGTH_STEP) -> np.ndarray:
    """Each item's token count after truncation, tokenised `step` items at a time: a text's tokens do not
    depend on its neighbours, and the token lists of a whole corpus would not fit in memory."""
    return Tokenised(tokenizer, items, kind, max_length, step).lengths


class Tokenised:
    """Every item's token ids from one pass (`step` items at a time), kept as flat arrays and padded a batch
    at a time as the tokenizer pads (right, pad ids, mask 0): a corpus is tokenised once, not once for its
    lengths and again for its batches (tokenising was a third of an encoding job)."""

    def __init__(self, tokenizer, items: list, kind: str, max_length: int, step: int = LENGTH_STEP):
        pairs = _are_pairs(items, kind)
        self.pad_ids = pad_ids_of(tokenizer)
        columns: dict[str, list[np.ndarray]] = {}
        lengths = []
        for start in range(0, len(items), step):
            part = tokenize_unpadded(tokenizer, items[start:start + step], pairs, max_length)
            lengths.extend(len(one) for one in part["input_ids"])
            for key, rows in part.items():
                columns.setdefault(key, []).append(np.fromiter(chain.from_iterable(rows), dtype=np.int32))
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)])
        self.columns = {key: np.concatenate(parts) for key, parts in columns.items()}

    @staticmethod
    def fits(tokenizer, items: list, kind: str) -> bool:
        """A Hugging Face tokenizer padding on the right, and items all texts or all pairs (a task mixture
        and the bag-of-words hasher are tokenised batch by batch instead)."""
        if getattr(tokenizer, "padding_side", None) != "right" or getattr(tokenizer, "pad_token_id", None) is None:
            return False
        return kind == "query" or len({isinstance(item, str) for item in items}) <= 1

    @classmethod
    def load(cls, path, pad_ids: dict, count: int) -> "Tokenised | None":
        """The arrays `save` wrote, if they are there, readable and hold `count` items (None otherwise)."""
        try:
            with np.load(path) as saved:
                arrays = {key: saved[key] for key in saved.files}
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):   # damaged: tokenised again
            return None
        lengths = arrays.pop("lengths", None)
        if lengths is None or len(lengths) != count or any(len(v) != lengths.sum() for v in arrays.values()):
            return None
        out = cls.__new__(cls)
        out.pad_ids, out.lengths, out.columns = pad_ids, lengths, arrays
        out.starts = np.concatenate([[0], np.cumsum(lengths)])
        return out

    def save(self, path) -> None:
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as handle:
                np.savez(handle, lengths=self.lengths, **self.columns)

    def batch(self, idx: np.ndarray, dev) -> dict:
        return {key: pad_right([flat[self.starts[i]:self.starts[i + 1]] for i in idx], self.pad_ids.get(key, 0)).to(dev)
                for key, flat in self.columns.items()}


@dataclass
class Prepared:
    """Texts ready for the forward passes: as the tower reads them, their tokens (None: tokenised batch by batch)
    and the order they are batched in."""
    items: list
    tokenised: Tokenised | None
    order: np.ndarray


def tokens_key(tokenizer, items: list, kind: str, max_length: int) -> str | None:
    """What a corpus's token ids depend on, digested: the fast tokenizer's full definition (vocabulary,
    normaliser, special tokens), its padding, the texts, their kind and the length cut. None for a tokenizer
    without a serialisable definition (the bag-of-words hasher): nothing is cached for it.
    The definition leaves out the padding and truncation the tokenizer was last called with (a saved tokenizer
    keeps them): every call here sets both, so two models whose training last called it differently share ids."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    definition = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("padding", "truncation")}
    h = hashlib.sha256()
    for part in (json.dumps(definition, sort_keys=True), type(tokenizer).__name__, getattr(tokenizer, "padding_side", ""),
                 repr(pad_ids_of(tokenizer)), kind, str(max_length), str(len(items))):
        h.update(part.encode() + b"\0")
    for item in items:   # repr: a text and a pair of texts never digest alike
        h.update(repr(item).encode() + b"\n")
    return h.hexdigest()[:32]


def cached_tokens(tokenizer, items: list, kind: str, max_length: int, folder) -> Tokenised:
    """Tokenised(items), kept in `folder` under a digest of everything the ids depend on (tokens_key): the
    many models of one collection that share a tokenizer and a length (Chang et al.'s ~80 encodings of the
    same 17,018 candidates) tokenise it once. Same ids, so the same embeddings; a missing, unreadable or
    short file is tokenised again and rewritten (written atomically: concurrent jobs write the same bytes)."""
    key = tokens_key(tokenizer, items, kind, max_length)
    if folder is None or key is None:
        return Tokenised(tokenizer, items, kind, max_length)
    path = Path(folder) / f"{key}.npz"
    found = Tokenised.load(path, pad_ids_of(tokenizer), len(items)) if path.exists() else None
    if found is None:
        found = Tokenised(tokenizer, items, kind, max_length)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            found.save(path)
        except OSError:   # a read-only or full disk: the encoding goes on without keeping them
            pass
    return found


def token_cache(beside) -> Path | None:
    """Where an encoding of the corpus file `beside` keeps its token ids: a hidden folder next to it (never
    shared through DVC: towers.cache), or nowhere when TOWERS_TOKEN_CACHE=off."""
    return None if os.environ.get(TOKEN_CACHE) == "off" else Path(beside).parent / ".tokens"


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
            desc: str | None = "encode", segment: int = 0) -> np.ndarray:
    """The device half of `encode`: the tower over `prepared`, a batch at a time, rows back in input order."""
    items, tokenised, order = prepared.items, prepared.tokenised, prepared.order
    dev = device()
    tower = tower.to(dev).eval()
    out = None   # sized by the first batch: the head (linear, MLP or none) decides the width
    use_amp = dev.type == "cuda"
    for start in tqdm(range(0, len(items), batch_size), desc=desc, unit="batch", mininterval=5, disable=desc is None):
        idx = order[start:start + batch_size]
        if tokenised is not None:
            batch = tokenised.batch(idx, dev)
            if kind != "query":
                batch = with_segment(batch, segment)
        else:
            chunk = [items[i] for i in idx]
            batch = (tokenize_queries(tokenizer, chunk, max_length, dev) if kind == "query"
                     else tokenize_docs(tokenizer, chunk, max_length, dev, segment))
        # no weight cache: autocast keys its cache by weight, not dtype, so fp16 copies cached by a refresh
        # inside a bf16 training step (ANCE's) would be handed back to that step's forward
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp, cache_enabled=False):
            vectors = tower(**batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(items), vectors.shape[1]), dtype=np.float32)
        out[idx] = vectors
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
        while True:
            part, prepared = pending.result() if overlap else next_chunk()
            if not part:
                break
            if overlap:
                pending = pool.submit(next_chunk)
            vectors = forward(tower, tokenizer, prepared, "doc", max_length, batch_size, desc, segment)
            bad = first_nonfinite(vectors)
            if bad is not None:   # written, it would silently drop out of every ranking
                raise StageError(embeddings_path, f"the embedding of candidate {part[bad]['id']} (row "
                                                  f"{matrix.written + bad}) holds NaN or inf: the model gives no "
                                                  f"usable vector for it")
            matrix.append(vectors)
            ids.writelines(f"{row['id']}\n" for row in part)
    return matrix.width
