"""Evaluation (rule evaluate, workflow/rules/evaluate.smk) and every table's note: which run a (model, split,
index) evaluates, the recall convention and metrics, and how a table says they are computed."""
from __future__ import annotations

from pathlib import Path

from .paths import ART

RECALL_NOTE = {"success": "Success@k (ir-measures): a query counts as found when any of its relevant documents is in its"
                          " top k (ReQA's Recall@k, which Chang et al. print as R@k)",
               "fraction": "R@k (ir-measures): the share of a query's relevant documents in its top k"
                           " (QuadrupletBERT's eq. 5, RepBERT's and LTRe's R@1000)"}


class Evaluation:
    def __init__(self, plan, *, is_quadrupletbert_model):
        """is_quadrupletbert_model(name): QuadrupletBERT's grammar (towers.plan.quadrupletbert.is_model), handed
        down by the Plan: its models' recall on a question set is counted as its paper counts it."""
        self.plan = plan
        self.config = plan.config
        self.is_quadrupletbert_model = is_quadrupletbert_model

    def run_path(self, w):
        if w.model == "bm25":
            return self.plan.bm25.bm25_run(w.dataset, w.split)
        if w.index == "fusion":
            fusion, pair = w.model.split("-", 1)
            return f"{ART}/{w.dataset}/fusion/{fusion}/{pair}/{w.split}.trec"
        if w.index == "rerank":
            return f"{ART}/{w.dataset}/rerank/{w.model}/{w.split}.trec"
        return f"{ART}/{w.dataset}/dense/{w.model}/{w.split}/run-{w.index}.trec"

    def test_questions(self, w):
        """A split's test questions (an open-domain dataset's: its base's)."""
        return f"{ART}/{self.plan.data.questions_of(w.dataset)}/splits/{w.split}/test.tsv"

    def recall_convention(self, dataset, model=""):
        """conventions: passage_recall on a passage set; on a question set quadrupletbert_recall for
        QuadrupletBERT's models (its eq. 5) and reqa_recall for the rest (Chang et al.'s, BM25, checkpoints)
        (evaluate --recall)."""
        if self.plan.data.base_of(dataset) in self.plan.data.passage:
            return self.config["conventions"]["passage_recall"]
        convention = "quadrupletbert_recall" if self.is_quadrupletbert_model(model) else "reqa_recall"
        return self.config["conventions"][convention]

    def eval_metrics(self, dataset, split):
        """The dataset's metrics; on its zeroshot split (zeroshot.smk) zeroshot's metrics too."""
        metrics = list(self.plan.data.metrics_for(dataset))
        if split == self.plan.checkpoints.split(dataset):
            metrics += [m for m in self.config["zeroshot"]["metrics"] if m not in metrics]
        return metrics

    def evaluation_queries(self, dataset):
        cfg = self.plan.data.dataset_cfg(dataset)
        if cfg["kind"] in ("msmarco-passage", "msmarco-tsv"):
            dev = cfg.get("dev", "dev.small")
            small = (" (MS MARCO dev small: the 6,980 queries RepBERT and LTRe report, not the full dev's 101,093)"
                     if cfg["kind"] == "msmarco-passage" and dev == "dev.small" else "")
            return f"queries.{dev}.tsv{small}"
        if cfg["kind"] == "beir":
            return f"qrels/{cfg.get('eval_split', 'test')}.tsv"
        if cfg["kind"] == "wikipedia-passages":
            questions = cfg.get("test_questions")   # a second set whose share is the test side (the rest trains)
            named = f"{Path(questions).name}, the rest training" if questions else "the questions"
            return f"{cfg.get('dev_fraction', 0.2):g} of {named}"
        if cfg["kind"] == "graded-passages":
            return "the judged queries of the graded set"
        return "a split's test questions (split all: every question)"

    def metrics_note(self, dataset, model=""):
        """How a table's metrics are computed (params: conventions) and over which queries; `model`: one of the
        table's models where the convention depends on it (QuadrupletBERT's)."""
        return (f"{RECALL_NOTE[self.recall_convention(dataset, model)]} (conventions); MRR@10 = RR@10:"
                f" reciprocal rank of the first relevant document within the top 10, 0 past it; evaluation queries"
                f" of {dataset}: {self.evaluation_queries(dataset)}")

    def table_note(self, dataset, model=""):
        """A paper table's note: what the profile scales down, then metrics_note."""
        return f"{self.config['profile_note']}; {self.metrics_note(dataset, model)}"
