"""Two towers trained with sampled softmax over in-batch documents (Chang et al. sec. 3): pre-training
on (query, doc) pairs of ICT/BFS/WLP, and fine-tuning on a split's (question, gold candidate) pairs."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from ..losses import in_batch_softmax
from ..io import StageError
from ..models import TwoTower, doc_input, prepare_texts, text_options, tokenize_docs, tokenize_queries
from ..settings import InBatch, Schedule
from . import distributed, loop


def softmax_loss(temperature: float) -> Callable:
    """Chang et al.'s loss for train(): rows sharing a 'key' are the same document."""
    return lambda q, d, rows, first: in_batch_softmax(q, d, [r["key"] for r in rows], temperature, first)


def train(draw: Callable[[int], list[dict]], valid: Sequence[dict], start_dir, out_dir, state_dir, model_cfg: dict,
          schedule: Schedule, seed: int, fingerprint: dict, loss: Callable, log_path=None, stop_after_step=None,
          desc="in-batch", start_key: str | None = None) -> dict:
    """draw(step) -> the step's rows {'query', 'doc' (text or text pair), ...}; loss(q, d, rows, first)
    scores the query vectors of rows first .. first + len(q) (this process's share of the batch; all
    of them in one process) against the doc vectors of every row (softmax_loss: in-batch softmax over
    rows' 'key's).

    Towers start from `start_dir`: an encoder folder, or a saved two-tower model (a pre-trained one
    being fine-tuned). `fingerprint` names the data and `start_key` the start (default: the folder's
    digest), so a checkpoint of another run is never resumed."""
    model, tokenizer, model_cfg = TwoTower.start(start_dir, model_cfg, seed)
    positions = getattr(model.query.encoder.config, "max_position_embeddings", None)
    longest = max(model_cfg["query_length"], model_cfg["doc_length"])
    if positions is not None and longest > positions:
        raise StageError(start_dir, f"the encoder has {positions} positions, fewer than the {longest} tokens asked for")
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

    identity = {"model": model_cfg, "train": schedule.as_dict(), "seed": seed,
                "start": start_key or loop.folder_digest(start_dir), **fingerprint}
    report = loop.run(model, lambda step: batch_loss(draw(step)), schedule, seed=seed, state_dir=state_dir,
                      identity=identity, log_path=log_path, on_checkpoint=validate, stop_after_step=stop_after_step,
                      desc=desc)
    model.cpu().save(out_dir, tokenizer)
    return report


def qa_rows(pairs: list[dict], doc_text: str) -> list[dict]:
    """A split's (question, gold candidate) pairs as training rows."""
    return [{"query": p["query"], "doc": doc_input(p, doc_text), "key": p["doc_id"]} for p in pairs]


def draw_batch(rows: list, batch_size: int, seed: int, step: int) -> list:
    """Fine-tuning's batch of a step: `batch_size` distinct rows drawn from (seed, step)."""
    rng = np.random.default_rng([seed, step])
    return [rows[i] for i in rng.choice(len(rows), size=min(batch_size, len(rows)), replace=False)]


def finetune(pairs: list[dict], valid_pairs: list[dict], start_dir, out_dir, state_dir, model_cfg: dict,
             settings: InBatch, seed: int, log_path=None, stop_after_step=None) -> dict:
    """pairs: {'query', 'doc_id', 'sentence', 'paragraph'} for each (training question, gold candidate);
    every step draws a batch of them from (seed, step)."""
    doc_text = model_cfg.get("doc_text", "sentence+paragraph")
    rows, valid = qa_rows(pairs, doc_text), qa_rows(valid_pairs, doc_text)
    report = train(lambda step: draw_batch(rows, settings.batch_size, seed, step), valid, start_dir, out_dir,
                   state_dir, model_cfg, settings, seed, {"pairs": loop.fingerprint(pairs)},
                   softmax_loss(settings.temperature), log_path, stop_after_step, desc="finetune")
    report.update(train_pairs=len(pairs), valid_pairs=len(valid_pairs))
    return report


def pretrain(tasks: dict[str, Sequence[dict]], start_dir, out_dir, state_dir, model_cfg: dict, settings: InBatch,
             seed: int, title_tasks: Sequence[str] = ("ict",), log_path=None, stop_after_step=None) -> dict:
    """Pre-training on one task's pairs, or a uniform mixture: each batch row picks a task uniformly,
    then one of its pairs, from (seed, step) (Chang et al. 4.1: pairs "uniformly sampled from the
    three pre-training tasks"). tasks: name -> random-access pairs (PairFile). Docs of the tasks in
    `title_tasks` are (title, passage) pairs, which the tokenizer joins with its separator."""
    names = sorted(tasks)

    def row(pair: dict) -> dict:
        doc = (pair["title"], pair["doc"]) if pair["task"] in title_tasks else pair["doc"]
        return {"query": pair["query"], "doc": doc, "key": (pair["doc_article"], pair["doc"])}

    def draw(step: int) -> list[dict]:
        rng = np.random.default_rng([seed, step])
        picks = rng.integers(len(names), size=settings.batch_size)
        return [row(tasks[names[t]][int(rng.integers(len(tasks[names[t]])))]) for t in picks]

    sizes = {name: len(pairs) for name, pairs in tasks.items()}
    fingerprint = {"tasks": sizes, "pairs": {name: getattr(pairs, "digest", "") for name, pairs in tasks.items()},
                   "title_tasks": sorted(title_tasks)}
    report = train(draw, [], start_dir, out_dir, state_dir, model_cfg, settings, seed, fingerprint,
                   softmax_loss(settings.temperature), log_path, stop_after_step, desc="pretrain")
    report.update(task_pairs=sizes)
    return report
