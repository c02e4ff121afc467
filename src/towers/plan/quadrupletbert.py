"""QuadrupletBERT's tables (rules in workflow/rules/quadrupletbert.smk; layout: towers.reports.quadrupletbert):
its model names, the rows of Tables 1-2 (every cell the mean over seeds) and the tables' params and command."""
from __future__ import annotations

from .paths import eval_json
from .shell import paper_table, q

TABLE = paper_table("quadrupletbert-table", "--metrics {params.metrics} {params.rows} --compare QuadrupletBERT"
                    " 'Three-T BERT' --test {params.test} --alpha {params.alpha} --exact-index {params.exact}")


class QuadrupletBert:
    table = TABLE   # the tables' command

    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.qb = self.config["quadrupletbert"]

    def qb_model(self, kind, margin, seed):
        return {"Three-T Emb": f"threet-emb-m{self.qb['three_t_emb']['margin']}-s{seed}",
                "Three-T BERT": f"threet-bert-m{margin}-s{seed}",
                "QuadrupletBERT": f"quadbert-m{margin}-s{seed}"}[kind]

    def qb_row(self, dataset, split, label, margin, index, seeds=None):
        evals = [eval_json(dataset["name"], self.qb_model(label, margin, seed), split, index)
                 for seed in seeds or self.qb["seeds"]]
        shown_margin = self.qb["three_t_emb"]["margin"] if label == "Three-T Emb" else margin
        return {"dataset": dataset["name"], "paper_dataset": dataset["paper"], "split": split, "model": label,
                "margin": str(shown_margin), "index": index, "evals": evals}   # evals: every seed's evaluation

    def qb_table1_rows(self):
        qb, rows = self.qb, []
        for dataset in qb["datasets"]:
            for split in qb["splits"]:
                rows += [self.qb_row(dataset, split, label, dataset["margin"], qb["index"])
                         for label in ("Three-T Emb", "Three-T BERT", "QuadrupletBERT")]
                if qb["quantized_index"]:
                    rows.append(self.qb_row(dataset, split, "QuadrupletBERT", dataset["margin"], qb["quantized_index"]))
        return rows

    def qb_table2_rows(self):
        """Table 2's sweep: each margin trained with sweep_seeds (the paper's Table 2 is one run a cell)."""
        qb = self.qb
        return [self.qb_row(dataset, split, "QuadrupletBERT", margin, qb["index"], qb.get("sweep_seeds") or qb["seeds"])
                for dataset in qb["datasets"] for split in qb["splits"] for margin in qb["margins"]]

    def rows(self, table):
        """Table 1 (each model at its dataset's margin) or Table 2 (QuadrupletBERT at each margin)."""
        return self.qb_table1_rows() if table == "table1" else self.qb_table2_rows()

    def evals(self, table):
        """Every evaluation a table reads: each row's, one a seed."""
        return [e for row in self.rows(table) for e in row["evals"]]

    def table_params(self):
        """The tables' params but their rows: metrics, profile, note, the paired test and the exact index."""
        qb = self.qb
        return {"metrics": " ".join(map(q, qb["metrics"])), "profile": self.config["profile"],
                "note": self.plan.evaluation.table_note(qb["datasets"][0]["name"], self.qb_model("QuadrupletBERT", 0, 0)),
                "test": qb["significance"]["test"], "alpha": qb["significance"]["alpha"], "exact": qb["index"]}
