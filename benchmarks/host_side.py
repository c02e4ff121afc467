"""The GPU stages' host side at the paper profile's shapes, on the CPU with the model taken out.

One process, torch on one thread and the tokenizers library on one core (RAYON_NUM_THREADS=1), except the
tokenising pass, run in child processes on 1 and on every core. Each part runs the project's own data path with the
model replaced by a no-op that returns its output's shape, BEFORE (the code as it was, rebuilt here) and AFTER (the
code now) alternated in the same run, and sets the host's rate beside the rate the model itself reached on one H200
(benchmarks/results.json: rate / GPU busy share, `gpu_stages` and `encode_overlap`):

  encoding    encode.forward over ids tokenised once (a chunk's Tokenised, as encode_corpus makes it), passages of
              64 and 256 tokens, batch 512, 768-d vectors: passages a second (goal: 5x the model's), after a first
              pass over each chunk (faulting its output matrix in) timed in neither; the new padding checked equal
              to the old on every chunk; and encode_corpus whole from the token cache, two chunks.
  reranking   rerank.score_pairs at 512 tokens, batch 128, 1-logit head: before, each batch tokenised as it comes;
              after, the pairs tokenised ahead (their rate given apart) and each batch a gather: pairs a second of
              the per-batch work (goal: 5x the model's); scores of a small BERT byte-identical before and after.
  tokenising  one tokenising pass of a collection (tokens.Tokenised, 256 tokens) in a child process on 1 core and
              on every core (the tokenizers library's own threads): passages a second, and a core.
  training    every training regime gpu_stages measured on the H200, its own stage command at a rank's batch and
              lengths (synthetic data in the stages' formats), the towers and the MLM heads (with their softmax over
              the vocabulary) no-ops: median seconds of host work a step (sampling, tokenising, collating, the loss's
              bookkeeping, the update of no weights), with every text's ids tokenised once (the step's draws taken
              again, so the run's memo holds them) and with the texts tokenised in the step (TOWERS_TOKEN_MEMO=off);
              against the H200's seconds a step for that command (goal: at most 10%) and its busy time a step.

    python -m benchmarks.host_side [--quick] [--record] [--parts encoding reranking tokenising training]

--quick runs small sizes in seconds (tests/workflow/test_host_side.py); --record keeps the figures in
benchmarks/results.json under `host_side` (a full run only)."""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from .host_side_rates import ENCODE_LENGTHS, model_rates
from .host_side_before import (WIDTH, code, models_taken_out, no_op_classifier, no_op_tower,
                               old_batch, old_score_pairs)

os.environ.setdefault("RAYON_NUM_THREADS", "1")   # before the tokenizers library starts its threads

HERE = Path(__file__).resolve().parent

PARTS = ("encoding", "reranking", "tokenising", "training")
SIZES = {"full": {"passages": 500_000, "stage": 131_072, "pairs": 32_768, "tokenise": 32_768, "world": 20_000,
                  "steps": 16, "repeats": 2},
         "quick": {"passages": 4_096, "stage": 2_048, "pairs": 1_024, "tokenise": 2_048, "world": 1_500,
                   "steps": 6, "repeats": 1}}
QUICK_REGIMES = ("finetune", "pretrain-mlm batch-size=256", "train-negatives batch-size=64 query-length=32 "
                 "doc-length=512 negatives=rand")
ENCODE_BATCH = 512
RERANK_LENGTH, RERANK_BATCH = 512, 128                        # config/paper.yaml repbert.reranker
ENCODE_GOAL, RERANK_GOAL, STEP_GOAL = 5.0, 5.0, 0.10


# --- shared pieces ---------------------------------------------------------------------------------------------

def passages(count: int, seed: int = 13) -> list[str]:
    from .synthetic_msmarco import Text

    text = Text(seed)
    return [" ".join(text.vocab[p]) for p in text.passages(count)]


def paired(runs: dict, repeats: int, first: int = 0) -> dict:
    """Each of `runs` (name -> a callable returning its seconds) `repeats` times, the order swapped each time
    (`first` odd: from the second order): name -> its seconds, run by run."""
    seconds = {name: [] for name in runs}
    for r in range(first, first + repeats):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            seconds[name].append(runs[name]())
    return seconds


def timed(fn) -> float:
    gc.collect()   # a full collection falls due every few runs (0.2 s here): not inside the one being timed
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else float("inf")


# --- parts -----------------------------------------------------------------------------------------------------

def encoding(tokenizer, size: dict, models: dict, tmp: Path) -> dict:
    import numpy as np

    from towers.retrieval import encode

    texts = passages(size["passages"])
    tower, out = no_op_tower(), {}
    for length in ENCODE_LENGTHS:
        totals = {"before": 0.0, "after": 0.0}
        ratios, same, tokenising = [], True, 0.0
        for n, first in enumerate(range(0, len(texts), encode.SORT_CHUNK)):
            began = time.perf_counter()
            prepared = encode.prepare(tokenizer, texts[first:first + encode.SORT_CHUNK], "doc", length)
            tokenising += time.perf_counter() - began
            tokens, order = prepared.tokenised, prepared.order
            for idx in (order[:ENCODE_BATCH], order[len(order) // 2:][:ENCODE_BATCH], order[-7:],
                        np.random.default_rng(n).permutation(len(order))[:ENCODE_BATCH]):
                old, new = old_batch(tokens, idx), tokens.batch(idx)
                same = same and old.keys() == new.keys() and all(old[k].dtype == new[k].dtype and
                                                                 np.array_equal(old[k], new[k]) for k in old)

            def run(version: str) -> float:
                with code(version):
                    return timed(lambda: encode.forward(tower, tokenizer, prepared, "doc", length, ENCODE_BATCH,
                                                        desc=None))

            run("after")   # the first pass over a chunk's output matrix faults its memory in: in neither side
            chunk = {v: statistics.median(s) for v, s in paired({"before": lambda: run("before"),
                                                                 "after": lambda: run("after")}, 2, first=n).items()}
            totals = {v: totals[v] + chunk[v] for v in totals}
            ratios.append(chunk["after"] / chunk["before"])
        model = models["encoding"][length]
        after = rate(len(texts), totals["after"])
        out[str(length)] = {
            "passages": len(texts), "batch_size": ENCODE_BATCH, "width": WIDTH,
            "per_batch_host_per_s": {"before": rate(len(texts), totals["before"]), "after": after},
            "paired_time_ratio_median": round(statistics.median(ratios), 3),
            "h200_model_per_s": round(model, 1), "after_over_model": round(after / model, 2),
            "goal": f">= {ENCODE_GOAL:g}x the model's rate", "met": after >= ENCODE_GOAL * model,
            "padding_identical": same, "tokenised_once_per_s_one_core": rate(len(texts), tokenising)}
    out["stage_from_token_cache"] = encode_stage(tokenizer, texts[:size["stage"]], size["repeats"], tmp)
    return out


def encode_stage(tokenizer, texts: list[str], repeats: int, tmp: Path) -> dict:
    """encode_corpus whole, its ids read back from the token cache (read, checked against their digest, ordered,
    padded, written as .npy with the ids), at 256 tokens; before, each chunk's vectors took a new matrix and were
    copied to bytes to be written."""
    from towers.retrieval import encode

    rows = [{"id": f"d{i}", "contents": t} for i, t in enumerate(texts)]
    tower, cache = no_op_tower(), tmp / "token-cache"

    def run(version: str) -> float:
        with code(version):
            return timed(lambda: encode.encode_corpus(tower, tokenizer, iter(rows), len(rows), lambda r: r["contents"],
                                                      tmp / f"{version}.npy", tmp / f"{version}.ids", 256, ENCODE_BATCH,
                                                      desc=None, cache=cache))

    run("after")   # the cache made once: both read it back
    seconds = paired({"before": lambda: run("before"), "after": lambda: run("after")}, 2 * repeats)
    same = (tmp / "before.npy").read_bytes() == (tmp / "after.npy").read_bytes()
    return {"passages": len(rows), "doc_length": 256,
            "per_s": {v: rate(len(rows), statistics.median(s)) for v, s in seconds.items()},
            "paired_time_ratio_median": round(statistics.median(a / b for a, b in zip(seconds["after"],
                                                                                      seconds["before"])), 3),
            "bytes_identical": same}


def reranking(tokenizer, size: dict, models: dict) -> dict:
    import numpy as np
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from .synthetic_msmarco import Text
    from towers.modeling import tokens
    from towers.retrieval import rerank

    text = Text(17)
    docs = text.passages(size["pairs"])
    pairs = [(text.query(d), " ".join(text.vocab[d])) for d in docs]
    model, tokenising = no_op_classifier(), []
    made = tokens.Tokenised.__init__

    def counted(self, *args, **kwargs):   # the pairs' tokenising ahead, timed apart from the batches
        began = time.perf_counter()
        made(self, *args, **kwargs)
        tokenising.append(time.perf_counter() - began)

    def after() -> float:
        tokenising.clear()
        tokens.Tokenised.__init__ = counted
        try:
            seconds = timed(lambda: rerank.score_pairs(model, tokenizer, pairs, RERANK_LENGTH, RERANK_BATCH, desc=None))
        finally:
            tokens.Tokenised.__init__ = made
        found.append(sum(tokenising))
        return seconds - sum(tokenising)

    found: list[float] = []
    seconds = paired({"before": lambda: timed(lambda: old_score_pairs(model, tokenizer, pairs, RERANK_LENGTH,
                                                                      RERANK_BATCH)), "after": after}, size["repeats"])
    torch.manual_seed(0)   # a small BERT's scores: the same bytes both ways
    small = BertForSequenceClassification(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64,
                                                     num_labels=1)).eval()
    some = pairs[:300]
    with torch.no_grad():
        same = old_score_pairs(small, tokenizer, some, RERANK_LENGTH, 16).tobytes() == \
            rerank.score_pairs(small, tokenizer, some, RERANK_LENGTH, 16, desc=None).tobytes()
    after_rate = rate(len(pairs), statistics.median(seconds["after"]))
    return {"pairs": len(pairs), "max_length": RERANK_LENGTH, "batch_size": RERANK_BATCH,
            "mean_pair_tokens": round(float(np.mean(tokens.token_lengths(tokenizer, pairs[:2000], "doc",
                                                                         RERANK_LENGTH))), 1),
            "per_batch_host_per_s": {"before (tokenised batch by batch)": rate(len(pairs),
                                                                               statistics.median(seconds["before"])),
                                     "after (ids tokenised ahead)": after_rate},
            "tokenised_ahead_pairs_per_s_one_core": rate(len(pairs), statistics.median(found)),
            "h200_model_pairs_per_s": round(models["reranking"], 1),
            "after_over_model": round(after_rate / models["reranking"], 2),
            "goal": f">= {RERANK_GOAL:g}x the model's rate", "met": after_rate >= RERANK_GOAL * models["reranking"],
            "scores_identical": same}


def tokenising(size: dict, tokenizer_dir: Path) -> dict:
    """One tokenising pass (Tokenised) in a fresh process on 1 core and on every core."""
    cores = os.cpu_count() or 1
    out = {"passages": size["tokenise"], "doc_length": 256, "cores": cores}
    for threads in sorted({1, cores}):
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads), "TOKENIZERS_PARALLELISM": "true"}
        done = subprocess.run([sys.executable, "-m", "benchmarks.host_side", "--tokenise-child", str(tokenizer_dir),
                               str(size["tokenise"]), str(size["repeats"])], env=env, capture_output=True, text=True,
                              check=True, cwd=HERE.parent)
        seconds = json.loads(done.stdout.strip().splitlines()[-1])
        per_s = {v: rate(size["tokenise"], statistics.median(s)) for v, s in seconds.items()}
        out[f"cores_{threads}"] = {"per_s": per_s, "per_s_a_core": {v: round(r / threads, 1) for v, r in per_s.items()}}
    return out


def tokenise_child(tokenizer_dir: str, count: int, repeats: int) -> None:
    import torch
    from transformers import AutoTokenizer

    from towers.modeling.tokens import Tokenised

    torch.set_num_threads(1)
    tokenizer, texts = AutoTokenizer.from_pretrained(tokenizer_dir), passages(count, seed=29)
    Tokenised(tokenizer, texts[:512], "doc", 256)   # the library's threads started

    def run(version: str) -> float:
        with code(version):
            return timed(lambda: Tokenised(tokenizer, texts, "doc", 256))

    print(json.dumps(paired({"before": lambda: run("before"), "after": lambda: run("after")}, repeats)))


def measured_regimes(models: dict) -> dict:
    """The plan's training regimes (key -> regime) the H200 measured a step of: those this part can set beside."""
    from . import gpu_stages_hours

    measured = models["regimes"]
    return {key: regime for key, regime in gpu_stages_hours.load_plan()["regimes"].items()
            if "seconds_a_step" in measured.get(key, {}).get("as_planned", {})}


def training(size: dict, models: dict, tmp: Path, only: tuple[str, ...]) -> dict:
    from . import gpu_stages, gpu_stages_hours

    folder = tmp / "world"
    folder.mkdir()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        gpu_stages.world(folder, size["world"], gpu_stages.DRY_SHAPE, 30522)
    regimes, measured = gpu_stages_hours.load_plan()["regimes"], models["regimes"]
    known = measured_regimes(models)
    warm_steps = max(2, size["steps"] // 2)
    out = {}
    for n, (key, regime) in enumerate(regimes.items()):
        gpu = measured.get(key, {}).get("as_planned", {})
        if key not in known or (only and not any(key.startswith(o) for o in only)):
            continue

        def run(version: str, tokenised_once: bool) -> float:
            words = gpu_stages.command_for(regime, folder, size["steps"] + warm_steps * tokenised_once,
                                           f"r{n}-{version}-{tokenised_once}-{time.time_ns()}", False)
            if words[0] == "pretrain-mlm":   # a small BERT to build: the no-op stands in for it
                for flag, value in gpu_stages.DRY_SHAPE.items():
                    words[words.index(f"--{flag}") + 1] = str(value)
            return host_seconds_a_step(words, version, warm_steps if tokenised_once else 0)

        entry = {"command_batch": int(gpu_stages.flag_value(gpu_stages.command_for(regime, folder, 1, "x", False),
                                                            "--batch-size")),
                 "h200_seconds_a_step": gpu["seconds_a_step"], "h200_gpu_busy_share": gpu["gpu_busy_share"]}
        for mode, once in (("ids_tokenised_once", True), ("tokenised_in_the_step", False)):
            seconds = paired({"before": lambda: run("before", once), "after": lambda: run("after", once)}, 1, first=n)
            entry[mode] = {v: round(statistics.median(s), 5) for v, s in seconds.items()}
        host = entry["ids_tokenised_once"]["after"]
        entry.update(share_of_h200_step=round(host / gpu["seconds_a_step"], 3),
                     share_of_h200_busy_time=round(host / (gpu["seconds_a_step"] * gpu["gpu_busy_share"]), 3),
                     goal=f"<= {STEP_GOAL:.0%} of the H200's seconds a step",
                     met=host <= STEP_GOAL * gpu["seconds_a_step"])
        out[key] = entry
        print(json.dumps({key: entry}), file=sys.stderr, flush=True)
    return out


def host_seconds_a_step(words: list[str], version: str, warm_steps: int) -> float:
    """The median seconds from one step's start to the next's over the last steps of `words` (a training stage's
    command) run by towers' entry point with the model taken out. `warm_steps` > 0: the last steps take the first
    steps' draws again, so every text's ids are in the run's memo; 0: TOWERS_TOKEN_MEMO=off, every text is
    tokenised in its step."""
    from towers.cli import main
    from towers.training import loop

    starts: list[float] = []
    run = loop.run

    def timing(model, loss_fn, *args, **kwargs):
        def step(number):
            starts.append(time.perf_counter())
            return loss_fn(number % warm_steps if warm_steps else number)
        return run(model, step, *args, **kwargs)

    memo = os.environ.pop("TOWERS_TOKEN_MEMO", None)
    if not warm_steps:
        os.environ["TOWERS_TOKEN_MEMO"] = "off"
    loop.run = timing
    try:
        with code(version), models_taken_out(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            status = main(words)
    finally:
        loop.run = run
        os.environ.pop("TOWERS_TOKEN_MEMO", None)
        if memo is not None:
            os.environ["TOWERS_TOKEN_MEMO"] = memo
    if status not in (0, None):
        raise RuntimeError(f"{words[0]} exited {status}")
    steps = [b - a for a, b in zip(starts, starts[1:])]   # the last step validates and saves: left out
    return statistics.median(steps[warm_steps:] if warm_steps else steps[len(steps) // 3:])


def summary(found: dict) -> dict:
    """Each goal of the host-side work measured here: met or not."""
    goals = {}
    for length in ENCODE_LENGTHS:
        if "encoding" in found:
            goals[f"encoding {length} tokens"] = found["encoding"][str(length)]["met"]
    if "reranking" in found:
        goals["reranking 512 tokens"] = found["reranking"]["met"]
    for key, entry in found.get("training", {}).items():
        goals[f"training {key}"] = entry["met"]
    return goals


def keep_found(found: dict, parts: list[str]) -> None:
    """Keep a full run's figures under `host_side` of benchmarks/results.json; a part that measured nothing (every
    regime skipped, say) stops it with one line, the entry there as it was."""
    from .workflow_harness import RESULTS, record, refuse

    if empty := [part for part in parts if not found.get(part)]:
        refuse(RESULTS, f"host_side not recorded: {', '.join(empty)} measured nothing")
    record("host_side", found, replace=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few regimes: seconds, not minutes")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--regimes", nargs="*", default=None, help="training regimes whose key starts so")
    parser.add_argument("--out", help="also write the figures here (JSON)")
    parser.add_argument("--record", action="store_true", help="keep them in benchmarks/results.json (host_side)")
    parser.add_argument("--tokenise-child", nargs=3, help=argparse.SUPPRESS)
    a = parser.parse_args(argv)
    if a.tokenise_child:
        tokenise_child(a.tokenise_child[0], int(a.tokenise_child[1]), int(a.tokenise_child[2]))
        return
    if a.record and a.quick:
        parser.error("--record keeps a full run's figures, not --quick's")
    from .workflow_harness import refuse

    # bad input stops here, in one line, before minutes of measuring: the folder of --out, the results file (read
    # whole by model_rates), a regime that matches none the H200 measured (it would measure nothing)
    if a.out and Path(a.out).is_dir():
        refuse(f"--out {a.out}", "a folder: --out names the JSON file to write")
    if a.out and not Path(a.out).parent.is_dir():
        refuse(f"--out {a.out}", f"no such folder {Path(a.out).parent}")
    models = model_rates()
    known = measured_regimes(models)
    for start in a.regimes or ():
        if not any(key.startswith(start) for key in known):
            refuse(f"--regimes {start}", f"no training regime the H200 measured starts so (known: {'; '.join(known)})")
    import platform

    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(1)
    size = SIZES["quick" if a.quick else "full"]
    only = tuple(a.regimes) if a.regimes is not None else (QUICK_REGIMES if a.quick else ())
    found = {"machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
             "date": time.strftime("%Y-%m-%d"), "quick": a.quick, "torch_threads": 1,
             "tokenizer_threads": os.environ["RAYON_NUM_THREADS"], "h200": models["device"],
             "method": __doc__.split("\n\n")[1].replace("\n", " ")}
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="towers-host-side-") as tmp:
        tmp = Path(tmp)
        tokenizer_dir = tmp / "tok"
        from towers.modeling.tokenizer import train_wordpiece

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            train_wordpiece(passages(min(size["passages"], 50_000), seed=3), tokenizer_dir, vocab_size=30522,
                            min_frequency=2, lowercase=True)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        for part in a.parts:
            started = time.perf_counter()
            if part == "encoding":
                found[part] = encoding(tokenizer, size, models, tmp)
            elif part == "reranking":
                found[part] = reranking(tokenizer, size, models)
            elif part == "tokenising":
                found[part] = tokenising(size, tokenizer_dir)
            else:
                found[part] = training(size, models, tmp, only)
            print(json.dumps({part: found[part]}), flush=True)
            found.setdefault("seconds", {})[part] = round(time.perf_counter() - started, 1)
    found["seconds"]["all"] = round(time.perf_counter() - began, 1)
    found["goals_met"] = summary(found)
    print(json.dumps({"goals_met": found["goals_met"], "seconds": found["seconds"]}, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(found, indent=2) + "\n")
    if a.record:
        keep_found(found, a.parts)


if __name__ == "__main__":
    main()
