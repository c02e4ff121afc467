"""LTRe (rules in workflow/rules/ltre.smk; layout: towers.reports.ltre): its settings and model names, where a
chain starts, the fixed doc side, and the rows and files of results/ltre/. Its indexes join faiss.indexes in
towers.plan.retrieval.Dense.indexes (a derived value: the config is left as it is)."""
from __future__ import annotations

from .paths import ART, collection
from .shell import paper_table

SPLIT = "dev"
SOURCE = r"(rand|bm25|nce|bm25\+rand|async)"
CHAIN = rf"{SOURCE}(\.{SOURCE})*"
FIGURE3_MODELS = {"ltre": "ltre", "rand": "qrand", "bm25": "qbm25", "async": "qasync"}


class Ltre:
    chain = CHAIN   # a negative sampler, or a chain of them (bm25.async: BM25 Neg, then ANCE's refresh)
    table_shell = paper_table("ltre-table")   # the tables' command

    def __init__(self, plan):
        self.plan = plan
        self.config = config = plan.config
        self.lt = lt = config["ltre"]
        self.dataset = lt["dataset"]
        self.start = lt["start"]
        self.indexes = [i["name"] for i in lt["indexes"]]
        self.data_note = (f"LTRe's data: {self.dataset}, split dev, {lt['towers']['embedding_dim']}-d towers "
                          f"(the paper's: MS MARCO passage dev and TREC DL 2019, RoBERTa-base, 768-d)")
        self.note = f"{config['profile_note']}; {self.data_note}"
        # the tables also say how their metrics are computed
        self.table_note = f"{plan.evaluation.table_note(self.dataset)}; {self.data_note}"
        self.training_data = {
            "candidates": collection("{dataset}", "candidates.jsonl"),
            "qrels": collection("{dataset}", "qrels.txt"),
            "train": f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
            # BM25 Neg's pools (negative_depth) and Figure 3's BM25 overlap (probe_depth)
            "bm25": lambda w: plan.bm25.bm25_run(w.dataset, w.split, "train",
                                                 max(lt["negatives"]["negative_depth"], lt["figure3"]["probe_depth"])),
        }

    def ltre_start(self, w):
        """A chain's start: the MLM encoder (or ltre.start_hub_model) for one source, else the chain's prefix
        model."""
        if "." in w.chain:
            return {"start": f"{ART}/{w.dataset}/dense/neg-{w.chain.rsplit('.', 1)[0]}/{w.split}/model"}
        return {} if self.lt["start_hub_model"] else {"start": self.plan.train.mlm_encoder(w)}

    @staticmethod
    def fixed_side(w):
        """The start baseline's saved model, doc vectors, ids and index (built by the generic dense rules)."""
        folder = f"{ART}/{w.dataset}/dense/neg-{w.start}/{w.split}"
        return {"start": f"{folder}/model", "embeddings": f"{folder}/candidates.npy", "ids": f"{folder}/candidates.ids",
                "index": f"{folder}/index-{w.index}.faiss"}

    # --- results/ltre/ --------------------------------------------------------------------------------

    def lt_eval(self, model, index="flat", dataset=None):
        return f"{ART}/{dataset or self.dataset}/eval/{model}/{SPLIT}/{index}.json"

    def lt_graded(self, model, index="flat"):
        """The model's evaluation on ltre.graded_dataset (nDCG@10's queries), or "" when there is none."""
        return self.lt_eval(model, index, self.lt["graded_dataset"]) if self.lt["graded_dataset"] else ""

    def lt_steps(self, model):
        return f"{ART}/{self.dataset}/ltre/steps/{model}-{SPLIT}.jsonl"

    def lt_rows(self, table):
        """The rows of an LTRe table (fields: towers.stages.tables.LTRE_ROWS): a label, then the files it reads."""
        start, data, lt_eval, lt_steps = self.start, self.dataset, self.lt_eval, self.lt_steps
        if table == "table1":
            rows = [self.lt_table1_row("BM25", "bm25", "lucene")]
            rows += [self.lt_table1_row(c, f"neg-{c}") for c in self.lt["baselines"]]
            return rows + [self.lt_table1_row(f"ltre:{start}", f"ltre-{start}-flat")]
        if table == "table3":
            # the start (BM25 Neg) trained on BM25's negatives: the paper lists the BM25 index and its quality
            rows = [{"key": f"start:{start}", "eval": lt_eval(f"neg-{start}"), "steps": lt_steps(f"neg-{start}"),
                     "index": f"{ART}/{data}/bm25/index", "before": lt_eval("bm25", "lucene")}]
            if f"{start}.async" in self.lt["baselines"]:
                chain = f"{start}.async"
                rows.append({"key": f"async:{chain}", "eval": lt_eval(f"neg-{chain}"), "steps": lt_steps(f"neg-{chain}"),
                             "index": f"{ART}/{data}/dense/neg-{chain}/{SPLIT}/index-flat.faiss", "before": ""})
            for index in self.indexes:
                model = f"ltre-{start}-{index}"
                rows.append({"key": f"ltre:{index}", "eval": lt_eval(model), "steps": lt_steps(model),
                             "index": f"{ART}/{data}/dense/neg-{start}/{SPLIT}/index-{index}.faiss",
                             "before": lt_eval(f"neg-{start}", index)})
            return rows
        # table4: each training index x each evaluation index
        return [{"train": train, "test": test, "eval": lt_eval(f"ltre-{start}-{train}", test),
                 "graded": self.lt_graded(f"ltre-{start}-{train}", test)}
                for train in self.indexes for test in self.indexes]

    def lt_table1_row(self, key, model, index="flat"):
        return {"key": key, "eval": self.lt_eval(model, index), "graded": self.lt_graded(model, index)}

    def lt_files(self, table):
        return [f for row in self.lt_rows(table) for k, f in row.items() if k not in ("key", "train", "test") and f]

    def figure3_runs(self):
        return [(method, self.lt_steps(f"{FIGURE3_MODELS[method]}-{self.start}-flat"))
                for method in self.lt["figure3"]["methods"]]
