"""The token cache (tokens.cached_tokens) trusts a file only as far as it checks out (issue 56): a file
made for other texts, with ids edited, out of the vocabulary or negative, arrays missing or extra, lengths moved, or
not a readable .npz is named in one warning line, replaced, and the encoding is the bytes of one without a cache."""
import json
import shutil

import numpy as np
import pytest

from test_encode import TEXTS, tower  # noqa: F401  (the module's tiny tower, a fixture)

from towers.modeling import tokens
from towers.retrieval import encode as enc

LENGTH = 24


def _rows(suffix=""):
    return [{"id": f"d{i}", "sentence": TEXTS[i % 5] + suffix, "paragraph": TEXTS[(i + 2) % 5]} for i in range(12)]


def _doc(row):
    return row["sentence"], row["paragraph"]


def _encode(model_and_tokenizer, folder, name, rows, cache):
    model, tok = model_and_tokenizer
    enc.encode_corpus(model, tok, iter(rows), len(rows), _doc, folder / f"{name}.npy", folder / f"{name}.ids", LENGTH,
                      5, desc=None, segment=1, cache=cache)
    return (folder / f"{name}.npy").read_bytes()


def _cache_file(tok, rows, cache):
    return cache / f"{tokens.tokens_key(tok, [_doc(r) for r in rows], 'doc', LENGTH)}.npz"


def _arrays(path):
    with np.load(path) as saved:
        return {name: saved[name] for name in saved.files}


def _edit(name, edit):
    """A damage: array `name` edited in place by `edit(array, arrays)`, the file saved back with its key and digest."""
    def damage(path, tok, foreign):
        arrays = _arrays(path)
        arrays[name] = arrays[name].copy()
        edit(arrays[name], arrays, tok)
        _saved(path, arrays)
    return damage


def _without(*names):
    return lambda path, tok, foreign: _saved(path, {k: v for k, v in _arrays(path).items() if k not in names})


def _saved(path, arrays):
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def _second_ids(ids, arrays, tok):   # each passage's second id set to 100, a word of the vocabulary
    ids[np.concatenate([[0], np.cumsum(arrays["lengths"])[:-1]]) + 1] = 100


def _past_vocabulary(ids, arrays, tok):
    ids[5] = len(tok)


def _negative(ids, arrays, tok):
    ids[5] = -1


def _moved_lengths(lengths, arrays, tok):   # a token moved from the second passage to the first: same count, same sum
    lengths[0] += 1
    lengths[1] -= 1


def _cut_short(lengths, arrays, tok):
    lengths[0] = 1


def _extra_column(path, tok, foreign):
    _saved(path, {**_arrays(path), "extra": _arrays(path)["input_ids"]})


DAMAGE = {   # case: (damage(path, tokenizer, another collection's file), what the warning says)
    "edited ids": (_edit("input_ids", _second_ids), "do not match the digest"),
    "id past the vocabulary": (_edit("input_ids", _past_vocabulary), "past the tokenizer's"),
    "negative id": (_edit("input_ids", _negative), "input_ids holds a negative id"),
    "missing attention_mask": (_without("attention_mask"), "lacks attention_mask"),
    "extra column": (_extra_column, "nothing writes (extra)"),
    "moved lengths": (_edit("lengths", _moved_lengths), "do not match the digest"),
    "lengths cut short": (_edit("lengths", _cut_short), "the lengths add up to"),
    "an older cache without key or digest": (_without("key", "digest"), "lacks digest, key"),
    "another collection's ids of the same count": (lambda path, tok, foreign: shutil.copyfile(foreign, path),
                                                   "made for other texts"),
    "truncated": (lambda path, tok, foreign: path.write_bytes(path.read_bytes()[:300]), "not a readable .npz"),
    "not a zip": (lambda path, tok, foreign: path.write_text("token ids\n"), "not a readable .npz"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_cache_file_not_checking_out_is_named_replaced_and_the_encoding_unchanged(case, tmp_path, tower,  # noqa: F811
                                                                                    capsys):
    _, tok = tower
    damage, problem = DAMAGE[case]
    rows, others, cache = _rows(), _rows(" and more words"), tmp_path / ".tokens"
    plain = _encode(tower, tmp_path, "plain", rows, None)
    assert _encode(tower, tmp_path, "cold", rows, cache) == plain
    _encode(tower, tmp_path, "others", others, cache)
    path, foreign = _cache_file(tok, rows, cache), _cache_file(tok, others, cache)
    made = _arrays(path)
    assert len(tok) > 100 and made["input_ids"].max() < len(tok)   # 100: a word of the vocabulary
    capsys.readouterr()
    assert _encode(tower, tmp_path, "warm", rows, cache) == plain and capsys.readouterr().err == ""

    damage(path, tok, foreign)
    assert _encode(tower, tmp_path, "damaged", rows, cache) == plain
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"warning: {path}: ") and problem in lines[0], lines
    assert "Traceback" not in lines[0] and "made again" in lines[0]
    replaced = _arrays(path)
    assert replaced.keys() == made.keys() and all(np.array_equal(replaced[k], made[k]) for k in made)
    assert _encode(tower, tmp_path, "after", rows, cache) == plain and capsys.readouterr().err == ""


def test_the_stage_given_another_collections_ids_exits_0_with_the_uncached_embeddings(tmp_path, tower,  # noqa: F811
                                                                                      monkeypatch):
    """encode-candidates as Snakemake runs it: the foreign file is named on stderr, the run succeeds, and its
    matrix is the one written with the cache off."""
    from conftest import run_stage
    from towers.modeling.models import TwoTower

    model, tok = tower
    TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                           "doc_length": LENGTH, "doc_text": "sentence"}).save(tmp_path / "m", tok)

    def stage(name, rows):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return run_stage("encode-candidates", "--model", tmp_path / "m", "--candidates", tmp_path / f"{name}.jsonl",
                         "--embeddings", tmp_path / f"{name}.npy", "--ids", tmp_path / f"{name}.ids")

    rows, others = _rows(), _rows(" and more words")
    monkeypatch.setenv("TOWERS_TOKEN_CACHE", "off")
    assert stage("plain", rows).returncode == 0 and not (tmp_path / ".tokens").exists()
    monkeypatch.delenv("TOWERS_TOKEN_CACHE")
    assert stage("others", others).returncode == 0
    key_of = lambda rs: tokens.tokens_key(tok, [r["sentence"] for r in rs], "doc", LENGTH)   # noqa: E731
    path = tmp_path / ".tokens" / f"{key_of(rows)}.npz"
    shutil.copyfile(tmp_path / ".tokens" / f"{key_of(others)}.npz", path)
    done = stage("c", rows)
    assert done.returncode == 0, done.stderr[-2000:]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [line for line in warnings if line.startswith(f"warning: {path}: made for other texts")] != []
    assert (tmp_path / "c.npy").read_bytes() == (tmp_path / "plain.npy").read_bytes()


def test_load_overhead_of_the_checks_is_small_beside_reading_the_file(tmp_path):
    """The checks (structure, key, digest) over 65,536 synthetic passages of ~60 tokens cost a fraction of reading
    the file itself: printed for the report, asserted loosely so a slow shared machine does not fail it."""
    import time

    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 100, 65536).astype(np.int64)
    total = int(lengths.sum())
    made = tokens.Tokenised.__new__(tokens.Tokenised)
    made.lengths, made.columns = lengths, {"input_ids": rng.integers(0, 30000, total).astype(np.int32),
                                           "token_type_ids": np.zeros(total, np.int32),
                                           "attention_mask": np.ones(total, np.int32)}
    made.save(tmp_path / "t.npz", "k" * 32)
    names = set(made.columns)

    def best(step):
        times = []
        for _ in range(5):
            began = time.perf_counter()
            step()
            times.append(time.perf_counter() - began)
        return min(times)

    read = best(lambda: _arrays(tmp_path / "t.npz"))
    checked = best(lambda: tokens.Tokenised.load(tmp_path / "t.npz", "k" * 32, {}, 65536, names, 30000))
    print(f"\ntoken cache of 65,536 passages ({total} tokens): read {read * 1000:.1f} ms, "
          f"read and checked {checked * 1000:.1f} ms")
    assert checked < read + 1.0
