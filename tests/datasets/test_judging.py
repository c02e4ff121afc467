"""Pools, two judges' agreement and the writers' labels against the judge (towers.datasets.judging)."""
import re
from pathlib import Path

import pytest

from towers.datasets import judging
from towers.io import StageError

DATA = Path(__file__).resolve().parents[2] / "data/enwiki-mini"


def test_agreement_counts_every_pooled_sentence_and_matches_cohens_kappa():
    from sklearn.metrics import cohen_kappa_score      # an independent implementation of the same statistic

    key = ("questions.tsv", "A", "q")
    other = ("questions.tsv", "A", "r")
    pools = {key: ["a", "b", "c", "d"], other: ["a", "e"]}
    first = {key: {"a": 2, "b": 1}, other: {"e": 2}}
    second = {key: {"a": 2, "c": 1}, other: {"e": 2}}
    result = judging.agreement(first, second, pools)
    firsts, seconds = [2, 1, 0, 0, 0, 2], [2, 0, 1, 0, 0, 2]
    assert result["questions"] == 2 and result["pairs"] == 6 and result["graded alike"] == round(4 / 6, 4)
    assert result["kappa (3 grades)"] == round(cohen_kappa_score(firsts, seconds), 3)
    assert result["kappa (3 grades, linear weights)"] == round(cohen_kappa_score(firsts, seconds, weights="linear"), 3)
    assert result["kappa (answers or not)"] == 1.0 and result["answers"] == [2, 2] and result["partly"] == [1, 1]
    with pytest.raises(ValueError, match="no question is judged twice"):
        judging.agreement(first, {}, pools)


def test_labels_against_the_judge():
    key = ("questions-nq.tsv", "A", "q")
    pools = {key: ["a", "b", "c"]}
    counts = judging.labels_against_judge({key: {"a", "z"}, ("x", "y", "z"): {"a"}}, {key: {"a": 1, "c": 2}}, pools)
    assert counts == {"labelled and pooled": 1, "judged answers": 0, "judged partly": 1, "judged no": 0,
                      "questions": 1, "questions with another answer": 1}


def test_pool_and_judgement_files_are_checked(tmp_path):
    bad = tmp_path / "pools.tsv"
    bad.write_text("questions\tarticle\tquestion\n")
    with pytest.raises(StageError, match="pools.tsv: header must be questions article question pooled"):
        judging.read_pools(bad)
    short = tmp_path / "judgements.tsv"
    short.write_text("\t".join(judging.JUDGEMENT_COLUMNS) + "\nquestions.tsv\tA\tq\n")
    with pytest.raises(StageError, match="judgements.tsv: line 2 needs 6 tab-separated fields"):
        judging.read_grades(short)


def test_the_committed_judging_files_read_as_before_issue_68():
    """The pools and both judges' files, read with issue 68's checks, give JUDGING.md's figures as before."""
    from conftest import ROOT

    data = ROOT / "data/enwiki-mini"
    pools = judging.read_pools(data / "pools.tsv")
    first, second = judging.read_grades(data / "judgements.tsv"), judging.read_grades(data / "judgements-second.tsv")
    assert (len(pools), len(first), sum(map(len, first.values()))) == (1802, 1750, 3552)
    assert judging.agreement(first, second, pools) == {
        "questions": 158, "pairs": 6605, "graded alike": 0.9944, "kappa (3 grades)": 0.932,
        "kappa (3 grades, linear weights)": 0.959, "kappa (answers or not)": 0.975, "answers": [188, 189],
        "partly": [98, 89]}


def tiny_article():
    paragraphs = [{"text": "x", "sentences": ["Paris is the capital of France.", "It has 2,100,000 people.",
                                              "Lyon is a city in France."]},
                  {"text": "y", "sentences": ["France borders Spain.", "The capital, Paris, lies on the Seine."]}]
    return {"id": "7", "title": "France", "sections": [{"title": "", "paragraphs": paragraphs}]}


def write(path, header, rows):
    path.write_text("\t".join(header) + "\n" + "".join("\t".join(map(str, row)) + "\n" for row in rows))
    return path


def test_the_judges_grade_stands_over_the_writers_label(tmp_path):
    questions = write(tmp_path / "questions.tsv", ["article", "question", "answer", "sentence_start"],
                      [["France", "What is the capital of France?", "Paris", "Paris is the capital"],
                       ["France", "How many people live in Paris?", "2,100,000", "It has 2,100,000"],
                       ["France", "What does France border?", "Spain", "France borders Spain"]])
    pools = write(tmp_path / "pools.tsv", judging.POOL_COLUMNS,
                  [["questions.tsv", "France", "What is the capital of France?", "7_0_0 7_0_2"],
                   ["questions.tsv", "France", "How many people live in Paris?", "7_0_1 7_0_0"]])
    deep = write(tmp_path / "pools-deep.tsv", judging.POOL_COLUMNS,
                 [["questions.tsv", "France", "What is the capital of France?", "7_1_1"]])
    first = write(tmp_path / "judgements.tsv", judging.JUDGEMENT_COLUMNS,
                  [["questions.tsv", "France", "How many people live in Paris?", "7_0_1", "It has 2,100,000 people.", 1],
                   ["questions.tsv", "France", "What is the capital of France?", "7_0_0", "Paris is the capital of", 2]])
    second = write(tmp_path / "judgements-deep.tsv", judging.JUDGEMENT_COLUMNS,
                   [["questions.tsv", "France", "What is the capital of France?", "7_1_1", "The capital, Paris, lies", 2]])
    qrels, _, sources = judging.judge_stands(questions, [first, second], [pools, deep], [tiny_article()])
    assert qrels == {"q0001": {"7_0_0": 2, "7_1_1": 2},    # the deeper pool's answer joins the writer's
                     "q0002": {"7_0_1": 1},                # the writer said answers, the judge partly: partly
                     "q0003": {"7_1_0": 2}}                # never pooled: the writer's label stands
    assert {(r["qid"], r["doc"]): r["source"] for r in sources} == {
        ("q0001", "7_0_0"): "writer and judge", ("q0001", "7_1_1"): "judge", ("q0002", "7_0_1"): "judge over writer",
        ("q0003", "7_1_0"): "writer, not pooled"}
    twice = write(tmp_path / "again.tsv", judging.JUDGEMENT_COLUMNS,
                  [["questions.tsv", "France", "What is the capital of France?", "7_0_0", "Paris is the capital of", 1]])
    with pytest.raises(StageError, match="again.tsv: grades 7_0_0 .* an earlier judgements file grades already"):
        judging.judge_stands(questions, [first, twice], [pools], [tiny_article()])


def test_questions_asking_one_fact_are_one_group_and_expose_each_other():
    answers = {"q1": ("France", {judging.normalised_answer("The 2,100,000")}),
               "q2": ("France", {judging.normalised_answer("2100000")}),           # the same string, normalised
               "q3": ("Spain", {"2100000"}),                                        # another article: not by string
               "q4": ("France", {"seine"}), "q5": ("France", {"lyon"})}
    qrels = {"q3": {"s9": 1}, "q4": {"s9": 2}, "q5": {"s1": 2}}                      # q3, q4 share a graded sentence
    groups = judging.fact_groups(answers, qrels)
    assert groups == {"q1": "q1", "q2": "q1", "q3": "q3", "q4": "q3", "q5": "q5"}
    assert judging.unexposed_by_fact(["q2", "q4", "q5"], ["q1", "q3"], groups) == ["q5"]


def test_answer_words_find_an_answer_stated_in_other_words():
    from benchmarks import deeper_pools   # benchmarks/ (pytest's pythonpath)

    def analyze(text):   # Lucene's English analyzer stands in: lower case, no stop words, a crude stem
        return [w.rstrip("s") for w in re.findall(r"\w+", text.lower()) if w not in ("the", "a", "of", "his")]
    words, stated = deeper_pools.answer_words(analyze)
    assert stated(words("The committee voted to use a seven-bit code."), "seven-bit integers")     # half the words
    assert stated(words("He won six of his eight majors on hardcourt."), "eight-time Grand Slam champion")  # a number
    assert stated(words("It uses 7 bits."), "seven")                                                  # digits for words
    assert stated(words("The Chandogya Upanishad mattered most."), "the Upanishads")                  # a stem
    assert not stated(words("He won six of his majors."), "eight-time Grand Slam champion")
    assert not stated(words("The committee voted."), "1,000 integers")


def test_no_answering_sentence_of_the_fresh_audit_went_unjudged():
    """The second audit's sample was drawn after the deeper pools were final: every sentence its auditor found to
    answer was in a pool, so a judge graded it."""
    grades = judging.read_grades(DATA / "audit-deep-2.tsv")
    sample = judging.read_pools(DATA / "audit-deep-2-sample.tsv")
    pooled = judging.pooled_sentences([DATA / "pools.tsv", DATA / "pools-deep.tsv"])
    answering = [(key, doc) for key in sample for doc, grade in grades.get(key, {}).items() if grade == 2]
    missed = [(key, doc) for key, doc in answering if doc not in pooled.get(key, set())]
    assert len(sample) == 40 and len(answering) >= 40
    assert len(missed) / len(answering) < 0.03, missed
