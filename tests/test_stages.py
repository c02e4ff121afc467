"""Stages as commands: bad input stops them with one line naming the file, and no finished-looking output."""
import json
from pathlib import Path

import pytest

from conftest import FIXTURES, run_stage


def assert_one_line_error(result, expected):
    assert result.returncode == 1
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert "Traceback" not in result.stderr
    assert lines[-1] == f"error: {expected}", result.stderr


def test_missing_input_file(tmp_path):
    out = tmp_path / "eval.json"
    result = run_stage("evaluate", "--run", tmp_path / "nope.trec", "--qrels", tmp_path / "q", "--queries",
                       tmp_path / "t", "--metrics", "R@1", "--out", out)
    assert_one_line_error(result, f"{tmp_path / 'nope.trec'}: input file is missing")
    assert list(tmp_path.iterdir()) == []


def test_corrupt_dump_fails_its_checksum(tmp_path):
    dump = tmp_path / "dump.xml"
    dump.write_text((FIXTURES / "tiny-wiki.xml").read_text().replace("1871", "1872"))
    result = run_stage("parse-wiki", "--dump", dump, "--sha256", "0" * 64, "--articles", tmp_path / "a.jsonl",
                       "--redirects", tmp_path / "r.json", "--stats", tmp_path / "s.json")
    assert_one_line_error(result, f"{dump}: sha256 mismatch (expected {'0' * 64}); the file is corrupt or a different version")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.xml"]


def test_truncated_dump(tmp_path):
    dump = tmp_path / "dump.xml"
    dump.write_text((FIXTURES / "tiny-wiki.xml").read_text()[:1500])
    result = run_stage("parse-wiki", "--dump", dump, "--articles", tmp_path / "a.jsonl",
                       "--redirects", tmp_path / "r.json", "--stats", tmp_path / "s.json")
    assert result.returncode == 1 and f"error: {dump}: not a readable MediaWiki XML dump" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.xml"]


def _articles(tmp_path):
    result = run_stage("parse-wiki", "--dump", FIXTURES / "tiny-wiki.xml", "--articles", tmp_path / "a.jsonl",
                       "--redirects", tmp_path / "r.json", "--stats", tmp_path / "s.json")
    assert result.returncode == 0, result.stderr
    return tmp_path / "a.jsonl"


def test_empty_question_set(tmp_path):
    questions = tmp_path / "questions.tsv"
    questions.write_text("article\tquestion\tanswer\tsentence_start\n")
    result = run_stage("reqa-wiki", "--articles", _articles(tmp_path), "--questions", questions,
                       "--out-dir", tmp_path / "reqa")
    assert_one_line_error(result, f"{questions}: the question set is empty")
    assert not (tmp_path / "reqa").exists()


def test_answer_missing_from_its_article(tmp_path):
    questions = tmp_path / "questions.tsv"
    lines = (FIXTURES / "tiny-questions.tsv").read_text().splitlines()
    lines[3] = lines[3].replace("Ewan Todd", "Ewan Tod d")
    questions.write_text("\n".join(lines) + "\n")
    result = run_stage("reqa-wiki", "--articles", _articles(tmp_path), "--questions", questions,
                       "--out-dir", tmp_path / "reqa")
    assert_one_line_error(result, f"{questions}: line 4: answer 'Ewan Tod d' not found in article 'Harbour lighthouse'")
    assert not (tmp_path / "reqa").exists()


def test_reqa_and_split_outputs(tmp_path):
    result = run_stage("reqa-wiki", "--articles", _articles(tmp_path), "--questions", FIXTURES / "tiny-questions.tsv",
                       "--out-dir", tmp_path / "reqa")
    assert result.returncode == 0, result.stderr
    stats = json.loads((tmp_path / "reqa" / "stats.json").read_text())
    assert stats == {"queries": 12, "candidates": 17, "tuples": 12, "paragraphs": 9, "articles_with_questions": 3}
    meta = json.loads((tmp_path / "reqa" / "candidates.jsonl.meta.json").read_text())
    assert meta["stage"] == "reqa-wiki" and "pysbd" in meta["versions"]
    result = run_stage("split", "--queries", tmp_path / "reqa" / "queries.tsv", "--train-fraction", 0.5,
                       "--seed", 1, "--out-dir", tmp_path / "split")
    assert result.returncode == 0, result.stderr
    sizes = {n: len((tmp_path / "split" / f"{n}.tsv").read_text().splitlines()) for n in ("train", "valid", "test")}
    assert sizes == {"train": 5, "valid": 1, "test": 6}


def test_bad_faiss_factory(tmp_path):
    import numpy as np

    np.save(tmp_path / "e.npy", np.ones((4, 8), dtype=np.float32))
    result = run_stage("build-index", "--embeddings", tmp_path / "e.npy", "--factory", "IVFX,PQ", "--out",
                       tmp_path / "i.faiss")
    assert result.returncode == 1 and "bad factory string 'IVFX,PQ'" in result.stderr
    assert not (tmp_path / "i.faiss").exists()


def test_index_too_small_to_train_is_one_line(tmp_path):
    import numpy as np

    np.save(tmp_path / "e.npy", np.random.default_rng(0).standard_normal((9, 12)).astype(np.float32))
    result = run_stage("build-index", "--embeddings", tmp_path / "e.npy", "--factory", "OPQ6,IVF1,PQ6", "--out",
                       tmp_path / "i.faiss")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "OPQ6,IVF1,PQ6" in lines[-1] and "cannot train on 9 vectors" in lines[-1] and "256" in lines[-1]
    assert not (tmp_path / "i.faiss").exists()


def test_download_checks_sha256_and_keeps_nothing_on_mismatch(tmp_path):
    import hashlib

    source = tmp_path / "source.json"
    source.write_text('{"data": []}')
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    good = run_stage("download", "--url", source.as_uri(), "--sha256", digest, "--out", tmp_path / "raw" / "ok.json")
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "raw" / "ok.json").read_text() == source.read_text()
    bad = run_stage("download", "--url", source.as_uri(), "--sha256", "0" * 64, "--out", tmp_path / "raw" / "bad.json",
                    "--retries", 1)
    assert bad.returncode == 1 and "sha256 mismatch" in bad.stderr
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == ["ok.json", "ok.json.meta.json"]


def test_train_margin_with_corrupt_mined_lists(tmp_path):
    from towers.modeling.models import random_bag_of_words

    random_bag_of_words(tmp_path / "bow", buckets=64, dim=4, max_features=16, seed=0)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": "x", "sentence": f"s {i}",
                                                          "paragraph": "p", "title": "t"}) + "\n" for i in range(4)))
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    (tmp_path / "train.tsv").write_text("q1\twhat is s 1\n")
    mined = tmp_path / "mined.jsonl"
    mined.write_text('{"qid": "q1", "candidates": ["d2"]}\n{"qid": "q2", \n')
    out = tmp_path / "model"
    result = run_stage("train-margin", "--start", tmp_path / "bow", "--candidates", tmp_path / "c.jsonl",
                       "--qrels", tmp_path / "qrels.txt", "--train", tmp_path / "train.tsv",
                       "--valid", tmp_path / "valid.tsv", "--mined", mined, "--out", out, "--margin", 0.1,
                       "--state-dir", tmp_path / "state", "--seed", 1, "--steps", 2, "--batch-size", 2, "--lr", 0.01,
                       "--warmup-ratio", 0, "--query-length", 8, "--doc-length", 8, "--embedding-dim", 4,
                       "--doc-text", "sentence")
    assert_one_line_error(result, f"{mined}: line 2 is not valid JSON (Expecting property name enclosed in double quotes)")
    assert not out.exists() and not list(tmp_path.glob(".model*"))


def seeded_row(**fields) -> str:
    row = {"dataset": "mini", "paper_dataset": "squad", "split": "5-95", "model": "QuadrupletBERT", "margin": "0.1",
           "index": "flat", "evals": ["a.json"]}
    return json.dumps({k: v for k, v in {**row, **fields}.items() if v is not None})


@pytest.mark.parametrize("row, problem", [
    ('mini|squad|5-95|QuadrupletBERT|0.1|flat|a.json', "is not a JSON object"),
    (seeded_row(index=None), "lacks index"),
    (seeded_row(seed="13"), "has no field 'seed'"),
    (seeded_row(split=""), "field 'split' must be a non-empty string"),
    (seeded_row(margin=0.1), "field 'margin' must be a string"),
    (seeded_row(evals="a.json"), "field 'evals' must be a non-empty list of non-empty strings"),
    (seeded_row(evals=[]), "field 'evals' must be a non-empty list of non-empty strings"),
])
def test_seeded_table_with_a_malformed_row(tmp_path, row, problem):
    """The rows as QuadrupletBERT's layout declares them (towers.reports.quadrupletbert.LAYOUTS)."""
    result = run_stage("quadrupletbert-table", "--table", "table1", "--paper", "data/papers/quadrupletbert.csv", "--profile", "x",
                       "--note", "n", "--option", "metrics=R@1", "--option", "exact_index=flat", "--row", row,
                       "--csv", tmp_path / "t.csv",
                       "--json", tmp_path / "t.json")
    assert_one_line_error(result, f"--row: {row} {problem} (a row is a JSON object of dataset, paper_dataset, split, "
                                  "model, margin, index, evals)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("options, problem", [
    (["metrics=R@1"], "--option: exact_index is given 0 times; the table takes it once"),
    (["metrics=R@1", "exact_index=flat", "exact_index=ivf"], "--option: exact_index is given 2 times"),
    (["metrics=R@1", "exact_index=flat", "split=5-95"], "--option: 'split' is not an option of this table (metrics, "
                                                         "exact_index)"),
    (["metrics"], "--option: 'metrics' is not NAME=VALUE"),
])
def test_a_table_with_an_option_missing_or_not_its_own(tmp_path, options, problem):
    words = [w for option in options for w in ("--option", option)]
    result = run_stage("quadrupletbert-table", "--table", "table1", "--paper", "data/papers/quadrupletbert.csv",
                       "--profile", "x", "--note", "n", *words, "--row", seeded_row(), "--csv", tmp_path / "t.csv",
                       "--json", tmp_path / "t.json")
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1].startswith(f"error: {problem}")
    assert list(tmp_path.iterdir()) == []


def test_pretraining_pairs_with_an_unknown_task(tmp_path):
    result = run_stage("pretraining-pairs", "--articles", _articles(tmp_path), "--task", "ict+xyz", "--seed", 1,
                       "--tokenizer", tmp_path / "tok", "--out", tmp_path / "pairs.jsonl", "--stats", tmp_path / "s.json")
    assert result.returncode == 1 and result.stderr.strip().splitlines()[-1].startswith("error: --task: tasks must be")
    assert not (tmp_path / "pairs.jsonl").exists()


def _eval_world(tmp_path):
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": f"text {i}"}) + "\n"
                                                       for i in range(4)))
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\nq3 0 d3 1\n")
    (tmp_path / "test.tsv").write_text("q1\tone\nq2\ttwo\nq3\tthree\nq4\tfour\n")   # q4: not judged


def _evaluate(tmp_path, run_lines):
    (tmp_path / "run.trec").write_text("".join(f"{q} Q0 {d} {r} {10 - r} t\n" for q, d, r in run_lines))
    return run_stage("evaluate", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt", "--queries",
                     tmp_path / "test.tsv", "--metrics", "R@1", "--candidates", tmp_path / "candidates.jsonl",
                     "--out", tmp_path / "eval.json")


def test_evaluation_warns_about_and_counts_ids_that_do_not_meet(tmp_path):
    """Unjudged test queries, judged ones the run misses and documents outside the collection score nothing
    silently: each is a warning naming the file and a count in the record."""
    _eval_world(tmp_path)
    result = _evaluate(tmp_path, [("q1", "d1", 1), ("q2", "x9", 1), ("q2", "d2", 2)])   # q3 missing, x9 unknown
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings == [
        f"warning: {tmp_path / 'qrels.txt'}: 1 of the 4 test queries of {tmp_path / 'test.tsv'} are not judged "
        "(first: q4); they are left out of every metric",
        f"warning: {tmp_path / 'run.trec'}: 1 of the 3 judged test queries have no ranking in it (first: q3); "
        "they score 0",
        f"warning: {tmp_path / 'run.trec'}: 1 of the 3 documents it ranks for the test queries are not in "
        f"{tmp_path / 'candidates.jsonl'} (first: x9); they count as not relevant"]
    counts = json.loads((tmp_path / "eval.json.meta.json").read_text())["counts"]
    assert (counts["queries_not_judged"], counts["queries_missing_from_run"], counts["documents_not_in_collection"]) \
        == (1, 1, 1)


def test_a_run_that_matches_no_test_query_or_no_document_is_refused(tmp_path):
    _eval_world(tmp_path)
    other = _evaluate(tmp_path, [("z1", "d1", 1), ("z2", "d2", 1)])   # another split's or dataset's run
    assert_one_line_error(other, f"{tmp_path / 'run.trec'}: none of its 2 queries is one of the 3 judged test "
                                 f"queries of {tmp_path / 'test.tsv'} (first here: z1, first there: q1)")
    foreign = _evaluate(tmp_path, [("q1", "x1", 1), ("q2", "x2", 1)])   # ids of another collection
    assert_one_line_error(foreign, f"{tmp_path / 'run.trec'}: none of the 2 documents it ranks for the test queries "
                                   f"is in {tmp_path / 'candidates.jsonl'} (first: x1)")
    assert not (tmp_path / "eval.json").exists()


def test_a_repeated_question_or_query_id_is_refused(tmp_path):
    questions = tmp_path / "questions.tsv"
    lines = (FIXTURES / "tiny-questions.tsv").read_text().splitlines()
    questions.write_text("\n".join(lines + [lines[2]]) + "\n")   # a row pasted twice
    result = run_stage("reqa-wiki", "--articles", _articles(tmp_path), "--questions", questions,
                       "--out-dir", tmp_path / "reqa")
    assert_one_line_error(result, f"{questions}: line {len(lines) + 1} asks the question of line 3 again (same article)")
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tone\nq2\ttwo\nq1\tone again\n")
    result = run_stage("split", "--queries", queries, "--train-fraction", 0.5, "--seed", 1, "--out-dir", tmp_path / "s")
    assert_one_line_error(result, f"{queries}: line 3 repeats query id q1")
    assert not (tmp_path / "reqa").exists() and not (tmp_path / "s").exists()


@pytest.mark.extended
def test_a_corrupt_lucene_segment_is_one_line_naming_the_index(tmp_path):
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": f"lighthouse number {i}"}) + "\n"
                                              for i in range(20)))
    built = run_stage("bm25-index", "--candidates", tmp_path / "c.jsonl", "--index", tmp_path / "index", "--threads", 1)
    assert built.returncode == 0, built.stderr[-2000:]
    for segment in (tmp_path / "index").iterdir():   # every data file of the segment overwritten mid-way
        if segment.name.startswith("_"):
            data = bytearray(segment.read_bytes())
            data[len(data) // 2:] = b"\0" * (len(data) - len(data) // 2)
            segment.write_bytes(bytes(data))
    (tmp_path / "q.tsv").write_text("q1\tlighthouse number 3\n")
    search = ["bm25-search", "--index", tmp_path / "index", "--queries", tmp_path / "q.tsv",
              "--run", tmp_path / "run.trec", "--k1", 0.9, "--b", 0.4, "--depth", 5, "--threads", 1]
    result = run_stage(*search)   # the index's record knows what it wrote: the damage is seen before Lucene reads
    assert result.returncode == 1 and "changed after stage bm25-index wrote it" in result.stderr, result.stderr[-2000:]
    (tmp_path / "index.meta.json").unlink()   # an index from elsewhere, with no record: Lucene's own check
    result = run_stage(*search)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith(
        f"error: {tmp_path / 'index'}: not a readable Lucene index, damaged or incomplete")
    assert not (tmp_path / "run.trec").exists()


def test_a_read_only_output_folder_is_one_line_naming_the_output(tmp_path):
    """(As root, permission bits do not stop writes: then a folder the kernel refuses writes in stands in.)"""
    def refuses_writes(folder):
        try:
            (folder / ".probe").write_text("")
        except OSError:
            return True
        (folder / ".probe").unlink()
        return False

    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    if not refuses_writes(folder):
        folder = Path("/sys/kernel")
        if not folder.is_dir() or not refuses_writes(folder):
            pytest.skip("no folder refuses writes here")
    _eval_world(tmp_path)
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 t\n")
    result = run_stage("evaluate", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt", "--queries",
                       tmp_path / "test.tsv", "--metrics", "R@1", "--out", folder / "eval.json")
    assert_one_line_error(result, f"{folder / 'eval.json'}: Permission denied")
    assert not any(p.name.startswith((".eval.json", "eval.json")) for p in folder.iterdir())


def test_every_stage_has_a_main_output_to_lock():
    """Every stage but the ones that only read (check) names the output it writes."""
    import argparse

    from towers.stages import WRITES_NOTHING, load_all, main_output

    for name, (_, arguments) in load_all().items():
        args = argparse.Namespace(**{flag.lstrip("-").replace("-", "_"): f"path-{flag}" for flag, _ in arguments})
        assert bool(main_output(name, args)) == (name not in WRITES_NOTHING), name


def test_a_stage_refuses_to_write_an_output_another_live_stage_holds(tmp_path):
    """A stage orphaned by a kill -9 of Snakemake still holds its output: a duplicate started after
    `snakemake --unlock` stops in one line naming the holder, and runs once the holder is gone."""
    import subprocess
    import sys

    _eval_world(tmp_path)
    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 1.0 t\n")
    out = tmp_path / "eval" / "bm25.json"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom towers.io import sole_writer\n"
                               "with sole_writer(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(60)\n",
                               str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        args = ["evaluate", "--run", tmp_path / "run.trec", "--qrels", tmp_path / "qrels.txt", "--queries",
                tmp_path / "test.tsv", "--metrics", "R@1", "--out", out]
        result = run_stage(*args)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith(f"error: {out}: pid {holder.pid} on ")
        assert not out.exists()
    finally:
        holder.kill()   # as kill -9 would: the kernel drops the lock
        holder.wait()
    assert run_stage(*args).returncode == 0 and out.exists()
    assert not (out.parent / f".{out.name}.lock").exists()


def test_towers_device_keeps_a_stage_on_the_cpu_and_refuses_other_values(monkeypatch):
    import torch

    from towers.runtime import device

    monkeypatch.setenv("TOWERS_DEVICE", "cpu")
    assert device() == torch.device("cpu")
    monkeypatch.setenv("TOWERS_DEVICE", "gpu")
    with pytest.raises(ValueError, match="TOWERS_DEVICE must be cpu or cuda"):
        device()
    monkeypatch.delenv("TOWERS_DEVICE")
    assert device().type == ("cuda" if torch.cuda.is_available() else "cpu")
