"""Chang et al. 2020 (rules in workflow/rules/chang2020.smk and train.smk; layout: towers.reports.chang2020): its
model names, where their towers start and how they are pre-trained, and the rows, inputs, note and command of each
table (towers.plan.tables).

Chang et al.'s two-tower models are named <arch>-<pre-training>[-l<layers>]-d<dim>, e.g.
transformer-ict+bfs+wlp-l2-d128 or bowmlp-none-d128; pre-training is none, mlm, a pair task or a '+'-joined
uniform mixture of them (ict, bfs, wlp)."""
from __future__ import annotations

from .paths import ART, collection, eval_json
from .shell import flags
from .tables import Tables

MODEL = r"(transformer-[a-z+]+-l[0-9]+|bowmlp-[a-z+]+)-d[0-9]+"
PAIR_TASKS = ("ict", "bfs", "wlp")
CHECKPOINT_ROW = "retrieval-trained checkpoint (not a BERT init)"
EVALUATIONS = ("table3", "table4", "table6")   # the evaluations of Chang's models (rule chang2020_table)


def bag_of_words(config):
    """Chang et al.'s BoW-MLP encoder: word unigrams only."""
    bow = config["chang2020"]["bow_mlp"]
    return {"bow-unigram": flags({**{k: bow[k] for k in ("buckets", "dim", "max_features")}, "char_ngram": 0,
                                  "word_bigrams": False})}


def label(pretraining):
    """A pre-training as the tables name it: MLM, ICT, ICT+BFS+WLP, any mixture of the pair tasks alike."""
    return "No Pretraining" if pretraining == "none" else pretraining.upper()


def evaluation_row(split, encoder, pretraining, evaluation):
    return {"split": split, "encoder": encoder, "pretraining": pretraining, "eval": evaluation}


class Chang2020(Tables):
    model_re = MODEL

    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.settings = self.config["chang2020"]

    # --- model names, and where their towers start ----------------------------------------------------

    def model(self, arch, pretraining, dim, layers=None):
        layers = f"-l{layers or self.config['encoder']['layers']}" if arch == "transformer" else ""
        return f"{arch}-{pretraining}{layers}-d{dim}"

    def parse_model(self, name):
        arch, rest = name.split("-", 1)
        pretraining, *shape = rest.rsplit("-", 2 if arch == "transformer" else 1)
        layers = int(shape[0][1:]) if arch == "transformer" else None
        tasks = pretraining.split("+")
        if pretraining not in ("none", "mlm") and not set(tasks) <= set(PAIR_TASKS):
            raise ValueError(f"model {name}: unknown pre-training {pretraining!r} (none, mlm or '+'-joined "
                             f"{PAIR_TASKS})")
        if pretraining == "mlm" and (arch != "transformer" or layers != self.config["encoder"]["layers"]):
            raise ValueError(f"model {name}: MLM exists for the transformer of encoder.layers only")
        return {"arch": arch, "pretraining": pretraining, "tasks": tasks, "layers": layers, "dim": int(shape[-1][1:])}

    def init(self, dataset, m):
        """Where a model's towers start before any two-tower training (m: parse_model's)."""
        if m["arch"] == "bowmlp":
            return self.plan.train.encoder(dataset, "bow-unigram")
        return self.plan.train.encoder(dataset, "mlm" if m["pretraining"] == "mlm" else f"random-l{m['layers']}")

    def start(self, w):
        """Fine-tuning starts from the corpus's pre-trained two towers, or from an encoder."""
        m = self.parse_model(w.model)
        if m["pretraining"] in ("none", "mlm"):
            return self.init(w.dataset, m)
        return f"{ART}/{self.settings['pretraining']['corpus']}/pretrained/{w.model}/model"

    def pretraining_pairs(self, w):
        """The pair files a two-tower pre-training reads: one a task of its mixture."""
        return [f"{ART}/{w.dataset}/pairs/{task}.jsonl" for task in self.parse_model(w.model)["tasks"]]

    def towers(self, model):
        m = self.parse_model(model)
        towers = {**self.config["two_tower"], "embedding_dim": m["dim"]}
        if m["arch"] == "bowmlp":   # unigram embeddings, average pooling, two-layer tanh MLP
            towers.update(pooling="mean", head="mlp")
        return flags(towers)

    def pretraining_flags(self):
        """Two-tower pre-training's schedule (chang2020.pretraining, less what names its data)."""
        return flags({k: v for k, v in self.settings["pretraining"].items()
                      if k not in ("corpus", "per_article", "title_tasks")})

    def finetuning(self):
        """Fine-tuning's schedule flags (finetune: the sampled softmax over in-batch documents)."""
        return flags(self.config["finetune"])

    def pairs_per_article(self):
        """Pre-training pairs drawn from each article (chang2020.pretraining.per_article)."""
        return self.settings["pretraining"]["per_article"]

    # --- the tables: 1 (pairs), 2 (ReQA statistics), 3, 4 and 6 (evaluations), 5 (the ablation) ----------

    def rows(self, table):
        if table == "table1":
            return [{"stats": path} for path in self.pair_stats()]
        if table == "table2":
            return self.reqa_rows()
        if table == "table5":
            return self.ablation_rows()
        return self.evaluation_rows(table)

    def inputs(self, table):
        if table == "table1":
            return self.pair_stats()
        if table == "table2":
            return [row["stats"] for row in self.reqa_rows()]
        return [row["eval"] for row in self.rows(table)]

    def note(self, table):
        """Tables 1 and 2 (data): the profile's note; the evaluations also say how Chang et al.'s towers were trained
        (from the params, so it cannot go stale) and how their metrics are computed."""
        if table in ("table1", "table2"):
            return self.config["profile_note"]
        metrics = self.plan.evaluation.metrics_note(self.settings[table]["dataset"])
        return f"{self.config['profile_note']}; {self.training_note()}; {metrics}"

    def training_note(self):
        towers, pre, fine = self.config["two_tower"], self.settings["pretraining"], self.config["finetune"]
        return (f"Chang et al.'s towers: queries of {towers['query_length']} and documents of {towers['doc_length']}"
                f" WordPiece tokens, two-tower pre-training {pre['steps']} steps of {pre['batch_size']} pairs,"
                f" fine-tuning {fine['steps']} steps of {fine['batch_size']}")

    def command(self, table):
        """Tables 3, 4 and 6: the dataset and the profile's recall metrics; Table 5: its dataset and metric."""
        if table == "table5":
            return {"dataset": self.settings["table5"]["dataset"], "metric": self.settings["table5"]["metric"]}
        if table in EVALUATIONS:
            return {"dataset": self.settings[table]["dataset"],
                    "metrics": [m for m in self.config["metrics"] if m.startswith("R@")]}
        return {}

    def evaluation_rows(self, table):
        """The rows (split, encoder, pretraining, eval: the evaluation JSON) of Chang et al.'s Tables 3, 4 (main
        results) and 6 (open domain: the candidates enlarged, the models of the dataset it enlarges)."""
        t = self.settings[table]
        if table == "table6":
            encoders = [("Transformer", p) for p in t["pretraining"]]
        else:
            encoders = [("BoW-MLP", "none"), ("BoW-MLP", "ict+bfs+wlp"),
                        ("Transformer", "none"), ("Transformer", "mlm"), ("Transformer", "ict+bfs+wlp")]
        rows = []
        for split in t["splits"]:
            rows.append(evaluation_row(split, "BM-25", label("none"), eval_json(t["dataset"], "bm25", split, "lucene")))
            for encoder, pretraining in encoders:
                if encoder == "BoW-MLP":
                    model = self.model("bowmlp", pretraining, self.settings["bow_mlp"]["embedding_dim"])
                else:
                    model = self.model("transformer", pretraining, self.config["two_tower"]["embedding_dim"])
                rows.append(evaluation_row(split, encoder, label(pretraining),
                                           eval_json(t["dataset"], model, split, t["index"])))
            for name in t.get("checkpoints", []):   # pretrained checkpoints, evaluated as they are (zeroshot.smk)
                rows.append(evaluation_row(split, self.plan.checkpoints.settings(f"ckpt-{name}")["label"],
                                           CHECKPOINT_ROW, eval_json(t["dataset"], f"ckpt-{name}", split, t["index"])))
        return rows

    def ablation_rows(self):
        """Table 5's rows: index, layers, pretraining, emb_dim, split and eval (the evaluation JSON)."""
        t = self.settings["table5"]
        return [{"index": str(index), "layers": str(layers), "pretraining": label(pretraining), "emb_dim": str(dim),
                 "split": split, "eval": eval_json(t["dataset"], self.model("transformer", pretraining, dim, layers),
                                                   split, t["index"])}
                for index, layers, pretraining, dim in t["rows"] for split in t["splits"]]

    def pair_stats(self):
        """Table 1's statistics: one file a pair task of its dataset."""
        return [f"{ART}/{self.settings['table1']['dataset']}/pairs/{task}.stats.json" for task in PAIR_TASKS]

    def reqa_rows(self):
        """Table 2's rows: each dataset built here beside the paper's."""
        return [{"dataset": d["name"], "paper_dataset": d["paper"], "stats": collection(d["name"], "table2-stats.json")}
                for d in self.settings["table2"]["datasets"]]
