"""Retrieval (rules in workflow/rules/bm25.smk and dense.smk): BM25's settings and which run a consumer of a
split's queries reads; where a model folder and a split's questions come from, encode.shards, the Faiss indexes,
and which model's doc vectors and indexes serve a model (a fixed doc side searches its start's)."""
from __future__ import annotations

from .paths import ART
from .shell import one_of

TRAINING_PARTS = r"train|train\+valid"


class Bm25:
    """bm25_run: one run of every query, or a run per query set for a dataset in bm25.split_runs."""

    training_parts = TRAINING_PARTS

    def __init__(self, plan):
        self.plan = plan
        config = plan.config
        self.settings = config["bm25"]
        self.split_runs = set(self.settings.get("split_runs", []))
        self.query_shards = {name: parts for name, parts in self.settings.get("query_shards", {}).items() if parts > 1}
        self.query_sharded_re = one_of(list(self.query_shards))   # matches nothing when none is
        self.threads = self.settings.get("threads") or config["threads"]   # Lucene threads of an index or search job

    def bm25_run(self, dataset, split, parts="test", depth=0):
        """The BM25 run a consumer of `split`'s queries `parts` reads: "test" at the dataset's run depth, "train" or
        "train+valid" at `depth` (its negatives' depth); one run of every query for a dataset not in
        bm25.split_runs."""
        if dataset not in self.split_runs:
            return f"{ART}/{dataset}/bm25/run.trec"
        if parts == "test":
            depth = self.plan.data.run_depth(dataset, self.settings["depth"])
        return f"{ART}/{dataset}/bm25/{split}/{parts}-d{depth}.trec"

    def bm25_queries(self, w):
        """The split files whose queries a run searches (an open-domain dataset's are its base's)."""
        return [f"{ART}/{self.plan.data.questions_of(w.dataset)}/splits/{w.split}/{part}.tsv"
                for part in w.parts.split("+")]

    def index_of(self, w):
        """The Lucene index a dataset's queries search: a graded set's base's."""
        return f"{ART}/{self.plan.data.corpus_of(w.dataset)}/bm25/index"

    def search_depth(self, w):
        return self.plan.data.run_depth(w.dataset, self.settings["depth"])

    def shard_runs(self, w):
        return [f"{ART}/{w.dataset}/bm25/{w.split}/{w.parts}-d{w.depth}.shards/{i}.trec"
                for i in range(self.query_shards[w.dataset])]


class Dense:
    """An open-domain dataset (data.smk) has no models or splits of its own: the model folder and the split's
    questions come from its base dataset (base_of), the outputs stay under its own folder."""

    def __init__(self, plan, *, index_owner, indexes: dict):
        """index_owner(model): the model whose doc vectors and indexes serve `model`, LTRe's grammar
        (towers.plan.ltre.index_owner) handed down by the Plan: a model trained against a fixed doc side
        searches its start's indexes. `indexes`: the papers' own ({name: factory}, LTRe's), beside faiss.indexes."""
        self.plan = plan
        self.index_owner = index_owner
        config = plan.config
        self.shards = config["encode"]["shards"]            # dataset -> parts its corpus is encoded in (absent: 1)
        self.sharded = [name for name, parts in self.shards.items() if parts > 1]
        self.sharded_re = one_of(self.sharded)              # matches nothing when none is
        # faiss.indexes, and the papers' with them (LTRe's: a name means one factory in both)
        self.indexes = dict(config["faiss"]["indexes"])
        for name, factory in indexes.items():
            self.indexes.setdefault(name, factory)

    def model_dir(self, w):
        checkpoints = self.plan.checkpoints   # an untrained checkpoint: one split
        split = checkpoints.split(w.dataset) if checkpoints.is_checkpoint(w.model) else w.split
        return f"{ART}/{self.plan.data.base_of(w.dataset)}/dense/{w.model}/{split}/model"

    def split_questions(self, part):
        return lambda w: f"{ART}/{self.plan.data.questions_of(w.dataset)}/splits/{w.split}/{part}.tsv"

    def encoded_shards(self, suffix):
        return lambda w: [f"{ART}/{w.dataset}/dense/{w.model}/{w.split}/shards/{i}.{suffix}"
                          for i in range(self.shards[w.dataset])]

    def checkpoint_home(self, dataset):
        """Whose encoding of its candidates an untrained checkpoint searches for `dataset`: a question set over
        the same articles as one before it in params (plan.data.text_home) has the same candidates, every sentence
        of those articles, so the first one's encoding serves both; any other dataset, its corpus's own."""
        if self.plan.data.dataset_cfg(dataset)["kind"] == "wikipedia-qa":
            return self.plan.data.text_home(dataset)
        return self.plan.data.corpus_of(dataset)

    def dense_files(self, dataset, model, split, index):
        data = self.plan.data
        corpus = data.corpus_of(dataset)
        checkpoints = self.plan.checkpoints
        if checkpoints.is_checkpoint(model):   # not trained: every split searches the one encoding of the corpus
            split = checkpoints.split(dataset)
            corpus = self.checkpoint_home(dataset)
        folder = f"{ART}/{corpus}/dense/{self.index_owner(model)}/{split}"
        return {"model": f"{ART}/{data.base_of(dataset)}/dense/{model}/{split}/model",
                "index": f"{folder}/index-{index}.faiss", "ids": f"{folder}/candidates.ids"}

    def search_depth(self, w):
        return self.plan.data.run_depth(w.dataset, self.plan.config["faiss"]["depth"])
