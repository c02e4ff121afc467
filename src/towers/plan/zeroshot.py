"""Pretrained checkpoints (params: checkpoints) as models "ckpt-<name>" and where they live, and the zero-shot
tables (rules in workflow/rules/zeroshot.smk; layout: towers.reports.zeroshot): their rows, split and note, and
the tables themselves (targets of `all`)."""
from __future__ import annotations

from ..params_check import ZEROSHOT_KINDS
from .paths import PASSAGE_SPLIT, eval_json
from .shell import flags

CHECKPOINT_MODEL = "ckpt-[a-z0-9-]+"


class Zeroshot:
    checkpoint_model = CHECKPOINT_MODEL

    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.zs = self.config["zeroshot"]
        self.checkpoints = self.config["checkpoints"]
        self.tables = [f"results/zeroshot/{name}.csv" for name in self.zs["datasets"]]

    @staticmethod
    def is_checkpoint(model):
        return model.startswith("ckpt-")

    def checkpoint_cfg(self, model):
        name = model[len("ckpt-"):]
        if name not in self.checkpoints:
            raise ValueError(f"params.yaml: checkpoints.{name} is not defined (model {model}); defined: "
                             f"{', '.join(self.checkpoints)}")
        return self.checkpoints[name]

    def checkpoint_split(self, dataset):
        """Where a checkpoint's model folder and encodings of `dataset` live, and zeroshot's split: all the
        questions of a question set (split "all"), a passage set's evaluation queries (its one split, "dev")."""
        return PASSAGE_SPLIT if self.plan.data.base_of(dataset) in self.plan.data.passage else "all"

    def checkpoint_flags(self, w):
        """Settings given in params override the checkpoint's own config; a passage set is read as its contents."""
        cfg = self.checkpoint_cfg(w.model)
        doc_text = "contents" if w.dataset in self.plan.data.passage else cfg.get("doc_text", "sentence")
        given = {key: cfg[key] for key in ("pooling", "query_length", "doc_length", "query_prefix", "doc_prefix",
                                           "normalize", "lowercase") if key in cfg}
        return " ".join([f"--doc-text {doc_text}", flags(given)]).strip()

    def caveat(self, model):
        return " ".join(self.checkpoint_cfg(model)["caveat"].split())

    def zeroshot_rows(self, dataset):
        """The rows (model, label, caveat, eval: the evaluation JSON): BM25, then each of zeroshot.checkpoints."""
        kind = self.plan.data.dataset_cfg(dataset)["kind"]
        if kind not in ZEROSHOT_KINDS:   # zeroshot.datasets are checked with params; this, a table asked for by hand
            raise ValueError(f"datasets.{dataset} (kind {kind}) has no questions to evaluate; results/zeroshot/ takes "
                             f"a dataset of kind {', '.join(ZEROSHOT_KINDS)}")
        split = self.checkpoint_split(dataset)
        bm25 = self.config["bm25"]
        rows = [{"model": "bm25", "label": "BM25 (Pyserini)", "caveat": f"k1 {bm25['k1']}, b {bm25['b']}",
                 "eval": eval_json(dataset, "bm25", split, "lucene")}]
        for name in self.zs["checkpoints"]:
            cfg = self.checkpoint_cfg(f"ckpt-{name}")
            rows.append({"model": f"ckpt-{name}", "label": cfg["label"], "caveat": " ".join(cfg["caveat"].split()),
                         "eval": eval_json(dataset, f"ckpt-{name}", split, self.zs["index"])})
        return rows

    def zeroshot_split(self, dataset):
        """The evaluation split as the dataset names it (a BEIR folder's qrels/<split>.tsv, MS MARCO's
        queries.<dev>.tsv); "all" for a question set (every question)."""
        cfg = self.plan.data.dataset_cfg(dataset)
        if cfg["kind"] == "beir":
            return cfg.get("eval_split", "test")
        if cfg["kind"] in ("msmarco-passage", "msmarco-tsv"):
            return cfg.get("dev", "dev.small")
        return self.checkpoint_split(dataset)

    def zeroshot_note(self, dataset):
        """Nothing is trained for a zero-shot table: its note says so instead of the profile's training note."""
        return (f"zero-shot: BM25 and pretrained checkpoints evaluated as they are, nothing trained on {dataset} (each"
                f" checkpoint's caveat in its row); {self.plan.evaluation.metrics_note(dataset)}")

    def zeroshot_published(self, dataset):
        """--published values (model, metric, value, source) for this dataset."""
        return [{"model": p["model"], "metric": p["metric"], "value": str(p["value"]), "source": p["source"]}
                for p in self.zs["published"] if p["dataset"] == dataset]
