"""LTRe (rules in workflow/rules/ltre.smk; layout: towers.reports.ltre): its settings and model names, where a
chain starts, the fixed doc side, the rows, inputs, note and command of its tables (towers.plan.tables) and its
figure's runs. Its indexes join faiss.indexes in towers.plan.retrieval.Dense.indexes (a derived value: the config
is left as it is).

Its models (workflow/rules/ltre.smk): neg-<chain>, a baseline trained on a chain of negative samplers (bm25.async:
BM25 Neg, then ANCE's refresh); ltre-<start>-<index>, LTRe against neg-<start>'s index; q<source>-<start>-<index>,
Figure 3's query-only baselines against the same fixed doc side. Table keys name a row: ltre:<index>, start:<chain>,
async:<chain>."""
from __future__ import annotations

import re

from .paths import ART, collection
from .tables import Tables

SPLIT = "dev"
SOURCE = r"(rand|bm25|nce|bm25\+rand|async)"
CHAIN = rf"{SOURCE}(\.{SOURCE})*"
FIGURE3_MODELS = {"ltre": "ltre", "rand": "qrand", "bm25": "qbm25", "async": "qasync"}
# A model trained against a fixed doc side (LTRe's, and Figure 3's query-only runs: <method>-<start>-<index>)
# has its start's doc tower, hence its start's doc vectors: it is searched through the start's indexes, as
# LTRe's paper does, instead of re-encoding and re-indexing the corpus.
FIXED_DOC_SIDE = r"(ltre|qrand|qbm25|qasync)-(?P<start>[a-z0-9+.]+)-[a-z0-9]+"


def hub_models(config):
    return [config["ltre"]["start_hub_model"]]


def indexes(config):
    """LTRe's indexes join faiss.indexes (a name means one factory in both: towers.config.params_check)."""
    return {index["name"]: index["factory"] for index in config["ltre"]["indexes"]}


def index_owner(model):
    """The model whose doc vectors and indexes serve `model` (towers.plan.retrieval.Dense, handed down by the
    Plan): a fixed doc side's start baseline, neg-<start>; any other model's own."""
    fixed = re.fullmatch(FIXED_DOC_SIDE, model)
    return f"neg-{fixed['start']}" if fixed else model


class Ltre(Tables):
    chain = CHAIN   # a negative sampler, or a chain of them (bm25.async: BM25 Neg, then ANCE's refresh)

    def __init__(self, plan):
        self.plan = plan
        self.config = config = plan.config
        self.settings = lt = config["ltre"]
        self.dataset = lt["dataset"]
        self.start = lt["start"]
        self.indexes = [i["name"] for i in lt["indexes"]]
        self.data_note = (f"LTRe's data: {self.dataset}, split dev, {lt['towers']['embedding_dim']}-d towers "
                          f"(the paper's: MS MARCO passage dev and TREC DL 2019, RoBERTa-base, 768-d)")
        self.figure_note = f"{config['profile_note']}; {self.data_note}"
        self.training_data = {
            "candidates": collection("{dataset}", "candidates.jsonl"),
            "qrels": collection("{dataset}", "qrels.txt"),
            "train": f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
            # BM25 Neg's pools (negative_depth) and Figure 3's BM25 overlap (probe_depth)
            "bm25": lambda w: plan.bm25.bm25_run(w.dataset, w.split, "train",
                                                 max(lt["negatives"]["negative_depth"], lt["figure3"]["probe_depth"])),
        }

    def chain_start(self, w):
        """A chain's start: the MLM encoder (or ltre.start_hub_model) for one source, else the chain's prefix
        model."""
        if "." in w.chain:
            return {"start": f"{ART}/{w.dataset}/dense/neg-{w.chain.rsplit('.', 1)[0]}/{w.split}/model"}
        return {} if self.settings["start_hub_model"] else {"start": self.plan.train.mlm_encoder(w)}

    @staticmethod
    def fixed_side(w):
        """The start baseline's saved model, doc vectors, ids and index (built by the generic dense rules)."""
        folder = f"{ART}/{w.dataset}/dense/neg-{w.start}/{w.split}"
        return {"start": f"{folder}/model", "embeddings": f"{folder}/candidates.npy", "ids": f"{folder}/candidates.ids",
                "index": f"{folder}/index-{w.index}.faiss"}

    # --- results/ltre/ --------------------------------------------------------------------------------

    def eval_file(self, model, index="flat", dataset=None):
        return f"{ART}/{dataset or self.dataset}/eval/{model}/{SPLIT}/{index}.json"

    def graded_file(self, model, index="flat"):
        """The model's evaluation on ltre.graded_dataset (nDCG@10's queries), or "" when there is none."""
        graded = self.settings["graded_dataset"]
        return self.eval_file(model, index, graded) if graded else ""

    def steps_file(self, model):
        return f"{ART}/{self.dataset}/ltre/steps/{model}-{SPLIT}.jsonl"

    def rows(self, table):
        """The rows of an LTRe table (fields: towers.reports.ltre.LAYOUTS): a label, then the files it reads."""
        start, data, eval_file, steps_file = self.start, self.dataset, self.eval_file, self.steps_file
        if table == "table1":
            rows = [self.table1_row("BM25", "bm25", "lucene")]
            rows += [self.table1_row(c, f"neg-{c}") for c in self.settings["baselines"]]
            return rows + [self.table1_row(f"ltre:{start}", f"ltre-{start}-flat")]
        if table == "table3":
            # the start (BM25 Neg) trained on BM25's negatives: the paper lists the BM25 index and its quality
            rows = [{"key": f"start:{start}", "eval": eval_file(f"neg-{start}"), "steps": steps_file(f"neg-{start}"),
                     "index": f"{ART}/{data}/bm25/index", "before": eval_file("bm25", "lucene")}]
            if f"{start}.async" in self.settings["baselines"]:
                chain = f"{start}.async"
                rows.append({"key": f"async:{chain}", "eval": eval_file(f"neg-{chain}"),
                             "steps": steps_file(f"neg-{chain}"),
                             "index": f"{ART}/{data}/dense/neg-{chain}/{SPLIT}/index-flat.faiss", "before": ""})
            for index in self.indexes:
                model = f"ltre-{start}-{index}"
                rows.append({"key": f"ltre:{index}", "eval": eval_file(model), "steps": steps_file(model),
                             "index": f"{ART}/{data}/dense/neg-{start}/{SPLIT}/index-{index}.faiss",
                             "before": eval_file(f"neg-{start}", index)})
            return rows
        # table4: each training index x each evaluation index
        return [{"train": train, "test": test, "eval": eval_file(f"ltre-{start}-{train}", test),
                 "graded": self.graded_file(f"ltre-{start}-{train}", test)}
                for train in self.indexes for test in self.indexes]

    def table1_row(self, key, model, index="flat"):
        return {"key": key, "eval": self.eval_file(model, index), "graded": self.graded_file(model, index)}

    def inputs(self, table):
        return [f for row in self.rows(table) for k, f in row.items() if k not in ("key", "train", "test") and f]

    def note(self, table):
        """The profile's note, how the metrics are computed and LTRe's data beside the paper's."""
        return f"{self.plan.evaluation.table_note(self.dataset)}; {self.data_note}"

    def command(self, table):
        return {}   # the rows are the whole of it

    def figure3_runs(self):
        return [(method, self.steps_file(f"{FIGURE3_MODELS[method]}-{self.start}-flat"))
                for method in self.settings["figure3"]["methods"]]
