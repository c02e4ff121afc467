"""Graded evaluation sets (TREC DL 2019 and the like) over another passage dataset's collection."""
from __future__ import annotations

from pathlib import Path

from ..io import StageError, require_file, write_json, write_qrels, write_queries
from .collection import CollectionWriter, QuerySet, SPLIT, SPLIT_FILES
from .readers import read_qrels_trec, read_queries_tsv
from .sources import open_text

def build_graded(queries_path, qrels_path, candidates_path, out: dict[str, Path]) -> dict:
    """The judged queries of `queries_path` and their graded qrels, checked against the base collection;
    writes queries.tsv, qrels.txt, stats.json and the split's test.tsv (train and valid stay empty)."""
    test = QuerySet("graded")
    with open_text(open(require_file(queries_path), "rb"), str(queries_path)) as handle:
        test.add_queries(read_queries_tsv(handle, queries_path), queries_path)
    with open_text(open(require_file(qrels_path), "rb"), str(qrels_path)) as handle:
        test.add_qrels(read_qrels_trec(handle, qrels_path), qrels_path)
    dropped = test.check_and_keep_judged()
    collection = CollectionWriter.of_candidates(candidates_path)
    for qid, docs in test.qrels.items():
        missing = collection.missing(docs)
        if missing:
            raise StageError(qrels_path, f"line {test.qrels_line[qid]}: query {qid} judges passage {missing[0]}, "
                                         f"which is not in {candidates_path}")
    write_queries(out["queries.tsv"], test.queries)
    write_qrels(out["qrels.txt"], test.qrels)
    for name in SPLIT_FILES:
        write_queries(out[f"split/{name}"], test.queries if name == "test.tsv" else {})
    grades: dict[int, int] = {}
    for docs in test.qrels.values():
        for rel in docs.values():
            grades[rel] = grades.get(rel, 0) + 1
    stats = {"queries": len(test.queries), "judgements": sum(grades.values()),
             "grades": {str(g): n for g, n in sorted(grades.items())}, "split": SPLIT,
             "test_queries": len(test.queries), "dropped_queries": {"unjudged": dropped},
             "collection": str(candidates_path)}
    write_json(out["stats.json"], stats)
    return stats
