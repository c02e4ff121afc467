"""The enwiki-mini sets' judged relevance (data/enwiki-mini/JUDGING.md): pools, two judges' agreement, how the
question writers' single labels compare with the judges' grades, and the graded qrels the build reads."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np

from ..io import StageError, require_file
from . import reqa
from .splits import find_root, question_key

POOL_COLUMNS = ["questions", "article", "question", "pooled"]


def _tsv_rows(path, columns: list[str]) -> list[tuple[int, list[str]]]:
    """(line, fields) of a tab-separated file whose header is `columns`; blank lines skipped."""
    path = require_file(path)
    with open(path, encoding="utf-8-sig", newline="") as handle:   # -sig: a byte-order mark is no header field
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != columns:
        raise StageError(path, f"header must be {' '.join(columns)} (tab-separated)")
    out = []
    for line, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(columns):
            raise StageError(path, f"line {line} needs {len(columns)} tab-separated fields")
        out.append((line, row))
    return out


def read_pools(path) -> dict[tuple[str, str, str], list[str]]:
    """(question file, article, question_key) -> the pooled sentences every judge graded (unlisted in a
    judgements file: graded 0). One row a question (JUDGING.md): a second would replace the first's pool."""
    pools, first = {}, {}
    for line, row in _tsv_rows(path, POOL_COLUMNS):
        key = (row[0], row[1], question_key(row[2]))
        if key in first:
            raise StageError(path, f"line {line} pools the question of line {first[key]} again (same question file "
                                   f"and article)")
        first[key] = line
        pools[key] = row[3].split()
    return pools


JUDGEMENT_COLUMNS = ["questions", "article", "question", "sentence", "sentence_start", "grade"]


def judgement_rows(path) -> list[tuple[int, dict]]:
    """(line, row) of a judgements file: a question file's name, the question, a pooled sentence's id and first
    words, and its grade (2 answers, 1 partly; a pooled sentence not listed was graded 0, so no other grade is on
    the scale), each sentence once a question."""
    out, first = [], {}
    for line, row in _tsv_rows(path, JUDGEMENT_COLUMNS):
        item = dict(zip(JUDGEMENT_COLUMNS, row))
        if item["grade"] not in ("1", "2"):
            raise StageError(path, f"line {line}: grade must be 2 (answers) or 1 (partly), not {item['grade']!r}")
        key = (item["questions"], item["article"], question_key(item["question"]), item["sentence"])
        if key in first:
            raise StageError(path, f"line {line}: sentence {item['sentence']} is judged twice for this question "
                                   f"(line {first[key]} too)")
        first[key] = line
        out.append((line, item))
    return out


def read_grades(path) -> dict[tuple[str, str, str], dict[str, int]]:
    """A judgements file as (question file, article, question_key) -> {sentence: grade}."""
    grades: dict[tuple[str, str, str], dict[str, int]] = {}
    for _, item in judgement_rows(path):
        grades.setdefault((item["questions"], item["article"], question_key(item["question"])), {})[
            item["sentence"]] = int(item["grade"])
    return grades


def agreement(first: dict, second: dict, pools: dict, second_path="the second judgements") -> dict:
    """Two judges over the questions the second judged, every pooled sentence a pair (unlisted: 0): the share
    graded alike and Cohen's kappa (statsmodels) on the three grades, linearly weighted, and on answers or not."""
    from statsmodels.stats.inter_rater import cohens_kappa, to_table

    unpooled = [key for key in second if key not in pools]
    if unpooled:   # its pairs are the pool's sentences: without a pool there is nothing to agree on
        raise StageError(second_path, f"judges {len(unpooled)} question(s) no pool lists, e.g. {unpooled[0][2]!r} "
                                      f"of {unpooled[0][1]!r} ({unpooled[0][0]})")
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


def read_judgements(path, questions_path, sentences: dict[str, str]) -> dict[tuple[str, str], dict[str, int]]:
    """(article, question_key) -> {candidate: grade} of the rows of a judgements file that judge
    `questions_path`'s questions (its `questions` column names the question file). Each judged sentence is
    checked by its id and first words, so a parser that moves sentences stops the build instead of moving
    judgements. The column is the key (a question can be asked, and judged apart, in two sets), so a name that
    is no question file, or a question file no row names (renamed or copied), stops the build: either would
    drop judgements unseen."""
    name = Path(questions_path).name
    rows = judgement_rows(path)
    folders = (Path(path).parent, Path(questions_path).parent)
    known = {name} | {other for other in {item["questions"] for _, item in rows}
                      if any((folder / other).is_file() for folder in folders)}
    judged: dict[tuple[str, str], dict[str, int]] = {}
    for line, item in rows:
        if item["questions"] not in known:
            raise StageError(path, f"line {line}: questions {item['questions']!r} names no question file (none "
                                   f"beside this file or {questions_path})")
        if item["questions"] != name:
            continue
        if not sentences.get(item["sentence"], "").startswith(item["sentence_start"]):
            raise StageError(path, f"line {line}: sentence {item['sentence']} is not the one starting "
                                   f"{item['sentence_start']!r} (was the corpus parsed differently?)")
        judged.setdefault((item["article"], question_key(item["question"])), {})[item["sentence"]] = int(item["grade"])
    if not judged:
        others = ", ".join(sorted(known - {name})) or "none"
        raise StageError(path, f"no row judges {name} (its questions column names {others}): a renamed question "
                               f"file finds no judgements; use the name its rows give")
    return judged


def judged_qrels(questions_path, judgements_path, articles: list[dict], qrels: dict, answers: list[dict],
                 queries: dict[str, str]) -> tuple[dict, dict]:
    """Graded qrels: each question's labelled sentences at grade 2 ("answers"), raised or joined by the
    judgements of its pooled sentences (2 answers, 1 partly; the higher grade where the label and a judge
    differ), and counts of what the judging changed. A judged question the file does not ask stops the build."""
    sentences = {c["id"]: c["sentence"] for a in articles for c in reqa.article_candidates(a)}
    judged = read_judgements(judgements_path, questions_path, sentences)
    article_of = {item["qid"]: item["article"] for item in answers}
    asked = {(article_of[qid], question_key(text)): qid for qid, text in queries.items()}
    stray = next((key for key in judged if key not in asked), None)
    if stray:
        raise StageError(judgements_path, f"judges {stray[1]!r} of {stray[0]!r}, which {questions_path} does not ask")
    graded, counts = {}, {"judged_questions": 0, "answers_added": 0, "partly": 0}
    for qid, docs in qrels.items():
        grades = {doc: 2 for doc in docs}
        extra = judged.get((article_of[qid], question_key(queries[qid])), {})
        counts["judged_questions"] += bool(extra)
        for doc, grade in extra.items():
            counts["answers_added"] += grade == 2 and doc not in grades
            counts["partly"] += grade == 1 and doc not in grades
            grades[doc] = max(grades.get(doc, 0), grade)
        graded[qid] = grades
    return graded, counts


# --- the qrels the tables are scored on (issue 65): the judge's grade stands, deeper pools, facts as groups ------

def pooled_sentences(paths) -> dict[tuple[str, str, str], set[str]]:
    """(question file, article, question_key) -> every sentence any of the pools files put before a judge."""
    pooled: dict[tuple[str, str, str], set[str]] = {}
    for path in paths:
        for key, sentences in read_pools(path).items():
            pooled.setdefault(key, set()).update(sentences)
    return pooled


def judged_grades(paths, questions_path, sentences: dict[str, str]) -> dict[tuple[str, str], dict[str, int]]:
    """read_judgements over several files (the first pools' judgements, then the deeper pools'); a sentence
    graded in two of them for one question stops the build (the deeper pools leave out what was judged)."""
    grades: dict[tuple[str, str], dict[str, int]] = {}
    for path in paths:
        for key, judged in read_judgements(path, questions_path, sentences).items():
            twice = set(judged) & set(grades.get(key, {}))
            if twice:
                raise StageError(path, f"grades {sorted(twice)[0]} for {key[1]!r} of {key[0]!r}, which an earlier "
                                       f"judgements file grades already")
            grades.setdefault(key, {}).update(judged)
    return grades


def judge_stands(questions_path, judgement_paths, pool_paths, articles: list[dict], qid_prefix: str = "q"
                 ) -> tuple[dict, dict, list[dict]]:
    """Graded qrels where the judge's grade stands: a pooled sentence takes its grade (unlisted: 0), the
    writer's label included (a label the judge graded partly is 1, one graded no is 0 and kept as 0 so its
    question stays scored); a label never pooled stays 2. Returns (qid -> {sentence: grade}, the labelled answers
    as reqa.resolve_questions gives them, one row a pair saying where its grade came from)."""
    from . import reqa

    name = Path(questions_path).name
    sentences = {c["id"]: c["sentence"] for a in articles for c in reqa.article_candidates(a)}
    queries, labels, answers = reqa.resolve_questions(questions_path, articles, qid_prefix=qid_prefix)
    grades = judged_grades(judgement_paths, questions_path, sentences)
    pooled = pooled_sentences(pool_paths)
    article_of = {item["qid"]: item["article"] for item in answers}
    qrels, sources = {}, []
    for qid, labelled in labels.items():
        key = (article_of[qid], question_key(queries[qid]))
        judged, pool = grades.get(key, {}), pooled.get((name, *key), set())
        graded = {}
        for doc in labelled:
            graded[doc] = judged.get(doc, 0) if doc in pool else 2
            source = "writer, not pooled" if doc not in pool else (
                "writer and judge" if graded[doc] == 2 else "judge over writer")
            sources.append({"qid": qid, "doc": doc, "grade": graded[doc], "source": source})
        for doc, grade in judged.items():
            if doc not in graded:
                graded[doc] = grade
                sources.append({"qid": qid, "doc": doc, "grade": grade, "source": "judge"})
        qrels[qid] = graded
    return qrels, answers, sources


def normalised_answer(text: str) -> str:
    """An answer string compared across questions: lower case, no thousands commas, punctuation as spaces,
    no articles, single spaces ("The 1,000 Days" and "1000 days" match)."""
    text = re.sub(r"(?<=\d),(?=\d{3})", "", text.lower())
    return " ".join(w for w in re.sub(r"[^\w\s]", " ", text).split() if w not in ("the", "a", "an"))


def fact_groups(answers: dict[str, tuple[str, set[str]]], qrels: dict[str, dict[str, int]]) -> dict[str, str]:
    """qid -> its group's first qid: questions are one group when they ask for the same answer string in one
    article (answers: qid -> (article, its normalised answer strings)) or share a sentence graded 1 or 2 for
    both (at any grade: the same fact reached through another sentence is still the same fact)."""
    parent = {qid: qid for qid in answers}

    def join(a, b):
        ra, rb = find_root(parent, a), find_root(parent, b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    first: dict[tuple, str] = {}
    for qid, (article, strings) in sorted(answers.items()):
        for text in strings:
            join(qid, first.setdefault(("answer", article, text), qid))
        for doc, grade in sorted(qrels.get(qid, {}).items()):
            if grade >= 1:
                join(qid, first.setdefault(("sentence", doc), qid))
    return {qid: find_root(parent, qid) for qid in answers}


def unexposed_by_fact(test: list[str], trained: list[str], groups: dict[str, str]) -> list[str]:
    """The test questions whose fact group has no training question."""
    taught = {groups[qid] for qid in trained if qid in groups}
    return [qid for qid in test if groups.get(qid, qid) not in taught]
