import pytest

from towers.evaluate import evaluate
from towers.io import StageError


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
