import gzip
import json
import shutil

import pytest

from towers.datasets import reqa
from towers.io import StageError, read_jsonl, read_qrels, read_queries

from conftest import FIXTURES, SHARED_DATA, run_stage

TINY = FIXTURES / "nq-simplified-tiny.jsonl"


def test_kept_paragraphs_become_sentence_candidates():
    candidates, queries, qrels = reqa.build_nq(TINY)
    assert [c["sentence"] for c in candidates] == [
        "Tiny Town lies on a river .", "It has 300 residents .", "The mayor is Ann Lee .",
        "The town market opens on Saturdays .", "Farmers sell apples and pears there ."]
    assert candidates[0]["paragraph"] == "Tiny Town lies on a river . It has 300 residents . The mayor is Ann Lee ."
    assert {c["title"] for c in candidates} == {"Tiny Town"}   # from the URL's title= parameter


def test_relevant_sentence_holds_the_short_answer():
    candidates, queries, qrels = reqa.build_nq(TINY)
    sentence = {c["id"]: c["sentence"] for c in candidates}
    assert qrels["101"] == {"0_1": 1} and "300" in sentence["0_1"]          # second sentence
    assert qrels["102"] == {"0_2": 1}                                        # same paragraph, candidates once
    assert qrels["106"] == {"1_0": 1}
    assert queries["101"] == "how many people live in tiny town"


def test_dropped_examples():
    _, queries, _ = reqa.build_nq(TINY)
    # 103: long answer is a <Table>; 104: yes/no, no short answer; 105: two short answers (nq_to_squad.py keeps one)
    assert sorted(queries) == ["101", "102", "106"]


def test_gzip_input_and_id_prefix(tmp_path):
    gz = tmp_path / "nq.jsonl.gz"
    with open(TINY, "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain = reqa.build_nq(TINY)
    candidates, queries, qrels = reqa.build_nq(gz, id_prefix="x_")
    assert [c["sentence"] for c in candidates] == [c["sentence"] for c in plain[0]]
    assert qrels["101"] == {"x_0_1": 1} and queries == plain[1]


def test_original_format_is_accepted(tmp_path):
    path = tmp_path / "nq-original.jsonl"
    with open(TINY) as src, open(path, "w") as dst:
        for line in src:
            row = json.loads(line)
            tokens = row.pop("document_text").split(" ")
            row["document_tokens"] = [{"token": t, "html_token": t.startswith("<")} for t in tokens]
            row["document_title"] = "Tiny Town (original)"
            dst.write(json.dumps(row) + "\n")
    candidates, queries, qrels = reqa.build_nq(path)
    assert qrels == reqa.build_nq(TINY)[2] and candidates[0]["title"] == "Tiny Town (original)"


@pytest.mark.parametrize("line, message", [
    ("{not json", r"line 3 is not valid JSON"),
    ('{"question_text": "q", "annotations": []}', r"line 3: not a Natural Questions example \(no 'example_id'\)"),
    ('{"example_id": 1, "question_text": "q", "annotations": []}', r"line 3: .*no 'document_text'"),
    ('{"example_id": 1, "question_text": "q", "document_text": "x", "annotations": [{"long_answer": 5}]}',
     r"line 3: malformed example"),
])
def test_malformed_line_names_the_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(TINY.read_text().splitlines(keepends=True)[:2]) + line + "\n")
    with pytest.raises(StageError, match=f"bad.jsonl: {message}"):
        reqa.build_nq(path)


def test_no_kept_question_is_an_error(tmp_path):
    path = tmp_path / "dropped.jsonl"
    path.write_text(TINY.read_text().splitlines(keepends=True)[2])    # the <Table> example only
    with pytest.raises(StageError, match="dropped.jsonl: no question"):
        reqa.build_nq(path)


def test_reqa_nq_stage_writes_the_collection(tmp_path):
    out = tmp_path / "reqa-nq"
    result = run_stage("reqa-nq", "--jsonl", TINY, "--out-dir", out)
    assert result.returncode == 0, result.stderr
    assert len(list(read_jsonl(out / "candidates.jsonl"))) == 5
    assert list(read_queries(out / "queries.tsv")) == ["101", "102", "106"]
    assert read_qrels(out / "qrels.txt")["102"] == {"0_2": 1}
    assert json.loads((out / "stats.json").read_text())["paragraphs"] == 2


def test_reqa_nq_stage_rejects_a_wrong_checksum(tmp_path):
    result = run_stage("reqa-nq", "--jsonl", TINY, "--sha256", "0" * 64, "--out-dir", tmp_path / "out")
    assert result.returncode == 1 and "sha256 mismatch" in result.stderr
    assert not (tmp_path / "out" / "candidates.jsonl").exists()


@pytest.mark.skipif(not (SHARED_DATA / "nq_open" / "NQ-open.dev.jsonl").exists(), reason="NQ-open dev not present")
def test_nq_open_has_no_passages_so_it_cannot_feed_reqa():
    path = SHARED_DATA / "nq_open" / "NQ-open.dev.jsonl"
    first = next(read_jsonl(path))
    assert set(first) == {"question", "answer"}
    with pytest.raises(StageError, match="line 1: not a Natural Questions example"):
        reqa.build_nq(path)
