"""Training (rules in workflow/rules/pretrain.smk and train.smk): architecture flags, a tokenizer's text, the
encoders training starts from, a split's training files. What is a paper's own (Chang et al.'s model names and
where their towers start, the three-tower baselines' settings) lives in its module (towers.plan.chang2020,
towers.plan.quadrupletbert)."""
from __future__ import annotations

from .paths import ART, collection


class Training:
    def __init__(self, plan, *, bag_of_words: dict):
        """`bag_of_words`: {encoder name: its init-bow flags}, the papers' (towers.plan.gathered)."""
        self.plan = plan
        self.config = plan.config
        self.bag_of_words = bag_of_words

    # --- encoders -----------------------------------------------------------------------------------

    def arch_flags(self, layers=None):
        e = self.config["encoder"]
        return (f"--hidden {e['hidden']} --layers {layers or e['layers']} --heads {e['heads']}"
                f" --intermediate {e['intermediate']} --max-positions {e['max_positions']}")

    def tokenizer_text(self, w):
        """A tokenizer learns from the dataset's ReQA candidates, or a pre-training corpus's articles."""
        if self.plan.data.dataset_cfg(w.dataset)["kind"] == "wikipedia":
            return f"{ART}/{w.dataset}/corpus/articles.jsonl"
        return collection(w.dataset, "candidates.jsonl")

    def encoder(self, dataset, name):
        """An encoder (mlm, mlm-nsp, random-l<layers>, a bag of words) of the dataset's text."""
        return f"{ART}/{self.plan.data.text_home(dataset)}/encoders/{name}"

    def tokenizer(self, dataset):
        return f"{ART}/{self.plan.data.text_home(dataset)}/tokenizer"

    def mlm_encoder(self, w):
        return self.encoder(w.dataset, "mlm")

    # --- a split's training ---------------------------------------------------------------------------

    @staticmethod
    def split_files(w):
        return {"candidates": collection(w.dataset, "candidates.jsonl"), "qrels": collection(w.dataset, "qrels.txt"),
                "train": f"{ART}/{w.dataset}/splits/{w.split}/train.tsv",
                "valid": f"{ART}/{w.dataset}/splits/{w.split}/valid.tsv"}

    @staticmethod
    def train_log(w, name):
        return f"logs/{w.dataset}/train_{name}_{w.split}.steps.jsonl"
