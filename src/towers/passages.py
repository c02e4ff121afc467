"""Passage-ranking datasets (RepBERT: MS MARCO passage ranking) in the project's formats.

Candidates are passages, one JSON line each: `{"id", "contents"}` (Pyserini's JsonCollection; the
BEIR and Wikipedia forms keep `title`, and their `contents` is title + " " + text). Queries are TSV,
qrels TREC, and each dataset has one split, "dev": test = its evaluation queries, train = its training
queries less a seeded validation sample (valid). Train and test qrels share one qrels.txt.

Forms, each one loader:
- MS MARCO TSV (`passages-msmarco`): collection.tsv (pid<TAB>passage), queries.<x>.tsv (qid<TAB>text),
  qrels.<x>.tsv (`qid 0 pid rel`, tab- or space-separated; TREC's `qid Q0 pid rel` reads too), in a folder
  or a tar archive such as the official collectionandqueries.tar.gz (read once, as a stream); any file
  may be gzipped (`<name>.gz`).
- BEIR JSONL (`passages-beir`): corpus.jsonl ({"_id", "title", "text"}), queries.jsonl ({"_id", "text"}),
  qrels/<split>.tsv (header query-id, corpus-id, score), in a folder or the official zip.
- Wikipedia paragraphs (`passages-wiki`): parsed articles (parse-wiki) and a ReQA question set: each
  paragraph is a passage, a question's relevant passage the paragraph holding its answer sentence, and
  ICT pseudo-queries (a paragraph's sentence -> that paragraph) join the training queries.
- Graded evaluation sets (`passages-graded`): extra test queries with graded qrels over another passage
  dataset's collection, such as TREC DL 2019 (msmarco-test2019-queries.tsv.gz, 2019qrels-pass.txt, grades
  0-3) over MS MARCO's passages; only judged queries are kept, and every judged passage must be in the
  collection. Such a dataset has no candidates of its own: searches go through its base's indexes.
- Train triples (`passages-triples`): MS MARCO's triples.train.small.tsv (query, positive passage,
  negative passage, as text) mapped to ids, qid<TAB>positive pid<TAB>negative pid.

Nothing holds a collection in memory: passages stream from their file (or archive member) to
candidates.jsonl, and only a 64-bit hash of each id is kept (70 MB for MS MARCO's 8.8M passages),
to check that ids are unique and that every qrels line names an existing passage and query."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import random
import re
import tarfile
import zipfile
import zlib
from array import array
from pathlib import Path
from typing import Iterable, Iterator, TextIO

from .io import StageError, atomic_path, parse_jsonl, require_file, write_json, write_qrels, write_queries

SPLIT = "dev"                                  # the one split a passage dataset has
BEIR_QRELS_HEADER = ["query-id", "corpus-id", "score"]
WHITESPACE = re.compile(r"\s")


def text_hash(text: str) -> int:
    """64-bit hash of a string (ids, passage texts); collisions over 10M strings: ~3e-6."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def check_id(value: str, where, number: int, what: str) -> str:
    if not value or WHITESPACE.search(value):
        raise StageError(where, f"line {number}: {what} {value!r} is empty or holds whitespace")
    return value


# --- where the files are: folder, tar archive, zip archive, single file ----------------------------

def _text(binary, name: str) -> TextIO:
    """A text handle over a binary one, gunzipped when the name ends in .gz; lines end at \\n only."""
    if name.endswith(".gz"):
        binary = gzip.GzipFile(fileobj=binary, mode="rb")
    return io.TextIOWrapper(binary, encoding="utf-8", newline="\n")


class _Sequential(io.RawIOBase):
    """A read-only, non-seekable view of a file object (a tar member read as a stream: Python's own
    object for it fails when asked whether it can seek)."""

    def __init__(self, handle):
        self.handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.handle.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _matches(member: str, name: str) -> bool:
    member = member.replace("\\", "/")
    return any(member == n or member.endswith("/" + n) for n in (name, name + ".gz"))


class Source:
    """A dataset's files: a folder, a tar archive (plain, .gz, .bz2 or .xz; read once, as a stream),
    a zip archive, or one file. A file is found by its name (a relative path such as qrels/test.tsv),
    or that name plus .gz, which is decompressed as it is read."""

    def __init__(self, path):
        self.path = Path(path)
        if self.path.is_dir():
            self.kind = "folder"
            return
        require_file(self.path)
        if tarfile.is_tarfile(self.path):
            self.kind = "tar"
        elif zipfile.is_zipfile(self.path):
            self.kind = "zip"
        else:
            self.kind = "file"

    def members(self, names: list[str]) -> Iterator[tuple[str, str, TextIO]]:
        """(name, where, text handle) for each of `names`: a tar's in archive order (one pass), the others'
        in the order given. Each handle must be read before the next is asked for."""
        if self.kind == "folder":
            for name in names:
                path = next((p for p in (self.path / name, self.path / f"{name}.gz") if p.is_file()), None)
                if path is None:
                    raise StageError(self.path, f"no {name} (or {name}.gz) in the folder")
                with open(path, "rb") as binary, _text(binary, path.name) as handle:
                    yield name, str(path), handle
        elif self.kind == "file":
            if len(names) != 1:
                raise StageError(self.path, f"a single file cannot hold {', '.join(names)}; give a folder or an archive")
            with open(self.path, "rb") as binary, _text(binary, self.path.name) as handle:
                yield names[0], str(self.path), handle
        elif self.kind == "zip":
            yield from self._zip_members(names)
        else:
            yield from self._tar_members(names)

    def _zip_members(self, names):
        try:
            with zipfile.ZipFile(self.path) as archive:
                listed = [m for m in archive.namelist() if not m.endswith("/")]
                for name in names:
                    found = [m for m in listed if _matches(m, name)]
                    if len(found) != 1:
                        problem = "no member" if not found else f"{len(found)} members"
                        raise StageError(self.path, f"{problem} named {name} (or {name}.gz) in the archive")
                    with archive.open(found[0]) as binary, _text(binary, found[0]) as handle:
                        yield name, f"{self.path}:{found[0]}", handle
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as err:
            raise StageError(self.path, f"cannot read the archive ({err})") from None

    def _tar_members(self, names):
        seen: dict[str, str] = {}
        try:
            with tarfile.open(self.path, mode="r|*") as archive:
                for member in archive:
                    if not member.isfile():
                        continue
                    name = next((n for n in names if _matches(member.name, n)), None)
                    if name is None:
                        continue
                    if name in seen:
                        raise StageError(self.path, f"two members named {name}: {seen[name]} and {member.name}")
                    seen[name] = member.name
                    binary = io.BufferedReader(_Sequential(archive.extractfile(member)), 1 << 20)
                    with _text(binary, member.name) as handle:
                        yield name, f"{self.path}:{member.name}", handle
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise StageError(self.path, f"cannot read the archive ({err})") from None
        missing = [n for n in names if n not in seen]
        if missing:
            raise StageError(self.path, f"no member named {missing[0]} (or {missing[0]}.gz) in the archive")


def lines(handle: TextIO, where) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) for each line; undecodable or truncated input is one line."""
    number = 0
    try:
        for number, line in enumerate(handle, 1):
            yield number, line.rstrip("\n").rstrip("\r")
    except UnicodeDecodeError as err:
        raise StageError(where, f"not UTF-8 text after line {number} ({err.reason})") from None
    except (OSError, EOFError, zlib.error, tarfile.TarError) as err:
        raise StageError(where, f"cannot read the file after line {number} ({err})") from None


# --- readers: one line of input -> one record, checked --------------------------------------------

def tab_columns(rows: Iterable[tuple[int, str]], where, columns: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of each non-blank line, which must have exactly these tab-separated columns."""
    for number, line in rows:
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != len(columns):
            raise StageError(where, f"line {number}: expected {len(columns)} tab-separated columns "
                                    f"({', '.join(columns)}), found {len(parts)}")
        yield number, parts


def read_collection_tsv(handle, where) -> Iterator[tuple[int, str, str]]:
    """MS MARCO collection.tsv: (line, pid, passage)."""
    for number, parts in tab_columns(lines(handle, where), where, ("pid", "passage")):
        yield number, check_id(parts[0].strip(), where, number, "passage id"), parts[1].strip()


def read_queries_tsv(handle, where) -> Iterator[tuple[int, str, str]]:
    """qid<TAB>text: (line, qid, text with whitespace runs made single spaces)."""
    for number, parts in tab_columns(lines(handle, where), where, ("qid", "text")):
        qid = check_id(parts[0].strip(), where, number, "query id")
        text = " ".join(parts[1].split())
        if not text:
            raise StageError(where, f"line {number}: query {qid} has no text")
        yield number, qid, text


def read_qrels_trec(handle, where) -> Iterator[tuple[int, str, str, int]]:
    """MS MARCO (`qid<TAB>0<TAB>pid<TAB>rel`) or TREC (`qid Q0 docid rel`) qrels: (line, qid, docid, rel)."""
    for number, line in lines(handle, where):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise StageError(where, f"line {number}: expected 4 columns (qid 0 docid relevance), found {len(parts)}")
        yield number, parts[0], parts[2], _relevance(parts[3], where, number)


def read_qrels_beir(handle, where) -> Iterator[tuple[int, str, str, int]]:
    """BEIR qrels/<split>.tsv, header query-id<TAB>corpus-id<TAB>score: (line, qid, docid, score)."""
    rows = ((number, line) for number, line in lines(handle, where) if line.strip())
    for number, line in rows:   # the first non-blank line
        if [p.strip() for p in line.split("\t")] != BEIR_QRELS_HEADER:
            raise StageError(where, f"line {number}: header must be {' '.join(BEIR_QRELS_HEADER)} (tab-separated)")
        break
    for number, parts in tab_columns(rows, where, ("query-id", "corpus-id", "score")):
        parts = [p.strip() for p in parts]
        yield (number, check_id(parts[0], where, number, "query id"), check_id(parts[1], where, number, "corpus id"),
               _relevance(parts[2], where, number))


def _relevance(value: str, where, number: int) -> int:
    try:
        return int(value)
    except ValueError:
        raise StageError(where, f"line {number}: relevance {value!r} is not an integer") from None


def _json_rows(handle, where, what: str) -> Iterator[tuple[int, dict]]:
    for number, row in parse_jsonl((line for _, line in lines(handle, where)), where):
        if not isinstance(row, dict) or not isinstance(row.get("_id"), (str, int)) or not isinstance(row.get("text"), str):
            raise StageError(where, f"line {number}: not a BEIR {what} row (needs '_id' and a string 'text')")
        yield number, row


def read_corpus_beir(handle, where) -> Iterator[tuple[int, str, str, str]]:
    """BEIR corpus.jsonl: (line, id, title, text); a missing or null title is ''."""
    for number, row in _json_rows(handle, where, "corpus"):
        title = row.get("title") or ""
        if not isinstance(title, str):
            raise StageError(where, f"line {number}: 'title' is not a string")
        yield number, check_id(str(row["_id"]).strip(), where, number, "corpus id"), title.strip(), row["text"].strip()


def read_queries_beir(handle, where) -> Iterator[tuple[int, str, str]]:
    """BEIR queries.jsonl: (line, qid, text)."""
    for number, row in _json_rows(handle, where, "queries"):
        qid = check_id(str(row["_id"]).strip(), where, number, "query id")
        text = " ".join(row["text"].split())
        if not text:
            raise StageError(where, f"line {number}: query {qid} has no text")
        yield number, qid, text


def read_triples(handle, where) -> Iterator[tuple[int, str, str, str]]:
    """MS MARCO train triples (query<TAB>positive passage<TAB>negative passage): (line, query, positive, negative)."""
    for number, parts in tab_columns(lines(handle, where), where, ("query", "positive passage", "negative passage")):
        query, positive, negative = " ".join(parts[0].split()), parts[1].strip(), parts[2].strip()
        if not (query and positive and negative):
            raise StageError(where, f"line {number}: an empty query or passage")
        yield number, query, positive, negative


# --- queries and qrels in memory (small beside a collection) --------------------------------------

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


# --- collection: streamed to candidates.jsonl, ids kept as hashes ----------------------------------

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
        from .io import read_jsonl

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
        found = np.isin(np.array([text_hash(i) for i in ids], dtype=np.uint64), self.sorted)
        return [i for i, ok in zip(ids, found) if not ok]


def check_qrels_docs(sets: list[QuerySet], collection: CollectionWriter) -> None:
    for side in sets:
        docs = list(dict.fromkeys(d for docs in side.qrels.values() for d in docs))
        missing = set(collection.missing(docs))
        if missing:
            qid, doc = next((q, d) for q, ds in side.qrels.items() for d in ds if d in missing)
            raise StageError(side.qrels_where, f"line {side.qrels_line[qid]}: query {qid}: document {doc} is not in "
                                               f"the collection ({collection.where}; {len(missing)} such documents)")


# --- outputs --------------------------------------------------------------------------------------

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


# --- MS MARCO TSV form ----------------------------------------------------------------------------

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


# --- BEIR JSONL form ------------------------------------------------------------------------------

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
    for side in sides.values():   # one queries.jsonl serves every split: a side's queries are those of its qrels
        side.queries = {q: text for q, text in queries.items() if q in side.qrels}
        side.queries_where = str(queries_where)

    def rescan():
        for _, where, handle in Source(source).members(["corpus.jsonl"]):
            yield from ((n, did) for n, did, _, _ in read_corpus_beir(handle, where))

    writer.finish(rescan)
    return write_dataset(tmp, writer, sides["test"], sides["train"] if train_split else None, seed,
                         valid_fraction, max_valid, {"form": "beir", "source": str(source),
                                                     "eval_split": eval_split, "train_split": train_split})


# --- Wikipedia paragraphs (the embedded default's passage form) ------------------------------------

def article_passages(article: dict) -> Iterator[tuple[dict, list[str]]]:
    """(passage row, its sentences) for each paragraph, numbered as reqa.article_candidates numbers them."""
    paragraphs = [p for section in article["sections"] for p in section["paragraphs"]]
    for index, paragraph in enumerate(paragraphs):
        row = {"id": f"{article['id']}_{index}", "contents": f"{article['title']} {paragraph['text']}".strip(),
               "title": article["title"]}
        yield row, paragraph["sentences"]


def passage_of(candidate_id: str) -> str:
    """ReQA candidate <article>_<paragraph>_<sentence> -> passage <article>_<paragraph>."""
    return candidate_id.rsplit("_", 1)[0]


def build_wiki(articles_path, questions_path, tmp: dict[str, Path], ict_queries: int, dev_fraction: float,
               valid_fraction: float, seed: int) -> dict:
    """Paragraph passages of parsed articles, the question set's qrels moved from the answer sentence to its
    paragraph, a seeded `dev_fraction` of the questions as test (identical texts on one side), and
    `ict_queries` ICT pseudo-queries (a random sentence of a random paragraph of two or more sentences,
    relevant: that paragraph) added to train. Two streamed passes over the articles."""
    from . import reqa
    from .splits import cold_start_split

    if not 0 < dev_fraction < 1:
        raise StageError("--dev-fraction", f"must be between 0 and 1, not {dev_fraction}")
    if ict_queries < 0:
        raise StageError("--ict-queries", f"must be 0 or more, not {ict_queries}")
    titles = {q["article"] for q in reqa.read_questions(questions_path)}
    asked, eligible = [], 0
    with open(tmp["candidates.jsonl"], "w", encoding="utf-8") as out:
        writer = CollectionWriter(out, articles_path)
        for _, article, _ in progress(reqa._articles(articles_path), "articles", "article"):
            if article["title"] in titles:
                asked.append(article)
            for row, sentences in article_passages(article):
                writer.add(row)
                eligible += len(sentences) >= 2
    writer.finish(lambda: ((n, row["id"]) for n, article, _ in reqa._articles(articles_path)
                           for row, _ in article_passages(article)))

    questions, qrels, _ = reqa.resolve_questions(questions_path, asked)
    test, train = QuerySet("test"), QuerySet("train")
    parts = cold_start_split(questions, 1 - dev_fraction, valid_fraction, seed)
    for side, qids in ((test, parts["test"]), (train, parts["train"] + parts["valid"])):
        side.queries = {q: questions[q] for q in qids}
        side.qrels = {q: {passage_of(c): rel for c, rel in qrels[q].items()} for q in qids}
        side.qrels_line = {q: int(q[1:]) + 1 for q in qids}       # q0001 is line 2 of the question set
        side.queries_where = side.qrels_where = str(questions_path)

    ict = QuerySet("ict")
    ict.queries_where = ict.qrels_where = str(articles_path)
    rng = random.Random(f"ict-{seed}")
    chosen = set(rng.sample(range(eligible), min(ict_queries, eligible)))
    position = 0
    for _, article, _ in reqa._articles(articles_path):
        for row, sentences in article_passages(article):
            if len(sentences) < 2:
                continue
            if position in chosen:
                qid = f"ict-{row['id']}"
                ict.queries[qid] = " ".join(rng.choice(sentences).split())
                ict.qrels[qid] = {row["id"]: 1}
                ict.qrels_line[qid] = 0
            position += 1
    return write_dataset(tmp, writer, test, train, seed, valid_fraction, 0,
                         {"form": "wikipedia-passages", "articles": str(articles_path), "questions": str(questions_path),
                          "dev_fraction": dev_fraction, "ict_queries": len(ict.queries), "ict_queries_asked": ict_queries,
                          "ict_paragraphs_available": eligible},
                         valid=set(parts["valid"]), extra_train=ict if ict.queries else None)


# --- MS MARCO train triples -> ids ----------------------------------------------------------------

class PassageLookup:
    """Passage text -> ids, over a candidates file, in numpy: a sorted array of text hashes and the ids as
    one byte string with offsets (about 25 bytes a passage; MS MARCO: ~220 MB)."""

    def __init__(self, candidates_path):
        import numpy as np

        from .io import read_jsonl

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


# --- graded evaluation sets over another dataset's collection --------------------------------------

def build_graded(queries_path, qrels_path, candidates_path, out: dict[str, Path]) -> dict:
    """The judged queries of `queries_path` and their graded qrels, checked against the base collection;
    writes queries.tsv, qrels.txt, stats.json and the split's test.tsv (train and valid stay empty)."""
    test = QuerySet("graded")
    with _text(open(require_file(queries_path), "rb"), str(queries_path)) as handle:
        test.add_queries(read_queries_tsv(handle, queries_path), queries_path)
    with _text(open(require_file(qrels_path), "rb"), str(qrels_path)) as handle:
        test.add_qrels(read_qrels_trec(handle, qrels_path), qrels_path)
    dropped = test.check_and_keep_judged()
    collection = CollectionWriter.of_candidates(candidates_path)
    for qid, docs in test.qrels.items():
        missing = collection.missing(docs)
        if missing:
            raise StageError(qrels_path, f"line {test.qrels_line[qid]}: query {qid} judges passage {missing[0]}, "
                                         f"which is not in {candidates_path}")
    write_queries(out["queries.tsv"], test.queries)
    write_qrels(out["qrels.txt"], test.qrels)
    for name in SPLIT_FILES:
        write_queries(out[f"split/{name}"], test.queries if name == "test.tsv" else {})
    grades: dict[int, int] = {}
    for docs in test.qrels.values():
        for rel in docs.values():
            grades[rel] = grades.get(rel, 0) + 1
    stats = {"queries": len(test.queries), "judgements": sum(grades.values()),
             "grades": {str(g): n for g, n in sorted(grades.items())}, "split": SPLIT,
             "test_queries": len(test.queries), "dropped_queries": {"unjudged": dropped},
             "collection": str(candidates_path)}
    write_json(out["stats.json"], stats)
    return stats
