"""Wikipedia paragraphs as passages (the embedded default's passage form), with a ReQA question set's
questions and ICT pseudo-queries."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

from ..io import StageError, answer_sets, answers_only
from .collection import CollectionWriter, progress, QuerySet, valid_sample, write_dataset

# the query ids each question file gets (q0001..., n0001...: reqa.question_id); the claims read a query's article
# back through them (towers.plan.verdicts.question_files)
QUESTION_PREFIXES = {"questions": "q", "test_questions": "n"}


def article_passages(article: dict) -> Iterator[tuple[dict, list[str]]]:
    """(passage row, its sentences) for each paragraph, numbered as reqa.article_candidates numbers them."""
    paragraphs = [p for section in article["sections"] for p in section["paragraphs"]]
    for index, paragraph in enumerate(paragraphs):
        row = {"id": f"{article['id']}_{index}", "contents": f"{article['title']} {paragraph['text']}".strip(),
               "title": article["title"]}
        yield row, paragraph["sentences"]


def passage_of(candidate_id: str) -> str:
    """ReQA candidate <article>_<paragraph>_<sentence> -> passage <article>_<paragraph>."""
    return candidate_id.rsplit("_", 1)[0]


def paragraph_grades(sentence_grades: dict[str, int]) -> dict[str, int]:
    """A question's sentence judgements moved to their paragraphs, each paragraph at its best sentence's grade."""
    grades: dict[str, int] = {}
    for candidate, grade in sentence_grades.items():
        grades[passage_of(candidate)] = max(grades.get(passage_of(candidate), 0), grade)
    return grades


def unexposed_queries(test_qrels: dict[str, dict[str, int]], training: list[dict[str, dict[str, int]]]) -> list[str]:
    """The test queries none of whose answer passages is a training query's answer passage (a passage the model
    was trained to retrieve): in a 102-article corpus many test questions' paragraphs are, and a verdict read on
    the others alone shows what training on the very paragraph was worth."""
    targets = {doc for qrels in training for docs in answers_only(qrels).values() for doc in docs}
    return [qid for qid, docs in answers_only(test_qrels).items() if not set(docs) & targets]


def question_split(questions: dict[str, str], later: dict[str, str], dev_fraction: float, valid_fraction: float,
                   seed: int, questions_path, later_path, answers: dict[str, set[str]] | None = None
                   ) -> tuple[list[str], list[str], set[str], int]:
    """(test qids, train qids, the valid qids among them, twins). With `later` (a second question set), a seeded
    `dev_fraction` of its questions is the test side and the rest of it trains beside all of `questions`;
    without, a seeded `dev_fraction` of `questions` is. Questions of one text (splits.question_key: case,
    punctuation and spacing aside), and questions that share an answer sentence (`answers`: qid -> the sentences
    that answer it, across both sets), stay on one side; twins: the questions of `later` asked in `questions`
    too, or answered by a sentence that answers one of its questions, which train as every question of
    `questions` does."""
    from .splits import cold_start_split, question_key

    answers = answers or {}
    if not later:
        parts = cold_start_split(questions, 1 - dev_fraction, valid_fraction, seed, answers=answers)
        return parts["test"], parts["train"] + parts["valid"], set(parts["valid"]), 0
    trained = frozenset(question_key(text) for text in questions.values())
    taught = frozenset(doc for qid in questions for doc in answers.get(qid, ()))
    twins = sum(question_key(text) in trained or bool(answers.get(qid, set()) & taught) for qid, text in later.items())
    parts = cold_start_split(later, 1 - dev_fraction, valid_fraction, seed, trained, answers, taught)
    if not parts["test"]:
        raise StageError(later_path, f"no test question is left of its {len(later)} (dev fraction {dev_fraction}; "
                                     f"{twins} are asked in {questions_path} too and train)")
    valid = set(parts["valid"]) | valid_sample(list(questions), valid_fraction, 0, seed)
    return parts["test"], list(questions) + parts["train"] + parts["valid"], valid, twins


def write_passages(articles_path, tmp: dict[str, Path], titles: set) -> tuple:
    """Pass 1: every paragraph passage into the collection; the articles a question asks about, and how many
    paragraphs have two or more sentences (ICT's candidates)."""
    from . import reqa

    asked, eligible = [], 0
    with open(tmp["candidates.jsonl"], "w", encoding="utf-8") as out:
        writer = CollectionWriter(out, articles_path)
        for _, article, _ in progress(reqa._articles(articles_path), "articles", "article"):
            if article["title"] in titles:
                asked.append(article)
            for row, sentences in article_passages(article):
                writer.add(row)
                eligible += len(sentences) >= 2
    writer.finish(lambda: ((n, row["id"]) for n, article, _ in reqa._articles(articles_path)
                           for row, _ in article_passages(article)))
    return writer, asked, eligible


def ict_pseudo_queries(articles_path, ict_queries: int, eligible: int, seed: int) -> QuerySet:
    """Pass 2: `ict_queries` seeded paragraphs of two or more sentences, each with a random sentence of its own
    as the query (relevant: that paragraph)."""
    from . import reqa

    ict = QuerySet("ict")
    ict.queries_where = ict.qrels_where = str(articles_path)
    rng = random.Random(f"ict-{seed}")
    chosen = set(rng.sample(range(eligible), min(ict_queries, eligible)))
    position = 0
    for _, article, _ in reqa._articles(articles_path):
        for row, sentences in article_passages(article):
            if len(sentences) < 2:
                continue
            if position in chosen:
                qid = f"ict-{row['id']}"
                ict.queries[qid] = " ".join(rng.choice(sentences).split())
                ict.qrels[qid] = {row["id"]: 1}
                ict.qrels_line[qid] = 0
            position += 1
    return ict


def build_wiki(articles_path, questions_path, tmp: dict[str, Path], ict_queries: int, dev_fraction: float,
               valid_fraction: float, seed: int, test_questions_path=None, judgements_path=None) -> dict:
    """Paragraph passages of parsed articles, the question set's qrels moved from the answer sentence to its
    paragraph, a seeded `dev_fraction` of the questions as test (identical texts on one side), and
    `ict_queries` ICT pseudo-queries (a random sentence of a random paragraph of two or more sentences,
    relevant: that paragraph) added to train. Two streamed passes over the articles.

    With `test_questions_path`, the test queries are a seeded `dev_fraction` of that set (ids n0001...) and
    the rest of it joins every question of `questions_path` in train: MS MARCO's dev queries are of the kind
    users type, so the passage task's test set is the NQ-like one (question_split; stats' question_twins
    counts its questions asked in `questions_path` too)."""
    from . import reqa
    from .judging import judged_qrels

    if not 0 < dev_fraction < 1:
        raise StageError("--dev-fraction", f"must be between 0 and 1, not {dev_fraction}")
    if ict_queries < 0:
        raise StageError("--ict-queries", f"must be 0 or more, not {ict_queries}")
    sources = [questions_path] + ([test_questions_path] if test_questions_path else [])
    writer, asked, eligible = write_passages(articles_path, tmp, {q["article"] for path in sources
                                                                  for q in reqa.read_questions(path)})

    def resolved(path, prefix):
        queries, qrels, answers = reqa.resolve_questions(path, asked, qid_prefix=prefix)
        if judgements_path:
            qrels = judged_qrels(path, judgements_path, asked, qrels, answers, queries)[0]
        return queries, qrels

    questions, qrels = resolved(questions_path, QUESTION_PREFIXES["questions"])
    later, later_qrels = resolved(test_questions_path, QUESTION_PREFIXES["test_questions"]) if test_questions_path \
        else ({}, {})
    both = {**qrels, **later_qrels}
    answers = answer_sets(both)
    test_ids, train_ids, valid, twins = question_split(questions, later, dev_fraction, valid_fraction, seed,
                                                       questions_path, test_questions_path, answers)
    where = f"{questions_path} (q...), {test_questions_path} (n...)" if test_questions_path else str(questions_path)
    questions, qrels = {**questions, **later}, both
    test, train = QuerySet("test"), QuerySet("train")
    for side, qids in ((test, test_ids), (train, train_ids)):
        side.queries = {q: questions[q] for q in qids}
        side.qrels = {q: paragraph_grades(qrels[q]) for q in qids}
        side.qrels_line = {q: int(q[1:]) + 1 for q in qids}       # q0001 (n0001) is line 2 of its question set
        side.queries_where = side.qrels_where = where
    test.queries_where = test.qrels_where = str(test_questions_path or questions_path)

    ict = ict_pseudo_queries(articles_path, ict_queries, eligible, seed)
    unexposed = unexposed_queries(test.qrels, [train.qrels, ict.qrels])
    return write_dataset(tmp, writer, test, train, seed, valid_fraction, 0,
                         {"form": "wikipedia-passages", "articles": str(articles_path), "questions": str(questions_path),
                          "test_questions": str(test_questions_path or ""), "dev_fraction": dev_fraction,
                          "judgements": str(judgements_path or ""), "question_twins": twins,
                          "ict_queries": len(ict.queries), "ict_queries_asked": ict_queries,
                          "ict_paragraphs_available": eligible, "unexposed_test_queries": unexposed},
                         valid=valid, extra_train=ict if ict.queries else None)
