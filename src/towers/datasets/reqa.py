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

from ..io import StageError, parse_jsonl, read_json, read_qrels, read_queries, require_file
from .sentences import split_with_offsets
from .splits import question_key
from .wiki import normalise_title

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
    with open(path, encoding="utf-8-sig", newline="") as handle:   # -sig: a byte-order mark is no header field
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    if not rows or rows[0] != QUESTION_COLUMNS:
        raise StageError(path, f"header must be {' '.join(QUESTION_COLUMNS)} (tab-separated)")
    questions, seen = [], {}
    for line, row in enumerate(rows[1:], 2):
        if not row:
            continue
        if len(row) != len(QUESTION_COLUMNS) or not all(field.strip() for field in row):
            raise StageError(path, f"line {line} needs {len(QUESTION_COLUMNS)} non-empty tab-separated fields")
        question = dict(zip(QUESTION_COLUMNS, row), line=line)
        # a row pasted twice, or retyped in capitals or without its "?", would count one question twice
        key = (question["article"], question_key(question["question"]))
        if key in seen:
            raise StageError(path, f"line {line} asks the question of line {seen[key]} again (same article)")
        seen[key] = line
        questions.append(question)
    if not questions:
        raise StageError(path, "the question set is empty")
    return questions


def sentence_start(candidates: list[dict], candidate_id: str, answer: str, min_words: int = 5) -> str:
    """The shortest start of `candidate_id`'s sentence, `min_words` words or more, that picks it out of the
    article's `candidates` among those holding `answer` (the locator resolve_questions reads back)."""
    sentence = next(c["sentence"] for c in candidates if c["id"] == candidate_id)
    if answer not in sentence:
        raise ValueError(f"{answer!r} is not in sentence {candidate_id}")
    words = sentence.split(" ")
    for n in range(min(min_words, len(words)), len(words) + 1):
        start = " ".join(words[:n])
        if len({c["sentence"] for c in candidates if c["sentence"].startswith(start) and answer in c["sentence"]}) == 1:
            return start            # one text: a sentence the article repeats word for word is labelled in every copy
    raise AssertionError("unreachable: the whole sentence picks out its own text")


ANSWER_SEPARATOR = " | "   # a question answered by several sentences: answers and sentence starts, pairwise


def answer_pairs(question: dict, where) -> list[tuple[str, str]]:
    """(answer, sentence_start) for each sentence a row labels: `answer` and `sentence_start` hold as many
    alternatives, separated by ANSWER_SEPARATOR, as sentences answer the question on their own."""
    answers = question["answer"].split(ANSWER_SEPARATOR)
    starts = question["sentence_start"].split(ANSWER_SEPARATOR)
    if len(answers) != len(starts) or not all(x.strip() for x in answers + starts):
        raise StageError(where, f"line {question['line']}: {len(answers)} answers but {len(starts)} sentence starts "
                                f"(alternatives are separated by {ANSWER_SEPARATOR!r}, pairwise)")
    return list(zip(answers, starts))


def question_id(prefix: str, question: dict) -> str:
    """A question's query id: the prefix and its row's number (line 2 of the file, its first row, is 0001)."""
    return f"{prefix}{question['line'] - 1:04d}"


def resolve_questions(questions_path, articles: list[dict], qid_prefix: str = "q"):
    """Map each question to the candidate sentences that start with `sentence_start` and hold the answer, one
    sentence per (answer, sentence_start) pair of its row (answer_pairs), or every copy of it where the article
    repeats the sentence word for word.

    Returns (queries, qrels, answers): answers has one entry per labelled sentence, a row's first pair first.
    Any pair that matches no sentence or several stops the build, naming its line."""
    by_title = {a["title"]: list(article_candidates(a)) for a in articles}
    queries, qrels, answers = {}, {}, []
    for q in read_questions(questions_path):
        where = f"{questions_path}"
        if q["article"] not in by_title:
            raise StageError(where, f"line {q['line']}: article {q['article']!r} is not in the corpus")
        qid = question_id(qid_prefix, q)
        relevant = {}
        for answer, start in answer_pairs(q, where):
            hits = [c for c in by_title[q["article"]] if c["sentence"].startswith(start) and answer in c["sentence"]]
            if len({c["sentence"] for c in hits}) != 1:   # copies of one sentence (an article repeating it) all count
                problem = "not found" if not hits else f"ambiguous ({len(hits)} sentences match)"
                raise StageError(where, f"line {q['line']}: answer {answer!r} {problem} in article {q['article']!r}")
            for hit in hits:
                if hit["id"] in relevant:
                    raise StageError(where, f"line {q['line']}: answer {answer!r} labels a sentence the row labels already")
                relevant[hit["id"]] = 1
                answers.append({"qid": qid, "article": q["article"], "answer": answer, "candidate": hit["id"]})
        queries[qid] = q["question"]
        qrels[qid] = relevant
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


# --- Chang et al. Table 2: statistics of a ReQA dataset ------------------------------------------

CANDIDATE_FIELDS = ("id", "sentence", "paragraph")


def read_candidates(path, fields=CANDIDATE_FIELDS) -> Iterator[tuple[int, dict]]:
    """(line, candidate) one at a time (streamed), each checked for the string fields the caller uses."""
    path = require_file(path)
    with open(path, encoding="utf-8") as handle:
        for number, row in parse_jsonl(handle, path):
            if not (isinstance(row, dict) and all(isinstance(row.get(k), str) for k in fields)):
                needs = ", ".join(fields[:-1]) + f" and {fields[-1]}"
                raise StageError(path, f"line {number} is not a ReQA candidate (needs {needs})")
            yield number, row


def _token_counts(tokenizer, texts: list[str]) -> list[int]:
    # no [CLS]/[SEP]; verbose=False: a paragraph longer than the model's limit is counted, not warned about
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]]


def reqa_statistics(candidates_path, queries_path, qrels_path, tokenizer, batch_size: int = 1024,
                    progress: bool = False) -> dict:
    """Chang et al.'s Table 2 for one ReQA dataset: #query, #candidate, #tuples and average WordPiece tokens.

    tuples: (query, candidate) pairs of the qrels with relevance > 0. Query tokens: the question's
    WordPiece tokens. Doc tokens: those of the candidate's sentence plus those of its paragraph, the
    (sentence, paragraph) pair the doc tower reads (the paper's "candidate represents all (sentence,
    passage) pairs"), averaged over candidates; no special tokens anywhere. Candidates are streamed
    and tokenized in batches (a paragraph once per batch, however many of its sentences the batch
    holds); only their ids are kept, to check that the qrels name existing candidates."""
    from tqdm import tqdm

    queries = read_queries(queries_path)
    qrels = read_qrels(qrels_path)
    relevant = [(qid, doc) for qid, docs in qrels.items() for doc, rel in docs.items() if rel > 0]
    if not relevant:
        raise StageError(qrels_path, "no (query, candidate) pair with relevance > 0")
    unknown = next((qid for qid, _ in relevant if qid not in queries), None)
    if unknown is not None:
        raise StageError(qrels_path, f"query {unknown!r} is not in {queries_path}")

    query_tokens = 0
    texts = list(queries.values())
    for start in range(0, len(texts), batch_size):
        query_tokens += sum(_token_counts(tokenizer, texts[start:start + batch_size]))

    ids: set[str] = set()
    doc_tokens = 0
    batch: list[dict] = []

    def flush() -> None:
        nonlocal doc_tokens
        paragraphs = list(dict.fromkeys(c["paragraph"] for c in batch))
        paragraph_tokens = dict(zip(paragraphs, _token_counts(tokenizer, paragraphs)))
        doc_tokens += sum(_token_counts(tokenizer, [c["sentence"] for c in batch]))
        doc_tokens += sum(paragraph_tokens[c["paragraph"]] for c in batch)
        batch.clear()

    rows = tqdm((row for _, row in read_candidates(candidates_path)), desc="candidates", unit="candidate", mininterval=5,
                disable=not progress)
    for candidate in rows:
        if candidate["id"] in ids:
            raise StageError(candidates_path, f"candidate id {candidate['id']!r} appears twice")
        ids.add(candidate["id"])
        batch.append(candidate)
        if len(batch) >= batch_size:
            flush()
    if batch:
        flush()
    if not ids:
        raise StageError(candidates_path, "no candidates")
    missing = next((doc for _, doc in relevant if doc not in ids), None)
    if missing is not None:
        raise StageError(qrels_path, f"candidate {missing!r} is not in {candidates_path}")
    return {"queries": len(queries), "candidates": len(ids), "tuples": len(relevant),
            "avg_query_tokens": query_tokens / len(queries), "avg_doc_tokens": doc_tokens / len(ids),
            "doc_text": "sentence+paragraph"}


# --- open-domain retrieval (Chang et al. 2020, sec. 4.4) -----------------------------------------
# A QA dataset's candidate set enlarged with (sentence, paragraph) pairs from other Wikipedia
# articles; questions and qrels stay as they are, so models trained on the base dataset are
# evaluated on the enlarged set.


def base_candidate_index(path) -> dict:
    """One streamed pass over a ReQA candidates file: its ids and normalised titles, checked."""
    ids: set[str] = set()
    titles: set[str] = set()
    for number, row in read_candidates(path, ("id", "title")):
        if not row["id"]:
            raise StageError(path, f"line {number}: a candidate with an empty id")
        if row["id"] in ids:
            raise StageError(path, f"line {number}: duplicate candidate id {row['id']!r}")
        ids.add(row["id"])
        titles.add(normalise_title(row["title"]))
    if not ids:
        raise StageError(path, "no candidates")
    return {"ids": ids, "titles": titles}


def check_qrels_point_at(qrels: dict, ids: set[str], path) -> None:
    for qid, docs in qrels.items():
        for doc in docs:
            if doc not in ids:
                raise StageError(path, f"query {qid}: document {doc!r} is not a base candidate")


def _articles(path) -> Iterator[tuple[int, dict, int]]:
    """(line number, article, sentence count) for each parsed article of articles.jsonl, streamed."""
    path = require_file(path)
    with open(path, encoding="utf-8") as handle:
        for number, article in parse_jsonl(handle, path):
            missing = [k for k in ("id", "title", "sections") if k not in article] if isinstance(article, dict) else ["id"]
            if missing:
                raise StageError(path, f"line {number}: not a parsed article (no {missing[0]!r})")
            try:
                sentences = sum(len(p["sentences"]) for s in article["sections"] for p in s["paragraphs"])
            except (KeyError, TypeError) as err:
                raise StageError(path, f"line {number}: not a parsed article (malformed sections: "
                                       f"{type(err).__name__} {err})") from None
            yield number, article, sentences


def plan_extra_candidates(articles_path, base: dict, id_prefix: str, max_extra: int, seed: int) -> dict:
    """First pass over the extra articles: count the candidates of articles outside the QA set,
    check their ids against the base ids, and draw the sub-sample (positions in stream order).

    Memory: the base ids and titles plus the drawn positions (max_extra integers), not the articles."""
    if not id_prefix:
        raise StageError("--id-prefix", "extra candidates need an id prefix so their ids cannot clash with base ids")
    # an extra id is id_prefix + '<article id>_<paragraph>_<sentence>': only base ids with that prefix can clash
    risky = {i for i in base["ids"] if i.startswith(id_prefix)}
    available = articles = skipped = 0
    for number, article, sentences in _articles(articles_path):
        articles += 1
        if normalise_title(article["title"]) in base["titles"]:
            skipped += 1
            continue
        if risky:
            for c in article_candidates(article):
                if id_prefix + c["id"] in risky:
                    raise StageError(articles_path, f"line {number}: extra candidate id {id_prefix + c['id']!r} "
                                                    "clashes with a base candidate id")
        available += sentences
    if not articles:
        raise StageError(articles_path, "no articles")
    if max_extra and max_extra < available:
        import random

        chosen = sorted(random.Random(seed).sample(range(available), max_extra))
    else:
        chosen = None   # all
    return {"chosen": chosen, "extra_available": available, "extra_articles": articles, "skipped_articles": skipped}


def extra_candidates(articles_path, base: dict, id_prefix: str, plan: dict, counts: dict) -> Iterator[dict]:
    """Second pass: the drawn candidates (all when plan['chosen'] is None), ids prefixed, in stream order.
    Fills counts['extra_candidates'] and counts['extra_articles_used'] as they pass."""
    chosen, position, pointer = plan["chosen"], 0, 0
    counts.update(extra_candidates=0, extra_articles_used=0)
    for _, article, sentences in _articles(articles_path):
        if normalise_title(article["title"]) in base["titles"]:
            continue
        end, used = position + sentences, False
        if chosen is None or (pointer < len(chosen) and chosen[pointer] < end):
            for c in article_candidates(article):
                if chosen is None or (pointer < len(chosen) and chosen[pointer] == position):
                    pointer += chosen is not None
                    used = True
                    counts["extra_candidates"] += 1
                    yield {**c, "id": id_prefix + c["id"]}
                position += 1
        position = end
        counts["extra_articles_used"] += used


def query_articles(question_files: list[tuple[str, str, str]]) -> dict[str, dict[str, str]]:
    """dataset -> query id -> the article it was asked of, from the question files of this project
    (data/enwiki-mini/questions*.tsv): each (dataset, qid prefix, questions TSV) names the queries
    <prefix><line - 1> of that dataset, as reqa.resolve_questions numbers them (a ReQA set's answers.jsonl says
    the same; a passage set writes no such file, and its queries are two files' questions, 'q' and 'n')."""
    found: dict[str, dict[str, str]] = {}
    for dataset, prefix, path in question_files:
        found.setdefault(dataset, {}).update({question_id(prefix, q): q["article"] for q in read_questions(path)})
    return found
