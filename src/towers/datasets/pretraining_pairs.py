"""Pre-training (query, doc) pairs of Chang et al. (ICLR 2020), section 3, from parsed articles.

- ICT (Inverse Cloze Task): query = a random sentence of a passage; doc = the passage without it;
  title = the passage's own article.
- BFS (Body First Selection): query = a random sentence of an article's lead section; doc = a random
  other passage of the same article; title = that article.
- WLP (Wiki Link Prediction): query = a random lead sentence of article A; doc = a passage of another
  article B that links to A; title = B's (the linking article's) title.

A passage is one paragraph of the parsed articles (any section, lead included). Pairs are dicts
{"query", "doc", "title", "task", "query_article", "doc_article"}; title and doc stay separate
because the doc tower joins them with the tokenizer's separator. Articles stream from the JSONL
file; every random choice comes from numpy generators seeded by (seed, task, article id), so the
output does not depend on the run, the file's other articles or Python's hash salt."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
from array import array
from typing import Iterable, Iterator

import numpy as np

from ..io import StageError, parse_jsonl, require_file
from .wiki import normalise_title, title_key, title_keys

TASKS = ("ict", "bfs", "wlp")
_TASK_CODES = {"ict": 1, "bfs": 2, "wlp": 3, "mix": 4}
_INDEX_BITS = 16   # section and paragraph indices packed beside the article ordinal in WLP's link table

PathLike = str | os.PathLike


def read_articles(path: PathLike) -> Iterator[dict]:
    """Parsed articles, one at a time, checked for the fields the generators use."""
    path = require_file(path)
    with open(path, encoding="utf-8") as handle:
        for number, article in parse_jsonl(handle, path):
            if not (isinstance(article, dict) and {"id", "title", "sections"} <= article.keys()
                    and isinstance(article["sections"], list)):
                raise StageError(path, f"line {number} is not a parsed article (needs id, title and sections)")
            yield article


def _article_key(article_id) -> int:
    # A digest rather than hash(): str hashes change with PYTHONHASHSEED.
    return int.from_bytes(hashlib.blake2b(str(article_id).encode("utf-8"), digest_size=8).digest(), "little")


def _rng(seed: int, task: str, article_id, *extra: int) -> np.random.Generator:
    return np.random.default_rng([seed, _TASK_CODES[task], _article_key(article_id), *extra])


def _sentences(paragraph: dict) -> list[str]:
    return [s.strip() for s in paragraph.get("sentences", []) if s.strip()]


def _passages(article: dict) -> list[tuple[int, int, dict]]:
    """(section index, paragraph index, paragraph) of every non-empty passage."""
    return [(s, p, paragraph) for s, section in enumerate(article["sections"])
            for p, paragraph in enumerate(section["paragraphs"]) if paragraph.get("text", "").strip()]


def _lead_sentences(article: dict) -> list[tuple[int, int, int, str]]:
    """(section, paragraph, sentence index, sentence) for every sentence of the lead section."""
    return [(s, p, k, sentence) for s, section in enumerate(article["sections"]) if section.get("lead")
            for p, paragraph in enumerate(section["paragraphs"]) for k, sentence in enumerate(_sentences(paragraph))]


def _pair(query: str, doc: str, title: str, task: str, query_article, doc_article) -> dict:
    return {"query": query, "doc": doc, "title": title, "task": task,
            "query_article": query_article, "doc_article": doc_article}


def ict_pairs(path: PathLike, seed: int = 0) -> Iterator[dict]:
    """One ICT pair per passage with at least two sentences."""
    for article in read_articles(path):
        rng = _rng(seed, "ict", article["id"])
        for _, _, paragraph in _passages(article):
            sentences = _sentences(paragraph)
            if len(sentences) < 2:
                continue
            i = int(rng.integers(len(sentences)))
            rest = sentences[:i] + sentences[i + 1:]
            if sentences[i] in rest:   # a repeated sentence would leave the query inside the doc
                continue
            yield _pair(sentences[i], " ".join(rest), article["title"], "ict", article["id"], article["id"])


def bfs_pairs(path: PathLike, seed: int = 0, per_article: int = 1) -> Iterator[dict]:
    """Up to `per_article` BFS pairs per article with a lead section, each with a different doc passage.

    The doc is a passage other than the query's; an article whose only passage holds the query gets
    that passage without the query sentence (none if nothing is left)."""
    for article in read_articles(path):
        lead = _lead_sentences(article)
        if not lead:
            continue
        passages = _passages(article)
        rng = _rng(seed, "bfs", article["id"])
        used: set[int] = set()
        for n in range(per_article):
            s, p, k, query = lead[int(rng.integers(len(lead)))]
            others = [j for j, (ds, dp, _) in enumerate(passages) if (ds, dp) != (s, p) and j not in used]
            if others:
                j = others[int(rng.integers(len(others)))]
                used.add(j)
                doc = passages[j][2]["text"]
            elif n == 0:
                rest = _sentences(article["sections"][s]["paragraphs"][p])
                del rest[k]
                if not rest or query in rest:
                    break
                doc = " ".join(rest)
            else:
                break
            if doc != query:
                yield _pair(query, doc, article["title"], "bfs", article["id"], article["id"])


def _pack(ordinal: int, section: int, paragraph: int) -> int:
    if section >> _INDEX_BITS or paragraph >> _INDEX_BITS:
        raise ValueError(f"article {ordinal} has more than {1 << _INDEX_BITS} sections or paragraphs")
    return (ordinal << 2 * _INDEX_BITS) | (section << _INDEX_BITS) | paragraph


def _unpack(code: int) -> tuple[int, int, int]:
    mask = (1 << _INDEX_BITS) - 1
    return code >> 2 * _INDEX_BITS, (code >> _INDEX_BITS) & mask, code & mask


def _wlp_changed(path: PathLike) -> StageError:
    return StageError(path, "the file changed between WLP's passes")


class _QuerySpill:
    """The query sentences drawn for each article with a lead, on disk (one JSON line each) with one 8-byte
    offset an article in memory: WLP reads them back for the chosen pairs only."""

    def __init__(self, folder: PathLike | None):
        self.handle = tempfile.TemporaryFile(dir=folder)
        self.offsets = array("q")   # by article ordinal; -1: no lead section

    def add(self, article_id, drawn: list[str] | None) -> None:
        if drawn is None:
            self.offsets.append(-1)
            return
        self.offsets.append(self.handle.tell())
        self.handle.write(json.dumps([article_id, drawn], ensure_ascii=False).encode("utf-8") + b"\n")

    def has_lead(self, ordinal: int) -> bool:
        return self.offsets[ordinal] >= 0

    def __getitem__(self, ordinal: int) -> tuple[str, list[str]]:
        self.handle.seek(self.offsets[ordinal])
        article_id, drawn = json.loads(self.handle.readline())
        self.handle.seek(0, os.SEEK_END)
        return article_id, drawn


def _link_targets(titles: np.ndarray, first: np.ndarray, has_lead: np.ndarray,
                  redirects: dict[str, str] | None) -> tuple[np.ndarray, np.ndarray]:
    """(sorted title digests, the ordinal each names): every title whose first article has a lead, and every
    redirect (not itself a title) to one; a redirect normalised like an earlier one replaces it."""
    keys, ordinals = [titles[has_lead[first]]], [first[has_lead[first]]]
    if redirects:
        sources = title_keys(normalise_title(k) for k in redirects)
        targets = title_keys(normalise_title(v) for v in redirects.values())
        # the last of equal sources, as a dict built from them keeps
        _, last = np.unique(sources[::-1], return_index=True)
        sources, targets = sources[::-1][last], targets[::-1][last]
        at = np.searchsorted(titles, targets).clip(max=max(len(titles) - 1, 0))
        known = (titles[at] == targets) if len(titles) else np.zeros(len(targets), dtype=bool)
        keep = known & ~np.isin(sources, titles)
        keep[keep] = has_lead[first[at[keep]]]
        keys.append(sources[keep])
        ordinals.append(first[at[keep]])
    keys, ordinals = np.concatenate(keys), np.concatenate(ordinals)
    order = np.argsort(keys, kind="stable")
    return keys[order], ordinals[order]


def wlp_pairs(path: PathLike, seed: int = 0, redirects: dict[str, str] | None = None,
              per_article: int = 1, spill_dir: PathLike | None = None) -> Iterator[dict]:
    """Up to `per_article` WLP pairs per linked-to article A, each from a different linking passage.

    Three streaming passes: the first keeps a 64-bit digest of each article's normalised title and spills
    the lead sentences drawn for queries to a temporary file (in `spill_dir`); the second keeps only the
    locations of links whose target is a corpus article with a lead section; the third reads the chosen
    passages. Memory: about 33 bytes an article (title digest and ordinal, spill offset, lead flag), 8
    bytes a link into the corpus (plus ~170 bytes a linked-to article), 20 bytes a chosen pair, and
    16 bytes a redirect while the targets are built. `redirects` maps a redirect title to its target
    title (parse-wiki's redirects.json); links through it count as links to the target (a redirect
    titled like an article of the corpus is ignored). Pairs come out in the order of the linking
    articles in the file."""
    spill = _QuerySpill(spill_dir)
    try:
        yield from _wlp_pairs(path, seed, redirects, per_article, spill)
    finally:
        spill.handle.close()


def _wlp_pairs(path, seed, redirects, per_article, spill: _QuerySpill) -> Iterator[dict]:
    """WLP in three passes over the articles, holding arrays, not texts: each article's lead draws (spilled) and
    title digests; the passages linking to each article with a lead; the chosen pairs, read back in file order."""
    ids, titles, first, has_lead = _wlp_titles(path, seed, per_article, spill)
    # Link target digest -> ordinal of A, only for targets that are (or redirect to) an article with a lead.
    target_keys, target_ordinals = _link_targets(titles, first, has_lead, redirects)
    del titles, first
    inbound = _wlp_inbound(path, ids, target_keys, target_ordinals)
    del target_keys, target_ordinals, ids
    yield from _wlp_emit(path, *_wlp_choose(inbound, seed, per_article, spill), spill)


def _wlp_titles(path, seed, per_article, spill: _QuerySpill) -> tuple:
    """Pass 1: each article's id digest and its lead draws (into `spill`); each title's digest and first article;
    which articles have a lead."""
    digests, title_ordinals = array("Q"), array("q")
    ids = array("Q")   # digest of each article's id: pass 2 checks the file did not change
    for ordinal, article in enumerate(read_articles(path)):
        title = normalise_title(article["title"])
        if title:   # links with an empty target are dropped, so an empty title is never linked to
            digests.append(title_key(title))
            title_ordinals.append(ordinal)
        ids.append(_article_key(article["id"]))
        lead = _lead_sentences(article)
        draws = _rng(seed, "wlp", article["id"]).integers(len(lead), size=per_article) if lead else None
        spill.add(article["id"], None if draws is None else [lead[int(i)][3] for i in draws])
    has_lead = np.frombuffer(spill.offsets, dtype=np.int64) >= 0 if len(ids) else np.zeros(0, dtype=bool)
    # each title's digest and its first article
    titles, first_at = np.unique(np.frombuffer(digests, dtype=np.uint64), return_index=True) \
        if digests else (np.zeros(0, np.uint64), np.zeros(0, np.int64))
    first = np.frombuffer(title_ordinals, dtype=np.int64)[first_at] if digests else np.zeros(0, np.int64)
    return ids, titles, first, has_lead


def _wlp_inbound(path, ids: array, target_keys: np.ndarray, target_ordinals: np.ndarray) -> dict[int, array]:
    """Pass 2: A -> packed (ordinal, section, paragraph) of the passages linking to A."""
    inbound: dict[int, array] = {}
    articles, found, seen = len(ids), len(target_keys), 0
    for ordinal, article in enumerate(read_articles(path)):
        seen += 1
        if ordinal >= articles or ids[ordinal] != _article_key(article["id"]):
            raise _wlp_changed(path)
        for s, p, paragraph in _passages(article):
            try:
                code = _pack(ordinal, s, p)
            except ValueError as err:
                raise StageError(path, str(err)) from None
            links = {title_key(normalise_title(link.get("target", ""))) for link in paragraph.get("links", [])}
            if not links or not found:
                continue
            keys = np.fromiter(links, dtype=np.uint64, count=len(links))
            at = np.searchsorted(target_keys, keys).clip(max=found - 1)
            for a in set(target_ordinals[at[target_keys[at] == keys]].tolist()):
                if a != ordinal:   # no self-links
                    inbound.setdefault(a, array("q")).append(code)   # codes ascend, each passage once per A
    if seen != articles:
        raise _wlp_changed(path)
    return inbound


def _wlp_choose(inbound: dict[int, array], seed, per_article, spill: _QuerySpill) -> tuple:
    """Up to per_article linking passages of each A (seeded by A's id), as (passage code, A, which query of A)
    sorted by linking article, section, paragraph, then A and j."""
    codes, linked, draws = array("q"), array("q"), array("i")
    for a in sorted(inbound):
        candidates = inbound.pop(a)
        rng = _rng(seed, "wlp", spill[a][0], 1)
        chosen = rng.choice(len(candidates), size=min(per_article, len(candidates)), replace=False)
        for j, index in enumerate(sorted(int(i) for i in chosen)):
            codes.append(candidates[index])
            linked.append(a)
            draws.append(j)
    codes_, linked_, draws_ = (np.frombuffer(x, dtype=t) if len(x) else np.zeros(0, t)
                               for x, t in ((codes, np.int64), (linked, np.int64), (draws, np.int32)))
    order = np.lexsort((draws_, linked_, codes_))
    return codes_[order], linked_[order], draws_[order]


def _wlp_emit(path, codes: np.ndarray, linked: np.ndarray, draws: np.ndarray, spill: _QuerySpill) -> Iterator[dict]:
    """Pass 3: each chosen pair, its passage read where the file holds it (a query equal to it is no pair)."""
    next_pair = 0
    for ordinal, article in enumerate(read_articles(path)):
        while next_pair < len(codes) and (code := int(codes[next_pair])) >> 2 * _INDEX_BITS == ordinal:
            _, s, p = _unpack(code)
            a, j = int(linked[next_pair]), int(draws[next_pair])
            next_pair += 1
            try:
                doc = article["sections"][s]["paragraphs"][p]["text"]
            except (IndexError, KeyError):
                raise _wlp_changed(path) from None
            a_id, drawn = spill[a]
            if doc.strip() != drawn[j]:
                yield _pair(drawn[j], doc, article["title"], "wlp", a_id, article["id"])
    if next_pair < len(codes):
        raise _wlp_changed(path)


def mix_pairs(streams: Iterable[Iterable[dict]], seed: int = 0, limit: int | None = None) -> Iterator[dict]:
    """Each pair drawn from a uniformly chosen stream; stops when the chosen stream is exhausted or at `limit`."""
    iterators = [iter(stream) for stream in streams]
    rng = np.random.default_rng([seed, _TASK_CODES["mix"]])
    count = 0
    try:
        while limit is None or count < limit:
            try:
                pair = next(iterators[int(rng.integers(len(iterators)))])
            except StopIteration:
                return
            yield pair
            count += 1
    finally:
        for iterator in iterators:   # close the other streams' files now, not at garbage collection
            getattr(iterator, "close", lambda: None)()


def generate_pairs(path: PathLike, tasks: str = "ict+bfs+wlp", seed: int = 0,
                   redirects: dict[str, str] | None = None, limit: int | None = None,
                   per_article: int = 1, spill_dir: PathLike | None = None) -> Iterator[dict]:
    """Pairs of one task ('ict', 'bfs', 'wlp') or of a '+'-joined uniform mixture such as 'ict+bfs+wlp'.
    `per_article` caps BFS pairs per article and WLP pairs per linked-to article (ICT makes one per passage)."""
    names = tasks.split("+")
    unknown = [name for name in names if name not in TASKS]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"tasks must be '+'-joined distinct names from {', '.join(TASKS)}; got {tasks!r}")
    makers = {"ict": lambda: ict_pairs(path, seed), "bfs": lambda: bfs_pairs(path, seed, per_article),
              "wlp": lambda: wlp_pairs(path, seed, redirects, per_article, spill_dir)}
    if len(names) == 1:
        return itertools.islice(makers[names[0]](), limit)
    return mix_pairs([makers[name]() for name in names], seed, limit)


def pair_statistics(pairs: Iterable[dict], tokenizer, batch_size: int = 1024) -> dict:
    """Table 1 of the paper: #pairs, #tokens (query + doc WordPiece tokens), average query and doc tokens.

    Doc tokens count the passage only, not the title (the paper's "tokens per passage")."""
    count = query_tokens = doc_tokens = 0
    batch: list[dict] = []

    def flush() -> None:
        nonlocal count, query_tokens, doc_tokens
        if batch:
            count += len(batch)
            query_tokens += sum(map(len, tokenizer([p["query"] for p in batch], add_special_tokens=False)["input_ids"]))
            doc_tokens += sum(map(len, tokenizer([p["doc"] for p in batch], add_special_tokens=False)["input_ids"]))
            batch.clear()

    for pair in pairs:
        batch.append(pair)
        if len(batch) >= batch_size:
            flush()
    flush()
    return {"pairs": count, "tokens": query_tokens + doc_tokens,
            "avg_query_tokens": query_tokens / count if count else 0.0,
            "avg_doc_tokens": doc_tokens / count if count else 0.0}


class PairFile:
    """Random access to a pairs JSONL file without loading it: one byte offset per line (8 bytes a
    pair, so a full Wikipedia's 90M pairs index in ~0.7 GB), each pair parsed when asked for."""

    def __init__(self, path: PathLike):
        self.path = require_file(path)
        self.offsets = array("q")
        digest = hashlib.sha256()
        with open(self.path, "rb") as handle:
            position = 0
            for line in handle:
                digest.update(line)
                if line.strip():
                    self.offsets.append(position)
                position += len(line)
        if not self.offsets:
            raise StageError(self.path, "no pairs")
        self.digest = digest.hexdigest()[:16]
        self._handle = open(self.path, "rb")

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, i: int) -> dict:
        self._handle.seek(self.offsets[i])
        line = self._handle.readline()
        try:
            pair = json.loads(line)
        except ValueError:
            raise StageError(self.path, f"pair {i + 1} is not valid JSON") from None
        if not (isinstance(pair, dict) and {"query", "doc", "title", "task", "doc_article"} <= pair.keys()):
            raise StageError(self.path, f"pair {i + 1} lacks query, doc, title, task or doc_article")
        return pair
