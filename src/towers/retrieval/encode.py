"""Encode texts with one tower into float32 embeddings, batching by token length.

Sorting by length before batching means each batch pads only to its own longest text; the
embeddings are put back in input order. A corpus is encoded in chunks of SORT_CHUNK texts, each
sorted on its own (`encode_corpus`), so memory does not grow with the corpus. While one chunk's forward passes
run on a GPU, the next is read and tokenised in a background thread (`overlaps`), and within a chunk the next
batch is padded while one runs (`forward`), so the GPU does not wait."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch
from tqdm import tqdm

from ..io import StageError, atomic_open, atomic_path
from ..models import (pad_ids_of, prepare_texts, tokenize_docs, tokenize_queries, tokenize_unpadded,
                      with_segment)
from ..runtime import device
from .matrix import NpyWriter, first_nonfinite

SORT_CHUNK = 65536    # texts sorted by length together; a corpus up to this size is sorted as one
LENGTH_STEP = 4096    # texts tokenised at once for the length pass (~20 KB of token lists a passage)
KEPT_ROWS = 65536     # vectors kept on a GPU before one copy back (200 MB at 768 dimensions)
TOKEN_CACHE = "TOWERS_TOKEN_CACHE"   # "off": every encoding tokenises its corpus itself (see cached_tokens)


def length_order(lengths: list[int]) -> np.ndarray:
    return np.argsort(-np.asarray(lengths), kind="stable")


def _are_pairs(items: list, kind: str) -> bool:
    return kind != "query" and bool(items) and not isinstance(items[0], str)


def token_lengths(tokenizer, items: list, kind: str, max_length: int, step: int = LENGTH_STEP) -> np.ndarray:
    """Each item's token count after truncation, tokenised `step` items at a time: a text's tokens do not
    depend on its neighbours, and the token lists of a whole corpus would not fit in memory."""
    return Tokenised(tokenizer, items, kind, max_length, step).lengths


CACHE_FIELDS = ("key", "digest", "lengths")   # what a token cache file holds beside the tokenizer's columns


class UnusableTokens(Exception):
    """A token cache file that is not what it claims to be (the message says how): it is made again."""


def ids_digest(lengths: np.ndarray, columns: dict) -> str:
    """A digest of the cached arrays' names, types and bytes: ids edited in place, or moved between passages, no
    longer match it. About 26 ms for 65,536 passages of 60 tokens (47 MB), beside about 12 s to tokenise them."""
    h = hashlib.sha256()   # faster than blake2b here (SHA extensions)
    for name, array in (("lengths", lengths), *sorted(columns.items())):
        h.update(f"{name}:{array.dtype.str}:{array.size}\0".encode())
        h.update(np.ascontiguousarray(array).data)
    return h.hexdigest()


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
    def load(cls, path, key: str, pad_ids: dict, count: int, names: set, vocab_size: int) -> "Tokenised":
        """The ids `save` wrote under `key` for `count` items, checked against what the file claims: arrays `names`
        (the tokenizer's columns) and no others, `key` itself stored in it, ids within [0, vocab_size), lengths that
        cut the columns, and the digest `save` stored over them (an edit with every shape kept shows only there).
        UnusableTokens, saying what is wrong, otherwise."""
        try:
            with np.load(path) as saved:
                arrays = {name: saved[name] for name in saved.files}
        except (OSError, ValueError, EOFError, KeyError, TypeError, AttributeError, zipfile.BadZipFile,
                zlib.error) as err:
            raise UnusableTokens(f"not a readable .npz of token ids ({type(err).__name__}), truncated or "
                                 f"damaged") from None
        expected = names | set(CACHE_FIELDS)
        if set(arrays) != expected:
            missing, extra = sorted(expected - set(arrays)), sorted(set(arrays) - expected)
            raise UnusableTokens(", ".join([f"lacks {', '.join(missing)}"] * bool(missing)
                                           + [f"holds arrays nothing writes ({', '.join(extra)})"] * bool(extra)))
        stored = arrays.pop("key")
        if stored.shape != () or stored.dtype.kind != "U" or str(stored) != key:
            raise UnusableTokens(f"made for other texts, another tokenizer or another length cut (key "
                                 f"{str(stored)[:40]!r}, not {key!r})")
        digest, lengths = arrays.pop("digest"), arrays.pop("lengths")
        for name, array in (("lengths", lengths), *arrays.items()):
            if array.ndim != 1 or array.dtype.kind not in "iu":
                raise UnusableTokens(f"{name} is not a flat array of integers ({array.dtype}, shape {array.shape})")
        if len(lengths) != count:
            raise UnusableTokens(f"holds {len(lengths)} items' ids, not {count}")
        if count and lengths.min() < 0:
            raise UnusableTokens(f"lengths holds a negative length ({lengths.min()})")
        total = int(lengths.sum())
        for name, array in arrays.items():
            if len(array) != total:
                raise UnusableTokens(f"the lengths add up to {total} tokens, {name} holds {len(array)}")
            if len(array) and array.min() < 0:
                raise UnusableTokens(f"{name} holds a negative id ({array.min()})")
        ids = arrays.get("input_ids", np.zeros(0, dtype=np.int32))
        if len(ids) and ids.max() >= vocab_size:
            raise UnusableTokens(f"input_ids holds {ids.max()}, past the tokenizer's {vocab_size} ids")
        if digest.shape != () or str(digest) != ids_digest(lengths, arrays):
            raise UnusableTokens("the ids do not match the digest stored with them: edited or damaged")
        out = cls.__new__(cls)
        out.pad_ids, out.lengths, out.columns = pad_ids, lengths, arrays
        out.starts = np.concatenate([[0], np.cumsum(lengths)])
        return out

    def save(self, path, key: str) -> None:
        """The ids, with the key they were made for and a digest of them (`load` checks both)."""
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as handle:
                np.savez(handle, key=np.array(key), digest=np.array(ids_digest(self.lengths, self.columns)),
                         lengths=self.lengths, **self.columns)

    def batch(self, idx: np.ndarray, dev=None, pin: bool = False) -> dict:
        """Rows `idx` as the tokenizer pads them, int64, on `dev` (None: in host memory; `pin`: page-locked, for an
        asynchronous copy to a GPU). Each column is one gather (the rows' places in the flat column, found once for
        all columns) into an array filled with its pad id: no Python loop over the rows."""
        lengths = self.lengths[idx]
        places = np.arange(int(lengths.max()) if len(idx) else 0)
        real = places < lengths[:, None]                               # each row's first `length` places
        source = np.minimum(self.starts[idx][:, None] + places, max(int(self.starts[-1]) - 1, 0))   # pads: any id
        out = {}
        for key, flat in self.columns.items():
            padded = torch.empty(real.shape, dtype=torch.int64, pin_memory=pin)
            values = padded.numpy()
            values.fill(self.pad_ids.get(key, 0))
            np.copyto(values, flat.take(source), where=real)
            out[key] = padded if dev is None else padded.to(dev)
        return out


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
    same 17,018 candidates) tokenise it once. Same ids, so the same embeddings. A file that does not hold what
    it claims (Tokenised.load: another key, ids edited, missing or extra arrays, a damaged zip) is named in one
    warning line, removed and made again from the texts (written atomically: concurrent jobs write the same ids)."""
    key = tokens_key(tokenizer, items, kind, max_length)
    if folder is None or key is None or not items:
        return Tokenised(tokenizer, items, kind, max_length)
    path = Path(folder) / f"{key}.npz"
    if path.exists():
        names = set(tokenize_unpadded(tokenizer, items[:1], _are_pairs(items, kind), max_length))   # its columns
        try:
            return Tokenised.load(path, key, pad_ids_of(tokenizer), len(items), names, len(tokenizer))
        except UnusableTokens as problem:
            print(f"warning: {path}: {problem}; removed, the token ids are made again from the texts", file=sys.stderr)
            with contextlib.suppress(OSError):
                path.unlink()
    made = Tokenised(tokenizer, items, kind, max_length)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        made.save(path, key)
    except OSError:   # a read-only or full disk: the encoding goes on without keeping them
        pass
    return made


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
