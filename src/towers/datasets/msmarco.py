"""MS MARCO in its TSV form (a folder or the official tar archive) and its training triples mapped to ids."""
from __future__ import annotations

from array import array
from pathlib import Path
from typing import Iterable, TextIO

from ..io import StageError
from .collection import CollectionWriter, progress, QuerySet, text_hash, write_dataset
from .readers import read_collection_tsv, read_qrels_trec, read_queries_tsv
from .sources import Source

def msmarco_names(collection: str, train: str, dev: str) -> dict[str, str]:
    """File name -> role: collection, <side>-queries, <side>-qrels (queries.<x>.tsv / qrels.<x>.tsv)."""
    names = {collection: "collection", f"queries.{dev}.tsv": "test-queries", f"qrels.{dev}.tsv": "test-qrels"}
    if train:
        if train == dev:
            raise StageError("--train", f"the training and evaluation files are the same ({train})")
        names.update({f"queries.{train}.tsv": "train-queries", f"qrels.{train}.tsv": "train-qrels"})
    return names


def build_msmarco(source, tmp: dict[str, Path], collection: str = "collection.tsv", train: str = "train",
                  dev: str = "dev.small", seed: int = 13, valid_fraction: float = 0.1, max_valid: int = 0) -> dict:
    """MS MARCO TSV form (a folder or a tar archive such as collectionandqueries.tar.gz) into `tmp`'s files."""
    src = Source(source)
    names = msmarco_names(collection, train, dev)
    sides = {"test": QuerySet("test"), "train": QuerySet("train")}
    writer = None
    with open(tmp["candidates.jsonl"], "w", encoding="utf-8") as out:
        for name, where, handle in src.members(list(names)):
            role = names[name]
            if role == "collection":
                writer = CollectionWriter(out, where)
                for _, pid, passage in progress(read_collection_tsv(handle, where), "passages", "passage"):
                    writer.add({"id": pid, "contents": passage})
            else:
                side, what = role.split("-")
                if what == "queries":
                    sides[side].add_queries(read_queries_tsv(handle, where), where)
                else:
                    sides[side].add_qrels(read_qrels_trec(handle, where), where)

    def rescan():
        for _, where, handle in Source(source).members([collection]):
            yield from ((n, pid) for n, pid, _ in read_collection_tsv(handle, where))

    writer.finish(rescan)
    return write_dataset(tmp, writer, sides["test"], sides["train"] if train else None, seed, valid_fraction,
                         max_valid, {"form": "msmarco-tsv", "source": str(source), "test_files": dev,
                                     "train_files": train})


class PassageLookup:
    """Passage text -> ids, over a candidates file, in numpy: a sorted array of text hashes and the ids as
    one byte string with offsets (about 25 bytes a passage; MS MARCO: ~220 MB)."""

    def __init__(self, candidates_path):
        import numpy as np

        from ..io import read_jsonl

        hashes, offsets, blob = array("Q"), array("Q", [0]), bytearray()
        for row in progress(read_jsonl(candidates_path), "passage index", "passage"):
            hashes.append(text_hash(row["contents"]))
            blob += row["id"].encode("utf-8")
            offsets.append(len(blob))
        if not hashes:
            raise StageError(candidates_path, "no candidates")
        values = np.frombuffer(hashes, dtype=np.uint64)
        self.order = np.argsort(values, kind="stable")
        self.sorted = values[self.order]
        self.offsets, self.blob = offsets, bytes(blob)

    def _id(self, index: int) -> str:
        return self.blob[self.offsets[index]:self.offsets[index + 1]].decode("utf-8")

    def ids(self, texts: list[str]) -> list[list[str]]:
        """The ids of the passages whose contents equal each text (usually one; none when unknown)."""
        import numpy as np

        wanted = np.array([text_hash(t) for t in texts], dtype=np.uint64)
        left = np.searchsorted(self.sorted, wanted, side="left")
        right = np.searchsorted(self.sorted, wanted, side="right")
        return [[self._id(int(self.order[j])) for j in range(a, b)] for a, b in zip(left, right)]


def triples_to_ids(triples: Iterable[tuple[int, str, str, str]], lookup: PassageLookup, queries: dict[str, str],
                   qrels: dict[str, dict[str, int]], out: TextIO, limit: int = 0, batch: int = 20000) -> dict:
    """Write qid<TAB>positive pid<TAB>negative pid for each text triple whose query is one of `queries` and
    whose positive is relevant to it (qrels); the others are counted, not written."""
    by_text: dict[str, list[str]] = {}
    for qid, text in queries.items():
        by_text.setdefault(" ".join(text.split()), []).append(qid)
    counts = {"triples_read": 0, "triples": 0, "unknown_query": 0, "unknown_positive": 0, "positive_not_relevant": 0,
              "unknown_negative": 0, "negative_relevant": 0}
    pending: list[tuple[str, str, str]] = []

    def flush():
        found = lookup.ids([p for _, p, _ in pending] + [n for _, _, n in pending])
        for i, (query, _, _) in enumerate(pending):
            positives, negatives = found[i], found[len(pending) + i]
            qids = by_text.get(query, [])
            if not qids:
                counts["unknown_query"] += 1
                continue
            if not positives:
                counts["unknown_positive"] += 1
                continue
            pair = next(((q, p) for q in qids for p in positives if qrels.get(q, {}).get(p, 0) > 0), None)
            if pair is None:
                counts["positive_not_relevant"] += 1
                continue
            if not negatives:
                counts["unknown_negative"] += 1
                continue
            negative = next((n for n in negatives if qrels.get(pair[0], {}).get(n, 0) <= 0), None)
            if negative is None:
                counts["negative_relevant"] += 1
                continue
            out.write(f"{pair[0]}\t{pair[1]}\t{negative}\n")
            counts["triples"] += 1
        pending.clear()

    for _, query, positive, negative in triples:
        if limit and counts["triples_read"] >= limit:
            break
        counts["triples_read"] += 1
        pending.append((query, positive, negative))
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return counts
