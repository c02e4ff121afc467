"""The zero-shot tables, the tables of no paper (rule zeroshot_table in workflow/rules/zeroshot.smk; layout:
towers.reports.zeroshot): results/zeroshot/<dataset>.csv, BM25 and each of zeroshot.checkpoints (towers.plan.
checkpoints) over a dataset's evaluation queries, and the tables themselves (targets of `all`). A table's name is
its dataset."""
from __future__ import annotations

from ..config.params_check import ZEROSHOT_KINDS
from .paths import eval_json
from .tables import Tables


class Zeroshot(Tables):
    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.settings = self.config["zeroshot"]
        self.tables = [f"results/zeroshot/{name}.csv" for name in self.settings["datasets"]]

    def rows(self, dataset):
        """The rows (model, label, caveat, eval: the evaluation JSON): BM25, then each of zeroshot.checkpoints."""
        kind = self.plan.data.dataset_cfg(dataset)["kind"]
        if kind not in ZEROSHOT_KINDS:   # zeroshot.datasets are checked with params; this, a table asked for by hand
            raise ValueError(f"datasets.{dataset} (kind {kind}) has no questions to evaluate; results/zeroshot/ takes "
                             f"a dataset of kind {', '.join(ZEROSHOT_KINDS)}")
        split = self.plan.checkpoints.split(dataset)
        bm25 = self.config["bm25"]
        rows = [{"model": "bm25", "label": "BM25 (Pyserini)", "caveat": f"k1 {bm25['k1']}, b {bm25['b']}",
                 "eval": eval_json(dataset, "bm25", split, "lucene")}]
        for name in self.settings["checkpoints"]:
            model = f"ckpt-{name}"
            rows.append({"model": model, "label": self.plan.checkpoints.settings(model)["label"],
                         "caveat": self.plan.checkpoints.caveat(model),
                         "eval": eval_json(dataset, model, split, self.settings["index"])})
        return rows

    def inputs(self, dataset):
        return [row["eval"] for row in self.rows(dataset)]

    def note(self, dataset):
        """Nothing is trained for a zero-shot table: its note says so instead of the profile's training note."""
        return (f"zero-shot: BM25 and pretrained checkpoints evaluated as they are, nothing trained on {dataset} (each"
                f" checkpoint's caveat in its row); {self.plan.evaluation.metrics_note(dataset)}")

    def command(self, dataset):
        """The split, the metrics, and the values published elsewhere (options). The split is the project's
        one name ("all" for a question set, "dev" for a passage set, as in paths); the source's own file (BEIR's
        qrels/test.tsv, MS MARCO's queries.dev.small.tsv) is named in the note's evaluation queries."""
        return {"split": self.plan.checkpoints.split(dataset), "metrics": list(self.settings["metrics"]),
                "published": self.published(dataset)}

    def published(self, dataset):
        """Values published elsewhere (model, metric, value, source) for this dataset."""
        return [{"model": p["model"], "metric": p["metric"], "value": str(p["value"]), "source": p["source"]}
                for p in self.settings["published"] if p["dataset"] == dataset]
