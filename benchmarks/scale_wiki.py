"""Synthetic multistream Wikipedia dumps for the scaling benchmark, made from the real excerpt in gensim's wheel.

`make_multistream_dump(out_dir, factor)` repeats the excerpt's pages `factor` times (copy c > 0 of a page gets
the title "<title> (c)" and a new page id; its links still point at the originals, so every copy links into
the corpus) and writes them as Wikimedia writes pages-articles-multistream.xml.bz2: the <siteinfo> header in
one bz2 stream, then independent streams of 100 pages, then the closing tag in one; beside it the index
(`offset:page id:title` a page, bz2). Factor 1 holds the excerpt's XML byte for byte.

    from benchmarks.scale_wiki import make_multistream_dump
    dump, index = make_multistream_dump("/tmp/wiki8x", 8)

`python -m benchmarks.scale_wiki OUT_DIR --factors 1 8 32 [--parts 4] [--run]` writes the dumps and, with
--run, parses each in parts as separate processes (run side by side, as a cluster would) and merges them,
printing every job's seconds, CPU seconds and peak RSS (from the stages' .meta.json) as JSON."""
from __future__ import annotations

import argparse
import bz2
import html
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from .workflow_harness import ROOT

PAGES_PER_STREAM = 100   # what Wikimedia's multistream dumps put in a stream
PAGE = re.compile(rb"  <page>\n.*?</page>\n", re.S)


def excerpt_path() -> Path:
    from towers.stages.prepare import resolve_dump

    return resolve_dump("gensim")


def _copy(page: bytes, copy: int, new_id: int) -> bytes:
    if copy == 0:
        return page
    page = re.sub(rb"<title>(.*?)</title>", lambda m: b"<title>" + m.group(1) + b" (%d)</title>" % copy, page, count=1)
    return re.sub(rb"<id>\d+</id>", b"<id>%d</id>" % new_id, page, count=1)   # the page id precedes the revision's


def _index_line(offset: int, page: bytes) -> str:
    title = html.unescape(re.search(rb"<title>(.*?)</title>", page).group(1).decode("utf-8"))
    page_id = re.search(rb"<id>(\d+)</id>", page).group(1).decode()
    return f"{offset}:{page_id}:{title}\n"


def make_multistream_dump(out_dir, factor: int, source=None, pages_per_stream: int = PAGES_PER_STREAM) -> tuple[Path, Path]:
    """Write `<out_dir>/enwiki-x<factor>-pages-articles-multistream.xml.bz2` and its index; return both paths.
    `source`: a MediaWiki export (.xml or .xml.bz2) whose pages are repeated; default gensim's excerpt."""
    if factor < 1:
        raise ValueError(f"factor must be at least 1, not {factor}")
    source = Path(source or excerpt_path())
    text = bz2.decompress(source.read_bytes()) if source.suffix == ".bz2" else source.read_bytes()
    pages = list(PAGE.finditer(text))
    if not pages:
        raise ValueError(f"{source}: no <page> elements")
    header, trailer = text[:pages[0].start()], text[pages[-1].end():]
    originals = [m.group(0) for m in pages]
    top_id = max(int(re.search(rb"<id>(\d+)</id>", p).group(1)) for p in originals)
    copies = [_copy(page, c, c * (top_id + 1) + n) for c in range(factor) for n, page in enumerate(originals)]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dump = out / f"enwiki-x{factor}-pages-articles-multistream.xml.bz2"
    index = out / f"enwiki-x{factor}-pages-articles-multistream-index.txt.bz2"
    lines = []
    with open(dump, "wb") as handle:
        handle.write(bz2.compress(header))
        for start in range(0, len(copies), pages_per_stream):
            stream = copies[start:start + pages_per_stream]
            offset = handle.tell()
            lines += [_index_line(offset, page) for page in stream]
            handle.write(bz2.compress(b"".join(stream)))
        handle.write(bz2.compress(trailer))
    index.write_bytes(bz2.compress("".join(lines).encode("utf-8")))
    return dump, index


def _towers(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "towers", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen, meta: Path) -> dict:
    _, err = process.communicate()
    if process.returncode:
        raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit {process.returncode}")
    record = json.loads(meta.read_text())
    return {k: record[k] for k in ("seconds", "cpu_seconds", "peak_rss_mb")}


def run_parts(dump, index, parts: int, work) -> dict:
    """Plan, parse the parts side by side (one process each) and merge: each job's seconds, CPU seconds and
    peak RSS, and the merged statistics."""
    work = Path(work)
    plan = work / "plan.json"
    jobs = {"plan": _finish(_towers("wiki-parts", "--dump", dump, "--index", index, "--parts", parts, "--out", plan),
                            Path(f"{plan}.meta.json"))}
    folders = [work / f"part{k:03d}" for k in range(parts)]
    began = time.perf_counter()
    running = [_towers("parse-wiki-part", "--dump", dump, "--plan", plan, "--part", k, "--out-dir", folder)
               for k, folder in enumerate(folders)]
    for k, (process, folder) in enumerate(zip(running, folders)):
        jobs[f"part{k:03d}"] = _finish(process, folder / "articles.jsonl.meta.json")
    jobs["parts_wall_seconds"] = round(time.perf_counter() - began, 2)
    corpus = work / "corpus"
    jobs["merge"] = _finish(_towers("merge-wiki-parts", "--parts", *folders, "--articles", corpus / "articles.jsonl",
                                    "--redirects", corpus / "redirects.json", "--stats", corpus / "stats.json"),
                            corpus / "articles.jsonl.meta.json")
    return {"jobs": jobs, "stats": json.loads((corpus / "stats.json").read_text())}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--parts", type=int, default=4)
    parser.add_argument("--run", action="store_true", help="parse each dump in parts and report every job")
    parser.add_argument("--results", action="store_true",
                        help="with --run: keep the jobs and the parts' growth in benchmarks/results.json (scale.wikipedia)")
    args = parser.parse_args(argv)
    if args.run:   # dumps made in a child: a process started by a big one reports its peak RSS as its own
        for factor in args.factors:
            subprocess.run([sys.executable, "-m", "benchmarks.scale_wiki", str(Path(args.out_dir).resolve()),
                            "--factors", str(factor)], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    results = {}
    for factor in args.factors:
        folder = Path(args.out_dir) / f"x{factor}"
        dump, index = (folder / f"enwiki-x{factor}-pages-articles-multistream{x}" for x in (".xml.bz2", "-index.txt.bz2"))
        if not args.run:
            dump, index = make_multistream_dump(folder, factor)
        results[f"x{factor}"] = {"dump": str(dump), "index": str(index), "bytes": dump.stat().st_size}
        if args.run:
            results[f"x{factor}"].update(run_parts(dump, index, args.parts, Path(args.out_dir) / f"x{factor}" / "run"))
        print(json.dumps({f"x{factor}": results[f"x{factor}"]}), flush=True)
    if args.run and args.results:
        keep(results, args.parts)
    return 0


def keep(results: dict, parts: int) -> None:
    """benchmarks/results.json, scale.wikipedia: each size's jobs, and the largest part's CPU time and peak RSS with
    their growth exponents over the sizes (log-log slope, as benchmarks/scale.py fits the MS MARCO stages)."""
    from .scale import exponent
    from .workflow_harness import record

    sizes = sorted(results, key=lambda k: int(k[1:]))
    words = [results[k]["stats"].get("words") or int(k[1:]) for k in sizes]
    largest = [max((j for n, j in results[k]["jobs"].items() if n.startswith("part") and isinstance(j, dict)),
                   key=lambda j: j["cpu_seconds"])
               for k in sizes]
    cpu, rss = [j["cpu_seconds"] for j in largest], [j["peak_rss_mb"] for j in largest]
    entry = {"parts": parts, "sizes": {k: {"bytes": results[k]["bytes"], "jobs": results[k]["jobs"]} for k in sizes},
             "largest_part": {"sizes": sizes, "cpu_seconds": cpu, "peak_rss_mb": rss,
                              "time_exponent": exponent(words, cpu), "memory_exponent": exponent(words, rss)}}
    record(("scale", "wikipedia"), entry, replace=True)
    print(json.dumps(entry["largest_part"]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
