import pytest

from towers.io import StageError
from towers.retrieval.evaluate import evaluate


def test_recall_and_reciprocal_rank_by_hand():
    qrels = {"a": {"d1": 1}, "b": {"d5": 1, "d6": 1}, "c": {"d9": 1}}
    run = {"a": [("d3", 3.0), ("d1", 2.0)], "b": [("d5", 9.0), ("d7", 8.0)]}   # c: no results at all
    result = evaluate(run, qrels, ["a", "b", "c"], ["R@1", "R@5", "RR@10"])
    per = result["per_query"]
    assert per["a"] == {"R@1": 0.0, "R@5": 1.0, "RR@10": 0.5}
    assert per["b"]["R@1"] == 0.5 and per["b"]["RR@10"] == 1.0
    assert per["c"] == {"R@1": 0.0, "R@5": 0.0, "RR@10": 0.0}
    assert result["metrics"] == pytest.approx({"R@1": 0.5 / 3, "R@5": 1.5 / 3, "RR@10": 1.5 / 3})
    assert result["queries"] == 3 and result["queries_missing_from_run"] == 1


def test_only_requested_queries_count():
    qrels = {"a": {"d1": 1}, "b": {"d2": 1}}
    run = {"a": [("d1", 1.0)], "b": [("d0", 1.0)]}
    assert evaluate(run, qrels, ["a"], ["R@1"])["metrics"]["R@1"] == 1.0


def test_unknown_measure_and_unjudged_queries():
    with pytest.raises(StageError, match="unknown measure"):
        evaluate({}, {"a": {"d": 1}}, ["a"], ["Recall@@1"])
    with pytest.raises(StageError, match="none of the evaluated queries"):
        evaluate({}, {"a": {"d": 1}}, ["z"], ["R@1"])


def test_recall_convention_success_counts_a_question_found_by_any_answer():
    # b has two relevant documents and finds one at rank 1: a hit (Success@1 = 1) but half its answers (R@1 = 0.5)
    qrels = {"a": {"d1": 1}, "b": {"d5": 1, "d6": 1}}
    run = {"a": [("d3", 3.0), ("d1", 2.0)], "b": [("d5", 9.0), ("d7", 8.0)]}
    success = evaluate(run, qrels, ["a", "b"], ["R@1", "R@5", "RR@10"], recall="success")
    fraction = evaluate(run, qrels, ["a", "b"], ["R@1", "R@5", "RR@10"], recall="fraction")
    assert success["per_query"]["b"]["R@1"] == 1.0 and fraction["per_query"]["b"]["R@1"] == 0.5
    assert success["metrics"] == pytest.approx({"R@1": 0.5, "R@5": 1.0, "RR@10": 0.75})
    assert fraction["metrics"] == pytest.approx({"R@1": 0.25, "R@5": 0.75, "RR@10": 0.75})
    assert success["computed_as"] == {"R@1": "Success@1", "R@5": "Success@5"} and fraction["computed_as"] == {}
    # one relevant document per question (enwiki-mini): the two conventions give the same numbers
    single = {"a": {"d1": 1}, "b": {"d5": 1}}
    assert evaluate(run, single, ["a", "b"], ["R@1", "R@5"], recall="success")["metrics"] == \
        evaluate(run, single, ["a", "b"], ["R@1", "R@5"])["metrics"]
    with pytest.raises(StageError, match="unknown convention"):
        evaluate(run, qrels, ["a"], ["R@1"], recall="any")


def test_graded_qrels_train_on_answers_and_measure_answers_as_relevant():
    from towers.io import answer_grade, answers_only
    from towers.retrieval.evaluate import evaluate

    graded = {"q": {"partly": 1, "answer": 2}}
    assert answer_grade(graded) == 2 and answers_only(graded) == {"q": {"answer": 1}}
    assert answer_grade({"q": {"a": 1}}) == 1 and answers_only({"q": {"a": 1, "b": 0}}) == {"q": {"a": 1}}
    # per query: a binary query beside judged ones keeps its grade-1 answers (ICT pseudo-queries in one file)
    assert answers_only({**graded, "ict": {"p": 1}}) == {"q": {"answer": 1}, "ict": {"p": 1}}
    run = {"q": [("partly", 2.0), ("answer", 1.0)]}
    result = evaluate(run, graded, ["q"], ["R@1", "RR@10", "nDCG@10"], "success")
    assert result["metrics"]["R@1"] == 0.0 and result["metrics"]["RR@10"] == 0.5
    assert 0.5 < result["metrics"]["nDCG@10"] < 1.0          # the partly answer ranked first still gains
    assert result["computed_as"]["R@1"] == "Success(rel=2)@1"
