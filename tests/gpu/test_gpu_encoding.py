"""Encoding, reranking and searching on the GPU against the CPU (docs/gpu.md; make test-gpu).

The paper profile encodes in fp16 on the GPU (retrieval/encode.py) and places Faiss indexes there when
Faiss's GPU build is installed (vector_index.to_device). Both must give what fp32 on the CPU gives: every
vector within cosine 0.999 of its CPU twin, and the same ranked lists up to ties. The encoder is BERT-base
shaped (random weights: no hub here), the texts synthetic with lengths spread over the doc length.
Skips without CUDA; TOWERS_GPU_DRY_RUN=1 runs the device side on the CPU too (checks the harness here).
TOWERS_GPU_RECORD=<file> appends one JSON line per check."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from gpu_side import DRY_RUN, marks, record as keep, run_on

pytestmark = marks

MIN_COSINE = 0.999
DEPTH = 10


def record(check: str, **values) -> None:
    keep("check", check, **values)


def on_device(monkeypatch, fn, cpu: bool = False):
    """fn() with the stages on the GPU (the CPU in a dry run, or with `cpu`), and its seconds."""
    run_on(monkeypatch, cpu)
    began = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - began


def on_cpu(monkeypatch, fn):
    return on_device(monkeypatch, fn, cpu=True)


def synthetic_texts(rng, count: int, words: list[str], shortest: int, longest: int) -> list[str]:
    return [" ".join(rng.choice(words, size=int(rng.integers(shortest, longest + 1)))) for _ in range(count)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from towers.modeling.tokenizer import train_wordpiece

    rng = np.random.default_rng(7)
    letters = list("abcdefghijklmnopqrstuvwxyz")
    words = ["".join(rng.choice(letters, size=int(rng.integers(2, 9)))) for _ in range(3000)]
    folder = tmp_path_factory.mktemp("tokenizer")
    train_wordpiece(synthetic_texts(rng, 400, words, 20, 60), folder, 4000, 1, True)
    return {"tokenizer": folder, "docs": synthetic_texts(rng, 192, words, 5, 100),
            "queries": synthetic_texts(rng, 48, words, 2, 12)}


def bert_base_tower(vocab: int, pooling: str, embedding_dim: int | None):
    from transformers import BertConfig, BertModel

    from towers.modeling.models import Tower

    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=vocab, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                   intermediate_size=3072, max_position_embeddings=512))
    return Tower(encoder, pooling, embedding_dim).eval()


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def rankings_equal_up_to_ties(scores, cpu_ids, device_ids, tie: float) -> tuple[bool, float, list, list]:
    """Whether every rank where the two lists differ holds documents whose CPU scores (`scores[q][doc]`) are
    within `tie`; the share of queries whose lists are identical; the differing (query, CPU doc, device doc)
    ranks, and those of them beyond a tie."""
    differs = [(q, a, b) for q in range(len(cpu_ids)) for a, b in zip(cpu_ids[q], device_ids[q]) if a != b]
    beyond = [(q, a, b) for q, a, b in differs if abs(scores[q][a] - scores[q][b]) > tie]
    return not beyond, 1 - len({q for q, _, _ in differs}) / len(cpu_ids), differs, beyond


@pytest.mark.parametrize("pooling,embedding_dim,doc_length", [("cls", 128, 288), ("mean", None, 256)])
def test_fp16_encoding_matches_fp32_cpu(monkeypatch, corpus, pooling, embedding_dim, doc_length):
    """Chang et al. (CLS + linear head, docs of 288) and RepBERT (mean pooling, no head, docs of 256)."""
    import faiss
    from transformers import AutoTokenizer

    from towers.retrieval.encode import encode

    tokenizer = AutoTokenizer.from_pretrained(corpus["tokenizer"])
    tower = bert_base_tower(len(tokenizer), pooling, embedding_dim)

    def both():
        docs = encode(tower, tokenizer, corpus["docs"], "doc", doc_length, 64, desc=None)
        queries = encode(tower, tokenizer, corpus["queries"], "query", 32, 64, desc=None)
        return docs, queries

    (cpu_docs, cpu_queries), cpu_s = on_cpu(monkeypatch, both)
    (dev_docs, dev_queries), dev_s = on_device(monkeypatch, both)
    doc_cos, query_cos = cosines(cpu_docs, dev_docs), cosines(cpu_queries, dev_queries)

    def ranked(docs, queries):
        index = faiss.IndexFlatIP(docs.shape[1])
        index.add(docs)
        return index.search(queries, DEPTH)[1]

    cpu_ids, dev_ids = ranked(cpu_docs, cpu_queries), ranked(dev_docs, dev_queries)
    scores = cpu_queries @ cpu_docs.T
    # a tie: two CPU scores closer than fp16's rounding of the vectors moves a score (0.1% of its scale)
    tie = 1e-3 * float(np.abs(scores).max())
    equal, identical, _, _ = rankings_equal_up_to_ties(scores, cpu_ids, dev_ids, tie)
    record("encode_fp16", pooling=pooling, embedding_dim=embedding_dim, doc_length=doc_length,
           docs=len(cpu_docs), queries=len(cpu_queries), min_doc_cosine=float(doc_cos.min()),
           min_query_cosine=float(query_cos.min()), rankings_equal_up_to_ties=equal, tie=tie,
           queries_identical_top10=identical, cpu_seconds=round(cpu_s, 2), device_seconds=round(dev_s, 2))
    assert doc_cos.min() >= MIN_COSINE, f"doc vector cosine {doc_cos.min():.5f} < {MIN_COSINE}"
    assert query_cos.min() >= MIN_COSINE, f"query vector cosine {query_cos.min():.5f} < {MIN_COSINE}"
    assert equal, f"top-{DEPTH} lists differ beyond ties of {tie:.4g} (identical for {identical:.0%} of queries)"


def test_fp16_reranking_matches_fp32_cpu(monkeypatch, corpus):
    """A BERT-base-shaped 2-label cross-encoder (monoBERT's head; random weights) reorders each query's 6
    candidates in fp16 on the GPU as in fp32 on the CPU, up to ties."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from towers.retrieval.rerank import score_pairs

    tokenizer = AutoTokenizer.from_pretrained(corpus["tokenizer"])
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(tokenizer), num_labels=2)).eval()
    per_query = 6
    pairs = [(q, corpus["docs"][(i * per_query + j) % len(corpus["docs"])])
             for i, q in enumerate(corpus["queries"][:32]) for j in range(per_query)]
    cpu, cpu_s = on_cpu(monkeypatch, lambda: score_pairs(model, tokenizer, pairs, 256, 64, desc=None))
    dev, dev_s = on_device(monkeypatch, lambda: score_pairs(model, tokenizer, pairs, 256, 64, desc=None))
    cpu, dev = cpu.reshape(-1, per_query), dev.reshape(-1, per_query)
    # a tie: two CPU scores closer than fp16 moves one. Vectors keep cosine 0.9999996 (the encoding check), so a
    # random head's log-odds move by about 1e-3; 1% of the scores' spread, at least 2e-3
    tie = max(2e-3, 0.01 * float(cpu.max() - cpu.min()))
    cpu_order, dev_order = np.argsort(-cpu, axis=1), np.argsort(-dev, axis=1)
    equal, identical, _, _ = rankings_equal_up_to_ties(cpu, cpu_order, dev_order, tie)
    record("rerank_fp16", pairs=len(pairs), max_score_diff=float(np.abs(cpu - dev).max()),
           score_spread=float(cpu.max() - cpu.min()), rankings_equal_up_to_ties=equal, tie=tie,
           queries_identical=identical, cpu_seconds=round(cpu_s, 2), device_seconds=round(dev_s, 2))
    assert equal, f"reranked lists differ beyond ties of {tie:.4g} (identical for {identical:.0%} of queries)"


def test_the_dense_stages_on_the_gpu_give_the_cpus_run(monkeypatch, corpus, tmp_path):
    """encode-candidates, build-index, dense-search and evaluate through their command lines (as Snakemake runs
    them), once with TOWERS_DEVICE=cpu and once on the GPU: vectors within cosine 0.999, runs equal up to ties."""
    import json

    from transformers import AutoTokenizer

    from conftest import run_stage
    from towers.io import read_run
    from towers.modeling.models import TwoTower

    tokenizer = AutoTokenizer.from_pretrained(corpus["tokenizer"])
    config = {"pooling": "cls", "embedding_dim": 128, "shared": True, "query_length": 32, "doc_length": 256,
              "doc_text": "contents"}
    TwoTower(bert_base_tower(len(tokenizer), "cls", 128), None, config).save(tmp_path / "model", tokenizer)
    docs = corpus["docs"]
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": t}) + "\n"
                                                       for i, t in enumerate(docs)))
    # query i: the opening words of doc 4i, its one relevant document
    queries = {f"q{i}": " ".join(docs[4 * i].split()[:6]) for i in range(len(docs) // 4)}
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in queries.items()))
    (tmp_path / "qrels.txt").write_text("".join(f"q{i} 0 d{4 * i} 1\n" for i in range(len(queries))))

    def stages(side: str):
        out = tmp_path / side
        out.mkdir()
        steps = [["encode-candidates", "--model", tmp_path / "model", "--candidates", tmp_path / "candidates.jsonl",
                  "--embeddings", out / "e.npy", "--ids", out / "e.ids", "--batch-size", 64],
                 ["build-index", "--embeddings", out / "e.npy", "--factory", "Flat", "--out", out / "i.faiss"],
                 ["dense-search", "--model", tmp_path / "model", "--index", out / "i.faiss", "--ids", out / "e.ids",
                  "--queries", tmp_path / "queries.tsv", "--run", out / "run.trec", "--depth", len(docs)],
                 ["evaluate", "--run", out / "run.trec", "--qrels", tmp_path / "qrels.txt", "--queries",
                  tmp_path / "queries.tsv", "--metrics", "RR@10", "nDCG@10", "--out", out / "metrics.json"]]
        for step in steps:
            done = run_stage(*step)
            assert done.returncode == 0, f"{side}: {step[0]} failed:\n{done.stderr[-3000:]}"
        return out

    cpu_out, cpu_s = on_cpu(monkeypatch, lambda: stages("cpu"))
    dev_out, dev_s = on_device(monkeypatch, lambda: stages("device"))
    cpu_vectors, dev_vectors = np.load(cpu_out / "e.npy"), np.load(dev_out / "e.npy")
    doc_cos = cosines(cpu_vectors, dev_vectors)
    cpu_run, dev_run = read_run(cpu_out / "run.trec"), read_run(dev_out / "run.trec")
    assert set(cpu_run) == set(dev_run) and all(len(cpu_run[q]) == len(dev_run[q]) for q in cpu_run)
    # every document is in both runs (depth: the corpus), so the CPU's score of any document the GPU ranks is known;
    # a tie: two documents whose CPU scores are closer than 0.1% of the scores' scale
    tie = 1e-3 * max(abs(s) for ranked in cpu_run.values() for _, s in ranked)

    def top(run):
        return [[doc for doc, _ in run[q][:DEPTH]] for q in cpu_run]

    _, _, differs, beyond = rankings_equal_up_to_ties([dict(ranked) for ranked in cpu_run.values()], top(cpu_run),
                                                      top(dev_run), tie)
    metrics = [json.loads((out / "metrics.json").read_text()) for out in (cpu_out, dev_out)]
    record("dense_stages", docs=len(docs), queries=len(queries), min_doc_cosine=float(doc_cos.min()),
           top10_rank_differences=len(differs), beyond_ties=len(beyond), tie=tie,
           cpu_metrics=metrics[0]["metrics"], device_metrics=metrics[1]["metrics"],
           cpu_seconds=round(cpu_s, 2), device_seconds=round(dev_s, 2))
    assert doc_cos.min() >= MIN_COSINE, f"doc vector cosine {doc_cos.min():.5f} < {MIN_COSINE}"
    assert not beyond, f"{len(beyond)} ranks differ beyond ties of {tie:.4g}: {beyond[:5]}"


def test_faiss_index_on_the_gpu_searches_as_on_the_cpu(monkeypatch):
    """vector_index.to_device places a flat and an IVF index on the GPU; both return the CPU's results."""
    from towers.retrieval import vector_index

    if vector_index.gpu_count() == 0 and not DRY_RUN:
        import faiss

        record("faiss_gpu", installed=False, faiss_version=faiss.__version__)
        pytest.skip("Faiss's GPU build is not installed (faiss-cpu has no StandardGpuResources)")
    rng = np.random.default_rng(3)
    docs = rng.standard_normal((20_000, 128)).astype(np.float32)
    queries = rng.standard_normal((200, 128)).astype(np.float32)
    for factory, nprobe in (("Flat", None), ("IVF64,Flat", 8)):
        cpu_index = vector_index.build(docs, factory)
        placed = vector_index.to_device(cpu_index)
        on_gpu = type(placed).__name__.startswith("Gpu")
        cpu_scores, cpu_ids = vector_index.search(cpu_index, queries, DEPTH, nprobe)
        dev_scores, dev_ids = vector_index.search(placed, queries, DEPTH, nprobe)
        tie = 1e-4 * float(np.abs(cpu_scores).max())
        full = queries @ docs.T
        equal, identical, _, _ = rankings_equal_up_to_ties(full, cpu_ids, dev_ids, tie)
        record("faiss_gpu", installed=True, factory=factory, placed_on_gpu=on_gpu, equal_up_to_ties=equal,
               queries_identical=identical, max_score_diff=float(np.abs(cpu_scores - dev_scores).max()))
        assert on_gpu or DRY_RUN, f"{factory}: to_device kept the index on the CPU"
        assert equal, f"{factory}: GPU search differs beyond ties (identical for {identical:.0%} of queries)"
