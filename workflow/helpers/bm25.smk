# What workflow/rules/bm25.smk's rules call: bm25 settings, and which run a consumer of a split's queries reads
# (bm25_run: one run of every query, or a run per query set for a dataset in bm25.split_runs).

BM25 = config["bm25"]
SPLIT_RUNS = set(BM25.get("split_runs", []))
QUERY_SHARDS = {name: parts for name, parts in BM25.get("query_shards", {}).items() if parts > 1}
QUERY_SHARDED_RE = one_of(list(QUERY_SHARDS))   # matches nothing when none is
BM25_THREADS = BM25.get("threads") or config["threads"]   # Lucene threads of an index or search job
TRAINING_PARTS = r"train|train\+valid"


def bm25_run(dataset, split, parts="test", depth=0):
    """The BM25 run a consumer of `split`'s queries `parts` reads: "test" at the dataset's run depth, "train" or
    "train+valid" at `depth` (its negatives' depth); one run of every query for a dataset not in bm25.split_runs."""
    if dataset not in SPLIT_RUNS:
        return f"{ART}/{dataset}/bm25/run.trec"
    if parts == "test":
        depth = run_depth(dataset, BM25["depth"])
    return f"{ART}/{dataset}/bm25/{split}/{parts}-d{depth}.trec"


def bm25_queries(w):
    """The split files whose queries a run searches (an open-domain dataset's are its base's)."""
    return [f"{ART}/{questions_of(w.dataset)}/splits/{w.split}/{part}.tsv" for part in w.parts.split("+")]

