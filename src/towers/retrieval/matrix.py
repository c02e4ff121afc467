"""Float32 `.npy` matrices streamed in row blocks: written as rows come, read a block at a time.

A corpus matrix at paper scale (8.8M x 768: 27 GB) must never sit in one process's memory twice, or at
all where a block will do. Blocks are read with plain file reads, not a memory map, so the pages read
leave the process once a block is dropped (a map keeps every page it touched in the resident set).
No torch here: the stages that merge and index matrices stay light."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

from ..io import StageError, atomic_open, require_file

DTYPE = np.dtype("<f4")
BLOCK_ROWS = 65536   # Faiss's own add block (IndexIVF::add_core): adding block by block gives the same index


def npy_shape(path) -> tuple[tuple[int, ...], int]:
    """(shape, byte offset of the data) of a C-ordered float32 .npy file; one line naming it otherwise."""
    with open(require_file(path), "rb") as handle:
        try:
            version = np.lib.format.read_magic(handle)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(handle)
        except ValueError as err:
            raise StageError(path, f"not a NumPy array file ({err})") from None
        if dtype != DTYPE or fortran or len(shape) != 2:
            raise StageError(path, f"expected a 2-D C-ordered float32 matrix, found {dtype} {shape}"
                                   f"{' (Fortran order)' if fortran else ''}")
        offset = handle.tell()
    size = Path(path).stat().st_size
    if size < offset + shape[0] * shape[1] * DTYPE.itemsize:
        raise StageError(path, f"truncated: {size} bytes for a {shape[0]} x {shape[1]} float32 matrix")
    return shape, offset


def first_nonfinite(matrix: np.ndarray, rows: int = BLOCK_ROWS) -> int | None:
    """The first row of `matrix` holding a NaN or inf, or None, looked at `rows` rows at a time: a memory map is
    never copied whole. A block's sum is finite unless a value of it is not (or the sum overflows: then its rows
    are looked at one by one), and costs less than testing every value."""
    for start in range(0, len(matrix), rows):
        block = matrix[start:start + rows]
        with np.errstate(over="ignore"):
            if np.isfinite(block.sum()):
                continue
        bad = np.flatnonzero(~np.isfinite(block).all(axis=1))
        if len(bad):
            return start + int(bad[0])
    return None


def require_finite(matrix: np.ndarray, path, first_row: int = 0) -> None:
    """One line naming the first row that holds NaN or inf (counted from `first_row`): a search ranks such a row
    nowhere, so its document would silently drop out of every ranking."""
    bad = first_nonfinite(matrix)
    if bad is not None:
        raise StageError(path, f"row {first_row + bad} holds NaN or inf, not an embedding: its document would drop "
                               f"out of every ranking")


def read_blocks(path, rows: int = BLOCK_ROWS) -> Iterator[np.ndarray]:
    """The matrix at `path`, `rows` rows at a time, in order; a row holding NaN or inf is refused (require_finite)."""
    (count, width), offset = npy_shape(path)
    with open(path, "rb") as handle:
        handle.seek(offset)
        for start in range(0, count, rows):
            take = min(rows, count - start)
            block = np.fromfile(handle, dtype=DTYPE, count=take * width).reshape(take, width)
            require_finite(block, path, start)
            yield block


class NpyWriter:
    """Appends row blocks to a float32 .npy of `rows` rows, written atomically; the width is given or the
    first block's. The bytes equal np.save's of the whole matrix. Use as a context manager; leaving it
    without exactly `rows` rows written is an error and leaves nothing at `path`."""

    def __init__(self, path, rows: int, width: int | None = None):
        self.path, self.rows, self.written, self.width = Path(path), rows, 0, None
        self._atomic = atomic_open(self.path, "wb")
        self._given_width = width

    def __enter__(self):
        self._handle = self._atomic.__enter__()
        if self._given_width is not None:
            self._header(self._given_width)
        return self

    def _header(self, width: int) -> None:
        self.width = width
        np.lib.format.write_array_header_1_0(self._handle, {"descr": np.lib.format.dtype_to_descr(DTYPE),
                                                           "fortran_order": False, "shape": (self.rows, width)})

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=DTYPE)
        if block.ndim != 2:
            raise ValueError(f"{self.path}: blocks must be 2-D, not {block.shape}")
        if self.width is None:
            self._header(block.shape[1])
        if block.shape[1] != self.width or self.written + len(block) > self.rows:
            raise StageError(self.path, f"a block of {block.shape} does not fit a {self.rows} x {self.width} matrix "
                                        f"with {self.written} rows written")
        self._handle.write(block.data)   # its own bytes: no copy of a chunk's matrix to fault in
        self.written += len(block)

    def __exit__(self, kind, error, trace):
        if kind is None and (self.written != self.rows or self.width is None):
            error = StageError(self.path, f"{self.written} rows written of {self.rows}")
            self._atomic.__exit__(StageError, error, None)
            raise error
        return self._atomic.__exit__(kind, error, trace)


def merge_parts(parts: list, part_ids: list, embeddings_path, ids_path) -> tuple[int, int]:
    """Concatenate .npy parts (and their id files) in order, block by block, so a corpus larger than RAM
    never sits in memory whole. Returns the merged shape."""
    shapes = []
    for part, ids in zip(parts, part_ids):
        (rows, width), _ = npy_shape(part)
        with open(ids, encoding="utf-8") as handle:
            count = sum(1 for line in handle if line.strip())
        if rows != count:
            raise StageError(part, f"shape {(rows, width)} does not match the {count} ids of {ids}")
        shapes.append((rows, width))
    widths = {width for _, width in shapes}
    if len(widths) != 1:
        raise StageError(parts[0], f"parts differ in width: {sorted(widths)}")
    shape = (sum(rows for rows, _ in shapes), widths.pop())
    with NpyWriter(embeddings_path, shape[0], shape[1]) as out:
        for part in parts:
            for block in read_blocks(part):
                out.append(block)
    with atomic_open(ids_path) as handle:
        for ids in part_ids:
            with open(ids, encoding="utf-8") as source:
                handle.writelines(line.strip() + "\n" for line in source if line.strip())
    return shape
