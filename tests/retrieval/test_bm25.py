"""BM25 runs the Anserini classes of Pyserini's jar directly (towers.retrieval.bm25): the same hits, scores and order as
Pyserini's own LuceneSearcher over the same index, for batch search (the bm25-search stage) and one query at a
time (the latency stage)."""
import json

import pytest

from towers.io import read_queries, read_run
from towers.retrieval import bm25

from conftest import run_stage

WORDS = "lighthouse keeper harbour storm lamp tower coast ship rock beacon".split()


def test_bm25_search_equals_pyserinis_lucene_searcher(tmp_path):
    # 40 documents of overlapping words: many ties and partial matches, so order and scores both matter
    docs = {f"d{i}": " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)) for i in range(40)}
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in docs.items()))
    queries = {"q1": "lighthouse storm", "q2": "harbour lamp beacon", "q3": "ship", "q4": "nothing matches here"}
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    assert run_stage("bm25-index", "--candidates", tmp_path / "c.jsonl", "--index", tmp_path / "index",
                     "--threads", 1).returncode == 0
    done = run_stage("bm25-search", "--index", tmp_path / "index", "--queries", tmp_path / "q.tsv", "--run",
                     tmp_path / "run.trec", "--k1", 0.82, "--b", 0.68, "--depth", 10, "--threads", 2)
    assert done.returncode == 0, done.stderr[-2000:]
    ours = read_run(tmp_path / "run.trec")

    bm25.start_jvm()
    import os
    os.environ.setdefault("OPENAI_API_KEY", "unused")   # pyserini.search builds an OpenAI client on import
    from pyserini.search.lucene import LuceneSearcher

    theirs = LuceneSearcher(str(tmp_path / "index"))
    theirs.set_bm25(k1=0.82, b=0.68)
    hits = theirs.batch_search(list(queries.values()), list(queries), k=10, threads=2)
    expected = {q: [(h.docid, h.score) for h in hits[q]] for q in queries if hits[q]}
    assert expected and set(ours) == set(expected)
    for qid, ranked in expected.items():   # the same call on the same index: the same order, ties included
        assert [d for d, _ in ours[qid]] == [d for d, _ in ranked], qid
        assert all(abs(s - t) < 1e-5 for (_, s), (_, t) in zip(ours[qid], ranked)), qid   # as the run file rounds

    one = bm25.searcher(tmp_path / "index", 0.82, 0.68).search("harbour lamp beacon", 5)
    assert [(h.docid, h.score) for h in one] == [(h.docid, h.score) for h in theirs.search("harbour lamp beacon", 5)]


def lighthouse_index(tmp_path, n=60):
    docs = {f"d{i}": " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 5)) for i in range(n)}
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n" for d, t in docs.items()))
    assert run_stage("bm25-index", "--candidates", tmp_path / "c.jsonl", "--index", tmp_path / "index",
                     "--threads", 1).returncode == 0
    return tmp_path / "index"


def test_a_run_written_per_batch_and_per_shard_is_the_run_of_one_search(tmp_path):
    from towers.io import concatenate_runs

    index = lighthouse_index(tmp_path)
    texts = [" ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 3)) for i in range(23)] + ["nothing here"]
    queries = {f"q{i}": t for i, t in enumerate(texts)}
    (tmp_path / "train.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in list(queries.items())[:15]))
    (tmp_path / "valid.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in list(queries.items())[15:]))
    (tmp_path / "all.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    assert bm25.search(index, tmp_path / "all.tsv", tmp_path / "one.trec", 0.9, 0.4, 7, threads=2) == len(queries)
    whole = (tmp_path / "one.trec").read_bytes()
    assert whole and set(read_run(tmp_path / "one.trec")) == set(queries) - {"q23"}   # no hit, no line
    bm25.search(index, [tmp_path / "train.tsv", tmp_path / "valid.tsv"], tmp_path / "batched.trec", 0.9, 0.4, 7,
                threads=2, batch_size=4)
    assert (tmp_path / "batched.trec").read_bytes() == whole
    parts = []
    for shard in range(5):   # through the stage, as the rules run it
        parts.append(tmp_path / f"shard{shard}.trec")
        done = run_stage("bm25-search", "--index", index, "--queries", tmp_path / "train.tsv", tmp_path / "valid.tsv",
                         "--run", parts[-1], "--k1", 0.9, "--b", 0.4, "--depth", 7, "--shard", shard, "--shards", 5,
                         "--memory-mb", 2000)
        assert done.returncode == 0, done.stderr[-2000:]
    assert run_stage("merge-runs", "--parts", *parts, "--run", tmp_path / "merged.trec").returncode == 0
    assert (tmp_path / "merged.trec").read_bytes().replace(b"bm25_k1=0.9_b=0.4", b"bm25") == whole
    concatenate_runs(parts[::-1], tmp_path / "reversed.trec")   # the order of the parts is the order of the run
    assert (tmp_path / "reversed.trec").read_bytes() != (tmp_path / "merged.trec").read_bytes()
    twice = run_stage("bm25-search", "--index", index, "--queries", tmp_path / "train.tsv", tmp_path / "all.tsv",
                      "--run", tmp_path / "x.trec", "--k1", 0.9, "--b", 0.4, "--depth", 7)
    assert twice.returncode == 1 and f"{tmp_path / 'all.tsv'}: repeats query q0 of an earlier queries file" in twice.stderr
    outside = run_stage("bm25-search", "--index", index, "--queries", tmp_path / "all.tsv", "--run", tmp_path / "x.trec",
                        "--k1", 0.9, "--b", 0.4, "--depth", 7, "--shard", 5, "--shards", 5)
    assert outside.returncode == 1 and "--shard: must be in 0..4, not 5" in outside.stderr


def test_the_jvm_heap_is_what_the_job_memory_leaves(tmp_path):
    import subprocess
    import sys

    for memory in (1000, 1500, 4000, 32000, 128000):   # at least 1 GB and a quarter left outside the heap
        heap = bm25.java_heap_mb(memory)
        assert heap == 256 or (heap <= memory - 1024 and heap <= memory * 3 // 4), memory
    # a JVM starts once a process: a fresh one, capped where the stage starts it
    heap = bm25.java_heap_mb(1500)
    probe = (f"from towers.retrieval import bm25; bm25.start_jvm({heap}); from jnius import autoclass;"
             "print(autoclass('java.lang.Runtime').getRuntime().maxMemory() / 2**20)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0.85 * heap <= float(done.stdout.split()[-1]) <= heap   # Java reports a little less than -Xmx


@pytest.mark.slow
def test_split_runs_are_the_single_runs_rows_of_their_queries(tmp_path):
    """bm25.split_runs through snakemake (tiny profile): the test queries' run and the training queries' run, searched
    in 2 shards and joined, hold exactly the lines the one run of every query has for them, to their depth."""
    import shutil
    import subprocess
    import sys

    from benchmarks.workflow_harness import copy_workflow

    from conftest import FIXTURES

    work = copy_workflow(tmp_path)
    shutil.copytree(FIXTURES, work / "fixtures")
    (work / "split.yaml").write_text("bm25: {split_runs: [enwiki-mini-passages], query_shards: {enwiki-mini-passages: 2}}\n")
    art = work / "artifacts/enwiki-mini-passages"
    targets = [art / "bm25/run.trec", art / "bm25/dev/test-d1000.trec", art / "bm25/dev/train-d3.trec",
               art / "eval/bm25/dev/lucene.json"]
    done = subprocess.run([sys.executable, "-m", "snakemake", *[str(t.relative_to(work)) for t in targets], "--cores",
                           "1", "--configfile", "fixtures/tiny.yaml", "split.yaml"], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "merge_runs" in done.stderr and "bm25_search_shard" in done.stderr
    lines = {}
    for line in (art / "bm25/run.trec").read_text().splitlines():
        lines.setdefault(line.split()[0], []).append(line)
    test, train = (list(read_queries(art / f"splits/dev/{part}.tsv")) for part in ("test", "train"))
    assert (art / "bm25/dev/test-d1000.trec").read_text().splitlines() == [x for q in test for x in lines.get(q, [])]
    assert (art / "bm25/dev/train-d3.trec").read_text().splitlines() == [x for q in train for x in lines.get(q, [])[:3]]
    assert json.loads((art / "eval/bm25/dev/lucene.json").read_text())["run"].endswith("bm25/dev/test-d1000.trec")


def _last_line(result) -> str:
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    return result.stderr.strip().splitlines()[-1]


def test_java_refusals_at_search_time_each_get_their_own_line(tmp_path, monkeypatch):
    """Before, every Java exception of a search was "not a readable Lucene index, damaged or incomplete"."""
    index = lighthouse_index(tmp_path, n=10)
    queries = tmp_path / "q.tsv"
    long = " ".join(f"term{i}" for i in range(1100))   # over Lucene's default maxClauseCount of 1,024
    queries.write_text(f"q1\t{WORDS[0]}\nq2\t{long}\nq3\t{WORDS[1]}\n")
    search = ["bm25-search", "--index", index, "--queries", queries, "--run", tmp_path / "run.trec", "--depth", 5,
              "--threads", 1]
    for k1, b, flag in (("inf", 0.4, "--k1"), ("nan", 0.4, "--k1"), (0.9, "nan", "--b"), (0.9, 1.5, "--b")):
        limits = "of at least 0" if flag == "--k1" else "from 0 to 1"
        value = k1 if flag == "--k1" else b
        assert _last_line(run_stage(*search, "--k1", k1, "--b", b)) == \
            f"error: {flag}: must be a finite number {limits}, not {float(value)}"
    # the limit is raised: a long query is searched
    assert run_stage(*search, "--k1", 0.9, "--b", 0.4).returncode == 0
    assert {qid for qid, _ in read_run(tmp_path / "run.trec").items()} == {"q1", "q3"}
    (tmp_path / "run.trec").unlink()
    monkeypatch.setattr(bm25, "MAX_CLAUSES", 1024)   # past the limit: the query named
    assert _last_line(run_stage(*search, "--k1", 0.9, "--b", 0.4)) == (
        f"error: {queries}: query q2 has more distinct terms than Lucene searches in one query (maxClauseCount, "
        "raised here to 1,024); shorten it")
    assert not (tmp_path / "run.trec").exists()


def _disk_full_line(index) -> str:
    return f"error: {index}: no space left on the device while writing it (OSError); free space and rerun"


# (documents, free kilobytes): a large collection fails in the indexer's threads (an exception); a tiny one in its
# final commit, which Anserini only logs (issue 56: a traceback of the unreadable index that followed)
@pytest.mark.parametrize("documents, free_kb", [(20000, None), (5, 24)], ids=["large", "tiny"])
def test_a_disk_that_fills_while_lucene_indexes_is_one_line(tmp_path, documents, free_kb):
    """For real: a 2 MB tmpfs, filled up to `free_kb` (as root; skipped where it cannot be mounted)."""
    import os
    import random
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    full = tmp_path / "full"
    full.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(full)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        if free_kb is not None:
            with open(full / "filler", "wb") as filler:
                filler.write(bytes((2048 - free_kb) * 1024))
        rng = random.Random(1)
        words = [f"w{i}" for i in range(50000)]
        (tmp_path / "c.jsonl").write_text("".join(
            json.dumps({"id": f"d{i}", "contents": " ".join(rng.choice(words) for _ in range(60))}) + "\n"
            for i in range(documents)))   # 20,000: 9 MB
        # a process of its own: Java's printout of the failure (Anserini's indexer threads print it) goes to its stderr
        result = subprocess.run([sys.executable, "-m", "towers", "bm25-index", "--candidates", tmp_path / "c.jsonl",
                                 "--index", full / "index", "--threads", "1"], capture_output=True, text=True)
        assert result.returncode == 1 and result.stderr.strip() == _disk_full_line(full / "index"), result.stderr[-3000:]
        assert [p.name for p in full.iterdir()] == ([] if free_kb is None else ["filler"])
    finally:
        subprocess.run(["umount", str(full)], check=False)


def test_a_java_disk_full_is_the_oserror_it_is_and_other_java_errors_stay_as_they_are(tmp_path):
    """Without root: the Java exception of a full disk, as jnius gives it (its cause in the stack trace)."""
    from jnius import JavaException

    from towers.cli import disk_full

    bm25.start_jvm()
    full = JavaException("JVM exception occurred: this IndexWriter is closed",
                         "org.apache.lucene.store.AlreadyClosedException", "this IndexWriter is closed",
                         ["org.apache.lucene.index.IndexWriter.ensureOpen(IndexWriter.java:914)", "Caused by:",
                          "java.io.IOException: No space left on device"])
    with pytest.raises(OSError) as caught, bm25.disk_full_as_oserror(tmp_path / "index"):
        raise full
    assert disk_full(caught.value, None) == _disk_full_line(tmp_path / "index")
    other = JavaException("JVM exception occurred: boom", "java.lang.RuntimeException", "boom", [])
    with pytest.raises(JavaException), bm25.disk_full_as_oserror(tmp_path / "index"):
        raise other


def test_a_full_disk_that_java_only_logged_is_the_oserror_too(tmp_path, capsys):
    """Without root: Anserini's indexer logs a final commit that failed (System.out) and returns; what follows,
    reading the index, fails with no word of the disk."""
    from jnius import JavaException
    from pyserini.pyclass import autoclass

    from towers.cli import disk_full

    bm25.start_jvm()
    system = autoclass("java.lang.System")
    unreadable = JavaException("JVM exception occurred: org.apache.lucene.index.IndexNotFoundException: no segments* "
                               "file found", "org.apache.lucene.index.IndexNotFoundException", "no segments* file", [])
    with pytest.raises(OSError) as caught, bm25.disk_full_as_oserror(tmp_path / "index"):
        system.out.println("ERROR [main] index.AbstractIndexer - java.io.IOException: No space left on device")
        raise unreadable
    assert disk_full(caught.value, None) == _disk_full_line(tmp_path / "index")
    with pytest.raises(OSError), bm25.disk_full_as_oserror(tmp_path / "index"):   # the index read, short
        system.out.println("ERROR [main] index.AbstractIndexer - java.io.IOException: No space left on device")
    assert capsys.readouterr().out == ""   # held back: the one line says it
    with pytest.raises(JavaException), bm25.disk_full_as_oserror(tmp_path / "index"):
        system.out.println("INFO [main] index.IndexCollection - starting")
        raise unreadable
    assert "index.IndexCollection - starting" in capsys.readouterr().out   # anything else is shown as it was
