"""The shipped enwiki-mini question sets as the build reads them, on the real parsed corpus: judged qrels resolve,
no test question asks what a training question was taught, and the NQ-like test side is large enough."""
import hashlib
import json
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


def judged(articles, name, prefix):
    """The set's queries, its graded qrels and the counts of what the judging changed."""
    cfg = DATASETS[name]
    queries, qrels, answers = reqa.resolve_questions(ROOT / cfg["questions"], articles, qid_prefix=prefix)
    return queries, *judging.judged_qrels(ROOT / cfg["questions"], ROOT / cfg["judgements"], articles, qrels, answers,
                                          queries)


def graded(articles, name, prefix):
    return judged(articles, name, prefix)[:2]


def digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


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


# Computed at d898b06, before issue 68 made the judgements' question file column a checked key and question_key
# drop format characters: the committed sets still judge and split exactly as they did.
BEFORE_68 = {"enwiki-mini": ("q", 899, {"judged_questions": 705, "answers_added": 54, "partly": 137},
                             "6189257dca61a075", "7755b0d648411caa"),
             "enwiki-mini-nq": ("n", 3005, {"judged_questions": 1045, "answers_added": 254, "partly": 1063},
                                "b3dc991129124035", "e75b8419c4fdbb3d")}


@pytest.mark.parametrize("name", list(BEFORE_68))
def test_the_committed_sets_judge_and_split_as_before_issue_68(articles, name):
    prefix, tuples, counts, qrels_digest, splits_digest = BEFORE_68[name]
    queries, qrels, judging_counts = judged(articles, name, prefix)
    assert (sum(map(len, qrels.values())), judging_counts, digest(qrels)) == (tuples, counts, qrels_digest)
    answers = answer_sets(qrels)
    assert digest({split: cold_start_split(queries, fraction, PARAMS["valid_fraction"], PARAMS["seed"], answers=answers)
                   for split, fraction in PARAMS["splits"].items()}) == splits_digest


def test_the_passage_task_splits_as_before_issue_68(articles):
    cfg = DATASETS["enwiki-mini-passages"]
    questions, qrels = graded(articles, "enwiki-mini", "q")
    later, later_qrels = graded(articles, "enwiki-mini-nq", "n")
    test, train, valid, twins = question_split(questions, later, cfg["dev_fraction"], PARAMS["valid_fraction"],
                                               PARAMS["seed"], cfg["questions"], cfg["test_questions"],
                                               answer_sets({**qrels, **later_qrels}))
    assert digest([test, train, sorted(valid), twins]) == "8c69e6cf54632dfe"


def test_no_unexposed_test_question_asks_a_training_questions_answer(articles):
    """The passage task's unexposed reading (issue 65): no test question read as unexposed has a training question
    asking for the same answer string in its article, or sharing a graded sentence with it."""
    cfg = DATASETS["enwiki-mini-passages"]
    judged_eval = cfg["evaluation_qrels"]
    questions, qrels = graded(articles, "enwiki-mini", "q")
    later, later_qrels = graded(articles, "enwiki-mini-nq", "n")
    both = {**qrels, **later_qrels}
    test, train, _, _ = question_split(questions, later, cfg["dev_fraction"], PARAMS["valid_fraction"], PARAMS["seed"],
                                       cfg["questions"], cfg["test_questions"], answer_sets(both))
    by_paragraph = unexposed_queries({q: paragraph_grades(both[q]) for q in test},
                                     [{q: paragraph_grades(both[q]) for q in train}])
    evaluated, strings = {}, {}
    for path, prefix in ((cfg["questions"], "q"), (cfg["test_questions"], "n")):
        evaluated |= judging.judge_stands(ROOT / path, [ROOT / p for p in judged_eval["judgements"]],
                                          [ROOT / p for p in judged_eval["pools"]], articles, prefix)[0]
        for item in reqa.resolve_questions(ROOT / path, articles, qid_prefix=prefix)[2]:
            strings.setdefault(item["qid"], (item["article"], set()))[1].add(judging.normalised_answer(item["answer"]))
    unexposed = judging.unexposed_by_fact([q for q in test if q in set(by_paragraph)], train,
                                          judging.fact_groups(strings, evaluated))
    taught_strings = {(strings[q][0], s) for q in train for s in strings[q][1]}
    taught_sentences = {doc for q in train for doc, grade in evaluated[q].items() if grade >= 1}
    assert 0 < len(unexposed) < len(by_paragraph) < len(test)
    for q in unexposed:
        assert not {(strings[q][0], s) for s in strings[q][1]} & taught_strings, q
        assert not {doc for doc, grade in evaluated[q].items() if grade >= 1} & taught_sentences, q
