"""Stages that retrieve: BM25 through Pyserini, dense encoding, Faiss indexes and search, hard
negatives, reranking, run fusion and latency."""
from __future__ import annotations

from pathlib import Path

from ..io import (StageError, atomic_path, query_shard, read_qrels, read_queries, read_run, require_file, write_json,
                  write_jsonl, write_run)
from . import arg, stage
from .common import candidate_texts, read_split, require_texts, set_threads


# runtime.PRECISIONS, written out: the parser is built without importing torch
PRECISION = arg("--precision", choices=["float32", "bfloat16"], default="float32",
                help="how a CPU scores: bfloat16 autocast or float32 (runtime.cpu_scoring; a GPU: float16 autocast)")


# --- BM25 ---------------------------------------------------------------------------------------

MEMORY = arg("--memory-mb", type=int, default=0,
             help="the job's memory: the JVM's heap is what java_heap_mb leaves of it (0: Java's default heap)")


def heap_of(a) -> int:
    from ..retrieval import bm25

    return bm25.java_heap_mb(a.memory_mb) if a.memory_mb else 0


@stage("bm25-index", arg("--candidates", required=True), arg("--index", required=True), arg("--threads", type=int, default=2),
       MEMORY)
def bm25_index(a):
    from ..retrieval import bm25

    count = bm25.build_index(a.candidates, a.index, a.threads, heap_of(a))
    return a.index, {"documents": count, "heap_mb": heap_of(a)}


@stage("bm25-search", arg("--index", required=True),
       arg("--queries", required=True, nargs="+", help="queries TSV files, searched in order (a split's train and valid)"),
       arg("--run", required=True),
       arg("--k1", type=float, required=True), arg("--b", type=float, required=True), arg("--depth", type=int, required=True),
       arg("--threads", type=int, default=2), MEMORY,
       arg("--shard", type=int, default=0, help="search only this part of --shards contiguous parts of the queries "
                                                "(merge-runs joins the parts' runs)"),
       arg("--shards", type=int, default=1))
def bm25_search(a):
    from ..retrieval import bm25

    if a.shards < 1:
        raise StageError("--shards", f"must be at least 1, not {a.shards}")
    n = bm25.search(a.index, a.queries, a.run, a.k1, a.b, a.depth, a.threads, tag=f"bm25_k1={a.k1}_b={a.b}",
                    shard=a.shard, shards=a.shards, heap_mb=heap_of(a))
    return a.run, {"queries": n, "depth": a.depth, "shard": a.shard, "shards": a.shards, "heap_mb": heap_of(a)}


@stage("merge-runs", arg("--parts", required=True, nargs="+", help="runs of a query file's shards, in shard order"),
       arg("--run", required=True))
def merge_runs(a):
    """One run from the runs of a query file's contiguous shards (bm25-search --shard), joined in order."""
    from ..io import concatenate_runs

    return a.run, {"parts": len(a.parts), "bytes": concatenate_runs(a.parts, a.run)}


@stage("encode-candidates", arg("--model", required=True), arg("--candidates", required=True),
       arg("--embeddings", required=True), arg("--ids", required=True), arg("--batch-size", type=int, default=128),
       arg("--threads", type=int, default=0),
       arg("--shard", type=int, default=0, help="encode only this part of --shards equal parts (merge-embeddings joins them)"),
       arg("--shards", type=int, default=1),
       arg("--chunk", type=int, default=0, help="texts sorted by length together (default: encode.SORT_CHUNK)"),
       PRECISION)
def encode_candidates(a):
    """A corpus (or one shard of it) streamed: only the shard's rows are parsed, encoded a chunk at a time
    into the matrix as it is written."""
    from ..io import count_jsonl, read_jsonl_slice
    from ..modeling.models import TwoTower, doc_input, text_options
    from ..retrieval.encode import SORT_CHUNK, encode_corpus, shard_range
    from ..modeling.tokens import token_cache
    from ..runtime import cpu_scoring

    shard_range(0, a.shard, a.shards)   # a bad --shard fails before anything loads
    set_threads(a.threads)
    total = count_jsonl(a.candidates)
    if not total:
        raise StageError(a.candidates, "no candidates")
    start, stop = shard_range(total, a.shard, a.shards)
    if start == stop:
        raise StageError("--shards", f"{a.shards} shards of {total} candidates leave shard {a.shard} empty")
    model, tok = TwoTower.load(a.model)
    doc_text = model.config.get("doc_text", "sentence+paragraph")

    def doc_of(row):
        try:
            return doc_input(row, doc_text)
        except KeyError as err:
            raise StageError(a.candidates, f"a candidate lacks {err}, which the model's doc text {doc_text!r} reads") from None

    with cpu_scoring(a.precision):
        dim = encode_corpus(model.doc, tok, read_jsonl_slice(a.candidates, start, stop), stop - start, doc_of,
                            a.embeddings, a.ids, model.config["doc_length"], a.batch_size, chunk=a.chunk or SORT_CHUNK,
                            desc="encode candidates", segment=model.config.get("doc_segment", 0),
                            cache=token_cache(a.candidates), **text_options(model.config, "doc"))
    return a.embeddings, {"candidates": stop - start, "rows": [start, stop], "dim": int(dim)}


@stage("merge-embeddings", arg("--parts", nargs="+", required=True, help="encode-candidates --shard outputs, in order"),
       arg("--part-ids", nargs="+", required=True), arg("--embeddings", required=True), arg("--ids", required=True))
def merge_embeddings(a):
    """The shards of one corpus encoding, joined in order into one matrix and one id list, block by block."""
    from ..retrieval.matrix import merge_parts

    if len(a.parts) != len(a.part_ids):
        raise StageError("--part-ids", f"{len(a.part_ids)} id files for {len(a.parts)} embedding parts")
    shape = merge_parts([require_file(p) for p in a.parts], [require_file(p) for p in a.part_ids], a.embeddings, a.ids)
    return a.embeddings, {"parts": len(a.parts), "candidates": shape[0], "dim": shape[1]}


@stage("build-index", arg("--embeddings", required=True), arg("--factory", required=True), arg("--out", required=True),
       arg("--threads", type=int, default=0, help="Faiss's OpenMP threads (0: Faiss's default, every core)"))
def build_index(a):
    import faiss

    from ..retrieval import vector_index

    index = vector_index.build_from_file(a.embeddings, a.factory, a.threads)
    with atomic_path(a.out) as tmp:
        faiss.write_index(index, str(tmp))
    return a.out, {"vectors": int(index.ntotal), "factory": a.factory}


def dense_run(model_path, index_path, ids_path, queries: dict[str, str], depth: int, nprobe: int,
              batch_size: int, precision: str) -> dict[str, list[tuple[str, float]]]:
    """Encode `queries` with the query tower (on a CPU in `precision`) and search the doc tower's Faiss index."""
    from ..modeling.models import TwoTower, text_options
    from ..retrieval import vector_index
    from ..retrieval.encode import encode
    from ..retrieval.matrix import first_nonfinite
    from ..runtime import cpu_scoring

    model, tok = TwoTower.load(model_path)
    ids = require_file(ids_path).read_text().split()
    index = vector_index.load(index_path, len(ids), ids_path)
    with cpu_scoring(precision):
        vectors = encode(model.query, tok, list(queries.values()), "query", model.config["query_length"],
                         batch_size, desc="encode queries", **text_options(model.config, "query"))
    bad = first_nonfinite(vectors)
    if bad is not None:   # Faiss would rank nothing for it, silently
        raise StageError(model_path, f"the query tower gives NaN or inf for query {list(queries)[bad]}: no usable "
                                     f"vector to search with")
    scores, rows = vector_index.search(index, vectors, depth, nprobe)
    return {qid: [(ids[r], float(s)) for r, s in zip(rows[i], scores[i]) if r >= 0] for i, qid in enumerate(queries)}


@stage("dense-search", arg("--model", required=True), arg("--index", required=True), arg("--ids", required=True),
       arg("--queries", required=True), arg("--run", required=True), arg("--depth", type=int, required=True),
       arg("--nprobe", type=int, default=0), arg("--batch-size", type=int, default=128), arg("--threads", type=int, default=0),
       arg("--tag", default="dense"), PRECISION)
def dense_search(a):
    set_threads(a.threads)
    run = dense_run(a.model, a.index, a.ids, read_queries(a.queries), a.depth, a.nprobe, a.batch_size, a.precision)
    write_run(a.run, run, a.tag)
    return a.run, {"queries": len(run)}


def exclude_positives(run: dict[str, list[tuple[str, float]]], qrels: dict[str, dict[str, int]]) -> dict[str, list[str]]:
    """Hard-negative mining (QuadrupletBERT sec. 4.1): qid -> the candidates a model's own index retrieved, in rank
    order, without the question's relevant ones (its candidate set C_i)."""
    return {qid: [doc for doc, _ in ranked if qrels.get(qid, {}).get(doc, 0) <= 0] for qid, ranked in run.items()}


@stage("mine-hard-negatives", arg("--model", required=True), arg("--index", required=True), arg("--ids", required=True),
       arg("--queries", required=True, nargs="+", help="the split's train.tsv and valid.tsv"),
       arg("--qrels", required=True), arg("--out", required=True), arg("--depth", type=int, required=True),
       arg("--nprobe", type=int, default=0), arg("--batch-size", type=int, default=128), arg("--threads", type=int, default=0),
       PRECISION)
def mine_hard_negatives(a):
    """Each question's top-`depth` candidates under a trained model, gold removed (JSONL: qid, candidates)."""
    set_threads(a.threads)
    queries = {qid: text for path in a.queries for qid, text in read_split(path).items()}
    if not queries:
        raise StageError(a.queries[0], "no questions to mine for")
    mined = exclude_positives(dense_run(a.model, a.index, a.ids, queries, a.depth, a.nprobe, a.batch_size, a.precision),
                              read_qrels(a.qrels))
    write_jsonl(a.out, ({"qid": q, "candidates": docs} for q, docs in mined.items()))
    return a.out, {"questions": len(mined), "mean_candidates": round(sum(map(len, mined.values())) / len(mined), 2)}


@stage("rerank", arg("--model", default="", help="cross-encoder folder or hub name (castorini/monobert-large-msmarco)"),
       arg("--scores", default="", help="instead of --model: a deeper reranking of the same run, whose scores are reused"),
       arg("--tokenizer", default="", help="tokenizer folder or hub name; default: the model's"),
       arg("--run", required=True), arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"),
       arg("--queries", required=True), arg("--depth", type=int, required=True, help="rerank (and keep) each query's top-K"),
       arg("--batch-size", type=int, default=32), arg("--max-length", type=int, default=512),
       arg("--threads", type=int, default=0), arg("--tag", default="rerank"), arg("--out", required=True),
       arg("--shard", type=int, default=0, help="rerank only this part of --shards contiguous parts of the run's "
                                                "queries (merge-runs joins the parts' runs into the unsplit one)"),
       arg("--shards", type=int, default=1), PRECISION)
def rerank_run(a):
    """Rescore each query's top-K of a TREC run with a cross-encoder; the run written is K deep."""
    from ..retrieval import rerank
    from ..runtime import cpu_scoring

    if bool(a.model) == bool(a.scores):
        raise StageError("--model", "give exactly one of --model (score with a cross-encoder) and --scores")
    if a.depth < 1:
        raise StageError("--depth", f"must be at least 1, not {a.depth}")
    if a.batch_size < 1:
        raise StageError("--batch-size", f"must be at least 1, not {a.batch_size}")
    if a.shards < 1:
        raise StageError("--shards", f"must be at least 1, not {a.shards}")
    set_threads(a.threads)
    queries = read_queries(a.queries)
    # the queries asked for (a split's test questions) out of a run that may hold more (BM25 runs all), kept as read
    run = read_run(a.run, qids=queries)
    if not run:
        raise StageError(a.run, f"none of its queries is in {a.queries}")
    run = query_shard(run, a.shard, a.shards)
    if a.scores:
        reranked = rerank.rerank_from_scores(run, read_run(a.scores), a.depth, a.run, a.scores)
        write_run(a.out, reranked, a.tag)
        return a.out, {"queries": len(reranked), "depth": a.depth, "pairs": sum(map(len, reranked.values())),
                       "scores_from": a.scores}
    wanted = {doc for ranked in run.values() for doc, _ in ranked[:a.depth]}
    passages = candidate_texts(a.candidates, wanted, "contents")
    require_texts(passages, wanted, a.run, a.candidates)
    model, tokenizer = rerank.load(a.model, a.tokenizer or None)
    max_length = rerank.usable_length(model, a.max_length)
    with cpu_scoring(a.precision):
        reranked = rerank.rerank(run, queries, passages, model, tokenizer, a.depth, max_length, a.batch_size)
    write_run(a.out, reranked, a.tag)
    return a.out, {"queries": len(reranked), "depth": a.depth, "pairs": sum(map(len, reranked.values())),
                   "max_length": max_length, "num_labels": model.config.num_labels}


# --- run fusion (RepBERT sec. 4.4.3 and 4.5) ---------------------------------------------------

def load_runs(paths) -> list[dict]:
    """TREC runs, each of which must exist, parse and hold at least one ranking."""
    runs = []
    for path in paths:
        run = read_run(path)
        if not run:
            raise StageError(path, "the run has no rankings")
        runs.append(run)
    return runs


@stage("fuse-runs", arg("--runs", required=True, nargs="+", help="two or more TREC runs; for alternate, in priority order"),
       arg("--method", required=True, choices=["alternate", "rrf", "combsum"]), arg("--depth", type=int, default=1000),
       arg("--no-truncate", action="store_true", help="alternate: keep the whole merged union, not its top --depth"),
       arg("--rrf-k", type=int, default=60), arg("--normalisation", default="minmax", choices=["minmax", "zscore", "none"]),
       arg("--tag", default=""), arg("--out", required=True))
def fuse_runs(a):
    """Fuse TREC runs: RepBERT's alternating merge (eq. 6), reciprocal rank fusion or CombSUM."""
    from ..retrieval import fusion

    if a.no_truncate and a.method != "alternate":
        raise StageError("--no-truncate", f"applies to --method alternate only, not {a.method}")
    if len(a.runs) < 2:   # before reading, so a lone run is reported as such
        raise StageError("--runs", f"fusion needs at least two runs, not {len(a.runs)}")
    runs = load_runs(a.runs)
    fused = fusion.fuse(runs, a.method, a.depth, not a.no_truncate, a.rrf_k, a.normalisation)
    # scores strictly decreasing as written, so tools that re-sort by score keep the fused order
    write_run(a.out, fusion.strictly_decreasing(fused), a.tag or f"fused-{a.method}")
    return a.out, {"runs": len(runs), "queries": len(fused), "documents": sum(map(len, fused.values()))}


@stage("consistency", arg("--run", required=True),
       arg("--reference", required=True, help="e.g. the BM25 run whose top documents trained the reranker"),
       arg("--queries", default="", help="only these queries (a split's test questions); default: all of the run's"),
       arg("--depths", type=int, nargs="+", required=True), arg("--reference-depth", type=int, default=1000),
       arg("--out", required=True))
def consistency(a):
    """RepBERT eq. 5: the share of a run's top-n documents that the reference run also retrieves."""
    from ..retrieval.fusion import consistency_shares, mean_shares

    run = load_runs([a.run])[0]
    if a.queries:
        wanted = read_queries(a.queries)
        run = {qid: ranked for qid, ranked in run.items() if qid in wanted}
        if not run:
            raise StageError(a.run, f"none of its queries is in {a.queries}")
    reference = read_run(a.reference, qids=run)   # a BM25 run of every query: only those compared are kept
    shares = consistency_shares(run, reference, a.depths, a.reference_depth)
    factors = {str(n): value for n, value in mean_shares(shares).items()}
    # per query too: the claims compare runs query by query
    write_json(a.out, {"depths": factors, "queries": len(run),
                       "per_query": {str(n): by_query for n, by_query in shares.items()}})
    return a.out, {"queries": len(run), "depths": factors}


@stage("latency", arg("--method", required=True, choices=["bm25", "dense"]),
       arg("--index", required=True, help="Lucene index folder (bm25) or Faiss index (dense)"),
       arg("--model", default="", help="dense: the two-tower model folder"), arg("--queries", required=True),
       arg("--depth", type=int, required=True), arg("--limit", type=int, default=0, help="first N queries; 0 = all"),
       arg("--k1", type=float, default=0.9), arg("--b", type=float, default=0.4), arg("--nprobe", type=int, default=0),
       arg("--threads", type=int, default=1), arg("--out", required=True))
def latency(a):
    """Milliseconds per query, one query at a time: BM25 search, or query encoding + Faiss search."""
    from ..retrieval import latency as measure

    set_threads(a.threads)
    queries = dict(list(read_queries(a.queries).items())[:a.limit or None])
    texts = list(queries.values())
    if not texts:
        raise StageError(a.queries, "no queries")
    if not Path(a.index).exists():
        raise StageError(a.index, "no such index")
    if a.method == "bm25":
        seconds = measure.bm25(a.index, texts, a.depth, a.k1, a.b)
    else:
        if not a.model:
            raise StageError("--model", "dense latency needs the model folder")
        seconds = measure.dense(a.model, a.index, texts, a.depth, a.nprobe)
    result = {"method": a.method, "depth": a.depth, **measure.summary(seconds), "hardware": measure.hardware(a.threads),
              "per_query_ms": {qid: round(1000 * s, 4) for qid, s in zip(queries, seconds)}}
    write_json(a.out, result)
    return a.out, {k: v for k, v in result.items() if k not in ("hardware", "per_query_ms")}
