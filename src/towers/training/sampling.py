"""Training queries' judgements by row of the doc matrix, and negative draws: what LTRe (ltre.py) and the
negative-sampling baselines (negatives.py) both take their lists from.

At MS MARCO's size (502,939 training queries, 8.8M passages, BM25 pools of 200) these are compact arrays
built once: a query's judged rows, grades and BM25 rows are slices of flat int32 arrays (Ragged), doc ids
map to rows through one sorted byte array (RowLookup), and a step reads only its own queries' slices."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from ..io import StageError, check_run_lines, require_file


@dataclass(frozen=True)
class Ragged:
    """Rows of varying length in one flat array: row i is values[offsets[i]:offsets[i + 1]]."""
    offsets: np.ndarray   # int64, one more than the rows
    values: np.ndarray

    @classmethod
    def of(cls, rows: Iterable[Sequence[int]], dtype=np.int32) -> "Ragged":
        rows = [np.asarray(r, dtype=dtype).reshape(-1) for r in rows]
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        return cls(offsets, np.concatenate(rows) if rows else np.zeros(0, dtype=dtype))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i]:self.offsets[i + 1]]

    def digest(self) -> str:
        h = hashlib.sha256(self.offsets.tobytes())
        h.update(np.ascontiguousarray(self.values).tobytes())
        return h.hexdigest()[:16]


class RowLookup:
    """Doc id -> row of the doc matrix for millions of ids without a dict of Python strings: the ids as one
    sorted fixed-width byte array, searched in bulk. A later duplicate id wins, as in {id: row} built in order."""

    def __init__(self, ids: Sequence[str]):
        ids = np.asarray(ids, dtype=object)
        self.kind = "S" if all(s.isascii() for s in ids) else "U"   # bytes: a quarter of the memory of str
        keys = ids.astype(self.kind) if len(ids) else np.zeros(0, dtype=f"{self.kind}1")
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        last = np.ones(len(keys), dtype=bool)   # the last of a run of equal ids: the highest row
        last[:-1] = keys[1:] != keys[:-1]
        self.keys, self.rows, self.count = keys[last], order[last].astype(np.int64), len(ids)

    def __len__(self) -> int:
        return self.count

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """Each id's row, -1 for an id not indexed (int64)."""
        if not len(ids) or not len(self.keys):
            return np.full(len(ids), -1, dtype=np.int64)
        wanted = np.asarray(ids, dtype=object)
        foreign = np.zeros(len(wanted), dtype=bool)   # not ASCII: in no set of ASCII ids
        if self.kind == "S":
            foreign = np.fromiter((not s.isascii() for s in wanted), dtype=bool, count=len(wanted))
            wanted = np.where(foreign, "", wanted)
        wanted = wanted.astype(self.kind)
        at = np.searchsorted(self.keys, wanted).clip(max=len(self.keys) - 1)
        return np.where((self.keys[at] == wanted) & ~foreign, self.rows[at], -1)


@dataclass(frozen=True)
class Judgements:
    """Each training query's judged rows of the doc matrix and their grades (aligned Ragged rows)."""
    rows: Ragged
    grades: np.ndarray   # aligned with rows.values

    def relevant(self, i: int) -> set[int]:
        lo, hi = self.rows.offsets[i], self.rows.offsets[i + 1]
        return {int(r) for r, g in zip(self.rows.values[lo:hi], self.grades[lo:hi]) if g > 0}

    def labels(self, ranked: np.ndarray, picks) -> np.ndarray:
        """(B, n) float32 graded labels of ranked[b] for query picks[b]; 0 where a row is not judged
        (labels_of over these queries' {row: grade})."""
        ranked = np.asarray(ranked)
        out = np.zeros(ranked.shape, dtype=np.float32)
        for b, i in enumerate(picks):
            lo, hi = self.rows.offsets[i], self.rows.offsets[i + 1]
            for row, grade in zip(self.rows.values[lo:hi], self.grades[lo:hi]):
                out[b][ranked[b] == row] = grade
        return out

    def digest(self) -> str:
        return hashlib.sha256((self.rows.digest() + self.grades.tobytes().hex()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class TrainingData:
    """What LTRe and the baselines train from: the queries ({'qid', 'text'}), their judgements by doc row, BM25's
    ranked rows of each (None without a run; cut at the deepest use), the number of docs, and `key`, the digests
    a checkpoint is matched by."""
    queries: list[dict]
    judgements: Judgements
    bm25: Ragged | None
    n_docs: int
    key: dict


def labels_of(ranked: np.ndarray, qrels: list[dict[int, int]]) -> np.ndarray:
    """(B, n) float32 graded labels of the ranked ids; 0 where a document is not judged."""
    labels = [[qrel.get(int(d), 0) for d in row] for row, qrel in zip(ranked, qrels)]
    return np.asarray(labels, dtype=np.float32).reshape(np.shape(ranked))


def judgements_of(queries: list[dict], qrels: dict[str, dict[str, int]], lookup: RowLookup) -> Judgements:
    """Each query's judgements by doc row; a query with no relevant indexed doc could never get a positive
    pair, so it stops the stage."""
    rows, grades = [], []
    for q in queries:
        judged = qrels.get(q["qid"], {})
        found = lookup.rows_of(list(judged))
        kept = {int(r): int(g) for r, g in zip(found, judged.values()) if r >= 0}   # a later equal row wins
        if not any(g > 0 for g in kept.values()):
            raise StageError("qrels", f"training query {q['qid']} has no relevant document among the "
                                      f"{len(lookup)} indexed docs")
        rows.append(list(kept))
        grades.append(list(kept.values()))
    return Judgements(Ragged.of(rows), np.concatenate([np.asarray(g, dtype=np.int32) for g in grades])
                      if grades else np.zeros(0, dtype=np.int32))


def ranked_rows(ranked_ids: Iterable[Sequence[str]], lookup: RowLookup, depth: int | None) -> Ragged:
    """Each query's ranked doc ids as rows, ids not indexed dropped, cut to the first `depth` (None: all)."""
    kept = []
    for ids in ranked_ids:
        rows = lookup.rows_of(list(ids))
        kept.append(rows[rows >= 0][:depth])
    return Ragged.of(kept)


RUN_CHUNK = 500_000   # run lines parsed at once (about 100 MB of pandas strings)
REPEAT_BLOCK = 1 << 20   # hits checked for repeats at once (a sorted 8 MB copy of their keys)


def run_rows(path, qids: Sequence[str], lookup: RowLookup, depth: int) -> Ragged:
    """BM25's ranked rows of each of `qids` from a TREC run file (rank order, ties in file order; docs not
    indexed dropped), cut to `depth`, read in chunks: a chunk keeps only its first `depth` hits of each query,
    which hold every hit of the query's overall first `depth`, so memory stays near len(qids) x depth x 8 bytes.
    A score that is not a finite number, or a document named twice among the hits kept, is refused with
    read_run's line."""
    import pandas as pd

    path = require_file(path)
    position = pd.Index(list(qids))
    if not position.is_unique:
        raise ValueError("training query ids repeat")
    parts, lines_read = [], 0
    try:
        reader = pd.read_csv(path, sep=r"\s+", header=None, names=["qid", "q0", "doc", "rank", "score", "tag"],
                             dtype={"qid": str, "q0": str, "doc": str, "rank": np.int64, "score": np.float64,
                                    "tag": str}, usecols=["qid", "doc", "rank", "score", "tag"], chunksize=RUN_CHUNK,
                             engine="c", na_filter=False)
        for chunk in reader:
            if chunk["tag"].eq("").any():
                raise ValueError("a line without 6 fields")
            if not np.isfinite(chunk["score"].to_numpy()).all():
                raise ValueError("a score that is not a finite number")
            query = position.get_indexer(chunk["qid"]).astype(np.int32)
            keep = query >= 0
            row = np.full(len(chunk), -1, dtype=np.int32)
            row[keep] = lookup.rows_of(chunk["doc"].to_numpy()[keep])
            keep &= row >= 0
            parts.append(_first_of_each([query[keep], chunk["rank"].to_numpy()[keep].astype(np.int32), row[keep]], depth))
            lines_read += len(chunk)
    except (ValueError, pd.errors.ParserError) as err:
        check_run_lines(path, qids=(), skip=lines_read)   # the bad line as read_run names it, found from its chunk
        raise StageError(path, f"not a TREC run 'qid Q0 docid rank score tag' ({str(err).splitlines()[0][:200]})") \
            from None
    if parts:
        merged = [np.concatenate(c) for c in zip(*parts)]
        parts.clear()   # each array held once: MS MARCO's training run is ~500M hits
        query, _, row = _first_of_each(merged, depth)
    else:
        query, row = np.zeros(0, np.int32), np.zeros(0, np.int32)
    offsets = np.zeros(len(qids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(query, minlength=len(qids)), out=offsets[1:])
    repeat = _repeated(query, row, offsets, len(lookup))
    if repeat is not None:   # last wins would not do: the document would count twice in the query's pool
        qid, doc = qids[repeat[0]], _id_of(lookup, repeat[1])
        check_run_lines(path, qids=[qid])
        raise StageError(path, f"document {doc} appears twice for query {qid}")
    return Ragged(offsets, row)


def _repeated(query: np.ndarray, row: np.ndarray, offsets: np.ndarray, width: int) -> tuple[int, int] | None:
    """A (query, row) pair that appears twice among hits grouped by query (`offsets`), or None; checked in blocks of
    whole queries, REPEAT_BLOCK hits or so, so the sorted keys are a bounded copy, not one of every hit."""
    low = 0
    while low < len(query):
        high = int(offsets[np.searchsorted(offsets, low + REPEAT_BLOCK, side="right") - 1])
        if high <= low:   # one query of more hits than a block: the block is that query
            high = int(offsets[np.searchsorted(offsets, low, side="right")])
        key = query[low:high].astype(np.int64) * max(width, 1) + row[low:high]
        key.sort()
        same = key[1:] == key[:-1]
        if same.any():
            found = int(key[int(same.argmax())])
            return found // max(width, 1), found % max(width, 1)
        low = high
    return None


def _id_of(lookup: RowLookup, row: int) -> str:
    key = lookup.keys[int(np.flatnonzero(lookup.rows == row)[0])]
    return key.decode() if isinstance(key, bytes) else str(key)


def _first_of_each(arrays: list[np.ndarray], depth: int) -> tuple:
    """The hits [query, rank, row] sorted by query then rank (a stable sort: equal ranks keep their order, the
    file's), each query's first `depth` kept. The list is emptied, so each array is freed as it is replaced; a run
    already in that order is not sorted, and one whose queries all fit in `depth` is not cut."""
    query, rank, row = arrays
    arrays.clear()
    if not _in_order(query, rank):
        order = np.lexsort((rank, query))
        query = query[order]
        rank = rank[order]
        row = row[order]
        del order
    if not len(query) or np.bincount(query).max() <= depth:
        return query, rank, row
    starts = np.flatnonzero(np.r_[True, query[1:] != query[:-1]])
    within = np.arange(len(query)) - np.repeat(starts, np.diff(np.r_[starts, len(query)]))
    keep = within < depth
    return query[keep], rank[keep], row[keep]


def _in_order(query: np.ndarray, rank: np.ndarray) -> bool:
    """Sorted by query, then rank: what a stable lexsort would leave as it is."""
    step = np.diff(query)
    if (step < 0).any():
        return False
    return not ((step == 0) & (np.diff(rank) < 0)).any()


def training_data(queries: list[dict], qrels: dict[str, dict[str, int]], doc_ids: "RowLookup | Sequence[str]",
                  bm25=None, depth: int | None = None, ids_key: str | None = None) -> TrainingData:
    """TrainingData of `queries` ({'qid', 'text'}): `bm25` is a TREC run file (only these queries' hits are
    kept) or qid -> ranked doc ids, either cut to `depth` (None: all); `ids_key` names the doc ids in the
    checkpoint key (default: their fingerprint)."""
    from .loop import fingerprint

    if not queries:
        raise ValueError("no training queries")
    lookup = doc_ids if isinstance(doc_ids, RowLookup) else RowLookup(doc_ids)
    if ids_key is None:
        if isinstance(doc_ids, RowLookup):
            raise ValueError("a RowLookup needs the ids_key of the ids it was built from")
        ids_key = fingerprint(list(doc_ids))
    if bm25 is None:
        bm25_rows = None
    elif isinstance(bm25, dict):
        bm25_rows = ranked_rows((bm25.get(q["qid"], []) for q in queries), lookup, depth)
    else:
        bm25_rows = run_rows(bm25, [q["qid"] for q in queries], lookup, depth if depth is not None else 2**62)
    judgements = judgements_of(queries, qrels, lookup)
    key = {"queries": fingerprint(queries), "qrels": judgements.digest(), "doc_ids": ids_key,
           "bm25": bm25_rows.digest() if bm25_rows is not None else None}
    return TrainingData(queries, judgements, bm25_rows, len(lookup), key)


def sample_negatives(pool, count: int, n_docs: int, excluded: set[int], rng) -> list[int]:
    """`count` distinct rows from `pool` (ranked rows: BM25's or an asynchronous retrieval's top) outside
    `excluded`; random rows of the corpus make up a pool too short for it."""
    pool = [int(r) for r in pool if int(r) not in excluded]
    picked = [pool[int(i)] for i in rng.choice(len(pool), size=min(count, len(pool)), replace=False)] if pool else []
    while len(picked) < count:
        row = int(rng.integers(n_docs))
        if row not in excluded and row not in picked:
            picked.append(row)
    return picked


class CandidateTexts(Sequence):
    """What the doc tower reads (models.doc_input) of row i of a candidates JSONL, read from the file when asked
    (one byte offset a row kept, not the texts): a step reads its few rows, a refresh a slice."""

    def __init__(self, path, doc_text: str = "contents"):
        self.path, self.doc_text = require_file(path), doc_text
        offsets, ids = [], []
        h = hashlib.sha256()
        with open(self.path, "rb") as handle:
            at = 0
            for number, line in enumerate(handle, 1):
                h.update(line)
                if line.strip():
                    offsets.append(at)
                    ids.append(self._parse(line, number)["id"])
                at += len(line)
        if not ids:
            raise StageError(self.path, "no candidates")
        self.offsets, self.key = np.asarray(offsets, dtype=np.int64), h.hexdigest()[:16]
        self.lookup = RowLookup(ids)
        self._handle = None

    def _parse(self, line: bytes, where) -> dict:
        try:
            row = json.loads(line)
            row["id"]
        except (ValueError, KeyError, TypeError):
            raise StageError(self.path, f"line {where} is not a JSON object with an 'id'") from None
        return row

    def __len__(self) -> int:
        return len(self.offsets)

    def _text(self, i: int):
        from ..modeling.models import doc_input

        if self._handle is None:
            self._handle = open(self.path, "rb")
        self._handle.seek(int(self.offsets[i]))
        row = self._parse(self._handle.readline(), f"of row {i}")
        try:
            return doc_input(row, self.doc_text)
        except KeyError as err:
            raise StageError(self.path, f"candidate {row['id']} lacks {err} (doc text {self.doc_text!r})") from None

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._text(j) for j in range(*i.indices(len(self)))]
        return self._text(int(i))


