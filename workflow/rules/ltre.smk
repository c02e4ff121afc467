# LTRe (Zhan et al. 2020) on ltre.dataset's split "dev": negative-sampling baselines (one shared
# encoder), LTRe training of the query tower against a fixed index of a baseline's doc vectors, the
# compressed training indexes, and results/ltre/.
#
# Model names (dense/{model}/dev/model, so encode/index/search/evaluate are the generic rules):
#   neg-<chain>                a baseline: "bm25" = BM25 Neg; "bm25.async" = BM25 Neg, then ANCE's async
#                              refresh from that checkpoint (LTRe's "BM25 -> X" warm starts)
#   ltre-<start>-<index>       LTRe trained against neg-<start>'s index <index> (Algorithm 1)
#   q<source>-<start>-<index>  the same fixed doc side, negatives sampled instead (rand | bm25 | async):
#                              Figure 3's baselines

LT = config["ltre"]
LT_DATA, LT_SPLIT = LT["dataset"], "dev"
SOURCE = r"(rand|bm25|nce|bm25\+rand|async)"
CHAIN = SOURCE + r"(\." + SOURCE + r")*"

for _name, _factory in ((i["name"], i["factory"]) for i in LT["indexes"]):   # join the generic faiss rule's map
    if config["faiss"]["indexes"].setdefault(_name, _factory) != _factory:
        raise ValueError(f"index name {_name!r} means {config['faiss']['indexes'][_name]!r} in faiss.indexes "
                         f"but {_factory!r} in ltre.indexes")


def ltre_start(w):
    """A chain's start: the MLM encoder (or ltre.start_hub_model) for one source, else the chain's prefix model."""
    if "." in w.chain:
        return {"start": f"{ART}/{w.dataset}/dense/neg-{w.chain.rsplit('.', 1)[0]}/{w.split}/model"}
    return {} if LT["start_hub_model"] else {"start": mlm_encoder(w)}


LTRE_DATA = {
    "candidates": collection("{dataset}", "candidates.jsonl"),
    "qrels": collection("{dataset}", "qrels.txt"),
    "train": f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
    # BM25 Neg's pools (negative_depth) and Figure 3's BM25 overlap (probe_depth)
    "bm25": lambda w: bm25_run(w.dataset, w.split, "train",
                               max(LT["negatives"]["negative_depth"], LT["figure3"]["probe_depth"])),
}


rule train_negatives:
    # One shared encoder (first token -> projection -> layer norm) on (relevant, negative) pairs
    input:
        unpack(ltre_start),
        **LTRE_DATA,
    output:
        model=directory(f"{ART}/{{dataset}}/dense/neg-{{chain}}/{{split}}/model"),
        steps=f"{ART}/{{dataset}}/ltre/steps/neg-{{chain}}-{{split}}.jsonl",
    wildcard_constraints:
        chain=CHAIN,
    params:
        start=lambda w, input: input.start if "start" in input.keys() else LT["start_hub_model"],
        source=lambda w: w.chain.rsplit(".", 1)[-1],
        seed=config["seed"],
        train=flags(LT["negatives"]),
        towers=flags(LT["towers"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/neg-{w.chain}-{w.split}",
    threads: config["torch_threads"]
    resources:
        **TRAIN_JOB,
    conda:
        TRAIN_ENV
    log:
        "logs/{dataset}/train_neg-{chain}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-negatives --start {params.start:q} --negatives {params.source}"
        " --candidates {input.candidates} --qrels {input.qrels} --train {input.train} --bm25-run {input.bm25}"
        " {params.towers} {params.train} --out {output.model} --state-dir {params.state} --seed {params.seed}"
        " --threads {threads} --log {output.steps} 2>&1 | tee {log}"


def fixed_side(w):
    """The start baseline's saved model, doc vectors, ids and index (built by the generic dense rules)."""
    folder = f"{ART}/{w.dataset}/dense/neg-{w.start}/{w.split}"
    return {"start": f"{folder}/model", "embeddings": f"{folder}/candidates.npy", "ids": f"{folder}/candidates.ids",
            "index": f"{folder}/index-{w.index}.faiss"}


rule train_ltre:
    # Only the query tower learns; every step retrieves from the fixed index (ltre) or samples
    # negatives against it (qrand, qbm25, qasync); the step log is Figure 3's data
    input:
        unpack(fixed_side),
        **LTRE_DATA,
    output:
        model=directory(f"{ART}/{{dataset}}/dense/{{method}}-{{start}}-{{index}}/{{split}}/model"),
        steps=f"{ART}/{{dataset}}/ltre/steps/{{method}}-{{start}}-{{index}}-{{split}}.jsonl",
    wildcard_constraints:
        method="ltre|qrand|qbm25|qasync",
        start=CHAIN,
    params:
        negatives=lambda w: "ltre" if w.method == "ltre" else w.method[1:],
        seed=config["seed"],
        train=flags(LT["train"]),
        sampled=flags({k: LT["negatives"][k] for k in ("negatives_per_query", "negative_depth")}),
        probe=LT["figure3"]["probe_depth"],
        refresh=LT["figure3"]["refresh_every"],
        nprobe=config["faiss"]["nprobe"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/{w.method}-{w.start}-{w.index}-{w.split}",
    threads: config["torch_threads"]
    resources:
        **TRAIN_JOB,
    conda:
        TRAIN_ENV
    log:
        "logs/{dataset}/train_{method}-{start}-{index}_{split}.log",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-ltre --start {input.start} --embeddings {input.embeddings}"
        " --ids {input.ids} --index {input.index} --negatives {params.negatives} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --bm25-run {input.bm25} {params.train} {params.sampled}"
        " --probe-depth {params.probe} --refresh-every {params.refresh} --nprobe {params.nprobe}"
        " --out {output.model} --state-dir {params.state} --seed {params.seed} --threads {threads}"
        " --log {output.steps} 2>&1 | tee {log}"


# --- results/ltre/ ---------------------------------------------------------------------------------

def lt_eval(model, index="flat", dataset=LT_DATA):
    return f"{ART}/{dataset}/eval/{model}/{LT_SPLIT}/{index}.json"


def lt_graded(model, index="flat"):
    """The model's evaluation on ltre.graded_dataset (nDCG@10's queries), or "" when there is none."""
    return lt_eval(model, index, LT["graded_dataset"]) if LT["graded_dataset"] else ""


def lt_steps(model):
    return f"{ART}/{LT_DATA}/ltre/steps/{model}-{LT_SPLIT}.jsonl"


LT_START = LT["start"]
LT_DATA_NOTE = (f"LTRe's data: {LT_DATA}, split dev, {LT['towers']['embedding_dim']}-d towers "
                f"(the paper's: MS MARCO passage dev and TREC DL 2019, RoBERTa-base, 768-d)")
LT_NOTE = f"{config['profile_note']}; {LT_DATA_NOTE}"
LT_TABLE_NOTE = f"{table_note(LT_DATA)}; {LT_DATA_NOTE}"   # the tables also say how their metrics are computed
LT_INDEXES = [i["name"] for i in LT["indexes"]]


def lt_rows(table):
    """The rows of an LTRe table (fields: towers.stages.tables.LTRE_ROWS): a label, then the files it reads."""
    if table == "table1":
        rows = [lt_table1_row("BM25", "bm25", "lucene")] + [lt_table1_row(c, f"neg-{c}") for c in LT["baselines"]]
        return rows + [lt_table1_row(f"ltre:{LT_START}", f"ltre-{LT_START}-flat")]
    if table == "table3":
        # the start (BM25 Neg) trained on BM25's negatives: the paper lists the BM25 index and its quality
        rows = [{"key": f"start:{LT_START}", "eval": lt_eval(f"neg-{LT_START}"), "steps": lt_steps(f"neg-{LT_START}"),
                 "index": f"{ART}/{LT_DATA}/bm25/index", "before": lt_eval("bm25", "lucene")}]
        if f"{LT_START}.async" in LT["baselines"]:
            chain = f"{LT_START}.async"
            rows.append({"key": f"async:{chain}", "eval": lt_eval(f"neg-{chain}"), "steps": lt_steps(f"neg-{chain}"),
                         "index": f"{ART}/{LT_DATA}/dense/neg-{chain}/{LT_SPLIT}/index-flat.faiss", "before": ""})
        for index in LT_INDEXES:
            model = f"ltre-{LT_START}-{index}"
            rows.append({"key": f"ltre:{index}", "eval": lt_eval(model), "steps": lt_steps(model),
                         "index": f"{ART}/{LT_DATA}/dense/neg-{LT_START}/{LT_SPLIT}/index-{index}.faiss",
                         "before": lt_eval(f"neg-{LT_START}", index)})
        return rows
    # table4: each training index x each evaluation index
    return [{"train": train, "test": test, "eval": lt_eval(f"ltre-{LT_START}-{train}", test),
             "graded": lt_graded(f"ltre-{LT_START}-{train}", test)} for train in LT_INDEXES for test in LT_INDEXES]


def lt_table1_row(key, model, index="flat"):
    return {"key": key, "eval": lt_eval(model, index), "graded": lt_graded(model, index)}


def lt_files(table):
    return [f for row in lt_rows(table) for k, f in row.items() if k not in ("key", "train", "test") and f]


rule ltre_table:
    input:
        profile=PROFILE_INPUT,
        files=lambda w: lt_files(w.table),
        paper=lambda w: paper_values("ltre", w.table),
    output:
        csv="results/ltre/{table}.csv",
        json="results/ltre/{table}.json",
    wildcard_constraints:
        table="table[134]",
    params:
        rows=lambda w: row_flags(lt_rows(w.table)),
        profile=config["profile"],
        note=LT_TABLE_NOTE,
    log:
        "logs/tables/ltre_{table}.log",
    conda:
        CPU_ENV
    shell:
        paper_table("ltre-table")


def figure3_runs():
    names = {"ltre": "ltre", "rand": "qrand", "bm25": "qbm25", "async": "qasync"}
    return [(method, lt_steps(f"{names[method]}-{LT_START}-flat")) for method in LT["figure3"]["methods"]]


rule ltre_figure3:
    input:
        profile=PROFILE_INPUT,
        steps=[path for _, path in figure3_runs()],
    output:
        csv="results/ltre/figure3.csv",
        png="results/ltre/figure3.png",
    params:
        runs=row_flags(({"method": m, "steps": p} for m, p in figure3_runs()), "--run"),
        probe=LT["figure3"]["probe_depth"],
        note=LT_NOTE,
    log:
        "logs/tables/ltre_figure3.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} ltre-figure {params.runs} --probe-depth {params.probe} --note {params.note:q}"
        " --csv {output.csv} --png {output.png} 2>&1 | tee {log}"

