"""Towers: HF transformer encoders with a pooling choice and a projection, shared or separate.

A saved two-tower model is a folder: query/ and doc/ (HF save_pretrained, or only query/ when
shared), tokenizer/, heads.safetensors (projections) and towers.json (the configuration; its
optional doc_segment, e.g. RepBERT's 1, is the segment id of doc tokens, 0 when absent).

An encoder folder is either an HF checkpoint or a hashed bag-of-words encoder (Huang et al. 2020's
word-embedding towers); `load_encoder` and `load_tokenizer` tell them apart by hashed_bow.json."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

from ..io import StageError
from .tokenizer import FeatureHasher  # the bag-of-words towers' tokenizer (load_tokenizer)


def small_bert_config(vocab_size: int, hidden: int, layers: int, heads: int, intermediate: int,
                      max_positions: int) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=intermediate,
                      max_position_embeddings=max_positions)


HASHED_BOW = "hashed_bow.json"


class HashedBagOfWords(nn.Module):
    """One embedding per hashed feature; the tower's mean pooling averages them (no context)."""

    def __init__(self, buckets: int, dim: int):
        super().__init__()
        self.embedding = nn.Embedding(buckets, dim, padding_idx=0)
        self.config = SimpleNamespace(hidden_size=dim, buckets=buckets)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        return SimpleNamespace(last_hidden_state=self.embedding(input_ids))

    def save_pretrained(self, folder) -> None:
        from safetensors.torch import save_file

        Path(folder).mkdir(parents=True, exist_ok=True)
        save_file(self.state_dict(), str(Path(folder) / "model.safetensors"))
        shape = {"buckets": self.config.buckets, "dim": self.config.hidden_size}
        (Path(folder) / HASHED_BOW).write_text(json.dumps(shape) + "\n")

    @classmethod
    def from_pretrained(cls, folder) -> "HashedBagOfWords":
        from safetensors.torch import load_file

        model = cls(**json.loads((Path(folder) / HASHED_BOW).read_text()))
        model.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))
        return model


@contextlib.contextmanager
def readable(folder, what: str = "model"):
    """A saved model or tokenizer that cannot be read (truncated weights, a broken config, a missing file) as
    one line naming its folder, not the loader's traceback."""
    from safetensors import SafetensorError

    try:
        yield
    except (OSError, ValueError, KeyError, RuntimeError, EOFError, SafetensorError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise StageError(folder, f"cannot load the {what}, damaged or incomplete ({first})") from None


def load_encoder(folder) -> nn.Module:
    with readable(folder, "encoder"):
        if (Path(folder) / HASHED_BOW).is_file():
            return HashedBagOfWords.from_pretrained(folder)
        return AutoModel.from_pretrained(folder)


def load_tokenizer(folder):
    with readable(folder, "tokenizer"):
        if (Path(folder) / "hasher.json").is_file():
            return FeatureHasher.from_pretrained(folder)
        return AutoTokenizer.from_pretrained(folder)


def random_bag_of_words(out_dir, buckets: int, dim: int, max_features: int, seed: int, char_ngram: int = 3,
                        word_bigrams: bool = True) -> None:
    """The word-embedding towers' starting point: random feature embeddings and the hasher."""
    torch.manual_seed(seed)
    HashedBagOfWords(buckets, dim).save_pretrained(out_dir)
    FeatureHasher(buckets, max_features, char_ngram, word_bigrams).save_pretrained(out_dir)


def doc_input(candidate: dict, doc_text: str):
    """What a doc tower reads of a candidate: a ReQA candidate's sentence alone (QuadrupletBERT) or
    its (sentence, paragraph) pair (Chang et al.), or a passage collection's "contents" (RepBERT)."""
    if doc_text == "contents":
        return candidate["contents"]
    if doc_text == "sentence":
        return candidate["sentence"]
    if doc_text == "sentence+paragraph":
        return candidate["sentence"], candidate["paragraph"]
    raise ValueError(f"unknown doc_text {doc_text!r}")


def text_options(config: dict, kind: str) -> dict:
    """How a model's tower of `kind` ('query' or 'doc') wants its texts: a pretrained checkpoint's prompt
    (query_prefix, doc_prefix) and lower-casing (sentence-transformers' do_lower_case); none for others."""
    return {"prefix": config.get(f"{kind}_prefix", ""), "lowercase": bool(config.get("lowercase", False))}


def prepare_texts(items: list, prefix: str = "", lowercase: bool = False) -> list:
    """Texts (or text pairs, whose first text gets the prefix) as a checkpoint reads them: the prompt
    first, then lower-cased as sentence-transformers does (prompt included)."""
    if not prefix and not lowercase:
        return items

    def one(text: str, first: bool) -> str:
        text = prefix + text if first else text
        return text.lower() if lowercase else text

    return [one(x, True) if isinstance(x, str) else (one(x[0], True), *(one(t, False) for t in x[1:])) for x in items]


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    if how == "cls":
        return hidden[:, 0]
    if how == "mean":
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"unknown pooling {how!r}")


def head(hidden: int, embedding_dim: int | None, kind: str = "linear") -> nn.Module:
    """What follows pooling: a linear layer (Chang's [CLS] + linear), a linear layer then layer norm
    (LTRe's encoder), a two-layer tanh MLP (BoW-MLP), or nothing (embedding_dim 0: the encoder's width)."""
    if not embedding_dim:
        return nn.Identity()
    if kind == "linear":
        return nn.Linear(hidden, embedding_dim)
    if kind == "linear-ln":
        return nn.Sequential(nn.Linear(hidden, embedding_dim), nn.LayerNorm(embedding_dim))
    if kind == "mlp":
        return nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, embedding_dim))
    raise ValueError(f"unknown head {kind!r}")


class Tower(nn.Module):
    """One encoder: transformer (or bag of words) -> pooling -> head."""

    def __init__(self, encoder: nn.Module, pooling: str, embedding_dim: int | None, normalize: bool = False,
                 head_kind: str = "linear"):
        super().__init__()
        self.encoder, self.pooling, self.normalize = encoder, pooling, normalize
        self.projection = head(encoder.config.hidden_size, embedding_dim, head_kind)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        vectors = self.projection(pool(out.last_hidden_state, attention_mask, self.pooling))
        # Unit length turns the inner product into cosine (Chang et al., footnote 1).
        return nn.functional.normalize(vectors, dim=-1) if self.normalize else vectors


class TwoTower(nn.Module):
    def __init__(self, query: Tower, doc: Tower | None, config: dict):
        super().__init__()
        self.query = query
        self.doc = doc if doc is not None else query   # shared weights when doc is None
        self.config = config

    @staticmethod
    def tower(encoder_dir, config: dict) -> Tower:
        return Tower(load_encoder(encoder_dir), config["pooling"], config.get("embedding_dim") or None,
                     config.get("normalize", False), config.get("head", "linear"))

    @property
    def shared(self) -> bool:
        return self.doc is self.query

    @classmethod
    def from_encoder(cls, encoder_dir, config: dict, seed: int) -> "TwoTower":
        """Both towers start from the same encoder checkpoint (copied unless shared)."""
        torch.manual_seed(seed)
        query = cls.tower(encoder_dir, config)
        doc = None if config.get("shared", False) else cls.tower(encoder_dir, config)
        return cls(query, doc, config)

    @classmethod
    def start(cls, start_dir, config: dict, seed: int) -> tuple["TwoTower", object, dict]:
        """Towers to train: a saved two-tower model continues (its architecture, doc segment id
        included, wins; sequence lengths and doc text come from `config`), an encoder folder starts
        new towers."""
        if (Path(start_dir) / "towers.json").is_file():
            model, tokenizer = cls.load(start_dir)
            keep = ("pooling", "embedding_dim", "shared", "normalize", "head", "doc_segment",
                    "query_prefix", "doc_prefix", "lowercase")   # the last three: a pretrained checkpoint's
            model.config = {**config, **{k: v for k, v in model.config.items() if k in keep}}
            return model, tokenizer, model.config
        return cls.from_encoder(start_dir, config, seed), load_tokenizer(start_dir), config

    def save(self, folder, tokenizer) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.query.encoder.save_pretrained(folder / "query")
        if not self.shared:
            self.doc.encoder.save_pretrained(folder / "doc")
        save_tokenizer(tokenizer, folder / "tokenizer")
        heads = {f"query.{k}": v for k, v in self.query.projection.state_dict().items()}
        if not self.shared:
            heads.update({f"doc.{k}": v for k, v in self.doc.projection.state_dict().items()})
        save_file({k: v.contiguous() for k, v in heads.items()}, str(folder / "heads.safetensors"))
        (folder / "towers.json").write_text(json.dumps(self.config, indent=2) + "\n")

    @classmethod
    def load(cls, folder) -> tuple["TwoTower", object]:
        from safetensors.torch import load_file

        folder = Path(folder)
        if not (folder / "towers.json").is_file():
            raise StageError(folder, "not a saved two-tower model (towers.json missing)")
        with readable(folder, "two-tower model"):
            config = json.loads((folder / "towers.json").read_text())
            heads = load_file(str(folder / "heads.safetensors"))

        def tower(name: str) -> Tower:
            built = cls.tower(folder / name, config)
            built.projection.load_state_dict({k.split(".", 1)[1]: v for k, v in heads.items() if k.startswith(name + ".")})
            return built

        query = tower("query")
        doc = None if config.get("shared") else tower("doc")
        model = cls(query, doc, config)
        model.eval()
        return model, load_tokenizer(folder / "tokenizer")


def save_tokenizer(tokenizer, folder) -> None:
    """A fast tokenizer's file keeps the padding and truncation of its last call; every call here sets its own, so
    they are cleared first: a trained model's files do not depend on how its run happened to tokenise (one batch
    at a time, or from token_memo's kept ids)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        backend.no_padding()
        backend.no_truncation()
    tokenizer.save_pretrained(folder)


def random_encoder(tokenizer_dir, out_dir, arch: dict, seed: int) -> None:
    """Chang's "No Pretraining": a randomly initialised encoder of the configured shape."""
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = small_bert_config(len(tokenizer), arch["hidden"], arch["layers"], arch["heads"],
                               arch["intermediate"], arch["max_positions"])
    BertModel(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
