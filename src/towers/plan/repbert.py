"""RepBERT (rules in workflow/rules/repbert.smk; layout: towers.reports.repbert): first-stage runs, the
cross-encoder and reranking scores, latency, the rows, inputs, note and command of its tables (towers.plan.tables)
and its figures' rows. Its run names: "repbert" and "bm25" (first stages), "<first>-d<depth>" (reranked, index
"rerank"), "<fusion>-<a>+<b>" (fused, index "fusion")."""
from __future__ import annotations

from .paths import ART
from .shell import q
from .tables import Tables

FIRST_STAGE = {"bm25": "BM-25", "repbert": "RepBERT"}   # run name -> the paper's label
SPLIT = "dev"


def passage_runs(config):
    """How deep a passage set's first-stage runs go (they feed reranking and fusion: repbert.depth, LTRe's runs
    included) and the metrics a passage set is evaluated on."""
    return {"depth": config["repbert"]["depth"], "metrics": config["repbert"]["metrics"]}


def fusion_row(first, second, fusion, evaluation):
    return {"first": first, "second": second, "fusion": fusion, "eval": evaluation}


class RepBert(Tables):
    first_stage = FIRST_STAGE

    def __init__(self, plan):
        self.plan = plan
        self.config = plan.config
        self.settings = rb = self.config["repbert"]
        self.dataset = rb["dataset"]
        self.rerank_max = max(rb["rerank_depths"])
        self.rerank_shards = rb["rerank_shards"]
        self.recall_depths = [int(m[2:]) for m in rb["metrics"] if m.startswith("R@") and int(m[2:]) <= rb["depth"]]

    def first_stage_run(self, dataset, name, split):
        if name == "bm25":
            return self.plan.bm25.bm25_run(dataset, split)
        return f"{ART}/{dataset}/dense/{name}/{split}/run-{self.settings['index']}.trec"

    def reranker(self, w):
        """The cross-encoder: a hub checkpoint (paper profile) or one trained here on the dataset."""
        return self.settings["reranker"]["hub_model"] or f"{ART}/{w.dataset}/crossenc/{SPLIT}/model"

    def rerank_scorer(self, w):
        """The cross-encoder scores the deepest reranking; a shallower one reuses those scores."""
        if int(w.depth) < self.rerank_max:
            return {"scores": f"{ART}/{w.dataset}/rerank/{w.first}-d{self.rerank_max}/{w.split}.trec"}
        return {} if self.settings["reranker"]["hub_model"] else {"model": self.reranker(w)}

    def rerank_shard_runs(self, w):
        return [f"{ART}/{w.dataset}/rerank/{w.first}-d{w.depth}/{w.split}.shards/{i}.trec"
                for i in range(self.rerank_shards)]

    def scorer_flags(self, w, input):
        return f"--scores {input.scores}" if "scores" in input.keys() else f"--model {q(self.reranker(w))}"

    # --- latency (Table 1) ----------------------------------------------------------------------------

    def latency_index(self, w):
        if w.name == "bm25":
            return f"{ART}/{w.dataset}/bm25/index"
        return f"{ART}/{w.dataset}/dense/{w.name}/{w.split}/index-{self.settings['index']}.faiss"

    @staticmethod
    def latency_model(w):
        return [] if w.name == "bm25" else f"{ART}/{w.dataset}/dense/{w.name}/{w.split}/model"

    @staticmethod
    def latency_model_flag(w):
        return "" if w.name == "bm25" else f"--model {ART}/{w.dataset}/dense/{w.name}/{w.split}/model"

    # --- results/repbert/ -----------------------------------------------------------------------------

    def eval_file(self, model, index):
        return f"{ART}/{self.dataset}/eval/{model}/{SPLIT}/{index}.json"

    def first_eval(self, name):
        return self.eval_file(name, "lucene" if name == "bm25" else self.settings["index"])

    def rows(self, table):
        """The rows of a RepBERT table (fields: towers.reports.repbert.LAYOUTS), each with the files it reads."""
        rb, names = self.settings, list(FIRST_STAGE)
        if table == "table1":
            return [{"method": FIRST_STAGE[n], "eval": self.first_eval(n),
                     "latency": f"{ART}/{self.dataset}/latency/{n}/{SPLIT}.json"} for n in names]
        if table == "table2":
            return [{"method": FIRST_STAGE[n], "depth": str(d), "eval": self.eval_file(f"{n}-d{d}", "rerank")}
                    for n in names for d in rb["rerank_depths"]]
        rows = [fusion_row(FIRST_STAGE[n], "", "none", self.first_eval(n)) for n in names]
        for fusion in rb["fusion"]["methods"]:
            pairs = [(a, b) for a in names for b in names if a != b]
            if fusion != "alternate":   # symmetric: one order is enough
                pairs = [(a, b) for a, b in pairs if a < b]
            rows += [fusion_row(FIRST_STAGE[a], FIRST_STAGE[b], fusion, self.eval_file(f"{fusion}-{a}+{b}", "fusion"))
                     for a, b in pairs]
            if fusion == "alternate" and rb["fusion"]["untruncated"] and table == "table4":   # its R@2000
                rows += [fusion_row(FIRST_STAGE[a], FIRST_STAGE[b], "union", self.eval_file(f"union-{a}+{b}", "fusion"))
                         for a, b in pairs]
        return rows

    def inputs(self, table):
        return [f for row in self.rows(table) for f in row.values() if f.startswith(ART)]

    def note(self, table):
        return self.plan.evaluation.table_note(self.dataset)

    def command(self, table):
        return {}   # the rows are the whole of it

    def recall_rows(self):
        """Figure 1's recall curves: each first stage's evaluation."""
        return [{"method": FIRST_STAGE[n], "eval": self.first_eval(n)} for n in FIRST_STAGE]

    def rerank_rows(self):
        """Figure 1's reranking points: each first stage at each reranking depth."""
        return [{"method": FIRST_STAGE[n], "depth": str(d), "eval": self.eval_file(f"{n}-d{d}", "rerank")}
                for n in FIRST_STAGE for d in self.settings["rerank_depths"]]

    def consistency_rows(self):
        """Figure 2's consistency of each first stage with BM25."""
        return [{"method": FIRST_STAGE[n], "json": f"{ART}/{self.dataset}/consistency/{n}/{SPLIT}.json"}
                for n in FIRST_STAGE]
