"""Helpers several stage families share."""
from __future__ import annotations

import random
from pathlib import Path

from ..io import StageError, read_jsonl, read_queries, require_file


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def load_candidates(path) -> list[dict]:
    rows = list(read_jsonl(path))
    if not rows:
        raise StageError(path, "no candidates")
    return rows


def set_threads(threads: int) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)


def load_embeddings(path, mmap: bool = False):
    """A float32 matrix saved by encode-candidates (`mmap`: mapped read-only, not read); one line if the file
    is not a NumPy array."""
    import numpy as np

    try:
        return np.load(require_file(path), mmap_mode="r" if mmap else None)
    except ValueError as err:
        raise StageError(path, f"not a NumPy array file ({err})") from None


def read_split(split_tsv) -> dict[str, str]:
    """A split's questions; none when its file is empty (a small split may have no valid questions)."""
    path = Path(split_tsv)
    return read_queries(path) if path.exists() and path.stat().st_size else {}


def candidate_texts(path, wanted: set[str], doc_text: str) -> dict[str, object]:
    """What the doc text reads (models.doc_input) of the wanted candidates only, streamed: a passage
    collection can hold millions. A candidate lacking the field is an error; see require_texts."""
    from ..modeling.models import doc_input

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


def verification(path, algorithm: str | None) -> dict:
    """What a stage's meta file records of an input's integrity: checked against a given digest, or not."""
    return {str(path): f"{algorithm} verified" if algorithm else "not verified (no checksum given)"}
