"""Parse a MediaWiki XML dump into articles: lead section, sections, paragraphs, sentences, links.

Streams pages (bz2 or plain XML) so it scales to a full dump; markup is handled by
mwparserfromhell, sentences by pysbd. A multistream dump (Wikimedia's pages-articles-multistream.xml.bz2:
independent bz2 streams of 100 pages, with an index of each stream's byte offset) is parsed in parts,
one job a part (`wiki_parts.plan_parts`, `iter_part_pages`), and the parts merged in dump order
(`wiki_parts.merge_parts`)."""
from __future__ import annotations

import bz2
import hashlib
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

import mwparserfromhell
import numpy as np

from ..io import StageError, require_file
from .sentences import split_sentences

# Sections that hold references and navigation rather than prose.
SKIPPED_SECTIONS = {
    "references", "external links", "see also", "further reading", "notes", "bibliography",
    "sources", "footnotes", "citations", "notes and references", "references and notes",
    "external link", "gallery", "works cited", "literature",
}
# Tags whose contents are not running text.
DROPPED_TAGS = {"ref", "table", "gallery", "timeline", "imagemap", "references", "math", "chem",
                "score", "syntaxhighlight", "source", "pre", "div", "blockquote", "poem", "code"}
NON_ARTICLE_PREFIXES = {"file", "image", "category", "wikipedia", "wp", "template", "help", "portal",
                        "special", "media", "user", "talk", "wiktionary", "wikt", "s", "q", "commons",
                        "meta", "mw", "n", "b", "v", "species", "draft", "module", "book"}
MIN_PARAGRAPH_WORDS = 8


def normalise_title(target: str) -> str:
    """MediaWiki title normalisation: drop the anchor, underscores to spaces, first letter upper."""
    target = target.split("#", 1)[0].replace("_", " ").strip()
    target = " ".join(target.split())
    return target[:1].upper() + target[1:] if target else ""


def _is_article_link(title: str) -> bool:
    title = title.strip().lstrip(":")
    if not title or title.startswith("#"):
        return False
    prefix, sep, _ = title.partition(":")
    # Interlanguage links ("fr:...") and namespaced links are not article links.
    return not (sep and (prefix.lower() in NON_ARTICLE_PREFIXES or re.fullmatch(r"[a-z]{2,3}(-[a-z]+)?", prefix)))


def _drop_non_text(code) -> None:
    for node in code.filter_tags(recursive=True):
        if str(node.tag).lower() in DROPPED_TAGS:
            _safe_remove(code, node)
    for node in code.filter_templates(recursive=False):
        _safe_remove(code, node)
    for node in code.filter_comments(recursive=True):
        _safe_remove(code, node)
    for node in code.filter_wikilinks(recursive=False):
        if not _is_article_link(str(node.title)):
            _safe_remove(code, node)


def _safe_remove(code, node) -> None:
    try:
        code.remove(node)
    except ValueError:  # already removed with a parent
        pass


def _clean_text(text: str) -> str:
    text = re.sub(r"\(\s*[,;]?\s*\)", "", text)          # brackets emptied by removed templates
    text = re.sub(r"\s+([,.;:])", r"\1", text)
    return " ".join(text.split())


def parse_paragraph(line: str) -> dict | None:
    code = mwparserfromhell.parse(line)
    links = []
    for link in code.filter_wikilinks(recursive=False):
        if _is_article_link(str(link.title)):
            target = normalise_title(str(link.title).lstrip(":"))
            anchor = link.text.strip_code().strip() if link.text else str(link.title).strip()
            links.append({"target": target, "anchor": anchor})
    text = _clean_text(code.strip_code(normalize=True, collapse=True))
    if len(text.split()) < MIN_PARAGRAPH_WORDS or not re.search(r"[.!?][\"')\]]?$", text):
        return None
    return {"text": text, "links": links}


def parse_article(title: str, page_id: str, wikitext: str) -> dict:
    code = mwparserfromhell.parse(wikitext)
    sections = []
    for section in code.get_sections(flat=True, include_lead=True):
        headings = section.filter_headings(recursive=False)
        if headings:
            heading = headings[0]
            name, level = heading.title.strip_code().strip(), heading.level
            section.remove(heading)
        else:
            name, level = "", 1   # the lead section
        if name.lower() in SKIPPED_SECTIONS:
            continue
        _drop_non_text(section)
        paragraphs = []
        for line in str(section).split("\n"):
            line = line.strip()
            if not line or line[0] in "*#:;|{!=" or line.startswith("----"):
                continue
            paragraph = parse_paragraph(line)
            if paragraph:
                paragraph["sentences"] = split_sentences(paragraph["text"])
                paragraphs.append(paragraph)
        if paragraphs:
            sections.append({"title": name, "level": level, "lead": level == 1, "paragraphs": paragraphs})
    return {"id": page_id, "title": title, "sections": sections}


def _pages(events) -> Iterator[dict]:
    """Pages from ElementTree's (event, element) "end" events of a MediaWiki export."""
    page: dict = {}
    for _, elem in events:
        tag = elem.tag.rsplit("}", 1)[-1]
        if tag == "title":
            page["title"] = elem.text or ""
        elif tag == "ns":
            page["ns"] = elem.text
        elif tag == "id" and "id" not in page:
            page["id"] = elem.text
        elif tag == "redirect":
            page["redirect"] = normalise_title(elem.get("title", ""))
        elif tag == "text":
            page["text"] = elem.text or ""
        elif tag == "page":
            yield page
            page = {}
            elem.clear()


def iter_pages(path) -> Iterator[dict]:
    """Yield {'title','id','ns','redirect','text'} for each page of a MediaWiki XML export."""
    path = require_file(path)
    opener = bz2.open if str(path).endswith(".bz2") else open
    try:
        with opener(path, "rb") as handle:
            yield from _pages(ET.iterparse(handle, events=("end",)))
    except (ET.ParseError, OSError, EOFError) as err:
        raise StageError(path, f"not a readable MediaWiki XML dump ({err})") from None


def iter_articles(path, redirects: dict[str, str], max_articles: int | None = None,
                  pages: Iterable[dict] | None = None, required: bool = True) -> Iterator[dict]:
    """Yield main-namespace articles with prose, one at a time; fill `redirects` as they pass.

    `pages` (default: every page of the dump at `path`) may be one part's; `required`: a dump without
    an article is an error (a part of one may hold only redirects)."""
    found = 0
    for page in iter_pages(path) if pages is None else pages:
        if page.get("ns") != "0":
            continue
        if page.get("redirect") or page.get("text", "").lstrip().lower().startswith("#redirect"):
            redirects[page["title"]] = page.get("redirect", "")
            continue
        article = parse_article(page["title"], page["id"], page.get("text", ""))
        if article["sections"]:
            found += 1
            yield article
            if max_articles and found >= max_articles:
                return
    if not found and required:
        raise StageError(path, "no articles with prose found in the dump")


def parse_dump(path, max_articles: int | None = None) -> tuple[list[dict], dict[str, str]]:
    """(articles, redirects) in memory: for small dumps and tests; stages stream with `iter_articles`."""
    redirects: dict[str, str] = {}
    return list(iter_articles(path, redirects, max_articles)), redirects


def title_key(title: str) -> int:
    """A title's 64-bit digest: what parts exchange instead of the titles themselves (8 bytes a title;
    two of 20M titles share one with probability ~1e-5)."""
    return int.from_bytes(hashlib.blake2b(title.encode("utf-8"), digest_size=8).digest(), "little")


def title_keys(titles: Iterable[str]) -> np.ndarray:
    return np.fromiter((title_key(t) for t in titles), dtype=np.uint64)


COUNT_KEYS = ("articles", "sections", "lead_sections", "paragraphs", "sentences", "links", "words")


class Statistics:
    """Corpus counts gathered while articles stream past (memory: titles and distinct link targets, so
    one part's, where a dump is parsed in parts: `summary` and `wiki_parts.merge_statistics`)."""

    def __init__(self):
        self.counts = Counter()
        self.titles: set[str] = set()
        self.targets: Counter = Counter()

    def add(self, article: dict) -> dict:
        self.titles.add(article["title"])
        self.counts["articles"] += 1
        for section in article["sections"]:
            self.counts["sections"] += 1
            self.counts["lead_sections"] += section["lead"]
            for paragraph in section["paragraphs"]:
                self.counts["paragraphs"] += 1
                self.counts["sentences"] += len(paragraph["sentences"])
                self.counts["words"] += len(paragraph["text"].split())
                self.counts["links"] += len(paragraph["links"])
                self.targets.update(link["target"] for link in paragraph["links"])
        return article

    def result(self, redirects: dict[str, str]) -> dict:
        inside = sum(n for target, n in self.targets.items() if redirects.get(target, target) in self.titles)
        keys = ["articles", "sections", "lead_sections", "paragraphs", "sentences", "links"]
        return {**{k: self.counts[k] for k in keys}, "redirects_dropped": len(redirects),
                "links_to_articles_in_corpus": inside, "words": self.counts["words"]}

    def summary(self) -> tuple[dict, dict[str, np.ndarray]]:
        """What a part hands to the merge: its counts, and its titles and link targets (with their
        counts) as sorted 64-bit digests."""
        targets = sorted((title_key(t), n) for t, n in self.targets.items())
        return ({k: self.counts[k] for k in COUNT_KEYS},
                {"titles": np.unique(title_keys(self.titles)),
                 "targets": np.array([k for k, _ in targets], dtype=np.uint64),
                 "target_counts": np.array([n for _, n in targets], dtype=np.int64)})


def statistics(articles: list[dict], redirects: dict[str, str]) -> dict:
    stats = Statistics()
    for article in articles:
        stats.add(article)
    return stats.result(redirects)


# --- A part of a multistream dump (wiki_parts.py plans the parts and merges them) ---------------

def _stream_texts(dump: Path, start: int, end: int, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The decompressed text of each bz2 stream in bytes [start, end) of `dump`, one stream at a time."""
    with open(dump, "rb") as handle:
        handle.seek(start)
        remaining, decompressor, out = end - start, None, []
        while remaining > 0:
            data = handle.read(min(chunk, remaining))
            if not data:
                raise StageError(dump, f"ends before byte {end}")
            position = end - remaining
            remaining -= len(data)
            while data:
                decompressor = decompressor or bz2.BZ2Decompressor()
                try:
                    out.append(decompressor.decompress(data))
                except OSError:
                    raise StageError(dump, f"no bz2 stream where the index says (near byte {position}): "
                                           "not the index of this multistream dump") from None
                if not decompressor.eof:
                    break
                yield b"".join(out)
                position += len(data) - len(decompressor.unused_data)
                data, decompressor, out = decompressor.unused_data, None, []
        if decompressor is not None:
            raise StageError(dump, f"byte {end} falls inside a bz2 stream: not a boundary of this multistream dump")


def iter_part_pages(dump, start: int, end: int) -> Iterator[dict]:
    """The pages of the streams in bytes [start, end) of a multistream dump, in dump order. A stream holds
    whole pages; the dump's first stream (its <siteinfo>) and last (the closing tag) hold none, so only
    what lies between a stream's first <page> and last </page> is parsed, inside a root of our own."""
    dump = require_file(dump)
    parser = ET.XMLPullParser(events=("start", "end"))
    parser.feed(b"<mediawiki>")
    root = next(elem for _, elem in parser.read_events())

    def events():
        for text in _stream_texts(dump, start, end):
            first, last = text.find(b"<page>"), text.rfind(b"</page>")
            if first < 0 or last < first:
                continue
            parser.feed(text[first:last + len(b"</page>")])
            yield from ((event, elem) for event, elem in parser.read_events() if event == "end")
            del root[:]   # a stream's pages are complete and already yielded: keep none of them
        parser.feed(b"</mediawiki>")
        parser.close()

    try:
        yield from _pages(events())
    except ET.ParseError as err:
        raise StageError(dump, f"bytes {start}-{end} are not MediaWiki pages ({err})") from None
