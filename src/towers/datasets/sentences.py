"""Sentence splitting with pysbd (rule-based, offline, no model download)."""
from __future__ import annotations

import functools

import pysbd


@functools.lru_cache(maxsize=1)
def _segmenter() -> pysbd.Segmenter:
    return pysbd.Segmenter(language="en", clean=False, char_span=True)


def split_with_offsets(text: str) -> list[tuple[int, int, str]]:
    """(start, end, sentence) for each sentence; offsets index `text`, the sentence is whitespace-normalised."""
    spans = []
    for span in _segmenter().segment(text):
        sentence = " ".join(span.sent.split())
        if sentence:
            spans.append((span.start, span.end, sentence))
    return spans


def split_sentences(text: str) -> list[str]:
    return [sentence for _, _, sentence in split_with_offsets(text)]
