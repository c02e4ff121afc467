"""benchmarks.run's reference parts: the project against sentence-transformers on MiniLM (reference: whole
datasets; reference_built: on what this checkout built; reference_tiny: on the tiny articles)."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .workflow_harness import ROOT, fresh_copy, job_counts, keep_outputs, timed

SQUAD_DEV = ROOT.parent / "shared" / "data" / "squad"


def reference(cores: int, work_dir: str = "", speed_texts: int = 500, train_steps: int = 30) -> dict:
    """The MiniLM checkpoint through the project's pipeline (`snakemake results/zeroshot/<dataset>.csv`, fresh
    copy) against sentence-transformers + numpy + pytrec_eval (benchmarks/reference.py) on all of enwiki-mini,
    and on real SQuAD dev when ../shared/data/squad holds it; encoding and training speed of both. The reference
    side encodes while the pipeline runs (both in the same run, on the same machine); `work_dir` keeps the copy
    (a rerun reuses what it built)."""
    import random

    import yaml

    from . import reference as ref
    from towers.io import read_jsonl

    datasets = ["enwiki-mini"] + (["squad"] if (SQUAD_DEV / "dev-v1.1.json").exists() else [])
    out: dict = {"datasets": {}}
    with contextlib.ExitStack() as stack:
        work = Path(work_dir) if work_dir else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="towers-bench-")))
        if not (work / "Snakefile").exists():
            work.mkdir(parents=True, exist_ok=True)
            fresh_copy(str(work))
        # float32 inference, as sentence-transformers computes: the embeddings are compared nearly exactly
        (work / "reference.yaml").write_text(yaml.safe_dump({"inference_precision": "float32",
                                                             "datasets": {"squad": {"local_dir": str(SQUAD_DEV)}}}))
        config = ["--configfile", "reference.yaml", "--rerun-incomplete"]
        inputs = [f"artifacts/{name}/{part}" for name in datasets for part in ("collection/candidates.jsonl", "splits/all/test.tsv")]
        timed([sys.executable, "-m", "snakemake", *inputs, "--cores", str(cores), *config], work)
        targets = [f"results/zeroshot/{name}.csv" for name in datasets]
        snake = [sys.executable, "-m", "snakemake", *targets, "--cores", str(cores), *config]
        _, plan = timed([*snake, "-n"], work)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(work / "src"), os.environ.get("PYTHONPATH")]))}
        began = time.perf_counter()
        pipeline = subprocess.Popen(snake, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        theirs = {name: reference_side(work / "artifacts" / name) for name in datasets}
        _, errors = pipeline.communicate()
        if pipeline.returncode:
            sys.exit(f"reference: the pipeline failed\n{errors[-3000:]}")
        out["pipeline"] = {"targets": targets, "jobs": job_counts(plan.stdout),
                           "seconds_with_the_reference_side_beside": round(time.perf_counter() - began, 1)}
        keep_outputs(work, targets, "zeroshot")
        for name in datasets:
            out["datasets"][name] = compare_built(work / "artifacts" / name, theirs[name])
        # speed on the same texts, interleaved; training on enwiki-mini's questions with distinct answer sentences
        art = work / "artifacts/enwiki-mini"
        sentences = {c["id"]: c["sentence"] for c in read_jsonl(art / "collection/candidates.jsonl")}
        texts = random.Random(13).sample(sorted(sentences.values()), speed_texts)
        out["encoding_speed"] = ref.encoding_speed(art / "dense/ckpt-minilm/all/model", ref.minilm_folder(), texts)
        pairs = distinct_answer_pairs(art / "reqa", sentences)
        shutil.rmtree(work / "training", ignore_errors=True)
        out["training"] = ref.compare_training(work / "training", pairs, steps=train_steps, batch_size=32, lr=5e-5)
    out["note"] = ("retrieval: project = snakemake's checkpoint-model, encode-candidates, build-index Flat, dense-search, "
                   "evaluate (R@k as Success@k); reference = SentenceTransformer(folder).encode, numpy inner product, "
                   "pytrec_eval. Speeds: one thread each, same texts and batch size, interleaved, median of 3. "
                   "Training: same batches (draw_batch), AdamW wd 0.01, linear warm-up 0.1, clip 1.0, scale 20, "
                   "dropout off; no duplicate doc in a batch (the project masks duplicates, MNRL counts them)")
    return out


def reference_side(art: Path) -> dict:
    """sentence-transformers + numpy + pytrec_eval over a dataset's ReQA files, every question (split "all")."""
    from . import reference as ref

    return ref.st_side(ref.minilm_folder(), art / "collection/candidates.jsonl", art / "splits/all/test.tsv",
                       art / "collection/qrels.txt", "sentence", threads=1)


def compare_built(art: Path, theirs: dict) -> dict:
    """The project's MiniLM files of one dataset (artifacts/<name>/, as `snakemake results/zeroshot/<name>.csv`
    leaves them) against the reference side's: embeddings, metrics, top-10 lists, and both recall conventions."""
    from . import reference as ref
    from towers.io import read_qrels, read_queries, read_run

    folder = art / "dense/ckpt-minilm/all"
    project = {"model": folder / "model", "embeddings": folder / "candidates.npy", "ids": folder / "candidates.ids",
               "run": folder / "run-flat.trec", "eval": art / "eval/ckpt-minilm/all/flat.json"}
    row = ref.compare_retrieval(project, theirs, "success")
    encoded = json.loads((folder / "candidates.npy.meta.json").read_text())
    row["encode_seconds"] = {"project_stage_incl_start": encoded["seconds"],
                             "sentence_transformers_encode": round(theirs["doc_seconds"], 1),
                             "note": "not side by side: see encoding_speed for the ratio"}
    qrels = read_qrels(art / "collection/qrels.txt")
    qids = list(read_queries(art / "splits/all/test.tsv"))
    row["relevant_per_question"] = {"one": sum(len(qrels[q]) == 1 for q in qids),
                                    "two_or_more": sum(len(qrels[q]) > 1 for q in qids)}
    row["recall_conventions"] = {"minilm": ref.conventions(theirs["per_query"]),
                                 "bm25": ref.conventions(ref.pytrec_metrics(read_run(art / "bm25/run.trec"), qrels, qids))}
    return row


def reference_built(datasets: list[str]) -> dict:
    """--part reference's retrieval comparison on what this checkout already built (after `snakemake
    results/zeroshot/<name>.csv` on the datasets named): the reference side only, minutes instead of an hour."""
    out = {}
    for name in datasets:
        art = ROOT / "artifacts" / name
        began = time.perf_counter()
        out[name] = compare_built(art, reference_side(art))
        out[name]["reference_side_seconds"] = round(time.perf_counter() - began, 1)
    out["note"] = ("project side: this checkout's artifacts from `snakemake results/zeroshot/<name>.csv` (at the "
                   "default inference_precision, bfloat16, its vectors are float32's within a cosine of 0.99995; build "
                   "with --config inference_precision=float32 to compare exactly); reference side: "
                   "SentenceTransformer(folder).encode (one thread), numpy inner product, pytrec_eval")
    return out


def distinct_answer_pairs(reqa: Path, sentences: dict[str, str]) -> list[dict]:
    """Training pairs (question, its first relevant sentence), one per answer sentence: a batch then never holds
    a document twice, where the project and MNRL count duplicates differently."""
    from towers.io import read_qrels, read_queries

    qrels, pairs, seen = read_qrels(reqa / "qrels.txt"), [], set()
    for qid, text in read_queries(reqa / "queries.tsv").items():
        doc = sorted(qrels[qid])[0]
        if sentences[doc] not in seen:
            seen.add(sentences[doc])
            pairs.append({"qid": qid, "query": text, "doc_id": doc, "doc": sentences[doc]})
    return pairs


def reference_tiny() -> dict:
    """The same comparisons on the tiny articles of tests/fixtures (17 sentences, 12 questions; the data of
    tests/retrieval/test_reference.py): minutes, where the whole-dataset part takes about an hour of one free core."""
    from . import reference as ref
    from towers.io import read_jsonl

    fixtures = ROOT / "tests/fixtures"
    out: dict = {"data": "tests/fixtures/tiny-wiki.xml + tiny-questions.tsv: 17 candidate sentences, 12 questions"}
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        work = Path(tmp)
        ref.towers_stage("parse-wiki", "--dump", fixtures / "tiny-wiki.xml", "--articles", work / "corpus/articles.jsonl",
                         "--redirects", work / "corpus/redirects.json", "--stats", work / "corpus/stats.json")
        ref.towers_stage("reqa-wiki", "--articles", work / "corpus/articles.jsonl", "--questions",
                         fixtures / "tiny-questions.tsv", "--out-dir", work / "reqa")
        ref.towers_stage("split-all", "--queries", work / "collection/queries.tsv", "--out-dir", work / "all")
        reqa, queries = work / "reqa", work / "all/test.tsv"
        metrics = ["R@1", "R@5", "R@10", "RR@10", "nDCG@10"]
        project = ref.project_pipeline(work / "project", reqa / "candidates.jsonl", queries, reqa / "qrels.txt",
                                       metrics, "success")
        theirs = ref.st_side(ref.minilm_folder(), reqa / "candidates.jsonl", queries, reqa / "qrels.txt", "sentence")
        out["retrieval"] = ref.compare_retrieval(project, theirs, "success")
        sentences = {c["id"]: c["sentence"] for c in read_jsonl(reqa / "candidates.jsonl")}
        out["encoding_speed"] = ref.encoding_speed(project["model"], ref.minilm_folder(), sorted(sentences.values()) * 8,
                                                   batch_size=32)
        pairs = distinct_answer_pairs(reqa, sentences)
        out["training"] = ref.compare_training(work / "training", pairs, steps=30, batch_size=4, lr=5e-5)
    out["note"] = ("as --part reference, on the tiny articles; speeds on a machine shared with other work "
                   f"(load average {os.getloadavg()[0]:.1f} at the end): the ratios, measured side by side, are what count")
    return out
