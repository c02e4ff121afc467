import json

import pytest

from towers.datasets import overlap

from conftest import FIXTURES


def test_content_words_drop_stopwords_case_and_punctuation():
    assert overlap.content_words("When was the Harbour lighthouse first lit?") == {"harbour", "lighthouse", "first", "lit"}
    assert overlap.content_words("Who founded Aristotle's Lyceum?") == {"founded", "aristotle", "lyceum"}
    assert overlap.content_words("what is it") == set()


def test_overlap_is_the_share_of_distinct_content_words_found():
    sentence = "The lighthouse was first lit in 1871."
    assert overlap.overlap("When was the lighthouse first lit?", sentence) == 1.0
    assert overlap.overlap("when did the harbour light start working", sentence) == 0.0
    # distinct words: "lighthouse" twice counts once; 2 of {lighthouse, lit, harbour, keeper} found
    assert overlap.overlap("lighthouse lighthouse lit harbour keeper", sentence) == 0.5
    assert overlap.overlap("what is it", sentence) is None


def test_overlap_stats_counts_questions_without_content_words_apart():
    stats = overlap.overlap_stats([("lighthouse lit", "The lighthouse was lit."), ("harbour keeper", "The lighthouse."),
                                   ("what is it", "anything")])
    assert stats["questions"] == 3 and stats["scored"] == 2 and stats["no_content_words"] == 1
    assert stats["mean"] == 0.5 and stats["all_found"] == 0.5 and stats["none_found"] == 0.5
    with pytest.raises(ValueError):
        overlap.overlap_stats([("what is it", "anything")])


def test_overlap_without_the_title_words():
    items = [("when was the harbour lighthouse first lit", "The lighthouse was lit in 1871.", "Harbour lighthouse"),
             ("harbour lighthouse", "The lighthouse.", "Harbour lighthouse")]
    plain = overlap.overlap_stats(items)                             # {lighthouse, lit} of 4; {lighthouse} of 2
    assert plain["scored"] == 2 and plain["mean"] == 0.5 and plain["content_words_per_question"] == 3.0
    topic_free = overlap.overlap_stats(items, drop_title=True)       # {first, lit}: 1 of 2; the second: nothing left
    assert topic_free["scored"] == 1 and topic_free["no_content_words"] == 1 and topic_free["mean"] == 0.5


def test_question_lengths():
    assert overlap.question_lengths(["who built the tower", "what is it"]) == {
        "questions": 2, "content_words_per_question": 1.0, "words_per_question": 3.5}


def test_question_set_pairs_use_the_builds_resolution(tiny_articles):
    articles, _ = tiny_articles
    pairs = overlap.question_set_pairs(FIXTURES / "tiny-questions.tsv", articles)
    assert len(pairs) == 12
    assert pairs[0][1] == "It was designed by the engineer Mara Quill and first lit in 1871."
    assert pairs[0][2] == "Harbour lighthouse"
    assert 0.0 <= overlap.overlap_stats(pairs)["mean"] <= 1.0


def test_squad_pairs_take_the_sentence_of_the_first_answer(tmp_path):
    context = "The tower is old. It was built in 1850 by Ann Roe. Tourists visit it."
    squad = {"version": "1.1", "data": [{"title": "Tower", "paragraphs": [{"context": context, "qas": [
        {"id": "q1", "question": "Who built the tower?", "answers": [
            {"text": "Ann Roe", "answer_start": context.index("Ann Roe")},
            {"text": "old", "answer_start": context.index("old")}]}]}]}]}
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(squad))
    assert overlap.squad_pairs(path) == [("Who built the tower?", "It was built in 1850 by Ann Roe.", "Tower")]
