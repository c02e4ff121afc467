"""Question-to-answer-sentence word overlap of the embedded question sets, beside SQuAD v1.1 dev's.

    .venv/bin/python -m benchmarks.question_overlap [--articles FILE] [--squad FILE] [--nq-open FILE] [--no-record]

For data/enwiki-mini/questions.tsv (written by looking at each answer sentence), data/enwiki-mini/questions-nq.tsv
(written before the article body was read) and, when it is there, SQuAD v1.1 dev (../shared/data/squad/
dev-v1.1.json, a check only: nothing of it is copied into the project): the share of a question's distinct content
words found in its answer sentence (towers.datasets.overlap: lowercased, NLTK's English stopwords removed, no
stemming); and, where ../shared/data/nq_open has them, how long NQ-open's dev questions are (it has no answer
sentences). Needs enwiki-mini's parsed articles (`.venv/bin/snakemake artifacts/enwiki-mini/corpus/articles.jsonl
--cores 1`). Writes its numbers into benchmarks/results.json under `question_overlap` unless --no-record.
No model is involved: the numbers describe the questions, not any retriever."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from towers.datasets import overlap
from .workflow_harness import ROOT, record
from towers.io import read_jsonl

ARTICLES = ROOT / "artifacts/enwiki-mini/corpus/articles.jsonl"
SQUAD = ROOT.parent / "shared/data/squad/dev-v1.1.json"
NQ_OPEN = ROOT.parent / "shared/data/nq_open/NQ-open.dev.jsonl"   # questions and short answers, no passages
SETS = {"enwiki-mini questions.tsv": ROOT / "data/enwiki-mini/questions.tsv",
        "enwiki-mini questions-nq.tsv": ROOT / "data/enwiki-mini/questions-nq.tsv"}


def summary(items: list[tuple[str, str, str]]) -> dict:
    """Overlap of (question, answer sentence, title) items, then again without the title's words."""
    return {**overlap.overlap_stats(items),
            "words_per_question": overlap.question_lengths(q for q, *_ in items)["words_per_question"],
            "without_title_words": overlap.overlap_stats(items, drop_title=True)}


def measure(articles_path: Path, squad_path: Path, nq_open_path: Path) -> dict:
    if not articles_path.exists():
        sys.exit(f"{articles_path}: not built; run .venv/bin/snakemake artifacts/enwiki-mini/corpus/articles.jsonl --cores 1")
    articles = list(read_jsonl(articles_path))
    result = {name: summary(overlap.question_set_pairs(path, articles)) for name, path in SETS.items()}
    if squad_path.exists():
        result["SQuAD v1.1 dev"] = summary(overlap.squad_pairs(squad_path))
    else:
        print(f"{squad_path}: absent, SQuAD skipped", file=sys.stderr)
    if nq_open_path.exists():   # no answer sentences: only how long NQ's questions are, beside the sets' own
        result["NQ-open dev (questions only)"] = overlap.question_lengths(row["question"] for row in read_jsonl(nq_open_path))
    else:
        print(f"{nq_open_path}: absent, NQ-open skipped", file=sys.stderr)
    result["_method"] = ("share of a question's distinct content words (lowercased letter/digit runs, NLTK's 179 "
                         "English stopwords removed, no stemming) found in its answer sentence; without_title_words: the same with "
                         "the words of the article's title left out of the question's; SQuAD: the sentence "
                         "holding its first gold answer, split as ReQA-SQuAD; NQ-open: question lengths only")
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=Path, default=ARTICLES)
    parser.add_argument("--squad", type=Path, default=SQUAD)
    parser.add_argument("--nq-open", type=Path, default=NQ_OPEN)
    parser.add_argument("--no-record", action="store_true", help="print only; leave benchmarks/results.json as it is")
    args = parser.parse_args(argv)
    result = measure(args.articles, args.squad, args.nq_open)
    print(json.dumps(result, indent=2))
    if not args.no_record:
        record("question_overlap", result, replace=True)


if __name__ == "__main__":
    main()
