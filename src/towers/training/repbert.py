"""RepBERT (Zhan et al. 2020, sec. 3): one BERT encoder shared by queries and documents, mean of the
token vectors, inner product, trained with MultiLabelMarginLoss (eq. 4) over in-batch documents.

Each step draws B (query, relevant document) pairs of the training qrels from (seed, step); every
query is scored against all B documents, and a document of another pair counts as positive when
the qrels say it is relevant to the query (sec. 3.2, "In-batch Negatives"). Query tokens have
segment id 0, document tokens 1 (footnote 2)."""
from __future__ import annotations

import numpy as np
import torch

from ..io import StageError
from ..losses import multilabel_margin
from ..models import TwoTower
from . import loop
from .inbatch import tokenize_docs, tokenize_queries


def tower_config(query_length: int, doc_length: int, doc_text: str = "contents") -> dict:
    """RepBERT's towers: shared weights, mean pooling, no projection, no normalisation, doc segment 1."""
    return {"pooling": "mean", "embedding_dim": 0, "shared": True, "normalize": False,
            "query_length": query_length, "doc_length": doc_length, "doc_text": doc_text, "head": "linear",
            "doc_segment": 1}


def positives_matrix(rows: list[dict], qrels: dict[str, dict[str, int]]) -> torch.Tensor:
    """[i, j] is True when row j's document is relevant to row i's query (always on the diagonal)."""
    return torch.tensor([[i == j or qrels.get(a["qid"], {}).get(b["doc_id"], 0) > 0 for j, b in enumerate(rows)]
                         for i, a in enumerate(rows)])


def train(pairs: list[dict], valid_pairs: list[dict], docs: dict[str, object], qrels: dict[str, dict[str, int]],
          start_dir, out_dir, state_dir, model_cfg: dict, train_cfg: dict, seed: int, start_key=None,
          log_path=None, stop_after_step=None) -> dict:
    """pairs: {'qid', 'query', 'doc_id'} for each (training query, relevant document); docs: doc id ->
    what the doc tower reads (models.doc_input of its candidate). start_dir: an encoder folder or hub
    name (towers start from it), or a saved two-tower model to continue. `start_key` names the start
    in the checkpoint fingerprint (default: the folder's digest)."""
    model, tokenizer, model_cfg = TwoTower.start(start_dir, model_cfg, seed)
    positions = getattr(model.query.encoder.config, "max_position_embeddings", None)
    longest = max(model_cfg["query_length"], model_cfg["doc_length"])
    if positions is not None and longest > positions:
        raise StageError(start_dir, f"the encoder has {positions} positions, fewer than the {longest} tokens asked for")
    model = model.to(loop.device())
    segment = model_cfg.get("doc_segment", 0)

    def batch_loss(rows: list[dict]) -> torch.Tensor:
        q = model.query(**tokenize_queries(tokenizer, [r["query"] for r in rows], model_cfg["query_length"]))
        d = model.doc(**tokenize_docs(tokenizer, [docs[r["doc_id"]] for r in rows],
                                      model_cfg["doc_length"], segment=segment))
        # scores in float32 even under the loop's bf16 autocast: the margin is 1 and inner products
        # of unnormalised 768-d means are large, so bf16's ~3 digits would blur the hinge
        with torch.autocast(device_type=q.device.type, enabled=False):
            scores = q.float() @ d.float().T
        return multilabel_margin(scores, positives_matrix(rows, qrels))

    def draw(step: int) -> list[dict]:
        rng = np.random.default_rng([seed, step])
        return [pairs[i] for i in rng.choice(len(pairs), size=min(train_cfg["batch_size"], len(pairs)), replace=False)]

    def validate(step: int) -> dict:
        size = train_cfg["batch_size"]
        chunks = [valid_pairs[i:i + size] for i in range(0, len(valid_pairs), size)]
        with torch.no_grad():
            losses = [float(batch_loss(chunk)) * len(chunk) for chunk in chunks if len(chunk) > 1]
        counted = sum(len(chunk) for chunk in chunks if len(chunk) > 1)
        return {"valid_loss": round(sum(losses) / counted, 5)} if counted else {}

    settings = {"model": model_cfg, "train": train_cfg, "seed": seed, "pairs": loop.fingerprint(pairs),
                "docs": loop.fingerprint(docs), "qrels": loop.fingerprint(qrels),
                "start": start_key or loop.folder_digest(start_dir)}
    report = loop.run(model, lambda step: batch_loss(draw(step)), steps=train_cfg["steps"], lr=train_cfg["lr"],
                      warmup_ratio=train_cfg["warmup_ratio"], seed=seed, state_dir=state_dir,
                      checkpoint_every=train_cfg["checkpoint_every"], settings=settings,
                      weight_decay=train_cfg.get("weight_decay", 0.01), log_path=log_path, on_checkpoint=validate,
                      stop_after_step=stop_after_step, desc="repbert")
    model.cpu().save(out_dir, tokenizer)
    report.update(train_pairs=len(pairs), valid_pairs=len(valid_pairs))
    return report
