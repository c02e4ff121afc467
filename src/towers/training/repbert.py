"""RepBERT (Zhan et al. 2020, sec. 3): one BERT encoder shared by queries and documents, mean of the
token vectors, inner product, trained with MultiLabelMarginLoss (eq. 4) over in-batch documents.

Each step draws B (query, relevant document) pairs of the training qrels from (seed, step); every
query is scored against all B documents, and a document of another pair counts as positive when
the qrels say it is relevant to the query (sec. 3.2, "In-batch Negatives"). Query tokens have
segment id 0, document tokens 1 (footnote 2)."""
from __future__ import annotations

import numpy as np
import torch

from .losses import inner_products, multilabel_margin
from .settings import Schedule
from . import inbatch, loop


def tower_config(query_length: int, doc_length: int, doc_text: str = "contents") -> dict:
    """RepBERT's towers: shared weights, mean pooling, no projection, no normalisation, doc segment 1."""
    return {"pooling": "mean", "embedding_dim": 0, "shared": True, "normalize": False,
            "query_length": query_length, "doc_length": doc_length, "doc_text": doc_text, "head": "linear",
            "doc_segment": 1}


def positives_matrix(rows: list[dict], qrels: dict[str, dict[str, int]]) -> torch.Tensor:
    """[i, j] is True when row j's document is relevant to row i's query (always on the diagonal)."""
    return torch.tensor([[i == j or qrels.get(a["qid"], {}).get(b["doc_id"], 0) > 0 for j, b in enumerate(rows)]
                         for i, a in enumerate(rows)])


def train(model, tokenizer, pairs: list[dict], valid_pairs: list[dict], docs: dict[str, object],
          qrels: dict[str, dict[str, int]], schedule: Schedule, run: loop.Run, start_key: str) -> dict:
    """pairs: {'qid', 'query', 'doc_id'} for each (training query, relevant document); docs: doc id ->
    what the doc tower reads (models.doc_input of its candidate). The towers (tower_config()) start from an
    encoder folder or hub name, or a saved two-tower model to continue: `start_key` names it in the
    checkpoint fingerprint."""
    def loss(q: torch.Tensor, d: torch.Tensor, rows: list[dict], first: int) -> torch.Tensor:
        # float32 scores: the margin is 1 and inner products of unnormalised 768-d means are large
        return multilabel_margin(inner_products(q, d), positives_matrix(rows, qrels)[first:first + len(q)])

    def as_rows(chosen: list[dict]) -> list[dict]:
        return [{**pair, "doc": docs[pair["doc_id"]]} for pair in chosen]

    def draw(step: int) -> list[dict]:
        rng = np.random.default_rng([run.seed, step])
        return as_rows([pairs[i] for i in rng.choice(len(pairs), size=min(schedule.batch_size, len(pairs)),
                                                      replace=False)])

    fingerprint = {"pairs": loop.fingerprint(pairs), "docs": loop.fingerprint(docs), "qrels": loop.fingerprint(qrels)}
    report = inbatch.train(model, tokenizer, draw, as_rows(valid_pairs), schedule, run, loss=loss,
                           fingerprint=fingerprint, start_key=start_key, desc="repbert")
    report.update(train_pairs=len(pairs), valid_pairs=len(valid_pairs))
    return report
