"""Masked-LM pre-training of a small BERT (Chang et al.'s "MLM" baseline), optionally with Next
Sentence Prediction (BERT's second task; QuadrupletBERT pre-trains every tower on the downstream
text with both)."""
from __future__ import annotations

import numpy as np
import torch
from transformers import BertForMaskedLM, BertForPreTraining, DataCollatorForLanguageModeling

from ..modeling.models import small_bert_config
from ..modeling.tokens import MEMO_LIMIT, pad_ids_of, pad_right
from .settings import MaskedLM
from . import distributed, loop


def chunk_corpus(texts: list[str], tokenizer, max_length: int) -> list[list[int]]:
    """Concatenate tokenised paragraphs and cut them into max_length blocks with [CLS] ... [SEP]."""
    body = max_length - 2
    stream: list[int] = []
    for text in texts:
        stream.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
    blocks = [stream[i:i + body] for i in range(0, len(stream) - body + 1, body)] or [stream]
    return [[tokenizer.cls_token_id] + block + [tokenizer.sep_token_id] for block in blocks]


def next_sentence_batch(paragraphs: list[list[str]], positions: list[tuple[int, int]], picks, rng):
    """BERT's NSP examples: sentence i and, half of the time, sentence i+1 of the same paragraph
    (label 0), otherwise a sentence of another paragraph (label 1)."""
    firsts, seconds, labels = [], [], []
    for k in picks:
        p, i = positions[k]
        if rng.random() < 0.5:
            second, label = paragraphs[p][i + 1], 0
        else:
            other = (p + 1 + int(rng.integers(len(paragraphs) - 1))) % len(paragraphs)
            second, label = paragraphs[other][int(rng.integers(len(paragraphs[other])))], 1
        firsts.append(paragraphs[p][i])
        seconds.append(second)
        labels.append(label)
    return firsts, seconds, torch.tensor(labels)


def kept_lengths(first: int, second: int, budget: int) -> tuple[int, int]:
    """How many ids of each text a pair keeps when cut to `budget` (max_length less the special tokens) the way the
    tokenizers library cuts truncation="longest_first" (utils/truncation.rs): both whole when they fit; else the
    shorter whole and the longer cut to the rest; both cut to halves (the longer, or the second, taking the odd one)
    when the shorter alone is longer than half."""
    if first + second <= budget:
        return first, second
    short, long_ = sorted((first, second))
    long_ = short if short > budget else max(short, budget - short)
    if short + long_ > budget:
        short, long_ = budget // 2, budget // 2 + budget % 2
    return (long_, short) if first > second else (short, long_)


class SentencePairs:
    """BERT's sentence pairs ([CLS] a [SEP] b [SEP], segments 0 then 1, cut to max_length longest first) built from
    each sentence's ids, each sentence tokenised once a run (NSP pairs the same sentences anew every step): the ids
    the tokenizer's pair call gives, checked on a probe pair when made (None where they differ: another template)."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer, self.max_length, self.ids = tokenizer, max_length, {}
        self.cls, self.sep = tokenizer.cls_token_id, tokenizer.sep_token_id

    @classmethod
    def of(cls, tokenizer, max_length: int, probe: tuple[str, str]) -> "SentencePairs | None":
        if getattr(tokenizer, "cls_token_id", None) is None or getattr(tokenizer, "sep_token_id", None) is None \
                or max_length <= 3:
            return None
        made = cls(tokenizer, max_length)
        called = tokenizer([probe[0]], [probe[1]], truncation="longest_first", max_length=max_length)
        built = made([probe[0]], [probe[1]])
        same = all(list(called[name]) == built[name] for name in ("input_ids", "token_type_ids"))
        return made if same else None

    def __call__(self, firsts: list[str], seconds: list[str]) -> dict[str, list[list[int]]]:
        missing = list(dict.fromkeys(t for t in (*firsts, *seconds) if t not in self.ids))
        fresh = dict(zip(missing, self.tokenizer(missing, add_special_tokens=False)["input_ids"])) if missing else {}
        if len(self.ids) < MEMO_LIMIT:
            self.ids.update(fresh)
        inputs, types = [], []
        for first, second in zip(firsts, seconds):
            a = fresh[first] if first in fresh else self.ids[first]
            b = fresh[second] if second in fresh else self.ids[second]
            keep_a, keep_b = kept_lengths(len(a), len(b), self.max_length - 3)
            inputs.append([self.cls, *a[:keep_a], self.sep, *b[:keep_b], self.sep])
            types.append([0] * (keep_a + 2) + [1] * (keep_b + 1))
        return {"input_ids": inputs, "token_type_ids": types}


def masked_batch(collator, tokenizer, columns: dict[str, list[list[int]]]) -> dict:
    """collator([{column: row ...} ...]) without the tokenizer's padding of Python lists: each column padded with its
    pad id, the attention mask, then the collator's own masking (the same draws from torch's generator) with the
    special-token mask the collator would compute (an id among the tokenizer's special ids)."""
    pads = pad_ids_of(tokenizer)
    batch = {name: pad_right(rows, pads.get(name, 0)) for name, rows in columns.items()}
    lengths = torch.tensor([len(row) for row in columns["input_ids"]])
    batch["attention_mask"] = (torch.arange(batch["input_ids"].shape[1]) < lengths[:, None]).long()
    special = torch.isin(batch["input_ids"], torch.tensor(sorted(set(tokenizer.all_special_ids))))
    batch["input_ids"], batch["labels"] = collator.torch_mask_tokens(batch["input_ids"], special_tokens_mask=special)
    return batch


def new_model(tokenizer, arch: dict, seed: int, nsp: bool, init_hub_model: str = ""):
    """A small BERT of `arch` with fresh weights from `seed`, with the MLM head, or with MLM and NSP heads
    (`init_hub_model`: a hub checkpoint's weights instead, paper profile)."""
    torch.manual_seed(seed)
    config = small_bert_config(len(tokenizer), arch["hidden"], arch["layers"], arch["heads"],
                               arch["intermediate"], arch["max_positions"])
    if not nsp:
        return BertForMaskedLM(config)
    return BertForPreTraining.from_pretrained(init_hub_model) if init_hub_model else BertForPreTraining(config)


def save_encoder(model, tokenizer, folder) -> None:
    """The towers start from the encoder without its MLM (and NSP) heads."""
    model.bert.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def pretrain(model, tokenizer, texts: list[str], settings: MaskedLM, run: loop.Run, origin: dict,
             paragraphs: list[list[str]] | None = None) -> dict:
    """MLM on `texts` cut into blocks; with `paragraphs` (each a list of sentences), MLM + NSP on
    sentence pairs instead (new_model(nsp=True)). `origin` names the model's making (architecture,
    initial checkpoint, tokenizer) in the checkpoint fingerprint."""
    model = model.to(loop.device())
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=settings.mask_probability,
                                               return_tensors="pt")
    if paragraphs is None:
        blocks = chunk_corpus(texts, tokenizer, settings.max_length)
        data_key, count = loop.fingerprint(blocks), len(blocks)
    else:
        paragraphs = [p for p in paragraphs if p]
        positions = [(p, i) for p, sentences in enumerate(paragraphs) for i in range(len(sentences) - 1)]
        if not positions or len(paragraphs) < 2:
            raise ValueError("next sentence prediction needs two paragraphs and one with two sentences")
        data_key, count = loop.fingerprint(paragraphs), len(positions)
        p, i = positions[0]   # a probe pair: pairs built from sentence ids only where they are the tokenizer's
        pairs = SentencePairs.of(tokenizer, settings.max_length, (paragraphs[p][i], paragraphs[p][i + 1]))

    def masked_lm_loss(batch, hidden) -> torch.Tensor:
        # Score only the masked positions: the vocabulary-wide output layer over every token dominated the step.
        masked = batch["labels"] != -100
        loss = torch.nn.functional.cross_entropy(model.cls.predictions(hidden[masked]), batch["labels"][masked])
        return loss * distributed.share_weight(masked.sum())   # a mean over every rank's masked tokens

    def my_share(batch: dict) -> dict:
        # each rank masks the whole batch (the collator draws from torch's seed) and keeps its rows
        mine = distributed.share(len(batch["input_ids"]))
        return {k: v[mine].to(loop.device()) for k, v in batch.items()}

    def loss_fn(step: int) -> torch.Tensor:
        rng = np.random.default_rng([run.seed, step])
        picks = rng.choice(count, size=min(settings.batch_size, count), replace=False)
        if paragraphs is None:
            batch = my_share(masked_batch(collator, tokenizer, {"input_ids": [blocks[i] for i in picks]}))
            hidden = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
            return masked_lm_loss(batch, hidden)
        firsts, seconds, is_random = next_sentence_batch(paragraphs, positions, picks, rng)
        if pairs is None:   # a tokenizer whose pairs are not BERT's: each pair tokenised, collated as ever
            encoded = tokenizer(firsts, seconds, truncation="longest_first", max_length=settings.max_length)
            batch = my_share(collator([{"input_ids": i, "token_type_ids": t}
                                       for i, t in zip(encoded["input_ids"], encoded["token_type_ids"])]))
        else:
            batch = my_share(masked_batch(collator, tokenizer, pairs(firsts, seconds)))
        out = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         token_type_ids=batch["token_type_ids"])
        nsp = torch.nn.functional.cross_entropy(model.cls.seq_relationship(out.pooler_output),
                                                distributed.mine(is_random)[0].to(loop.device()))
        return masked_lm_loss(batch, out.last_hidden_state) + nsp

    identity = {**origin, "train": settings.as_dict(), "seed": run.seed, "data": data_key}
    report = loop.run(model, loss_fn, settings, run, identity=identity, desc="mlm")
    report.update(examples=count, objective="mlm" if paragraphs is None else "mlm+nsp",
                  parameters=sum(p.numel() for p in model.bert.parameters()))
    return report
