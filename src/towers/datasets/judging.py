"""The enwiki-mini sets' judged relevance (data/enwiki-mini/JUDGING.md): pools, two judges' agreement, and how the
question writers' single labels compare with the judges' grades."""
from __future__ import annotations

import csv

import numpy as np

from ..io import StageError, require_file
from .splits import question_key

POOL_COLUMNS = ["questions", "article", "question", "pooled"]


def read_pools(path) -> dict[tuple[str, str, str], list[str]]:
    """(question file, article, question_key) -> the pooled sentences every judge graded (unlisted in a
    judgements file: graded 0)."""
    path = require_file(path)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != POOL_COLUMNS:
        raise StageError(path, f"header must be {' '.join(POOL_COLUMNS)} (tab-separated)")
    pools = {}
    for line, row in enumerate(rows[1:], 2):
        if len(row) != len(POOL_COLUMNS):
            raise StageError(path, f"line {line} needs {len(POOL_COLUMNS)} tab-separated fields")
        pools[(row[0], row[1], question_key(row[2]))] = row[3].split()
    return pools


JUDGEMENT_COLUMNS = ["questions", "article", "question", "sentence", "sentence_start", "grade"]


def judgement_rows(path) -> list[tuple[int, dict]]:
    """(line, row) of a judgements file: a question file's name, the question, a pooled sentence's id and first
    words, and its grade (2 answers, 1 partly; a pooled sentence not listed was graded 0)."""
    path = require_file(path)
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != JUDGEMENT_COLUMNS:
        raise StageError(path, f"header must be {' '.join(JUDGEMENT_COLUMNS)} (tab-separated)")
    out = []
    for line, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(JUDGEMENT_COLUMNS):
            raise StageError(path, f"line {line} needs {len(JUDGEMENT_COLUMNS)} tab-separated fields")
        out.append((line, dict(zip(JUDGEMENT_COLUMNS, row))))
    return out


def read_grades(path) -> dict[tuple[str, str, str], dict[str, int]]:
    """A judgements file as (question file, article, question_key) -> {sentence: grade}."""
    grades: dict[tuple[str, str, str], dict[str, int]] = {}
    for _, item in judgement_rows(path):
        grades.setdefault((item["questions"], item["article"], question_key(item["question"])), {})[
            item["sentence"]] = int(item["grade"])
    return grades


def agreement(first: dict, second: dict, pools: dict) -> dict:
    """Two judges over the questions the second judged, every pooled sentence a pair (unlisted: 0): the share
    graded alike and Cohen's kappa (statsmodels) on the three grades, linearly weighted, and on answers or not."""
    from statsmodels.stats.inter_rater import cohens_kappa, to_table

    pairs = np.array([(first.get(key, {}).get(doc, 0), grades.get(doc, 0))
                      for key, grades in second.items() for doc in pools[key]])
    if not len(pairs):
        raise ValueError("no question is judged twice")
    three, _ = to_table(pairs, bins=[0, 1, 2, 3])
    answers, _ = to_table((pairs == 2).astype(int), bins=[0, 1, 2])
    return {"questions": len(second), "pairs": len(pairs), "graded alike": round(float((pairs[:, 0] == pairs[:, 1]).mean()), 4),
            "kappa (3 grades)": round(float(cohens_kappa(three).kappa), 3),
            "kappa (3 grades, linear weights)": round(float(cohens_kappa(three, wt="linear").kappa), 3),
            "kappa (answers or not)": round(float(cohens_kappa(answers).kappa), 3),
            "answers": [int((pairs[:, 0] == 2).sum()), int((pairs[:, 1] == 2).sum())],
            "partly": [int((pairs[:, 0] == 1).sum()), int((pairs[:, 1] == 1).sum())]}


def labels_against_judge(labelled: dict, grades: dict, pools: dict) -> dict:
    """The question writers' labelled sentences that were pooled, by the judge's grade; and the questions the
    judge found another answer for (a sentence graded 2 the writer did not label)."""
    counts = {"labelled and pooled": 0, "judged answers": 0, "judged partly": 0, "judged no": 0,
              "questions": 0, "questions with another answer": 0}
    for key, sentences in labelled.items():
        if key not in pools:
            continue
        counts["questions"] += 1
        judged = grades.get(key, {})
        for doc in sentences:
            if doc in pools[key]:
                counts["labelled and pooled"] += 1
                counts[{2: "judged answers", 1: "judged partly"}.get(judged.get(doc, 0), "judged no")] += 1
        counts["questions with another answer"] += any(g == 2 and d not in sentences for d, g in judged.items())
    return counts
