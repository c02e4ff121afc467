"""Faiss index builds (towers.retrieval.vector_index) and the streamed .npy matrices they read
(towers.retrieval.matrix)."""
import faiss
import numpy as np
import pytest

from towers.io import StageError
from towers.retrieval import vector_index
from towers.retrieval.matrix import NpyWriter, merge_parts, npy_shape, read_blocks


def unit_rows(count, dim, seed=0):
    x = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def index_bytes(index) -> bytes:
    return faiss.serialize_index(index).tobytes()


@pytest.mark.parametrize("factory", ["IVF8,PQ8", "PQ8", "OPQ8,IVF8,PQ8", "IVF8,PQ8x4"])
def test_polysemous_training_is_off(factory):
    def pq_part(index):   # the wrappers returned hold no reference to `index`: the caller keeps it alive
        index = faiss.downcast_index(index)
        return faiss.downcast_index(index.index) if isinstance(index, faiss.IndexPreTransform) else index

    ours, factorys = vector_index.untrained(32, factory), faiss.index_factory(32, factory)
    assert pq_part(ours).do_polysemous_training is False
    assert pq_part(factorys).do_polysemous_training is True   # what index_factory alone turns on


@pytest.mark.parametrize("factory", ["IVF16,PQ8x4", "IVF1,PQ8x4"])   # 4-bit codes: polysemous in a second
def test_polysemous_training_changes_codes_but_not_what_a_search_returns(factory):
    """Polysemous training permutes centroid ids only: the ids and distances searched are the same."""
    x, queries = unit_rows(3000, 32), unit_rows(50, 32, seed=1)
    on = faiss.index_factory(32, factory, faiss.METRIC_INNER_PRODUCT)
    on.train(x)
    on.add(x)
    off = vector_index.build(x, factory)
    assert index_bytes(on) != index_bytes(off)   # the permutation happened
    for index in (on, off):
        faiss.extract_index_ivf(index).nprobe = 4
    (d_on, i_on), (d_off, i_off) = on.search(queries, 20), off.search(queries, 20)
    assert np.array_equal(i_on, i_off) and np.array_equal(d_on, d_off)


@pytest.mark.parametrize("factory", ["Flat", "IVF16,Flat", "IVF16,PQ8", "IVF4,SQ8"])
def test_a_build_from_file_in_blocks_is_the_build_of_the_whole_matrix(tmp_path, factory):
    x = unit_rows(2500, 16)
    np.save(tmp_path / "m.npy", x)
    whole = index_bytes(vector_index.build(x, factory))
    assert index_bytes(vector_index.build_from_file(tmp_path / "m.npy", factory, threads=1, block_rows=700)) == whole
    assert index_bytes(vector_index.build_from_file(tmp_path / "m.npy", factory, threads=2)) == whole


def test_build_from_file_refuses_what_is_not_a_matrix(tmp_path):
    (tmp_path / "x.npy").write_text("not numpy\n")
    with pytest.raises(StageError, match="not a NumPy array file"):
        vector_index.build_from_file(tmp_path / "x.npy", "Flat")
    np.save(tmp_path / "v.npy", np.zeros(5, dtype=np.float32))
    with pytest.raises(StageError, match="2-D C-ordered float32"):
        vector_index.build_from_file(tmp_path / "v.npy", "Flat")
    np.save(tmp_path / "cut.npy", np.zeros((10, 4), dtype=np.float32))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "cut.npy").read_bytes()[:-8])
    with pytest.raises(StageError, match="truncated"):
        npy_shape(tmp_path / "cut.npy")


def test_the_writer_writes_np_save_bytes_and_the_reader_reads_them_back(tmp_path):
    x = unit_rows(1000, 7)
    np.save(tmp_path / "saved.npy", x)
    with NpyWriter(tmp_path / "written.npy", len(x)) as out:
        for start in range(0, len(x), 300):
            out.append(x[start:start + 300])
    assert (tmp_path / "written.npy").read_bytes() == (tmp_path / "saved.npy").read_bytes()
    assert np.array_equal(np.vstack(list(read_blocks(tmp_path / "written.npy", 333))), x)


def test_a_writer_left_short_leaves_nothing(tmp_path):
    with pytest.raises(StageError, match="5 rows written of 10"):
        with NpyWriter(tmp_path / "m.npy", 10) as out:
            out.append(np.zeros((5, 3), dtype=np.float32))
    assert list(tmp_path.iterdir()) == []


def test_merged_parts_are_the_concatenation(tmp_path):
    parts = [unit_rows(n, 6, seed=n) for n in (3, 0, 5)]
    for i, part in enumerate(parts):
        np.save(tmp_path / f"{i}.npy", part)
        (tmp_path / f"{i}.ids").write_text("".join(f"d{i}-{r}\n" for r in range(len(part))))
    shape = merge_parts([tmp_path / f"{i}.npy" for i in range(3)], [tmp_path / f"{i}.ids" for i in range(3)],
                        tmp_path / "m.npy", tmp_path / "m.ids")
    assert shape == (8, 6)
    assert (tmp_path / "m.npy").read_bytes() == _saved(tmp_path / "whole.npy", np.vstack(parts))
    assert (tmp_path / "m.ids").read_text().split() == [f"d{i}-{r}" for i in (0, 2) for r in range(len(parts[i]))]


def _saved(path, matrix) -> bytes:
    np.save(path, matrix)
    return path.read_bytes()


def test_a_transform_trains_on_a_sample_of_a_large_matrix_only():
    """OPQ/PCA would copy every training row through the transform: above Faiss's own sample size the
    training set is a seeded sample; below it, the matrix itself (so small indexes are built as before)."""
    big, small = np.zeros((70000, 4), dtype=np.float32), np.zeros((1000, 4), dtype=np.float32)
    big[:, 0] = np.arange(len(big))
    opq, ivf = vector_index.untrained(4, "OPQ2,IVF300,PQ2"), vector_index.untrained(4, "IVF300,PQ2")
    assert vector_index.training_rows(opq, big) is big   # 300 lists take 76,800 > 70,000 rows: all of them
    opq_small = vector_index.untrained(4, "OPQ2,IVF1,PQ2")
    sample = vector_index.training_rows(opq_small, big)
    assert sample.shape == (65536, 4) and np.all(np.diff(sample[:, 0]) > 0)   # distinct rows, in order
    assert np.array_equal(sample, vector_index.training_rows(opq_small, big))   # seeded
    assert vector_index.training_rows(ivf, big) is big and vector_index.training_rows(opq_small, small) is small
