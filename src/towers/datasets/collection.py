"""A passage dataset in the project's form: queries and qrels in memory (small beside a collection), the
collection streamed to candidates.jsonl with only a hash of each id kept, and the outputs written together."""
from __future__ import annotations

import contextlib
import hashlib
import json
import random
from array import array
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from ..io import StageError, atomic_path, require_file, write_json, write_qrels, write_queries

SPLIT = "dev"                                  # the one split a passage dataset has


def text_hash(text: str) -> int:
    """64-bit hash of a string (ids, passage texts); collisions over 10M strings: ~3e-6."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class QuerySet:
    """One side's queries and qrels, with where they came from (for one-line errors)."""

    def __init__(self, name: str):
        self.name = name
        self.queries: dict[str, str] = {}
        self.qrels: dict[str, dict[str, int]] = {}
        self.qrels_line: dict[str, int] = {}       # first qrels line of each query
        self.queries_where = self.qrels_where = ""

    def add_queries(self, rows: Iterable[tuple[int, str, str]], where) -> None:
        self.queries_where = str(where)
        for number, qid, text in rows:
            if qid in self.queries and self.queries[qid] != text:
                raise StageError(where, f"line {number}: query id {qid} appears twice, with different texts")
            self.queries[qid] = text

    def add_qrels(self, rows: Iterable[tuple[int, str, str, int]], where) -> None:
        self.qrels_where = str(where)
        for number, qid, doc, rel in rows:
            docs = self.qrels.setdefault(qid, {})
            self.qrels_line.setdefault(qid, number)
            if docs.get(doc, rel) != rel:
                raise StageError(where, f"line {number}: query {qid}, document {doc} judged twice ({docs[doc]} and {rel})")
            docs[doc] = rel

    def check_and_keep_judged(self) -> int:
        """Every qrels line names a query of the set; queries without a qrels line are dropped (returned)."""
        if not self.qrels:
            raise StageError(self.qrels_where, "no qrels lines")
        for qid, number in self.qrels_line.items():
            if qid not in self.queries:
                raise StageError(self.qrels_where, f"line {number}: query {qid} is not in {self.queries_where}")
        dropped = len(self.queries) - len(self.qrels)
        self.queries = {q: t for q, t in self.queries.items() if q in self.qrels}
        return dropped


class CollectionWriter:
    """Writes candidate rows as they stream past, keeping 8 bytes (the id's hash) a passage."""

    def __init__(self, handle: TextIO, where):
        self.handle, self.where = handle, str(where)
        self.hashes = array("Q")
        self.empty = 0
        self.sorted = None

    def add(self, row: dict) -> None:
        self.handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.hashes.append(text_hash(row["id"]))
        self.empty += not row["contents"]

    def __len__(self) -> int:
        return len(self.hashes)

    def finish(self, rescan=None) -> None:
        """Check the collection is not empty and its ids are unique (`rescan()` re-reads (line, id) pairs
        to name a duplicate)."""
        import numpy as np

        if not self.hashes:
            raise StageError(self.where, "no passages")
        ordered = np.sort(np.frombuffer(self.hashes, dtype=np.uint64))
        repeated = ordered[1:][ordered[1:] == ordered[:-1]]
        if len(repeated):
            if rescan is None:
                raise StageError(self.where, f"{len(repeated)} passage ids appear more than once")
            suspects = {int(h): {} for h in repeated}
            for number, pid in rescan():      # name the first repeated id; equal hashes of two ids pass
                first = suspects.get(text_hash(pid))
                if first is not None:
                    if pid in first:
                        raise StageError(self.where, f"line {number}: passage id {pid} appears twice (first on "
                                                     f"line {first[pid]})")
                    first[pid] = number
        self.sorted = ordered

    @classmethod
    def of_candidates(cls, candidates_path) -> "CollectionWriter":
        """The id hashes of an existing candidates.jsonl (nothing is written), ready for missing()."""
        from ..io import read_jsonl

        known = cls(None, candidates_path)
        for row in read_jsonl(require_file(candidates_path)):
            known.hashes.append(text_hash(row["id"]))
        known.finish()
        return known

    def missing(self, ids: Iterable[str]) -> list[str]:
        """Those of `ids` that are not passage ids."""
        import numpy as np

        ids = list(ids)
        if not ids:
            return []
        # a binary search in the sorted hashes: np.isin would sort the whole collection again on every call
        # (43 calls over 1M passages: ~40 s, the superlinear part of passages-graded)
        wanted = np.array([text_hash(i) for i in ids], dtype=np.uint64)
        at = np.minimum(np.searchsorted(self.sorted, wanted), len(self.sorted) - 1)
        found = self.sorted[at] == wanted
        return [i for i, ok in zip(ids, found) if not ok]


def check_qrels_docs(sets: list[QuerySet], collection: CollectionWriter) -> None:
    for side in sets:
        docs = list(dict.fromkeys(d for docs in side.qrels.values() for d in docs))
        missing = set(collection.missing(docs))
        if missing:
            qid, doc = next((q, d) for q, ds in side.qrels.items() for d in ds if d in missing)
            raise StageError(side.qrels_where, f"line {side.qrels_line[qid]}: query {qid}: document {doc} is not in "
                                               f"the collection ({collection.where}; {len(missing)} such documents)")


OUTPUTS = ("candidates.jsonl", "queries.tsv", "qrels.txt", "stats.json")
SPLIT_FILES = ("train.tsv", "valid.tsv", "test.tsv")


@contextlib.contextmanager
def atomic_outputs(out_dir, split_dir) -> Iterator[dict[str, Path]]:
    """Temporary paths for the ReQA-form files and the split's files, all renamed into place only when the
    block succeeds (a failed build leaves none of them)."""
    paths = {name: Path(out_dir) / name for name in OUTPUTS}
    paths.update({f"split/{name}": Path(split_dir) / name for name in SPLIT_FILES})
    fresh = []                                     # folders this block creates: removed again on failure
    for folder in (Path(out_dir), Path(split_dir)):
        top = None
        for parent in (folder, *folder.parents):
            if parent.exists():
                break
            top = parent
        if top is not None:
            fresh.append(top)
    try:
        with contextlib.ExitStack() as stack:
            yield {key: stack.enter_context(atomic_path(path)) for key, path in paths.items()}
    except BaseException:
        for top in fresh:
            for folder in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
                if not any(folder.iterdir()):
                    folder.rmdir()
            if top.is_dir() and not any(top.iterdir()):
                top.rmdir()
        raise


def valid_sample(qids: list[str], fraction: float, cap: int, seed: int) -> set[str]:
    """A seeded sample of the training queries held out for validation: round(fraction * n), at least one when
    fraction > 0 and there are two or more, at most `cap` (0 = no cap)."""
    if fraction <= 0 or len(qids) < 2:
        return set()
    n = max(1, round(fraction * len(qids)))
    n = min(n, cap) if cap else n
    n = min(n, len(qids) - 1)
    return set(random.Random(seed).sample(sorted(qids), n))


def write_dataset(tmp: dict[str, Path], collection: CollectionWriter, test: QuerySet, train: QuerySet | None,
                  seed: int, valid_fraction: float, max_valid: int, extra: dict | None = None,
                  valid: set[str] | None = None, extra_train: QuerySet | None = None) -> dict:
    """Check the query sets against each other and the collection, then write queries, qrels, stats and
    the split. test: the evaluation queries; train: the training queries, `valid` of them (default: a
    seeded sample) held out; extra_train: more training queries (ICT) that never go to valid."""
    dropped = {f"{test.name}_unjudged": test.check_and_keep_judged()}
    sides = [test]
    overlap = 0
    if train is not None:
        dropped[f"{train.name}_unjudged"] = train.check_and_keep_judged()
        for qid in [q for q in train.queries if q in test.queries]:
            if train.queries[qid] != test.queries[qid]:
                raise StageError(train.queries_where, f"query id {qid} is also a {test.name} query "
                                                      f"({test.queries_where}) with another text; ids must not collide")
            del train.queries[qid], train.qrels[qid]       # the same query judged on both sides: test keeps it
            overlap += 1
        sides.append(train)
    if extra_train is not None:
        clash = next((q for q in extra_train.queries if any(q in s.queries for s in sides)), None)
        if clash:
            raise StageError(extra_train.queries_where, f"query id {clash} collides with a query of the dataset")
        sides.append(extra_train)
    check_qrels_docs(sides, collection)

    train_ids = list(train.queries) if train is not None else []
    if valid is None:
        valid = valid_sample(train_ids, valid_fraction, max_valid, seed)
    parts = {"test": list(test.queries), "valid": [q for q in train_ids if q in valid],
             "train": [q for q in train_ids if q not in valid] + (list(extra_train.queries) if extra_train else [])}
    queries = {q: t for side in sides for q, t in side.queries.items()}
    qrels = {q: d for side in sides for q, d in side.qrels.items()}
    write_queries(tmp["queries.tsv"], queries)
    write_qrels(tmp["qrels.txt"], qrels)
    for name, qids in parts.items():
        write_queries(tmp[f"split/{name}.tsv"], {q: queries[q] for q in qids})
    stats = {"queries": len(queries), "candidates": len(collection),
             "tuples": sum(1 for docs in qrels.values() for rel in docs.values() if rel > 0),
             "judgements": sum(len(docs) for docs in qrels.values()), "split": SPLIT,
             **{f"{name}_queries": len(qids) for name, qids in parts.items()},
             "empty_passages": collection.empty, "dropped_queries": {**dropped, "train_also_test": overlap},
             "seed": seed, "valid_fraction": valid_fraction, "max_valid": max_valid, **(extra or {})}
    write_json(tmp["stats.json"], stats)
    return stats


def progress(rows, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(rows, desc=desc, unit=unit, mininterval=5, unit_scale=True)
