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


RUN_LINES = ["q2 Q0 d5 1 9.000000 t", "q2 Q0 d7 2 8.000000 t", "q1 Q0 d3 2 1.000000 t", "q1 Q0 d1 1 2.000000 t",
             "q3 Q0 d4 1 0.500000 t"]


def test_read_run_keeps_the_queries_asked_for_in_file_order_ranked_by_the_rank_column(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("\n".join(RUN_LINES) + "\n")
    whole = read_run(path)
    assert list(whole) == ["q2", "q1", "q3"] and whole["q1"] == [("d1", 2.0), ("d3", 1.0)]
    assert read_run(path, qids=["q3", "q1", "q9"]) == {"q1": whole["q1"], "q3": whole["q3"]}
    assert list(read_run(path, qids={"q3", "q2"})) == ["q2", "q3"]
    path.write_text("\n".join(RUN_LINES) + "\nq9 Q0 d1 x 1.0 t\n")   # a bad line is refused even outside `qids`
    with pytest.raises(StageError, match="line 6 has a bad rank or score"):
        read_run(path, qids=["q1"])


def test_runs_written_a_query_at_a_time_and_shards_joined_equal_one_write(tmp_path):
    from towers.io import concatenate_runs, write_ranking

    run = {"q1": [("d2", 3.5), ("d1", 1.25)], "q2": [("d9", 0.5)], "q3": [("d4", 0.0078125)]}
    write_run(tmp_path / "whole.trec", run, "tag")
    with atomic_open(tmp_path / "streamed.trec") as handle:
        for qid, ranked in run.items():
            write_ranking(handle, qid, iter(ranked), "tag")
    assert (tmp_path / "streamed.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()
    write_run(tmp_path / "a.trec", {"q1": run["q1"]}, "tag")
    write_run(tmp_path / "b.trec", {}, "tag")   # a shard whose queries found nothing
    write_run(tmp_path / "c.trec", {"q2": run["q2"], "q3": run["q3"]}, "tag")
    parts = [tmp_path / f"{p}.trec" for p in "abc"]
    concatenate_runs(parts, tmp_path / "joined.trec")
    assert (tmp_path / "joined.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()
    (tmp_path / "b.trec").write_text("q2 Q0 d9 1 0.5")   # cut short
    with pytest.raises(StageError, match="b.trec: its last line is cut short"):
        concatenate_runs(parts, tmp_path / "joined.trec")
    assert (tmp_path / "joined.trec").read_bytes() == (tmp_path / "whole.trec").read_bytes()   # left as it was


# issue 40: a NaN score sorts nowhere (metrics that re-sort by score disagree); a repeat was taken silently
@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-Infinity", "1e400"])
def test_a_score_that_is_not_a_finite_number_is_one_line_naming_line_and_query(tmp_path, score):
    path = tmp_path / "run.trec"
    path.write_text(f"q1 Q0 d1 1 2.0 t\n\nq1 Q0 d2 2 {score} t\n")
    with pytest.raises(StageError) as err:
        read_run(path)
    assert str(err.value) == f"{path}: line 3: score {score} of document d2 for query q1 is not a finite number"
    with pytest.raises(StageError, match="line 3: score"):   # refused outside the queries kept too
        read_run(path, qids=["q9"])


def test_a_document_named_twice_for_a_query_is_one_line_naming_the_second(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d1 1 3.0 t\nq2 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d1 3 1.0 t\nq2 Q0 d2 2 1.0 t\n")
    with pytest.raises(StageError) as err:
        read_run(path)
    assert str(err.value) == f"{path}: line 4: document d1 appears twice for query q1"
    assert read_run(path, qids=["q2"]) == {"q2": [("d1", 3.0), ("d2", 1.0)]}   # repeats matter in the queries kept


def test_a_pair_judged_twice_is_one_line_naming_the_second(tmp_path):
    path = tmp_path / "qrels.txt"
    for second in ("1", "0"):   # the same grade or another: either way one line would silently replace the other
        path.write_text(f"q1 0 d1 1\nq2 0 d1 0\nq1 0 d2 1\nq1 0 d1 {second}\n")
        with pytest.raises(StageError) as err:
            read_qrels(path)
        assert str(err.value) == f"{path}: line 4: document d1 is judged twice for query q1 (1 and {second})"
