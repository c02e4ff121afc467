"""BM25 runs the Anserini classes of Pyserini's jar directly (towers.bm25): the same hits, scores and order as
Pyserini's own LuceneSearcher over the same index, for batch search (the bm25-search stage) and one query at a
time (the latency stage)."""
import json

from towers import bm25
from towers.io import read_run

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
