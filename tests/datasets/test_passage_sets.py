"""Passage-ranking datasets (RepBERT): the MS MARCO TSV, BEIR JSONL and Wikipedia-paragraph loaders, MS MARCO's
text triples as ids, the md5 download check, one-line input errors, and the workflow's plan for passage kinds."""
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
import yaml

from towers import cli
from towers.datasets import collection, readers, reqa
from towers.io import StageError, read_qrels, read_queries
from benchmarks.workflow_harness import copy_workflow, job_counts

from conftest import FIXTURES, ROOT, SHARED_DATA, run_stage

MSMARCO = SHARED_DATA / "msmarco"
MS_TINY = FIXTURES / "msmarco-tiny"
BEIR_TINY = FIXTURES / "beir-tiny"
MS_FILES = ["collection.tsv", "queries.train.tsv", "qrels.train.tsv", "queries.dev.small.tsv", "qrels.dev.small.tsv"]
needs_shared = pytest.mark.skipif(not MSMARCO.is_dir(), reason="../shared/data/msmarco is absent (real data is optional)")


def _main(*args):
    assert cli.main([str(a) for a in args]) == 0


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _reader(path, read):
    with open(path, encoding="utf-8", newline="\n") as handle:
        return list(read(handle, path))


def _build(stage, source, out, *more):
    _main(stage, "--source", source, "--seed", 13, "--out-dir", out / "collection", "--split-dir", out / "splits/dev", *more)
    split = {name: read_queries(out / f"splits/dev/{name}.tsv") if (out / f"splits/dev/{name}.tsv").stat().st_size
             else {} for name in ("train", "valid", "test")}
    return _rows(out / "collection/candidates.jsonl"), split, json.loads((out / "collection/stats.json").read_text())


def _tar(path, folder, names, prefix=""):
    with tarfile.open(path, "w:gz") as archive:
        for name in names:
            archive.add(folder / name, arcname=prefix + name)
    return path


# --- real MS MARCO queries and qrels (../shared/data/msmarco) -------------------------------------

@needs_shared
def test_real_dev_small_queries_and_qrels():
    queries = _reader(MSMARCO / "topics.msmarco-passage.dev-subset.txt", readers.read_queries_tsv)
    assert len(queries) == 6980 and len({q for _, q, _ in queries}) == 6980
    assert (2, "2", "Androgen receptor define") in queries          # " Androgen..." in the file: spaces tidied
    qrels = _reader(MSMARCO / "qrels.msmarco-passage.dev-subset.txt", readers.read_qrels_trec)
    assert len(qrels) == 7437 and {rel for *_, rel in qrels} == {1}
    assert {q for _, q, _, _ in qrels} == {q for _, q, _ in queries}
    assert qrels[0] == (1, "300674", "7067032", 1)


@needs_shared
def test_real_dl19_topics_and_graded_qrels():
    topics = _reader(MSMARCO / "topics.dl19-passage.txt", readers.read_queries_tsv)
    qrels = _reader(MSMARCO / "qrels.dl19-passage.txt", readers.read_qrels_trec)   # qid Q0 pid rel
    assert len(topics) == 43 and len(qrels) == 9260
    grades = {}
    for *_, rel in qrels:
        grades[rel] = grades.get(rel, 0) + 1
    assert grades == {0: 5158, 1: 1601, 2: 1804, 3: 697}
    assert {q for _, q, _, _ in qrels} == {q for _, q, _ in topics}


def _real_folder(tmp_path, dev, queries, qrels):
    """A MS MARCO TSV folder: the real queries and qrels (linked, not copied) and a stand-in collection that
    holds every judged passage."""
    folder = tmp_path / "msmarco"
    folder.mkdir()
    (folder / f"queries.{dev}.tsv").symlink_to(queries)
    (folder / f"qrels.{dev}.tsv").symlink_to(qrels)
    pids = sorted({line.split()[2] for line in qrels.read_text().splitlines() if line.strip()}, key=int)
    with gzip.open(folder / "collection.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(f"{pid}\tstand-in passage {pid}\n" for pid in pids)
    return folder, len(pids)


@needs_shared
def test_real_dev_small_builds_the_dev_split(tmp_path):
    folder, n = _real_folder(tmp_path, "dev.small", MSMARCO / "topics.msmarco-passage.dev-subset.txt",
                             MSMARCO / "qrels.msmarco-passage.dev-subset.txt")
    rows, split, stats = _build("passages-msmarco", folder, tmp_path / "out", "--train", "")
    assert len(rows) == n and stats["candidates"] == n
    assert len(split["test"]) == 6980 and not split["train"] and not split["valid"]
    assert stats["tuples"] == stats["judgements"] == 7437
    assert read_qrels(tmp_path / "out/collection/qrels.txt") == read_qrels(MSMARCO / "qrels.msmarco-passage.dev-subset.txt")


@needs_shared
def test_real_dl19_keeps_graded_qrels(tmp_path):
    folder, _ = _real_folder(tmp_path, "dl19", MSMARCO / "topics.dl19-passage.txt", MSMARCO / "qrels.dl19-passage.txt")
    _, split, stats = _build("passages-msmarco", folder, tmp_path / "out", "--train", "", "--dev", "dl19")
    assert len(split["test"]) == 43
    assert stats["judgements"] == 9260 and stats["tuples"] == 1601 + 1804 + 697
    assert read_qrels(tmp_path / "out/collection/qrels.txt") == read_qrels(MSMARCO / "qrels.dl19-passage.txt")


def _graded(tmp_path, queries, qrels, pids):
    """passages-graded over a stand-in collection of `pids`: (exit code, stderr, output folder)."""
    candidates = tmp_path / "base" / "candidates.jsonl"
    candidates.parent.mkdir(parents=True, exist_ok=True)
    candidates.write_text("".join(json.dumps({"id": pid, "contents": f"passage {pid}"}) + "\n" for pid in pids))
    out = tmp_path / "graded"
    done = run_stage("passages-graded", "--queries", queries, "--qrels", qrels, "--candidates", candidates,
                     "--out-dir", out / "collection", "--split-dir", out / "splits/dev")
    return done.returncode, done.stderr, out


@needs_shared
def test_real_dl19_as_a_graded_set_over_the_collection(tmp_path):
    """TREC DL 2019 the way the paper profile reads it: gzipped topics, graded qrels, MS MARCO's passages."""
    topics = tmp_path / "msmarco-test2019-queries.tsv.gz"
    with gzip.open(topics, "wt", encoding="utf-8") as handle:
        handle.write((MSMARCO / "topics.dl19-passage.txt").read_text())
        handle.write("999999999\tan unjudged test query\n")             # the official file has 157 of these
    qrels = MSMARCO / "qrels.dl19-passage.txt"
    pids = sorted({line.split()[2] for line in qrels.read_text().splitlines() if line.strip()})
    code, err, out = _graded(tmp_path, topics, qrels, pids)
    assert code == 0, err
    assert len(read_queries(out / "splits/dev/test.tsv")) == 43 and (out / "splits/dev/train.tsv").read_text() == ""
    assert read_qrels(out / "collection/qrels.txt") == read_qrels(qrels)
    stats = json.loads((out / "collection/stats.json").read_text())
    assert stats["grades"] == {"0": 5158, "1": 1601, "2": 1804, "3": 697} and stats["dropped_queries"] == {"unjudged": 1}


def test_a_graded_set_refuses_a_passage_outside_the_collection(tmp_path):
    queries, qrels = tmp_path / "q.tsv", tmp_path / "qrels.txt"
    queries.write_text("1\tfirst query\n2\tsecond query\n")
    qrels.write_text("1 Q0 p1 3\n1 Q0 p2 0\n2 Q0 p9 2\n")
    code, err, out = _graded(tmp_path, queries, qrels, ["p1", "p2"])
    assert code != 0 and "qrels.txt: line 3: query 2 judges passage p9, which is not in" in err
    assert not (out / "collection").exists() or not any((out / "collection").iterdir())


# --- MS MARCO TSV form: folder, gzipped files, the official tar.gz packing ------------------------

def test_msmarco_folder(tmp_path):
    rows, split, stats = _build("passages-msmarco", MS_TINY, tmp_path / "out")
    assert rows[0] == {"id": "0", "contents": "The Eiffel Tower is a wrought-iron lattice tower in Paris, completed in 1889."}
    assert [r["id"] for r in rows] == [str(i) for i in range(8)]
    assert split["test"] == {"2001": "what converts light into chemical energy", "2002": "highest mountain on earth",
                             "2003": "which river carries the most water"}
    # 1005 has no qrels line: not a training query; one of the other four is held out as valid
    assert len(split["valid"]) == 1 and set(split["train"]) | set(split["valid"]) == {"1001", "1002", "1003", "1004"}
    assert stats["dropped_queries"] == {"test_unjudged": 0, "train_unjudged": 1, "train_also_test": 0}
    qrels = read_qrels(tmp_path / "out/collection/qrels.txt")
    assert qrels["2003"] == {"2": 1, "5": 0} and qrels["1002"] == {"4": 1}       # train and test in one file
    assert stats["tuples"] == 7 and stats["judgements"] == 8 and stats["queries"] == 7
    assert list(read_queries(tmp_path / "out/collection/queries.tsv")) == ["2001", "2002", "2003", "1001", "1002", "1003",
                                                                      "1004"]
    meta = json.loads((tmp_path / "out/collection/candidates.jsonl.meta.json").read_text())
    assert meta["stage"] == "passages-msmarco" and meta["counts"]["candidates"] == 8


def test_msmarco_tar_gz_and_gzipped_members_give_the_same_dataset(tmp_path):
    _build("passages-msmarco", MS_TINY, tmp_path / "folder")
    packed = tmp_path / "pack"
    packed.mkdir()
    for name in MS_FILES:
        data = (MS_TINY / name).read_bytes()
        if name == "collection.tsv":
            (packed / "collection.tsv.gz").write_bytes(gzip.compress(data))
        else:
            (packed / name).write_bytes(data)
    # collectionandqueries.tar.gz's layout: the files at the top, the collection not first
    archive = _tar(tmp_path / "collectionandqueries.tar.gz", packed, ["queries.dev.small.tsv", "qrels.train.tsv",
                                                                     "collection.tsv.gz", "qrels.dev.small.tsv",
                                                                     "queries.train.tsv"])
    md5 = hashlib.md5(archive.read_bytes()).hexdigest()
    _build("passages-msmarco", archive, tmp_path / "tar", "--md5", md5)
    for name in ["collection/candidates.jsonl", "collection/queries.tsv", "collection/qrels.txt", "splits/dev/train.tsv",
                 "splits/dev/valid.tsv", "splits/dev/test.tsv"]:
        assert (tmp_path / "tar" / name).read_bytes() == (tmp_path / "folder" / name).read_bytes(), name
    # a folder inside the archive is fine too
    nested = _tar(tmp_path / "nested.tar.gz", MS_TINY, MS_FILES, prefix="collectionandqueries/")
    _build("passages-msmarco", nested, tmp_path / "nested")
    assert (tmp_path / "nested/collection/qrels.txt").read_bytes() == (tmp_path / "folder/collection/qrels.txt").read_bytes()


def test_valid_split_is_seeded_and_capped(tmp_path):
    def valid(out, *more):
        return _build("passages-msmarco", MS_TINY, tmp_path / out, *more)[1]["valid"]

    first, again = valid("a", "--valid-fraction", "0.5"), valid("b", "--valid-fraction", "0.5")
    assert len(first) == 2 and first == again
    assert len(valid("c", "--valid-fraction", "0.5", "--max-valid", "1")) == 1
    assert valid("d", "--valid-fraction", "0") == {}
    assert collection.valid_sample([str(i) for i in range(1000)], 0.1, 25, 13) == \
        collection.valid_sample([str(i) for i in reversed(range(1000))], 0.1, 25, 13)   # not the input order


def test_no_training_files(tmp_path):
    _, split, stats = _build("passages-msmarco", MS_TINY, tmp_path / "out", "--train", "")
    assert len(split["test"]) == 3 and not split["train"] and not split["valid"]
    assert stats["queries"] == 3


def test_train_and_test_ids_must_not_collide(tmp_path):
    folder = tmp_path / "ms"
    shutil.copytree(MS_TINY, folder)
    with open(folder / "queries.train.tsv", "a") as handle:
        handle.write("2001\ta different question under a dev id\n")
    with open(folder / "qrels.train.tsv", "a") as handle:
        handle.write("2001\t0\t1\t1\n")
    result = run_stage("passages-msmarco", "--source", folder, "--seed", 1, "--out-dir", tmp_path / "out/collection",
                       "--split-dir", tmp_path / "out/splits/dev")
    assert_one_line_error(result, f"{folder / 'queries.train.tsv'}: query id 2001 is also a test query "
                                  f"({folder / 'queries.dev.small.tsv'}) with another text; ids must not collide")
    assert not (tmp_path / "out").exists()


# --- BEIR JSONL form ------------------------------------------------------------------------------

def test_beir_folder(tmp_path):
    rows, split, stats = _build("passages-beir", BEIR_TINY, tmp_path / "out", "--train-split", "train",
                                "--valid-fraction", "0")
    assert rows[0] == {"id": "d1", "contents": "Eiffel Tower A wrought-iron lattice tower in Paris, completed in 1889.",
                       "title": "Eiffel Tower"}
    assert rows[2] == {"id": "d3", "contents": "Mount Everest is the highest mountain above sea level.", "title": ""}
    assert split["test"] == {"q1": "when was the eiffel tower completed", "q3": "highest mountain"}
    # q3 is judged in both train and test qrels: the test side keeps it; q5 is in no chosen split
    assert split["train"] == {"q2": "how do plants make energy", "q4": "how do bees communicate"}
    assert stats["dropped_queries"]["train_also_test"] == 1 and stats["queries"] == 4 and stats["tuples"] == 4


def test_beir_zip_as_downloaded(tmp_path):
    _build("passages-beir", BEIR_TINY, tmp_path / "folder")
    archive = tmp_path / "beir-tiny.zip"
    with zipfile.ZipFile(archive, "w") as packed:      # the official zips hold <name>/corpus.jsonl, ...
        for path in sorted(BEIR_TINY.rglob("*.*")):
            packed.write(path, f"beir-tiny/{path.relative_to(BEIR_TINY)}")
    rows, split, stats = _build("passages-beir", archive, tmp_path / "zip")
    assert (tmp_path / "zip/collection/candidates.jsonl").read_bytes() == (tmp_path / "folder/collection/candidates.jsonl").read_bytes()
    assert set(split["test"]) == {"q1", "q3"} and not split["train"] and stats["eval_split"] == "test"


# --- the mini dataset's passage form: paragraphs, questions, ICT pseudo-queries -------------------

@pytest.fixture
def tiny_passages(tmp_path, tiny_articles):
    articles, _ = tiny_articles
    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in articles))

    def build(out, seed=13, ict=5, dev=0.25):
        _main("passages-wiki", "--articles", path, "--questions", FIXTURES / "tiny-questions.tsv",
              "--ict-queries", ict, "--dev-fraction", dev, "--valid-fraction", 0.1, "--seed", seed,
              "--out-dir", tmp_path / out / "collection", "--split-dir", tmp_path / out / "splits/dev")
        return tmp_path / out

    return articles, build


def test_paragraphs_are_passages_and_questions_point_at_them(tiny_passages):
    articles, build = tiny_passages
    out = build("a")
    rows = _rows(out / "collection/candidates.jsonl")
    assert [r["id"] for r in rows] == ["7_0", "7_1", "7_2", "7_3", "9_0", "9_1", "9_2", "11_0", "11_1"]
    candidates = {c["id"]: c for a in articles for c in reqa.article_candidates(a)}
    by_id = {r["id"]: r for r in rows}
    for cid, c in candidates.items():   # the same paragraph numbering as the ReQA (sentence) form
        passage = by_id[cid.rsplit("_", 1)[0]]
        assert passage["contents"] == f"{c['title']} {c['paragraph']}" and passage["title"] == c["title"]
    queries, qrels, _ = reqa.resolve_questions(FIXTURES / "tiny-questions.tsv", articles)
    built = read_qrels(out / "collection/qrels.txt")
    for qid, docs in qrels.items():
        (sentence,) = docs
        assert built[qid] == {sentence.rsplit("_", 1)[0]: 1}
        assert candidates[sentence]["sentence"] in by_id[sentence.rsplit("_", 1)[0]]["contents"]


def test_dev_split_and_ict_queries(tiny_passages):
    _, build = tiny_passages
    out = build("a")
    split = {name: read_queries(out / f"splits/dev/{name}.tsv") for name in ("train", "valid", "test")}
    stats = json.loads((out / "collection/stats.json").read_text())
    assert len(split["test"]) == 3 and all(q.startswith("q") for q in split["test"])      # 25% of 12 questions
    assert len(split["valid"]) == 1 and all(q.startswith("q") for q in split["valid"])
    ict = {q: t for q, t in split["train"].items() if q.startswith("ict-")}
    assert len(ict) == 5 and len(split["train"]) == 8 + 5
    rows = {r["id"]: r for r in _rows(out / "collection/candidates.jsonl")}
    qrels = read_qrels(out / "collection/qrels.txt")
    for qid, text in ict.items():
        (passage,) = qrels[qid]
        assert qid == f"ict-{passage}" and text in rows[passage]["contents"]
        assert passage != "9_2"                       # the one paragraph of a single sentence
    assert stats["ict_queries"] == 5 and stats["train_queries"] == 13 and stats["ict_paragraphs_available"] == 8
    # seeded: the same seed, the same dataset; another seed, another
    again = build("b")
    for name in ["collection/queries.tsv", "collection/qrels.txt", "splits/dev/test.tsv", "splits/dev/train.tsv"]:
        assert (out / name).read_bytes() == (again / name).read_bytes()
    other = build("c", seed=14)
    assert (other / "collection/queries.tsv").read_bytes() != (out / "collection/queries.tsv").read_bytes()
    # more ICT queries than paragraphs of two or more sentences: all of those
    everything = build("d", ict=100)
    assert sum(q.startswith("ict-") for q in read_queries(everything / "splits/dev/train.tsv")) == 8


# questions of the tiny articles on sentences no tiny question is answered by
FRESH = ["Harbour lighthouse\tWhat is the tower built of?\tstone\tThe Harbour lighthouse is a",
         "Harbour lighthouse\tWho paid for the 2004 restoration?\tthe harbour board\tA local trust restored",
         "Port Elwen\tWhat is Port Elwen known for?\tits herring market\tPort Elwen is a fishing",
         "Mara Quill\tHow old was Quill when the lighthouse was finished?\t39\tHer best known work"]


def test_a_second_question_set_gives_the_test_side(tiny_passages, tmp_path):
    """--test-questions: the test queries are a dev fraction of that set (ids n...), the rest of it trains beside
    every question of --questions; validation draws from both. A question of it answered by a sentence that
    answers a question of --questions asks what training taught: it trains."""
    articles, _ = tiny_passages
    path = tmp_path / "articles.jsonl"
    later = tmp_path / "later.tsv"
    header, *rows = (FIXTURES / "tiny-questions.tsv").read_text().splitlines()
    reworded = [r.replace("?", " today?", 1) for r in rows[:2]]          # the answers of q0001 and q0002
    later.write_text("\n".join([header] + reworded + FRESH) + "\n")
    _main("passages-wiki", "--articles", path, "--questions", FIXTURES / "tiny-questions.tsv", "--test-questions", later,
          "--ict-queries", 0, "--dev-fraction", 0.5, "--valid-fraction", 0.25, "--seed", 13,
          "--out-dir", tmp_path / "n/collection", "--split-dir", tmp_path / "n/splits/dev")
    split = {name: read_queries(tmp_path / f"n/splits/dev/{name}.tsv") for name in ("train", "valid", "test")}
    assert len(split["test"]) == 3 and all(q.startswith("n") and "today?" not in t for q, t in split["test"].items())
    trained = {**split["train"], **split["valid"]}
    assert sum(q.startswith("q") for q in trained) == 12 and {"n0001", "n0002"} <= set(trained)
    assert sum(q.startswith("n") for q in trained) == 3 and {q[0] for q in split["valid"]} == {"q", "n"}
    stats = json.loads((tmp_path / "n/collection/stats.json").read_text())
    assert stats["question_twins"] == 2
    qrels = read_qrels(tmp_path / "n/collection/qrels.txt")
    taught = {p for q in trained for p in qrels[q]}
    # paragraphs: a test question whose paragraph a training question is answered in is exposed, the others not
    assert set(stats["unexposed_test_queries"]) == {q for q in split["test"] if not set(qrels[q]) & taught}


def _keys_on_both_sides(test, trained):
    from towers.datasets.splits import question_key

    return {question_key(text) for text in test.values()} & {question_key(text) for text in trained.values()}


def test_a_question_asked_in_both_sets_trains(tiny_passages, tmp_path):
    """A question of --test-questions asked in --questions too, retyped in capitals, without its "?" or with other
    punctuation and spacing, is a twin: it trains whatever the seed, and stats count it."""
    path = tmp_path / "articles.jsonl"
    header, *rows = (FIXTURES / "tiny-questions.tsv").read_text().splitlines()
    retyped = [lambda q: q.upper(), lambda q: q.lower().rstrip("?"), lambda q: q.replace(" by", ",  by") + "!"]
    twins = [row.replace(q, retype(q)) for row, retype in zip(rows, retyped) for q in [row.split("\t")[1]]]
    later = tmp_path / "later.tsv"
    later.write_text("\n".join([header] + twins + FRESH) + "\n")
    for seed in range(8):
        out = tmp_path / f"s{seed}"
        _main("passages-wiki", "--articles", path, "--questions", FIXTURES / "tiny-questions.tsv", "--test-questions",
              later, "--ict-queries", 0, "--dev-fraction", 0.5, "--valid-fraction", 0.25, "--seed", seed,
              "--out-dir", out / "collection", "--split-dir", out / "splits/dev")
        split = {name: read_queries(out / f"splits/dev/{name}.tsv") for name in ("train", "valid", "test")}
        assert split["test"] and not _keys_on_both_sides(split["test"], {**split["train"], **split["valid"]})
        assert {"n0001", "n0002", "n0003"} <= set(split["train"]) | set(split["valid"])
        assert json.loads((out / "collection/stats.json").read_text())["question_twins"] == 3


def test_a_test_set_asked_whole_in_the_training_set_is_refused(tiny_passages, tmp_path):
    header, *rows = (FIXTURES / "tiny-questions.tsv").read_text().splitlines()
    later = tmp_path / "later.tsv"      # every question again, in capitals without its "?"
    later.write_text("\n".join([header] + [row.replace(q, q.upper().rstrip("?"))
                                           for row in rows for q in [row.split("\t")[1]]]) + "\n")
    result = run_stage("passages-wiki", "--articles", tmp_path / "articles.jsonl", "--questions",
                       FIXTURES / "tiny-questions.tsv", "--test-questions", later, "--seed", 13,
                       "--out-dir", tmp_path / "out/collection", "--split-dir", tmp_path / "out/splits/dev")
    assert_one_line_error(result, f"{later}: no test question is left of its 12 (dev fraction 0.2; 12 are asked in "
                                  f"{FIXTURES / 'tiny-questions.tsv'} too and train)")
    assert not (tmp_path / "out").exists()


def test_the_shipped_question_sets_put_no_text_on_both_sides():
    """The passage task's split of the shipped question sets, at the global seed and a few others (their one
    twin, the Animalia question, fell on the test side at seeds 14 and 16 before twins were kept together)."""
    from towers.datasets.wiki_passages import question_split

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    cfg = params["datasets"]["enwiki-mini-passages"]
    sets = [{f"{prefix}{row['line'] - 1:04d}": row["question"] for row in reqa.read_questions(ROOT / cfg[key])}
            for prefix, key in (("q", "questions"), ("n", "test_questions"))]
    texts = {**sets[0], **sets[1]}
    for seed in range(params["seed"], params["seed"] + 4):
        test, train, valid, twins = question_split(*sets, cfg["dev_fraction"], params["valid_fraction"], seed,
                                                   cfg["questions"], cfg["test_questions"])
        assert valid <= set(train) and not set(test) & set(train) and len(test) + len(train) == len(texts)
        assert not _keys_on_both_sides({q: texts[q] for q in test}, {q: texts[q] for q in train})
        assert twins == sum(bool(_keys_on_both_sides(sets[0], {q: text})) for q, text in sets[1].items())


# --- MS MARCO's text triples -> ids ---------------------------------------------------------------

def test_triples_to_ids(tmp_path):
    out = tmp_path / "out"
    _build("passages-msmarco", MS_TINY, out, "--valid-fraction", "0")
    archive = _tar(tmp_path / "triples.train.small.tar.gz", MS_TINY, ["triples.train.small.tsv"])
    for source, name in ((MS_TINY / "triples.train.small.tsv", "plain.tsv"), (archive, "from-tar.tsv")):
        _main("passages-triples", "--triples", source, "--candidates", out / "collection/candidates.jsonl",
              "--queries", out / "splits/dev/train.tsv", "--qrels", out / "collection/qrels.txt", "--out", tmp_path / name)
    lines = (tmp_path / "plain.tsv").read_text().splitlines()
    assert lines == ["1001\t0\t5", "1002\t4\t1", "1003\t6\t2", "1001\t0\t3"]
    assert (tmp_path / "from-tar.tsv").read_text() == (tmp_path / "plain.tsv").read_text()
    counts = json.loads((tmp_path / "plain.tsv.meta.json").read_text())["counts"]
    assert counts["triples_read"] == 6 and counts["triples"] == 4
    assert counts["unknown_negative"] == 1 and counts["unknown_query"] == 1
    _main("passages-triples", "--triples", archive, "--candidates", out / "collection/candidates.jsonl", "--queries",
          out / "splits/dev/train.tsv", "--qrels", out / "collection/qrels.txt", "--max-triples", 2, "--out", tmp_path / "two.tsv")
    assert (tmp_path / "two.tsv").read_text().splitlines() == lines[:2]


def test_triples_reader_checks_columns():
    text = io.StringIO("q\tpositive\n")
    with pytest.raises(StageError, match=r"t.tsv: line 1: expected 3 tab-separated columns \(query, positive passage, "
                                         r"negative passage\), found 2"):
        list(readers.read_triples(text, "t.tsv"))


# --- bad input: one line naming the file, and no output -------------------------------------------

def assert_one_line_error(result, expected):
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and "/s]" not in line]   # tqdm
    assert "Traceback" not in result.stderr
    assert lines[-1] == f"error: {expected}", result.stderr


def _broken(tmp_path, name, text):
    folder = tmp_path / "ms"
    shutil.copytree(MS_TINY, folder)
    (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("name, text, problem", [
    ("collection.tsv", "0\tone\n1\ttwo\tthree\n", "line 2: expected 2 tab-separated columns (pid, passage), found 3"),
    ("collection.tsv", "\n", "no passages"),
    ("collection.tsv", "0\tone\n1\ttwo\n0\tagain\n", "line 3: passage id 0 appears twice (first on line 1)"),
    ("qrels.dev.small.tsv", "2001 0 1 yes\n", "line 1: relevance 'yes' is not an integer"),
    ("qrels.dev.small.tsv", "2001 0 1\n", "line 1: expected 4 columns (qid 0 docid relevance), found 3"),
    ("qrels.train.tsv", "1001\t0\t0\t1\n1009\t0\t1\t1\n", "line 2: query 1009 is not in {queries}"),
    ("qrels.train.tsv", "1001\t0\t99\t1\n", "line 1: query 1001: document 99 is not in the collection ({collection}; "
                                            "1 such documents)"),
    ("queries.dev.small.tsv", "2001\n", "line 1: expected 2 tab-separated columns (qid, text), found 1"),
])
def test_bad_input_is_one_line_and_leaves_no_output(tmp_path, name, text, problem):
    folder = _broken(tmp_path, name, text)
    result = run_stage("passages-msmarco", "--source", folder, "--seed", 1, "--out-dir", tmp_path / "out/collection",
                       "--split-dir", tmp_path / "out/splits/dev")
    problem = problem.format(queries=folder / "queries.train.tsv", collection=folder / "collection.tsv")
    where = folder / ("collection.tsv" if problem == "no passages" else name)
    assert_one_line_error(result, f"{where}: {problem}")
    assert not (tmp_path / "out").exists()


def test_bad_archives_and_beir_files(tmp_path):
    out = ["--seed", 1, "--out-dir", tmp_path / "out/collection", "--split-dir", tmp_path / "out/splits/dev"]
    archive = _tar(tmp_path / "cq.tar.gz", MS_TINY, [n for n in MS_FILES if n != "qrels.train.tsv"])
    assert_one_line_error(run_stage("passages-msmarco", "--source", archive, *out),
                          f"{archive}: no member named qrels.train.tsv (or qrels.train.tsv.gz) in the archive")
    assert_one_line_error(run_stage("passages-msmarco", "--source", archive, "--md5", "0" * 32, *out),
                          f"{archive}: md5 mismatch (expected {'0' * 32}); the file is corrupt or a different version")
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(archive.read_bytes()[:300])
    result = run_stage("passages-msmarco", "--source", truncated, *out)
    assert result.returncode == 1 and "Traceback" not in result.stderr and f"error: {truncated}" in result.stderr
    latin = tmp_path / "latin"
    shutil.copytree(MS_TINY, latin)
    (latin / "queries.train.tsv").write_bytes("1001\tcaf\u00e9\n".encode("latin-1"))
    assert_one_line_error(run_stage("passages-msmarco", "--source", latin, *out),
                          f"{latin / 'queries.train.tsv'}: not UTF-8 text after line 0 (invalid continuation byte)")
    beir = tmp_path / "beir"
    shutil.copytree(BEIR_TINY, beir)
    (beir / "qrels/test.tsv").write_text("q1\td1\t1\n")
    assert_one_line_error(run_stage("passages-beir", "--source", beir, *out),
                          f"{beir / 'qrels/test.tsv'}: line 1: header must be query-id corpus-id score (tab-separated)")
    (beir / "qrels/test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "T"}\n')
    assert_one_line_error(run_stage("passages-beir", "--source", beir, *out),
                          f"{beir / 'corpus.jsonl'}: line 1: not a BEIR corpus row (needs '_id' and a string 'text')")
    assert not (tmp_path / "out").exists()


def test_a_folder_holding_a_file_both_plain_and_gzipped_is_refused(tmp_path):
    """corpus.jsonl beside a newer corpus.jsonl.gz: which one is meant cannot be told, so neither is read."""
    out = ["--seed", 1, "--out-dir", tmp_path / "out/collection", "--split-dir", tmp_path / "out/splits/dev"]
    beir = tmp_path / "beir"
    shutil.copytree(BEIR_TINY, beir)
    (beir / "corpus.jsonl.gz").write_bytes(gzip.compress((BEIR_TINY / "corpus.jsonl").read_bytes()))
    assert_one_line_error(run_stage("passages-beir", "--source", beir, *out),
                          f"{beir}: holds both corpus.jsonl and corpus.jsonl.gz; keep only the one to read")
    ms = tmp_path / "ms"
    shutil.copytree(MS_TINY, ms)
    (ms / "qrels.train.tsv.gz").write_bytes(gzip.compress((MS_TINY / "qrels.train.tsv").read_bytes()))
    assert_one_line_error(run_stage("passages-msmarco", "--source", ms, *out),
                          f"{ms}: holds both qrels.train.tsv and qrels.train.tsv.gz; keep only the one to read")
    assert not (tmp_path / "out").exists()


def test_wiki_question_that_cannot_be_resolved(tmp_path, tiny_articles):
    articles, _ = tiny_articles
    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in articles))
    questions = tmp_path / "questions.tsv"
    questions.write_text("article\tquestion\tanswer\tsentence_start\nNowhere\tWhere?\tx\ty\n")
    result = run_stage("passages-wiki", "--articles", path, "--questions", questions, "--ict-queries", 2, "--seed", 1,
                       "--out-dir", tmp_path / "out/collection", "--split-dir", tmp_path / "out/splits/dev")
    assert_one_line_error(result, f"{questions}: line 2: article 'Nowhere' is not in the corpus")
    assert not (tmp_path / "out").exists()


# --- downloads checked against an md5, or explicitly unchecked ------------------------------------

def test_download_checks_md5_and_refuses_no_checksum(tmp_path):
    source = tmp_path / "mirror" / "collectionandqueries.tar.gz"
    source.parent.mkdir()
    source.write_bytes(b"not really an archive")
    md5 = hashlib.md5(source.read_bytes()).hexdigest()
    raw = tmp_path / "raw"
    good = run_stage("download", "--url", source.as_uri(), "--md5", md5, "--out", raw / "a.tar.gz")
    assert good.returncode == 0, good.stderr
    assert json.loads((raw / "a.tar.gz.meta.json").read_text())["counts"]["md5"] == md5
    bad = run_stage("download", "--url", source.as_uri(), "--md5", "f" * 32, "--out", raw / "b.tar.gz", "--retries", 1)
    assert_one_line_error(bad, f"{raw / 'b.tar.gz'}: md5 mismatch (expected {'f' * 32}); the file is corrupt or a "
                               "different version")
    malformed = run_stage("download", "--url", source.as_uri(), "--md5", "abc", "--out", raw / "c.tar.gz")
    assert_one_line_error(malformed, "--md5: 'abc' is not a md5 digest (32 hex digits)")
    both = run_stage("download", "--url", source.as_uri(), "--md5", md5, "--sha256", "0" * 64, "--out", raw / "d.tar.gz")
    assert_one_line_error(both, f"{raw / 'd.tar.gz'}: give only one of --sha256, --sha1-from and --md5, not --sha256 and "
                                "--md5")
    unchecked = run_stage("download", "--url", source.as_uri(), "--no-checksum", "--out", raw / "e.tar.gz")
    assert unchecked.returncode == 0 and "downloaded unchecked (checksum: none)" in unchecked.stderr
    assert json.loads((raw / "e.tar.gz.meta.json").read_text())["counts"]["checksum"] == "none"
    neither = run_stage("download", "--url", source.as_uri(), "--out", raw / "f.tar.gz")
    assert neither.returncode == 1
    assert sorted(p.name for p in raw.iterdir()) == ["a.tar.gz", "a.tar.gz.meta.json", "e.tar.gz", "e.tar.gz.meta.json"]


# --- the workflow: passage kinds plan through rule passages (and its dev split) -------------------

def _workflow(tmp_path, datasets: dict):
    tmp_path.mkdir(parents=True, exist_ok=True)
    copy_workflow(tmp_path)
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    overlay = {"datasets": {"enwiki-mini": {"kind": "wikipedia-qa", "dump": "fixtures/tiny-wiki.xml", "dump_sha256": "",
                                            "max_articles": 0, "questions": "fixtures/tiny-questions.tsv"},
                            **datasets}}
    (tmp_path / "fixtures/passages.yaml").write_text(yaml.safe_dump(overlay, sort_keys=False))
    return tmp_path


def _snakemake(work, *args):
    return subprocess.run([sys.executable, "-m", "snakemake", *map(str, args), "--configfile", "fixtures/passages.yaml"],
                          cwd=work, capture_output=True, text=True)


PASSAGE_SETS = {
    "tiny-passages": {"kind": "wikipedia-passages", "articles": "enwiki-mini", "questions": "fixtures/tiny-questions.tsv",
                      "ict_queries": 4, "dev_fraction": 0.25},
    "tiny-msmarco": {"kind": "msmarco-tsv", "local_dir": "fixtures/msmarco-tiny", "max_valid": 1},
    "tiny-beir": {"kind": "beir", "local_dir": "fixtures/beir-tiny", "train_split": "train"},
}


@pytest.mark.snakemake
def test_passage_kinds_plan_their_own_dev_split(tmp_path):
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())["datasets"]["msmarco-passage"]
    work = _workflow(tmp_path, {**PASSAGE_SETS, "msmarco-passage": paper})
    targets = [f"artifacts/{name}/splits/dev/{part}.tsv" for name in [*PASSAGE_SETS, "msmarco-passage"]
               for part in ("train", "test")]
    plan = _snakemake(work, *targets, "artifacts/msmarco-passage/collection/triples.tsv", "-n", "-p")
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-3000:]
    assert job_counts(plan.stdout) == {"parse_wiki": 1, "passages": 4, "download": 2, "passages_triples": 1}
    assert "--md5 31644046b18952c1386cd4564ba2ae69" in plan.stdout     # ir_datasets' md5 of the archive
    assert "--md5 c13bf99ff23ca691105ad12eab837f84" in plan.stdout     # ... and of the train triples
    assert "rule split:" not in plan.stdout and "rule reqa:" not in plan.stdout
    # a ReQA-form target of a passage dataset is rule passages' too; the QA datasets keep rule reqa
    plan = _snakemake(work, "artifacts/tiny-msmarco/collection/candidates.jsonl", "artifacts/enwiki-mini/collection/qrels.txt", "-n")
    assert job_counts(plan.stdout) == {"passages": 1, "parse_wiki": 1, "reqa": 1}


@pytest.mark.snakemake
def test_a_file_without_checksum_is_refused_unless_marked_none(tmp_path):
    files = [{"name": "collectionandqueries.tar.gz", "url": "https://example.org/collectionandqueries.tar.gz"}]
    work = _workflow(tmp_path, {"ms": {"kind": "msmarco-passage", "files": files}})
    refused = _snakemake(work, "artifacts/ms/collection/qrels.txt", "-n")
    assert refused.returncode != 0 and "files" in refused.stdout + refused.stderr
    files[0]["checksum"] = "none"
    work = _workflow(tmp_path / "again", {"ms": {"kind": "msmarco-passage", "files": files}})
    plan = _snakemake(work, "artifacts/ms/collection/qrels.txt", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert "--no-checksum" in plan.stdout and job_counts(plan.stdout) == {"download": 1, "passages": 1}


@pytest.mark.slow
@pytest.mark.snakemake
def test_passage_kinds_build_through_snakemake(tmp_path):
    work = _workflow(tmp_path, PASSAGE_SETS)
    targets = [f"artifacts/{name}/splits/dev/test.tsv" for name in PASSAGE_SETS]
    done = _snakemake(work, *targets, "--cores", 1)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = {name: json.loads((work / f"artifacts/{name}/collection/stats.json").read_text()) for name in PASSAGE_SETS}
    assert stats["tiny-msmarco"]["test_queries"] == 3 and stats["tiny-msmarco"]["valid_queries"] == 1
    assert stats["tiny-beir"]["train_queries"] + stats["tiny-beir"]["valid_queries"] == 2
    assert stats["tiny-passages"]["test_queries"] == 3 and stats["tiny-passages"]["candidates"] == 9
    again = _snakemake(work, *targets, "--cores", 1, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.snakemake
def test_an_edit_inside_a_local_dir_collection_reruns_it(tmp_path):
    """A folder collection's files are tracked, not the folder's time alone: an edit reruns the stage, and so
    does a file swapped for an older one (which Snakemake's time check alone would miss)."""
    import os

    work = _workflow(tmp_path, {"tiny-msmarco": PASSAGE_SETS["tiny-msmarco"]})
    target = "artifacts/tiny-msmarco/collection/stats.json"
    done = _snakemake(work, target, "--cores", 1)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Nothing to be done" in _snakemake(work, target, "-n").stdout
    queries = work / "fixtures/msmarco-tiny/queries.dev.small.tsv"
    old = queries.stat()
    queries.write_text(queries.read_text().replace("\n", " \n", 1))   # an edit: the folder's time stays
    assert job_counts(_snakemake(work, target, "-n").stdout) == {"passages": 1}
    os.utime(queries, ns=(old.st_atime_ns, old.st_mtime_ns - 10**9))   # older than the outputs
    assert job_counts(_snakemake(work, target, "-n").stdout) == {"passages": 1}
