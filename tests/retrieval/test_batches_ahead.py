"""Issue 54: the host side kept ahead of the device. Encoding pads each batch with one gather and (on a GPU, forced
here on the CPU) pads the next batch in a thread and copies the vectors back a block at a time; reranking tokenises
its pairs ahead, a block at a time; a fast tokenizer's ids are read from its backend. Each gives the bytes the
batch-by-batch path gave."""
import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

from towers.modeling.tokens import _tokenizer_call, tokenize_unpadded
from towers.retrieval import encode as enc
from towers.retrieval import rerank

from test_encode import TEXTS, tower  # noqa: F401  (the module's tiny tower, a fixture)

rng = np.random.default_rng(3)
WORDS = " ".join(TEXTS).split()
DOCS = [" ".join(rng.choice(WORDS, int(n))) for n in rng.integers(1, 40, 90)]


def test_each_batch_is_padded_as_the_tokenizer_pads_it(tower):  # noqa: F811
    """Tokenised.batch against the tokenizer's own padded call, rows in any order, texts and pairs."""
    from towers.modeling.tokens import tokenize_docs, tokenize_queries

    _, tok = tower
    pairs = [(d, DOCS[-i - 1]) for i, d in enumerate(DOCS)]
    for items, kind in ((DOCS, "query"), (pairs, "doc")):
        tokens = enc.Tokenised(tok, items, kind, 24, step=7)
        for idx in (np.arange(len(items)), rng.permutation(len(items))[:13], np.array([5]),
                    enc.length_order(tokens.lengths)[:9]):
            chunk = [items[i] for i in idx]
            expected = (tokenize_queries(tok, chunk, 24, "cpu") if kind == "query"
                        else tokenize_docs(tok, chunk, 24, "cpu"))
            got = tokens.batch(idx)
            assert got.keys() == expected.keys()
            assert all(got[k].dtype == torch.int64 and torch.equal(got[k], expected[k]) for k in got)


@pytest.mark.parametrize("kind,segment", [("query", 0), ("doc", 1)])
def test_batches_padded_ahead_and_vectors_kept_back_give_the_same_bytes(tower, monkeypatch, kind,  # noqa: F811
                                                                        segment):
    """forward(ahead=True): the thread, the vectors held KEPT_ROWS at a time (here 10: several copies back, the last
    short), on ids tokenised once and on batches tokenised one by one (a tokenizer Tokenised does not fit)."""
    model, tok = tower
    monkeypatch.setattr(enc, "KEPT_ROWS", 10)
    prepared = enc.prepare(tok, DOCS, kind, 24)
    serial = {}
    for batch_size in (3, 4, 64):
        serial[batch_size] = enc.forward(model, tok, prepared, kind, 24, batch_size, desc=None, segment=segment,
                                         ahead=False)
        ahead = enc.forward(model, tok, prepared, kind, 24, batch_size, desc=None, segment=segment, ahead=True)
        assert ahead.tobytes() == serial[batch_size].tobytes() and ahead.shape == (len(DOCS), 8)
    by_batch = enc.Prepared(prepared.items, None, prepared.order)
    assert enc.forward(model, tok, by_batch, kind, 24, 4, desc=None, segment=segment, ahead=True).tobytes() == \
        enc.forward(model, tok, by_batch, kind, 24, 4, desc=None, segment=segment, ahead=False).tobytes() == \
        serial[4].tobytes()
    assert enc.forward(model, tok, enc.prepare(tok, [], kind, 24), kind, 24, 4, ahead=True).shape == (0, 0)


def test_vectors_go_into_the_callers_matrix_where_it_fits(tower):  # noqa: F811
    """encode_corpus hands each chunk the last chunk's matrix (fresh memory is faulted in page by page): the vectors
    are written into its first rows, every one of them; a matrix of another width, or too few rows, is not used."""
    model, tok = tower
    prepared = enc.prepare(tok, DOCS, "doc", 24)
    plain = enc.forward(model, tok, prepared, "doc", 24, 4, desc=None)
    for ahead in (False, True):
        into = np.full((len(DOCS) + 5, 8), np.nan, dtype=np.float32)
        got = enc.forward(model, tok, prepared, "doc", 24, 4, desc=None, ahead=ahead, into=into)
        assert np.shares_memory(got, into) and got.tobytes() == plain.tobytes() and np.isnan(into[len(DOCS):]).all()
        for unfit in (np.zeros((len(DOCS), 3), dtype=np.float32), np.zeros((3, 8), dtype=np.float32)):
            got = enc.forward(model, tok, prepared, "doc", 24, 4, desc=None, ahead=ahead, into=unfit)
            assert not np.shares_memory(got, unfit) and got.tobytes() == plain.tobytes()


def test_an_error_padding_a_batch_ahead_is_raised_where_it_is_read(tower, monkeypatch):  # noqa: F811
    model, tok = tower
    prepared = enc.prepare(tok, DOCS, "doc", 24)
    padded = enc.Tokenised.batch

    def third_fails(self, idx, dev=None, pin=False):
        if idx[0] == prepared.order[8]:
            raise RuntimeError("padding failed")
        return padded(self, idx, dev, pin)

    monkeypatch.setattr(enc.Tokenised, "batch", third_fails)
    with pytest.raises(RuntimeError, match="padding failed"):
        enc.forward(model, tok, prepared, "doc", 24, 4, desc=None, ahead=True)


def test_a_fast_tokenizers_ids_read_from_its_backend_are_its_calls(tower, tmp_path):  # noqa: F811
    """tokenize_unpadded against the tokenizer's call: texts and pairs cut at several lengths, special tokens and
    unusual text inside, an empty text; a tokenizer without segment ids gives none; a later padded, cut call does
    not leak into it."""
    _, tok = tower
    texts = DOCS + ["", "  ", "[SEP] inside [CLS] a [PAD] text", "héllo wörld, ünïcode ✓ 中文",
                    "lighthouse " * 80]
    pairs = [(t, texts[-i - 1]) for i, t in enumerate(texts)]
    tok(["a", "b c d"], padding="max_length", truncation=True, max_length=3)
    for items, are_pairs in ((texts, False), (pairs, True)):
        for length in (6, 9, 24, 512):
            lean = tokenize_unpadded(tok, items, are_pairs, length)
            called = _tokenizer_call(tok, items, are_pairs, length)
            assert list(lean) == list(called) == ["input_ids", "token_type_ids", "attention_mask"]
            assert all(lean[name] == called[name] for name in lean), (are_pairs, length)
    tok.save_pretrained(tmp_path / "tok")
    unsegmented = AutoTokenizer.from_pretrained(tmp_path / "tok", model_input_names=["input_ids", "attention_mask"])
    lean, called = tokenize_unpadded(unsegmented, pairs, True, 12), _tokenizer_call(unsegmented, pairs, True, 12)
    assert list(lean) == list(called) == ["input_ids", "attention_mask"] and lean == dict(called)


def per_batch_scores(model, tok, pairs, max_length, batch_size):
    """score_pairs as it was: each batch tokenised (padded) by the tokenizer as it came."""
    order = np.argsort(-np.asarray([len(q) + len(p) for q, p in pairs]), kind="stable")
    out = np.zeros(len(pairs), dtype=np.float64)
    for start in range(0, len(pairs), batch_size):
        idx = order[start:start + batch_size]
        batch = rerank.tokenize_pairs(tok, [pairs[i][0] for i in idx], [pairs[i][1] for i in idx], max_length, "cpu")
        with torch.no_grad():
            out[idx] = rerank.relevance(model(**batch).logits.float()).numpy()
    return out


@pytest.mark.parametrize("labels", [1, 2])
def test_pairs_tokenised_ahead_score_the_bytes_of_batches_tokenised_one_by_one(tower, monkeypatch,  # noqa: F811
                                                                                labels):
    """Several blocks of pairs (AHEAD_PAIRS 20, batches of 6: blocks of 18), the next tokenised in a thread or not."""
    _, tok = tower
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=64,
                                                     num_labels=labels)).eval()
    pairs = [(DOCS[i % 7][:30], d) for i, d in enumerate(DOCS)]
    monkeypatch.setattr(rerank, "AHEAD_PAIRS", 20)
    expected = per_batch_scores(model, tok, pairs, 20, 6)
    for ahead in (False, True):
        assert rerank.score_pairs(model, tok, pairs, 20, 6, desc=None, ahead=ahead).tobytes() == expected.tobytes()
    monkeypatch.setattr(enc.Tokenised, "fits", staticmethod(lambda *_: False))   # a tokenizer that pads otherwise
    assert rerank.score_pairs(model, tok, pairs, 20, 6, desc=None).tobytes() == expected.tobytes()
    assert rerank.score_pairs(model, tok, [], 20, 6, desc=None).shape == (0,)
