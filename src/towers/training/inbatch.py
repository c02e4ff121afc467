"""Two towers trained with sampled softmax over in-batch documents (Chang et al. sec. 3): pre-training
on (query, doc) pairs of ICT/BFS/WLP, and fine-tuning on a split's (question, gold candidate) pairs."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from .losses import in_batch_softmax
from ..modeling.models import TwoTower, doc_input, prepare_texts, text_options
from ..modeling.tokens import tokenize_docs, tokenize_queries
from .settings import InBatch, Schedule
from . import distributed, loop


def softmax_loss(temperature: float) -> Callable:
    """Chang et al.'s loss for train(): rows sharing a 'key' are the same document."""
    return lambda q, d, rows, first: in_batch_softmax(q, d, [r["key"] for r in rows], temperature, first)


def train(model: TwoTower, tokenizer, draw: Callable[[int], list[dict]], valid: Sequence[dict], schedule: Schedule,
          run: loop.Run, *, loss: Callable, fingerprint: dict, start_key: str, desc="in-batch") -> dict:
    """draw(step) -> the step's rows {'query', 'doc' (text or text pair), ...}; loss(q, d, rows, first)
    scores the query vectors of rows first .. first + len(q) (this process's share of the batch; all
    of them in one process) against the doc vectors of every row (softmax_loss: in-batch softmax over
    rows' 'key's).

    `fingerprint` names the data and `start_key` the start (an encoder folder, or a saved two-tower model
    being fine-tuned), so a checkpoint of another run is never resumed."""
    model_cfg = model.config
    model = model.to(loop.device())

    def batch_loss(rows: list[dict]) -> torch.Tensor:
        mine = distributed.share(len(rows))
        queries = prepare_texts([r["query"] for r in rows[mine]], **text_options(model_cfg, "query"))
        docs = prepare_texts([r["doc"] for r in rows[mine]], **text_options(model_cfg, "doc"))
        q = model.query(**tokenize_queries(tokenizer, queries, model_cfg["query_length"]))
        d = model.doc(**tokenize_docs(tokenizer, docs, model_cfg["doc_length"], segment=model_cfg.get("doc_segment", 0)))
        return loss(q, distributed.gather(d), rows, mine.start)

    def validate(step: int) -> dict:
        size = schedule.batch_size
        chunks = [list(valid[i:i + size]) for i in range(0, len(valid), size)]
        chunks = [chunk for chunk in chunks if len(chunk) > 1]   # one row has no in-batch negative
        if not chunks:
            return {}
        with torch.no_grad():
            total = sum(float(batch_loss(chunk)) * len(chunk) for chunk in chunks)
        return {"valid_loss": round(total / sum(map(len, chunks)), 5)}

    identity = {"model": model_cfg, "train": schedule.as_dict(), "seed": run.seed, "start": start_key, **fingerprint}
    return loop.run(model, lambda step: batch_loss(draw(step)), schedule, run, identity=identity,
                    on_checkpoint=validate, desc=desc)


def qa_rows(pairs: list[dict], doc_text: str) -> list[dict]:
    """A split's (question, gold candidate) pairs as training rows."""
    return [{"query": p["query"], "doc": doc_input(p, doc_text), "key": p["doc_id"]} for p in pairs]


def draw_batch(rows: list, batch_size: int, seed: int, step: int) -> list:
    """Fine-tuning's batch of a step: `batch_size` distinct rows drawn from (seed, step)."""
    rng = np.random.default_rng([seed, step])
    return [rows[i] for i in rng.choice(len(rows), size=min(batch_size, len(rows)), replace=False)]


def finetune(model: TwoTower, tokenizer, pairs: list[dict], valid_pairs: list[dict], settings: InBatch, run: loop.Run,
             start_key: str) -> dict:
    """pairs: {'query', 'doc_id', 'sentence', 'paragraph'} for each (training question, gold candidate);
    every step draws a batch of them from (seed, step)."""
    doc_text = model.config.get("doc_text", "sentence+paragraph")
    rows, valid = qa_rows(pairs, doc_text), qa_rows(valid_pairs, doc_text)
    report = train(model, tokenizer, lambda step: draw_batch(rows, settings.batch_size, run.seed, step), valid,
                   settings, run, loss=softmax_loss(settings.temperature), fingerprint={"pairs": loop.fingerprint(pairs)},
                   start_key=start_key, desc="finetune")
    report.update(train_pairs=len(pairs), valid_pairs=len(valid_pairs))
    return report


def pretrain(model: TwoTower, tokenizer, tasks: dict[str, Sequence[dict]], settings: InBatch, run: loop.Run,
             start_key: str, title_tasks: Sequence[str] = ("ict",)) -> dict:
    """Pre-training on one task's pairs, or a uniform mixture: each batch row picks a task uniformly,
    then one of its pairs, from (seed, step) (Chang et al. 4.1: pairs "uniformly sampled from the
    three pre-training tasks"). tasks: name -> random-access pairs (PairFile). Docs of the tasks in
    `title_tasks` are (title, passage) pairs, which the tokenizer joins with its separator."""
    names = sorted(tasks)

    def row(pair: dict) -> dict:
        doc = (pair["title"], pair["doc"]) if pair["task"] in title_tasks else pair["doc"]
        return {"query": pair["query"], "doc": doc, "key": (pair["doc_article"], pair["doc"])}

    def draw(step: int) -> list[dict]:
        rng = np.random.default_rng([run.seed, step])
        picks = rng.integers(len(names), size=settings.batch_size)
        return [row(tasks[names[t]][int(rng.integers(len(tasks[names[t]])))]) for t in picks]

    sizes = {name: len(pairs) for name, pairs in tasks.items()}
    fingerprint = {"tasks": sizes, "pairs": {name: getattr(pairs, "digest", "") for name, pairs in tasks.items()},
                   "title_tasks": sorted(title_tasks)}
    report = train(model, tokenizer, draw, [], settings, run, loss=softmax_loss(settings.temperature),
                   fingerprint=fingerprint, start_key=start_key, desc="pretrain")
    report.update(task_pairs=sizes)
    return report
