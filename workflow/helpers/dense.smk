# What workflow/rules/dense.smk's rules call: where a model folder and a split's questions come from, encode.shards,
# and which model's doc vectors and indexes serve a model (a fixed doc side searches its start's).

# An open-domain dataset (data.smk) has no models or splits of its own: the model folder and the
# split's questions come from its base dataset (base_of), the outputs stay under its own folder.

DENSE = f"{ART}/{{dataset}}/dense/{{model}}/{{split}}"


def model_dir(w):
    split = checkpoint_split(w.dataset) if is_checkpoint(w.model) else w.split   # an untrained checkpoint: one split
    return f"{ART}/{base_of(w.dataset)}/dense/{w.model}/{split}/model"


def split_questions(part):
    return lambda w: f"{ART}/{questions_of(w.dataset)}/splits/{w.split}/{part}.tsv"


SHARDS = config["encode"]["shards"]            # dataset -> parts its corpus is encoded in (absent: 1)
SHARDED = [name for name, parts in SHARDS.items() if parts > 1]
SHARDED_RE = one_of(SHARDED)                   # matches nothing when none is


def encoded_shards(suffix):
    return lambda w: [f"{ART}/{w.dataset}/dense/{w.model}/{w.split}/shards/{i}.{suffix}" for i in range(SHARDS[w.dataset])]


# A model trained against a fixed doc side (LTRe and Figure 3's query-only runs: <method>-<start>-<index>,
# workflow/rules/ltre.smk) has its start's doc tower, hence its start's doc vectors: it is searched
# through the start's indexes, as LTRe's paper does, instead of re-encoding and re-indexing the corpus.
FIXED_DOC_SIDE = r"(ltre|qrand|qbm25|qasync)-(?P<start>[a-z0-9+.]+)-[a-z0-9]+"


def index_owner(model):
    """The model whose doc vectors and indexes serve `model`."""
    fixed = re.fullmatch(FIXED_DOC_SIDE, model)
    return f"neg-{fixed['start']}" if fixed else model


def dense_files(dataset, model, split, index):
    if is_checkpoint(model):   # not trained: every split searches the one encoding of the corpus
        split = checkpoint_split(dataset)
    folder = f"{ART}/{corpus_of(dataset)}/dense/{index_owner(model)}/{split}"
    return {"model": f"{ART}/{base_of(dataset)}/dense/{model}/{split}/model", "index": f"{folder}/index-{index}.faiss",
            "ids": f"{folder}/candidates.ids"}
