"""Faiss indexes built from an index_factory string, inner-product metric, and top-k search.

Searching uses the GPU when Faiss's GPU build is installed and sees one (`to_device`): an index that fits
one GPU's free memory goes to GPU 0, one that only fits all GPUs together is sharded across them, a larger
one stays on the CPU (a profile then picks a compressed index, e.g. faiss.indexes ivfpq). Set
TOWERS_FAISS_GPU=0 to keep every index on the CPU."""
from __future__ import annotations

import os
import sys

import numpy as np

from .io import StageError, require_file


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
        spaces = [faiss.ParameterSpace] + ([faiss.GpuParameterSpace] if hasattr(faiss, "GpuParameterSpace") else [])
        for space in spaces:
            try:
                space().set_index_parameter(index, "nprobe", nprobe)
                break
            except RuntimeError:
                pass   # flat indexes have no nprobe; a GPU index takes it through GpuParameterSpace
    return index.search(queries, min(depth, index.ntotal))


def gpu_count() -> int:
    """GPUs Faiss can use: 0 with the CPU build, or when TOWERS_FAISS_GPU=0."""
    import faiss

    if os.environ.get("TOWERS_FAISS_GPU", "1") == "0" or not hasattr(faiss, "StandardGpuResources"):
        return 0
    return faiss.get_num_gpus()


def placement(index_bytes: int, free_bytes: list[int], headroom: float = 0.8) -> str:
    """'gpu' if the first GPU holds the index with room to spare, 'shard' if all GPUs together do, else 'cpu'."""
    if free_bytes and index_bytes <= headroom * free_bytes[0]:
        return "gpu"
    if len(free_bytes) > 1 and index_bytes <= headroom * sum(free_bytes):
        return "shard"
    return "cpu"


def stored_bytes(index) -> int:
    """Bytes the index's vectors take (code size x count); flat float32 when the index does not say."""
    try:
        per_vector = index.sa_code_size()
    except RuntimeError:
        per_vector = 4 * index.d
    return int(per_vector) * int(index.ntotal)


_GPU_RESOURCES = []   # Faiss GPU resources must outlive the indexes that use them


def load(path, count: int | None = None, ids_path=None):
    """A written index (placed by to_device); with `count`, one of exactly that many vectors (the
    length of the id list at `ids_path`), else a one-line error naming the list."""
    import faiss

    try:
        index = faiss.read_index(str(require_file(path)))
    except RuntimeError as err:   # Faiss's C++ exception, with its source location, for a truncated file
        reason = str(err).strip().splitlines()[0].rpartition("failed: ")[2] or "unreadable"
        raise StageError(path, f"not a readable Faiss index, truncated or corrupt ({reason[:200]})") from None
    if count is not None and index.ntotal != count:
        raise StageError(ids_path, f"{count} ids for an index of {index.ntotal} vectors ({path})")
    return to_device(index)


def to_device(index):
    """The index on the GPU(s) where Faiss's GPU build sees any and it fits (see the module note), else itself."""
    count = gpu_count()
    if not count:
        return index
    import faiss
    import torch

    from .runtime import started

    # data-parallel training: one process a GPU, each keeps its own copy there (no sharding over all)
    devices = [torch.cuda.current_device()] if started() else list(range(count))
    where = placement(stored_bytes(index), [torch.cuda.mem_get_info(i)[0] for i in devices])
    try:
        if where == "gpu":
            _GPU_RESOURCES.append(faiss.StandardGpuResources())
            return faiss.index_cpu_to_gpu(_GPU_RESOURCES[-1], devices[0], index)
        if where == "shard":
            options = faiss.GpuMultipleClonerOptions()
            options.shard = True
            return faiss.index_cpu_to_all_gpus(index, co=options)
    except RuntimeError as err:   # an index type without a GPU implementation
        print(f"faiss: searching on the CPU ({str(err).strip().splitlines()[0]})", file=sys.stderr)
        return index
    print(f"faiss: an index of {stored_bytes(index) / 2**30:.1f} GiB does not fit the GPUs; searching on the CPU",
          file=sys.stderr)
    return index
