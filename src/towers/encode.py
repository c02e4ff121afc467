"""Encode texts with one tower into float32 embeddings, batching by token length.

Sorting by length before batching means each batch pads only to its own longest text; the
embeddings are put back in input order."""
from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from .training import loop
from .training.inbatch import tokenize_docs, tokenize_queries


def length_order(lengths: list[int]) -> np.ndarray:
    return np.argsort(-np.asarray(lengths), kind="stable")


@torch.no_grad()
def encode(tower, tokenizer, items: list, kind: str, max_length: int, batch_size: int,
           sort_by_length: bool = True, desc: str = "encode", segment: int = 0) -> np.ndarray:
    """items: query strings (kind='query'), doc strings or (sentence, paragraph) tuples (kind='doc').
    `segment`: the segment id of doc tokens (the model's doc_segment; queries always have 0)."""
    dev = loop.device()
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
