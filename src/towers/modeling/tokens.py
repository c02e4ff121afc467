"""Token ids for the towers, in one place: tokenise (queries, documents, pairs), pad on the right and to length
buckets, memoise a training run's texts, and keep a corpus's ids (Tokenised) in the token cache that the many
encodings of one collection share."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import zipfile
import zlib
from itertools import chain
from pathlib import Path

import numpy as np
import torch

from ..io import atomic_path
from ..runtime import device

LENGTH_STEP = 4096    # texts tokenised at once for the length pass (~20 KB of token lists a passage)
TOKEN_CACHE = "TOWERS_TOKEN_CACHE"   # "off": every encoding tokenises its corpus itself (see cached_tokens)

# --- tower inputs: token ids of queries and documents, on the device --------------------------------------

_BUCKETS: tuple[int, ...] = ()   # set by `length_buckets` around a training step; () pads to the longest text


@contextlib.contextmanager
def length_buckets(buckets: tuple[int, ...]):
    """Within: batches tokenised here are padded on to the smallest of `buckets` that holds them (settings.Speed),
    so a GPU sees a few shapes again and again. Padding has attention mask 0: the towers' outputs move by rounding."""
    global _BUCKETS
    before, _BUCKETS = _BUCKETS, tuple(sorted(buckets))
    try:
        yield
    finally:
        _BUCKETS = before


def to_bucket(batch, tokenizer):
    """`batch` (a tokenizer's padded tensors) padded on the right to the bucket that holds it; as it is outside
    `length_buckets`, longer than every bucket, or from a tokenizer that does not pad on the right with a pad id."""
    if not _BUCKETS or getattr(tokenizer, "padding_side", None) != "right" or tokenizer.pad_token_id is None:
        return batch
    width = batch["input_ids"].shape[1]
    target = next((b for b in _BUCKETS if b >= width), width)
    if target == width:
        return batch
    pads = {"input_ids": tokenizer.pad_token_id, "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0)}
    return {k: torch.nn.functional.pad(v, (0, target - width), value=pads.get(k, 0)) for k, v in batch.items()}


ENCODING_FIELDS = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}


def tokenize_unpadded(tokenizer, items: list, pairs: bool, max_length: int) -> dict:
    """Token ids of texts (or text pairs, the second text truncated first), unpadded: what tokenize_queries and
    tokenize_docs pad, one list of ids an item in each column. A fast tokenizer's encodings are read from its backend,
    cut as its own call cuts them (the columns its call returns): the same lists, without the call's conversion of
    each item, a third of a corpus's tokenising on 2 threads, which would cap it on more (host_side.py)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not items or getattr(tokenizer, "split_special_tokens", False):
        return _tokenizer_call(tokenizer, items, pairs, max_length)
    # what the tokenizer's own call sets before encoding (it leaves them set too)
    backend.enable_truncation(max_length, stride=0, strategy="longest_first", direction=tokenizer.truncation_side)
    backend.no_padding()
    if getattr(backend, "encode_special_tokens", False):
        backend.encode_special_tokens = False
    encodings = backend.encode_batch([(s, p) for s, p in items] if pairs else items, add_special_tokens=True)
    names = [name for name in ENCODING_FIELDS if name == "input_ids" or name in tokenizer.model_input_names]
    return {name: [getattr(one, ENCODING_FIELDS[name]) for one in encodings] for name in names}


def _tokenizer_call(tokenizer, items: list, pairs: bool, max_length: int) -> dict:
    """tokenize_unpadded through the tokenizer's own call (a tokenizer without a fast backend)."""
    if not pairs:
        return tokenizer(items, truncation=True, max_length=max_length)
    return tokenizer([s for s, _ in items], [p for _, p in items], truncation="longest_first", max_length=max_length)


def pad_ids_of(tokenizer) -> dict:
    """The ids a tokenizer pads its columns with (the attention mask, and any other column, with 0)."""
    return {"input_ids": getattr(tokenizer, "pad_token_id", 0),
            "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0)}


def pad_right(pieces: list, pad: int) -> torch.Tensor:
    """One column of a batch: each item's ids, right-padded with `pad` to the longest, int64, as a tokenizer
    called with padding=True pads it."""
    lengths = np.array([len(piece) for piece in pieces])
    filled = np.arange(lengths.max()) < lengths[:, None]   # each row's first `length` places
    padded = np.full(filled.shape, pad, dtype=np.int64)
    padded[filled] = np.concatenate(pieces)
    return torch.from_numpy(padded)


_MEMO: dict | None = None   # set by `token_memo` around training steps: each text's token ids, kept for the run


@contextlib.contextmanager
def token_memo(memo: dict):
    """Within: texts tokenised here are tokenised once and their ids kept in `memo` (a training run draws the same
    questions and passages again and again); each batch is padded from the kept ids as the tokenizer pads it,
    so the tensors are the same as without. `memo` lives as long as its caller keeps it (one training run)."""
    global _MEMO
    before, _MEMO = _MEMO, memo
    try:
        yield
    finally:
        _MEMO = before


def _memoisable(tokenizer) -> bool:
    """A Hugging Face tokenizer padding on the right with a pad id (the hasher and others: tokenised as before)."""
    return (_MEMO is not None and hasattr(tokenizer, "pad") and getattr(tokenizer, "padding_side", None) == "right"
            and getattr(tokenizer, "pad_token_id", None) is not None)


def _rows(encoded, count: int) -> list[dict]:
    """An unpadded batch encoding split into its items, each column an int32 array."""
    return [{name: np.asarray(encoded[name][i], dtype=np.int32) for name in encoded.keys()} for i in range(count)]


MEMO_LIMIT = 200_000   # texts a run keeps (the mini's runs draw under 25,000; MS MARCO's would draw millions)


def _memo_batch(tokenizer, items: list, max_length: int) -> dict:
    """The padded batch of `items` (texts, and text pairs whose second text is truncated first), from their ids in
    _MEMO (tokenised now where missing, and kept while the memo holds under MEMO_LIMIT texts): right-padded with the
    pad ids, attention mask 0, int64, as tokenizer(..., padding=True, return_tensors="pt") pads."""
    keys = [(id(tokenizer), max_length, item if isinstance(item, str) else tuple(item)) for item in items]
    missing = list(dict.fromkeys(key for key in keys if key not in _MEMO))
    texts = [key for key in missing if isinstance(key[2], str)]
    pairs = [key for key in missing if not isinstance(key[2], str)]
    encoded = []
    for part, are_pairs in ((texts, False), (pairs, True)):
        if part:
            encoded += _rows(tokenize_unpadded(tokenizer, [key[2] for key in part], are_pairs, max_length), len(part))
    fresh = dict(zip(texts + pairs, encoded))
    rows = [fresh[key] if key in fresh else _MEMO[key] for key in keys]
    if len(_MEMO) < MEMO_LIMIT:
        _MEMO.update(fresh)
    pads = pad_ids_of(tokenizer)
    return {name: pad_right([row[name] for row in rows], pads.get(name, 0)) for name in rows[0]}


def tokenize_queries(tokenizer, texts: list[str], max_length: int, dev=None):
    if _memoisable(tokenizer):
        batch = _memo_batch(tokenizer, texts, max_length)
    else:
        batch = tokenizer(texts, max_length=max_length, truncation=True, padding=True, return_tensors="pt")
    return {k: v.to(dev or device()) for k, v in to_bucket(batch, tokenizer).items()}


def tokenize_docs(tokenizer, docs: list, max_length: int, dev=None, segment: int = 0):
    """A doc is a text, or a text pair (sentence and paragraph, or title and passage): the second
    text is truncated first.

    `segment` > 0 (a model's doc_segment; RepBERT footnote 2: 1) sets the segment id of every doc
    token (attention mask 1) to it, so doc tokens get their own segment embedding; 0 leaves the
    tokenizer's ids as they are. A tokenizer without segment ids (the hasher) is left alone."""
    return with_segment(_tokenize_docs(tokenizer, docs, max_length, dev), segment)


def with_segment(batch: dict, segment: int) -> dict:
    """A doc batch with every real token's segment id set to `segment` (0: left as tokenised)."""
    if segment and "token_type_ids" in batch:
        batch["token_type_ids"] = batch["attention_mask"].to(batch["token_type_ids"].dtype) * segment
    return batch


def _tokenize_docs(tokenizer, docs: list, max_length: int, dev=None):
    pairs = [not isinstance(d, str) for d in docs]
    if any(pairs) and not hasattr(tokenizer, "pad"):   # the bag-of-words hasher reads a pair as one text
        docs, pairs = [d if isinstance(d, str) else f"{d[0]} {d[1]}" for d in docs], [False] * len(docs)
    if not any(pairs):
        return tokenize_queries(tokenizer, docs, max_length, dev)
    if _memoisable(tokenizer):   # pairs, or a mixture: each item as it is tokenised alone
        batch = _memo_batch(tokenizer, docs, max_length)
    elif all(pairs):
        batch = tokenizer([s for s, _ in docs], [p for _, p in docs], max_length=max_length,
                          truncation="longest_first", padding=True, return_tensors="pt")
    else:   # a task mixture: ICT's (title, passage) beside other tasks' passages
        batch = tokenizer.pad([tokenizer(*d, max_length=max_length, truncation="longest_first") if pair
                               else tokenizer(d, max_length=max_length, truncation=True)
                               for d, pair in zip(docs, pairs)], return_tensors="pt")
    return {k: v.to(dev or device()) for k, v in to_bucket(batch, tokenizer).items()}


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
    shared through DVC: towers.ops.cache), or nowhere when TOWERS_TOKEN_CACHE=off."""
    return None if os.environ.get(TOKEN_CACHE) == "off" else Path(beside).parent / ".tokens"
