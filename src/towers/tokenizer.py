"""A WordPiece vocabulary trained on the corpus with HF tokenizers, saved as a BERT tokenizer.

HF tokenizers' trainer numbers the "##x" continuation tokens in hash-map order, and those numbers
break ties between equally frequent merges, so two runs on the same text can learn different
vocabularies (huggingface/tokenizers#1794). Declaring every "##x" up front, in sorted order, fixes
their numbers and makes training repeatable; the final ids are then renumbered in sorted order."""
from __future__ import annotations

from typing import Iterable

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
