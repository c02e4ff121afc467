# Chang et al. 2020's tables (results/chang2020/): reproduced values beside the paper's (data/papers/chang2020*.csv),
# with the profile. Table 1: the pre-training pairs (rule pretraining_pairs, pairs.smk); Table 2: the ReQA
# collections (rule reqa_statistics); Tables 3-6: the evaluations of Chang's models (train.smk, dense.smk).

rule chang2020_table1:
    input:
        profile=PROFILE_INPUT,
        stats=[f"{ART}/{config['chang2020']['table1']['dataset']}/pairs/{task}.stats.json" for task in ("ict", "bfs", "wlp")],
        paper=paper_values("chang2020", "table1"),
    output:
        csv="results/chang2020/table1.csv",
        json="results/chang2020/table1.json",
    params:
        profile=config["profile"],
        note=config["profile_note"],
    log:
        "logs/tables/chang2020_table1.log",
    conda:
        CPU_ENV
    shell:
        paper_table("pairs-table", "--stats {input.stats}", table=False)


rule chang2020_table2:
    # one row per {name, paper} of chang2020.table2.datasets: the dataset built here beside the paper's
    input:
        profile=PROFILE_INPUT,
        stats=[collection(d["name"], "table2-stats.json") for d in config["chang2020"]["table2"]["datasets"]],
        paper=paper_values("chang2020", "table2"),
    output:
        csv="results/chang2020/table2.csv",
        json="results/chang2020/table2.json",
    params:
        profile=config["profile"],
        note=config["profile_note"],
        rows=row_flags({"dataset": d["name"], "paper_dataset": d["paper"],
                        "stats": collection(d["name"], "table2-stats.json")} for d in config["chang2020"]["table2"]["datasets"]),
    log:
        "logs/tables/chang2020_table2.log",
    conda:
        CPU_ENV
    shell:
        paper_table("reqa-table", table=False)


LABEL = {"none": "No Pretraining", "mlm": "MLM", "ict": "ICT", "bfs": "BFS", "wlp": "WLP", "ict+bfs+wlp": "ICT+BFS+WLP"}


def chang_rows(table):
    """The rows (split, encoder, pretraining, eval: the evaluation JSON) of Chang et al.'s Tables 3, 4 (main
    results) and 6 (open domain: the candidates enlarged, the models of the dataset it enlarges)."""
    t = CHANG[table]
    if table == "table6":
        encoders = [("Transformer", p) for p in t["pretraining"]]
    else:
        encoders = [("BoW-MLP", "none"), ("BoW-MLP", "ict+bfs+wlp"),
                    ("Transformer", "none"), ("Transformer", "mlm"), ("Transformer", "ict+bfs+wlp")]
    rows = []
    for split in t["splits"]:
        rows.append(chang_row(split, "BM-25", LABEL["none"], eval_json(t["dataset"], "bm25", split, "lucene")))
        for encoder, pretraining in encoders:
            if encoder == "BoW-MLP":
                model = chang_model("bowmlp", pretraining, CHANG["bow_mlp"]["embedding_dim"])
            else:
                model = chang_model("transformer", pretraining, config["two_tower"]["embedding_dim"])
            rows.append(chang_row(split, encoder, LABEL[pretraining], eval_json(t["dataset"], model, split, t["index"])))
        for name in t.get("checkpoints", []):   # pretrained checkpoints, evaluated as they are (zeroshot.smk)
            rows.append(chang_row(split, checkpoint_cfg(f"ckpt-{name}")["label"], CHECKPOINT_ROW,
                                  eval_json(t["dataset"], f"ckpt-{name}", split, t["index"])))
    return rows


def chang_row(split, encoder, pretraining, evaluation):
    return {"split": split, "encoder": encoder, "pretraining": pretraining, "eval": evaluation}


CHECKPOINT_ROW = "retrieval-trained checkpoint (not a BERT init)"


def chang_table_params(table):
    return {"rows": row_flags(chang_rows(table)),
            "metrics": " ".join(q(m) for m in config["metrics"] if m.startswith("R@")),
            "profile": config["profile"], "dataset": CHANG[table]["dataset"],
            "note": table_note(CHANG[table]["dataset"])}


CHANG_TABLE = paper_table("table", "--metrics {params.metrics} {params.rows}", " --dataset {params.dataset}")


rule chang2020_table3:
    # Table 3 (SQuAD) and Table 4 (NQ); the mini profile's one dataset stands in for both.
    input:
        profile=PROFILE_INPUT,
        evals=[r["eval"] for r in chang_rows("table3")],
        paper=paper_values("chang2020", "table3"),
    output:
        csv="results/chang2020/{table}.csv",
        json="results/chang2020/{table}.json",
    wildcard_constraints:
        table="table3",
    params:
        **chang_table_params("table3"),
    log:
        "logs/tables/chang2020_{table}.log",
    conda:
        CPU_ENV
    shell:
        CHANG_TABLE


use rule chang2020_table3 as chang2020_table4 with:
    input:
        profile=PROFILE_INPUT,
        evals=[r["eval"] for r in chang_rows("table4")],
        paper=paper_values("chang2020", "table4"),
    wildcard_constraints:
        table="table4",
    params:
        **chang_table_params("table4"),


use rule chang2020_table3 as chang2020_table6 with:
    input:
        profile=PROFILE_INPUT,
        evals=[r["eval"] for r in chang_rows("table6")],
        paper=paper_values("chang2020", "table6"),
    wildcard_constraints:
        table="table6",
    params:
        **chang_table_params("table6"),


def ablation_rows():
    """Table 5's rows: index, layers, pretraining, emb_dim, split and eval (the evaluation JSON)."""
    t = CHANG["table5"]
    return [{"index": str(index), "layers": str(layers), "pretraining": LABEL[pretraining], "emb_dim": str(dim),
             "split": split,
             "eval": eval_json(t["dataset"], chang_model("transformer", pretraining, dim, layers), split, t["index"])}
            for index, layers, pretraining, dim in t["rows"] for split in t["splits"]]


rule chang2020_table5:
    input:
        profile=PROFILE_INPUT,
        evals=[r["eval"] for r in ablation_rows()],
        paper=paper_values("chang2020", "table5"),
    output:
        csv="results/chang2020/table5.csv",
        json="results/chang2020/table5.json",
    params:
        rows=row_flags(ablation_rows()),
        metric=CHANG["table5"]["metric"],
        profile=config["profile"],
        dataset=CHANG["table5"]["dataset"],
        note=table_note(CHANG["table5"]["dataset"]),
    log:
        "logs/tables/chang2020_table5.log",
    conda:
        CPU_ENV
    shell:
        paper_table("ablation-table", "--metric {params.metric} {params.rows}", " --dataset {params.dataset}",
                    table=False)
