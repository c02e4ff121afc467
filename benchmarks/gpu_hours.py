"""Estimated GPU-hours per paper table at paper scale (python -m benchmarks.run --part gpu_hours).

What is counted: the transformer work of every job the paper profile plans for a table (a dry run in a
fresh copy): training examples (steps x batch) and the tokens each one passes through its towers, corpus
encodings, ANCE's periodic re-encoding, and the cross-encoder's reranking. FLOPs per token follow the
usual dense-transformer count (2 x 12 L h^2 for the weights plus 4 L T h for attention, per forward
token; training = 3 x forward). Not counted: bag-of-words models, Faiss index building and search, BM25,
data preparation, query encoding at search time, and validation passes; a job shared by several tables
(a pre-trained encoder, a baseline) counts in each.

Measured here, in the same run: seconds per forward token and per training token of a BERT-base-shaped
model (random weights, no hub), and per forward token of a BERT-large-shaped one, on this machine's CPU.
From them: the FLOP rates this CPU reaches, the CPU-hours a table would take here, and the GPU-hours at
an assumed sustained GPU rate (GPU_FLOPS below: an A100's 312 TFLOP/s bf16 peak at 40% utilisation)."""
from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .workflow_harness import planned_jobs

GPU_FLOPS = 0.40 * 312e12
SHAPES = {"base": (12, 768), "large": (24, 1024)}
# corpus sizes at paper scale: ReQA candidates (Chang et al. Table 2), MS MARCO passage, Table 6's 1M extra
CORPUS = {"squad": 101_951, "nq": 239_008, "nq-open": 239_008 + 1_000_000, "msmarco-passage": 8_841_823}
RERANK_QUERIES = 6_980   # MS MARCO dev small
# a job's model is bag-of-words when it starts from or encodes with one (BoW-MLP, Three-T Emb's hashed BoW)
BAG_OF_WORDS = re.compile(r"bow|threet-emb")


def forward_flops(tokens: float, length: int, shape: str) -> float:
    layers, hidden = SHAPES[shape]
    return tokens * (24 * layers * hidden ** 2 + 4 * layers * length * hidden)


def flag(command: str, name: str, default=None):
    match = re.search(rf"--{name} ('?)([^ ']+)\1", command)
    return match.group(2) if match else default


def job_work(rule: str, command: str, lengths: dict[str, int]) -> dict[str, float]:
    """FLOPs of one planned job by kind (train_base, forward_base, forward_large); {} for what is not counted."""
    train, forward = _job_work(rule, command, lengths)
    large = rule == "rerank" and "large" in flag(command, "model", "")
    return {k: v for k, v in {"train_base": train, "forward_large" if large else "forward_base": forward}.items() if v}


def _job_work(rule: str, command: str, lengths: dict[str, int]) -> tuple[float, float]:
    dataset = re.search(r"artifacts/([a-z0-9-]+)/", command)
    dataset = dataset.group(1) if dataset else ""
    if BAG_OF_WORDS.search(flag(command, "start", "") + flag(command, "encoder", "") + flag(command, "model", "")):
        return 0.0, 0.0                              # bag-of-words towers: no transformer
    steps, batch = int(flag(command, "steps", 0)), int(flag(command, "batch-size", 0))
    query, doc = int(flag(command, "query-length", 0)), int(flag(command, "doc-length", 0))
    if rule in ("pretrain_two_tower", "finetune", "train_repbert"):
        return forward_flops(steps * batch * query, query, "base") * 3 + forward_flops(steps * batch * doc, doc, "base") * 3, 0.0
    if rule in ("train_margin_threet", "train_margin_quadbert"):
        docs = 3 if "--mined" in command else 2
        return 3 * (forward_flops(steps * batch * query, query, "base") + forward_flops(steps * batch * docs * doc, doc, "base")), 0.0
    if rule == "pretrain_mlm_nsp" or (rule == "pretrain_mlm" and "--hub-model ''" in command):
        length = int(flag(command, "max-length"))
        return 3 * forward_flops(steps * batch * length, length, "base"), 0.0
    if rule == "train_negatives":
        docs = 1 + int(flag(command, "negatives-per-query", 1))
        train = 3 * (forward_flops(steps * batch * query, query, "base") + forward_flops(steps * batch * docs * doc, doc, "base"))
        refreshes = steps // int(flag(command, "refresh-every")) if "--negatives async" in command else 0
        return train, forward_flops(refreshes * CORPUS[dataset] * doc, doc, "base")
    if rule == "train_ltre":   # only the query tower learns; the doc side is a fixed index
        return 3 * forward_flops(steps * batch * query, query, "base"), 0.0
    if rule in ("encode_candidates", "encode_candidates_shard"):
        model = re.search(r"dense/([^/]+)/", command).group(1)
        length = lengths["ltre" if model.startswith("neg-") else "repbert" if model == "repbert"
                         else "quadrupletbert" if model.startswith(("threet-", "quadbert-")) else "chang2020"]
        share = 1 / int(flag(command, "shards", 1))
        return 0.0, forward_flops(CORPUS[dataset] * share * length, length, "base")
    if rule == "rerank" and "--scores" not in command:
        length, depth = int(flag(command, "max-length")), int(flag(command, "depth"))
        shape = "large" if "large" in flag(command, "model", "") else "base"
        return 0.0, forward_flops(RERANK_QUERIES * depth * length, length, shape)
    return 0.0, 0.0


def table_jobs(workdir: Path, target: str) -> list[tuple[str, str]]:
    """(rule, shell command) of every job `snakemake -n -p` plans for `target` on the paper profile."""
    plan = subprocess.run([sys.executable, "-m", "snakemake", target, "--configfile", "config/paper.yaml", "-n", "-p"],
                          cwd=workdir, capture_output=True, text=True, check=True).stdout
    return [(rule, next(iter(re.findall(r"^Shell command: (.*)$", block, re.M)), "")) for rule, block in planned_jobs(plan)]


def bert(shape: str):
    """A BERT of SHAPES[shape] with random weights (no hub here)."""
    from transformers import BertConfig, BertModel

    layers, hidden = SHAPES[shape]
    return BertModel(BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=hidden // 64,
                                intermediate_size=4 * hidden, max_position_embeddings=512))


def median_seconds(fn, repeats: int, warmup: int = 1, wait=lambda: None) -> float:
    """Median seconds of one call of fn after `warmup` calls; `wait` (a GPU's synchronize) ends each timing."""
    for _ in range(warmup):
        fn()
    wait()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        wait()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def measure_cpu(threads: int = 2, repeats: int = 3) -> dict[str, float]:
    """FLOP/s this CPU reaches: BERT-base training and forward, BERT-large forward (random weights)."""
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)

    def seconds(fn):
        return median_seconds(fn, repeats)

    base, large = bert("base"), bert("large")
    ids = lambda batch, length: torch.randint(1000, 20000, (batch, length))   # noqa: E731

    def train_step():
        base.train()
        base(input_ids=ids(4, 128)).last_hidden_state.mean().backward()

    def forward(net, batch, length):
        net.eval()
        with torch.no_grad():
            net(input_ids=ids(batch, length))

    return {"train_base": 3 * forward_flops(4 * 128, 128, "base") / seconds(train_step),
            "forward_base": forward_flops(8 * 256, 256, "base") / seconds(lambda: forward(base, 8, 256)),
            "forward_large": forward_flops(2 * 512, 512, "large") / seconds(lambda: forward(large, 2, 512))}


def hours(flops: dict[str, float], rates: dict[str, float] | None) -> float:
    """Hours to do `flops` (by kind) at `rates` (FLOP/s by kind), or at GPU_FLOPS for every kind."""
    return sum(v / (rates[k] if rates else GPU_FLOPS) for k, v in flops.items()) / 3600


# A rate stated with the request for these estimates, not measured by this project's benchmarks: train-repbert
# at its paper shape on one H200 (gpu_stages.py measures the paper profile's own regimes)
SMALL_BATCH_STATED = {"regime": "train-repbert, BERT-base, batch 52, query 20 / doc 256, bf16", "device": "NVIDIA H200",
            "steps_per_s": 6.9}
SMALL_BATCH = 64   # a rank's batch at or below this: launch-bound on a GPU, not FLOP-bound (measured by gpu_stages.py)


def flop_basis_steps_per_s(batch: int, query: int, doc: int, rate: float) -> float:
    """Steps a second the FLOP basis implies for a two-tower step (both towers BERT-base) at `rate` FLOP/s."""
    return rate / (3 * (forward_flops(batch * query, query, "base") + forward_flops(batch * doc, doc, "base")))


def basis(jobs: list[tuple[str, str]], lengths: dict[str, int], gpu_rates: dict[str, float] | None) -> dict:
    """What a table's GPU-hours rest on, and how much of them small batches make too low: the FLOP basis's hours
    of the training jobs whose batch a GPU is at most SMALL_BATCH, and the stated factor for such a step."""
    small = {}
    for rule, command in jobs:
        gpus = int(m.group(1)) if (m := re.search(r"towers\.training\.distributed (\d+)", command)) else 1
        work = job_work(rule, command, lengths)
        if "train_base" in work and int(flag(command, "batch-size", 0)) // gpus <= SMALL_BATCH:
            small[rule] = small.get(rule, 0.0) + hours({"train_base": work["train_base"]}, gpu_rates)
    rate = (gpu_rates or {}).get("train_base", GPU_FLOPS)
    stated = SMALL_BATCH_STATED
    factor = flop_basis_steps_per_s(52, 20, 256, rate) / stated["steps_per_s"]
    return {"basis": "FLOP estimate: each job's FLOPs / a rate measured at batch 256, full length" if gpu_rates
                     else "FLOP estimate: each job's FLOPs / an assumed GPU rate",
            "small_batch_training_hours": round(sum(small.values()), 1),
            "small_batch_rules": sorted(small),
            "small_batch_caveat": (f"training jobs at batch <= {SMALL_BATCH} a GPU are launch-bound: as stated, "
                                   f"{stated['regime']} ran at {stated['steps_per_s']} steps/s on an "
                                   f"{stated['device']}, "
                                   f"where this basis gives {flop_basis_steps_per_s(52, 20, 256, rate):.1f}: those "
                                   f"jobs' hours are about {factor:.1f}x too low (a correction stated, not measured "
                                   f"here; python -m benchmarks.gpu_stages measures it)") if small else ""}


def estimate(workdir: Path, targets: list[str], lengths: dict[str, int], rates: dict[str, float],
             gpu_rates: dict[str, float] | None = None) -> dict:
    """Per table: planned jobs, PFLOPs by kind, CPU-hours here, GPU-hours at `gpu_rates` (measured on a GPU by
    gpu_throughput.py) or, without them, at GPU_FLOPS."""
    out = {}
    for target in targets:
        flops: dict[str, float] = {}
        jobs = table_jobs(workdir, target)
        for rule, command in jobs:
            for kind, value in job_work(rule, command, lengths).items():
                flops[kind] = flops.get(kind, 0.0) + value
        out[target] = {"jobs": len(jobs), "pflops": {k: round(v / 1e15, 1) for k, v in flops.items()},
                       "cpu_hours_here": round(hours(flops, rates)),
                       "gpu_hours": round(hours(flops, gpu_rates), 1), **basis(jobs, lengths, gpu_rates)}
    return out


class GpuBusy:
    """The GPU's busy share (nvidia-smi's utilization.gpu, sampled every 0.2 s) while the block runs: `share` over
    the block, `share_between(t0, t1)` over part of it (perf_counter times); None without nvidia-smi (the CPU)."""

    def __enter__(self):
        import shutil
        import threading

        self.share, self.process, self.samples = None, None, []
        if shutil.which("nvidia-smi"):
            self.process = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                                             "-i", "0", "-lms", "200"], stdout=subprocess.PIPE, text=True)
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()
        return self

    def _read(self):
        for line in self.process.stdout:
            if line.strip().isdigit():
                self.samples.append((time.perf_counter(), float(line)))

    def __exit__(self, *_):
        if self.process is not None:
            self.process.terminate()
            self.process.wait()
            self.reader.join(timeout=5)
            self.share = self.share_between(float("-inf"), float("inf"))

    def share_between(self, start: float, stop: float) -> float | None:
        values = [v for t, v in self.samples if start <= t <= stop]
        return round(statistics.mean(values) / 100, 3) if values else None
