"""Readers of the raw forms: one line of input -> one record, checked (ids, columns, relevance grades), with
the file and line number in every error."""
from __future__ import annotations

import re
from typing import Iterable, Iterator

from ..io import StageError, parse_jsonl
from .sources import lines

BEIR_QRELS_HEADER = ["query-id", "corpus-id", "score"]
WHITESPACE = re.compile(r"\s")


def check_id(value: str, where, number: int, what: str) -> str:
    if not value or WHITESPACE.search(value):
        raise StageError(where, f"line {number}: {what} {value!r} is empty or holds whitespace")
    return value


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
