# What workflow/rules/zeroshot.smk's rules call: checkpoint models (ckpt-<name>) and where they live, the rows,
# split and note of a zero-shot table, and ZEROSHOT_TABLES (targets of `all`).

from towers.params_check import ZEROSHOT_KINDS

ZS = config["zeroshot"]
CHECKPOINT_MODEL = "ckpt-[a-z0-9-]+"


def is_checkpoint(model):
    return model.startswith("ckpt-")


def checkpoint_split(dataset):
    """Where a checkpoint's model folder and encodings of `dataset` live, and zeroshot's split: all the
    questions of a question set (split "all"), a passage set's evaluation queries (its one split, "dev")."""
    return PASSAGE_SPLIT if base_of(dataset) in PASSAGE_DATASETS else "all"


def checkpoint_flags(w):
    """Settings given in params override the checkpoint's own config; a passage set is read as its contents."""
    cfg = checkpoint_cfg(w.model)
    doc_text = "contents" if w.dataset in PASSAGE_DATASETS else cfg.get("doc_text", "sentence")
    out = [f"--doc-text {doc_text}"]
    for key in ("pooling", "query_length", "doc_length", "query_prefix", "doc_prefix", "normalize", "lowercase"):
        if key in cfg:
            value = int(cfg[key]) if isinstance(cfg[key], bool) else cfg[key]
            out.append(f"--{key.replace('_', '-')} {q(value)}")
    return " ".join(out)


def zeroshot_rows(dataset):
    """The rows (model, label, caveat, eval: the evaluation JSON): BM25, then each of zeroshot.checkpoints."""
    kind = dataset_cfg(dataset)["kind"]
    if kind not in ZEROSHOT_KINDS:   # zeroshot.datasets are checked with params; this, a table asked for by hand
        raise ValueError(f"datasets.{dataset} (kind {kind}) has no questions to evaluate; results/zeroshot/ takes "
                         f"a dataset of kind {', '.join(ZEROSHOT_KINDS)}")
    split = checkpoint_split(dataset)
    rows = [{"model": "bm25", "label": "BM25 (Pyserini)",
             "caveat": f"k1 {config['bm25']['k1']}, b {config['bm25']['b']}", "eval": eval_json(dataset, "bm25", split, "lucene")}]
    for name in ZS["checkpoints"]:
        cfg = checkpoint_cfg(f"ckpt-{name}")
        rows.append({"model": f"ckpt-{name}", "label": cfg["label"], "caveat": " ".join(cfg["caveat"].split()),
                     "eval": eval_json(dataset, f"ckpt-{name}", split, ZS["index"])})
    return rows


def zeroshot_split(dataset):
    """The evaluation split as the dataset names it (a BEIR folder's qrels/<split>.tsv, MS MARCO's queries.<dev>.tsv);
    "all" for a question set (every question)."""
    cfg = dataset_cfg(dataset)
    if cfg["kind"] == "beir":
        return cfg.get("eval_split", "test")
    if cfg["kind"] in ("msmarco-passage", "msmarco-tsv"):
        return cfg.get("dev", "dev.small")
    return checkpoint_split(dataset)


def zeroshot_note(dataset):
    """Nothing is trained for a zero-shot table: its note says so instead of the profile's training note."""
    return (f"zero-shot: BM25 and pretrained checkpoints evaluated as they are, nothing trained on {dataset} (each"
            f" checkpoint's caveat in its row); {metrics_note(dataset)}")


def zeroshot_published(dataset):
    """--published values (model, metric, value, source) for this dataset."""
    return [{"model": p["model"], "metric": p["metric"], "value": str(p["value"]), "source": p["source"]}
            for p in ZS["published"] if p["dataset"] == dataset]


ZEROSHOT_TABLES = [f"results/zeroshot/{name}.csv" for name in ZS["datasets"]]
