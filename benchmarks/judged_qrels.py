"""Judged relevance of the enwiki-mini question sets: the two judges' agreement (first pools and deeper pools),
the question writers' labels against the judge, the audit of the deeper pools, and single-label against judged
figures of one build's runs.

    .venv/bin/python -m benchmarks.judged_qrels [--build DIR] [--no-record]

Reads data/enwiki-mini/{pools,judgements,judgements-second}.tsv, their deeper pools' counterparts
({pools,judgements}-deep.tsv, {pools,judgements}-deep-second.tsv), two audits (audit-deep.tsv, audit-deep-2.tsv: every
answering sentence of the question's article, each for a seeded sample of 40 passage-test questions, the second
drawn after the deeper pools were final) and the question files;
the run comparison needs a built tree (`make reproduce`; DIR, default this checkout): BM25's and
all-MiniLM-L6-v2's runs over every question of each set (split "all"), and each paper's trained models' runs over a
split's test questions. Each run is scored three times with the same evaluation code (towers.retrieval.evaluate):
on the writers' single labels (binary), on the judged qrels that train (qrels.txt) and on the evaluation qrels the
tables are scored on (qrels-eval.txt: the judge's grade stands, deeper pools). Writes its numbers into
benchmarks/results.json under `judged_qrels` unless --no-record."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from towers.datasets import judging, reqa
from towers.datasets.splits import question_key
from .workflow_harness import ROOT, record
from towers.io import StageError, read_jsonl, read_qrels, read_queries, read_run
from towers.retrieval.evaluate import evaluate

DATA = ROOT / "data/enwiki-mini"
ART = ROOT / "artifacts"   # --build DIR: DIR/artifacts
SETS = {"enwiki-mini": "questions.tsv", "enwiki-mini-nq": "questions-nq.tsv"}
METRICS = ["R@1", "R@10", "RR@10", "nDCG@10"]
# (label, run under artifacts/<dataset>/ (a glob: the tables pick each set's margin), split whose test questions it answers)
RUNS = [("BM25", "bm25/run.trec", "all"), ("all-MiniLM-L6-v2", "dense/ckpt-minilm/all/run-flat.trec", "all"),
        ("Chang ICT+BFS+WLP", "dense/transformer-ict+bfs+wlp-l2-d128/80-20/run-flat.trec", "80-20"),
        ("Three-T BERT", "dense/threet-bert-m*-s13/80-20/run-flat.trec", "80-20"),
        ("QuadrupletBERT", "dense/quadbert-m0.1-s13/80-20/run-flat.trec", "80-20")]


def labelled_qrels(name: str, articles: list[dict]) -> tuple[dict, dict]:
    """qid -> the writer's labelled sentences (binary), and (file, article, question_key) -> those sentences."""
    queries, qrels, answers = reqa.resolve_questions(DATA / SETS[name], articles)
    article = {a["qid"]: a["article"] for a in answers}
    by_key = {(SETS[name], article[q], question_key(text)): set(qrels[q]) for q, text in queries.items()}
    return qrels, by_key


def compare_runs(name: str, single: dict) -> dict:
    judged = read_qrels(ART / name / "collection/qrels.txt")
    evaluation = ART / name / "collection/qrels-eval.txt"
    qrels_sets = [("single label", single), ("judged", judged)]
    if evaluation.is_file():
        qrels_sets.append(("evaluation", read_qrels(evaluation)))
    out = {}
    for label, run_path, split in RUNS:
        run_files, test_file = sorted((ART / name).glob(run_path)), ART / name / f"splits/{split}/test.tsv"
        if not (run_files and test_file.exists()):
            print(f"{ART / name / run_path}: not built, skipped", file=sys.stderr)
            continue
        run_file = run_files[0]
        run, test = read_run(run_file), list(read_queries(test_file))
        scores = {qrels_name: evaluate(run, qrels, test, METRICS, "success")["metrics"]
                  for qrels_name, qrels in qrels_sets}
        parts = run_file.relative_to(ART / name).parts
        model = f"{parts[1]}, " if parts[0] == "dense" else ""
        out[f"{label} ({model}{split}, {len(test)} questions)"] = {
            m: {k: round(v[m], 4) for k, v in scores.items()} for m in METRICS}
    return out


def twice_judged(pools_path: Path, first_path: Path, second_path: Path, every_pooled: bool = False) -> dict:
    """Two judges over the questions the second judged (each its pooled sentences; unlisted: graded 0); with
    `every_pooled`, every question of `pools_path` was judged twice, one the second graded all 0 included."""
    pools = judging.read_pools(pools_path)
    second = judging.read_grades(second_path)
    if every_pooled:
        second = {key: {} for key in pools} | second
    return judging.agreement(judging.read_grades(first_path), second, pools, second_path)


def audited(name: str) -> dict:
    """An audit of a seeded sample of passage-test questions (`<name>.tsv`, `<name>-sample.tsv`): each answering
    sentence of the question's article (auditor's grade 2) that no pool put before a judge, counted by sentence
    and by question."""
    grades = judging.read_grades(DATA / f"{name}.tsv")
    sample = judging.read_pools(DATA / f"{name}-sample.tsv")   # the sampled questions (their pools: none)
    pooled = judging.pooled_sentences([DATA / "pools.tsv", DATA / "pools-deep.tsv"])
    first_only = judging.pooled_sentences([DATA / "pools.tsv"])
    answering = [(key, doc) for key in sample for doc, grade in grades.get(key, {}).items() if grade == 2]

    def outside(pools):
        missed = [(key, doc) for key, doc in answering if doc not in pools.get(key, set())]
        return {"answering sentences outside the pools": len(missed),
                "share of answering sentences": round(len(missed) / max(1, len(answering)), 4),
                "questions with one": len({key for key, _ in missed}),
                "share of questions": round(len({key for key, _ in missed}) / max(1, len(sample)), 4),
                "missed": sorted(f"{key[2]} ({key[1]}): {doc}" for key, doc in missed)}

    return {"questions": len(sample), "answering sentences": len(answering),
            "first pools": outside(first_only), "first and deeper pools": outside(pooled)}


def measure() -> dict:
    pools = judging.read_pools(DATA / "pools.tsv")     # the committed files first: they need no build
    first = judging.read_grades(DATA / "judgements.tsv")
    result = {"agreement": twice_judged(DATA / "pools.tsv", DATA / "judgements.tsv", DATA / "judgements-second.tsv"),
              "agreement, deeper pools": twice_judged(DATA / "pools-deep-second.tsv", DATA / "judgements-deep.tsv",
                                                       DATA / "judgements-deep-second.tsv", every_pooled=True),
              "audit of the deeper pools": audited("audit-deep"),
              "second audit, a fresh sample": audited("audit-deep-2")}
    articles_path = ART / "enwiki-mini/corpus/articles.jsonl"
    if not articles_path.is_file():
        raise StageError(articles_path, "not built; run `make reproduce` (or .venv/bin/snakemake "
                                        "artifacts/enwiki-mini/corpus/articles.jsonl --cores 1)")
    articles = list(read_jsonl(articles_path))
    for name in SETS:
        single, by_key = labelled_qrels(name, articles)
        graded = {key: g for key, g in first.items() if key[0] == SETS[name]}
        result[name] = {"pooled sentences a question": round(
            sum(len(p) for k, p in pools.items() if k[0] == SETS[name]) / max(1, len(by_key)), 1),
            "labels against the judge": judging.labels_against_judge(by_key, graded, pools),
            "runs": compare_runs(name, single)}
    result["_method"] = ("pools: the top 10 of BM25, all-MiniLM-L6-v2, Chang et al.'s ICT+BFS+WLP, Three-T BERT and "
                         "QuadrupletBERT (80-20 models); R@k as Success@k; judged: graded qrels, R@k and RR@10 count "
                         "answers (grade 2), nDCG@10 reads both grades; single label: the writers' sentences only")
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="print only; leave benchmarks/results.json as it is")
    parser.add_argument("--build", type=Path, default=ROOT, help="a built tree whose runs are scored (default: here)")
    args = parser.parse_args(argv)
    global ART
    ART = args.build / "artifacts"
    try:
        result = measure()
    except StageError as err:   # bad input or a missing build: one line, as the stages say it
        sys.exit(f"error: {err}")
    print(json.dumps(result, indent=2))
    if not args.no_record:
        record("judged_qrels", result, replace=True)


if __name__ == "__main__":
    main()
