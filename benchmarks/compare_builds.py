"""Two finished builds' tracked results, file by file (`python -m benchmarks.reproduce --before-after OLD NEW`):
identical or not, and how many cells of a table moved."""
from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

from .workflow_harness import ROOT


def cells_moved(folder: Path, tables: list[str], old_bytes) -> dict[str, int]:
    """Per rebuilt table CSV that differs from its old version (`old_bytes(path)`): how many of its cells differ."""
    import pandas as pd

    moved = {}
    for table in tables:
        old, new = pd.read_csv(io.BytesIO(old_bytes(table)), dtype=str), pd.read_csv(folder / table, dtype=str)
        if old.shape != new.shape or list(old.columns) != list(new.columns):
            moved[table] = -1   # the shape itself changed
        else:
            moved[table] = int((old.fillna("") != new.fillna("")).to_numpy().sum())
    return moved


def committed_bytes(commit: str, path: str, root: Path = ROOT) -> bytes:
    """A file as `commit` of the checkout at `root` holds it (not as the working tree has it)."""
    return subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, check=True).stdout


def compared_with_commit(folder: Path, tracked: list[str], root: Path = ROOT) -> dict:
    """The build's result files byte for byte against those committed at the HEAD of the checkout at `root`: the
    commit, the files that differ (and how many cells of each table), and the files that commit does not hold,
    which were not compared."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                            check=True).stdout.strip()
    committed = set(subprocess.run(["git", "ls-tree", "-r", "--name-only", commit, "--", "results"], cwd=root,
                                   capture_output=True, text=True, check=True).stdout.split())
    moved = [f for f in tracked if f in committed and (folder / f).read_bytes() != committed_bytes(commit, f, root)]
    return {"results_moved_against": commit, "results_moved": moved,
            "results_not_compared": [f for f in tracked if f not in committed],
            "cells_moved": cells_moved(folder, [f for f in moved if f.endswith(".csv")],
                                       lambda f: committed_bytes(commit, f, root))}


def verdicts_moved(folder: Path, against: Path = ROOT, before_csv: bytes | None = None) -> dict:
    """Each paper's claim verdicts in `against`'s results/claims.csv (or `before_csv`, that file's bytes as a commit
    holds it) before and the build's after, counted, and every claim whose verdict moved ("before -> after")."""
    import pandas as pd

    def verdicts(source) -> pd.Series:
        claims = pd.read_csv(source)
        return claims.groupby(["paper", "claim"], sort=False)["claim verdict"].first()

    before = verdicts(io.BytesIO(before_csv) if before_csv is not None else against / "results/claims.csv")
    after = verdicts(folder / "results/claims.csv")
    counts = {paper: {"before": before[paper].value_counts().to_dict(), "after": after[paper].value_counts().to_dict()}
              for paper in after.index.get_level_values(0).unique()}
    moved = {claim: f"{before.get((paper, claim), 'absent')} -> {verdict}" for (paper, claim), verdict in after.items()
             if before.get((paper, claim)) != verdict}
    return {"counts": counts, "moved": moved}


def before_after(old: Path, new: Path) -> dict:
    """The tracked results (tables, their JSON twins, figures and their CSVs, claims, check; not the records
    beside them, which hold times) of two finished builds, file by file."""
    tracked = [f for f in subprocess.run(["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True,
                                         check=True).stdout.split() if not f.endswith(".meta.json")]
    missing = [f for f in tracked if not (old / f).exists() or not (new / f).exists()]
    compared = [f for f in tracked if f not in missing]
    moved = [f for f in compared if (old / f).read_bytes() != (new / f).read_bytes()]
    commits = [json.loads((d / "reproduce-times.json").read_text())["commit"] if (d / "reproduce-times.json").exists()
               else subprocess.run(["git", "rev-parse", "HEAD"], cwd=d, capture_output=True, text=True).stdout.strip()
               for d in (old, new)]
    return {"before": commits[0], "after": commits[1], "compared": len(compared),
            "identical": len(compared) - len(moved), "moved": moved, "missing": missing,
            "cells_moved": cells_moved(new, [f for f in moved if f.endswith(".csv")], lambda f: (old / f).read_bytes()),
            "largest_move": {f: largest_move(old / f, new / f) for f in moved if f.endswith(".csv")},
            "verdicts": (verdicts_moved(new, against=old) if all((d / "results/claims.csv").exists() for d in (old, new))
                         else None),
            "how": "python -m benchmarks.reproduce --run OLD --commit REV; --run NEW; --before-after OLD NEW"}


def largest_move(old_csv: Path, new_csv: Path) -> float | None:
    """The largest absolute difference between two builds' numeric cells of one table (None: shapes differ)."""
    import pandas as pd

    old, new = pd.read_csv(old_csv), pd.read_csv(new_csv)
    if old.shape != new.shape or list(old.columns) != list(new.columns):
        return None
    numeric = [c for c in old.columns if pd.api.types.is_numeric_dtype(old[c]) and pd.api.types.is_numeric_dtype(new[c])]
    return round(float((old[numeric] - new[numeric]).abs().max().max()), 6) if numeric else 0.0
