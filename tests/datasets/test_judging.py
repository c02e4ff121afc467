"""Pools, two judges' agreement and the writers' labels against the judge (towers.datasets.judging)."""
import pytest

from towers.datasets import judging
from towers.io import StageError


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
