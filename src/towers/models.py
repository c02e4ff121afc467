"""Towers: HF transformer encoders with a pooling choice and a projection, shared or separate.

A saved two-tower model is a folder: query/ and doc/ (HF save_pretrained, or only query/ when
shared), tokenizer/, heads.safetensors (projections) and towers.json (the configuration)."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

from .io import StageError


def small_bert_config(vocab_size: int, hidden: int, layers: int, heads: int, intermediate: int,
                      max_positions: int) -> BertConfig:
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, intermediate_size=intermediate,
                      max_position_embeddings=max_positions)


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    if how == "cls":
        return hidden[:, 0]
    if how == "mean":
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"unknown pooling {how!r}")


class Tower(nn.Module):
    """One encoder: transformer -> pooling -> optional linear projection."""

    def __init__(self, encoder: nn.Module, pooling: str, embedding_dim: int | None, normalize: bool = False):
        super().__init__()
        self.encoder, self.pooling, self.normalize = encoder, pooling, normalize
        hidden = encoder.config.hidden_size
        self.projection = nn.Linear(hidden, embedding_dim) if embedding_dim else nn.Identity()

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
        return Tower(AutoModel.from_pretrained(encoder_dir), config["pooling"], config.get("embedding_dim"),
                     config.get("normalize", False))

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

    def save(self, folder, tokenizer) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.query.encoder.save_pretrained(folder / "query")
        if not self.shared:
            self.doc.encoder.save_pretrained(folder / "doc")
        tokenizer.save_pretrained(folder / "tokenizer")
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
        return model, AutoTokenizer.from_pretrained(folder / "tokenizer")


def random_encoder(tokenizer_dir, out_dir, arch: dict, seed: int) -> None:
    """Chang's "No Pretraining": a randomly initialised encoder of the configured shape."""
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = small_bert_config(len(tokenizer), arch["hidden"], arch["layers"], arch["heads"],
                               arch["intermediate"], arch["max_positions"])
    BertModel(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
