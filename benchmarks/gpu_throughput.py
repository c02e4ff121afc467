"""Throughput of BERT-base (and BERT-large) at the papers' shapes on a CUDA GPU, as the paper profile runs them.

Training: a two-tower step as training/loop.py takes it (bf16 autocast, in-batch softmax over the batch's
documents, AdamW, gradient clipping), at query/doc lengths 64/288 (Chang et al.) and 32/256 (RepBERT), in
pairs a second. Encoding: fp16 autocast as retrieval/encode.py does it, sequences a second at the doc
lengths; BERT-large at 512 for reranking. Every figure is also a FLOP rate by gpu_hours.forward_flops, the
count the GPU-hours estimate divides by (benchmarks/run.py --part gpu_hours reads them back from
results.json's gpu.throughput). Sequences are full length (no padding to skip): an upper bound on work.

python -m benchmarks.gpu_throughput OUT.json   (random weights; needs CUDA)
python -m benchmarks.gpu_throughput --record DIR   (here: results.json's `gpu` from what gpu_check.sh wrote in DIR)"""
from __future__ import annotations

import gc
import json
import statistics
import sys

import torch

from . import gpu_hours
from .gpu_hours import forward_flops

TRAIN_SHAPES = [(64, 288, 64), (64, 288, 256), (32, 256, 64), (32, 256, 256)]   # query, doc length, batch
ENCODE_SHAPES = [(288, 256), (256, 256), (64, 1024)]                            # length, batch


def bert(shape: str):
    return gpu_hours.bert(shape).cuda()


def timed(step, warmup: int = 3, repeats: int = 10) -> float:
    """Median seconds of one call, the GPU waited for."""
    return gpu_hours.median_seconds(step, repeats, warmup, wait=torch.cuda.synchronize)


def ids(batch: int, length: int) -> dict:
    return {"input_ids": torch.randint(1000, 20000, (batch, length), device="cuda"),
            "attention_mask": torch.ones(batch, length, dtype=torch.long, device="cuda")}


def training(query_length: int, doc_length: int, batch: int) -> dict:
    from towers.modeling.models import Tower, TwoTower

    torch.manual_seed(0)
    model = TwoTower(Tower(bert("base"), "cls", 768), Tower(bert("base"), "cls", 768), {}).cuda().train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    queries, docs = ids(batch, query_length), ids(batch, doc_length)
    labels = torch.arange(batch, device="cuda")

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            scores = model.query(**queries) @ model.doc(**docs).T
        loss = torch.nn.functional.cross_entropy(scores.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    seconds = timed(step)
    flops = 3 * (forward_flops(batch * query_length, query_length, "base") + forward_flops(batch * doc_length, doc_length, "base"))
    peak = torch.cuda.max_memory_allocated() / 2**30
    model = optimizer = None   # freed before the next shape (step() reads them: `del` would leave its names unbound)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return {"query_length": query_length, "doc_length": doc_length, "batch": batch, "step_seconds": round(seconds, 4),
            "pairs_per_second": round(batch / seconds, 1), "tflops": round(flops / seconds / 1e12, 1),
            "peak_gib": round(peak, 1)}


def encoding(shape: str, length: int, batch: int) -> dict:
    torch.manual_seed(0)
    model = bert(shape).eval()
    inputs = ids(batch, length)

    @torch.no_grad()
    def step():
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            model(**inputs).last_hidden_state[:, 0].float().cpu()

    seconds = timed(step)
    model = None   # freed before the next shape (as above)
    torch.cuda.empty_cache()
    return {"model": shape, "length": length, "batch": batch, "batch_seconds": round(seconds, 4),
            "sequences_per_second": round(batch / seconds, 1),
            "tflops": round(forward_flops(batch * length, length, shape) / seconds / 1e12, 1)}


def fits(measure, *shape) -> dict:
    """The measurement, or the shape and "out of memory" (a batch too large for this GPU is a finding too)."""
    try:
        return measure(*shape)
    except torch.cuda.OutOfMemoryError:
        gc.collect()   # the failed call's tensors, held by its traceback until now
        torch.cuda.empty_cache()
        print(f"{measure.__name__}{shape}: out of GPU memory", file=sys.stderr)
        return {"shape": shape, "out_of_memory": True}


def main(out_path: str) -> None:
    if not torch.cuda.is_available():
        sys.exit("gpu_throughput: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False   # as the stages leave it: fp32 stays fp32 outside autocast
    train = [fits(training, *shape) for shape in TRAIN_SHAPES]
    encode = [fits(encoding, "base", *shape) for shape in ENCODE_SHAPES] + [fits(encoding, "large", 512, 128)]
    # the estimate's rate per kind: the median over the paper shapes at batch 256 (smaller batches run slower:
    # the rows say by how much)
    def at_256(rows):
        rates = [r["tflops"] * 1e12 for r in rows if r.get("batch") in (128, 256) and "tflops" in r]
        return statistics.median(rates) if rates else None
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "train": train, "encode": encode,
           "flops": {"train_base": at_256(train), "forward_base": at_256([r for r in encode if r.get("model") == "base"]),
                     "forward_large": at_256([r for r in encode if r.get("model") == "large"])}}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))


def record_check(folder: str) -> None:
    """Keep what benchmarks/gpu_check.sh wrote into `folder` as results.json's `gpu`."""
    import re
    from pathlib import Path

    from .workflow_harness import record

    folder = Path(folder)
    log = (folder / "tests.log").read_text(encoding="utf-8")
    record("gpu", {
        "command": "bash benchmarks/gpu_check.sh DIR on the GPU machine, then python -m benchmarks.gpu_throughput --record DIR",
        "machine": [line for line in (folder / "env.txt").read_text().splitlines() if line and "WARNING" not in line],
        "tests": re.findall(r"^=*\s*(\d+ passed.*?)\s*=*$", log, re.M)[-1],
        "checks": [json.loads(line) for line in (folder / "gpu_checks.jsonl").read_text().splitlines()],
        "throughput": json.loads((folder / "gpu_throughput.json").read_text())}, replace=True)


if __name__ == "__main__":
    if sys.argv[1] == "--record":
        record_check(sys.argv[2])
    else:
        main(sys.argv[1])
