"""Two-tower fine-tuning with sampled softmax over in-batch documents (Chang et al. sec. 3)."""
from __future__ import annotations

import numpy as np
import torch
from ..losses import in_batch_softmax
from ..models import TwoTower, doc_input, load_tokenizer
from . import loop


def tokenize_queries(tokenizer, texts: list[str], max_length: int, dev=None):
    batch = tokenizer(texts, max_length=max_length, truncation=True, padding=True, return_tensors="pt")
    return {k: v.to(dev or loop.device()) for k, v in batch.items()}


def tokenize_docs(tokenizer, docs: list, max_length: int, dev=None):
    """A candidate is a text, or its sentence and paragraph as a text pair (the paragraph is truncated first)."""
    if isinstance(docs[0], str):
        return tokenize_queries(tokenizer, docs, max_length, dev)
    batch = tokenizer([s for s, _ in docs], [p for _, p in docs], max_length=max_length,
                      truncation="longest_first", padding=True, return_tensors="pt")
    return {k: v.to(dev or loop.device()) for k, v in batch.items()}


def finetune(pairs: list[dict], valid_pairs: list[dict], encoder_dir, out_dir, state_dir, model_cfg: dict,
             train: dict, seed: int, log_path=None, stop_after_step=None) -> dict:
    """pairs: {'query', 'doc_id', 'sentence', 'paragraph'} for each (training question, gold candidate)."""
    tokenizer = load_tokenizer(encoder_dir)
    model = TwoTower.from_encoder(encoder_dir, model_cfg, seed).to(loop.device())

    def batch_loss(rows: list[dict]) -> torch.Tensor:
        q = model.query(**tokenize_queries(tokenizer, [r["query"] for r in rows], model_cfg["query_length"]))
        d = model.doc(**tokenize_docs(tokenizer, [doc_input(r, model_cfg.get("doc_text", "sentence+paragraph"))
                                                  for r in rows], model_cfg["doc_length"]))
        return in_batch_softmax(q, d, [r["doc_id"] for r in rows], train.get("temperature", 1.0))

    def loss_fn(step: int) -> torch.Tensor:
        rng = np.random.default_rng([seed, step])
        picks = rng.choice(len(pairs), size=min(train["batch_size"], len(pairs)), replace=False)
        return batch_loss([pairs[i] for i in picks])

    def validate(step: int) -> dict:
        if len(valid_pairs) < 2:
            return {}
        with torch.no_grad():
            losses = [float(batch_loss(valid_pairs[i:i + train["batch_size"]]))
                      for i in range(0, len(valid_pairs), train["batch_size"])
                      if len(valid_pairs[i:i + train["batch_size"]]) > 1]
        return {"valid_loss": round(float(np.mean(losses)), 5)} if losses else {}

    # The fingerprint covers the inputs too, so a checkpoint left by a run on another encoder or
    # other training questions is never resumed.
    settings = {"model": model_cfg, "train": train, "seed": seed, "pairs": loop.fingerprint(pairs),
                "encoder": loop.folder_digest(encoder_dir)}
    report = loop.run(model, loss_fn, steps=train["steps"], lr=train["lr"], warmup_ratio=train["warmup_ratio"],
                      seed=seed, state_dir=state_dir, checkpoint_every=train["checkpoint_every"],
                      settings=settings, log_path=log_path, on_checkpoint=validate,
                      stop_after_step=stop_after_step, desc="finetune")
    model.cpu().save(out_dir, tokenizer)
    report.update(train_pairs=len(pairs), valid_pairs=len(valid_pairs))
    return report
