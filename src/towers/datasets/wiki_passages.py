"""Wikipedia paragraphs as passages (the embedded default's passage form), with a ReQA question set's
questions and ICT pseudo-queries."""
from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

from ..io import StageError
from .collection import CollectionWriter, progress, QuerySet, valid_sample, write_dataset

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


def build_wiki(articles_path, questions_path, tmp: dict[str, Path], ict_queries: int, dev_fraction: float,
               valid_fraction: float, seed: int, test_questions_path=None) -> dict:
    """Paragraph passages of parsed articles, the question set's qrels moved from the answer sentence to its
    paragraph, a seeded `dev_fraction` of the questions as test (identical texts on one side), and
    `ict_queries` ICT pseudo-queries (a random sentence of a random paragraph of two or more sentences,
    relevant: that paragraph) added to train. Two streamed passes over the articles.

    With `test_questions_path`, the test queries are a seeded `dev_fraction` of that set (ids n0001...) and
    the rest of it joins every question of `questions_path` in train: MS MARCO's dev queries are of the kind
    users type, so the passage task's test set is the NQ-like one."""
    from . import reqa
    from .splits import cold_start_split

    if not 0 < dev_fraction < 1:
        raise StageError("--dev-fraction", f"must be between 0 and 1, not {dev_fraction}")
    if ict_queries < 0:
        raise StageError("--ict-queries", f"must be 0 or more, not {ict_queries}")
    sources = [questions_path] + ([test_questions_path] if test_questions_path else [])
    titles = {q["article"] for path in sources for q in reqa.read_questions(path)}
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

    questions, qrels, _ = reqa.resolve_questions(questions_path, asked)
    test, train = QuerySet("test"), QuerySet("train")
    if test_questions_path:
        asked_later, later_qrels, _ = reqa.resolve_questions(test_questions_path, asked, qid_prefix="n")
        parts = cold_start_split(asked_later, 1 - dev_fraction, valid_fraction, seed)
        valid = set(parts["valid"]) | valid_sample(list(questions), valid_fraction, 0, seed)
        train_ids = list(questions) + parts["train"] + parts["valid"]
        questions, qrels = {**questions, **asked_later}, {**qrels, **later_qrels}
        where = f"{questions_path} (q...), {test_questions_path} (n...)"
    else:
        parts = cold_start_split(questions, 1 - dev_fraction, valid_fraction, seed)
        valid, train_ids, where = set(parts["valid"]), parts["train"] + parts["valid"], str(questions_path)
    for side, qids in ((test, parts["test"]), (train, train_ids)):
        side.queries = {q: questions[q] for q in qids}
        side.qrels = {q: {passage_of(c): rel for c, rel in qrels[q].items()} for q in qids}
        side.qrels_line = {q: int(q[1:]) + 1 for q in qids}       # q0001 (n0001) is line 2 of its question set
        side.queries_where = side.qrels_where = where
    test.queries_where = test.qrels_where = str(test_questions_path or questions_path)

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
    return write_dataset(tmp, writer, test, train, seed, valid_fraction, 0,
                         {"form": "wikipedia-passages", "articles": str(articles_path), "questions": str(questions_path),
                          "test_questions": str(test_questions_path or ""), "dev_fraction": dev_fraction, "ict_queries": len(ict.queries), "ict_queries_asked": ict_queries,
                          "ict_paragraphs_available": eligible},
                         valid=valid, extra_train=ict if ict.queries else None)
