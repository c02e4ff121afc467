"""The shipped enwiki-mini question sets as the build reads them, on the real parsed corpus: judged qrels resolve,
no test question asks what a training question was taught, and the NQ-like test side is large enough."""
import os

import pytest
import yaml

from towers.datasets import judging, reqa
from towers.datasets.splits import cold_start_split, question_key
from towers.datasets.wiki_passages import paragraph_grades, question_split, unexposed_queries
from towers.io import answer_sets

from conftest import ROOT

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())
DATASETS = PARAMS["datasets"]


@pytest.fixture(scope="module")
def articles():
    import gensim

    from towers.datasets import wiki

    dump = os.path.join(os.path.dirname(gensim.__file__), "test/test_data/"
                        "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    return wiki.parse_dump(dump)[0]


def graded(articles, name, prefix):
    cfg = DATASETS[name]
    queries, qrels, answers = reqa.resolve_questions(ROOT / cfg["questions"], articles, qid_prefix=prefix)
    return queries, judging.judged_qrels(ROOT / cfg["questions"], ROOT / cfg["judgements"], articles, qrels, answers,
                                      queries)[0]


def taught_on_test(test, train, answers):
    taught = {doc for q in train for doc in answers[q]}
    return [q for q in test if answers[q] & taught]


@pytest.mark.parametrize("name", ["enwiki-mini", "enwiki-mini-nq"])
def test_no_split_of_a_question_set_tests_what_it_trains(articles, name):
    queries, qrels = graded(articles, name, "q")
    answers = answer_sets(qrels)
    for fraction in PARAMS["splits"].values():
        parts = cold_start_split(queries, fraction, PARAMS["valid_fraction"], PARAMS["seed"], answers=answers)
        train = parts["train"] + parts["valid"]
        assert not taught_on_test(parts["test"], train, answers)
        assert not {question_key(queries[q]) for q in parts["test"]} & {question_key(queries[q]) for q in train}


def test_the_passage_task_tests_nothing_it_trains_and_has_600_nq_like_test_questions(articles):
    cfg = DATASETS["enwiki-mini-passages"]
    questions, qrels = graded(articles, "enwiki-mini", "q")
    later, later_qrels = graded(articles, "enwiki-mini-nq", "n")
    both = {**qrels, **later_qrels}
    answers = answer_sets(both)
    test, train, _, twins = question_split(questions, later, cfg["dev_fraction"], PARAMS["valid_fraction"],
                                           PARAMS["seed"], cfg["questions"], cfg["test_questions"], answers)
    assert len(test) >= 600 and all(q.startswith("n") for q in test)
    assert not taught_on_test(test, train, answers)                   # no answer sentence on both sides
    texts = {**questions, **later}
    assert not {question_key(texts[q]) for q in test} & {question_key(texts[q]) for q in train}
    # paragraphs: some test questions' answer paragraphs are training targets (a 102-article corpus); the others
    # are the unexposed subset the verdicts are also read on
    unexposed = unexposed_queries({q: paragraph_grades(both[q]) for q in test},
                                  [{q: paragraph_grades(both[q]) for q in train}])
    assert 0 < len(unexposed) < len(test)
