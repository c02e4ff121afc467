"""Pretrained checkpoints (params: checkpoints) as models "ckpt-<name>" (rule checkpoint_model in
workflow/rules/zeroshot.smk): their settings, and the one split an untrained model's folder and encodings live
under. Below retrieval and evaluation, which serve a checkpoint as they serve a trained model; its tables are
towers.plan.zeroshot's."""
from __future__ import annotations

from .paths import PASSAGE_SPLIT
from .shell import flags

PREFIX = "ckpt-"
MODEL = f"{PREFIX}[a-z0-9-]+"


class Checkpoints:
    model_re = MODEL

    def __init__(self, plan):
        self.plan = plan
        self.checkpoints = plan.config["checkpoints"]

    @staticmethod
    def is_checkpoint(model):
        return model.startswith(PREFIX)

    def settings(self, model):
        name = model[len(PREFIX):]
        if name not in self.checkpoints:
            raise ValueError(f"params.yaml: checkpoints.{name} is not defined (model {model}); defined: "
                             f"{', '.join(self.checkpoints)}")
        return self.checkpoints[name]

    def split(self, dataset):
        """Where a checkpoint's model folder and encodings of `dataset` live, and zeroshot's split: all the
        questions of a question set (split "all"), a passage set's evaluation queries (its one split, "dev")."""
        return PASSAGE_SPLIT if self.plan.data.base_of(dataset) in self.plan.data.passage else "all"

    def flags(self, w):
        """Settings given in params override the checkpoint's own config; a passage set is read as its contents."""
        cfg = self.settings(w.model)
        doc_text = "contents" if w.dataset in self.plan.data.passage else cfg.get("doc_text", "sentence")
        given = {key: cfg[key] for key in ("pooling", "query_length", "doc_length", "query_prefix", "doc_prefix",
                                           "normalize", "lowercase") if key in cfg}
        return " ".join([f"--doc-text {doc_text}", flags(given)]).strip()

    def caveat(self, model):
        return " ".join(self.settings(model)["caveat"].split())
