"""The stages behind `python -m towers <stage>`, one module a family (prepare: downloads, Wikipedia, question
sets and pairs; prepare_passages: passage collections; train; search; tables: evaluation, tables, verdicts, the
report); a stage registers itself with @stage when its module is imported."""
from __future__ import annotations

STAGES = {}
# the argument naming a stage's main output, where it is not --out, --out-dir or --csv (see main_output)
WRITES = {"parse-wiki": "articles", "merge-wiki-parts": "articles", "bm25-index": "index", "bm25-search": "run",
          "merge-runs": "run", "encode-candidates": "embeddings", "merge-embeddings": "embeddings", "dense-search": "run"}
WRITES_NOTHING = {"check"}   # reads its --csv: neither locks it nor removes the record beside it


def stage(name: str, *arguments):
    """Register a stage: `arguments` are (flag, argparse keywords) pairs."""
    def register(func):
        STAGES[name] = (func, arguments)
        return func
    return register


def arg(flag, **kw):
    return (flag, kw)


def main_output(name: str, args) -> str | None:
    """The path of a stage's main output, from its parsed arguments (the one its writer lock is taken on)."""
    if name in WRITES_NOTHING:
        return None
    for dest in (WRITES.get(name), "out", "out_dir", "csv"):
        if dest and getattr(args, dest, None):
            return str(getattr(args, dest))
    return None


def load_all() -> dict:
    """Every stage, by name (importing the families registers them)."""
    from . import prepare, prepare_passages, train, search, tables  # noqa: F401  (in the order of the DAG)

    return STAGES
