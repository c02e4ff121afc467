"""ReQA builders: candidates are (sentence, paragraph) pairs, qrels point at the answer sentence.

- enwiki-mini: the parsed articles plus the project's own question set (data/enwiki-mini/questions.tsv)
- squad: the official SQuAD v1.1 JSON (Ahmad et al. 2019's construction, as used by Chang et al.)"""
from __future__ import annotations

import csv
from typing import Iterator

from .io import StageError, read_json, require_file
from .sentences import split_with_offsets

QUESTION_COLUMNS = ["article", "question", "answer", "sentence_start"]


def candidate(cid: str, sentence: str, paragraph: str, title: str) -> dict:
    # `contents` is what BM25 indexes: the sentence with its paragraph as context.
    return {"id": cid, "contents": f"{sentence} {paragraph}", "sentence": sentence,
            "paragraph": paragraph, "title": title}


def article_candidates(article: dict) -> Iterator[dict]:
    paragraphs = [p for section in article["sections"] for p in section["paragraphs"]]
    for p_index, paragraph in enumerate(paragraphs):
        for s_index, sentence in enumerate(paragraph["sentences"]):
            yield candidate(f"{article['id']}_{p_index}_{s_index}", sentence, paragraph["text"], article["title"])


def read_questions(path) -> list[dict]:
    path = require_file(path)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != QUESTION_COLUMNS:
        raise StageError(path, f"header must be {' '.join(QUESTION_COLUMNS)} (tab-separated)")
    questions = []
    for line, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(QUESTION_COLUMNS) or not all(field.strip() for field in row):
            raise StageError(path, f"line {line} needs {len(QUESTION_COLUMNS)} non-empty tab-separated fields")
        questions.append(dict(zip(QUESTION_COLUMNS, row), line=line))
    if not questions:
        raise StageError(path, "the question set is empty")
    return questions


def resolve_questions(questions_path, articles: list[dict], qid_prefix: str = "q"):
    """Map each question to the one candidate sentence that starts with `sentence_start` and holds the answer.

    Returns (queries, qrels, answers). Any unresolvable question stops the build, naming its line."""
    by_title = {a["title"]: list(article_candidates(a)) for a in articles}
    queries, qrels, answers = {}, {}, []
    for q in read_questions(questions_path):
        where = f"{questions_path}"
        if q["article"] not in by_title:
            raise StageError(where, f"line {q['line']}: article {q['article']!r} is not in the corpus")
        hits = [c for c in by_title[q["article"]]
                if c["sentence"].startswith(q["sentence_start"]) and q["answer"] in c["sentence"]]
        if len(hits) != 1:
            problem = "not found" if not hits else f"ambiguous ({len(hits)} sentences match)"
            raise StageError(where, f"line {q['line']}: answer {q['answer']!r} {problem} in article {q['article']!r}")
        qid = f"{qid_prefix}{q['line'] - 1:04d}"
        queries[qid] = q["question"]
        qrels[qid] = {hits[0]["id"]: 1}
        answers.append({"qid": qid, "article": q["article"], "answer": q["answer"], "candidate": hits[0]["id"]})
    return queries, qrels, answers


def _squad_articles(data: dict, path) -> list:
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise StageError(path, "not a SQuAD JSON file (no top-level 'data' list)")
    return data["data"]


def build_squad(path, id_prefix: str = ""):
    """ReQA-SQuAD from the official JSON: returns (candidates, queries, qrels).

    A question's relevant candidates are the sentences holding the start of any of its gold
    answers (dev questions have up to three answers, sometimes in different sentences)."""
    path = require_file(path)
    candidates, queries, qrels = [], {}, {}
    for a_index, article in enumerate(_squad_articles(read_json(path), path)):
        title = article.get("title", "").replace("_", " ")
        for p_index, paragraph in enumerate(article.get("paragraphs", [])):
            context = paragraph["context"]
            spans = split_with_offsets(context)
            ids = [f"{id_prefix}{a_index}_{p_index}_{s_index}" for s_index in range(len(spans))]
            normalised = " ".join(context.split())
            for cid, (_, _, sentence) in zip(ids, spans):
                candidates.append(candidate(cid, sentence, normalised, title))
            for qa in paragraph.get("qas", []):
                relevant = {}
                for answer in qa.get("answers", []):
                    start = answer["answer_start"]
                    for cid, (s_start, s_end, _) in zip(ids, spans):
                        if s_start <= start < s_end:
                            relevant[cid] = 1
                if not relevant:
                    raise StageError(path, f"question {qa['id']}: no sentence holds its answer offset")
                queries[qa["id"]] = " ".join(qa["question"].split())
                qrels[qa["id"]] = relevant
    if not queries:
        raise StageError(path, "the question set is empty")
    return candidates, queries, qrels
