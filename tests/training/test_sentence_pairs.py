"""Issue 54: MLM + NSP pre-training builds its sentence pairs from each sentence's ids, tokenised once a run, and pads
and masks them without the tokenizer's padding of lists (mlm.SentencePairs, mlm.masked_batch): the tensors, and so
the losses, of tokenising every pair in its step and collating it."""
import json

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertForPreTraining, DataCollatorForLanguageModeling

from towers.modeling.models import small_bert_config
from towers.training.settings import MaskedLM
from towers.training import loop, mlm

from conftest import lighthouse_world

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i} by keeper {i % 5}."
         for i in range(40)]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = lighthouse_world(tmp_path_factory.mktemp("pairs"), TEXTS, {"hidden": 32, "layers": 1, "heads": 2,
                                                                      "intermediate": 64, "max_positions": 64}, 30)
    return AutoTokenizer.from_pretrained(root / "tok")


def test_a_pair_is_cut_as_the_tokenizer_cuts_it_longest_first(tok):
    """Every pair of lengths 0-14 (one token a word) at max_length 4 to 13: the ids and segments of the tokenizer's
    own pair call (tokenizers' truncation.rs: the shorter whole, or both halves, the longer taking the odd one)."""
    word = next(w for w in ("lighthouse", "pier", "the", "keeper")
                if len(tok(w, add_special_tokens=False)["input_ids"]) == 1)
    other = next(w for w in ("pier", "keeper", "stands") if w != word
                 and len(tok(w, add_special_tokens=False)["input_ids"]) == 1)
    texts = {n: " ".join([word] * n) for n in range(15)}
    seconds = {n: " ".join([other] * n) for n in range(15)}
    for max_length in range(4, 14):
        pairs = mlm.SentencePairs.of(tok, max_length, (texts[3], seconds[5]))
        assert pairs is not None
        firsts = [texts[a] for a in range(15) for _ in range(15)]
        second = [seconds[b] for _ in range(15) for b in range(15)]
        called = tok(firsts, second, truncation="longest_first", max_length=max_length)
        built = pairs(firsts, second)
        assert built["input_ids"] == called["input_ids"] and built["token_type_ids"] == called["token_type_ids"]
    assert mlm.kept_lengths(9, 2, 6) == (4, 2) and mlm.kept_lengths(5, 9, 6) == (3, 3)
    assert mlm.kept_lengths(6, 6, 7) == (3, 4) and mlm.kept_lengths(2, 3, 9) == (2, 3)


def test_pairs_padded_and_masked_here_are_the_collators(tok):
    """masked_batch over SentencePairs against the tokenizer's pair call then the collator, the same torch seed:
    pairs cut (max_length 16) and not (64), sentences repeated (read back from the ids kept), and MLM's blocks."""
    collator = DataCollatorForLanguageModeling(tok, mlm_probability=0.15, return_tensors="pt")
    rng = np.random.default_rng(0)
    sentences = TEXTS + [" ".join(TEXTS[:3]), "", "pier"]
    for max_length in (16, 64):
        pairs = mlm.SentencePairs.of(tok, max_length, (sentences[0], sentences[1]))
        for seed in range(6):
            firsts, seconds = ([sentences[i] for i in rng.integers(0, len(sentences), 24)] for _ in range(2))
            encoded = tok(firsts, seconds, truncation="longest_first", max_length=max_length)
            torch.manual_seed(seed)
            expected = collator([{"input_ids": i, "token_type_ids": t}
                                 for i, t in zip(encoded["input_ids"], encoded["token_type_ids"])])
            torch.manual_seed(seed)
            got = mlm.masked_batch(collator, tok, pairs(firsts, seconds))
            assert list(got) == list(expected) and all(torch.equal(got[k], expected[k]) for k in got)
            assert (got["labels"] != -100).any()
    blocks = mlm.chunk_corpus(TEXTS, tok, 12)
    torch.manual_seed(1)
    expected = collator([{"input_ids": b} for b in blocks])
    torch.manual_seed(1)
    got = mlm.masked_batch(collator, tok, {"input_ids": blocks})
    assert list(got) == list(expected) and all(torch.equal(got[k], expected[k]) for k in got)


def test_another_pair_template_is_tokenised_pair_by_pair(tok, tmp_path):
    from tokenizers.processors import TemplateProcessing

    tok.save_pretrained(tmp_path / "tok")
    other = AutoTokenizer.from_pretrained(tmp_path / "tok")
    cls, sep = other.cls_token_id, other.sep_token_id
    other.backend_tokenizer.post_processor = TemplateProcessing(   # RoBERTa's: two separators between the texts
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    assert mlm.SentencePairs.of(other, 32, (TEXTS[0], TEXTS[1])) is None
    assert mlm.SentencePairs.of(tok, 32, (TEXTS[0], TEXTS[1])) is not None


def test_mlm_and_nsp_take_the_steps_they_took_tokenising_each_pair(tok, tmp_path, monkeypatch):
    """pretrain with the pairs built here against pretrain with SentencePairs.of giving None (each pair tokenised
    and collated in its step): the same step losses, to the bit."""
    paragraphs = [TEXTS[i:i + 4] for i in range(0, 40, 4)]
    settings = MaskedLM(steps=5, batch_size=8, lr=1e-3, warmup_ratio=0.2, checkpoint_every=5, max_length=24)

    def losses(name: str) -> list[float]:
        torch.manual_seed(0)
        model = BertForPreTraining(small_bert_config(len(tok), 32, 1, 2, 64, 64))
        run = loop.Run(3, tmp_path / f"{name}.state", tmp_path / f"{name}.jsonl")
        mlm.pretrain(model, tok, TEXTS, settings, run, {"arch": "tiny"}, paragraphs=paragraphs)
        return [json.loads(line)["loss"] for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]

    built = losses("built")
    monkeypatch.setattr(mlm.SentencePairs, "of", classmethod(lambda cls, *_: None))
    assert losses("tokenised") == built and len(built) == 5
