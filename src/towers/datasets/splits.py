"""Cold-start question-level splits (Chang et al. 4.1): train/test by ratio, 10% of train held out."""
from __future__ import annotations

import random
import unicodedata


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def question_key(text: str) -> str:
    """A question's text up to case, punctuation and whitespace: "How many?" and "how many" are one question.
    Format characters (Cf: zero-width space, soft hyphen, byte-order mark) go too: invisible, and the tokenizer
    drops them, so a question holding one is its twin's tokens."""
    text = "".join(ch for ch in unicodedata.normalize("NFKC", text).casefold()
                   if not unicodedata.category(ch).startswith(("P", "Cf")))
    return " ".join(text.split())


def cold_start_split(queries: dict[str, str], train_fraction: float, valid_fraction: float, seed: int,
                     trained_keys: frozenset[str] = frozenset(), answers: dict[str, set[str]] | None = None,
                     trained_answers: frozenset[str] = frozenset()):
    """Return {'train','valid','test'} -> list of qids.

    Questions with the same question_key are kept on the same side, so no test question's text is
    seen in training; so are questions that share an answer (`answers`: qid -> the documents that answer it),
    so no test question asks for a fact a training question was taught. Those whose key is in
    `trained_keys`, or with an answer in `trained_answers` (asked in a set that trains whole), go to
    train and count toward its share. Group order is shuffled with `seed`; train takes the first groups.
    The shuffle is of _normalised texts (lower case, whitespace), as before question_key, so data
    without case or punctuation twins splits as it did then."""
    old_groups: dict[str, list[str]] = {}
    for qid, text in queries.items():
        old_groups.setdefault(_normalised(text), []).append(qid)
    keys = sorted(old_groups)
    random.Random(seed).shuffle(keys)
    answers = answers or {}
    by_key: dict[str, list[str]] = {}      # by question_key, in the order its first text was drawn
    for qid in (qid for key in keys for qid in old_groups[key]):
        by_key.setdefault(question_key(queries[qid]), []).append(qid)
    groups = _joined_by_answer(by_key, answers)
    trained = {first for first, qids in groups.items()
               if any(question_key(queries[q]) in trained_keys or answers.get(q, set()) & trained_answers
                      for q in qids)}
    n_train = max(1, round(train_fraction * len(queries)))
    taken = sum(len(qids) for key, qids in groups.items() if key in trained)
    train, test = [], []
    for key, qids in groups.items():
        if key in trained:
            train.extend(qids)
        elif taken < n_train:
            train.extend(qids)
            taken += len(qids)
        else:
            test.extend(qids)
    n_valid = round(valid_fraction * len(train)) if len(train) > 1 else 0
    if valid_fraction > 0 and len(train) > 1:
        n_valid = max(1, n_valid)
    return {"train": train[n_valid:], "valid": train[:n_valid], "test": test}


def find_root(parent: dict, key):
    """Union-find: the root of `key` in `parent` (key -> parent key), halving the path on the way."""
    while parent[key] != key:
        parent[key] = parent[parent[key]]
        key = parent[key]
    return key


def _joined_by_answer(groups: dict[str, list[str]], answers: dict[str, set[str]]) -> dict[str, list[str]]:
    """`groups` (in draw order) merged wherever two share an answer document, each merged group placed where
    its first-drawn part was (union-find over the groups)."""
    parent = {key: key for key in groups}

    def root(key):
        return find_root(parent, key)
    order = {key: n for n, key in enumerate(groups)}
    holder: dict[str, str] = {}
    for key, qids in groups.items():
        for doc in sorted({d for q in qids for d in answers.get(q, ())}):
            if doc in holder:
                a, b = root(holder[doc]), root(key)
                if a != b:
                    parent[max(a, b, key=order.get)] = min(a, b, key=order.get)
            else:
                holder[doc] = key
    merged: dict[str, list[str]] = {}
    for key, qids in groups.items():
        merged.setdefault(root(key), []).extend(qids)
    return dict(sorted(merged.items(), key=lambda item: order[item[0]]))
