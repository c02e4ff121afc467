"""ReQA builders: candidates are (sentence, paragraph) pairs, qrels point at the answer sentence.

- enwiki-mini: the parsed articles plus the project's own question set (data/enwiki-mini/questions.tsv)
- squad: the official SQuAD v1.1 JSON (Ahmad et al. 2019's construction, as used by Chang et al.)
- nq: Natural Questions JSONL, simplified or original format (Ahmad et al.'s nq_to_squad.py rules)"""
from __future__ import annotations

import csv
import gzip
import html
import re
import urllib.parse
from typing import Iterator

from .io import StageError, parse_jsonl, read_json, require_file
from .sentences import split_with_offsets

QUESTION_COLUMNS = ["article", "question", "answer", "sentence_start"]


def candidate(cid: str, sentence: str, paragraph: str, title: str) -> dict:
    # `contents` is what BM25 indexes: the sentence with its paragraph as context.
    return {"id": cid, "contents": f"{sentence} {paragraph}", "sentence": sentence,
            "paragraph": paragraph, "title": title}


def article_candidates(article: dict) -> Iterator[dict]:
    paragraphs = [p for section in article["sections"] for p in section["paragraphs"]]
    for p_index, paragraph in enumerate(paragraphs):
        for s_index, sentence in enumerate(paragraph["sentences"]):
            yield candidate(f"{article['id']}_{p_index}_{s_index}", sentence, paragraph["text"], article["title"])


def read_questions(path) -> list[dict]:
    path = require_file(path)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != QUESTION_COLUMNS:
        raise StageError(path, f"header must be {' '.join(QUESTION_COLUMNS)} (tab-separated)")
    questions = []
    for line, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(QUESTION_COLUMNS) or not all(field.strip() for field in row):
            raise StageError(path, f"line {line} needs {len(QUESTION_COLUMNS)} non-empty tab-separated fields")
        questions.append(dict(zip(QUESTION_COLUMNS, row), line=line))
    if not questions:
        raise StageError(path, "the question set is empty")
    return questions


def resolve_questions(questions_path, articles: list[dict], qid_prefix: str = "q"):
    """Map each question to the one candidate sentence that starts with `sentence_start` and holds the answer.

    Returns (queries, qrels, answers). Any unresolvable question stops the build, naming its line."""
    by_title = {a["title"]: list(article_candidates(a)) for a in articles}
    queries, qrels, answers = {}, {}, []
    for q in read_questions(questions_path):
        where = f"{questions_path}"
        if q["article"] not in by_title:
            raise StageError(where, f"line {q['line']}: article {q['article']!r} is not in the corpus")
        hits = [c for c in by_title[q["article"]]
                if c["sentence"].startswith(q["sentence_start"]) and q["answer"] in c["sentence"]]
        if len(hits) != 1:
            problem = "not found" if not hits else f"ambiguous ({len(hits)} sentences match)"
            raise StageError(where, f"line {q['line']}: answer {q['answer']!r} {problem} in article {q['article']!r}")
        qid = f"{qid_prefix}{q['line'] - 1:04d}"
        queries[qid] = q["question"]
        qrels[qid] = {hits[0]["id"]: 1}
        answers.append({"qid": qid, "article": q["article"], "answer": q["answer"], "candidate": hits[0]["id"]})
    return queries, qrels, answers


def _squad_articles(data: dict, path) -> list:
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise StageError(path, "not a SQuAD JSON file (no top-level 'data' list)")
    return data["data"]


def build_squad(path, id_prefix: str = ""):
    """ReQA-SQuAD from the official JSON: returns (candidates, queries, qrels).

    A question's relevant candidates are the sentences holding the start of any of its gold
    answers (dev questions have up to three answers, sometimes in different sentences)."""
    path = require_file(path)
    candidates, queries, qrels = [], {}, {}
    for a_index, article in enumerate(_squad_articles(read_json(path), path)):
        title = article.get("title", "").replace("_", " ")
        for p_index, paragraph in enumerate(article.get("paragraphs", [])):
            context = paragraph["context"]
            spans = split_with_offsets(context)
            ids = [f"{id_prefix}{a_index}_{p_index}_{s_index}" for s_index in range(len(spans))]
            normalised = " ".join(context.split())
            for cid, (_, _, sentence) in zip(ids, spans):
                candidates.append(candidate(cid, sentence, normalised, title))
            for qa in paragraph.get("qas", []):
                relevant = {}
                for answer in qa.get("answers", []):
                    start = answer["answer_start"]
                    for cid, (s_start, s_end, _) in zip(ids, spans):
                        if s_start <= start < s_end:
                            relevant[cid] = 1
                if not relevant:
                    raise StageError(path, f"question {qa['id']}: no sentence holds its answer offset")
                queries[qa["id"]] = " ".join(qa["question"].split())
                qrels[qa["id"]] = relevant
    if not queries:
        raise StageError(path, "the question set is empty")
    return candidates, queries, qrels


NQ_KEYS = ("example_id", "question_text", "annotations")
HTML_TAG = re.compile(r"<[^<>]*>")


def _nq_examples(path) -> Iterator[tuple[int, dict]]:
    """(line number, example) for each line of a plain or gzipped NQ JSONL file, streamed."""
    from tqdm import tqdm

    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, example in parse_jsonl(tqdm(handle, desc=path.name, unit="example", mininterval=5), path):
                missing = [k for k in NQ_KEYS if k not in example] if isinstance(example, dict) else list(NQ_KEYS)
                if not missing and "document_text" not in example and "document_tokens" not in example:
                    missing = ["document_text"]
                if missing:
                    raise StageError(path, f"line {number}: not a Natural Questions example (no {missing[0]!r})")
                yield number, example
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise StageError(path, f"cannot read the file ({err})") from None


def _nq_title(example: dict) -> str:
    if example.get("document_title"):
        return example["document_title"]
    # simplified files only have the URL: https://en.wikipedia.org//w/index.php?title=Some_page&amp;oldid=...
    url = urllib.parse.urlsplit(html.unescape(example.get("document_url", "")))
    title = urllib.parse.parse_qs(url.query).get("title") or [urllib.parse.unquote(url.path.rsplit("/", 1)[-1])]
    return title[0].replace("_", " ")


def _nq_answer(example: dict):
    """(paragraph, character offset of the short answer in it), or None if ReQA does not keep the example.

    Kept (as nq_to_squad.py): the first annotation's long answer is a <P> paragraph and it has exactly
    one short answer (dev files have five annotations; only the first counts). The paragraph is the long
    answer's non-HTML tokens joined by single spaces ("river ."): nq_to_squad.py restores the page's
    spacing from byte offsets, which the simplified format does not have."""
    annotation = example["annotations"][0] if example["annotations"] else None
    if not annotation or annotation["long_answer"]["start_token"] < 0 or len(annotation["short_answers"]) != 1:
        return None
    first, last = annotation["long_answer"]["start_token"], annotation["long_answer"]["end_token"]
    if "document_text" in example:   # simplified: space-separated tokens, HTML tags as tokens
        span = [(t, bool(HTML_TAG.fullmatch(t))) for t in example["document_text"].split(" ")[first:last]]
    else:                            # original: document_tokens with an html_token flag
        span = [(t["token"], t["html_token"]) for t in example["document_tokens"][first:last]]
    if not span or span[0][0] != "<P>":
        return None
    answer_token, words, offset, answer_at = annotation["short_answers"][0]["start_token"], [], 0, None
    for index, (token, is_html) in enumerate(span, first):
        if not is_html:
            if answer_at is None and index >= answer_token:
                answer_at = offset
            words.append(token)
            offset += len(token) + 1
    return None if answer_at is None else (" ".join(words), answer_at)


def build_nq(path, id_prefix: str = ""):
    """ReQA-NQ from Natural Questions JSONL: returns (candidates, queries, qrels).

    Follows Ahmad et al.'s nq_to_squad.py (github.com/google/retrieval-qa-eval), then the SQuAD
    construction: every sentence of a kept paragraph is a candidate (a paragraph repeated within a
    document counts once) and the relevant one holds the start of the short answer."""
    path = require_file(path)
    candidates, queries, qrels, paragraphs = [], {}, {}, {}
    for number, example in _nq_examples(path):
        try:
            kept = _nq_answer(example)
        except (KeyError, TypeError, IndexError, AttributeError) as err:
            raise StageError(path, f"line {number}: malformed example ({type(err).__name__}: {err})") from None
        if kept is None:
            continue
        paragraph, answer_at = kept
        title = _nq_title(example)
        key = (title, paragraph)
        if key not in paragraphs:
            spans = split_with_offsets(paragraph)
            paragraphs[key] = [(f"{id_prefix}{len(paragraphs)}_{s}", span) for s, span in enumerate(spans)]
            candidates += [candidate(cid, sentence, paragraph, title) for cid, (_, _, sentence) in paragraphs[key]]
        relevant = {cid: 1 for cid, (start, end, _) in paragraphs[key] if start <= answer_at < end}
        if not relevant:
            raise StageError(path, f"line {number}: no sentence holds the short answer offset")
        queries[str(example["example_id"])] = " ".join(example["question_text"].split())
        qrels[str(example["example_id"])] = relevant
    if not queries:
        raise StageError(path, "no question has a <P> long answer with exactly one short answer")
    return candidates, queries, qrels
