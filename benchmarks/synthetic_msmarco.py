"""Synthetic collections in MS MARCO passage ranking's own files, at any size, for the scaling benchmark.

Text is drawn from a Zipf-like vocabulary (rank r has weight 1/r^1.1 over 400K word types), so postings are as
skewed as real text; passage lengths follow MS MARCO's (mean ~56 words); each query takes a few words of one
passage (its judged passage) and a common word or two, so BM25 finds its passage often, not always. Training
queries scale with the collection as MS MARCO's do (502,939 for 8,841,823 passages: 0.057 a passage); dev queries
0.0008 a passage, at least 200.

Files, named as the official downloads (config/paper.yaml):
  collectionandqueries.tar.gz   collection.tsv, queries.{train,dev.small}.tsv, qrels.{train,dev.small}.tsv
  triples.train.small.tar.gz    triples.train.small.tsv (query, positive passage, negative passage: text)
  msmarco-test2019-queries.tsv.gz, 2019qrels-pass.txt   TREC DL 2019's form: 200 queries, 43 judged 0-3
"""
from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from pathlib import Path

import numpy as np

TRAIN_PER_PASSAGE = 502_939 / 8_841_823
DEV_PER_PASSAGE = 6_980 / 8_841_823
VOCABULARY = 400_000
ZIPF = 1.1


def words(n: int) -> np.ndarray:
    """n distinct lower-case words, the shortest first (the most frequent ranks get the short ones)."""
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    out, length = [], 2
    while len(out) < n:
        count = min(26 ** length, n - len(out))
        codes = np.arange(count)
        word = np.full(count, "", dtype=object)
        for _ in range(length):
            word = letters[codes % 26].astype(object) + word
            codes //= 26
        out.extend(word.tolist())
        length += 1
    return np.array(out, dtype=object)


class Text:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.vocab = words(VOCABULARY)
        weights = 1.0 / np.arange(1, VOCABULARY + 1) ** ZIPF
        self.cdf = np.cumsum(weights / weights.sum())

    def ranks(self, n: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, self.rng.random(n)), VOCABULARY - 1)

    def passages(self, n: int) -> list[np.ndarray]:
        lengths = np.clip(self.rng.normal(56, 22, n).astype(int), 8, 200)
        flat = self.ranks(int(lengths.sum()))
        return np.split(flat, np.cumsum(lengths)[:-1])

    def query(self, passage: np.ndarray) -> str:
        """3-5 words of the passage (rarer ones more likely, as people ask with content words) and one common word."""
        take = self.rng.integers(3, 6)
        chosen = self.rng.choice(passage, size=min(take, len(passage)), replace=False)
        common = self.ranks(1)[0] % 50
        return " ".join(self.vocab[np.concatenate([[common], chosen])])


def _add(tar: tarfile.TarFile, name: str, text: str) -> None:
    data = text.encode("utf-8")
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_msmarco(dest: Path, passages: int, seed: int = 13, triples_per_query: int = 4) -> dict:
    """The four files above in `dest`; returns their names -> md5 and the counts."""
    dest.mkdir(parents=True, exist_ok=True)
    text = Text(seed)
    rng = text.rng
    docs = text.passages(passages)
    collection = "".join(f"{pid}\t{' '.join(text.vocab[d])}\n" for pid, d in enumerate(docs))
    n_train = round(passages * TRAIN_PER_PASSAGE)
    n_dev = max(200, round(passages * DEV_PER_PASSAGE))
    judged = rng.choice(passages, size=n_train + n_dev, replace=False)
    queries = [text.query(docs[pid]) for pid in judged]
    train_ids = np.arange(n_train) * 3 + 1_000_000          # distinct id ranges, as MS MARCO's are
    dev_ids = np.arange(n_dev) * 7 + 5_000_000
    train = [(int(q), queries[i], int(judged[i])) for i, q in enumerate(train_ids)]
    dev = [(int(q), queries[n_train + i], int(judged[n_train + i])) for i, q in enumerate(dev_ids)]
    archive = dest / "collectionandqueries.tar.gz"
    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        _add(tar, "collection.tsv", collection)
        for name, rows in (("train", train), ("dev.small", dev)):
            _add(tar, f"queries.{name}.tsv", "".join(f"{q}\t{t}\n" for q, t, _ in rows))
            _add(tar, f"qrels.{name}.tsv", "".join(f"{q}\t0\t{p}\t1\n" for q, _, p in rows))
    del collection
    lines = []
    for _, query, positive in train:
        for negative in rng.integers(0, passages, triples_per_query):
            if negative != positive:
                lines.append(f"{query}\t{' '.join(text.vocab[docs[positive]])}\t{' '.join(text.vocab[docs[negative]])}\n")
    triples = dest / "triples.train.small.tar.gz"
    with tarfile.open(triples, "w:gz", compresslevel=1) as tar:
        _add(tar, "triples.train.small.tsv", "".join(lines))
    # TREC DL 2019's form: 200 test queries, 43 of them judged (grades 0-3) over ~200 passages each
    dl_pids = rng.choice(passages, size=200, replace=False)
    dl_queries = [(int(9_000_000 + i), text.query(docs[p])) for i, p in enumerate(dl_pids)]
    with gzip.open(dest / "msmarco-test2019-queries.tsv.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(f"{q}\t{t}\n" for q, t in dl_queries)
    qrels = []
    for (qid, _), pid in list(zip(dl_queries, dl_pids))[:43]:
        qrels.append(f"{qid} Q0 {pid} 3\n")
        for other in rng.choice(passages, size=min(200, passages - 1), replace=False):
            if other != pid:
                qrels.append(f"{qid} Q0 {other} {int(rng.choice(4, p=[0.7, 0.15, 0.1, 0.05]))}\n")
    (dest / "2019qrels-pass.txt").write_text("".join(qrels))
    names = ["collectionandqueries.tar.gz", "triples.train.small.tar.gz", "msmarco-test2019-queries.tsv.gz",
             "2019qrels-pass.txt"]
    return {"md5": {n: md5_of(dest / n) for n in names},
            "counts": {"passages": passages, "train_queries": n_train, "dev_queries": n_dev, "triples": len(lines),
                       "words": int(sum(len(d) for d in docs))}}


if __name__ == "__main__":
    import argparse
    import json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dest", type=Path)
    p.add_argument("--passages", type=int, required=True)
    p.add_argument("--seed", type=int, default=13)
    a = p.parse_args()
    print(json.dumps(write_msmarco(a.dest, a.passages, a.seed), indent=1))
