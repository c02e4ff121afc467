"""Benchmarks. Run with `make bench` (all parts) or `python -m benchmarks.run --part NAME`; each part
updates its own key of benchmarks/results.json.

pipeline: wall time of a clean `snakemake` of Chang et al.'s six tables (results/chang2020/table1-6.csv)
   on the embedded default, in a fresh copy of the workflow (goal: <= 60 min on 2 cores), of the no-op
   dry run that follows (goal: <= 10 s), and the jobs planned after a fine-tuning change (goal: no
   pre-training reruns);
encoding: candidate-encoding throughput of the pipeline's length-sorted batching against two loops in
   input order on the same model, texts and run: a naive one that pads every batch to the maximum
   length, and one that pads each batch to its own longest text (goal: >= 1.5x);
quadrupletbert: in a fresh copy, wall time of a clean `snakemake results/table1.csv` (goal: <= 20 min),
   then of `results/table2.csv` reusing table1's pre-training and models (goal: <= 40 min), and the
   jobs a dry run plans after only the margin list changes (goal: only the new margin's training,
   encoding, indexing, search and evaluation, plus the table);
repbert: in a fresh copy, wall time of a clean `snakemake` of every results/repbert/ target on the embedded
   default (goal: <= 40 min on 2 cores), and the latency the pipeline measured (ms per dev query, one at a
   time): RepBERT's query encoding + exact inner-product search against Pyserini BM25 on the same queries
   in the same run;
ltre: in a fresh copy, wall time of a clean `snakemake` of every results/ltre/ target on the embedded default
   (goal: <= 45 min on 2 cores), and LTRe's seconds per training step (encode, search, update) against the
   asynchronous-refresh baseline's (ANCE: its re-encoding and re-indexing spread over its steps), both from
   the step logs of that run, on the same data and machine;
plan: the time to plan the paper profile's whole DAG (`snakemake all --configfile config/paper.yaml -n`, goal:
   <= 30 s), the same through profiles/slurm, against planning the embedded default's DAG in the same run,
   in a fresh copy; the median of 3 each;
gpu_hours: estimated GPU-hours per paper table at paper scale, from the paper profile's planned jobs and FLOP
   rates measured on this CPU in the same run (assumptions: benchmarks/gpu_hours.py);
pairs: Chang et al.'s pre-training pair generation (towers.datasets.pretraining_pairs.generate_pairs) on enwiki-mini's
   parsed articles, per task (ict, bfs, wlp, ict+bfs+wlp): pairs generated per second, and peak memory (max
   RSS of a fresh process per measurement) on the corpus as is and replicated k times (ids, titles, link
   targets and redirects renamed per copy, so WLP still finds its links; written to a temp dir). Goal: the
   peak stays flat as the corpus grows (peak ratio near 1 for a corpus size ratio of k);
reference: the pinned MiniLM checkpoint through `snakemake results/zeroshot/<dataset>.csv` (fresh copy; enwiki-mini,
   and SQuAD dev when ../shared/data/squad has it) against sentence-transformers' encode, numpy exact search and
   pytrec_eval (goal: every metric within 1e-4, top-10 lists equal except ties), Success@k against R@k on the same
   runs, encoding speed of both on the same texts, and ~30 steps of the project's fine-tuning against
   MultipleNegativesRankingLoss on the same batches (goal: step losses within 1e-3; the project not slower);
reference_built: reference's retrieval comparison on what this checkout already built (--datasets, after
   `snakemake results/zeroshot/<dataset>.csv`): the reference side only;
reference_tiny: the same comparisons on the tiny articles of tests/fixtures (minutes);
report_view: results/report.html rendered by a real browser (Debian's headless Chromium): a screenshot of what a
   reader sees first (1400 x 1000) and of the first 6000 pixels, written to benchmarks/out/, with the page's size
   and the render time;
data_parallel: the mini profile's fine-tuning (its encoder shape, batch, lengths, lr, temperature) run by the
   stage as one process on 2 threads and as two data-parallel processes of 1 thread (gloo, the launcher the
   paper profile's training rules use), on the same synthetic QA set, once with the encoder's dropout off
   (goal: the same steps, step losses within 1e-3) and once on (each run draws its own masks, so they part):
   wall seconds of each and how far the step and validation losses drift apart. A CPU stand-in: it checks
   that the data-parallel path runs at mini scale and learns the same thing; its speed-up needs GPUs;
faults: bad params, bad input files and faults during runs (kill -9, failures during a params change, Ctrl-C,
   a killed Snakemake, read-only folders, injection attempts) on the test configuration, each outcome
   classified (clear error, traceback, silent wrong result, injection executed, partial output, handled);
   see benchmarks/faults.py. Goal: no traceback, no silent wrong result, no injection, no partial output.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from towers.reports.ltre import read_step_log
from .run_pairs import pairs, pairs_worker
from .run_reference import reference, reference_built, reference_tiny
from .workflow_harness import ROOT, clean_run, fresh_copy, job_counts, keep_outputs, read_results, record, timed
from towers.reports import papers as paper_list

PAPERS = paper_list.load(root=ROOT)   # data/papers/papers.yaml: each paper's targets
CHANG_TABLES = paper_list.targets(PAPERS["chang2020"])


def edit_params(workdir: Path, old: str, new: str) -> None:
    """Change one line of a copy's params.yaml, as a user would."""
    params = workdir / "params.yaml"
    text = params.read_text()
    if old not in text:
        sys.exit(f"params.yaml no longer holds {old!r}; update the benchmark")
    params.write_text(text.replace(old, new))


def pipeline(cores: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        fresh_copy(tmp)
        snake = [sys.executable, "-m", "snakemake", *CHANG_TABLES, "--cores", str(cores)]
        _, plan = timed([*snake, "-n"], tmp)
        jobs = job_counts(plan.stdout)
        clean, _ = timed(snake, tmp)
        (ROOT / "benchmarks/out/chang2020_clean_run_seconds.txt").write_text(f"{clean:.1f}\n")
        for table in CHANG_TABLES:   # kept before anything else can fail: compare with the committed ones
            for suffix in (".csv", ".json", ".csv.meta.json"):
                kept = ROOT / "benchmarks/out/chang2020" / Path(table).with_suffix(suffix).name
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(Path(tmp) / Path(table).with_suffix(suffix), kept)
        noop, again = timed([*snake, "-n"], tmp)
        edit_params(Path(tmp), "  lr: 5.0e-4                      # paper: 5e-5", "  lr: 2.0e-3                      # paper: 5e-5")
        _, replan = timed([*snake, "-n"], tmp)
        model = Path(tmp) / "artifacts/enwiki-mini/dense/transformer-mlm-l2-d128/80-20/model"
        kept = ROOT / "benchmarks/out/model"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(model, kept)
        candidates = ROOT / "benchmarks/out/candidates.jsonl"
        shutil.copy(Path(tmp) / "artifacts/enwiki-mini/collection/candidates.jsonl", candidates)
    return {"targets": CHANG_TABLES, "jobs": jobs, "clean_run_seconds": round(clean, 1),
            "clean_run_goal_seconds": 3600, "noop_dry_run_seconds": round(noop, 2), "noop_dry_run_goal_seconds": 10,
            "noop_says_nothing_to_do": "Nothing to be done" in again.stdout + again.stderr,
            "after_finetune_lr_change": {"change": "finetune.lr 5e-4 -> 2e-3", "jobs": job_counts(replan.stdout)}}


REPBERT_TARGETS = paper_list.targets(PAPERS["repbert"])


def repbert(cores: int) -> dict:
    with clean_run(REPBERT_TARGETS, cores) as (tmp, plan, seconds):
        latency = {name: json.loads((Path(tmp) / f"artifacts/enwiki-mini-passages/latency/{name}/dev.json").read_text())
                   for name in ("bm25", "repbert")}
        keep_outputs(tmp, REPBERT_TARGETS, "repbert")
    return {"targets": REPBERT_TARGETS, "jobs": job_counts(plan.stdout), "clean_run_seconds": round(seconds, 1),
            "goal_seconds": 2400, "latency": latency,
            "repbert_over_bm25_ms_ratio": round(latency["repbert"]["ms_per_query"] / latency["bm25"]["ms_per_query"], 2)}


LTRE_TARGETS = paper_list.targets(PAPERS["ltre"])


def step_log(path: Path) -> dict:
    """Mean seconds per step of a training run, and its phases where it logged them."""
    records = read_step_log(path)
    mean = {k: statistics.fmean(r.get(k, 0.0) for r in records) for k in ("step_s", "encode_s", "search_s", "refresh_s")}
    return {"steps": len(records), "seconds": round(sum(r["step_s"] for r in records), 2),
            "seconds_per_step": round(mean["step_s"], 4),
            "phases_per_step": {k[:-2]: round(v, 4) for k, v in mean.items() if k != "step_s" and v}}


def ltre(cores: int) -> dict:
    with clean_run(LTRE_TARGETS, cores) as (tmp, plan, seconds):
        steps = Path(tmp) / "artifacts/enwiki-mini-passages/ltre/steps"
        ltre_run, ance = step_log(steps / "ltre-bm25-flat-dev.jsonl"), step_log(steps / "neg-bm25.async-dev.jsonl")
        keep_outputs(tmp, LTRE_TARGETS, "ltre")
    return {"targets": LTRE_TARGETS, "jobs": job_counts(plan.stdout), "clean_run_seconds": round(seconds, 1),
            "goal_seconds": 2700, "ltre_flat": ltre_run, "async_refresh_ance": ance,
            "ance_over_ltre_seconds_per_step": round(ance["seconds_per_step"] / ltre_run["seconds_per_step"], 2)}


def plan(repeats: int = 3) -> dict:
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        fresh_copy(tmp)
        commands = {"mini": ["all", "-n"], "paper": ["all", "--configfile", "config/paper.yaml", "-n"],
                    "paper_slurm": ["all", "--profile", "profiles/slurm", "--configfile", "config/paper.yaml", "-n"]}
        out = {}
        for name, args in commands.items():
            runs = [timed([sys.executable, "-m", "snakemake", *args], tmp) for _ in range(repeats)]
            out[name] = {"seconds": round(statistics.median(seconds for seconds, _ in runs), 2),
                         "jobs": sum(job_counts(runs[0][1].stdout).values())}
    return {**out, "goal_seconds": 30, "paper_over_mini": round(out["paper"]["seconds"] / out["mini"]["seconds"], 2),
            "note": f"median of {repeats} dry runs each, fresh copy (no artifacts: every job planned)"}


PAPER_TABLES = paper_list.tables(PAPERS)


def params_value(config: dict, key: str):
    """A dotted key's value (papers.yaml's doc_length: 'quadrupletbert.towers.doc_length')."""
    for part in key.split("."):
        config = config[part]
    return config


def gpu_hours() -> dict:
    import yaml

    from . import gpu_hours as estimate

    rates = estimate.measure_cpu()
    paper = {**yaml.safe_load((ROOT / "params.yaml").read_text()), **yaml.safe_load((ROOT / "config/paper.yaml").read_text())}
    lengths = {p["id"]: params_value(paper, p["doc_length"]) for p in PAPERS.values() if "doc_length" in p}
    # GPU rates measured on a GPU (benchmarks/gpu_check.sh, kept under gpu.throughput) replace the assumed one
    measured = read_results().get("gpu", {}).get("throughput", {})
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        fresh_copy(tmp)
        tables = estimate.estimate(Path(tmp), PAPER_TABLES, lengths, rates, measured.get("flops"))
    gpu = ({"gpu_flops_measured": {k: round(v / 1e12, 1) for k, v in measured["flops"].items()},
            "gpu_flops_unit": f"TFLOP/s, one {measured['device']}"} if measured.get("flops")
           else {"gpu_flops_assumed": estimate.GPU_FLOPS})
    return {"assumptions": estimate.__doc__.split("\n\n", 1)[1].replace("\n", " "), **gpu,
            "cpu_flops_measured": {k: round(v / 1e9, 1) for k, v in rates.items()},
            "cpu_flops_unit": "GFLOP/s, 2 threads", "doc_lengths": lengths, "tables": tables}


QUADRUPLET_TABLES = paper_list.targets(PAPERS["quadrupletbert"])


def quadrupletbert(cores: int) -> dict:
    out = {"goal_seconds": {"table1": 1200, "table2": 2400}}
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        fresh_copy(tmp)
        for target in QUADRUPLET_TABLES:
            table = Path(target).stem
            _, plan = timed([sys.executable, "-m", "snakemake", target, "--cores", str(cores), "-n"], tmp)
            seconds, _ = timed([sys.executable, "-m", "snakemake", target, "--cores", str(cores)], tmp)
            out[table] = {"seconds": round(seconds, 1), "jobs": job_counts(plan.stdout)}
            for suffix in (".csv", ".json"):   # kept: the committed tables can be compared with them
                shutil.copy(Path(tmp) / Path(target).with_suffix(suffix), ROOT / f"benchmarks/out/{table}{suffix}")
        edit_params(Path(tmp), "margins: [0, 0.1, 0.2, 1, 1.5, 2]", "margins: [0, 0.1, 0.2, 1, 1.5, 2, 3]")
        _, plan = timed([sys.executable, "-m", "snakemake", *QUADRUPLET_TABLES, "--cores", str(cores), "-n"], tmp)
        out["margin_list_change"] = {"change": "margins + [3]", "jobs": job_counts(plan.stdout)}
    return out


def naive_encode(tower, tokenizer, items, max_length: int, batch_size: int):
    """The loop one writes first: input order, every batch padded to max_length."""
    import numpy as np
    import torch

    out = []
    with torch.no_grad():
        for start in range(0, len(items), batch_size):
            chunk = items[start:start + batch_size]
            batch = tokenizer([s for s, _ in chunk], [p for _, p in chunk], max_length=max_length,
                              truncation="longest_first", padding="max_length", return_tensors="pt")
            out.append(tower(**batch).numpy())
    return np.vstack(out)


def encoding(model_dir: Path, candidates_path: Path, limit: int, threads: int, repeats: int = 3) -> dict:
    import torch

    from towers.io import read_jsonl
    from towers.modeling.models import TwoTower
    from towers.retrieval.encode import encode

    torch.set_num_threads(threads)
    model, tok = TwoTower.load(model_dir)
    items = [(c["sentence"], c["paragraph"]) for c in read_jsonl(candidates_path)][:limit]
    out = {"candidates": len(items), "threads": threads, "repeats": repeats, "rate": "median"}
    # the profile's doc length, and the longest the model takes (closer to the paper's 288)
    for doc_length in (model.config["doc_length"], model.doc.encoder.config.max_position_embeddings):
        loops = {
            "naive_pad_to_max": lambda: naive_encode(model.doc, tok, items, doc_length, 128),
            "input_order_pad_to_batch": lambda: encode(model.doc, tok, items, "doc", doc_length, 128,
                                                       sort_by_length=False),
            "length_sorted": lambda: encode(model.doc, tok, items, "doc", doc_length, 128, sort_by_length=True),
        }
        vectors = {}
        encode(model.doc, tok, items[:256], "doc", doc_length, 128)   # warm-up
        timings = {name: [] for name in loops}
        for _ in range(repeats):   # interleaved, so drifting machine load hits every loop alike
            for name, run in loops.items():
                began = time.perf_counter()
                vectors[name] = run()
                timings[name].append(time.perf_counter() - began)
        rates = {name: len(items) / statistics.median(seconds) for name, seconds in timings.items()}
        reference = vectors["length_sorted"]
        out[f"doc_length_{doc_length}"] = {
            **{f"{name}_per_second": round(rate, 1) for name, rate in rates.items()},
            "speedup_vs_naive": round(rates["length_sorted"] / rates["naive_pad_to_max"], 2),
            "speedup_vs_input_order": round(rates["length_sorted"] / rates["input_order_pad_to_batch"], 2),
            "same_embeddings": all(bool(abs(v - reference).max() < 1e-4) for v in vectors.values())}
    out["goal_speedup"] = 1.5
    return out


def data_parallel(steps: int = 150) -> dict:
    import yaml

    from towers.modeling.models import random_encoder
    from towers.modeling.tokenizer import train_wordpiece

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    texts = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(400)]
    towers, train = params["two_tower"], params["finetune"]
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        root = Path(tmp)
        train_wordpiece(texts, root / "tok", vocab_size=400, min_frequency=1, lowercase=True)
        random_encoder(root / "tok", root / "enc", params["encoder"], seed=1)
        (root / "c.jsonl").write_text("".join(json.dumps({"id": f"d{i}", "contents": t, "sentence": t, "paragraph": t})
                                              + "\n" for i, t in enumerate(texts)))
        (root / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(len(texts))))
        (root / "train.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(360)))
        (root / "valid.tsv").write_text("".join(f"q{i}\twhen was lighthouse {i} lit?\n" for i in range(360, 400)))

        def stage(out: str) -> list[str]:
            return ["finetune", "--encoder", str(root / "enc"), "--candidates", str(root / "c.jsonl"),
                    "--qrels", str(root / "qrels.txt"), "--train", str(root / "train.tsv"),
                    "--valid", str(root / "valid.tsv"), "--out", str(root / out), "--state-dir", str(root / f"{out}.state"),
                    "--log", str(root / f"{out}.jsonl"), "--seed", "1", "--steps", str(steps),
                    "--batch-size", str(train["batch_size"]), "--lr", str(train["lr"]), "--warmup-ratio",
                    str(train["warmup_ratio"]), "--temperature", str(train["temperature"]),
                    "--checkpoint-every", str(steps // 3), "--pooling", towers["pooling"],
                    "--normalize", str(int(towers["normalize"])), "--embedding-dim", str(towers["embedding_dim"]),
                    "--query-length", str(towers["query_length"]), "--doc-length", str(towers["doc_length"])]

        def run(command: list[str], threads: int) -> tuple[float, list[dict]]:
            began = time.perf_counter()
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "OMP_NUM_THREADS": str(threads)})
            if done.returncode:
                raise RuntimeError(done.stderr[-2000:])
            return time.perf_counter() - began, read_step_log(root / f"{command[command.index('--log') + 1]}")

        # dropout off: the two runs should take the same steps up to float noise; on: each its own masks
        config = json.loads((root / "enc" / "config.json").read_text())
        shutil.copytree(root / "enc", root / "enc-no-dropout")
        (root / "enc-no-dropout" / "config.json").write_text(json.dumps(
            {**config, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}))
        out = {"steps": steps, "batch_size": train["batch_size"]}
        for encoder in ("enc-no-dropout", "enc"):
            args = lambda name: [a if a != str(root / "enc") else str(root / encoder) for a in stage(name)]  # noqa: E731
            one_s, one = run([sys.executable, "-m", "towers", *args(f"{encoder}-one")], threads=2)
            two_s, two = run([sys.executable, "-m", "towers.training.distributed", "2", *args(f"{encoder}-two")], threads=1)
            valid = [(a["valid_loss"], b["valid_loss"]) for a, b in zip(one, two) if "valid_loss" in a]
            out["dropout" if encoder == "enc" else "no_dropout"] = {
                "one_process_2_threads_seconds": round(one_s, 1), "two_processes_1_thread_seconds": round(two_s, 1),
                "two_over_one_seconds": round(two_s / one_s, 2),
                "loss_first_last": {"one": [one[0]["loss"], one[-1]["loss"]], "two": [two[0]["loss"], two[-1]["loss"]]},
                "max_step_loss_gap": round(max(abs(a["loss"] - b["loss"]) for a, b in zip(one, two)), 4),
                "valid_loss": {"one": [a for a, _ in valid], "two": [b for _, b in valid]}}
    return {**out, "note": "wall seconds include each run's start (imports, model load; two processes start twice)"}


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


def report_view(page: Path = ROOT / "results/report.html") -> dict:
    """Screenshots of the report in headless Chromium (apt-get install chromium)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        return {"skipped": "no chromium on PATH (Debian: apt-get install chromium)"}
    shots = {}
    with tempfile.TemporaryDirectory() as profile:
        for name, height in (("top", 1000), ("long", 6000)):
            png = ROOT / f"benchmarks/out/report-{name}.png"
            began = time.perf_counter()
            done = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size=1400,{height}",
                                   f"--screenshot={png}", page.resolve().as_uri()], capture_output=True, text=True,
                                  timeout=300)
            if done.returncode != 0 or not png.exists():
                sys.exit(f"chromium could not render {page}: {done.stderr.strip().splitlines()[-1:]}")
            shots[name] = {"png": str(png.relative_to(ROOT)), "seconds": round(time.perf_counter() - began, 2)}
    return {"page_kb": round(page.stat().st_size / 1024, 1), "screenshots": shots,
            "browser": subprocess.run([browser, "--version"], capture_output=True, text=True).stdout.strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--encode-limit", type=int, default=4000)
    parser.add_argument("--part", choices=["all", "pipeline", "encoding", "quadrupletbert", "repbert", "ltre", "plan", "gpu_hours", "pairs",
                                           "data_parallel", "reference", "reference_built", "reference_tiny", "report_view",
                                           "faults"],
                        default="all",
                        help="encoding reuses the model the pipeline part left in benchmarks/out")
    parser.add_argument("--pairs-copies", type=int, default=8, help="pairs: how many times the corpus is replicated")
    parser.add_argument("--pairs-repeats", type=int, default=5, help="pairs: measurements per task and corpus size")
    parser.add_argument("--reference-work", default="", help="reference: keep the workflow copy here (reused)")
    parser.add_argument("--datasets", nargs="+", default=["enwiki-mini"], help="reference_built: datasets already built")
    parser.add_argument("--pairs-worker", nargs=3, metavar=("TASK", "ARTICLES", "REDIRECTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pairs_worker:
        pairs_worker(*args.pairs_worker)
        return
    (ROOT / "benchmarks/out").mkdir(parents=True, exist_ok=True)
    read_results()   # a broken results file stops here, before the parts run
    results = {"machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()}}
    parts = {"pipeline": lambda: pipeline(args.cores),
             "encoding": lambda: encoding(ROOT / "benchmarks/out/model", ROOT / "benchmarks/out/candidates.jsonl",
                                          args.encode_limit, threads=1),
             "quadrupletbert": lambda: quadrupletbert(args.cores),
             "repbert": lambda: repbert(args.cores),
             "ltre": lambda: ltre(args.cores),
             "plan": plan,
             "gpu_hours": gpu_hours,
             "pairs": lambda: pairs(args.pairs_copies, args.pairs_repeats),
             "data_parallel": data_parallel,
             "reference": lambda: reference(args.cores, args.reference_work),
             "reference_built": lambda: reference_built(args.datasets),
             "reference_tiny": reference_tiny,
             "report_view": report_view,
             "faults": lambda: importlib.import_module(".faults", __package__).run(args.cores)}   # heavy: its part's
    for name, run in parts.items():
        if args.part in ("all", name):
            results[name] = run()
            for key in ("machine", name):   # kept even if a later part fails; merged under the file's lock, so keys
                record(key, results[key], replace=True)   # other benchmarks wrote during this run stay
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
