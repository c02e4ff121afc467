# Pretrained checkpoints (params: checkpoints) as models "ckpt-<name>": rule checkpoint_model writes one as
# the project's model folder, which every downstream rule (encode, index, search, mine, evaluate, tables)
# serves as it serves a trained model. It is not trained, so one folder and one corpus encoding serve every
# split of a dataset: they live under the dataset's checkpoint split ("all" for a question set, "dev" for a
# passage set; dense.smk maps the other splits there). results/zeroshot/<dataset>.csv: BM25 and
# zeroshot.checkpoints over the dataset's evaluation queries.

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


rule checkpoint_model:
    output:
        directory(f"{ART}/{{dataset}}/dense/{{model}}/{{split}}/model"),
    wildcard_constraints:
        model=CHECKPOINT_MODEL,
        split=f"all|{PASSAGE_SPLIT}",
    params:
        source=lambda w: checkpoint_cfg(w.model)["source"],
        flags=checkpoint_flags,
        label=lambda w: checkpoint_cfg(w.model)["label"],
        caveat=lambda w: " ".join(checkpoint_cfg(w.model)["caveat"].split()),
    resources:
        **GPU_JOB,
    conda:
        TORCH_ENV
    log:
        "logs/{dataset}/checkpoint_{model}_{split}.log",
    shell:
        "{TOWERS} checkpoint-model --source {params.source:q} {params.flags} --label {params.label:q}"
        " --caveat {params.caveat:q} --out {output} 2>&1 | tee {log}"


rule split_all:
    # split "all": every question is on the test side, so BM25 and checkpoints are scored over all of them
    input:
        queries=collection("{dataset}", "queries.tsv"),
    output:
        train=f"{ART}/{{dataset}}/splits/all/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/all/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/all/test.tsv",
    wildcard_constraints:
        dataset=ONLY_REQA,
    log:
        "logs/{dataset}/split_all.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} split-all --queries {input.queries} --out-dir {ART}/{wildcards.dataset}/splits/all 2>&1 | tee {log}"


ZEROSHOT_KINDS = (*QA_KINDS, *PASSAGE_KINDS, "open-domain", "graded-passages")


def zeroshot_rows(dataset):
    """The rows (model, label, caveat, eval: the evaluation JSON): BM25, then each of zeroshot.checkpoints."""
    kind = dataset_cfg(dataset)["kind"]
    if kind not in ZEROSHOT_KINDS:
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


rule zeroshot_table:
    input:
        profile=PROFILE_INPUT,
        evals=lambda w: [row["eval"] for row in zeroshot_rows(w.dataset)],
    output:
        csv="results/zeroshot/{dataset}.csv",
        json="results/zeroshot/{dataset}.json",
    params:
        rows=lambda w: row_flags(zeroshot_rows(w.dataset)),
        published=lambda w: row_flags(zeroshot_published(w.dataset), "--published"),
        split=lambda w: zeroshot_split(w.dataset),
        metrics=" ".join(map(q, ZS["metrics"])),
        profile=config["profile"],
        note=lambda w: zeroshot_note(w.dataset),
    log:
        "logs/tables/zeroshot_{dataset}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} zeroshot-table --dataset {wildcards.dataset} --split {params.split:q} --profile {params.profile:q}"
        " --note {params.note:q} --metrics {params.metrics} {params.rows} {params.published}"
        " --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


ZEROSHOT_TABLES = [f"results/zeroshot/{name}.csv" for name in ZS["datasets"]]
