"""The stages behind `python -m towers <stage>`, one module a family (data, training, search,
tables); a stage registers itself with @stage when its module is imported."""
from __future__ import annotations

STAGES = {}


def stage(name: str, *arguments):
    """Register a stage: `arguments` are (flag, argparse keywords) pairs."""
    def register(func):
        STAGES[name] = (func, arguments)
        return func
    return register


def arg(flag, **kw):
    return (flag, kw)


def load_all() -> dict:
    """Every stage, by name (importing the families registers them)."""
    from . import data, training, search, tables  # noqa: F401  (in the order of the DAG)

    return STAGES
