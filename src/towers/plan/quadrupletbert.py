"""QuadrupletBERT (rules in workflow/rules/quadrupletbert.smk, its models' training in train.smk; layout:
towers.reports.quadrupletbert): its model names, the three-tower baselines' settings, and the rows, inputs, note
and command of Tables 1-2 (every cell the mean over seeds; towers.plan.tables).

Its models are threet-emb-m<margin>-s<seed> (Three-T Emb: hashed bag-of-words towers), threet-bert-m<margin>-s<seed>
(Three-T BERT, also phase 1) and quadbert-m<margin>-s<seed> (QuadrupletBERT, phase 2)."""
from __future__ import annotations

import re

from .paths import eval_json, model_folder
from .shell import flags, q
from .tables import Tables

MODEL = re.compile(r"^(threet-emb|threet-bert|quadbert)-")


def hub_models(config):
    """The hub models this paper's settings name (the profile is offline when no section names one)."""
    return [config["quadrupletbert"]["pretrain"]["init_hub_model"]]


def bag_of_words(config):
    """Three-T Emb's encoder: hashed word uni/bigrams and character trigrams (Huang et al. 2020)."""
    return {"hashed-bow": flags(config["quadrupletbert"]["three_t_emb"]["encoder"])}


def is_model(name):
    """A model of QuadrupletBERT's (the evaluation counts its recall on a question set as the paper does)."""
    return bool(MODEL.match(name))


class QuadrupletBert(Tables):
    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.settings = self.config["quadrupletbert"]

    def model(self, kind, margin, seed):
        return {"Three-T Emb": f"threet-emb-m{self.settings['three_t_emb']['margin']}-s{seed}",
                "Three-T BERT": f"threet-bert-m{margin}-s{seed}",
                "QuadrupletBERT": f"quadbert-m{margin}-s{seed}"}[kind]

    def phase(self, kind):
        """A training phase's settings, the one door through which the rules get them: {'start': the encoder it
        starts from ('' where the phase-1 model is its start), 'towers': tower flags, 'train': schedule flags}.
        `kind`: 'bert' or 'emb', phase 1 (the three-tower baselines, threet-<kind>-...); 'quadbert', phase 2
        (QuadrupletBERT from Three-T BERT, with mined hard negatives)."""
        if kind == "quadbert":
            return {"start": "", "towers": flags(self.settings["towers"]), "train": flags(self.settings["phase2"])}
        if kind == "bert":
            return {"start": "mlm-nsp", "towers": flags(self.settings["towers"]), "train": flags(self.settings["phase1"])}
        emb = self.settings["three_t_emb"]
        return {"start": "hashed-bow", "towers": flags(emb["towers"]), "train": flags(emb["train"])}

    def pretraining(self):
        """MLM+NSP pre-training of the encoder phase 1 starts from: its schedule flags and the hub model it starts
        from ('' : random)."""
        pre = self.settings["pretrain"]
        return {"train": flags({k: v for k, v in pre.items() if k != "init_hub_model"}), "init": q(pre["init_hub_model"])}

    # --- Tables 1 and 2 -------------------------------------------------------------------------------

    def rows(self, table):
        """Table 1 (each model at its dataset's margin) or Table 2 (QuadrupletBERT at each margin)."""
        return self.table1_rows() if table == "table1" else self.table2_rows()

    def inputs(self, table):
        """Every evaluation a table reads: each row's, one a seed."""
        return [e for row in self.rows(table) for e in row["evals"]]

    def note(self, table):
        """The profile's note and how the metrics are computed (QuadrupletBERT's recall)."""
        return self.plan.evaluation.table_note(self.settings["datasets"][0]["name"], self.model("QuadrupletBERT", 0, 0))

    def command(self, table):
        """The metrics and the exact index."""
        return {"metrics": list(self.settings["metrics"]), "exact_index": self.settings["index"]}

    def row(self, dataset, split, label, margin, index, seeds=None):
        evals = [eval_json(dataset["name"], self.model(label, margin, seed), split, index)
                 for seed in seeds or self.settings["seeds"]]
        shown_margin = self.settings["three_t_emb"]["margin"] if label == "Three-T Emb" else margin
        return {"dataset": dataset["name"], "paper_dataset": dataset["paper"], "split": split, "model": label,
                "margin": str(shown_margin), "index": index, "evals": evals}   # evals: every seed's evaluation

    def table1_rows(self):
        qb, rows = self.settings, []
        for dataset in qb["datasets"]:
            for split in qb["splits"]:
                rows += [self.row(dataset, split, label, dataset["margin"], qb["index"])
                         for label in ("Three-T Emb", "Three-T BERT", "QuadrupletBERT")]
                if qb["quantized_index"]:
                    rows.append(self.row(dataset, split, "QuadrupletBERT", dataset["margin"], qb["quantized_index"]))
        return rows

    def phase2_runs(self):
        """Table 1's phase-2 models, one a dataset, split and seed, and the CSV of each one's validation checks
        (results/phase2/, which dvc.yaml's plots draw)."""
        qb = self.settings
        return [{"dataset": d["name"], "split": split, "seed": str(seed),
                 "model": model_folder(d["name"], self.model("QuadrupletBERT", d["margin"], seed), split),
                 "curve": f"results/phase2/{d['name']}_{split}_s{seed}.csv"}
                for d in qb["datasets"] for split in qb["splits"] for seed in qb["seeds"]]

    def phase2_note(self):
        """What the validation figure shows and how its runs stop."""
        phase2 = self.settings["phase2"]
        negatives = phase2.get("valid_negatives", 0)
        signal = (f"each question's mean over every positive x {negatives} random x {negatives} mined negatives, "
                  f"drawn once" if negatives else "one draw a question")
        stop = (f"stopped after {phase2['patience']} checks without a lower loss, at most {phase2['steps']} steps; "
                f"the marked check's weights are kept" if phase2["patience"] else f"{phase2['steps']} steps, no stopping")
        return (f"{self.config['profile_note']}; QuadrupletBERT phase 2 (Table 1's runs): validation loss (eq. 3, "
                f"{signal}) every {phase2['checkpoint_every']} steps of batch {phase2['batch_size']}; {stop}")

    def table2_rows(self):
        """Table 2's sweep: each margin trained with sweep_seeds (the paper's Table 2 is one run a cell)."""
        qb = self.settings
        return [self.row(dataset, split, "QuadrupletBERT", margin, qb["index"], qb.get("sweep_seeds") or qb["seeds"])
                for dataset in qb["datasets"] for split in qb["splits"] for margin in qb["margins"]]
