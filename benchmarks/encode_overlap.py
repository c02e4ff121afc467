"""encode_corpus with the next chunk read and tokenised in a background thread, against the serial loop.

Runs alternate (serial, overlapped; then the other order) in one process, so drift hits both alike; the ratio is
taken pair by pair (overlapped seconds / serial seconds: below 1 is faster). Every run's bytes must equal the first
serial run's. Synthetic MS MARCO-like passages (synthetic_msmarco.Text), a WordPiece vocabulary trained on a subset,
a random BERT of the mini profile's encoder shape or BERT-base, mean pooling (RepBERT's). On CUDA it also records
the GPU's busy share in each run. Kept in benchmarks/results.json under `encode_overlap` (--record).

    python -m benchmarks.encode_overlap --record                                  # CPU: torch threads 1 and 2
    python -m benchmarks.encode_overlap --shape base --passages 500000 --repeats 1 --doc-length 256 --batch-size 512
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


SHAPES = {"mini": {"hidden": 128, "layers": 2, "heads": 2, "intermediate": 512},   # params.yaml encoder
          "base": {"hidden": 768, "layers": 12, "heads": 12, "intermediate": 3072}}


def synthetic_rows(count: int, seed: int = 13) -> list[dict]:
    from .synthetic_msmarco import Text

    text = Text(seed)
    return [{"id": str(i), "contents": " ".join(text.vocab[p])} for i, p in enumerate(text.passages(count))]


def tower_of(tmp: Path, rows: list[dict], shape: str, vocab: int):
    import torch
    from transformers import AutoModel, AutoTokenizer

    from towers.modeling.models import Tower, random_encoder
    from towers.modeling.tokenizer import train_wordpiece

    train_wordpiece([r["contents"] for r in rows[:50_000]], tmp / "tok", vocab_size=vocab, min_frequency=2, lowercase=True)
    random_encoder(tmp / "tok", tmp / "enc", {**SHAPES[shape], "max_positions": 512}, seed=0)
    torch.manual_seed(0)
    return Tower(AutoModel.from_pretrained(tmp / "enc"), "mean", None).eval(), AutoTokenizer.from_pretrained(tmp / "tok")


def measure(tower, tok, rows: list[dict], tmp: Path, *, chunk: int, batch_size: int, doc_length: int,
            repeats: int) -> dict:
    from .gpu_hours import GpuBusy
    from towers.retrieval.encode import encode_corpus

    def one(overlap: bool, name: str, part: list[dict] = rows) -> tuple[float, bytes, float | None]:
        with GpuBusy() as busy:
            began = time.perf_counter()
            encode_corpus(tower, tok, iter(part), len(part), lambda r: r["contents"], tmp / f"{name}.npy",
                          tmp / f"{name}.ids", doc_length, batch_size, chunk=chunk, overlap=overlap, desc=None)
            seconds = time.perf_counter() - began
        return seconds, (tmp / f"{name}.npy").read_bytes(), busy.share

    one(False, "warm", rows[:chunk])   # first-call costs (allocator, kernels) in neither side
    runs = {"serial": [], "overlapped": []}
    busy = {"serial": [], "overlapped": []}
    reference, same = None, True
    for r in range(repeats):
        order = ("serial", "overlapped") if r % 2 == 0 else ("overlapped", "serial")
        for name in order:
            seconds, data, share = one(name == "overlapped", name)
            reference = reference if reference is not None else data
            same = same and data == reference
            runs[name].append(seconds)
            busy[name].append(share)
    ratios = [o / s for o, s in zip(runs["overlapped"], runs["serial"])]
    out = {name: {"median_s": round(statistics.median(s), 3), "runs_s": [round(x, 3) for x in s],
                  "passages_per_s": round(len(rows) / statistics.median(s), 1)} for name, s in runs.items()}
    for name in busy:
        if any(b is not None for b in busy[name]):
            out[name]["gpu_busy_share"] = busy[name]
    return {**out, "paired_ratio_median": round(statistics.median(ratios), 3),
            "paired_ratios": [round(x, 3) for x in ratios], "byte_identical": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=8192)
    parser.add_argument("--chunk", type=int, default=2048, help="rows a chunk (the stage's SORT_CHUNK is 65,536)")
    parser.add_argument("--shape", choices=list(SHAPES), default="mini")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--doc-length", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch threads, one measurement each")
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--out", help="also write the result here (JSON)")
    parser.add_argument("--record", action="store_true", help="keep it in benchmarks/results.json (encode_overlap)")
    a = parser.parse_args()

    import os

    import torch

    from towers.retrieval.encode import overlaps
    from towers.runtime import device

    rows = synthetic_rows(a.passages)
    result = {"device": torch.cuda.get_device_name(0) if device().type == "cuda" else f"cpu, {os.cpu_count()} cores",
              "passages": a.passages, "chunk": a.chunk, "shape": a.shape, "doc_length": a.doc_length,
              "batch_size": a.batch_size, "repeats": a.repeats, "date": time.strftime("%Y-%m-%d"),
              "ratio": "overlapped seconds / serial seconds, pair by pair (below 1: faster)"}
    with tempfile.TemporaryDirectory(prefix="towers-overlap-") as tmp:
        tower, tok = tower_of(Path(tmp), rows, a.shape, a.vocab)
        for threads in a.threads:
            torch.set_num_threads(threads)
            found = measure(tower, tok, rows, Path(tmp), chunk=a.chunk, batch_size=a.batch_size,
                            doc_length=a.doc_length, repeats=a.repeats)
            result[f"torch_threads_{threads}"] = {**found, "overlap_by_default": overlaps()}
            print(json.dumps({f"torch_threads_{threads}": found}), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    if a.record:
        from .workflow_harness import record

        record(("encode_overlap", "gpu" if device().type == "cuda" else "cpu"), result, replace=True)


if __name__ == "__main__":
    main()
