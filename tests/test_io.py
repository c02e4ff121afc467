import pytest

from towers.io import (StageError, atomic_open, atomic_path, check_sha256, read_qrels, read_queries, read_run,
                       write_qrels, write_queries, write_run)


def test_failed_write_leaves_nothing(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_open(target) as handle:
            handle.write("half")
            raise RuntimeError("stage died")
    assert list(tmp_path.iterdir()) == []


def test_failed_folder_leaves_nothing_and_keeps_old_output(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "old").write_text("previous")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.mkdir()
            (tmp / "new").write_text("partial")
            raise RuntimeError
    assert [p.name for p in tmp_path.iterdir()] == ["model"] and (target / "old").exists()


def test_trec_formats_round_trip(tmp_path):
    run = {"q1": [("d2", 3.5), ("d1", 1.25)], "q2": [("d9", 0.5)]}
    write_run(tmp_path / "run.trec", run, "tag")
    assert (tmp_path / "run.trec").read_text().splitlines()[0] == "q1 Q0 d2 1 3.500000 tag"
    assert read_run(tmp_path / "run.trec") == run
    qrels = {"q1": {"d2": 1}, "q2": {"d9": 2, "d3": 0}}
    write_qrels(tmp_path / "qrels.txt", qrels)
    assert read_qrels(tmp_path / "qrels.txt") == qrels
    write_queries(tmp_path / "q.tsv", {"q1": "what\tis  this?"})
    assert read_queries(tmp_path / "q.tsv") == {"q1": "what is this?"}


@pytest.mark.parametrize("name, text, message", [
    ("run.trec", "q1 Q0 d1 1\n", "line 1 is not 'qid Q0 docid rank score tag'"),
    ("run.trec", "q1 Q0 d1 one 2.0 t\n", "line 1 has a bad rank or score"),
    ("qrels.txt", "q1 0 d1 yes\n", "line 1 has a non-integer relevance"),
    ("queries.tsv", "q1 no tab here\n", "line 1 is not 'qid<TAB>text'"),
    ("queries.tsv", "", "input file is empty"),
])
def test_bad_lines_name_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    reader = {"run.trec": read_run, "qrels.txt": read_qrels, "queries.tsv": read_queries}[name]
    with pytest.raises(StageError) as err:
        reader(path)
    assert str(err.value) == f"{path}: {message}"


def test_checksum_mismatch(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    check_sha256(path, "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881")
    with pytest.raises(StageError, match="sha256 mismatch"):
        check_sha256(path, "0" * 64)
