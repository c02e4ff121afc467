"""Faiss indexes built from an index_factory string, inner-product metric, and top-k search.

Searching uses the GPU when Faiss's GPU build is installed and sees one (`to_device`): an index that fits
one GPU's free memory goes to GPU 0, one that only fits all GPUs together is sharded across them, a larger
one stays on the CPU (a profile then picks a compressed index, e.g. faiss.indexes ivfpq). Set
TOWERS_FAISS_GPU=0 to keep every index on the CPU."""
from __future__ import annotations

import os
import sys

import numpy as np

from ..io import StageError, require_file


def build(embeddings: np.ndarray, factory: str, where="embeddings"):
    """An index of `embeddings` (a 2-D float32 matrix, in memory or memory-mapped; `where` names it in errors)."""
    from .matrix import require_finite

    if embeddings.ndim != 2 or embeddings.dtype != np.float32:
        raise ValueError("embeddings must be a 2-D float32 matrix")
    require_finite(embeddings, where)
    index = untrained(embeddings.shape[1], factory)
    train(index, embeddings, factory)
    index.add(embeddings)
    return index


def build_from_file(path, factory: str, threads: int = 0, block_rows: int = 0):
    """An index of the .npy matrix at `path`, holding no more of it than the index keeps: trained on a
    memory map of it (training_rows), then filled block by block (matrix.BLOCK_ROWS, Faiss's own add
    block). The index is the one `build` makes of the whole matrix in memory, but for a transform's
    sample above 65,536 rows. `threads` > 0 sets Faiss's OpenMP threads."""
    import faiss

    from .matrix import BLOCK_ROWS, first_nonfinite, npy_shape, read_blocks, require_finite

    if threads > 0:
        faiss.omp_set_num_threads(threads)
    (count, width), _ = npy_shape(path)
    index = untrained(width, factory)
    if not index.is_trained:
        mapped = np.load(path, mmap_mode="r")
        rows = training_rows(index, mapped)
        if first_nonfinite(rows) is not None:   # Faiss would refuse them without naming the row: the file's first
            require_finite(mapped, path)
        train(index, rows, factory)
        del rows
        del mapped   # unmapped: the pages training touched leave the resident set
    flat = faiss.downcast_index(index)
    if isinstance(flat, faiss.IndexFlat):   # codes are the vectors: sized once, filled block by block
        flat.codes.resize(count * width * 4)   # (add() would grow them by doubling: up to 1.5x the matrix at once)
        vectors = faiss.rev_swig_ptr(flat.codes.data(), count * width * 4).view(np.float32).reshape(count, width)
        row = 0
        for block in read_blocks(path, block_rows or BLOCK_ROWS):
            vectors[row:row + len(block)] = block
            row += len(block)
        flat.ntotal = count
        return index
    for block in read_blocks(path, block_rows or BLOCK_ROWS):
        index.add(block)
    return index


def training_rows(index, matrix: np.ndarray, seed: int = 1234) -> np.ndarray:
    """What `index` trains on: the matrix itself, which Faiss samples (IVF k-means: 256 vectors a list; PQ
    and SQ: 65,536-100,000), except before a transform (OPQ, PCA: IndexPreTransform), which Faiss applies to
    every training vector, a copy of the whole matrix: there a seeded sample of the rows Faiss would use
    at most (256 a list, at least 65,536), where the matrix holds more."""
    import faiss

    if not isinstance(faiss.downcast_index(index), faiss.IndexPreTransform):
        return matrix
    ivf = faiss.try_extract_index_ivf(index)
    rows = max(65536, 256 * (ivf.nlist if ivf is not None else 0))
    if len(matrix) <= rows:
        return matrix
    return np.ascontiguousarray(matrix[np.sort(np.random.default_rng(seed).choice(len(matrix), rows, replace=False))])


def untrained(dim: int, factory: str):
    """faiss.index_factory's index (inner product), with polysemous training off (see without_polysemous)."""
    import faiss

    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as err:
        raise StageError("faiss.index_factory", f"bad factory string {factory!r}: {str(err).splitlines()[0]}") from None
    return without_polysemous(index)


def without_polysemous(index):
    """index_factory turns on polysemous training for every PQ spec not ending in "np" (IVF64,PQ32 is
    IVF64,PQ32np plus it). That training only permutes each sub-quantizer's centroid ids, by simulated
    annealing, so that Hamming distances between codes mimic real ones; it pays only when searching with a
    Hamming threshold (polysemous_ht), which this project never sets. Measured on one thread at the mini's
    shape (17,018 x 128, IVF64,PQ32): 56.6 s with it, 9.8 s without, the same ids and distances searched;
    400K x 768, IVF1024,PQ64, two threads: 99 s and 50 s."""
    import faiss

    outer = faiss.downcast_index(index)
    inner = faiss.downcast_index(outer.index) if isinstance(outer, faiss.IndexPreTransform) else None
    for part in (outer, inner):
        if part is not None and getattr(part, "do_polysemous_training", False):
            part.do_polysemous_training = False
    return index


def train(index, embeddings: np.ndarray, factory: str) -> None:
    """Train an IVF / PQ index: k-means with Faiss's fixed default seed, so repeatable."""
    if index.is_trained:
        return
    try:
        index.train(embeddings)
    except RuntimeError as err:   # e.g. fewer vectors than a quantiser has centroids
        reason = str(err).strip().splitlines()[0].rpartition("failed: ")[2]
        raise StageError(f"faiss {factory!r}", f"cannot train on {len(embeddings)} vectors: {reason}") from None


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


def load(path, count: int | None = None, ids_path=None, mmap: bool = False):
    """A written index (placed by to_device); with `count`, one of exactly that many vectors (the
    length of the id list at `ids_path`), else a one-line error naming the list. `mmap`: its codes
    mapped from the file, not read (data-parallel processes on one machine share one copy)."""
    import faiss

    try:
        index = faiss.read_index(str(require_file(path)), faiss.IO_FLAG_MMAP_IFC if mmap else 0)
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

    from ..runtime import started

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
