"""towers.plan.datasets: which dataset serves another, how deep runs go, the patterns that give each dataset to its
builder."""

from plan_configs import mini_plan, paper_plan, profile_configs
import re
from types import SimpleNamespace as W

import pytest


def test_a_passage_datasets_runs_go_to_repbert_depth_and_every_other_to_the_default():
    mini = mini_plan()
    configs = profile_configs()
    depth = configs["mini"]["repbert"]["depth"]
    assert mini.data.run_depth("enwiki-mini-passages", 17) == depth
    assert mini.data.run_depth("enwiki-mini", 17) == 17 and mini.data.run_depth("enwiki-mini-open", 19) == 19
    assert mini.bm25.search_depth(W(dataset="enwiki-mini-passages")) == depth
    assert mini.dense.search_depth(W(dataset="enwiki-mini")) == configs["mini"]["faiss"]["depth"]


def test_a_graded_set_is_searched_with_its_bases_models_and_candidates():
    paper = paper_plan()
    assert paper.data.base_of("msmarco-dl19") == paper.data.corpus_of("msmarco-dl19") == "msmarco-passage"
    assert paper.data.questions_of("msmarco-dl19") == "msmarco-dl19"
    assert paper.data.run_depth("msmarco-dl19", 17) == paper.config["repbert"]["depth"]


def test_an_open_domain_set_takes_its_bases_models_and_questions_and_searches_its_own_candidates():
    mini = mini_plan()
    assert mini.data.base_of("enwiki-mini-open") == mini.data.questions_of("enwiki-mini-open") == "enwiki-mini"
    assert mini.data.corpus_of("enwiki-mini-open") == "enwiki-mini-open"


def test_each_dataset_goes_to_one_builder():
    mini = mini_plan()
    data = mini.data
    patterns = {"reqa": data.only_reqa, "reqa_open": data.only_open, "passages": data.only_passages}
    builders = {name: [rule for rule, pattern in patterns.items() if re.fullmatch(pattern, name)]
                for name in mini.config["datasets"]}
    assert builders == {"enwiki-mini": ["reqa"], "enwiki-mini-nq": ["reqa"], "squad": ["reqa"], "enwiki-extra": ["reqa"],
                        "enwiki-mini-open": ["reqa_open"], "enwiki-mini-nq-open": ["reqa_open"],
                        "enwiki-mini-passages": ["passages"]}
    assert re.fullmatch(data.not_parted_wiki, "enwiki-extra") and data.parted_wiki == []


def test_a_passage_datasets_command_names_its_stage_and_every_setting():
    mini = mini_plan()
    command = mini.data.passage_command(W(dataset="enwiki-mini-passages"))
    assert command.startswith("passages-wiki --ict-queries ")
    assert " --test-questions data/enwiki-mini/questions-nq.tsv " in command
    assert mini.data.passage_inputs(W(dataset="enwiki-mini-passages"))["test_questions"] == \
        "data/enwiki-mini/questions-nq.tsv"
    assert mini.data.passage_listing(W(dataset="enwiki-mini-passages")) == ""
    with pytest.raises(ValueError, match="not a passage dataset"):
        mini.data.passage_inputs(W(dataset="enwiki-mini"))


def test_a_download_is_checked_or_refused():
    paper = paper_plan()
    name = paper.config["datasets"]["msmarco-passage"]["files"][0]["name"]
    assert paper.data.download_check("msmarco-passage", name).startswith(("--sha256 ", "--md5 "))
    with pytest.raises(ValueError, match="no file named"):
        paper.data.file_spec("msmarco-passage", "nothing.tsv")


def test_a_passage_sets_tables_name_the_question_set_its_test_queries_come_from():
    plan = mini_plan()
    assert plan.evaluation.evaluation_queries("enwiki-mini-passages") == "0.6 of questions-nq.tsv, the rest training"
