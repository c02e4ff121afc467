"""A multistream Wikipedia dump in parts: the plan (byte ranges of whole bz2 streams, from the dump's index),
each part's summary (its counts, and digests of its titles, link targets and redirects) and the merge of the
parts, in dump order, into the articles, redirects and statistics parse-wiki writes from the whole dump. A part's
pages are read by wiki.iter_part_pages."""
from __future__ import annotations

import bz2
import json
from collections import Counter
from pathlib import Path
from typing import Iterable

import numpy as np

from ..io import StageError, require_file
from .wiki import COUNT_KEYS, Statistics, title_key, title_keys


def stream_offsets(index, dump_size: int) -> np.ndarray:
    """The distinct byte offsets of a multistream dump's page streams, from its index
    (pages-articles-multistream-index.txt[.bz2]: one `offset:page id:title` line a page)."""
    index = require_file(index)
    opener = bz2.open if str(index).endswith(".bz2") else open
    offsets, last = [], -1
    try:
        with opener(index, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                head = line.split(":", 1)[0]
                if not head.isdigit():
                    raise StageError(index, f"line {number} is not 'offset:page id:title'")
                offset = int(head)
                if offset < last or offset >= dump_size:
                    raise StageError(index, f"line {number}: offset {offset} is out of order or past the dump's "
                                            f"{dump_size} bytes (an index of another dump?)")
                if offset != last:
                    offsets.append(offset)
                    last = offset
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise StageError(index, f"not a readable multistream index ({err})") from None
    if not offsets:
        raise StageError(index, "no streams listed")
    return np.array(offsets, dtype=np.int64)


def plan_parts(offsets: np.ndarray, dump_size: int, parts: int) -> list[dict]:
    """`parts` contiguous byte ranges of whole streams, of about equal compressed size, covering the first
    page stream to the end of the file (a range past the last page stream holds only the closing tag)."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    first = int(offsets[0])
    marks = first + (dump_size - first) * np.arange(parts, dtype=np.int64) // parts
    at = np.searchsorted(offsets, marks)   # the first stream at or after each mark
    starts = np.where(at < len(offsets), offsets[np.minimum(at, len(offsets) - 1)], dump_size)
    ends = np.append(starts[1:], dump_size)
    return [{"part": k, "start": int(s), "end": int(e), "streams": int(np.searchsorted(offsets, e) - np.searchsorted(offsets, s))}
            for k, (s, e) in enumerate(zip(starts, ends))]


def merge_statistics(parts: Iterable[tuple[dict, dict[str, np.ndarray]]], titles: np.ndarray,
                     redirects: Iterable[tuple[str, str]], redirect_count: int) -> dict:
    """`Statistics.result` of a whole dump from its parts' summaries, in memory of 8 bytes an article
    (`titles`: every part's title digests) and 16 bytes a redirect, plus one part's link targets at a time."""
    from array import array

    sources, resolved_to = array("Q"), array("Q")
    for source, target in redirects:
        sources.append(title_key(source))
        resolved_to.append(title_key(target))
    order = np.argsort(np.frombuffer(sources, dtype=np.uint64), kind="stable")
    sources = np.frombuffer(sources, dtype=np.uint64)[order]
    resolved_to = np.frombuffer(resolved_to, dtype=np.uint64)[order]
    totals = Counter()
    inside = 0
    for counts, links in parts:
        totals.update({k: counts[k] for k in COUNT_KEYS})
        targets = links["targets"].copy()
        at = np.searchsorted(sources, targets).clip(max=max(len(sources) - 1, 0))
        hit = (sources[at] == targets) if len(sources) else np.zeros(len(targets), dtype=bool)
        targets[hit] = resolved_to[at[hit]]   # a link to a redirect counts as a link to its target
        inside += int(links["target_counts"][np.isin(targets, titles)].sum())
    keys = ["articles", "sections", "lead_sections", "paragraphs", "sentences", "links"]
    return {**{k: totals[k] for k in keys}, "redirects_dropped": redirect_count,
            "links_to_articles_in_corpus": inside, "words": totals["words"]}


PART_FILES = ("articles.jsonl", "redirects.json", "stats.json", "links.npz")


def write_part_summary(out_dir, stats: Statistics, redirects: dict[str, str]) -> dict:
    """A part's stats.json (its counts) and links.npz (digests of its titles, link targets and redirects)."""
    from ..io import atomic_path, write_json

    counts, links = stats.summary()
    with atomic_path(Path(out_dir) / "links.npz") as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, redirects=np.sort(title_keys(redirects)), **links)
    counts = {**counts, "redirects": len(redirects)}
    write_json(Path(out_dir) / "stats.json", counts)
    return counts


def _part_files(part_dir) -> dict[str, Path]:
    files = {name: Path(part_dir) / name for name in PART_FILES}
    for name, path in files.items():
        if name == "articles.jsonl" and path.is_file():
            continue   # a part without an article has an empty one
        require_file(path)
    return files


def _read_redirects(path) -> dict[str, str]:
    with open(path, encoding="utf-8") as handle:
        try:
            redirects = json.load(handle)
        except json.JSONDecodeError as err:
            raise StageError(path, f"not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(redirects, dict):
        raise StageError(path, "not a redirects map (title -> target)")
    return redirects


def _write_redirects(handle, parts: list[dict[str, Path]]) -> None:
    """The parts' redirects as one JSON object, written as json.dump(indent=2) writes a dict, one part in memory."""
    first = True
    handle.write("{")
    for files in parts:
        for source, target in _read_redirects(files["redirects.json"]).items():
            handle.write(("\n" if first else ",\n") + f"  {json.dumps(source, ensure_ascii=False)}: "
                         f"{json.dumps(target, ensure_ascii=False)}")
            first = False
    handle.write("}\n" if first else "\n}\n")


def merge_parts(part_dirs: list, articles_out, redirects_out, stats_out) -> dict:
    """The articles, redirects and statistics of a whole dump from its parts' (in dump order): the same files
    parse-wiki writes from the dump in one process. Memory: 8 bytes an article and 16 a redirect (digests),
    plus one part's redirects and link targets."""
    import shutil

    from ..io import atomic_open, read_json, write_json

    parts = [_part_files(d) for d in part_dirs]
    if not parts:
        raise StageError(articles_out, "no parts to merge")
    with atomic_open(articles_out, "wb") as out:
        for files in parts:
            with open(files["articles.jsonl"], "rb") as handle:
                shutil.copyfileobj(handle, out, 1 << 20)
    keys = [np.load(files["links.npz"])["redirects"] for files in parts]
    redirect_keys = np.concatenate(keys)
    if len(np.unique(redirect_keys)) == len(redirect_keys):   # the norm: every title once in a dump
        with atomic_open(redirects_out) as out:
            _write_redirects(out, parts)
        redirect_count = len(redirect_keys)

        def redirect_items():
            for files in parts:
                yield from _read_redirects(files["redirects.json"]).items()
    else:   # a title redirected in two parts: the later target wins, at the first place, as in one process
        merged: dict[str, str] = {}
        for files in parts:
            merged.update(_read_redirects(files["redirects.json"]))
        write_json(redirects_out, merged)
        redirect_count = len(merged)

        def redirect_items():
            return merged.items()
    del keys, redirect_keys
    titles = np.unique(np.concatenate([np.load(files["links.npz"])["titles"] for files in parts]))

    def summaries():
        for files in parts:
            yield read_json(files["stats.json"]), np.load(files["links.npz"])

    stats = merge_statistics(summaries(), titles, redirect_items(), redirect_count)
    if not stats["articles"]:
        raise StageError(part_dirs[0], "no articles with prose found in any part of the dump")
    write_json(stats_out, stats)
    return stats
