"""Chang et al.'s Table 2: ReQA statistics (reqa-statistics) and the table beside the paper's (chang2020-table
--table table2)."""
import json

import pandas as pd
import pytest

from towers.io import StageError, read_json
from towers.datasets.reqa import reqa_statistics
from towers.reports.chang2020 import reqa_table

from conftest import ROOT, run_stage

PAPER = ROOT / "data" / "papers" / "chang2020_table2.csv"

# Two paragraphs; the first has two sentences, so its paragraph is counted once per sentence.
P1 = "the keeper lit the lamp. the harbour light burned whale oil."
P2 = "the keeper left."
CANDIDATES = [
    {"id": "0_0_0", "sentence": "the keeper lit the lamp.", "paragraph": P1},       # 6 + 13 tokens
    {"id": "0_0_1", "sentence": "the harbour light burned whale oil.", "paragraph": P1},   # 7 + 13
    {"id": "0_1_0", "sentence": "the keeper left.", "paragraph": P2},               # 4 + 4
]
QUERIES = {"q1": "keeper lit the lamp", "q2": "whale oil"}   # 4 and 2 tokens
QRELS = "q1 0 0_0_0 1\nq2 0 0_0_1 1\nq2 0 0_1_0 0\n"        # a relevance-0 line is no tuple


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from towers.modeling.tokenizer import train_wordpiece

    out = tmp_path_factory.mktemp("tok")
    train_wordpiece([P1, P2] * 3, out, 100, 1, True)
    return out


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def write_reqa(folder, candidates=CANDIDATES, queries=QUERIES, qrels=QRELS):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in candidates))
    (folder / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    (folder / "qrels.txt").write_text(qrels)
    return folder / "candidates.jsonl", folder / "queries.tsv", folder / "qrels.txt"


def test_statistics_by_hand(tmp_path, tokenizer):
    assert tokenizer.tokenize(P1) == ["the", "keeper", "lit", "the", "lamp", ".", "the", "harbour", "light",
                                      "burned", "whale", "oil", "."]
    assert [len(tokenizer.tokenize(q)) for q in QUERIES.values()] == [4, 2]
    paths = write_reqa(tmp_path)
    expected = {"queries": 2, "candidates": 3, "tuples": 2, "avg_query_tokens": (4 + 2) / 2,
                "avg_doc_tokens": (6 + 13 + 7 + 13 + 4 + 4) / 3, "doc_text": "sentence+paragraph"}
    assert reqa_statistics(*paths, tokenizer) == expected
    # batches that split a paragraph's sentences give the same counts
    assert reqa_statistics(*paths, tokenizer, batch_size=1) == expected
    assert reqa_statistics(*paths, tokenizer, batch_size=2) == expected


def test_qrels_must_name_known_queries_and_candidates(tmp_path, tokenizer):
    paths = write_reqa(tmp_path / "a", qrels="q1 0 9_9_9 1\n")
    with pytest.raises(StageError, match=r"qrels.txt: candidate '9_9_9' is not in .*candidates.jsonl"):
        reqa_statistics(*paths, tokenizer)
    paths = write_reqa(tmp_path / "b", qrels="q7 0 0_0_0 1\n")
    with pytest.raises(StageError, match=r"qrels.txt: query 'q7' is not in .*queries.tsv"):
        reqa_statistics(*paths, tokenizer)
    paths = write_reqa(tmp_path / "c", qrels="q1 0 0_0_0 0\n")
    with pytest.raises(StageError, match="qrels.txt: no \\(query, candidate\\) pair with relevance > 0"):
        reqa_statistics(*paths, tokenizer)
    paths = write_reqa(tmp_path / "d", candidates=CANDIDATES + CANDIDATES[:1])
    with pytest.raises(StageError, match="candidates.jsonl: candidate id '0_0_0' appears twice"):
        reqa_statistics(*paths, tokenizer)
    paths = write_reqa(tmp_path / "e", candidates=[{"id": "0_0_0", "contents": "no sentence"}])
    with pytest.raises(StageError, match="candidates.jsonl: line 1 is not a ReQA candidate"):
        reqa_statistics(*paths, tokenizer)


def test_stage_bad_inputs_give_one_line_and_no_output(tmp_path, tokenizer_dir, capsys):
    from towers.cli import main

    candidates, queries, qrels = write_reqa(tmp_path)
    out = tmp_path / "table2-stats.json"
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_text(json.dumps(CANDIDATES[0]) + "\n{not json\n")
    cases = [
        ((tmp_path / "missing.jsonl", queries, qrels, tokenizer_dir), "missing.jsonl: input file is missing"),
        ((garbled, queries, qrels, tokenizer_dir), "garbled.jsonl: line 2 is not valid JSON"),
        ((candidates, queries, qrels, tmp_path / "no-tokenizer"), "no-tokenizer: tokenizer folder is missing"),
    ]
    for (c, q, r, t), message in cases:
        # in-process (the same entry point as `python -m towers`), to keep the test fast
        code = main(["reqa-statistics", "--candidates", str(c), "--queries", str(q), "--qrels", str(r),
                     "--tokenizer", str(t), "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 1
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and message in lines[0], err
        assert not out.exists() and not list(tmp_path.glob(".table2-stats.json.tmp*"))


def test_stage_writes_the_statistics(tmp_path, tokenizer_dir):
    candidates, queries, qrels = write_reqa(tmp_path)
    out = tmp_path / "table2-stats.json"
    done = run_stage("reqa-statistics", "--candidates", candidates, "--queries", queries, "--qrels", qrels,
                     "--tokenizer", tokenizer_dir, "--out", out)
    assert done.returncode == 0, done.stderr
    stats = read_json(out)
    assert (stats["queries"], stats["candidates"], stats["tuples"]) == (2, 3, 2)
    assert stats["avg_doc_tokens"] == pytest.approx(47 / 3)
    assert read_json(tmp_path / "table2-stats.json.meta.json")["stage"] == "reqa-statistics"


def test_table_puts_paper_values_beside_reproduced(tmp_path):
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({"queries": 708, "candidates": 17018, "tuples": 708, "avg_query_tokens": 12.345,
                                 "avg_doc_tokens": 200.0}))
    rows = [{"dataset": "enwiki-mini", "paper_dataset": p, "stats": stats} for p in ("squad", "nq")]
    frame, twin, _ = reqa_table(rows, PAPER, "table2", "mini", "embedded default")
    assert list(frame["dataset"]) == ["squad", "nq"] and "paper dataset" not in frame   # the paper's name
    for label in ["queries", "candidates", "tuples", "query tokens", "doc tokens"]:
        assert list(frame.columns).index(f"{label} paper") == list(frame.columns).index(label) + 1
    squad, nq = frame.to_dict("records")
    assert (squad["queries"], squad["queries paper"], squad["candidates paper"], squad["tuples paper"]) == (
        708, 97888, 101951, 99024)
    assert (squad["query tokens"], squad["query tokens paper"], squad["doc tokens paper"]) == (
        12.35, 11.55, 291.35)
    assert (nq["queries paper"], nq["candidates paper"], nq["tuples paper"], nq["doc tokens paper"]) == (
        74097, 239008, 74097, 352.67)
    assert set(frame["profile"]) == {"mini"}
    note, = frame["note"].unique()   # said once for the table
    assert "enwiki-mini stands in for SQuAD" in note and "enwiki-mini stands in for Natural Questions" in note
    assert "sentence + paragraph" in note
    assert twin["rows"]["enwiki-mini/nq"] == {"queries": 708, "candidates": 17018, "tuples": 708,
                                              "query tokens": 12.35, "doc tokens": 200.0}
    # a dataset that is the paper's own says nothing about standing in
    own, _, _ = reqa_table([{"dataset": "squad", "paper_dataset": "squad", "stats": stats}], PAPER, "table2", "paper",
                           "paper")
    assert "stands in" not in own.loc[0, "note"]


def test_table_stage_end_to_end(tmp_path):
    stats = tmp_path / "stats.json"
    stats.write_text(json.dumps({"queries": 2, "candidates": 3, "tuples": 2, "avg_query_tokens": 3.0,
                                 "avg_doc_tokens": 15.67}))
    csv, twin = tmp_path / "table2.csv", tmp_path / "table2.json"

    def spec(dataset, paper):   # a --row: a JSON object of the stage's fields
        return json.dumps({"dataset": dataset, "paper_dataset": paper, "stats": str(stats)})

    done = run_stage("chang2020-table", "--table", "table2", "--paper", PAPER, "--profile", "mini", "--note", "note", "--row",
                     spec("enwiki-mini", "squad"), "--row", spec("enwiki-mini", "nq"), "--csv", csv, "--json", twin)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(csv)
    assert list(table["queries paper"]) == [97888, 74097] and list(table["queries"]) == [2, 2]
    assert all(isinstance(v, (int, float)) for row in read_json(twin)["rows"].values() for v in row.values())
    # the note and the profile said once, in the record, not in the rows; the twin holds numbers only
    assert "note" not in table and "profile" not in table and list(read_json(twin)) == ["rows"]
    record = read_json(f"{csv}.meta.json")
    assert record["note"].startswith("note; enwiki-mini stands in for SQuAD")
    assert record["context"] == {"profile": "mini"} and list(table["dataset"]) == ["squad", "nq"]
    assert record["labels"] == {"table": "table2", "profile": "mini"}
    bad = run_stage("chang2020-table", "--table", "table2", "--paper", PAPER, "--profile", "mini", "--note", "note", "--row",
                    spec("enwiki-mini", "triviaqa"), "--csv", tmp_path / "bad.csv", "--json", tmp_path / "bad.json")
    assert bad.returncode == 1 and "chang2020_table2.csv: no values for dataset 'triviaqa'" in bad.stderr
    assert not (tmp_path / "bad.csv").exists()
