import json

import pytest

from towers.datasets import reqa
from towers.datasets.judging import JUDGEMENT_COLUMNS, judged_qrels
from towers.io import StageError

from conftest import FIXTURES, SHARED_DATA


def test_questions_resolve_to_one_sentence(tiny_articles):
    articles, _ = tiny_articles
    queries, qrels, answers = reqa.resolve_questions(FIXTURES / "tiny-questions.tsv", articles)
    assert len(queries) == 12
    candidates = {c["id"]: c for a in articles for c in reqa.article_candidates(a)}
    for item in answers:
        (doc,) = qrels[item["qid"]]
        assert item["answer"] in candidates[doc]["sentence"]
    first = candidates[answers[0]["candidate"]]
    assert first["sentence"] == "It was designed by the engineer Mara Quill and first lit in 1871."
    assert first["contents"].startswith(first["sentence"] + " ") and first["paragraph"] in first["contents"]


def test_every_sentence_is_a_candidate(tiny_articles):
    articles, _ = tiny_articles
    candidates = [c for a in articles for c in reqa.article_candidates(a)]
    assert len(candidates) == 17 and len({c["id"] for c in candidates}) == 17


def _questions(tmp_path, rows):
    path = tmp_path / "questions.tsv"
    path.write_text("article\tquestion\tanswer\tsentence_start\n" + "".join("\t".join(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("row, message", [
    (("Harbour lighthouse", "When was it lit?", "1872", "It was designed"), r"line 2: answer '1872' not found in article 'Harbour lighthouse'"),
    (("Nowhere", "Where?", "x", "y"), r"line 2: article 'Nowhere' is not in the corpus"),
    (("Port Elwen", "Which day?", "Saturday", "The daily market"), r"line 2: answer 'Saturday' not found"),
])
def test_unresolvable_question_names_file_and_line(tmp_path, tiny_articles, row, message):
    path = _questions(tmp_path, [row])
    with pytest.raises(StageError, match=f"questions.tsv: {message}"):
        reqa.resolve_questions(path, tiny_articles[0])


@pytest.mark.parametrize("again", ["IN WHAT YEAR WAS IT LIT?", "In what year was it lit", "in what year, was it lit ?!",
                                   "In  what year was it lit?"])
def test_a_question_asked_again_in_one_file_names_both_lines(tmp_path, again):
    first = ("Harbour lighthouse", "In what year was it lit?", "1871", "It was designed")
    other = ("Port Elwen", "Which day?", "Saturday", "The weekly market")
    with pytest.raises(StageError, match="questions.tsv: line 4 asks the question of line 2 again"):
        reqa.read_questions(_questions(tmp_path, [first, other, (first[0], again, *first[2:])]))
    # asked of another article it is another question (questions-nq.tsv asks one of two articles)
    assert len(reqa.read_questions(_questions(tmp_path, [first, other, (other[0], again, *first[2:])]))) == 3


def test_ambiguous_locator_is_rejected(tmp_path, tiny_articles):
    # two sentences of the article start with "The" and contain "the"
    path = _questions(tmp_path, [("Harbour lighthouse", "What?", "the", "The")])
    with pytest.raises(StageError, match="ambiguous"):
        reqa.resolve_questions(path, tiny_articles[0])


def test_a_row_may_label_every_sentence_that_answers_it(tmp_path, tiny_articles):
    both = ("Harbour lighthouse", "What is known of the light?", "1871 | whale oil", "It was designed | The lamp burned")
    queries, qrels, answers = reqa.resolve_questions(_questions(tmp_path, [both]), tiny_articles[0])
    candidates = {c["id"]: c["sentence"] for a in tiny_articles[0] for c in reqa.article_candidates(a)}
    assert len(qrels["q0001"]) == 2 and [a["answer"] for a in answers] == ["1871", "whale oil"]
    assert [candidates[a["candidate"]].split()[:2] for a in answers] == [["It", "was"], ["The", "lamp"]]
    for row, message in [((*both[:3], "It was designed"), "line 2: 2 answers but 1 sentence starts"),
                         ((*both[:2], "1871 | 1871", "It was designed | It was"), "line 2: answer .1871. labels a sentence the row labels already")]:
        with pytest.raises(StageError, match=f"questions.tsv: {message}"):
            reqa.resolve_questions(_questions(tmp_path, [row]), tiny_articles[0])


def test_empty_question_set_and_bad_header(tmp_path, tiny_articles):
    with pytest.raises(StageError, match="the question set is empty"):
        reqa.resolve_questions(_questions(tmp_path, []), tiny_articles[0])
    bad = tmp_path / "bad.tsv"
    bad.write_text("q\ta\n")
    with pytest.raises(StageError, match="bad.tsv: header must be"):
        reqa.read_questions(bad)


def test_project_question_set_is_large_and_resolves():
    rows = reqa.read_questions("data/enwiki-mini/questions.tsv")
    assert len(rows) >= 500
    assert len({r["article"] for r in rows}) >= 80
    assert len({r["question"] for r in rows}) == len(rows)


SQUAD = {"version": "1.1", "data": [{"title": "Tiny_Town", "paragraphs": [{
    "context": "Tiny Town lies on a river. It has 300 residents. The mayor is Ann Lee.",
    "qas": [
        {"id": "a", "question": "How many people live in Tiny Town?", "answers": [{"text": "300", "answer_start": 34}]},
        {"id": "b", "question": "Who leads the town?",
         "answers": [{"text": "Ann Lee", "answer_start": 63}, {"text": "river", "answer_start": 20}]},
    ]}]}]}


def test_squad_builder_on_a_hand_made_file(tmp_path):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(SQUAD))
    candidates, queries, qrels = reqa.build_squad(path)
    assert [c["sentence"] for c in candidates] == ["Tiny Town lies on a river.", "It has 300 residents.",
                                                   "The mayor is Ann Lee."]
    assert qrels["a"] == {"0_0_1": 1}
    assert qrels["b"] == {"0_0_2": 1, "0_0_0": 1}   # answers in two sentences: both relevant
    assert candidates[0]["title"] == "Tiny Town"


def test_squad_builder_rejects_other_json(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"rows": []}')
    with pytest.raises(StageError, match="other.json: not a SQuAD JSON file"):
        reqa.build_squad(path)


@pytest.mark.skipif(not (SHARED_DATA / "squad" / "dev-v1.1.json").exists(), reason="real SQuAD dev file not present")
def test_squad_builder_on_the_official_dev_file():
    candidates, queries, qrels = reqa.build_squad(SHARED_DATA / "squad" / "dev-v1.1.json")
    assert len(queries) == 10570
    assert len({c["paragraph"] for c in candidates}) == 2067
    assert 10000 < len(candidates) < 11500
    assert all(qrels[q] for q in queries)


def test_sentence_start_is_the_shortest_locator_that_resolves(tmp_path, tiny_articles):
    articles = tiny_articles[0]
    candidates = [c for c in reqa.article_candidates(articles[0])]
    for c in candidates:
        answer = c["sentence"].split()[-1]
        start = reqa.sentence_start(candidates, c["id"], answer)
        row = (articles[0]["title"], f"Which {c['id']}?", answer, start)
        _, qrels, _ = reqa.resolve_questions(_questions(tmp_path, [row]), articles)
        assert list(qrels["q0001"]) == [c["id"]] and len(start.split()) <= max(5, len(c["sentence"].split()))
    with pytest.raises(ValueError, match="is not in sentence"):
        reqa.sentence_start(candidates, candidates[0]["id"], "no such words")


def _judgements(tmp_path, rows, name="tiny-questions.tsv"):
    path = tmp_path / "judgements.tsv"
    path.write_text("\t".join(JUDGEMENT_COLUMNS) + "\n" + "".join("\t".join((name, *r)) + "\n" for r in rows))
    return path


def test_judgements_grade_pooled_sentences_beside_the_label(tmp_path, tiny_articles):
    articles = tiny_articles[0]
    questions = FIXTURES / "tiny-questions.tsv"
    queries, qrels, answers = reqa.resolve_questions(questions, articles)
    sentences = {c["id"]: c["sentence"] for a in articles for c in reqa.article_candidates(a)}
    labelled = next(iter(qrels["q0001"]))
    other = next(c for c in sentences if c != labelled)
    asked = ("Harbour lighthouse", "in what year was the harbour light first switched on")   # case, "?" aside
    rows = [(*asked, other, sentences[other][:20], "1"), (*asked, labelled, sentences[labelled][:12], "2")]
    graded, counts = judged_qrels(questions, _judgements(tmp_path, rows), articles, qrels, answers, queries)
    assert graded["q0001"] == {labelled: 2, other: 1} and graded["q0002"] == {next(iter(qrels["q0002"])): 2}
    assert counts == {"judged_questions": 1, "answers_added": 0, "partly": 1}
    # a judgement of another question file is not this one's: a file no row judges is refused, not left unjudged
    (tmp_path / "other.tsv").write_text("article\tquestion\tanswer\tsentence_start\n")
    with pytest.raises(StageError, match="judgements.tsv: no row judges tiny-questions.tsv .its questions column "
                                         "names other.tsv."):
        judged_qrels(questions, _judgements(tmp_path, rows, "other.tsv"), articles, qrels, answers, queries)
    for bad, message in [((*asked, other, "Not its words", "1"), "is not the one starting 'Not its words'"),
                         ((*asked, other, sentences[other][:5], "3"), "grade must be 2 .answers. or 1 .partly."),
                         (("Port Elwen", "Who asked this?", other, sentences[other][:5], "2"), "which .* does not ask")]:
        with pytest.raises(StageError, match=f"judgements.tsv: .*{message}"):
            judged_qrels(questions, _judgements(tmp_path, [bad]), articles, qrels, answers, queries)
