"""Shared file handling: atomic outputs, JSONL/TSV/TREC formats and one-line stage errors."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import socket
import sys
import time
from array import array
from pathlib import Path
from typing import Iterable, Iterator


class StageError(Exception):
    """A problem with a stage's input, reported as one line naming the file."""

    def __init__(self, path, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def require_file(path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise StageError(path, "input file is missing")
    if path.stat().st_size == 0:
        raise StageError(path, "input file is empty")
    return path


DIGEST_LENGTHS = {"md5": 32, "sha1": 40, "sha256": 64}   # hex digits of each checksum the project accepts


def digest_of(path, algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_of(path, chunk: int = 1 << 20) -> str:
    return digest_of(path, "sha256", chunk)


def check_digest_format(algorithm: str, value: str, where) -> str:
    """`value` as a lower-case hex digest of `algorithm`, or one line saying why it is not one."""
    value = value.strip().lower()
    if len(value) != DIGEST_LENGTHS[algorithm] or any(ch not in "0123456789abcdef" for ch in value):
        raise StageError(where, f"{value!r} is not a {algorithm} digest ({DIGEST_LENGTHS[algorithm]} hex digits)")
    return value


def check_digest(path, algorithm: str, expected: str | None) -> None:
    """Stop with one line if the file's `algorithm` digest is not `expected` (nothing to check when empty)."""
    if expected and digest_of(path, algorithm) != check_digest_format(algorithm, expected, path):
        raise StageError(path, f"{algorithm} mismatch (expected {expected}); the file is corrupt or a different version")


def check_sha256(path, expected: str | None) -> None:
    check_digest(path, "sha256", expected)


def check_md5(path, expected: str | None) -> None:
    """MD5, for files whose publishers (or ir_datasets' downloads.json) give only that: an integrity check
    against corrupt or changed downloads, not a defence against tampering."""
    check_digest(path, "md5", expected)


def checksum_from_list(text: str, name: str, source, algorithm: str = "sha1") -> str:
    """The digest of `name` in a checksum list such as Wikimedia's <wiki>-<date>-sha1sums.txt.

    Lines are '<hex digest>  <file name>' (sha1sum/sha256sum output; a '*' before the name marks
    binary mode). The file must be listed exactly once (or with one digest)."""
    found = set()
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[1].lstrip("*") == name:
            found.add(check_digest_format(algorithm, parts[0], f"{source}: line {number}"))
    if not found:
        raise StageError(source, f"no {algorithm} line for {name}")
    if len(found) > 1:
        raise StageError(source, f"conflicting {algorithm} lines for {name}")
    return found.pop()


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds.

    Works for files and for folders (e.g. HF save_pretrained outputs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(path)
    _remove(tmp)
    try:
        yield tmp
        _remove(path)
        os.replace(tmp, path)
    except BaseException:
        _remove(tmp)
        raise


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


@contextlib.contextmanager
def atomic_open(path, mode: str = "w") -> Iterator:
    with atomic_path(path) as tmp:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle


@contextlib.contextmanager
def sole_writer(path) -> Iterator[None]:
    """Hold the writer lock of `path` (a `.<name>.lock` file beside it) for the block, or stop with one line
    naming the process that holds it. A stage left running by a killed Snakemake keeps writing its output; a
    second one started beside it (after `snakemake --unlock`) would race it, and whichever ends last would
    win, perhaps with outdated settings. The kernel drops the lock when its holder dies, even by kill -9."""
    path = Path(str(path).rstrip("/"))
    lock = path.with_name(f".{path.name}.lock")
    created = [p for p in (lock.parent, *lock.parent.parents) if not p.exists()]   # made for the lock only
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock, "a+", encoding="utf-8")
    except OSError as err:   # a folder that takes no files takes no output either: said of the output
        raise OSError(err.errno, err.strerror, str(path)) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StageError(path, f"{holder} is writing it; wait for that stage to end (or stop it), then run again") \
            from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    handle.flush()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        handle.close()
        for folder in created:   # innermost first; a folder the stage wrote into is not empty and stays
            with contextlib.suppress(OSError):
                folder.rmdir()


def parse_jsonl(lines: Iterable[str], path) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-blank line; a line that is not JSON stops with its number."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise StageError(path, f"line {number} is not valid JSON ({err.msg})") from None


def read_jsonl(path) -> Iterator[dict]:
    path = require_file(path)
    with open(path, encoding="utf-8") as handle:
        for _, row in parse_jsonl(handle, path):
            yield row


def count_jsonl(path) -> int:
    """Rows (non-blank lines) of a JSONL file, none of them parsed."""
    with open(require_file(path), "rb") as handle:
        return sum(1 for line in handle if line.strip())


def read_jsonl_slice(path, start: int, stop: int) -> Iterator[dict]:
    """Rows start..stop-1 (counting non-blank lines from 0) of a JSONL file: the rows before are skipped
    unparsed and reading stops after the last, so a shard of a corpus costs its own rows only."""
    path = require_file(path)
    with open(path, encoding="utf-8") as handle:
        row = 0
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            if row >= stop:
                return
            if row >= start:
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as err:   # parse_jsonl's message, with the file's line number
                    raise StageError(path, f"line {number} is not valid JSON ({err.msg})") from None
            row += 1


def write_jsonl(path, rows: Iterable[dict]) -> int:
    count = 0
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count


def write_json(path, obj) -> None:
    with atomic_open(path) as handle:
        json.dump(obj, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def read_json(path):
    path = require_file(path)
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as err:
        raise StageError(path, f"not valid JSON ({err.msg} at line {err.lineno})") from None


def read_queries(path) -> dict[str, str]:
    """Queries TSV: qid<TAB>text."""
    path = require_file(path)
    queries = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0] or not parts[1].strip():
                raise StageError(path, f"line {number} is not 'qid<TAB>text'")
            if parts[0] in queries:   # the later line would silently replace the earlier one
                raise StageError(path, f"line {number} repeats query id {parts[0]}")
            queries[parts[0]] = parts[1]
    if not queries:
        raise StageError(path, "no queries")
    return queries


def write_queries(path, queries: dict[str, str]) -> None:
    with atomic_open(path) as handle:
        for qid, text in queries.items():
            handle.write(f"{qid}\t{' '.join(text.split())}\n")


def read_qrels(path) -> dict[str, dict[str, int]]:
    """TREC qrels: qid 0 docid relevance. A (query, document) pair judged twice is refused: the later line would
    silently replace the earlier one."""
    path = require_file(path)
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise StageError(path, f"line {number} is not 'qid 0 docid relevance'")
            try:
                relevance = int(parts[3])
            except ValueError:
                raise StageError(path, f"line {number} has a non-integer relevance") from None
            docs = qrels.setdefault(parts[0], {})
            if parts[2] in docs:
                raise StageError(path, f"line {number}: document {parts[2]} is judged twice for query {parts[0]} "
                                       f"({docs[parts[2]]} and {relevance})")
            docs[parts[2]] = relevance
    return qrels


def answer_grade(qrels: dict[str, dict[str, int]]) -> int:
    """The grade from which a document counts as relevant where a measure or a trainer needs yes or no: 2 on
    graded qrels (a grade above 1 anywhere: the enwiki-mini sets' judged "answers" over "partly", TREC DL's
    passage convention), 1 on binary ones. nDCG alone reads every grade."""
    return 2 if any(rel > 1 for docs in qrels.values() for rel in docs.values()) else 1


def answers_only(qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Each query's answers as binary relevance, what training takes as positives: its documents at grade 2 and
    above where it has any (a judged question: its answers, not the sentences that answer it in part), else at
    grade 1 (a binary query, such as an ICT pseudo-query beside judged questions in one file)."""
    return {qid: {doc: 1 for doc, rel in docs.items() if rel >= answer_grade({qid: docs})}
            for qid, docs in qrels.items()}


def answer_sets(qrels: dict[str, dict[str, int]]) -> dict[str, set[str]]:
    """Each query's answering documents (answers_only) as a set: what splits keep on one side."""
    return {qid: set(docs) for qid, docs in answers_only(qrels).items()}


def with_relevant(queries: dict[str, str], qrels: dict[str, dict[str, int]]) -> list[tuple[str, str, list[str]]]:
    """Queries joined to their relevant documents (relevance > 0): (qid, text, doc ids sorted), in the queries'
    order; a query without any gets an empty list."""
    return [(qid, text, sorted(d for d, rel in qrels.get(qid, {}).items() if rel > 0)) for qid, text in queries.items()]


def write_qrels(path, qrels: dict[str, dict[str, int]]) -> None:
    with atomic_open(path) as handle:
        for qid, docs in qrels.items():
            for docid, rel in docs.items():
                handle.write(f"{qid} 0 {docid} {rel}\n")


def _run_line(parts: list[str], path, number: int) -> tuple[str, float, int]:
    """(docid, score, rank) of one split TREC run line, or one line saying what is wrong with it."""
    if len(parts) != 6:
        raise StageError(path, f"line {number} is not 'qid Q0 docid rank score tag'")
    try:
        score = float(parts[4])
        rank = int(parts[3])
    except ValueError:
        raise StageError(path, f"line {number} has a bad rank or score") from None
    if not math.isfinite(score):   # NaN has no place in a ranking: metrics that re-sort by score would disagree
        raise StageError(path, f"line {number}: score {parts[4]} of document {parts[2]} for query {parts[0]} "
                               f"is not a finite number")
    return parts[2], score, rank


def _ranked(docs: list[tuple[str, float]], ranks: array) -> list[tuple[str, float]]:
    """A query's rows in the order of their rank column (stable); rows written in rank order stay as they are."""
    if all(a <= b for a, b in zip(ranks, ranks[1:])):
        return docs
    return [docs[i] for i in sorted(range(len(docs)), key=ranks.__getitem__)]


def check_run_lines(path, qids: Iterable[str] | None = None, skip: int = 0) -> None:
    """Stop with read_run's line for the first bad line of a TREC run, repeats counted in the queries `qids` (None:
    all), the first `skip` run lines passed unread: a slow pass for readers that found a problem faster but cannot
    say on which line."""
    wanted = None if qids is None else set(qids)
    seen: dict[str, set[str]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            if skip:
                skip -= 1
                continue
            docid = _run_line(parts, path, number)[0]
            if wanted is not None and parts[0] not in wanted:
                continue
            docs = seen.setdefault(parts[0], set())
            if docid in docs:
                raise StageError(path, f"line {number}: document {docid} appears twice for query {parts[0]}")
            docs.add(docid)


def read_run(path, qids: Iterable[str] | None = None) -> dict[str, list[tuple[str, float]]]:
    """TREC run: qid Q0 docid rank score tag, returned ranked per query, queries in the order the file first
    names them. With `qids`, only those queries are kept, filtered while reading: a stage that scores a split's
    test queries out of a run of every query holds only theirs. Every line is checked either way; a score that
    is not a finite number, or a document named twice for a query kept, is refused (not last wins)."""
    path = require_file(path)
    wanted = None if qids is None else set(qids)
    run: dict[str, list[tuple[str, float]]] = {}
    ranks: dict[str, array] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            parts = line.split()
            if not parts:
                continue
            docid, score, rank = _run_line(parts, path, number)
            if wanted is not None and parts[0] not in wanted:
                continue
            if parts[0] not in run:
                run[parts[0]], ranks[parts[0]] = [], array("q")
            run[parts[0]].append((docid, score))
            ranks[parts[0]].append(rank)
    # repeats counted a query at a time (one small set, not one a line); the slow pass names the line
    if any(len({doc for doc, _ in docs}) != len(docs) for docs in run.values()):
        check_run_lines(path, run)
    return {qid: _ranked(docs, ranks[qid]) for qid, docs in run.items()}


def write_ranking(handle, qid: str, ranked: Iterable[tuple[str, float]], tag: str) -> None:
    """One query's ranking as TREC run lines on an open file: what write_run writes, a query at a time."""
    handle.writelines(f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n" for rank, (docid, score) in enumerate(ranked, 1))


def write_run(path, run: dict[str, list[tuple[str, float]]], tag: str) -> None:
    with atomic_open(path) as handle:
        for qid, ranked in run.items():
            write_ranking(handle, qid, ranked, tag)


def query_shard(queries: dict, shard: int, shards: int) -> dict:
    """Part `shard` of `shards` contiguous parts of a query-keyed dict (texts, or a run's rankings), in its order:
    the runs of the parts, joined in order (concatenate_runs), are the run of all of them."""
    if not 0 <= shard < shards:
        raise StageError("--shard", f"must be in 0..{shards - 1}, not {shard}")
    qids = list(queries)
    return {q: queries[q] for q in qids[len(qids) * shard // shards:len(qids) * (shard + 1) // shards]}


def concatenate_runs(parts: list, path) -> int:
    """Join the runs of disjoint query shards, in the order given, into one run (bytes copied, nothing parsed):
    shards of one query file taken in order give the run a single search of it writes. A shard may be empty (no
    query of it matched anything) but must exist and end its last line."""
    size = 0
    with atomic_open(path, "wb") as out:
        for part in parts:
            part = Path(part)
            if not part.is_file():
                raise StageError(part, "input file is missing")
            with open(part, "rb") as handle:
                if part.stat().st_size:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        raise StageError(part, "its last line is cut short (no newline): an incomplete run")
                    handle.seek(0)
                shutil.copyfileobj(handle, out, 1 << 24)
            size += part.stat().st_size
    return size


def versions(*names: str) -> dict[str, str]:
    from importlib import metadata

    found = {"python": sys.version.split()[0]}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = round(time.perf_counter() - self.start, 3)
