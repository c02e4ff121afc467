import numpy as np
import pytest
import torch

from towers.encode import encode, length_order
from towers.models import Tower, TwoTower, random_encoder
from towers.tokenizer import train_wordpiece
from transformers import AutoModel, AutoTokenizer

TEXTS = ["short one.", "a much longer sentence about the harbour lighthouse and its keepers in winter.",
         "mid length text here.", "x", "another fairly long line that talks about herring boats and markets."]


@pytest.fixture(scope="module")
def tower(tmp_path_factory):
    root = tmp_path_factory.mktemp("enc")
    train_wordpiece(TEXTS * 5, root / "tok", vocab_size=150, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64,
                                                "max_positions": 64}, seed=0)
    torch.manual_seed(0)
    return Tower(AutoModel.from_pretrained(root / "enc"), "cls", 8).eval(), AutoTokenizer.from_pretrained(root / "tok")


def test_length_sorting_keeps_input_order(tower):
    model, tok = tower
    sorted_ = encode(model, tok, TEXTS, "query", 32, batch_size=2, sort_by_length=True)
    plain = encode(model, tok, TEXTS, "query", 32, batch_size=2, sort_by_length=False)
    one_by_one = np.vstack([encode(model, tok, [t], "query", 32, batch_size=1) for t in TEXTS])
    assert np.allclose(sorted_, one_by_one, atol=1e-5) and np.allclose(plain, one_by_one, atol=1e-5)


def test_length_order_is_longest_first():
    assert list(length_order([3, 9, 1, 9])) == [1, 3, 0, 2]


def test_two_tower_save_and_load(tmp_path, tower):
    model, tok = tower
    pair = TwoTower(model, None, {"pooling": "cls", "embedding_dim": 8, "shared": True, "query_length": 16,
                                   "doc_length": 32})
    pair.save(tmp_path / "m", tok)
    loaded, tok2 = TwoTower.load(tmp_path / "m")
    assert loaded.shared
    a = encode(pair.query, tok, TEXTS, "query", 16, 4)
    b = encode(loaded.query, tok2, TEXTS, "query", 16, 4)
    assert np.allclose(a, b, atol=1e-6)
