"""Retrieval latency per query, measured the way a search service answers: one query at a time,
model and index already loaded, after a few warm-up queries. BM25 is Pyserini's Lucene search;
a dense retriever's time is query encoding plus Faiss search (RepBERT Table 1's "ms/query")."""
from __future__ import annotations

import os
import platform
import time
from typing import Callable

import numpy as np

WARMUP = 5


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo; elsewhere the platform's processor name)."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), cpu)
    except OSError:
        return cpu


def hardware(threads: int) -> dict:
    """What the numbers were measured on."""
    import torch

    return {"cpu": cpu_model(), "cores": os.cpu_count(), "threads": threads,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}


def timed_each(queries: list[str], answer: Callable[[str], object]) -> list[float]:
    """Seconds per query; the first WARMUP queries are answered first and not counted."""
    for text in queries[:WARMUP]:
        answer(text)
    seconds = []
    for text in queries:
        began = time.perf_counter()
        answer(text)
        seconds.append(time.perf_counter() - began)
    return seconds


def summary(seconds: list[float]) -> dict:
    ms = 1000 * np.asarray(seconds)
    return {"queries": len(ms), "ms_per_query": round(float(ms.mean()), 3), "median_ms": round(float(np.median(ms)), 3),
            "p95_ms": round(float(np.percentile(ms, 95)), 3)}


def bm25(index_dir, queries: list[str], depth: int, k1: float, b: float) -> list[float]:
    from .bm25 import readable_index, searcher

    lucene = searcher(index_dir, k1, b)
    with readable_index(index_dir):
        return timed_each(queries, lambda text: lucene.search(text, depth))


def dense(model_dir, index_path, queries: list[str], depth: int, nprobe: int) -> list[float]:
    import torch

    from ..modeling.models import TwoTower, text_options
    from . import vector_index
    from .encode import encode

    model, tokenizer = TwoTower.load(model_dir)
    index = vector_index.load(index_path)
    length = model.config["query_length"]
    options = text_options(model.config, "query")

    def answer(text: str):
        with torch.no_grad():
            vector = encode(model.query, tokenizer, [text], "query", length, 1, desc=None, **options)
        return vector_index.search(index, vector, depth, nprobe)

    return timed_each(queries, answer)
