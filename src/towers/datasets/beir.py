"""A BEIR dataset in its JSONL form (a folder or the official zip)."""
from __future__ import annotations

from pathlib import Path

from ..io import StageError
from .collection import CollectionWriter, progress, QuerySet, write_dataset
from .readers import read_corpus_beir, read_qrels_beir, read_queries_beir
from .sources import Source

def drop_without_relevant(side: QuerySet) -> int:
    """Drop the queries none of whose judgements is relevant; return how many.

    A grade <= 0 is not relevant (BEIR's qrels, trec_eval and ir-measures' default: relevant from 1). A query
    judged only <= 0 has nothing to find: every metric would score it 0 whatever the system does (or, in
    training, it has no positive), so it is left out of the dataset, as BEIR's evaluation leaves it out, and
    counted in stats.json (dropped_without_relevant). Its non-relevant judgements go with it; those of the
    queries kept stay in qrels.txt."""
    empty = [qid for qid, docs in side.qrels.items() if not any(grade > 0 for grade in docs.values())]
    for qid in empty:
        del side.qrels[qid]
        side.qrels_line.pop(qid, None)
    return len(empty)


def build_beir(source, tmp: dict[str, Path], eval_split: str = "test", train_split: str = "", seed: int = 13,
               valid_fraction: float = 0.1, max_valid: int = 0) -> dict:
    """BEIR form (a folder or the official zip) into `tmp`'s files; contents = title + " " + text."""
    src = Source(source)
    if train_split and train_split == eval_split:
        raise StageError("--train-split", f"the training and evaluation splits are the same ({train_split})")
    names = {"corpus.jsonl": "collection", "queries.jsonl": "queries", f"qrels/{eval_split}.tsv": "test-qrels"}
    if train_split:
        names[f"qrels/{train_split}.tsv"] = "train-qrels"
    sides = {"test": QuerySet("test"), "train": QuerySet("train")}
    queries, queries_where, writer = {}, "", None
    with open(tmp["candidates.jsonl"], "w", encoding="utf-8") as out:
        for name, where, handle in src.members(list(names)):
            role = names[name]
            if role == "collection":
                writer = CollectionWriter(out, where)
                for _, did, title, text in progress(read_corpus_beir(handle, where), "passages", "passage"):
                    writer.add({"id": did, "contents": f"{title} {text}".strip(), "title": title})
            elif role == "queries":
                shared = QuerySet("queries")
                shared.add_queries(read_queries_beir(handle, where), where)
                queries, queries_where = shared.queries, where
            else:
                sides[role.split("-")[0]].add_qrels(read_qrels_beir(handle, where), where)
    unanswerable = {}
    for name, side in sides.items():   # one queries.jsonl serves every split: a side's queries are those of its qrels
        unanswerable[name] = drop_without_relevant(side)
        side.queries = {q: text for q, text in queries.items() if q in side.qrels}
        side.queries_where = str(queries_where)

    def rescan():
        for _, where, handle in Source(source).members(["corpus.jsonl"]):
            yield from ((n, did) for n, did, _, _ in read_corpus_beir(handle, where))

    writer.finish(rescan)
    return write_dataset(tmp, writer, sides["test"], sides["train"] if train_split else None, seed,
                         valid_fraction, max_valid, {"form": "beir", "source": str(source),
                                                     "eval_split": eval_split, "train_split": train_split,
                                                     "dropped_without_relevant": unanswerable})
