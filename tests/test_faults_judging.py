"""Bad input to the enwiki-mini judging that used to get through (issue 68): judgements keyed by a question file's
name, twins by an invisible character, grades off the scale, a question pooled twice, a byte-order mark read as
part of the header, and tracebacks from benchmarks/judged_qrels.py. Each is refused in one line naming the file
(and line), or handled."""
import shutil

import pytest

from benchmarks import judged_qrels   # benchmarks/ (pytest's pythonpath)
from towers.datasets import judging, reqa
from towers.datasets.splits import cold_start_split, question_key
from towers.io import StageError

from conftest import FIXTURES

GRADE = "grade must be 2 (answers) or 1 (partly)"


def tiny_judged(questions, judgements, articles):
    queries, qrels, answers = reqa.resolve_questions(questions, articles)
    return judging.judged_qrels(questions, judgements, articles, qrels, answers, queries)


def tsv(path, header: list[str], rows: list[tuple], bom: str = ""):
    path.write_text(bom + "\t".join(header) + "\n" + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


# 1. judgements matched by the question file's name: a renamed copy, or a typo in the column, dropped them all

def test_the_tiny_judgements_grade_two_questions(tiny_articles):
    counts = tiny_judged(FIXTURES / "tiny-questions.tsv", FIXTURES / "tiny-judgements.tsv", tiny_articles[0])[1]
    assert counts == {"judged_questions": 2, "answers_added": 0, "partly": 2}


def test_a_renamed_question_file_is_refused_not_left_unjudged(tmp_path, tiny_articles):
    for name in ("tiny-questions.tsv", "tiny-judgements.tsv"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    renamed = shutil.copy(FIXTURES / "tiny-questions.tsv", tmp_path / "copy.tsv")
    with pytest.raises(StageError) as caught:
        tiny_judged(renamed, tmp_path / "tiny-judgements.tsv", tiny_articles[0])
    assert str(caught.value) == (f"{tmp_path / 'tiny-judgements.tsv'}: no row judges copy.tsv (its questions column "
                                 "names tiny-questions.tsv): a renamed question file finds no judgements; use the "
                                 "name its rows give")


def test_a_question_file_name_no_file_has_is_refused_with_its_line(tmp_path, tiny_articles):
    rows = (FIXTURES / "tiny-judgements.tsv").read_text().splitlines(keepends=True)
    typo = tmp_path / "judgements.tsv"
    typo.write_text("".join(rows[:2]) + rows[2].replace("tiny-questions.tsv", "tiny-qeustions.tsv") + "".join(rows[3:]))
    questions = FIXTURES / "tiny-questions.tsv"
    with pytest.raises(StageError) as caught:
        tiny_judged(questions, typo, tiny_articles[0])
    assert str(caught.value) == (f"{typo}: line 3: questions 'tiny-qeustions.tsv' names no question file (none "
                                 f"beside this file or {questions})")


def test_rows_of_another_question_file_beside_it_are_skipped(tmp_path, tiny_articles):
    (tmp_path / "other.tsv").write_text("article\tquestion\tanswer\tsentence_start\n")
    rows = (FIXTURES / "tiny-judgements.tsv").read_text()
    mixed = tmp_path / "judgements.tsv"
    mixed.write_text(rows + "other.tsv\tNo such article\tNot asked here?\t99_0_0\tNowhere\t2\n")
    questions = FIXTURES / "tiny-questions.tsv"
    assert tiny_judged(questions, mixed, tiny_articles[0]) == tiny_judged(questions, FIXTURES / "tiny-judgements.tsv",
                                                                          tiny_articles[0])


# 2. twins by an invisible character: question_key kept format characters the tokenizer drops

@pytest.mark.parametrize("mark", ["\u200b", "\u00ad", "\u200d", "\ufeff"])
def test_a_twin_by_a_format_character_is_one_question(tmp_path, mark):
    from tokenizers import BertWordPieceTokenizer

    plain, twin = "Who built the tower?", f"Who bu{mark}ilt the tow{mark}er?"
    normalise = BertWordPieceTokenizer(lowercase=True)._tokenizer.normalizer.normalize_str
    assert normalise(twin) == normalise(plain)                       # the model reads one text
    assert question_key(twin) == question_key(plain) == "who built the tower"
    # within a set: the duplicate check sees it
    questions = tsv(tmp_path / "questions.tsv", reqa.QUESTION_COLUMNS,
                    [("Tower", plain, "Ann", "Ann built it"), ("Tower", twin, "Ann", "Ann built it")])
    with pytest.raises(StageError, match=f"^{questions}: line 3 asks the question of line 2 again .same article.$"):
        reqa.read_questions(questions)
    # across sets: the twin of a trained question trains too
    later = {f"n{i}": f"question number {i}" for i in range(20)} | {"twin": twin}
    for seed in range(10):
        parts = cold_start_split(later, 0.2, 0.0, seed, frozenset({question_key(plain)}))
        assert "twin" in parts["train"] and "twin" not in parts["test"]


# 3. grades off the scale (JUDGING.md: a judgements file lists 2 and 1; unlisted is 0), a question pooled twice

@pytest.mark.parametrize("grade", ["7", "0", "-1", "two"])
def test_a_grade_off_the_scale_is_refused_with_its_line(tmp_path, grade):
    path = tsv(tmp_path / "judgements.tsv", judging.JUDGEMENT_COLUMNS,
               [("questions.tsv", "A", "q", "1_0_0", "It", "2"), ("questions.tsv", "A", "q", "1_0_1", "It", grade)])
    with pytest.raises(StageError) as caught:
        judging.read_grades(path)
    assert str(caught.value) == f"{path}: line 3: {GRADE}, not {grade!r}"


def test_a_sentence_judged_twice_names_both_lines(tmp_path):
    path = tsv(tmp_path / "judgements.tsv", judging.JUDGEMENT_COLUMNS,
               [("questions.tsv", "A", "Q?", "1_0_0", "It", "2"), ("questions.tsv", "A", "q", "1_0_0", "It", "1")])
    with pytest.raises(StageError) as caught:
        judging.read_grades(path)
    assert str(caught.value) == f"{path}: line 3: sentence 1_0_0 is judged twice for this question (line 2 too)"


def test_a_question_pooled_twice_is_refused_naming_both_lines(tmp_path):
    path = tsv(tmp_path / "pools.tsv", judging.POOL_COLUMNS,
               [("questions.tsv", "A", "Who?", "1_0_0 1_0_1"), ("questions.tsv", "B", "Who?", "2_0_0"),
                ("questions.tsv", "A", "who", "1_0_2")])
    with pytest.raises(StageError) as caught:
        judging.read_pools(path)
    assert str(caught.value) == f"{path}: line 4 pools the question of line 2 again (same question file and article)"


# 4. a byte-order mark: pools.tsv's header, read right, was refused as wrong

def test_files_with_a_byte_order_mark_are_read(tmp_path):
    pools = tsv(tmp_path / "pools.tsv", judging.POOL_COLUMNS, [("questions.tsv", "A", "Who?", "1_0_0 1_0_1")],
                bom="\ufeff")
    assert judging.read_pools(pools) == {("questions.tsv", "A", "who"): ["1_0_0", "1_0_1"]}
    grades = tsv(tmp_path / "judgements.tsv", judging.JUDGEMENT_COLUMNS, [("questions.tsv", "A", "Who?", "1_0_0",
                                                                          "It", "2")], bom="\ufeff")
    assert judging.read_grades(grades) == {("questions.tsv", "A", "who"): {"1_0_0": 2}}
    questions = tsv(tmp_path / "questions.tsv", reqa.QUESTION_COLUMNS, [("A", "Who?", "Ann", "Ann did")], bom="\ufeff")
    assert [q["article"] for q in reqa.read_questions(questions)] == ["A"]


# 5. benchmarks/judged_qrels.py: a bad grade, or no build, ended in a traceback

def test_the_benchmark_says_a_bad_grade_in_one_line(tmp_path, monkeypatch):
    tsv(tmp_path / "pools.tsv", judging.POOL_COLUMNS, [("questions.tsv", "A", "q", "1_0_0")])
    tsv(tmp_path / "judgements.tsv", judging.JUDGEMENT_COLUMNS, [("questions.tsv", "A", "q", "1_0_0", "It", "7")])
    shutil.copy(tmp_path / "judgements.tsv", tmp_path / "judgements-second.tsv")
    monkeypatch.setattr(judged_qrels, "DATA", tmp_path)
    with pytest.raises(SystemExit) as ended:
        judged_qrels.main(["--no-record"])
    assert ended.value.code == f"error: {tmp_path / 'judgements.tsv'}: line 2: {GRADE}, not '7'"


def test_a_second_judgement_of_an_unpooled_question_is_one_line(tmp_path, monkeypatch):
    tsv(tmp_path / "pools.tsv", judging.POOL_COLUMNS, [("questions.tsv", "A", "q", "1_0_0")])
    tsv(tmp_path / "judgements.tsv", judging.JUDGEMENT_COLUMNS, [("questions.tsv", "A", "q", "1_0_0", "It", "2")])
    tsv(tmp_path / "judgements-second.tsv", judging.JUDGEMENT_COLUMNS,
        [("questions.tsv", "A", "r", "1_0_0", "It", "2")])
    monkeypatch.setattr(judged_qrels, "DATA", tmp_path)
    with pytest.raises(SystemExit) as ended:
        judged_qrels.main(["--no-record"])
    assert ended.value.code == (f"error: {tmp_path / 'judgements-second.tsv'}: judges 1 question(s) no pool lists, "
                                "e.g. 'r' of 'A' (questions.tsv)")


def test_the_benchmark_says_a_missing_build_in_one_line(tmp_path):
    with pytest.raises(SystemExit) as ended:
        judged_qrels.main(["--no-record", "--build", str(tmp_path)])
    assert ended.value.code == (f"error: {tmp_path / 'artifacts/enwiki-mini/corpus/articles.jsonl'}: not built; run `make "
                                "reproduce` (or .venv/bin/snakemake artifacts/enwiki-mini/corpus/articles.jsonl "
                                "--cores 1)")
