# What workflow/rules/repbert.smk's rules call: first-stage runs, the cross-encoder and reranking scores, and
# the rows and files of results/repbert/.

RB = config["repbert"]
RB_DATA, RB_SPLIT = RB["dataset"], "dev"
FIRST_STAGE = {"bm25": "BM-25", "repbert": "RepBERT"}   # run name -> the paper's label


def first_stage_run(dataset, name, split):
    if name == "bm25":
        return bm25_run(dataset, split)
    return f"{ART}/{dataset}/dense/{name}/{split}/run-{RB['index']}.trec"


def reranker(w):
    """The cross-encoder: a hub checkpoint (paper profile) or one trained here on the dataset."""
    return RB["reranker"]["hub_model"] or f"{ART}/{w.dataset}/crossenc/{RB_SPLIT}/model"


RERANK_MAX = max(RB["rerank_depths"])


def rerank_scorer(w):
    """The cross-encoder scores the deepest reranking; a shallower one reuses those scores."""
    if int(w.depth) < RERANK_MAX:
        return {"scores": f"{ART}/{w.dataset}/rerank/{w.first}-d{RERANK_MAX}/{w.split}.trec"}
    return {} if RB["reranker"]["hub_model"] else {"model": reranker(w)}


# --- results/repbert/ ----------------------------------------------------------------------------

def rb_eval(model, index):
    return f"{ART}/{RB_DATA}/eval/{model}/{RB_SPLIT}/{index}.json"


def first_eval(name):
    return rb_eval(name, "lucene" if name == "bm25" else RB["index"])


def rb_rows(table):
    """The rows of a RepBERT table (fields: towers.stages.tables.REPBERT_ROWS), each with the files it reads."""
    names = list(FIRST_STAGE)
    if table == "table1":
        return [{"method": FIRST_STAGE[n], "eval": first_eval(n),
                 "latency": f"{ART}/{RB_DATA}/latency/{n}/{RB_SPLIT}.json"} for n in names]
    if table == "table2":
        return [{"method": FIRST_STAGE[n], "depth": str(d), "eval": rb_eval(f"{n}-d{d}", "rerank")}
                for n in names for d in RB["rerank_depths"]]
    rows = [fusion_row(FIRST_STAGE[n], "", "none", first_eval(n)) for n in names]
    for fusion in RB["fusion"]["methods"]:
        pairs = [(a, b) for a in names for b in names if a != b]
        if fusion != "alternate":   # symmetric: one order is enough
            pairs = [(a, b) for a, b in pairs if a < b]
        rows += [fusion_row(FIRST_STAGE[a], FIRST_STAGE[b], fusion, rb_eval(f"{fusion}-{a}+{b}", "fusion"))
                 for a, b in pairs]
        if fusion == "alternate" and RB["fusion"]["untruncated"] and table == "table4":   # its R@2000
            rows += [fusion_row(FIRST_STAGE[a], FIRST_STAGE[b], "union", rb_eval(f"union-{a}+{b}", "fusion"))
                     for a, b in pairs]
    return rows


def fusion_row(first, second, fusion, evaluation):
    return {"first": first, "second": second, "fusion": fusion, "eval": evaluation}


def rb_table_files(table):
    return [f for row in rb_rows(table) for f in row.values() if f.startswith(ART)]


RB_RECALL_DEPTHS = [int(m[2:]) for m in RB["metrics"] if m.startswith("R@") and int(m[2:]) <= RB["depth"]]
