"""Chang et al. 2020's tables (rules in workflow/rules/chang2020.smk; layout: towers.reports.chang2020): the rows
and params of each table, and its stage's command."""
from __future__ import annotations

from .paths import ART, collection, eval_json
from .shell import paper_table, q

LABEL = {"none": "No Pretraining", "mlm": "MLM", "ict": "ICT", "bfs": "BFS", "wlp": "WLP", "ict+bfs+wlp": "ICT+BFS+WLP"}
CHECKPOINT_ROW = "retrieval-trained checkpoint (not a BERT init)"
# Tables 3, 4 and 6 (the evaluations of Chang's models), Table 5 (the ablation), Tables 1 and 2 (pairs, datasets)
TABLE = paper_table("chang2020-table", "--metrics {params.metrics} {params.rows}", " --dataset {params.dataset}")
ABLATION_TABLE = paper_table("ablation-table", "--metric {params.metric} {params.rows}", " --dataset {params.dataset}",
                             table=False)
PAIRS_TABLE = paper_table("pairs-table", "--stats {input.stats}", table=False)
REQA_TABLE = paper_table("reqa-table", table=False)


def chang_row(split, encoder, pretraining, evaluation):
    return {"split": split, "encoder": encoder, "pretraining": pretraining, "eval": evaluation}


class Chang2020:
    table, ablation_table, pairs_table, reqa_table = TABLE, ABLATION_TABLE, PAIRS_TABLE, REQA_TABLE   # commands

    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.chang = self.config["chang2020"]

    def chang_rows(self, table):
        """The rows (split, encoder, pretraining, eval: the evaluation JSON) of Chang et al.'s Tables 3, 4 (main
        results) and 6 (open domain: the candidates enlarged, the models of the dataset it enlarges)."""
        t = self.chang[table]
        chang_model = self.plan.train.chang_model
        if table == "table6":
            encoders = [("Transformer", p) for p in t["pretraining"]]
        else:
            encoders = [("BoW-MLP", "none"), ("BoW-MLP", "ict+bfs+wlp"),
                        ("Transformer", "none"), ("Transformer", "mlm"), ("Transformer", "ict+bfs+wlp")]
        rows = []
        for split in t["splits"]:
            rows.append(chang_row(split, "BM-25", LABEL["none"], eval_json(t["dataset"], "bm25", split, "lucene")))
            for encoder, pretraining in encoders:
                if encoder == "BoW-MLP":
                    model = chang_model("bowmlp", pretraining, self.chang["bow_mlp"]["embedding_dim"])
                else:
                    model = chang_model("transformer", pretraining, self.config["two_tower"]["embedding_dim"])
                rows.append(chang_row(split, encoder, LABEL[pretraining], eval_json(t["dataset"], model, split,
                                                                                    t["index"])))
            for name in t.get("checkpoints", []):   # pretrained checkpoints, evaluated as they are (zeroshot.smk)
                rows.append(chang_row(split, self.plan.zeroshot.checkpoint_cfg(f"ckpt-{name}")["label"], CHECKPOINT_ROW,
                                      eval_json(t["dataset"], f"ckpt-{name}", split, t["index"])))
        return rows

    def recall_metrics(self):
        """Tables 3, 4 and 6 show the profile's recall metrics."""
        return " ".join(q(m) for m in self.config["metrics"] if m.startswith("R@"))

    def table_note(self, table):
        return self.plan.evaluation.table_note(self.chang[table]["dataset"])

    def evals(self, table):
        """The evaluations a table of chang_rows reads."""
        return [row["eval"] for row in self.chang_rows(table)]

    def ablation_rows(self):
        """Table 5's rows: index, layers, pretraining, emb_dim, split and eval (the evaluation JSON)."""
        t = self.chang["table5"]
        chang_model = self.plan.train.chang_model
        return [{"index": str(index), "layers": str(layers), "pretraining": LABEL[pretraining], "emb_dim": str(dim),
                 "split": split,
                 "eval": eval_json(t["dataset"], chang_model("transformer", pretraining, dim, layers), split, t["index"])}
                for index, layers, pretraining, dim in t["rows"] for split in t["splits"]]

    def pair_stats(self):
        """Table 1's statistics: one file a pair task of its dataset."""
        return [f"{ART}/{self.chang['table1']['dataset']}/pairs/{task}.stats.json" for task in ("ict", "bfs", "wlp")]

    def reqa_stats(self):
        """Table 2's statistics: one file a dataset of chang2020.table2.datasets."""
        return [collection(d["name"], "table2-stats.json") for d in self.chang["table2"]["datasets"]]

    def reqa_rows(self):
        """Table 2's rows: each dataset built here beside the paper's."""
        return [{"dataset": d["name"], "paper_dataset": d["paper"], "stats": collection(d["name"], "table2-stats.json")}
                for d in self.chang["table2"]["datasets"]]
