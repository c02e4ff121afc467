"""Faiss indexes built from an index_factory string, inner-product metric, and top-k search."""
from __future__ import annotations

import numpy as np

from .io import StageError


def build(embeddings: np.ndarray, factory: str):
    import faiss

    if embeddings.ndim != 2 or embeddings.dtype != np.float32:
        raise ValueError("embeddings must be a 2-D float32 matrix")
    try:
        index = faiss.index_factory(embeddings.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise StageError("faiss.index_factory", f"bad factory string {factory!r}: {str(err).splitlines()[0]}") from None
    if not index.is_trained:   # IVF / PQ: k-means with Faiss's fixed default seed, so repeatable
        try:
            index.train(embeddings)
        except RuntimeError as err:   # e.g. fewer vectors than a quantiser has centroids
            reason = str(err).strip().splitlines()[0].rpartition("failed: ")[2]
            raise StageError(f"faiss {factory!r}", f"cannot train on {len(embeddings)} vectors: {reason}") from None
    index.add(embeddings)
    return index


def search(index, queries: np.ndarray, depth: int, nprobe: int | None = None):
    import faiss

    if nprobe:
        try:
            faiss.ParameterSpace().set_index_parameter(index, "nprobe", nprobe)
        except RuntimeError:
            pass   # flat indexes have no nprobe
    return index.search(queries, min(depth, index.ntotal))
