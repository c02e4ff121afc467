"""A WordPiece vocabulary trained on the corpus with HF tokenizers, saved as a BERT tokenizer."""
from __future__ import annotations

from typing import Iterable

from tokenizers import BertWordPieceTokenizer
from tokenizers.models import WordPiece
from tokenizers.processors import TemplateProcessing
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece(texts: Iterable[str], out_dir, vocab_size: int, min_frequency: int, lowercase: bool) -> int:
    wordpiece = BertWordPieceTokenizer(lowercase=lowercase)
    wordpiece.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=min_frequency,
                                  special_tokens=SPECIAL_TOKENS)
    # Wrap the trained tokenizer object itself (normaliser, pre-tokeniser and [CLS]/[SEP] template
    # included) so nothing is re-derived from a vocab file.
    core = wordpiece._tokenizer
    # The trainer numbers tokens in hash-map order, which changes from process to process; renumber
    # them in a fixed order (special tokens first, then sorted) so the same vocabulary gets the same ids.
    vocab = core.get_vocab()
    specials = SPECIAL_TOKENS
    ordered = specials + sorted(t for t in vocab if t not in specials)
    core.model = WordPiece({token: i for i, token in enumerate(ordered)}, unk_token="[UNK]")
    core.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[(t, core.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", sep_token="[SEP]",
                                        pad_token="[PAD]", cls_token="[CLS]", mask_token="[MASK]",
                                        model_input_names=["input_ids", "token_type_ids", "attention_mask"])
    tokenizer.save_pretrained(out_dir)
    return len(tokenizer)
