"""towers.plan.training: the encoders and tokenizer a dataset reuses (its text home, towers.plan.datasets); Chang et
al.'s model names both ways and where their towers start (towers.plan.chang2020)."""

from plan_configs import mini_plan
import re
from types import SimpleNamespace as W

import pytest


def test_chang_model_names_are_built_and_read_back():
    mini = mini_plan()
    chang = mini.chang2020
    assert chang.model("transformer", "ict+bfs+wlp", 128) == "transformer-ict+bfs+wlp-l2-d128"
    assert chang.model("transformer", "ict", 32, layers=1) == "transformer-ict-l1-d32"
    assert chang.model("bowmlp", "none", 128) == "bowmlp-none-d128"
    assert chang.parse_model("transformer-ict+bfs+wlp-l2-d128") == {
        "arch": "transformer", "pretraining": "ict+bfs+wlp", "tasks": ["ict", "bfs", "wlp"], "layers": 2, "dim": 128}
    assert chang.parse_model("bowmlp-none-d64")["layers"] is None
    assert all(re.fullmatch(chang.model_re, chang.model(*m)) for m in [("transformer", "mlm", 8), ("bowmlp", "bfs", 4)])
    with pytest.raises(ValueError, match="unknown pre-training"):
        chang.parse_model("transformer-xyz-l2-d128")
    with pytest.raises(ValueError, match="MLM exists for the transformer of encoder.layers only"):
        chang.parse_model("transformer-mlm-l1-d128")


def test_fine_tuning_starts_from_pretrained_towers_or_an_encoder():
    mini = mini_plan()
    corpus = mini.config["chang2020"]["pretraining"]["corpus"]
    start = mini.chang2020.start
    assert start(W(dataset="enwiki-mini", model="transformer-none-l2-d128")) == "artifacts/enwiki-mini/encoders/random-l2"
    assert start(W(dataset="enwiki-mini", model="transformer-mlm-l2-d128")) == "artifacts/enwiki-mini/encoders/mlm"
    assert start(W(dataset="enwiki-mini", model="bowmlp-ict-d128")) == \
        f"artifacts/{corpus}/pretrained/bowmlp-ict-d128/model"
    assert mini.chang2020.pretraining_pairs(W(dataset="d", model="transformer-ict+wlp-l2-d128")) == [
        "artifacts/d/pairs/ict.jsonl", "artifacts/d/pairs/wlp.jsonl"]
    towers = mini.chang2020.towers("bowmlp-none-d64")
    assert "--pooling mean " in towers and "--embedding-dim 64 " in towers and towers.endswith("--head mlp")


def test_a_passage_set_of_wikipedia_reuses_its_articles_mlm_encoder():
    mini = mini_plan()
    assert mini.train.mlm_encoder(W(dataset="enwiki-mini-passages")) == "artifacts/enwiki-mini/encoders/mlm"
    assert mini.train.mlm_encoder(W(dataset="enwiki-mini")) == "artifacts/enwiki-mini/encoders/mlm"


def test_a_second_question_set_over_the_same_articles_shares_their_tokenizer_encoders_and_parse():
    mini = mini_plan()
    train, data, chang, datasets = mini.train, mini.data, mini.chang2020, mini.config["datasets"]
    assert data.text_home("enwiki-mini-nq") == "enwiki-mini" and train.tokenizer("enwiki-mini-nq") == \
        "artifacts/enwiki-mini/tokenizer"
    assert train.encoder("enwiki-mini-nq", "mlm-nsp") == "artifacts/enwiki-mini/encoders/mlm-nsp"
    assert chang.init("enwiki-mini-nq", chang.parse_model("transformer-none-l1-d32")) == \
        "artifacts/enwiki-mini/encoders/random-l1"
    # the same articles, so the same candidates: one parse, and one encoding of them by an untrained checkpoint
    assert mini.data.reqa_inputs(W(dataset="enwiki-mini-nq"))["articles"] == "artifacts/enwiki-mini/corpus/articles.jsonl"
    shared = mini.dense.dense_files("enwiki-mini-nq", "ckpt-minilm", "80-20", "flat")
    assert shared["index"] == "artifacts/enwiki-mini/dense/ckpt-minilm/all/index-flat.faiss"
    assert shared["model"] == "artifacts/enwiki-mini-nq/dense/ckpt-minilm/all/model"
    trained = mini.dense.dense_files("enwiki-mini-nq", "transformer-none-l2-d128", "80-20", "flat")   # fine-tuned apart
    assert trained["index"] == "artifacts/enwiki-mini-nq/dense/transformer-none-l2-d128/80-20/index-flat.faiss"
    passages = mini.dense.dense_files("enwiki-mini-passages", "ckpt-minilm", "dev", "flat")   # passages: other candidates
    assert passages["index"] == "artifacts/enwiki-mini-passages/dense/ckpt-minilm/dev/index-flat.faiss"
    datasets["enwiki-mini-nq"]["max_articles"] = 50      # other text: its own
    assert data.text_home("enwiki-mini-nq") == "enwiki-mini-nq"
    assert mini.dense.dense_files("enwiki-mini-nq", "ckpt-minilm", "all", "flat")["index"].startswith(
        "artifacts/enwiki-mini-nq/")
    assert data.text_home("squad") == "squad"
