"""Pretrained checkpoints as model folders (towers.modeling.checkpoint): settings read from a sentence-transformers
layout or defaulted for a plain HF folder, overrides, one-line errors, and encodings equal to
sentence-transformers' own on a small random checkpoint (prompts, lower-casing and [CLS] pooling included)."""
import json

import numpy as np
import pytest

from towers.modeling.checkpoint import convert, read_settings, resolve
from towers.io import StageError
from towers.modeling.models import TwoTower, random_encoder, text_options
from towers.retrieval.encode import encode
from towers.modeling.tokenizer import train_wordpiece

TEXTS = ["The Harbour Light was first lit in 1871.", "Whale oil burned in the lamp until 1902.",
         "A keeper lived in the cottage beside the tower.", "Fishing boats return to Port Elwen at dusk."]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}


@pytest.fixture
def st_folder(tmp_path):
    """A random 1-layer BERT in sentence-transformers layout: [CLS] pooling, Normalize, prompts, do_lower_case,
    over a cased tokenizer (so lower-casing shows)."""
    train_wordpiece(TEXTS * 3, tmp_path / "tok", vocab_size=150, min_frequency=1, lowercase=False)
    folder = tmp_path / "st"
    random_encoder(tmp_path / "tok", folder, ARCH, seed=3)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling/config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                              "pooling_mode_cls_token": True,
                                                              "pooling_mode_mean_tokens": False}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24, "do_lower_case": True}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: ", "document": "passage: "}, "default_prompt_name": None,
         "similarity_fn_name": "cosine"}))
    return folder


def test_settings_come_from_the_sentence_transformers_config(st_folder):
    transformer, found = read_settings(st_folder)
    assert transformer == st_folder
    assert {k: v for k, (v, _) in found.items()} == {"pooling": "cls", "normalize": True, "max_length": 24,
                                                      "lowercase": True, "query_prefix": "query: ",
                                                      "doc_prefix": "passage: "}
    assert found["pooling"][1] == "1_Pooling/config.json"


def test_converted_checkpoint_encodes_as_sentence_transformers_does(st_folder, tmp_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    config = convert(str(st_folder), tmp_path / "model", "sentence", {})
    assert config["doc_length"] == config["query_length"] == 24 and config["shared"] and config["embedding_dim"] == 0
    model, tokenizer = TwoTower.load(tmp_path / "model")
    reference = sentence_transformers.SentenceTransformer(str(st_folder), device="cpu")
    for kind, prompt in (("query", "query"), ("doc", "document")):
        mine = encode(model.query if kind == "query" else model.doc, tokenizer, TEXTS, kind, 24, 2, desc=None,
                      **text_options(model.config, kind))
        theirs = reference.encode(TEXTS, prompt_name=prompt, convert_to_numpy=True)
        assert np.abs(mine - theirs).max() < 1e-5
    # the prompt and lower-casing matter: without them the vectors differ
    plain = encode(model.doc, tokenizer, TEXTS, "doc", 24, 2, desc=None)
    assert np.abs(plain - reference.encode(TEXTS, prompt_name="document", convert_to_numpy=True)).max() > 1e-4


def test_params_override_the_checkpoint_and_a_plain_hf_folder_gets_defaults(st_folder, tmp_path):
    config = convert(str(st_folder), tmp_path / "a", "contents", {"pooling": "mean", "doc_length": 16,
                                                                  "query_prefix": ""})
    assert (config["pooling"], config["doc_length"], config["query_prefix"]) == ("mean", 16, "")
    assert config["checkpoint"]["read_from"]["pooling"] == "params" and config["doc_prefix"] == "passage: "
    for name in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        (st_folder / name).unlink()
    config = convert(str(st_folder), tmp_path / "b", "sentence", {})
    assert (config["pooling"], config["normalize"], config["doc_length"]) == ("cls", False, 64)
    assert config["checkpoint"]["read_from"]["pooling"].startswith("default")


def test_unusable_checkpoints_are_one_line_errors(st_folder, tmp_path):
    with pytest.raises(StageError, match="package 'no_such_model_pkg' is not installed"):
        resolve("package:no_such_model_pkg")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StageError, match="no config.json"):
        resolve(str(tmp_path / "empty"))
    pooling = st_folder / "1_Pooling/config.json"
    pooling.write_text(json.dumps({"pooling_mode_max_tokens": True}))
    with pytest.raises(StageError, match="1_Pooling/config.json: pooling max is not supported"):
        convert(str(st_folder), tmp_path / "c", "sentence", {})
    with pytest.raises(StageError, match="must be within 1..64"):   # params' pooling overrides; the length is too long
        convert(str(st_folder), tmp_path / "c", "sentence", {"pooling": "mean", "doc_length": 500})
    assert not (tmp_path / "c").exists()
