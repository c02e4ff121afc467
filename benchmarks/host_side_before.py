"""benchmarks.host_side's "before": the host-side code as it was before the changes it measures (rows sliced in a
Python loop, a new matrix each chunk, pairs scored batch by batch), and the towers taken out (no-op models), so
that what is timed is the host side alone."""
from __future__ import annotations

import contextlib
from types import SimpleNamespace

WIDTH = 768   # BERT-base, mean pooled (RepBERT's; encode_overlap's)


def old_batch(self, idx, dev=None, pin=False) -> dict:
    """tokens.Tokenised.batch before: each row sliced out in a Python loop, then tokens.pad_right."""
    from towers.modeling.tokens import pad_right

    return {key: pad_right([flat[self.starts[i]:self.starts[i + 1]] for i in idx], self.pad_ids.get(key, 0))
            for key, flat in self.columns.items()}


def old_append(self, block) -> None:
    """matrix.NpyWriter.append before: the block copied to bytes, then written."""
    import numpy as np

    from towers.retrieval.matrix import DTYPE

    block = np.ascontiguousarray(block, dtype=DTYPE)
    if self.width is None:
        self._header(block.shape[1])
    self._handle.write(block.tobytes())
    self.written += len(block)


def old_score_pairs(model, tokenizer, pairs: list, max_length: int, batch_size: int):
    """rerank.score_pairs before: each batch tokenised as it comes, its scores brought back before the next."""
    import numpy as np

    from towers.retrieval.rerank import relevance, tokenize_pairs

    order = np.argsort(-np.asarray([len(q) + len(p) for q, p in pairs]), kind="stable")
    out = np.zeros(len(pairs), dtype=np.float64)
    for start in range(0, len(pairs), batch_size):
        idx = order[start:start + batch_size]
        batch = tokenize_pairs(tokenizer, [pairs[i][0] for i in idx], [pairs[i][1] for i in idx], max_length, "cpu")
        out[idx] = relevance(model(**batch).logits.float()).detach().numpy()
    return out


@contextlib.contextmanager
def code(version: str):
    """Within: the project's code as it is ("after"), or with the host-side changes taken back ("before")."""
    from towers.modeling import tokens
    from towers.retrieval import encode, matrix
    from towers.training import mlm

    forward = encode.forward
    saved = (tokens.Tokenised.batch, tokens.tokenize_unpadded,
             mlm.SentencePairs.__dict__["of"], matrix.NpyWriter.append, forward)
    if version == "before":
        tokens.Tokenised.batch = old_batch
        tokens.tokenize_unpadded = tokens._tokenizer_call
        # NSP as it was: each pair tokenised in its step, padded and masked by the collator
        mlm.SentencePairs.of = classmethod(lambda cls, *_: None)
        matrix.NpyWriter.append = old_append
        encode.forward = lambda *args, into=None, **kwargs: forward(*args, **kwargs)   # a new matrix each chunk
    try:
        yield
    finally:
        (tokens.Tokenised.batch, tokens.tokenize_unpadded, mlm.SentencePairs.of,
         matrix.NpyWriter.append, encode.forward) = saved


def no_op_tower():
    import torch

    class NoOpTower(torch.nn.Module):
        def forward(self, input_ids, attention_mask, token_type_ids=None):
            return torch.zeros(len(input_ids), WIDTH)

    return NoOpTower()


def no_op_classifier():
    import torch

    class NoOpClassifier(torch.nn.Module):
        def forward(self, input_ids, attention_mask, token_type_ids=None):
            return SimpleNamespace(logits=torch.zeros(len(input_ids), 1))

    return NoOpClassifier()


@contextlib.contextmanager
def models_taken_out():
    """Within: every two-tower Tower returns one learnable vector per row (its output's width: the head's, or
    BERT-base's 768), and pretrain-mlm trains a no-op BERT whose heads (and their cross-entropy over the vocabulary)
    cost nothing. The loop, its sampling, tokenising, collating, losses and optimiser run as they are."""
    import torch
    from torch import nn

    from towers.modeling import models
    from towers.training import mlm

    init, forward, pretrain, cross_entropy = (models.Tower.__init__, models.Tower.forward, mlm.pretrain,
                                              torch.nn.functional.cross_entropy)

    def tower_init(self, encoder, pooling, embedding_dim, *args, **kwargs):
        init(self, encoder, pooling, embedding_dim, *args, **kwargs)
        self.no_op = nn.Parameter(torch.ones(embedding_dim or WIDTH))

    def tower_forward(self, input_ids, attention_mask, token_type_ids=None):
        return self.no_op.repeat(len(input_ids), 1)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.no_op = nn.Parameter(torch.ones(WIDTH))

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            nothing = torch.zeros(())
            return SimpleNamespace(last_hidden_state=nothing.expand(*input_ids.shape, WIDTH),
                                   pooler_output=nothing.expand(len(input_ids), WIDTH))

    class Head(nn.Module):
        def __init__(self, width: int):
            super().__init__()
            self.width = width

        def forward(self, hidden):
            return torch.zeros(()).expand(len(hidden), self.width)

    class NoOpPreTraining(nn.Module):
        def __init__(self, vocab: int):
            super().__init__()
            self.bert, self.cls = Bert(), nn.Module()
            self.cls.predictions, self.cls.seq_relationship = Head(vocab), Head(2)

    def no_op_pretrain(model, tokenizer, *args, **kwargs):
        stand_in = NoOpPreTraining(len(tokenizer))
        torch.nn.functional.cross_entropy = lambda *_, **__: stand_in.bert.no_op.sum() * 0.0
        try:
            return pretrain(stand_in, tokenizer, *args, **kwargs)
        finally:
            torch.nn.functional.cross_entropy = cross_entropy

    models.Tower.__init__, models.Tower.forward, mlm.pretrain = tower_init, tower_forward, no_op_pretrain
    try:
        yield
    finally:
        models.Tower.__init__, models.Tower.forward, mlm.pretrain = init, forward, pretrain
