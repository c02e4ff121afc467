"""Cold-start question-level splits (Chang et al. 4.1): train/test by ratio, 10% of train held out."""
from __future__ import annotations

import random


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def cold_start_split(queries: dict[str, str], train_fraction: float, valid_fraction: float, seed: int):
    """Return {'train','valid','test'} -> list of qids.

    Questions with identical text are kept on the same side, so no test question's text is
    seen in training. Group order is shuffled with `seed`; train takes the first groups."""
    groups: dict[str, list[str]] = {}
    for qid, text in queries.items():
        groups.setdefault(_normalised(text), []).append(qid)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    n_train = max(1, round(train_fraction * len(queries)))
    train, test = [], []
    for key in keys:
        (train if len(train) < n_train else test).extend(groups[key])
    n_valid = round(valid_fraction * len(train)) if len(train) > 1 else 0
    if valid_fraction > 0 and len(train) > 1:
        n_valid = max(1, n_valid)
    return {"train": train[n_valid:], "valid": train[:n_valid], "test": test}
