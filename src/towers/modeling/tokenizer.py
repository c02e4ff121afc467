"""A WordPiece vocabulary trained on the corpus with HF tokenizers, saved as a BERT tokenizer; and the feature
hasher, the bag-of-words towers' tokenizer.

HF tokenizers' trainer numbers the "##x" continuation tokens in hash-map order, and those numbers
break ties between equally frequent merges, so two runs on the same text can learn different
vocabularies (huggingface/tokenizers#1794). Declaring every "##x" up front, in sorted order, fixes
their numbers and makes training repeatable; the final ids are then renumbered in sorted order."""
from __future__ import annotations

import functools
import json
import re
import zlib
from pathlib import Path
from typing import Iterable

import torch

from tokenizers import BertWordPieceTokenizer
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def continuation_tokens(texts: list[str], lowercase: bool) -> list[str]:
    """'##' + every character that can follow another inside a pre-tokenised word."""
    probe = BertWordPieceTokenizer(lowercase=lowercase)._tokenizer
    chars = set()
    for text in texts:
        for word, _ in probe.pre_tokenizer.pre_tokenize_str(probe.normalizer.normalize_str(text)):
            chars.update(word[1:])
    return sorted(f"##{c}" for c in chars)


def train_wordpiece(texts: Iterable[str], out_dir, vocab_size: int, min_frequency: int, lowercase: bool) -> int:
    texts = list(texts)
    trainer_input = BertWordPieceTokenizer(lowercase=lowercase)
    trainer_input.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=SPECIAL_TOKENS + continuation_tokens(texts, lowercase))
    learned = trainer_input.get_vocab()
    ordered = SPECIAL_TOKENS + sorted(t for t in learned if t not in SPECIAL_TOKENS)
    # A fresh BERT tokenizer over the renumbered vocabulary: only the five real special tokens are special.
    bert = BertWordPieceTokenizer({token: i for i, token in enumerate(ordered)}, lowercase=lowercase)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bert._tokenizer, unk_token="[UNK]", sep_token="[SEP]",
                                        pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]",
                                        model_input_names=["input_ids", "token_type_ids", "attention_mask"])
    tokenizer.save_pretrained(out_dir)
    return len(tokenizer)


WORD = re.compile(r"\w+")


@functools.lru_cache(maxsize=1 << 20)   # words repeat: each gram is hashed once a process
def gram_id(gram: str, buckets: int) -> int:
    return 1 + zlib.crc32(gram.encode()) % (buckets - 1)   # crc32, not hash(): Python salts str hashes per process


@functools.lru_cache(maxsize=1 << 18)
def char_gram_ids(word: str, n: int, buckets: int) -> list[int]:
    """The ids of the character n-grams of '#word#' (callers copy it: `ids += ...`)."""
    marked = f"#{word}#"
    return [gram_id(marked[i:i + n], buckets) for i in range(len(word) + 3 - n)]


class FeatureHasher:
    """Text -> hashed feature ids: word unigrams, optionally word bigrams and character n-grams of
    '#word#' (trigrams: the text features of Huang et al. 2020; unigrams only: Chang et al.'s
    BoW-MLP). Id 0 is padding. A drop-in for an HF tokenizer in this project's calls (texts,
    optional text pairs, padding, return_tensors='pt')."""

    def __init__(self, buckets: int, max_features: int = 256, char_ngram: int = 3, word_bigrams: bool = True):
        self.buckets, self.max_features, self.char_ngram = buckets, max_features, char_ngram
        self.word_bigrams = word_bigrams

    def features(self, text: str) -> list[int]:
        """Ids of the word unigrams, then the bigrams, then each word's character n-grams, the first max_features."""
        words = WORD.findall(text.lower())
        ids = [gram_id(w, self.buckets) for w in words]
        if self.word_bigrams:
            ids += [gram_id(f"{a} {b}", self.buckets) for a, b in zip(words, words[1:])]
        for word in words if self.char_ngram else ():
            if len(ids) >= self.max_features:   # the rest would be cut
                break
            ids += char_gram_ids(word, self.char_ngram, self.buckets)
        return ids[:self.max_features] or [1]

    def __call__(self, texts, text_pair=None, return_tensors=None, **_):
        if text_pair is not None:
            texts = [f"{a} {b}" for a, b in zip(texts, text_pair)]
        ids = [self.features(t) for t in texts]
        if return_tensors != "pt":
            return {"input_ids": ids}
        width = max(len(x) for x in ids)
        input_ids = torch.tensor([x + [0] * (width - len(x)) for x in ids])
        return {"input_ids": input_ids, "attention_mask": (input_ids > 0).long()}

    def __len__(self) -> int:
        return self.buckets

    def save_pretrained(self, folder) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "hasher.json").write_text(json.dumps(vars(self)) + "\n")

    @classmethod
    def from_pretrained(cls, folder) -> "FeatureHasher":
        return cls(**json.loads((Path(folder) / "hasher.json").read_text()))
