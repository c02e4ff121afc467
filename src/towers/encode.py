"""Encode texts with one tower into float32 embeddings, batching by token length.

Sorting by length before batching means each batch pads only to its own longest text; the
embeddings are put back in input order."""
from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from .io import StageError, atomic_path
from .models import prepare_texts, tokenize_docs, tokenize_queries
from .runtime import device


def length_order(lengths: list[int]) -> np.ndarray:
    return np.argsort(-np.asarray(lengths), kind="stable")


@torch.no_grad()
def encode(tower, tokenizer, items: list, kind: str, max_length: int, batch_size: int,
           sort_by_length: bool = True, desc: str = "encode", segment: int = 0, prefix: str = "",
           lowercase: bool = False) -> np.ndarray:
    """items: query strings (kind='query'), doc strings or (sentence, paragraph) tuples (kind='doc').
    `segment`: the segment id of doc tokens (the model's doc_segment; queries always have 0);
    `prefix`, `lowercase`: a pretrained checkpoint's prompt and casing (models.text_options)."""
    items = prepare_texts(items, prefix, lowercase)
    dev = device()
    tower = tower.to(dev).eval()
    if kind == "query" or isinstance(items[0], str):
        lengths = [len(ids) for ids in tokenizer(items, truncation=True, max_length=max_length)["input_ids"]]
    else:
        lengths = [len(ids) for ids in tokenizer([s for s, _ in items], [p for _, p in items], truncation="longest_first",
                                                 max_length=max_length)["input_ids"]]
    order = length_order(lengths) if sort_by_length else np.arange(len(items))
    out = None   # sized by the first batch: the head (linear, MLP or none) decides the width
    use_amp = dev.type == "cuda"
    for start in tqdm(range(0, len(items), batch_size), desc=desc, unit="batch", mininterval=5, disable=desc is None):
        idx = order[start:start + batch_size]
        chunk = [items[i] for i in idx]
        batch = (tokenize_queries(tokenizer, chunk, max_length, dev) if kind == "query"
                 else tokenize_docs(tokenizer, chunk, max_length, dev, segment))
        with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=use_amp):
            vectors = tower(**batch).float().cpu().numpy()
        if out is None:
            out = np.zeros((len(items), vectors.shape[1]), dtype=np.float32)
        out[idx] = vectors
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def shard_range(count: int, shard: int, shards: int) -> tuple[int, int]:
    """[start, stop) of part `shard` of `count` items cut into `shards` near-equal contiguous parts."""
    if shards < 1 or not 0 <= shard < shards:
        raise StageError("--shard", f"must be in 0..{shards - 1} (--shards {shards}), not {shard}")
    return count * shard // shards, count * (shard + 1) // shards


def merge_parts(parts: list, part_ids: list, embeddings_path, ids_path) -> tuple[int, int]:
    """Concatenate .npy parts (and their id files) in order, writing through a memory map so a corpus
    larger than RAM never sits in memory whole. Returns the merged shape."""
    headers = []
    for part, ids in zip(parts, part_ids):
        matrix = np.load(part, mmap_mode="r")
        count = len(ids.read_text().split())
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise StageError(part, f"shape {matrix.shape} does not match the {count} ids of {ids}")
        headers.append(matrix.shape)
    dims = {shape[1] for shape in headers}
    if len(dims) != 1:
        raise StageError(parts[0], f"parts differ in width: {sorted(dims)}")
    shape = (sum(rows for rows, _ in headers), dims.pop())
    with atomic_path(embeddings_path) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=shape)
        row = 0
        for part in parts:
            matrix = np.load(part, mmap_mode="r")
            out[row:row + matrix.shape[0]] = matrix
            row += matrix.shape[0]
        out.flush()
        del out
    with atomic_path(ids_path) as tmp:
        tmp.write_text("".join(ids.read_text() for ids in part_ids))
    return shape
