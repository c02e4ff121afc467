"""One console command per stage: `python -m towers <stage> ...`.

Stages take explicit paths and parameters (never params.yaml), write outputs atomically and a
`<output>.meta.json` beside the main output (arguments, versions, counts, seconds). Input
problems end the stage with one line, `error: <file>: <problem>`, and exit status 1."""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from .io import (StageError, atomic_path, check_sha256, checksum_from_list, read_json, read_jsonl, read_qrels,
                 read_queries, read_run, require_file, versions, write_json, write_jsonl, write_qrels, write_queries,
                 write_run)

GENSIM_EXCERPT = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
STAGES = {}


def stage(name: str, *arguments):
    """Register a stage: `arguments` are (flag, argparse keywords) pairs."""
    def register(func):
        STAGES[name] = (func, arguments)
        return func
    return register


def arg(flag, **kw):
    return (flag, kw)


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


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


def load_candidates(path) -> list[dict]:
    rows = list(read_jsonl(path))
    if not rows:
        raise StageError(path, "no candidates")
    return rows


# --- data ---------------------------------------------------------------------------------------

@stage("parse-wiki", arg("--dump", required=True), arg("--sha256", default=""), arg("--max-articles", type=int, default=0),
       arg("--articles", required=True), arg("--redirects", required=True), arg("--stats", required=True))
def parse_wiki(a):
    from tqdm import tqdm

    from . import wiki

    dump = require_file(resolve_dump(a.dump))
    check_sha256(dump, a.sha256)
    redirects: dict[str, str] = {}
    counter = wiki.Statistics()
    articles = wiki.iter_articles(dump, redirects, a.max_articles or None)
    write_jsonl(a.articles, (counter.add(x) for x in tqdm(articles, desc="parse", unit="article", mininterval=5)))
    stats = counter.result(redirects)
    write_json(a.redirects, redirects)
    write_json(a.stats, stats)
    return a.articles, stats


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


@stage("reqa-wiki", arg("--articles", required=True), arg("--questions", required=True), arg("--out-dir", required=True))
def reqa_wiki(a):
    from . import reqa

    articles = list(read_jsonl(a.articles))
    queries, qrels, answers = reqa.resolve_questions(a.questions, articles)
    candidates = [c for article in articles for c in reqa.article_candidates(article)]
    write_jsonl(Path(a.out_dir) / "answers.jsonl", answers)
    stats = write_reqa(a.out_dir, candidates, queries, qrels,
                       {"articles_with_questions": len({x["article"] for x in answers})})
    return Path(a.out_dir) / "candidates.jsonl", stats


def pooled_reqa(paths: list, sha256s: list, build, out_dir):
    """Build ReQA from several official files (ids prefixed by file number when there are several)."""
    candidates, queries, qrels = [], {}, {}
    for n, path in enumerate(paths):
        check_sha256(require_file(path), sha256s[n] if n < len(sha256s) else "")
        c, q, r = build(path, id_prefix=f"{n}_" if len(paths) > 1 else "")
        candidates += c
        queries.update(q)
        qrels.update(r)
    return Path(out_dir) / "candidates.jsonl", write_reqa(out_dir, candidates, queries, qrels, {})


@stage("reqa-squad", arg("--json", required=True, nargs="+"), arg("--sha256", nargs="*", default=[]),
       arg("--out-dir", required=True))
def reqa_squad(a):
    """ReQA-SQuAD from one or more official SQuAD JSON files (the paper pools train and dev)."""
    from . import reqa

    return pooled_reqa(a.json, a.sha256, reqa.build_squad, a.out_dir)


@stage("reqa-nq", arg("--jsonl", required=True, nargs="+"), arg("--sha256", nargs="*", default=[]),
       arg("--out-dir", required=True))
def reqa_nq(a):
    """ReQA-NQ from Natural Questions JSONL files (original or simplified format, plain or gzipped)."""
    from . import reqa

    return pooled_reqa(a.jsonl, a.sha256, reqa.build_nq, a.out_dir)


@stage("reqa-open", arg("--candidates", required=True), arg("--queries", required=True), arg("--qrels", required=True),
       arg("--articles", required=True, help="parsed articles (parse-wiki) that supply the extra candidates"),
       arg("--max-extra", type=int, default=0, help="sub-sample the extra candidates to this many; 0 = all"),
       arg("--seed", type=int, required=True), arg("--id-prefix", default="extra:"), arg("--out-dir", required=True))
def reqa_open(a):
    """Open-domain ReQA (Chang et al. sec. 4.4): a dataset's candidates plus sentences of other articles."""
    import shutil

    from . import reqa

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

    from .io import check_digest_format

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


# --- passage ranking (RepBERT): passage collections, their queries and one "dev" split ---------------

def source_checks(path, a) -> None:
    """--sha256/--md5 of a source file, when given (a folder has no checksum)."""
    from .io import check_md5

    if Path(path).is_dir():
        if a.sha256 or a.md5:
            raise StageError(path, "a folder has no checksum: give --sha256 or --md5 for a file only")
        return
    check_sha256(require_file(path), a.sha256)
    check_md5(path, a.md5)


def passage_args(max_valid=True):
    return (arg("--seed", type=int, required=True),
            arg("--valid-fraction", type=float, default=0.1, help="of the training queries, held out as valid"),
            *((arg("--max-valid", type=int, default=0, help="at most this many valid queries; 0 = no cap"),)
              if max_valid else ()),
            arg("--out-dir", required=True, help="folder of candidates.jsonl, queries.tsv, qrels.txt, stats.json"),
            arg("--split-dir", required=True, help="folder of the dev split's train.tsv, valid.tsv, test.tsv"))


def build_passages(a, build, **kw):
    """Run a towers.passages builder into temporary outputs, renamed into place together on success."""
    from .passages import atomic_outputs

    if not 0 <= a.valid_fraction < 1:
        raise StageError("--valid-fraction", f"must be at least 0 and below 1, not {a.valid_fraction}")
    if getattr(a, "max_valid", 0) < 0:
        raise StageError("--max-valid", f"must be 0 (no cap) or positive, not {a.max_valid}")
    with atomic_outputs(a.out_dir, a.split_dir) as tmp:
        stats = build(tmp=tmp, seed=a.seed, valid_fraction=a.valid_fraction, **kw)
    return Path(a.out_dir) / "candidates.jsonl", stats


@stage("passages-msmarco", arg("--source", required=True, help="a folder, or a tar archive such as "
                                                                   "collectionandqueries.tar.gz"),
       arg("--collection", default="collection.tsv"),
       arg("--train", default="train", help="queries.<x>.tsv and qrels.<x>.tsv for training; '' = none"),
       arg("--dev", default="dev.small", help="queries.<x>.tsv and qrels.<x>.tsv for evaluation (the test side)"),
       arg("--sha256", default=""), arg("--md5", default=""), *passage_args())
def passages_msmarco(a):
    """Passage ranking from the MS MARCO TSV form (official archive, or a folder of one's own)."""
    from .passages import build_msmarco

    source_checks(a.source, a)
    return build_passages(a, build_msmarco, source=a.source, collection=a.collection, train=a.train, dev=a.dev,
                          max_valid=a.max_valid)


@stage("passages-graded", arg("--queries", required=True, help="qid<TAB>text, optionally gzipped"),
       arg("--qrels", required=True, help="TREC qrels with grades (qid Q0 docid grade)"),
       arg("--candidates", required=True, help="the base dataset's candidates.jsonl (the collection searched)"),
       arg("--out-dir", required=True), arg("--split-dir", required=True))
def passages_graded(a):
    """A graded evaluation set (TREC DL 2019) over another passage dataset's collection (downloads are
    checked by rule download)."""
    import contextlib

    from .passages import SPLIT_FILES, build_graded

    names = {"queries.tsv": Path(a.out_dir) / "queries.tsv", "qrels.txt": Path(a.out_dir) / "qrels.txt",
             "stats.json": Path(a.out_dir) / "stats.json",
             **{f"split/{name}": Path(a.split_dir) / name for name in SPLIT_FILES}}
    with contextlib.ExitStack() as stack:
        tmp = {key: stack.enter_context(atomic_path(path)) for key, path in names.items()}
        stats = build_graded(a.queries, a.qrels, a.candidates, tmp)
    return names["qrels.txt"], stats


@stage("passages-beir", arg("--source", required=True, help="a BEIR dataset folder, or its zip"),
       arg("--eval-split", default="test", help="qrels/<x>.tsv: the test side"),
       arg("--train-split", default="", help="qrels/<x>.tsv for training; '' = none"),
       arg("--sha256", default=""), arg("--md5", default=""), *passage_args())
def passages_beir(a):
    """Passage ranking from the BEIR JSONL form (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)."""
    from .passages import build_beir

    source_checks(a.source, a)
    return build_passages(a, build_beir, source=a.source, eval_split=a.eval_split, train_split=a.train_split,
                          max_valid=a.max_valid)


@stage("passages-wiki", arg("--articles", required=True, help="parsed articles (parse-wiki)"),
       arg("--questions", required=True, help="the ReQA question set (article, question, answer, sentence_start)"),
       arg("--ict-queries", type=int, default=0, help="ICT pseudo-queries added to train"),
       arg("--dev-fraction", type=float, default=0.2, help="of the questions, the test side"), *passage_args(False))
def passages_wiki(a):
    """Passage ranking from parsed Wikipedia articles: paragraphs as passages, questions + ICT pseudo-queries."""
    from .passages import build_wiki

    return build_passages(a, build_wiki, articles_path=a.articles, questions_path=a.questions,
                          ict_queries=a.ict_queries, dev_fraction=a.dev_fraction)


@stage("passages-triples", arg("--triples", required=True, help="MS MARCO text triples: .tsv, .tsv.gz or a tar archive"),
       arg("--member", default="", help="the triples file inside an archive; default: the archive's name as .tsv"),
       arg("--sha256", default=""), arg("--md5", default=""),
       arg("--candidates", required=True), arg("--queries", required=True, help="the training queries (split train.tsv)"),
       arg("--qrels", required=True), arg("--max-triples", type=int, default=0, help="read at most this many; 0 = all"),
       arg("--out", required=True, help="qid<TAB>positive pid<TAB>negative pid"))
def passages_triples(a):
    """MS MARCO's text triples (query, positive, negative) as ids, for the training queries."""
    from .io import atomic_open
    from .passages import PassageLookup, Source, progress, read_triples, triples_to_ids

    if a.max_triples < 0:
        raise StageError("--max-triples", f"must be 0 (all) or positive, not {a.max_triples}")
    source_checks(a.triples, a)
    name = Path(a.triples).name
    member = a.member or next((name[:-len(s)] + ".tsv" for s in (".tar.gz", ".tgz", ".tar") if name.endswith(s)), name)
    queries, qrels = read_queries(a.queries), read_qrels(a.qrels)
    lookup = PassageLookup(a.candidates)
    with atomic_open(a.out) as out:
        for _, where, handle in Source(a.triples).members([member]):
            counts = triples_to_ids(progress(read_triples(handle, where), "triples", "triple"), lookup, queries,
                                    qrels, out, a.max_triples)
            break          # a tar is not read past its triples (--max-triples stops early)
        if not counts["triples"]:
            raise StageError(a.triples, f"no triple maps to a training query and its relevant passage ({counts})")
    return a.out, {**counts, "max_triples": a.max_triples}


@stage("split", arg("--queries", required=True), arg("--train-fraction", type=float, required=True),
       arg("--valid-fraction", type=float, default=0.1), arg("--seed", type=int, required=True),
       arg("--out-dir", required=True))
def split(a):
    from .splits import cold_start_split

    queries = read_queries(a.queries)
    parts = cold_start_split(queries, a.train_fraction, a.valid_fraction, a.seed)
    if not parts["test"]:
        raise StageError(a.queries, f"train fraction {a.train_fraction} leaves no test questions")
    for name, qids in parts.items():   # an empty file when a part has no question (e.g. valid of a 1% split)
        write_queries(Path(a.out_dir) / f"{name}.tsv", {q: queries[q] for q in qids})
    return Path(a.out_dir) / "test.tsv", {k: len(v) for k, v in parts.items()}


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

    from .pretraining_pairs import generate_pairs, pair_statistics

    redirects = read_json(a.redirects) if a.redirects else None
    try:
        pairs = generate_pairs(a.articles, a.task, a.seed, redirects, a.limit or None, a.per_article)
    except ValueError as err:
        raise StageError("--task", str(err)) from None
    count = write_jsonl(a.out, tqdm(pairs, desc=a.task, unit="pair", mininterval=5))
    if not count:
        raise StageError(a.articles, f"no {a.task} pair could be made")
    stats = {"task": a.task, **pair_statistics(read_jsonl(a.out), AutoTokenizer.from_pretrained(a.tokenizer))}
    write_json(a.stats, stats)
    return a.out, stats


# --- BM25 ---------------------------------------------------------------------------------------

@stage("bm25-index", arg("--candidates", required=True), arg("--index", required=True), arg("--threads", type=int, default=2))
def bm25_index(a):
    from . import bm25

    count = bm25.build_index(a.candidates, a.index, a.threads)
    return a.index, {"documents": count}


@stage("bm25-search", arg("--index", required=True), arg("--queries", required=True), arg("--run", required=True),
       arg("--k1", type=float, required=True), arg("--b", type=float, required=True), arg("--depth", type=int, required=True),
       arg("--threads", type=int, default=2))
def bm25_search(a):
    from . import bm25

    n = bm25.search(a.index, a.queries, a.run, a.k1, a.b, a.depth, a.threads, tag=f"bm25_k1={a.k1}_b={a.b}")
    return a.run, {"queries": n}


# --- dense --------------------------------------------------------------------------------------

def arch_args():
    return (arg("--hidden", type=int, required=True), arg("--layers", type=int, required=True),
            arg("--heads", type=int, required=True), arg("--intermediate", type=int, required=True),
            arg("--max-positions", type=int, required=True))


def arch_of(a) -> dict:
    return {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "intermediate": a.intermediate,
            "max_positions": a.max_positions}


def unique_paragraphs(path) -> list[str]:
    """The paragraphs of ReQA candidates, passages of a passage collection, or the paragraphs of parsed
    articles (a pre-training corpus)."""
    texts = (c["paragraph"] if "paragraph" in c else c["contents"] if "contents" in c else   # passages
             [p["text"] for section in c.get("sections", []) for p in section["paragraphs"]]
             for c in read_jsonl(path))
    return list(dict.fromkeys(t for text in texts for t in ([text] if isinstance(text, str) else text)))


def paragraph_sentences(candidates_path) -> list[list[str]]:
    """Each paragraph's sentences in order (candidates are written paragraph by paragraph)."""
    grouped: dict[str, list[str]] = {}
    for c in read_jsonl(candidates_path):
        grouped.setdefault(c["paragraph"], []).append(c["sentence"])
    return list(grouped.values())


@stage("tokenizer", arg("--candidates", required=True), arg("--out", required=True), arg("--vocab-size", type=int, required=True),
       arg("--min-frequency", type=int, default=2), arg("--lowercase", type=int, default=1),
       arg("--hub-model", default=""))
def tokenizer(a):
    if a.hub_model:   # paper profile: the hub model's own vocabulary
        from transformers import AutoTokenizer

        with atomic_path(a.out) as tmp:
            AutoTokenizer.from_pretrained(a.hub_model).save_pretrained(tmp)
        return a.out, {"hub_model": a.hub_model}
    from .tokenizer import train_wordpiece

    with atomic_path(a.out) as tmp:
        size = train_wordpiece(unique_paragraphs(a.candidates), tmp, a.vocab_size, a.min_frequency, bool(a.lowercase))
    return a.out, {"vocab_size": size}


@stage("init-random", arg("--tokenizer", required=True), arg("--out", required=True), arg("--seed", type=int, required=True),
       arg("--hub-model", default=""), *arch_args())
def init_random(a):
    from .models import random_encoder

    arch = arch_of(a)
    if a.hub_model:   # the hub model's architecture, fresh weights
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(a.hub_model)
        # --layers still applies: Chang et al.'s ablation has 4-layer towers of BERT-base's shape
        arch = {"hidden": cfg.hidden_size, "layers": a.layers, "heads": cfg.num_attention_heads,
                "intermediate": cfg.intermediate_size, "max_positions": cfg.max_position_embeddings}
    with atomic_path(a.out) as tmp:
        random_encoder(a.tokenizer, tmp, arch, a.seed)
    return a.out, {"arch": arch}


@stage("pretrain-mlm", arg("--candidates", required=True), arg("--tokenizer", required=True), arg("--out", required=True),
       arg("--state-dir", required=True), arg("--seed", type=int, required=True), arg("--steps", type=int, required=True),
       arg("--batch-size", type=int, required=True), arg("--lr", type=float, required=True),
       arg("--warmup-ratio", type=float, required=True), arg("--max-length", type=int, required=True),
       arg("--mask-probability", type=float, default=0.15), arg("--checkpoint-every", type=int, default=100),
       arg("--hub-model", default=""), arg("--log", default=None), arg("--stop-after-step", type=int, default=None),
       arg("--nsp", type=int, default=0, help="1: add Next Sentence Prediction on sentence pairs of each paragraph"),
       arg("--init-hub-model", default="", help="continue pre-training from this hub checkpoint"),
       *arch_args())
def pretrain_mlm(a):
    if a.hub_model:   # paper profile: an MLM-pre-trained checkpoint from the hub
        from transformers import AutoModel, AutoTokenizer

        with atomic_path(a.out) as tmp:
            AutoModel.from_pretrained(a.hub_model).save_pretrained(tmp)
            AutoTokenizer.from_pretrained(a.hub_model).save_pretrained(tmp)
        return a.out, {"hub_model": a.hub_model}
    from .training import loop, mlm

    seed_everything(a.seed)
    train = {"steps": a.steps, "batch_size": a.batch_size, "lr": a.lr, "warmup_ratio": a.warmup_ratio,
             "max_length": a.max_length, "mask_probability": a.mask_probability, "checkpoint_every": a.checkpoint_every}
    with atomic_path(a.out) as tmp:
        report = mlm.pretrain(unique_paragraphs(a.candidates), a.tokenizer, tmp, a.state_dir, arch_of(a), train,
                              a.seed, a.log, a.stop_after_step,
                              paragraph_sentences(a.candidates) if a.nsp else None, a.init_hub_model)
    loop.finish(a.state_dir)
    return a.out, report


def read_split(split_tsv) -> dict[str, str]:
    """A split's questions; none when its file is empty (a small split may have no valid questions)."""
    path = Path(split_tsv)
    return read_queries(path) if path.exists() and path.stat().st_size else {}


def split_pairs(split_tsv, qrels, candidates_by_id) -> list[dict]:
    pairs = []
    for qid, text in read_split(split_tsv).items():
        for doc_id in sorted(d for d, rel in qrels.get(qid, {}).items() if rel > 0):
            c = candidates_by_id[doc_id]
            pairs.append({"query": text, "doc_id": doc_id, "sentence": c["sentence"], "paragraph": c["paragraph"]})
    return pairs


DOC_TEXTS = ["sentence", "sentence+paragraph", "contents"]   # what a doc tower reads: models.doc_input


def tower_args():
    return (arg("--query-length", type=int, required=True), arg("--doc-length", type=int, required=True),
            arg("--embedding-dim", type=int, required=True, help="projection size; 0 = none (the encoder's width)"),
            arg("--pooling", default="cls"), arg("--shared", type=int, default=0), arg("--normalize", type=int, default=0),
            arg("--doc-text", default="sentence+paragraph", choices=DOC_TEXTS),
            arg("--head", default="linear", choices=["linear", "mlp"], help="after pooling: linear, or BoW-MLP's tanh MLP"))


def towers_of(a) -> dict:
    return {"pooling": a.pooling, "embedding_dim": a.embedding_dim, "shared": bool(a.shared),
            "normalize": bool(a.normalize), "query_length": a.query_length, "doc_length": a.doc_length,
            "doc_text": a.doc_text, "head": a.head}


def schedule_args():
    return (arg("--state-dir", required=True), arg("--seed", type=int, required=True),
            arg("--steps", type=int, required=True), arg("--batch-size", type=int, required=True),
            arg("--lr", type=float, required=True), arg("--warmup-ratio", type=float, required=True),
            arg("--checkpoint-every", type=int, default=50), arg("--log", default=None),
            arg("--stop-after-step", type=int, default=None))


def schedule_of(a) -> dict:
    return {"steps": a.steps, "batch_size": a.batch_size, "lr": a.lr, "warmup_ratio": a.warmup_ratio,
            "checkpoint_every": a.checkpoint_every}


@stage("finetune", arg("--encoder", required=True, help="encoder folder, or a pre-trained two-tower model"), arg("--candidates", required=True), arg("--qrels", required=True),
       arg("--train", required=True), arg("--valid", required=True), arg("--out", required=True),
       arg("--temperature", type=float, default=1.0), *schedule_args(), *tower_args())
def finetune(a):
    """Two towers, sampled softmax over in-batch documents (Chang et al.)."""
    from .training import inbatch, loop

    seed_everything(a.seed)
    candidates = {c["id"]: c for c in read_jsonl(a.candidates)}
    qrels = read_qrels(a.qrels)
    pairs = split_pairs(a.train, qrels, candidates)
    if not pairs:
        raise StageError(a.train, "no training questions with a relevant candidate")
    with atomic_path(a.out) as tmp:
        report = inbatch.finetune(pairs, split_pairs(a.valid, qrels, candidates), a.encoder, tmp, a.state_dir,
                                  towers_of(a), {**schedule_of(a), "temperature": a.temperature}, a.seed, a.log,
                                  a.stop_after_step)
    loop.finish(a.state_dir)
    return a.out, report


@stage("pretrain-two-tower", arg("--start", required=True, help="encoder folder the towers start from"),
       arg("--pairs", required=True, nargs="+", help="one pairs JSONL per task; several = their uniform mixture"),
       arg("--title-tasks", nargs="*", default=["ict"], help="tasks whose doc is (title, passage)"),
       arg("--out", required=True), arg("--temperature", type=float, default=1.0), *schedule_args(), *tower_args())
def pretrain_two_tower(a):
    """Two towers pre-trained on ICT/BFS/WLP pairs with sampled softmax over in-batch documents (Chang et al.)."""
    from .pretraining_pairs import PairFile
    from .training import inbatch, loop

    seed_everything(a.seed)
    tasks = {}
    for path in a.pairs:
        pairs = PairFile(path)
        task = pairs[0]["task"]
        if task in tasks:
            raise StageError(path, f"a second file of task {task!r}")
        tasks[task] = pairs
    with atomic_path(a.out) as tmp:
        report = inbatch.pretrain(tasks, a.start, tmp, a.state_dir, towers_of(a),
                                  {**schedule_of(a), "temperature": a.temperature}, a.seed, a.title_tasks, a.log,
                                  a.stop_after_step)
    loop.finish(a.state_dir)
    return a.out, report


@stage("init-bow", arg("--out", required=True), arg("--buckets", type=int, required=True), arg("--dim", type=int, required=True),
       arg("--max-features", type=int, default=256), arg("--seed", type=int, required=True),
       arg("--char-ngram", type=int, default=3, help="0 = no character n-grams"),
       arg("--word-bigrams", type=int, default=1, help="0 = word unigrams only (Chang et al.'s BoW-MLP)"))
def init_bow(a):
    """Random hashed bag-of-words embeddings: word uni(/bi)grams (+ char n-grams, Huang et al. 2020's text towers)."""
    from .models import random_bag_of_words

    with atomic_path(a.out) as tmp:
        random_bag_of_words(tmp, a.buckets, a.dim, a.max_features, a.seed, a.char_ngram, bool(a.word_bigrams))
    return a.out, {"buckets": a.buckets, "dim": a.dim}


def split_examples(split_tsv, qrels, index_of: dict[str, int]) -> list[dict]:
    """A split's questions with the candidate indices of their gold sentences."""
    examples = []
    for qid, text in read_split(split_tsv).items():
        positives = sorted(index_of[d] for d, rel in qrels.get(qid, {}).items() if rel > 0 and d in index_of)
        if positives:
            examples.append({"qid": qid, "query": text, "positives": positives})
    return examples


@stage("train-margin", arg("--start", required=True, help="encoder folder, or a saved model to continue (phase 2)"),
       arg("--candidates", required=True), arg("--qrels", required=True), arg("--train", required=True),
       arg("--valid", required=True), arg("--out", required=True),
       arg("--mined", default="", help="mined candidate lists (JSONL): adds hard negatives, the four-tower loss"),
       arg("--margin", type=float, required=True), arg("--reduction", default="mean", choices=["mean", "sum"]),
       arg("--patience", type=int, default=0, help="stop when the validation loss has not improved for this many checks"),
       *schedule_args(), *tower_args())
def train_margin(a):
    """Triplet (three towers) or quadruplet (four towers, with --mined) training, cosine distance."""
    from .training import loop, margin

    seed_everything(a.seed)
    candidates = load_candidates(a.candidates)
    index_of = {c["id"]: i for i, c in enumerate(candidates)}
    qrels = read_qrels(a.qrels)
    examples = split_examples(a.train, qrels, index_of)
    if not examples:
        raise StageError(a.train, "no training questions with a relevant candidate")
    mined = None
    if a.mined:
        mined = {row["qid"]: [index_of[d] for d in row["candidates"] if d in index_of] for row in read_jsonl(a.mined)}
        if not mined:
            raise StageError(a.mined, "no mined candidate lists")
    train = {**schedule_of(a), "margin": a.margin, "reduction": a.reduction, "patience": a.patience}
    with atomic_path(a.out) as tmp:
        report = margin.train(examples, split_examples(a.valid, qrels, index_of), candidates, a.start, tmp,
                              a.state_dir, towers_of(a), train, a.seed, mined, a.log, a.stop_after_step)
    loop.finish(a.state_dir)
    return a.out, report


def qrels_pairs(split_tsv, qrels) -> list[dict]:
    """A split's (query, relevant document) pairs: {'qid', 'query', 'doc_id'}."""
    return [{"qid": qid, "query": text, "doc_id": doc_id} for qid, text in read_split(split_tsv).items()
            for doc_id in sorted(d for d, rel in qrels.get(qid, {}).items() if rel > 0)]


def candidate_texts(path, wanted: set[str], doc_text: str) -> dict[str, object]:
    """What the doc text reads (models.doc_input) of the wanted candidates only, streamed: a passage
    collection can hold millions. A candidate lacking the field is an error; see require_texts."""
    from .models import doc_input

    found = {}
    for row in read_jsonl(path):
        if row.get("id") in wanted:
            try:
                found[row["id"]] = doc_input(row, doc_text)
            except KeyError as err:
                raise StageError(path, f"candidate {row['id']} lacks {err} (doc text {doc_text!r})") from None
    return found


def require_texts(found: dict, wanted, source, candidates_path) -> None:
    """One line naming `source` when a document it names is not among the candidates."""
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise StageError(source, f"{len(missing)} of its documents are not in {candidates_path} (first: {missing[0]})")


@stage("train-repbert", arg("--start", required=True,
                            help="encoder folder (or hub name, e.g. bert-base-uncased), or a RepBERT model to continue"),
       arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"), arg("--qrels", required=True),
       arg("--train", required=True, help="training queries TSV"), arg("--valid", required=True), arg("--out", required=True),
       arg("--query-length", type=int, default=20), arg("--doc-length", type=int, default=256),
       arg("--doc-text", default="contents", choices=DOC_TEXTS), *schedule_args())
def train_repbert(a):
    """RepBERT: one shared BERT, mean pooling, inner product, MultiLabelMarginLoss over in-batch documents."""
    from .training import loop, repbert

    seed_everything(a.seed)
    qrels = read_qrels(a.qrels)
    pairs, valid = qrels_pairs(a.train, qrels), qrels_pairs(a.valid, qrels)
    if not pairs:
        raise StageError(a.train, "no training queries with a relevant document")
    if a.batch_size < 2:
        raise StageError("--batch-size", f"in-batch negatives need at least 2 pairs a batch, not {a.batch_size}")
    wanted = {p["doc_id"] for p in pairs + valid}
    docs = candidate_texts(a.candidates, wanted, a.doc_text)
    require_texts(docs, wanted, a.qrels, a.candidates)
    start_key = None if Path(a.start).exists() else str(a.start)   # a hub name: its name is the fingerprint
    with atomic_path(a.out) as tmp:
        report = repbert.train(pairs, valid, docs, qrels, a.start, tmp, a.state_dir,
                               repbert.tower_config(a.query_length, a.doc_length, a.doc_text), schedule_of(a), a.seed,
                               start_key, a.log, a.stop_after_step)
    loop.finish(a.state_dir)
    return a.out, report


# --- LTRe (Zhan et al. 2020): negative-sampling baselines and training against a fixed index ------

def ltre_training_data(a):
    """The split's training queries, the qrels, every candidate's id and passage, BM25's ranked doc ids."""
    qrels = read_qrels(a.qrels)
    queries = [{"qid": qid, "text": text} for qid, text in read_split(a.train).items()]
    if not queries:
        raise StageError(a.train, "no training queries")
    candidates = load_candidates(a.candidates)
    bm25 = {qid: [doc for doc, _ in ranked] for qid, ranked in read_run(a.bm25_run).items()} if a.bm25_run else None
    return queries, qrels, candidates, bm25


def ltre_args():
    return (arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"), arg("--qrels", required=True),
            arg("--train", required=True, help="training queries TSV"),
            arg("--bm25-run", default="", help="TREC run of BM25 over the training queries"),
            arg("--loss", default="ranknet", choices=["ranknet", "lambdarank"]),
            arg("--metric", default="mrr@10", choices=["mrr@10", "ndcg@10"], help="LambdaRank's |delta metric|"),
            arg("--reduction", default="query-sum", choices=["query-sum", "pair-mean"]),
            arg("--negatives-per-query", type=int, default=1), arg("--negative-depth", type=int, default=200),
            arg("--refresh-every", type=int, default=0), arg("--nprobe", type=int, default=0),
            arg("--threads", type=int, default=0), arg("--out", required=True), *schedule_args())


def ltre_cfg(a, **extra) -> dict:
    return {**schedule_of(a), "loss": a.loss, "metric": a.metric, "reduction": a.reduction,
            "negatives": a.negatives, "negatives_per_query": a.negatives_per_query,
            "negative_depth": a.negative_depth, "refresh_every": a.refresh_every, "nprobe": a.nprobe, **extra}


@stage("train-negatives", arg("--start", required=True,
                              help="encoder folder or hub name (towers start from it), or a saved model (a warm start)"),
       arg("--negatives", required=True, choices=["rand", "bm25", "nce", "bm25+rand", "async"]),
       arg("--index-factory", default="Flat", help="async: the index each refresh builds"),
       arg("--query-length", type=int, default=32), arg("--doc-length", type=int, default=512),
       arg("--embedding-dim", type=int, default=768), arg("--pooling", default="cls"),
       arg("--head", default="linear-ln", choices=["linear", "linear-ln"]), *ltre_args())
def train_negatives(a):
    """LTRe Table 1's negative-sampling baselines: one shared encoder, (relevant, negative) pairs."""
    from .models import TwoTower, doc_input
    from .training import loop, negatives

    seed_everything(a.seed)
    set_threads(a.threads)
    if a.negatives in ("bm25", "bm25+rand") and not a.bm25_run:
        raise StageError("--bm25-run", f"{a.negatives} negatives need a BM25 run")
    queries, qrels, candidates, bm25 = ltre_training_data(a)
    towers = {"pooling": a.pooling, "embedding_dim": a.embedding_dim, "shared": True, "normalize": False,
              "query_length": a.query_length, "doc_length": a.doc_length, "doc_text": "contents", "head": a.head}
    model, tokenizer, towers = TwoTower.start(a.start, towers, a.seed)
    negatives.require_shared(model, a.start)
    docs = [doc_input(c, "contents") for c in candidates]
    start_key = loop.folder_digest(a.start) if Path(a.start).is_dir() else str(a.start)
    cfg = ltre_cfg(a, index=a.index_factory)
    report = negatives.train(model, tokenizer, queries, qrels, [c["id"] for c in candidates], docs, a.state_dir, cfg,
                             a.seed, bm25, start_key, a.log, a.stop_after_step)
    with atomic_path(a.out) as tmp:
        model.cpu().save(tmp, tokenizer)
    loop.finish(a.state_dir)
    return a.out, report


@stage("train-ltre", arg("--start", required=True, help="a saved model: its doc tower is fixed, its query tower trained"),
       arg("--embeddings", required=True, help="the start's doc vectors (encode-candidates)"),
       arg("--ids", required=True), arg("--index", required=True, help="Faiss index over --embeddings"),
       arg("--negatives", default="ltre", choices=["ltre", "rand", "bm25", "async"],
           help="ltre: Algorithm 1; the others sample negatives against the same fixed index (Figure 3)"),
       arg("--top-n", type=int, default=200),
       arg("--probe-depth", type=int, default=200, help="depth of the step log's recall and overlaps (Figure 3)"),
       *ltre_args())
def train_ltre(a):
    """LTRe: only the query tower learns, from full retrieval over a fixed index of fixed doc vectors."""
    import copy

    import faiss
    import numpy as np

    from . import vector_index
    from .models import TwoTower
    from .training import loop, ltre

    seed_everything(a.seed)
    set_threads(a.threads)
    if a.negatives == "bm25" and not a.bm25_run:
        raise StageError("--bm25-run", "BM25 negatives need a BM25 run")
    queries, qrels, candidates, bm25 = ltre_training_data(a)
    start, tokenizer = TwoTower.load(a.start)
    ids = require_file(a.ids).read_text().split()
    if ids != [c["id"] for c in candidates]:
        raise StageError(a.ids, f"its ids are not those of {a.candidates}, in order")
    vectors = load_embeddings(a.embeddings)
    index = faiss.read_index(str(require_file(a.index)))
    if index.ntotal != len(ids) or vectors.shape[0] != len(ids):
        raise StageError(a.index, f"{index.ntotal} vectors indexed, {vectors.shape[0]} embeddings, {len(ids)} ids")
    index = vector_index.to_device(index)
    # the doc tower stays the start's; the query tower is a copy that learns
    model = TwoTower(copy.deepcopy(start.query), start.doc, {**start.config, "shared": False})
    cfg = ltre_cfg(a, top_n=a.top_n, probe_depth=a.probe_depth, query_length=start.config["query_length"])
    report = ltre.train(model.query, tokenizer, queries, qrels, ids, vectors, index, a.state_dir, cfg, a.seed, bm25,
                        a.log, a.stop_after_step)
    with atomic_path(a.out) as tmp:
        model.cpu().save(tmp, tokenizer)
    loop.finish(a.state_dir)
    return a.out, report


@stage("encode-candidates", arg("--model", required=True), arg("--candidates", required=True),
       arg("--embeddings", required=True), arg("--ids", required=True), arg("--batch-size", type=int, default=128),
       arg("--threads", type=int, default=0),
       arg("--shard", type=int, default=0, help="encode only this part of --shards equal parts (merge-embeddings joins them)"),
       arg("--shards", type=int, default=1))
def encode_candidates(a):
    import numpy as np

    from .encode import encode, shard_range
    from .models import TwoTower, doc_input

    shard_range(0, a.shard, a.shards)   # a bad --shard fails before anything loads
    set_threads(a.threads)
    model, tok = TwoTower.load(a.model)
    candidates = load_candidates(a.candidates)
    candidates = candidates[slice(*shard_range(len(candidates), a.shard, a.shards))]
    doc_text = model.config.get("doc_text", "sentence+paragraph")
    try:
        docs = [doc_input(c, doc_text) for c in candidates]
    except KeyError as err:
        raise StageError(a.candidates, f"a candidate lacks {err}, which the model's doc text {doc_text!r} reads") from None
    vectors = encode(model.doc, tok, docs, "doc", model.config["doc_length"], a.batch_size, desc="encode candidates",
                     segment=model.config.get("doc_segment", 0))
    with atomic_path(a.ids) as tmp:
        tmp.write_text("\n".join(c["id"] for c in candidates) + "\n")
    with atomic_path(a.embeddings) as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, vectors)
    return a.embeddings, {"candidates": len(candidates), "dim": int(vectors.shape[1])}


def set_threads(threads: int) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


@stage("merge-embeddings", arg("--parts", nargs="+", required=True, help="encode-candidates --shard outputs, in order"),
       arg("--part-ids", nargs="+", required=True), arg("--embeddings", required=True), arg("--ids", required=True))
def merge_embeddings(a):
    """The shards of one corpus encoding, joined in order into one matrix and one id list."""
    from .encode import merge_parts

    if len(a.parts) != len(a.part_ids):
        raise StageError("--part-ids", f"{len(a.part_ids)} id files for {len(a.parts)} embedding parts")
    shape = merge_parts([require_file(p) for p in a.parts], [require_file(p) for p in a.part_ids], a.embeddings, a.ids)
    return a.embeddings, {"parts": len(a.parts), "candidates": shape[0], "dim": shape[1]}


def load_embeddings(path):
    """A float32 matrix saved by encode-candidates; one line if the file is not a NumPy array."""
    import numpy as np

    try:
        return np.load(require_file(path))
    except ValueError as err:
        raise StageError(path, f"not a NumPy array file ({err})") from None


@stage("build-index", arg("--embeddings", required=True), arg("--factory", required=True), arg("--out", required=True))
def build_index(a):
    import faiss
    import numpy as np

    from . import vector_index

    vectors = load_embeddings(a.embeddings)
    index = vector_index.build(vectors, a.factory)
    with atomic_path(a.out) as tmp:
        faiss.write_index(index, str(tmp))
    return a.out, {"vectors": int(index.ntotal), "factory": a.factory}


def dense_run(model_path, index_path, ids_path, queries: dict[str, str], depth: int, nprobe: int,
              batch_size: int) -> dict[str, list[tuple[str, float]]]:
    """Encode `queries` with the query tower and search the doc tower's Faiss index."""
    import faiss

    from . import vector_index
    from .encode import encode
    from .models import TwoTower

    model, tok = TwoTower.load(model_path)
    ids = require_file(ids_path).read_text().split()
    index = faiss.read_index(str(require_file(index_path)))
    if index.ntotal != len(ids):
        raise StageError(ids_path, f"{len(ids)} ids for an index of {index.ntotal} vectors")
    index = vector_index.to_device(index)
    vectors = encode(model.query, tok, list(queries.values()), "query", model.config["query_length"],
                     batch_size, desc="encode queries")
    scores, rows = vector_index.search(index, vectors, depth, nprobe)
    return {qid: [(ids[r], float(s)) for r, s in zip(rows[i], scores[i]) if r >= 0] for i, qid in enumerate(queries)}


@stage("dense-search", arg("--model", required=True), arg("--index", required=True), arg("--ids", required=True),
       arg("--queries", required=True), arg("--run", required=True), arg("--depth", type=int, required=True),
       arg("--nprobe", type=int, default=0), arg("--batch-size", type=int, default=128), arg("--threads", type=int, default=0),
       arg("--tag", default="dense"))
def dense_search(a):
    set_threads(a.threads)
    run = dense_run(a.model, a.index, a.ids, read_queries(a.queries), a.depth, a.nprobe, a.batch_size)
    write_run(a.run, run, a.tag)
    return a.run, {"queries": len(run)}


@stage("mine-hard-negatives", arg("--model", required=True), arg("--index", required=True), arg("--ids", required=True),
       arg("--queries", required=True, nargs="+", help="the split's train.tsv and valid.tsv"),
       arg("--qrels", required=True), arg("--out", required=True), arg("--depth", type=int, required=True),
       arg("--nprobe", type=int, default=0), arg("--batch-size", type=int, default=128), arg("--threads", type=int, default=0))
def mine_hard_negatives(a):
    """Each question's top-`depth` candidates under a trained model, gold removed (JSONL: qid, candidates)."""
    from .mining import exclude_positives

    set_threads(a.threads)
    queries = {qid: text for path in a.queries for qid, text in read_split(path).items()}
    if not queries:
        raise StageError(a.queries[0], "no questions to mine for")
    mined = exclude_positives(dense_run(a.model, a.index, a.ids, queries, a.depth, a.nprobe, a.batch_size),
                              read_qrels(a.qrels))
    write_jsonl(a.out, ({"qid": q, "candidates": docs} for q, docs in mined.items()))
    return a.out, {"questions": len(mined), "mean_candidates": round(sum(map(len, mined.values())) / len(mined), 2)}


# --- evaluation and tables ----------------------------------------------------------------------

# reranking (RepBERT sec. 4.4): a cross-encoder rescores the top-K of a first-stage run
@stage("train-cross-encoder", arg("--start", required=True, help="encoder folder (the MLM encoder) or hub name"),
       arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"), arg("--qrels", required=True),
       arg("--train", required=True, help="training queries TSV"), arg("--valid", required=True),
       arg("--run", required=True, help="first-stage TREC run (e.g. BM25) of the training and validation queries"),
       arg("--negatives-depth", type=int, default=1000, help="negatives come from each query's top-k of --run"),
       arg("--max-length", type=int, default=512), arg("--num-labels", type=int, default=1, choices=[1, 2]),
       arg("--loss", default="pointwise", choices=["pointwise", "listwise"],
           help="pointwise: BCE on one relevant and one negative (monoBERT); listwise: softmax over a group"),
       arg("--group-size", type=int, default=8, help="listwise: the relevant passage and group-size - 1 negatives"),
       arg("--out", required=True), *schedule_args())
def train_cross_encoder(a):
    """A BERT sequence-pair classifier on (query, relevant) against (query, first-stage negatives)."""
    from . import rerank
    from .training import loop

    seed_everything(a.seed)
    if a.negatives_depth < 1:
        raise StageError("--negatives-depth", f"must be at least 1, not {a.negatives_depth}")
    if a.loss == "listwise" and a.group_size < 2:
        raise StageError("--group-size", f"a listwise group needs the relevant passage and a negative, not {a.group_size}")
    qrels, run = read_qrels(a.qrels), read_run(a.run)
    depth = a.negatives_depth
    examples = rerank.training_examples(read_split(a.train), qrels, run, depth)
    valid = rerank.training_examples(read_split(a.valid), qrels, run, depth)
    if not examples:
        raise StageError(a.train, f"no training query has both a relevant document and a negative in {a.run}")
    positives = {d for e in examples + valid for d in e["positives"]}
    negatives = {d for e in examples + valid for d in e["negatives"]}
    passages = candidate_texts(a.candidates, positives | negatives, "contents")
    require_texts(passages, positives, a.qrels, a.candidates)
    require_texts(passages, negatives, a.run, a.candidates)
    train = {**schedule_of(a), "negatives_depth": depth, "max_length": a.max_length, "num_labels": a.num_labels,
             "loss": a.loss, "group_size": a.group_size if a.loss == "listwise" else 2}
    with atomic_path(a.out) as tmp:
        report = rerank.train(examples, valid, passages, a.start, tmp, a.state_dir, train, a.seed, a.log,
                              a.stop_after_step)
    loop.finish(a.state_dir)
    return a.out, report


@stage("rerank", arg("--model", default="", help="cross-encoder folder or hub name (castorini/monobert-large-msmarco)"),
       arg("--scores", default="", help="instead of --model: a deeper reranking of the same run, whose scores are reused"),
       arg("--tokenizer", default="", help="tokenizer folder or hub name; default: the model's"),
       arg("--run", required=True), arg("--candidates", required=True, help="JSONL of {'id', 'contents'}"),
       arg("--queries", required=True), arg("--depth", type=int, required=True, help="rerank (and keep) each query's top-K"),
       arg("--batch-size", type=int, default=32), arg("--max-length", type=int, default=512),
       arg("--threads", type=int, default=0), arg("--tag", default="rerank"), arg("--out", required=True))
def rerank_run(a):
    """Rescore each query's top-K of a TREC run with a cross-encoder; the run written is K deep."""
    from . import rerank

    if bool(a.model) == bool(a.scores):
        raise StageError("--model", "give exactly one of --model (score with a cross-encoder) and --scores")
    if a.depth < 1:
        raise StageError("--depth", f"must be at least 1, not {a.depth}")
    if a.batch_size < 1:
        raise StageError("--batch-size", f"must be at least 1, not {a.batch_size}")
    set_threads(a.threads)
    queries = read_queries(a.queries)
    # the queries asked for (a split's test questions) out of a run that may hold more (BM25 runs all)
    run = {qid: ranked for qid, ranked in read_run(a.run).items() if qid in queries}
    if not run:
        raise StageError(a.run, f"none of its queries is in {a.queries}")
    if a.scores:
        reranked = rerank.rerank_from_scores(run, read_run(a.scores), a.depth, a.run, a.scores)
        write_run(a.out, reranked, a.tag)
        return a.out, {"queries": len(reranked), "depth": a.depth, "pairs": sum(map(len, reranked.values())),
                       "scores_from": a.scores}
    wanted = {doc for ranked in run.values() for doc, _ in ranked[:a.depth]}
    passages = candidate_texts(a.candidates, wanted, "contents")
    require_texts(passages, wanted, a.run, a.candidates)
    model, tokenizer = rerank.load(a.model, a.tokenizer or None)
    max_length = rerank.usable_length(model, a.max_length)
    reranked = rerank.rerank(run, queries, passages, model, tokenizer, a.depth, max_length, a.batch_size)
    write_run(a.out, reranked, a.tag)
    return a.out, {"queries": len(reranked), "depth": a.depth, "pairs": sum(map(len, reranked.values())),
                   "max_length": max_length, "num_labels": model.config.num_labels}


@stage("evaluate", arg("--run", required=True), arg("--qrels", required=True), arg("--queries", required=True),
       arg("--metrics", required=True, nargs="+"), arg("--out", required=True))
def evaluate(a):
    from .evaluate import evaluate as score

    result = score(read_run(a.run), read_qrels(a.qrels), list(read_queries(a.queries)), a.metrics)
    write_json(a.out, {"run": str(a.run), **result})
    return a.out, {"queries": result["queries"], **result["metrics"]}


def parse_rows(specs: list[str], fields: list[str], may_be_empty=()) -> list[dict]:
    """A table stage's --row values, each '|'-separated with one value per field."""
    rows = []
    for spec in specs:
        values = spec.split("|")
        if len(values) != len(fields) or not all(v or f in may_be_empty for f, v in zip(fields, values)):
            raise StageError("--row", f"{spec!r} needs {len(fields)} non-empty '|'-separated fields: {'|'.join(fields)}")
        rows.append(dict(zip(fields, values)))
    return rows


def write_table(frame, twin: dict, csv_path, json_path):
    """A paper table as CSV, and its numeric JSON twin for `dvc metrics`."""
    with atomic_path(csv_path) as tmp:
        frame.to_csv(tmp, index=False)
    write_json(json_path, twin)
    return csv_path, {"rows": len(frame)}


@stage("table", arg("--table", required=True), arg("--paper", required=True), arg("--profile", required=True),
       arg("--dataset", required=True), arg("--note", required=True), arg("--metrics", required=True, nargs="+"),
       arg("--row", required=True, action="append", help="split|encoder|pretraining|eval.json"),
       arg("--csv", required=True), arg("--json", required=True))
def table(a):
    from .tables import build_table

    rows = parse_rows(a.row, ["split", "encoder", "pretraining", "eval"])
    frame, twin = build_table(rows, a.paper, a.table, a.metrics, a.profile, a.dataset, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("reqa-statistics", arg("--candidates", required=True), arg("--queries", required=True),
       arg("--qrels", required=True), arg("--tokenizer", required=True, help="the dataset's WordPiece tokenizer folder"),
       arg("--batch-size", type=int, default=1024), arg("--out", required=True))
def reqa_statistics(a):
    """Chang et al. Table 2: a ReQA dataset's #query, #candidate, #tuples and average WordPiece tokens."""
    from .reqa import reqa_statistics as count

    if a.batch_size < 1:
        raise StageError("--batch-size", f"must be at least 1, not {a.batch_size}")
    # doc tokens count the candidate's sentence plus its paragraph (the pair the doc tower reads)
    stats = count(a.candidates, a.queries, a.qrels, load_tokenizer(a.tokenizer), a.batch_size, progress=True)
    write_json(a.out, stats)
    return a.out, stats


def load_tokenizer(path):
    """A saved HF tokenizer folder, or one line saying why it cannot be loaded."""
    from transformers import AutoTokenizer

    if not Path(path).is_dir():
        raise StageError(path, "tokenizer folder is missing")
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StageError(path, f"cannot load the tokenizer ({first})") from None


@stage("reqa-table", arg("--paper", required=True), arg("--profile", required=True), arg("--note", required=True),
       arg("--row", required=True, action="append", help="dataset|paper_dataset|reqa-statistics JSON"),
       arg("--csv", required=True), arg("--json", required=True))
def reqa_table(a):
    """Chang et al. Table 2: ReQA statistics beside the paper's."""
    from .tables import reqa_table as build

    frame, twin = build(parse_rows(a.row, ["dataset", "paper_dataset", "stats"]), a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("pairs-table", arg("--paper", required=True), arg("--profile", required=True), arg("--note", required=True),
       arg("--stats", required=True, nargs="+", help="pretraining-pairs statistics JSON, one per task"),
       arg("--csv", required=True), arg("--json", required=True))
def pairs_table(a):
    """Chang et al. Table 1: pre-training pair statistics beside the paper's."""
    from .tables import pairs_table as build

    frame, twin = build([read_json(path) for path in a.stats], a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("ablation-table", arg("--paper", required=True), arg("--profile", required=True), arg("--dataset", required=True),
       arg("--note", required=True), arg("--metric", default="R@100"),
       arg("--row", required=True, action="append", help="index|layers|pretraining|emb_dim|split|eval.json"),
       arg("--csv", required=True), arg("--json", required=True))
def ablation_table(a):
    """Chang et al. Table 5: one metric per split for each ablation configuration, beside the paper's."""
    from .tables import ABLATION_KEY, ablation_table as build

    frame, twin = build(parse_rows(a.row, ABLATION_KEY + ["split", "eval"]), a.paper, a.metric, a.profile,
                        a.dataset, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("seeded-table", arg("--table", required=True), arg("--paper", required=True), arg("--profile", required=True),
       arg("--note", required=True), arg("--metrics", required=True, nargs="+"),
       arg("--row", required=True, action="append",
           help="dataset|paper_dataset|split|model|margin|index|eval.json,eval.json,... (one per seed)"),
       arg("--compare", default="", help="'A|B': paired test of model A against model B"),
       arg("--test", default="wilcoxon", choices=["wilcoxon", "ttest"]), arg("--alpha", type=float, default=0.05),
       arg("--exact-index", default="flat"), arg("--csv", required=True), arg("--json", required=True))
def seeded_table(a):
    """A table whose cells are means over seeds, with standard deviations and paired significance tests."""
    from .tables import SEEDED_KEY, seeded_table as build

    rows = parse_rows(a.row, SEEDED_KEY + ["evals"], may_be_empty=["margin"])
    for row in rows:
        row["evals"] = row["evals"].split(",")
        row["margin"] = f"{float(row['margin']):g}" if row["margin"] else ""
    compare = tuple(a.compare.split("|")) if a.compare else None
    frame, twin = build(rows, a.paper, a.table, a.metrics, a.profile, a.note, compare, a.test, a.alpha, a.exact_index)
    return write_table(frame, twin, a.csv, a.json)


# --- run fusion (RepBERT sec. 4.4.3 and 4.5) ---------------------------------------------------

def load_runs(paths) -> list[dict]:
    """TREC runs, each of which must exist, parse and hold at least one ranking."""
    runs = []
    for path in paths:
        run = read_run(path)
        if not run:
            raise StageError(path, "the run has no rankings")
        runs.append(run)
    return runs


@stage("fuse-runs", arg("--runs", required=True, nargs="+", help="two or more TREC runs; for alternate, in priority order"),
       arg("--method", required=True, choices=["alternate", "rrf", "combsum"]), arg("--depth", type=int, default=1000),
       arg("--no-truncate", action="store_true", help="alternate: keep the whole merged union, not its top --depth"),
       arg("--rrf-k", type=int, default=60), arg("--normalisation", default="minmax", choices=["minmax", "zscore", "none"]),
       arg("--tag", default=""), arg("--out", required=True))
def fuse_runs(a):
    """Fuse TREC runs: RepBERT's alternating merge (eq. 6), reciprocal rank fusion or CombSUM."""
    from . import fusion

    if a.no_truncate and a.method != "alternate":
        raise StageError("--no-truncate", f"applies to --method alternate only, not {a.method}")
    if len(a.runs) < 2:   # before reading, so a lone run is reported as such
        raise StageError("--runs", f"fusion needs at least two runs, not {len(a.runs)}")
    runs = load_runs(a.runs)
    fused = fusion.fuse(runs, a.method, a.depth, not a.no_truncate, a.rrf_k, a.normalisation)
    # scores strictly decreasing as written, so tools that re-sort by score keep the fused order
    write_run(a.out, fusion.strictly_decreasing(fused), a.tag or f"fused-{a.method}")
    return a.out, {"runs": len(runs), "queries": len(fused), "documents": sum(map(len, fused.values()))}


@stage("consistency", arg("--run", required=True),
       arg("--reference", required=True, help="e.g. the BM25 run whose top documents trained the reranker"),
       arg("--queries", default="", help="only these queries (a split's test questions); default: all of the run's"),
       arg("--depths", type=int, nargs="+", required=True), arg("--reference-depth", type=int, default=1000),
       arg("--out", required=True))
def consistency(a):
    """RepBERT eq. 5: the share of a run's top-n documents that the reference run also retrieves."""
    from .fusion import consistency_factor

    run, reference = load_runs([a.run, a.reference])
    if a.queries:
        wanted = read_queries(a.queries)
        run = {qid: ranked for qid, ranked in run.items() if qid in wanted}
        if not run:
            raise StageError(a.run, f"none of its queries is in {a.queries}")
    factors = {str(n): value for n, value in consistency_factor(run, reference, a.depths, a.reference_depth).items()}
    write_json(a.out, {"depths": factors, "queries": len(run)})
    return a.out, {"queries": len(run), "depths": factors}


@stage("latency", arg("--method", required=True, choices=["bm25", "dense"]),
       arg("--index", required=True, help="Lucene index folder (bm25) or Faiss index (dense)"),
       arg("--model", default="", help="dense: the two-tower model folder"), arg("--queries", required=True),
       arg("--depth", type=int, required=True), arg("--limit", type=int, default=0, help="first N queries; 0 = all"),
       arg("--k1", type=float, default=0.9), arg("--b", type=float, default=0.4), arg("--nprobe", type=int, default=0),
       arg("--threads", type=int, default=1), arg("--out", required=True))
def latency(a):
    """Milliseconds per query, one query at a time: BM25 search, or query encoding + Faiss search."""
    from . import latency as measure

    set_threads(a.threads)
    texts = list(read_queries(a.queries).values())[:a.limit or None]
    if not texts:
        raise StageError(a.queries, "no queries")
    if not Path(a.index).exists():
        raise StageError(a.index, "no such index")
    if a.method == "bm25":
        seconds = measure.bm25(a.index, texts, a.depth, a.k1, a.b)
    else:
        if not a.model:
            raise StageError("--model", "dense latency needs the model folder")
        seconds = measure.dense(a.model, a.index, texts, a.depth, a.nprobe)
    result = {"method": a.method, "depth": a.depth, **measure.summary(seconds), "hardware": measure.hardware(a.threads)}
    write_json(a.out, result)
    return a.out, {k: v for k, v in result.items() if k != "hardware"}


REPBERT_ROWS = {"table1": ["method", "eval", "latency"], "table2": ["method", "depth", "eval"],
                "table3": ["first", "second", "fusion", "eval"], "table4": ["first", "second", "fusion", "eval"]}


def paper_table_args(rows: dict, name: str):
    """A paper's table stage: --table (a key of `rows`), its paper values, the profile and note, --row
    values ('|'-separated fields, one list of fields per table in `rows`) and the CSV and JSON out."""
    return (arg("--table", required=True, choices=sorted(rows)), arg("--paper", required=True),
            arg("--profile", required=True), arg("--note", required=True),
            arg("--row", required=True, action="append", help=f"'|'-separated fields; see {name}"),
            arg("--csv", required=True), arg("--json", required=True))


@stage("repbert-table", *paper_table_args(REPBERT_ROWS, "REPBERT_ROWS"))
def repbert_table(a):
    """RepBERT Tables 1-4: first-stage retrieval, reranking by depth, run fusion."""
    from . import repbert_report as report

    rows = parse_rows(a.row, REPBERT_ROWS[a.table], may_be_empty=["second"])
    if a.table in ("table3", "table4"):
        frame, twin = report.fusion_table(a.table, rows, a.paper, a.profile, a.note)
    else:
        frame, twin = getattr(report, a.table)(rows, a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("repbert-figure", arg("--figure", required=True, choices=["figure1", "figure2"]), arg("--note", required=True),
       arg("--recall", action="append", default=[], help="figure1: method|eval.json of a first-stage run"),
       arg("--depths", type=int, nargs="+", default=[], help="figure1: recall depths"),
       arg("--rerank", action="append", default=[], help="figure1: method|depth|eval.json of a reranked run"),
       arg("--consistency", action="append", default=[], help="figure2: method|consistency.json"),
       arg("--csv", required=True), arg("--png", required=True))
def repbert_figure(a):
    """RepBERT Figure 1 (recall and reranking MRR@10 by depth) or Figure 2 (consistency with BM25 by depth)."""
    import pandas as pd

    from . import repbert_report as report

    if a.figure == "figure1":
        recall = report.recall_curve(parse_rows(a.recall, ["method", "eval"]), a.depths)
        reranked = pd.DataFrame([{"method": r["method"], "depth": int(r["depth"]),
                                  "MRR@10": round(report.metric(r["eval"], "RR@10"), 4)}
                                 for r in parse_rows(a.rerank, ["method", "depth", "eval"])])
        panels = [(recall, "depth", "recall", "(a) first-stage recall"),
                  (reranked, "depth", "MRR@10", "(b) reranking MRR@10")]
    else:
        rows = parse_rows(a.consistency, ["method", "json"])
        frame = pd.DataFrame([{"method": r["method"], "depth": int(n), "C": value}
                              for r in rows for n, value in read_json(r["json"])["depths"].items()])
        panels = [(frame, "depth", "C", "consistency with BM25's top 1000")]
    report.save_figure(panels, a.csv, a.png, a.note)
    return a.csv, {"panels": len(panels)}


LTRE_ROWS = {"table1": ["key", "eval", "graded"], "table3": ["key", "eval", "steps", "index", "before"],
             "table4": ["train", "test", "eval", "graded"]}


@stage("ltre-table", *paper_table_args(LTRE_ROWS, "LTRE_ROWS"))
def ltre_table(a):
    """LTRe Tables 1, 3 and 4: baselines and LTRe, training indexes and time, train x evaluation index."""
    from . import ltre_report as report

    rows = parse_rows(a.row, LTRE_ROWS[a.table], may_be_empty=["before", "graded"])
    frame, twin = getattr(report, a.table)(rows, a.paper, a.profile, a.note)
    return write_table(frame, twin, a.csv, a.json)


@stage("ltre-figure", arg("--run", required=True, action="append", help="method|step log of train-ltre"),
       arg("--probe-depth", type=int, required=True), arg("--note", required=True),
       arg("--csv", required=True), arg("--png", required=True))
def ltre_figure(a):
    """LTRe Figure 3: per training step, MRR@10, R@depth, overlap with BM25 and with the async retrieval."""
    from . import ltre_report as report
    from .repbert_report import save_figure

    frame = report.figure3_frame(parse_rows(a.run, ["method", "steps"]), a.probe_depth)
    window = report.window_for(frame)
    titles = {"MRR@10": "(a) MRR@10", f"R@{a.probe_depth}": f"(b) R@{a.probe_depth}",
              "BM25 overlap": f"(c) overlap with BM25's top {a.probe_depth}",
              "async overlap": f"(d) overlap with the async top {a.probe_depth}"}
    panels = [(report.smoothed(frame, measure, window), "step", measure, title) for measure, title in titles.items()]
    save_figure(panels, a.csv, a.png, f"{a.note}; batch values, running mean over {window} steps", log_x=False)
    return a.csv, {"methods": int(frame["method"].nunique()), "steps": int(frame["step"].max())}


@stage("report", arg("--table", action="append", default=[], help="a results CSV (repeatable)"),
       arg("--figure", action="append", default=[], help="a results PNG (repeatable)"),
       arg("--rulegraph", required=True, help="`snakemake --rulegraph` output (Graphviz dot text)"),
       arg("--dag-png", required=True), arg("--title", required=True), arg("--note", required=True),
       arg("--out", required=True))
def report(a):
    """Every table (reproduced vs paper, difference coloured), figure, the rule graph, versions and hardware."""
    from . import report as html_report

    tables, figures = [require_file(t) for t in a.table], [require_file(f) for f in a.figure]
    dot = require_file(a.rulegraph).read_text()
    if not html_report.parse_rulegraph(dot)[0]:
        raise StageError(a.rulegraph, "no rules in it (expected `snakemake --rulegraph` output)")
    html_report.draw_rulegraph(dot, Path(a.dag_png))
    html_report.write(tables, figures, Path(a.dag_png), Path(a.out), a.title, a.note)
    return a.out, {"tables": len(tables), "figures": len(figures)}


# --- entry point --------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="towers", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="stage", required=True)
    for name, (func, arguments) in STAGES.items():
        p = sub.add_parser(name, help=(func.__doc__ or "").split("\n")[0] or None)
        for flag, kw in arguments:
            p.add_argument(flag, **kw)
        p.set_defaults(func=func)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    began = time.perf_counter()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:   # started by torchrun: data-parallel training
        from .training import distributed
        distributed.start()
    try:
        output, counts = args.func(args)
    except StageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    meta = {"stage": args.stage, "arguments": {k: v for k, v in vars(args).items() if k not in ("func", "stage")},
            "counts": counts, "seconds": round(time.perf_counter() - began, 2),
            "versions": versions("torch", "transformers", "tokenizers", "faiss-cpu", "pyserini", "ir-measures", "pysbd",
                                 "mwparserfromhell")}
    write_json(Path(str(output).rstrip("/") + ".meta.json"), meta)
    print(json.dumps({"stage": args.stage, "seconds": meta["seconds"], **{k: v for k, v in counts.items()
                                                                          if not isinstance(v, (list, dict))}}))
    return 0
