"""Stages that fetch and shape the question data: downloads, Wikipedia dumps (whole or in parts), ReQA sets,
cold-start splits and pre-training pairs (prepare_passages.py builds the passage-ranking collections)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from ..io import (StageError, atomic_open, atomic_path, check_sha256, checksum_from_list, read_json, read_jsonl,
                  read_qrels, read_queries, require_file, write_json, write_jsonl, write_qrels, write_queries)
from . import arg, stage
from .common import verification


GENSIM_EXCERPT = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def resolve_dump(dump: str) -> Path:
    """'gensim' names the Wikipedia excerpt inside gensim 4.4.0's wheel, 'gensim:<relative path>' any
    file of the gensim package (e.g. gensim:test/test_data/enwiki-table-markup.xml.bz2); anything
    else is a path."""
    if dump == "gensim" or dump.startswith("gensim:"):
        from importlib.util import find_spec

        relative = dump.partition(":")[2] or GENSIM_EXCERPT
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise StageError(dump, "a gensim file is named by a path inside the package")
        return Path(find_spec("gensim").origin).parent / relative   # located, not imported (slow)
    return Path(dump)


@stage("parse-wiki", arg("--dump", required=True), arg("--sha256", default=""), arg("--max-articles", type=int, default=0),
       arg("--articles", required=True), arg("--redirects", required=True), arg("--stats", required=True))
def parse_wiki(a):
    from tqdm import tqdm

    from ..datasets import wiki

    dump = require_file(resolve_dump(a.dump))
    check_sha256(dump, a.sha256)
    verified = verification(dump, "sha256" if a.sha256 else None)
    redirects: dict[str, str] = {}
    counter = wiki.Statistics()
    articles = wiki.iter_articles(dump, redirects, a.max_articles or None)
    write_jsonl(a.articles, (counter.add(x) for x in tqdm(articles, desc="parse", unit="article", mininterval=5)))
    stats = counter.result(redirects)
    write_json(a.redirects, redirects)
    write_json(a.stats, stats)
    return a.articles, {**stats, "checksum": verified}


# A multistream dump in parts: plan the byte ranges once, parse each part in its own job, merge in dump order.

@stage("wiki-parts", arg("--dump", required=True, help="pages-articles-multistream.xml.bz2"),
       arg("--index", required=True, help="its pages-articles-multistream-index.txt(.bz2)"),
       arg("--parts", type=int, required=True), arg("--out", required=True))
def wiki_parts(a):
    """Split a multistream Wikipedia dump into byte ranges of whole bz2 streams, one a parse-wiki-part job."""
    from ..datasets import wiki_parts

    if a.parts < 1:
        raise StageError("--parts", f"must be at least 1, not {a.parts}")
    dump = require_file(a.dump)
    size = dump.stat().st_size
    offsets = wiki_parts.stream_offsets(a.index, size)
    parts = wiki_parts.plan_parts(offsets, size, a.parts)
    write_json(a.out, {"dump": str(dump), "bytes": size, "streams": len(offsets), "parts": parts})
    return a.out, {"streams": len(offsets), "parts": len(parts), "largest_part_bytes": max(p["end"] - p["start"] for p in parts)}


@stage("parse-wiki-part", arg("--dump", required=True), arg("--plan", required=True, help="wiki-parts' plan"),
       arg("--part", type=int, required=True), arg("--out-dir", required=True))
def parse_wiki_part(a):
    """One part of a multistream dump: its articles, redirects and the statistics merge-wiki-parts sums."""
    from tqdm import tqdm

    from ..datasets import wiki, wiki_parts

    dump = require_file(a.dump)
    plan = read_json(a.plan)
    if not isinstance(plan, dict) or not isinstance(plan.get("parts"), list) or plan.get("bytes") is None:
        raise StageError(a.plan, "not a plan of wiki-parts")
    if plan["bytes"] != dump.stat().st_size:
        raise StageError(a.plan, f"planned for a dump of {plan['bytes']} bytes, but {dump} has {dump.stat().st_size}")
    if not 0 <= a.part < len(plan["parts"]):
        raise StageError("--part", f"{a.part} is not one of the plan's {len(plan['parts'])} parts")
    part = plan["parts"][a.part]
    out = Path(a.out_dir)
    redirects: dict[str, str] = {}
    counter = wiki.Statistics()
    pages = wiki.iter_part_pages(dump, part["start"], part["end"])
    articles = wiki.iter_articles(dump, redirects, pages=pages, required=False)
    write_jsonl(out / "articles.jsonl", (counter.add(x) for x in tqdm(articles, desc=f"part {a.part}", unit="article",
                                                                          mininterval=5)))
    write_json(out / "redirects.json", redirects)
    counts = wiki_parts.write_part_summary(out, counter, redirects)
    return out / "articles.jsonl", {**counts, **part}


@stage("merge-wiki-parts", arg("--parts", required=True, nargs="+", help="parse-wiki-part folders, in dump order"),
       arg("--articles", required=True), arg("--redirects", required=True), arg("--stats", required=True))
def merge_wiki_parts(a):
    """A parted dump's articles, redirects and statistics, as parse-wiki writes them from the whole dump."""
    from ..datasets import wiki_parts

    stats = wiki_parts.merge_parts(a.parts, a.articles, a.redirects, a.stats)
    return a.articles, {**stats, "parts": len(a.parts)}


def write_reqa(out_dir, candidates, queries, qrels, extra: dict) -> dict:
    out = Path(out_dir)
    write_jsonl(out / "candidates.jsonl", candidates)
    write_queries(out / "queries.tsv", queries)
    write_qrels(out / "qrels.txt", qrels)
    stats = {"queries": len(queries), "candidates": len(candidates),
             "tuples": sum(len(v) for v in qrels.values()),
             "paragraphs": len({c["paragraph"] for c in candidates}), **extra}
    write_json(out / "stats.json", stats)
    return stats


@stage("reqa-wiki", arg("--articles", required=True), arg("--questions", required=True),
       arg("--judgements", default="", help="graded judgements of pooled sentences (data/enwiki-mini/JUDGING.md)"),
       arg("--out-dir", required=True))
def reqa_wiki(a):
    from ..datasets import reqa
    from ..datasets.judging import judged_qrels

    articles = list(read_jsonl(a.articles))
    queries, qrels, answers = reqa.resolve_questions(a.questions, articles)
    judging = {}
    if a.judgements:
        qrels, judging = judged_qrels(a.questions, a.judgements, articles, qrels, answers, queries)
    candidates = [c for article in articles for c in reqa.article_candidates(article)]
    write_jsonl(Path(a.out_dir) / "answers.jsonl", answers)
    stats = write_reqa(a.out_dir, candidates, queries, qrels,
                       {"articles_with_questions": len({x["article"] for x in answers}), **judging})
    return Path(a.out_dir) / "candidates.jsonl", stats


def pooled_reqa(paths: list, sha256s: list, build, out_dir):
    """Build ReQA from several official files (ids prefixed by file number when there are several)."""
    candidates, queries, qrels, verified = [], {}, {}, {}
    for n, path in enumerate(paths):
        expected = sha256s[n] if n < len(sha256s) and sha256s[n] != "none" else ""   # none: a local file without one
        check_sha256(require_file(path), expected)
        verified.update(verification(path, "sha256" if expected else None))
        c, q, r = build(path, id_prefix=f"{n}_" if len(paths) > 1 else "")
        candidates += c
        queries.update(q)
        qrels.update(r)
    return Path(out_dir) / "candidates.jsonl", {**write_reqa(out_dir, candidates, queries, qrels, {}), "checksum": verified}


@stage("reqa-squad", arg("--json", required=True, nargs="+"), arg("--sha256", nargs="*", default=[]),
       arg("--out-dir", required=True))
def reqa_squad(a):
    """ReQA-SQuAD from one or more official SQuAD JSON files (the paper pools train and dev)."""
    from ..datasets import reqa

    return pooled_reqa(a.json, a.sha256, reqa.build_squad, a.out_dir)


@stage("reqa-nq", arg("--jsonl", required=True, nargs="+"), arg("--sha256", nargs="*", default=[]),
       arg("--out-dir", required=True))
def reqa_nq(a):
    """ReQA-NQ from Natural Questions JSONL files (original or simplified format, plain or gzipped)."""
    from ..datasets import reqa

    return pooled_reqa(a.jsonl, a.sha256, reqa.build_nq, a.out_dir)


@stage("reqa-open", arg("--candidates", required=True), arg("--queries", required=True), arg("--qrels", required=True),
       arg("--articles", required=True, help="parsed articles (parse-wiki) that supply the extra candidates"),
       arg("--max-extra", type=int, default=0, help="sub-sample the extra candidates to this many; 0 = all"),
       arg("--seed", type=int, required=True), arg("--id-prefix", default="extra:"), arg("--out-dir", required=True))
def reqa_open(a):
    """Open-domain ReQA (Chang et al. sec. 4.4): a dataset's candidates plus sentences of other articles."""
    import shutil

    from ..datasets import reqa

    if a.max_extra < 0:
        raise StageError("--max-extra", f"must be 0 (all) or positive, not {a.max_extra}")
    queries, qrels = read_queries(a.queries), read_qrels(a.qrels)
    base = reqa.base_candidate_index(a.candidates)
    reqa.check_qrels_point_at(qrels, base["ids"], a.qrels)
    plan = reqa.plan_extra_candidates(a.articles, base, a.id_prefix, a.max_extra, a.seed)
    counts: dict = {}
    out = Path(a.out_dir)
    extras = reqa.extra_candidates(a.articles, base, a.id_prefix, plan, counts)
    rows = (row for part in (read_jsonl(a.candidates), extras) for row in part)   # base candidates first
    total = write_jsonl(out / "candidates.jsonl", rows)
    for source, name in ((a.queries, "queries.tsv"), (a.qrels, "qrels.txt")):   # unchanged, byte for byte
        with atomic_path(out / name) as tmp:
            shutil.copyfile(source, tmp)
    stats = {"queries": len(queries), "candidates": total, "tuples": sum(len(v) for v in qrels.values()),
             "base_candidates": len(base["ids"]), "extra_candidates": counts["extra_candidates"],
             "extra_available": plan["extra_available"], "extra_articles": plan["extra_articles"],
             "extra_articles_used": counts["extra_articles_used"], "skipped_articles": plan["skipped_articles"],
             "max_extra": a.max_extra, "seed": a.seed}
    write_json(out / "stats.json", stats)
    return out / "candidates.jsonl", stats


def fetch(url: str, out, digest=None, timeout: int = 60) -> None:
    """Copy a URL (http(s) or file) into `out` in 1 MiB blocks, feeding `digest` as it goes."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=timeout) as response, open(out, "wb") as handle:
        while block := response.read(1 << 20):
            handle.write(block)
            if digest is not None:
                digest.update(block)


@stage("download", arg("--url", required=True), arg("--sha256", default=""),
       arg("--sha1-from", default="", help="URL of a published checksum list (Wikimedia's <wiki>-<date>-sha1sums.txt)"
                                            " whose line for the URL's file name gives its sha1"),
       arg("--md5", default="", help="the file's md5, where that is all its publisher (or ir_datasets) lists"),
       arg("--no-checksum", action="store_true", help="keep the file unchecked (params: `checksum: none`)"),
       arg("--out", required=True), arg("--retries", type=int, default=3))
def download(a):
    """Fetch an official file, retrying on network errors; keep it only if its sha256, md5 or published sha1 matches."""
    import hashlib
    import tempfile
    import urllib.parse

    from ..io import check_digest_format

    given = [flag for flag, value in (("--sha256", a.sha256), ("--sha1-from", a.sha1_from), ("--md5", a.md5)) if value]
    if a.no_checksum and given:
        raise StageError(a.out, f"--no-checksum and {given[0]} contradict each other")
    if not given and not a.no_checksum:
        raise StageError(a.out, "give one of --sha256, --sha1-from and --md5 to check the download against"
                                " (or --no-checksum)")
    if len(given) > 1:
        raise StageError(a.out, f"give only one of --sha256, --sha1-from and --md5, not {' and '.join(given)}")
    name = urllib.parse.unquote(urllib.parse.urlsplit(a.url).path.rsplit("/", 1)[-1])
    last = None
    for attempt in range(1, a.retries + 1):
        try:
            if a.sha1_from:
                with tempfile.TemporaryDirectory() as folder:
                    fetch(a.sha1_from, Path(folder) / "sums")
                    sums = (Path(folder) / "sums").read_text(encoding="utf-8", errors="replace")
                algorithm, expected, source = "sha1", checksum_from_list(sums, name, a.sha1_from), a.sha1_from
            elif a.no_checksum:
                algorithm, expected, source = None, None, None
            else:
                algorithm = "sha256" if a.sha256 else "md5"
                expected, source = check_digest_format(algorithm, a.sha256 or a.md5, f"--{algorithm}"), None
            digest = hashlib.new(algorithm) if algorithm else None
            with atomic_path(a.out) as tmp:
                fetch(a.url, tmp, digest)
                if digest is not None and digest.hexdigest() != expected:
                    origin = f" from {source}" if source else ""
                    raise StageError(a.out, f"{algorithm} mismatch (expected {expected}{origin}); "
                                            "the file is corrupt or a different version")
            if digest is None:
                print(f"warning: {a.url} was downloaded unchecked (checksum: none)", file=sys.stderr)
                return a.out, {"url": a.url, "attempts": attempt, "checksum": "none"}
            return a.out, {"url": a.url, "attempts": attempt, algorithm: expected}
        except OSError as err:
            last = err
            time.sleep(min(30, 2 ** attempt))
    raise StageError(a.url, f"download failed after {a.retries} attempts ({last})")


@stage("split", arg("--queries", required=True), arg("--train-fraction", type=float, required=True),
       arg("--valid-fraction", type=float, default=0.1), arg("--seed", type=int, required=True),
       arg("--qrels", default="", help="questions that share an answer (a document judged relevant) stay on one side"),
       arg("--out-dir", required=True))
def split(a):
    from ..datasets.splits import cold_start_split
    from ..io import answer_sets

    queries = read_queries(a.queries)
    answers = answer_sets(read_qrels(a.qrels)) if a.qrels else None
    parts = cold_start_split(queries, a.train_fraction, a.valid_fraction, a.seed, answers=answers)
    if not parts["test"]:
        raise StageError(a.queries, f"train fraction {a.train_fraction} leaves no test questions")
    for name, qids in parts.items():   # an empty file when a part has no question (e.g. valid of a 1% split)
        write_queries(Path(a.out_dir) / f"{name}.tsv", {q: queries[q] for q in qids})
    return Path(a.out_dir) / "test.tsv", {k: len(v) for k, v in parts.items()}


@stage("split-all", arg("--queries", required=True), arg("--out-dir", required=True))
def split_all(a):
    """Split "all": every question on the test side (train and valid empty), so any run, BM25's or an
    untrained checkpoint's, is scored over all of a QA dataset's questions."""
    queries = read_queries(a.queries)
    for name in ("train", "valid"):
        write_queries(Path(a.out_dir) / f"{name}.tsv", {})
    write_queries(Path(a.out_dir) / "test.tsv", queries)
    return Path(a.out_dir) / "test.tsv", {"train": 0, "valid": 0, "test": len(queries)}


@stage("pretraining-pairs", arg("--articles", required=True), arg("--redirects", default=""),
       arg("--task", required=True, help="ict, bfs, wlp or a '+'-joined uniform mixture such as ict+bfs+wlp"),
       arg("--seed", type=int, required=True), arg("--limit", type=int, default=0, help="0 = all"),
       arg("--per-article", type=int, default=1, help="BFS: pairs per article; WLP: per linked-to article"),
       arg("--tokenizer", required=True, help="WordPiece tokenizer for the statistics"),
       arg("--out", required=True), arg("--stats", required=True))
def pretraining_pairs(a):
    """Chang et al.'s pre-training (query, doc) pairs from parsed articles, with Table 1's statistics."""
    from tqdm import tqdm
    from transformers import AutoTokenizer

    from ..datasets.pretraining_pairs import generate_pairs, pair_statistics

    redirects = read_json(a.redirects) if a.redirects else None
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    try:
        pairs = generate_pairs(a.articles, a.task, a.seed, redirects, a.limit or None, a.per_article,
                               spill_dir=Path(a.out).parent)   # WLP's drawn queries, beside the output
    except ValueError as err:
        raise StageError("--task", str(err)) from None
    count = write_jsonl(a.out, tqdm(pairs, desc=a.task, unit="pair", mininterval=5))
    if not count:
        raise StageError(a.articles, f"no {a.task} pair could be made")
    stats = {"task": a.task, **pair_statistics(read_jsonl(a.out), AutoTokenizer.from_pretrained(a.tokenizer))}
    write_json(a.stats, stats)
    return a.out, stats


@stage("evaluation-qrels", arg("--articles", required=True),
       arg("--questions", required=True, nargs="+", help="question files as PATH=PREFIX, the prefix of the ids the "
                                                         "dataset gives their questions (q, n)"),
       arg("--judgements", required=True, nargs="+"), arg("--pools", required=True, nargs="+"),
       arg("--qrels", required=True, help="the dataset's own qrels.txt: each of its questions must be graded here"),
       arg("--passages", action="store_true", help="grade paragraphs, each at its best sentence's grade"),
       arg("--train", default="", help="passages: the split's training queries"),
       arg("--test", default="", help="passages: the split's test queries"),
       arg("--stats", default="", help="passages: the collection's stats.json (unexposed_test_queries by paragraph)"),
       arg("--out", required=True), arg("--sources", required=True), arg("--unexposed", default=""))
def evaluation_qrels(a):
    """The qrels the tables are scored on (data/enwiki-mini/JUDGING.md): the judge's grade stands over the
    writer's label, over every pool judged; and for a passage set, the test questions no training question
    shares a fact with (same answer string in an article, or a sentence graded for both)."""
    from ..datasets import judging
    from ..datasets.wiki_passages import paragraph_grades

    articles = list(read_jsonl(a.articles))
    qrels, sources, answers = {}, [], {}
    for spec in a.questions:
        path, _, prefix = spec.rpartition("=")
        if not path or not prefix:
            raise StageError("--questions", f"{spec!r} is not PATH=PREFIX")
        graded, labelled, rows = judging.judge_stands(path, a.judgements, a.pools, articles, prefix)
        qrels.update(graded)
        sources += rows
        for item in labelled:
            answers.setdefault(item["qid"], (item["article"], set()))[1].add(judging.normalised_answer(item["answer"]))
    own = read_qrels(a.qrels)
    missing = [qid for qid in own if qid[:1] in {s.rpartition("=")[2] for s in a.questions} and qid not in qrels]
    if missing:
        raise StageError(a.qrels, f"question {missing[0]} is not among {', '.join(a.questions)}")
    scored = {qid: paragraph_grades(docs) if a.passages else docs for qid, docs in qrels.items()}
    write_qrels(a.out, scored)
    with atomic_open(a.sources) as handle:
        handle.write("qid\tsentence\tgrade\tsource\n")
        handle.writelines(f"{r['qid']}\t{r['doc']}\t{r['grade']}\t{r['source']}\n" for r in sources)
    counts = {"queries": len(scored), "pairs": sum(map(len, scored.values())),
              "sources": {s: sum(r["source"] == s for r in sources) for s in sorted({r["source"] for r in sources})}}
    if a.unexposed:
        if not (a.train and a.test and a.stats):
            raise StageError("--unexposed", "needs --train, --test and --stats")
        groups = judging.fact_groups(answers, qrels)
        by_paragraph = set(read_json(a.stats).get("unexposed_test_queries", []))
        test = [qid for qid in read_queries(a.test) if qid in by_paragraph]
        unexposed = judging.unexposed_by_fact(test, list(read_queries(a.train)), groups)
        counts |= {"unexposed_test_queries": len(unexposed), "unexposed_by_paragraph": len(by_paragraph),
                   "fact_groups": len(set(groups.values()))}
        write_json(a.unexposed, {"unexposed_test_queries": unexposed, **{k: v for k, v in counts.items()
                                                                          if k != "unexposed_test_queries"}})
    return a.out, counts
