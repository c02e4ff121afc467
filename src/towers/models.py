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

import numpy as np
import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

from .io import StageError
from .runtime import device
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


# --- tower inputs: token ids of queries and documents, on the device --------------------------------------

_BUCKETS: tuple[int, ...] = ()   # set by `length_buckets` around a training step; () pads to the longest text


@contextlib.contextmanager
def length_buckets(buckets: tuple[int, ...]):
    """Within: batches tokenised here are padded on to the smallest of `buckets` that holds them (settings.Speed),
    so a GPU sees a few shapes again and again. Padding has attention mask 0: the towers' outputs move by rounding."""
    global _BUCKETS
    before, _BUCKETS = _BUCKETS, tuple(sorted(buckets))
    try:
        yield
    finally:
        _BUCKETS = before


def to_bucket(batch, tokenizer):
    """`batch` (a tokenizer's padded tensors) padded on the right to the bucket that holds it; as it is outside
    `length_buckets`, longer than every bucket, or from a tokenizer that does not pad on the right with a pad id."""
    if not _BUCKETS or getattr(tokenizer, "padding_side", None) != "right" or tokenizer.pad_token_id is None:
        return batch
    width = batch["input_ids"].shape[1]
    target = next((b for b in _BUCKETS if b >= width), width)
    if target == width:
        return batch
    pads = {"input_ids": tokenizer.pad_token_id, "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0)}
    return {k: torch.nn.functional.pad(v, (0, target - width), value=pads.get(k, 0)) for k, v in batch.items()}


ENCODING_FIELDS = {"input_ids": "ids", "token_type_ids": "type_ids", "attention_mask": "attention_mask"}


def tokenize_unpadded(tokenizer, items: list, pairs: bool, max_length: int) -> dict:
    """Token ids of texts (or text pairs, the second text truncated first), unpadded: what tokenize_queries and
    tokenize_docs pad, one list of ids an item in each column. A fast tokenizer's encodings are read from its backend,
    cut as its own call cuts them (the columns its call returns): the same lists, without the call's conversion of
    each item, a third of a corpus's tokenising on 2 threads, which would cap it on more (host_side.py)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not items or getattr(tokenizer, "split_special_tokens", False):
        return _tokenizer_call(tokenizer, items, pairs, max_length)
    # what the tokenizer's own call sets before encoding (it leaves them set too)
    backend.enable_truncation(max_length, stride=0, strategy="longest_first", direction=tokenizer.truncation_side)
    backend.no_padding()
    if getattr(backend, "encode_special_tokens", False):
        backend.encode_special_tokens = False
    encodings = backend.encode_batch([(s, p) for s, p in items] if pairs else items, add_special_tokens=True)
    names = [name for name in ENCODING_FIELDS if name == "input_ids" or name in tokenizer.model_input_names]
    return {name: [getattr(one, ENCODING_FIELDS[name]) for one in encodings] for name in names}


def _tokenizer_call(tokenizer, items: list, pairs: bool, max_length: int) -> dict:
    """tokenize_unpadded through the tokenizer's own call (a tokenizer without a fast backend)."""
    if not pairs:
        return tokenizer(items, truncation=True, max_length=max_length)
    return tokenizer([s for s, _ in items], [p for _, p in items], truncation="longest_first", max_length=max_length)


def pad_ids_of(tokenizer) -> dict:
    """The ids a tokenizer pads its columns with (the attention mask, and any other column, with 0)."""
    return {"input_ids": getattr(tokenizer, "pad_token_id", 0),
            "token_type_ids": getattr(tokenizer, "pad_token_type_id", 0)}


def pad_right(pieces: list, pad: int) -> torch.Tensor:
    """One column of a batch: each item's ids, right-padded with `pad` to the longest, int64, as a tokenizer
    called with padding=True pads it."""
    lengths = np.array([len(piece) for piece in pieces])
    filled = np.arange(lengths.max()) < lengths[:, None]   # each row's first `length` places
    padded = np.full(filled.shape, pad, dtype=np.int64)
    padded[filled] = np.concatenate(pieces)
    return torch.from_numpy(padded)


_MEMO: dict | None = None   # set by `token_memo` around training steps: each text's token ids, kept for the run


@contextlib.contextmanager
def token_memo(memo: dict):
    """Within: texts tokenised here are tokenised once and their ids kept in `memo` (a training run draws the same
    questions and passages again and again); each batch is padded from the kept ids as the tokenizer pads it,
    so the tensors are the same as without. `memo` lives as long as its caller keeps it (one training run)."""
    global _MEMO
    before, _MEMO = _MEMO, memo
    try:
        yield
    finally:
        _MEMO = before


def _memoisable(tokenizer) -> bool:
    """A Hugging Face tokenizer padding on the right with a pad id (the hasher and others: tokenised as before)."""
    return (_MEMO is not None and hasattr(tokenizer, "pad") and getattr(tokenizer, "padding_side", None) == "right"
            and getattr(tokenizer, "pad_token_id", None) is not None)


def _rows(encoded, count: int) -> list[dict]:
    """An unpadded batch encoding split into its items, each column an int32 array."""
    return [{name: np.asarray(encoded[name][i], dtype=np.int32) for name in encoded.keys()} for i in range(count)]


MEMO_LIMIT = 200_000   # texts a run keeps (the mini's runs draw under 25,000; MS MARCO's would draw millions)


def _memo_batch(tokenizer, items: list, max_length: int) -> dict:
    """The padded batch of `items` (texts, and text pairs whose second text is truncated first), from their ids in
    _MEMO (tokenised now where missing, and kept while the memo holds under MEMO_LIMIT texts): right-padded with the
    pad ids, attention mask 0, int64, as tokenizer(..., padding=True, return_tensors="pt") pads."""
    keys = [(id(tokenizer), max_length, item if isinstance(item, str) else tuple(item)) for item in items]
    missing = list(dict.fromkeys(key for key in keys if key not in _MEMO))
    texts = [key for key in missing if isinstance(key[2], str)]
    pairs = [key for key in missing if not isinstance(key[2], str)]
    encoded = []
    for part, are_pairs in ((texts, False), (pairs, True)):
        if part:
            encoded += _rows(tokenize_unpadded(tokenizer, [key[2] for key in part], are_pairs, max_length), len(part))
    fresh = dict(zip(texts + pairs, encoded))
    rows = [fresh[key] if key in fresh else _MEMO[key] for key in keys]
    if len(_MEMO) < MEMO_LIMIT:
        _MEMO.update(fresh)
    pads = pad_ids_of(tokenizer)
    return {name: pad_right([row[name] for row in rows], pads.get(name, 0)) for name in rows[0]}


def tokenize_queries(tokenizer, texts: list[str], max_length: int, dev=None):
    if _memoisable(tokenizer):
        batch = _memo_batch(tokenizer, texts, max_length)
    else:
        batch = tokenizer(texts, max_length=max_length, truncation=True, padding=True, return_tensors="pt")
    return {k: v.to(dev or device()) for k, v in to_bucket(batch, tokenizer).items()}


def tokenize_docs(tokenizer, docs: list, max_length: int, dev=None, segment: int = 0):
    """A doc is a text, or a text pair (sentence and paragraph, or title and passage): the second
    text is truncated first.

    `segment` > 0 (a model's doc_segment; RepBERT footnote 2: 1) sets the segment id of every doc
    token (attention mask 1) to it, so doc tokens get their own segment embedding; 0 leaves the
    tokenizer's ids as they are. A tokenizer without segment ids (the hasher) is left alone."""
    return with_segment(_tokenize_docs(tokenizer, docs, max_length, dev), segment)


def with_segment(batch: dict, segment: int) -> dict:
    """A doc batch with every real token's segment id set to `segment` (0: left as tokenised)."""
    if segment and "token_type_ids" in batch:
        batch["token_type_ids"] = batch["attention_mask"].to(batch["token_type_ids"].dtype) * segment
    return batch


def _tokenize_docs(tokenizer, docs: list, max_length: int, dev=None):
    pairs = [not isinstance(d, str) for d in docs]
    if any(pairs) and not hasattr(tokenizer, "pad"):   # the bag-of-words hasher reads a pair as one text
        docs, pairs = [d if isinstance(d, str) else f"{d[0]} {d[1]}" for d in docs], [False] * len(docs)
    if not any(pairs):
        return tokenize_queries(tokenizer, docs, max_length, dev)
    if _memoisable(tokenizer):   # pairs, or a mixture: each item as it is tokenised alone
        batch = _memo_batch(tokenizer, docs, max_length)
    elif all(pairs):
        batch = tokenizer([s for s, _ in docs], [p for _, p in docs], max_length=max_length,
                          truncation="longest_first", padding=True, return_tensors="pt")
    else:   # a task mixture: ICT's (title, passage) beside other tasks' passages
        batch = tokenizer.pad([tokenizer(*d, max_length=max_length, truncation="longest_first") if pair
                               else tokenizer(d, max_length=max_length, truncation=True)
                               for d, pair in zip(docs, pairs)], return_tensors="pt")
    return {k: v.to(dev or device()) for k, v in to_bucket(batch, tokenizer).items()}
