"""GPU-hours per paper table from the stages themselves: gpu_hours.py divides FLOPs by a rate measured
at batch 256, which understates the small-batch regimes (launch-bound, not FLOP-bound).

Three steps, because the GPU machine has no Snakemake:
  plan     (here)  the paper profile's planned jobs (a dry run in a fresh copy, as gpu_hours.py): each distinct
                   training regime's own stage command, and every table's jobs -> benchmarks/gpu_stages_plan.json
  measure  (GPU)   each regime's command run by towers' own entry point at its paper shape (BERT-base, random
                   weights; the plan's batch, lengths, loss, negatives and GPU switches), steps cut to a few, on
                   synthetic data in the real formats (synthetic_msmarco.Text); seconds a step (median after
                   warm-up steps) and the GPU's busy share over the steps; then encode-candidates at each planned
                   doc length and reranking at 512 tokens (BERT-base and -large) -> OUT/gpu_stages.json.
                   --dry: tiny shapes on the CPU (tests/workflow/test_gpu_stages.py).
  record   (here)  GPU-hours per table = seconds a step x the planned steps x GPUs of each measured training job
                   + corpus / measured encoding rate + reranked pairs / measured rate; a job without a measurement
                   keeps gpu_hours.py's FLOP estimate, and each table says which basis its hours have
                   -> benchmarks/results.json `gpu_stages`.

A training job planned on N GPUs (towers.training.distributed N) has each rank score batch/N: it is measured as one
process at batch/N and counted N times (gradient all-reduce not included). Regimes not measured: pre-training at
batch 8192 (a rank's 2048 pairs at 64/288 exceed one GPU's memory), LTRe and ANCE's async refresh (they need a Faiss
index over the corpus, and refresh it): those keep the FLOP basis.

    python -m benchmarks.gpu_stages plan
    python -m benchmarks.gpu_stages measure --out DIR [--dry] [--steps 30] [--passages 20000]
    python -m benchmarks.gpu_stages record DIR/gpu_stages.json
    python -m benchmarks.gpu_stages annotate   # gpu_hours.py's tables: their basis and the small-batch caveat
"""
from __future__ import annotations

import argparse
import json
import shlex
import statistics
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from . import gpu_hours  # noqa: E402
from .gpu_stages_hours import PLAN, annotate, doc_lengths, gpu_hours_of, load_plan  # noqa: E402

MEASURED = ("train-repbert", "finetune", "train-margin", "train-negatives", "pretrain-mlm")
SKIPPED = {"pretrain-two-tower": "a rank's batch (8192/4 pairs at 64/288) exceeds one GPU's memory",
           "train-ltre": "needs a Faiss index over the corpus", "async": "ANCE's refresh re-encodes the corpus",
           "hub-model=bert": "no training: the hub's MLM checkpoint is saved as it is"}
SHAPE_FLAGS = ("batch-size", "query-length", "doc-length", "max-length", "negatives", "negatives-per-query", "loss",
               "hub-model")
FILE_FLAGS = {"--start": "encoder", "--encoder": "encoder", "--candidates": "candidates.jsonl", "--qrels": "qrels.txt",
              "--train": "train.tsv", "--valid": "valid.tsv", "--mined": "mined.jsonl", "--bm25-run": "bm25.run",
              "--tokenizer": "encoder"}
RUN_FLAGS = ("--out", "--state-dir", "--log")
DRY_SHAPE = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64}
BASE_SHAPE = {"hidden": 768, "layers": 12, "heads": 12, "intermediate": 3072}
LARGE_SHAPE = {"hidden": 1024, "layers": 24, "heads": 16, "intermediate": 4096}


# --- plan (here) -------------------------------------------------------------------------------------------

def stage_words(command: str) -> tuple[int, list[str]] | None:
    """(GPUs, the words after `-m towers` or `-m towers.training.distributed N`, then the GPU switches the
    workflow passes in TOWERS_SPEED as flags) of a planned shell command."""
    words = shlex.split(command.split(" 2>&1")[0])
    speed = [w.split("=", 1)[1] for w in words if w.startswith("TOWERS_SPEED=")]
    speed = shlex.split(speed[0]) if speed else []
    for i, word in enumerate(words):
        if word == "towers":
            return 1, words[i + 1:] + speed
        if word == "towers.training.distributed":
            return int(words[i + 1]), words[i + 2:] + speed
    return None


def flag_value(words: list[str], name: str) -> str:
    return words[words.index(name) + 1] if name in words else ""


def regime_key(words: list[str]) -> str:
    shape = [f"{f}={flag_value(words, '--' + f)}" for f in SHAPE_FLAGS if f"--{f}" in words]
    return " ".join([words[0], *shape, *(["mined"] if "--mined" in words else [])])


def plan() -> dict:
    """Regimes (one command each, the first planned) and every paper table's jobs, from the paper profile's plan."""
    from .workflow_harness import fresh_copy

    from towers.reports import papers as paper_list

    tables = paper_list.tables(paper_list.load(root=HERE.parent))
    regimes: dict[str, dict] = {}
    out_tables = {}
    with tempfile.TemporaryDirectory(prefix="towers-gpu-stages-") as tmp:
        fresh_copy(tmp)
        for target in tables:
            jobs = []
            for rule, command in gpu_hours.table_jobs(Path(tmp), target):
                found = stage_words(command)
                job = {"rule": rule, "command": command}
                if found and found[1] and found[1][0] in (*MEASURED, *SKIPPED) and "--steps" in found[1]:
                    gpus, words = found
                    key = regime_key(words)
                    regimes.setdefault(key, {"stage": words[0], "gpus": gpus, "words": words, "jobs": 0})
                    regimes[key]["jobs"] += 1
                    job.update(regime=key, steps=int(flag_value(words, "--steps")), gpus=gpus)
                if "regime" in job or counted(rule, command):
                    jobs.append(job)
            out_tables[target] = jobs
    return compact({"regimes": regimes, "tables": out_tables})


def compact(plan_: dict) -> dict:
    """The plan with each job kept once (tables share most of theirs) and tables as lists of job numbers."""
    jobs, number = [], {}
    for target, table in plan_["tables"].items():
        for job in table:
            key = json.dumps(job, sort_keys=True)
            if key not in number:
                number[key] = len(jobs)
                jobs.append(job)
        plan_["tables"][target] = [number[json.dumps(job, sort_keys=True)] for job in table]
    return {**plan_, "jobs": jobs}


def counted(rule: str, command: str) -> bool:
    """Whether a job has GPU work either basis counts (the plan keeps only those)."""
    return rule in ("encode_candidates", "encode_candidates_shard", "rerank") or bool(
        gpu_hours.job_work(rule, command, doc_lengths()))


# --- measure (GPU, or the CPU with --dry) ------------------------------------------------------------------

def world(folder: Path, passages: int, shape: dict, vocab: int) -> None:
    """Synthetic data in the stages' formats, and a random BERT of `shape` (vocab `vocab`) with its tokenizer."""
    import torch
    from .synthetic_msmarco import Text
    from transformers import AutoTokenizer, BertConfig, BertModel

    from towers.modeling.tokenizer import train_wordpiece

    text = Text(13)
    docs = [" ".join(text.vocab[p]) for p in text.passages(passages)]
    with open(folder / "candidates.jsonl", "w", encoding="utf-8") as out:
        for i, doc in enumerate(docs):   # ReQA's fields too: three passages a paragraph, each one of its sentences
            paragraph = ". ".join(docs[i - i % 3:i - i % 3 + 3])
            out.write(json.dumps({"id": f"d{i}", "contents": doc, "sentence": doc, "paragraph": paragraph,
                                  "title": f"title {i // 3}"}) + "\n")
    queries = [(f"q{i}", " ".join(text.vocab[text.rng.choice(p, size=min(5, len(p)))]))
               for i, p in enumerate(text.passages(min(passages, 4000)))]
    (folder / "qrels.txt").write_text("".join(f"{qid} 0 d{i} 1\n" for i, (qid, _) in enumerate(queries)))
    split = len(queries) * 9 // 10
    (folder / "train.tsv").write_text("".join(f"{qid}\t{q}\n" for qid, q in queries[:split]))
    (folder / "valid.tsv").write_text("".join(f"{qid}\t{q}\n" for qid, q in queries[split:]))
    rng = text.rng
    (folder / "mined.jsonl").write_text("".join(json.dumps({"qid": qid, "candidates": [
        f"d{j}" for j in rng.choice(passages, 20, replace=False)]}) + "\n" for qid, _ in queries))
    (folder / "bm25.run").write_text("".join(f"{qid} Q0 d{j} {r + 1} {100 - r} bm25\n" for qid, _ in queries[:split]
                                             for r, j in enumerate(rng.choice(passages, 50, replace=False))))
    train_wordpiece(docs[:50_000], folder / "tok", vocab_size=min(vocab, 30522), min_frequency=2, lowercase=True)
    tokenizer = AutoTokenizer.from_pretrained(folder / "tok")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=max(vocab, len(tokenizer)), max_position_embeddings=512, hidden_size=shape["hidden"],
                        num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
                        intermediate_size=shape["intermediate"])
    BertModel(config).save_pretrained(folder / "encoder")
    tokenizer.save_pretrained(folder / "encoder")


def command_for(regime: dict, folder: Path, steps: int, name: str, dry: bool) -> list[str]:
    """The regime's planned words with its files the synthetic world's, its steps cut, its batch a rank's share
    (batch/GPUs), and its run folders fresh."""
    words = list(regime["words"])
    for i, word in enumerate(words[:-1]):
        if word in FILE_FLAGS:
            words[i + 1] = str(folder / FILE_FLAGS[word])
        elif word in RUN_FLAGS:
            words[i + 1] = str(folder / f"{name}{'.jsonl' if word == '--log' else '.' + word[2:]}")
        elif word == "--steps":
            words[i + 1] = str(steps)
        elif word == "--checkpoint-every":
            words[i + 1] = str(10 ** 6)   # no checkpoint, no validation inside the measured steps
        elif word == "--batch-size":
            batch = max(1, int(words[i + 1]) // regime["gpus"])
            words[i + 1] = str(min(batch, 4) if dry else batch)
        elif word in ("--query-length", "--doc-length", "--max-length") and dry:
            words[i + 1] = str(min(int(words[i + 1]), 32))
        elif word in ("--hub-model", "--init-hub-model"):
            words[i + 1] = ""   # MLM from the synthetic encoder's shape, not the hub (no network there)
    if "--log" not in words:
        words += ["--log", str(folder / f"{name}.jsonl")]
    if words[0] == "pretrain-mlm":
        arch = DRY_SHAPE if dry else BASE_SHAPE
        for flag, value in (("--hidden", arch["hidden"]), ("--layers", arch["layers"]), ("--heads", arch["heads"]),
                            ("--intermediate", arch["intermediate"]), ("--max-positions", 512)):
            words[words.index(flag) + 1] = str(value)
    return words


def timed_stage(words: list[str]) -> dict:
    """Run one stage by towers' entry point in this process, timing each step at the start of its loss (the loop
    reads each loss back, so a step's GPU work is done by the next one's start)."""
    import torch

    from towers.cli import main
    from towers.training import loop

    starts: list[float] = []
    run = loop.run

    def timing(model, loss_fn, *args, **kwargs):
        def timed(step):
            starts.append(time.perf_counter())
            return loss_fn(step)
        return run(model, timed, *args, **kwargs)

    loop.run = timing
    try:
        with gpu_hours.GpuBusy() as busy:
            began = time.perf_counter()
            code = main(words)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            ended = time.perf_counter()
    except SystemExit as stop:
        code = stop.code
    finally:
        loop.run = run
    if code not in (0, None):
        raise RuntimeError(f"{words[0]} exited {code}")
    # from one step's start to the next's: the last step also validates and saves, so it is left out
    steps = [b - a for a, b in zip(starts, starts[1:])]
    settled = steps[len(steps) // 3:] or steps   # the first third: compiling, allocator, cuDNN choices
    return {"steps_run": len(starts), "seconds_a_step": round(statistics.median(settled), 5),
            "first_step_s": round(steps[0], 3), "wall_s": round(ended - began, 2),
            "gpu_busy_share": busy.share_between(starts[len(steps) // 3], starts[-1]),
            "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if torch.cuda.is_available() else None}


def measure(out: Path, dry: bool, steps: int, passages: int, only: list[str], speed_pairs: list[str],
            budget: float, limit: float) -> dict:
    """Every regime as planned (and, for those `speed_pairs` names, with the switches off), encoding, reranking;
    then CUDA graphs for the `speed_pairs` regimes, last since compiling is slow. `budget` seconds: no regime
    starts after them; `limit`: no compile run starts within 100 s of it. The file is rewritten after each run,
    so a run cut short keeps what it measured."""
    import torch

    from towers.runtime import device

    began = time.perf_counter()
    regimes = load_plan()["regimes"]
    found: dict = {"device": torch.cuda.get_device_name(0) if device().type == "cuda" else "cpu (dry run)",
                   "date": time.strftime("%Y-%m-%d"), "dry": dry, "steps": steps, "passages": passages,
                   "regimes": {}, "encoding": {}, "reranking": {}}
    out.mkdir(parents=True, exist_ok=True)

    def save():
        (out / "gpu_stages.json").write_text(json.dumps(found, indent=2) + "\n")

    def run(key: str, n: int, variant: str, extra: list[str]) -> None:
        words = command_for(regimes[key], folder, steps, f"r{n}-{variant}", dry) + extra
        try:
            found["regimes"][key][variant] = timed_stage(words)
        except Exception as error:   # one regime failing leaves the others' numbers
            found["regimes"][key][variant] = {"error": f"{type(error).__name__}: {error}"[:500]}
        print(json.dumps({key: {variant: found["regimes"][key][variant]}}), flush=True)
        save()

    paired = [k for k in regimes if any(word in k for word in speed_pairs)]
    with tempfile.TemporaryDirectory(prefix="towers-gpu-stages-") as tmp:
        folder = Path(tmp)
        world(folder, passages, DRY_SHAPE if dry else BASE_SHAPE, 200 if dry else 30522)
        for n, (key, regime) in enumerate(regimes.items()):
            if only and not any(o in key for o in only):
                continue
            skip = next((why for what, why in SKIPPED.items() if what in key), None)
            if skip or time.perf_counter() - began > budget:
                found["regimes"][key] = {"skipped": skip or "out of time in this run"}
                continue
            found["regimes"][key] = {"gpus": regime["gpus"],
                                     "command": command_for(regime, Path("WORLD"), steps, f"r{n}", dry)}
            run(key, n, "as_planned", [])
            if key in paired:   # the same regime with the paper profile's switches off
                run(key, n, "switches_off", ["--length-buckets", "", "--fused-adamw", "0"])
        found["encoding"] = encoding(folder, dry)
        save()
        found["reranking"] = reranking(folder, dry)
        save()
        for key in paired:
            if key in found["regimes"] and "as_planned" in found["regimes"][key]:
                if time.perf_counter() - began > limit - 100:
                    found["regimes"][key]["with_compile"] = {"skipped": "out of time in this run"}
                    continue
                run(key, list(regimes).index(key), "with_compile", ["--compile", "1"])
    save()
    return found


def encoding(folder: Path, dry: bool) -> dict:
    """encode-candidates (towers' entry point) over the synthetic collection at each planned doc length: a saved
    two-tower model of the world's encoder, mean pooled."""
    from transformers import AutoModel, AutoTokenizer

    from towers.cli import main
    from towers.modeling.models import Tower, TwoTower

    rows = sum(1 for _ in open(folder / "candidates.jsonl", encoding="utf-8"))
    out = {}
    for length in (64, 256, 288, 512):
        length_used = min(length, 32) if dry else length
        model = TwoTower(Tower(AutoModel.from_pretrained(folder / "encoder"), "mean", None), None,
                         {"pooling": "mean", "embedding_dim": 0, "shared": True, "normalize": False,
                          "query_length": 32, "doc_length": length_used, "doc_text": "contents"})
        model.save(folder / f"two-tower-{length}", AutoTokenizer.from_pretrained(folder / "encoder"))
        words = ["encode-candidates", "--model", str(folder / f"two-tower-{length}"), "--candidates",
                 str(folder / "candidates.jsonl"), "--embeddings", str(folder / f"e{length}.npy"), "--ids",
                 str(folder / f"e{length}.ids"), "--batch-size", "512"]
        with gpu_hours.GpuBusy() as busy:
            began = time.perf_counter()
            main(words)
            seconds = time.perf_counter() - began
        out[str(length)] = {"passages_per_s": round(rows / seconds, 1), "passages": rows,
                            "gpu_busy_share": busy.share, "doc_length_used": length_used}
    return out


def reranking(folder: Path, dry: bool) -> dict:
    """rerank.score_pairs (the rerank stage's scoring) at 512 tokens, batch 128: BERT-base and BERT-large shapes."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from towers.retrieval.rerank import score_pairs

    tokenizer = AutoTokenizer.from_pretrained(folder / "encoder")
    docs = [json.loads(line)["contents"] for line in open(folder / "candidates.jsonl", encoding="utf-8")]
    pairs = [("what is " + d[:30], d) for d in docs[:256 if dry else 8192]]
    out = {}
    for name, shape in (("base", BASE_SHAPE), ("large", LARGE_SHAPE)):
        shape = DRY_SHAPE if dry else shape
        torch.manual_seed(0)
        model = BertForSequenceClassification(BertConfig(
            vocab_size=max(len(tokenizer), 30522 if not dry else 0), hidden_size=shape["hidden"],
            num_hidden_layers=shape["layers"], num_attention_heads=shape["heads"],
            intermediate_size=shape["intermediate"], max_position_embeddings=512, num_labels=1))
        length = 32 if dry else 512
        score_pairs(model, tokenizer, pairs[:256], length, 128, desc=None)   # warm-up
        with gpu_hours.GpuBusy() as busy:
            began = time.perf_counter()
            score_pairs(model, tokenizer, pairs, length, 128, desc=None)
            seconds = time.perf_counter() - began
        out[name] = {"pairs_per_s": round(len(pairs) / seconds, 1), "max_length": length, "gpu_busy_share": busy.share}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("plan")
    m = sub.add_parser("measure")
    m.add_argument("--out", required=True)
    m.add_argument("--dry", action="store_true", help="tiny shapes on the CPU")
    m.add_argument("--steps", type=int, default=30)
    m.add_argument("--passages", type=int, default=20_000)
    m.add_argument("--only", nargs="*", default=[], help="regimes whose key holds one of these")
    m.add_argument("--speed-pairs", nargs="*", default=[],
                   help="regimes whose key holds one of these run also with the switches off, and with compile")
    m.add_argument("--budget", type=float, default=10 ** 6, help="seconds: no regime starts after them")
    m.add_argument("--limit", type=float, default=10 ** 6, help="seconds: no compile run starts within 100 s of them")
    r = sub.add_parser("record")
    r.add_argument("measured")
    r.add_argument("--print", action="store_true", help="print, do not keep in benchmarks/results.json")
    sub.add_parser("annotate", help="gpu_hours' tables in results.json: their basis and the small-batch caveat")
    a = parser.parse_args()
    if a.step == "plan":
        found = plan()
        PLAN.write_text(json.dumps(found, separators=(",", ":")) + "\n")
        print(f"{len(found['regimes'])} regimes, {len(found['tables'])} tables -> {PLAN}")
    elif a.step == "annotate":
        annotate()
    elif a.step == "measure":
        measure(Path(a.out), a.dry, a.steps if not a.dry else min(a.steps, 4), a.passages if not a.dry else 300,
                a.only, a.speed_pairs, a.budget, a.limit)
    else:
        from .workflow_harness import RESULTS, record

        measured = json.loads(Path(a.measured).read_text())
        rates = json.loads(RESULTS.read_text()).get("gpu", {}).get("throughput", {}).get("flops")
        result = gpu_hours_of(measured, load_plan(), rates)
        if a.print or measured["dry"]:
            print(json.dumps(result["tables"], indent=1))
        else:
            record("gpu_stages", result, replace=True)


if __name__ == "__main__":
    main()
