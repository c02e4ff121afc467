"""Masked-LM pre-training of a small BERT from scratch (Chang et al.'s "MLM" baseline)."""
from __future__ import annotations

import numpy as np
import torch
from transformers import AutoTokenizer, BertForMaskedLM, DataCollatorForLanguageModeling

from ..models import small_bert_config
from . import loop


def chunk_corpus(texts: list[str], tokenizer, max_length: int) -> list[list[int]]:
    """Concatenate tokenised paragraphs and cut them into max_length blocks with [CLS] ... [SEP]."""
    body = max_length - 2
    stream: list[int] = []
    for text in texts:
        stream.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
    blocks = [stream[i:i + body] for i in range(0, len(stream) - body + 1, body)] or [stream]
    return [[tokenizer.cls_token_id] + block + [tokenizer.sep_token_id] for block in blocks]


def pretrain(texts: list[str], tokenizer_dir, out_dir, state_dir, arch: dict, train: dict, seed: int,
             log_path=None, stop_after_step=None) -> dict:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(seed)
    config = small_bert_config(len(tokenizer), arch["hidden"], arch["layers"], arch["heads"],
                               arch["intermediate"], arch["max_positions"])
    model = BertForMaskedLM(config).to(loop.device())
    blocks = chunk_corpus(texts, tokenizer, train["max_length"])
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=train["mask_probability"],
                                               return_tensors="pt")

    def loss_fn(step: int) -> torch.Tensor:
        rng = np.random.default_rng([seed, step])
        picks = rng.choice(len(blocks), size=min(train["batch_size"], len(blocks)), replace=False)
        batch = collator([{"input_ids": blocks[i]} for i in picks])
        batch = {k: v.to(loop.device()) for k, v in batch.items()}
        # Score only the masked positions: the 8000-way output layer over every token dominated the step.
        hidden = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        masked = batch["labels"] != -100
        logits = model.cls(hidden[masked])
        return torch.nn.functional.cross_entropy(logits, batch["labels"][masked])

    settings = {"arch": arch, "train": train, "seed": seed, "blocks": loop.fingerprint(blocks),
                "tokenizer": loop.folder_digest(tokenizer_dir)}
    report = loop.run(model, loss_fn, steps=train["steps"], lr=train["lr"], warmup_ratio=train["warmup_ratio"],
                      seed=seed, state_dir=state_dir, checkpoint_every=train["checkpoint_every"],
                      settings=settings, log_path=log_path, stop_after_step=stop_after_step, desc="mlm")
    # The towers start from the encoder without its MLM head.
    model.bert.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    report.update(blocks=len(blocks), parameters=sum(p.numel() for p in model.bert.parameters()))
    return report
