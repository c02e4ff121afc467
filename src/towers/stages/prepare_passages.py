"""Stages that build passage-ranking collections (RepBERT, LTRe): passage collections, their queries and one "dev"
split, from MS MARCO, BEIR, Wikipedia paragraphs or a graded evaluation set, and MS MARCO's training triples."""
from __future__ import annotations

from pathlib import Path

from ..io import StageError, atomic_path, check_digest, check_sha256, read_qrels, read_queries, require_file
from . import arg, stage
from .common import verification


def source_checks(path, a) -> dict:
    """--sha256/--md5 of a source file, when given (a folder has no checksum); what was verified."""
    from ..io import check_md5

    if Path(path).is_dir():
        if a.sha256 or a.md5:
            raise StageError(path, "a folder has no checksum: give --sha256 or --md5 for a file only")
        return {str(path): "not verified (a folder)"}
    check_sha256(require_file(path), a.sha256)
    check_md5(path, a.md5)
    return verification(path, "sha256" if a.sha256 else "md5" if a.md5 else None)


def passage_args(max_valid=True):
    return (arg("--seed", type=int, required=True),
            arg("--valid-fraction", type=float, default=0.1, help="of the training queries, held out as valid"),
            *((arg("--max-valid", type=int, default=0, help="at most this many valid queries; 0 = no cap"),)
              if max_valid else ()),
            arg("--out-dir", required=True, help="folder of candidates.jsonl, queries.tsv, qrels.txt, stats.json"),
            arg("--split-dir", required=True, help="folder of the dev split's train.tsv, valid.tsv, test.tsv"))


def build_passages(a, build, **kw):
    """Run a towers.datasets builder into temporary outputs, renamed into place together on success."""
    from ..datasets.collection import atomic_outputs

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
    from ..datasets.msmarco import build_msmarco

    verified = source_checks(a.source, a)
    out, stats = build_passages(a, build_msmarco, source=a.source, collection=a.collection, train=a.train, dev=a.dev,
                                max_valid=a.max_valid)
    return out, {**stats, "checksum": verified}


@stage("passages-graded", arg("--queries", required=True, help="qid<TAB>text, optionally gzipped"),
       arg("--qrels", required=True, help="TREC qrels with grades (qid Q0 docid grade)"),
       arg("--candidates", required=True, help="the base dataset's candidates.jsonl (the collection searched)"),
       arg("--queries-digest", default="", help="algorithm:hex (sha256 or md5) of a local queries file"),
       arg("--qrels-digest", default="", help="algorithm:hex of a local qrels file (downloads: checked by download)"),
       arg("--out-dir", required=True), arg("--split-dir", required=True))
def passages_graded(a):
    """A graded evaluation set (TREC DL 2019) over another passage dataset's collection (downloads are
    checked by rule download)."""
    import contextlib

    from ..datasets.collection import SPLIT_FILES
    from ..datasets.graded import build_graded

    names = {"queries.tsv": Path(a.out_dir) / "queries.tsv", "qrels.txt": Path(a.out_dir) / "qrels.txt",
             "stats.json": Path(a.out_dir) / "stats.json",
             **{f"split/{name}": Path(a.split_dir) / name for name in SPLIT_FILES}}
    with contextlib.ExitStack() as stack:
        tmp = {key: stack.enter_context(atomic_path(path)) for key, path in names.items()}
        verified = {}
        for path, given in ((a.queries, a.queries_digest), (a.qrels, a.qrels_digest)):
            algorithm, _, digest = given.partition(":")
            if given and algorithm not in ("sha256", "md5"):
                raise StageError(path, f"digest {given!r} is not sha256:<hex> or md5:<hex>")
            check_digest(require_file(path), algorithm, digest) if given else None
            verified.update(verification(path, algorithm if given else None))
        stats = build_graded(a.queries, a.qrels, a.candidates, tmp)
    return names["qrels.txt"], {**stats, "checksum": verified}


@stage("passages-beir", arg("--source", required=True, help="a BEIR dataset folder, or its zip"),
       arg("--eval-split", default="test", help="qrels/<x>.tsv: the test side"),
       arg("--train-split", default="", help="qrels/<x>.tsv for training; '' = none"),
       arg("--sha256", default=""), arg("--md5", default=""), *passage_args())
def passages_beir(a):
    """Passage ranking from the BEIR JSONL form (corpus.jsonl, queries.jsonl, qrels/<split>.tsv)."""
    from ..datasets.beir import build_beir

    verified = source_checks(a.source, a)
    out, stats = build_passages(a, build_beir, source=a.source, eval_split=a.eval_split, train_split=a.train_split,
                                max_valid=a.max_valid)
    return out, {**stats, "checksum": verified}


@stage("passages-wiki", arg("--articles", required=True, help="parsed articles (parse-wiki)"),
       arg("--questions", required=True, help="the ReQA question set (article, question, answer, sentence_start)"),
       arg("--ict-queries", type=int, default=0, help="ICT pseudo-queries added to train"),
       arg("--test-questions", default="", help="a second question set whose dev fraction is the test side; "
                                                 "the rest of it trains beside --questions"),
       arg("--dev-fraction", type=float, default=0.2, help="of the questions, the test side"),
       arg("--judgements", default="", help="graded judgements of both question sets' pooled sentences"),
       *passage_args(False))
def passages_wiki(a):
    """Passage ranking from parsed Wikipedia articles: paragraphs as passages, questions + ICT pseudo-queries."""
    from ..datasets.wiki_passages import build_wiki

    return build_passages(a, build_wiki, articles_path=a.articles, questions_path=a.questions,
                          ict_queries=a.ict_queries, dev_fraction=a.dev_fraction,
                          test_questions_path=a.test_questions or None, judgements_path=a.judgements or None)


@stage("passages-triples", arg("--triples", required=True, help="MS MARCO text triples: .tsv, .tsv.gz or a tar archive"),
       arg("--member", default="", help="the triples file inside an archive; default: the archive's name as .tsv"),
       arg("--sha256", default=""), arg("--md5", default=""),
       arg("--candidates", required=True), arg("--queries", required=True, help="the training queries (split train.tsv)"),
       arg("--qrels", required=True), arg("--max-triples", type=int, default=0, help="read at most this many; 0 = all"),
       arg("--out", required=True, help="qid<TAB>positive pid<TAB>negative pid"))
def passages_triples(a):
    """MS MARCO's text triples (query, positive, negative) as ids, for the training queries."""
    from ..datasets.collection import progress
    from ..datasets.msmarco import PassageLookup, triples_to_ids
    from ..datasets.readers import read_triples
    from ..datasets.sources import Source
    from ..io import atomic_open

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
