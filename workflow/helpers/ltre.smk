# What workflow/rules/ltre.smk's rules call: LTRe's settings and model names (its indexes join faiss.indexes),
# where a chain starts, the fixed doc side, and the rows and files of results/ltre/.

LT = config["ltre"]
LT_DATA, LT_SPLIT = LT["dataset"], "dev"
SOURCE = r"(rand|bm25|nce|bm25\+rand|async)"
CHAIN = rf"{SOURCE}(\.{SOURCE})*"

# ltre.indexes join the generic Faiss rule's map (a name means one factory in both: towers.params_check)
for _index in LT["indexes"]:
    config["faiss"]["indexes"].setdefault(_index["name"], _index["factory"])


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


def fixed_side(w):
    """The start baseline's saved model, doc vectors, ids and index (built by the generic dense rules)."""
    folder = f"{ART}/{w.dataset}/dense/neg-{w.start}/{w.split}"
    return {"start": f"{folder}/model", "embeddings": f"{folder}/candidates.npy", "ids": f"{folder}/candidates.ids",
            "index": f"{folder}/index-{w.index}.faiss"}


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


def figure3_runs():
    names = {"ltre": "ltre", "rand": "qrand", "bm25": "qbm25", "async": "qasync"}
    return [(method, lt_steps(f"{names[method]}-{LT_START}-flat")) for method in LT["figure3"]["methods"]]
