# Paper tables: reproduced values beside the paper's (data/papers/<paper>.csv), with the profile.

LABEL = {"none": "No Pretraining", "mlm": "MLM", "ict": "ICT", "bfs": "BFS", "wlp": "WLP", "ict+bfs+wlp": "ICT+BFS+WLP"}


def eval_json(dataset, model, split, index):
    return f"{ART}/{dataset}/eval/{model}/{split}/{index}.json"


def chang_rows(table):
    """(split, encoder, pre-training, evaluation JSON) for Chang et al.'s Tables 3, 4 (main results)
    and 6 (open domain: the candidates enlarged, the models of the dataset it enlarges)."""
    t = CHANG[table]
    if table == "table6":
        encoders = [("Transformer", p) for p in t["pretraining"]]
    else:
        encoders = [("BoW-MLP", "none"), ("BoW-MLP", "ict+bfs+wlp"),
                    ("Transformer", "none"), ("Transformer", "mlm"), ("Transformer", "ict+bfs+wlp")]
    rows = []
    for split in t["splits"]:
        rows.append((split, "BM-25", LABEL["none"], eval_json(t["dataset"], "bm25", split, "lucene")))
        for encoder, pretraining in encoders:
            if encoder == "BoW-MLP":
                model = chang_model("bowmlp", pretraining, CHANG["bow_mlp"]["embedding_dim"])
            else:
                model = chang_model("transformer", pretraining, config["two_tower"]["embedding_dim"])
            rows.append((split, encoder, LABEL[pretraining], eval_json(t["dataset"], model, split, t["index"])))
        for name in t.get("checkpoints", []):   # pretrained checkpoints, evaluated as they are (zeroshot.smk)
            rows.append((split, checkpoint_cfg(f"ckpt-{name}")["label"], CHECKPOINT_ROW,
                         eval_json(t["dataset"], f"ckpt-{name}", split, t["index"])))
    return rows


CHECKPOINT_ROW = "retrieval-trained checkpoint (not a BERT init)"


def chang_table_params(table):
    return {"rows": " ".join(f"--row {q('|'.join(r))}" for r in chang_rows(table)),
            "metrics": " ".join(q(m) for m in config["metrics"] if m.startswith("R@")),
            "profile": config["profile"], "dataset": CHANG[table]["dataset"],
            "note": table_note(CHANG[table]["dataset"])}


CHANG_TABLE = (
    "{TOWERS} table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
    " --dataset {params.dataset} --note {params.note:q} --metrics {params.metrics} {params.rows}"
    " --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
)


rule chang2020_table3:
    # Table 3 (SQuAD) and Table 4 (NQ); the mini profile's one dataset stands in for both.
    input:
        profile=PROFILE_INPUT,
        evals=[r[3] for r in chang_rows("table3")],
        paper="data/papers/chang2020.csv",
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
        evals=[r[3] for r in chang_rows("table4")],
        paper="data/papers/chang2020.csv",
    wildcard_constraints:
        table="table4",
    params:
        **chang_table_params("table4"),


use rule chang2020_table3 as chang2020_table6 with:
    input:
        profile=PROFILE_INPUT,
        evals=[r[3] for r in chang_rows("table6")],
        paper="data/papers/chang2020.csv",
    wildcard_constraints:
        table="table6",
    params:
        **chang_table_params("table6"),


def ablation_rows():
    """Table 5: (index, layers, pre-training, embedding dim, split, evaluation JSON)."""
    t = CHANG["table5"]
    return [(str(index), str(layers), LABEL[pretraining], str(dim), split,
             eval_json(t["dataset"], chang_model("transformer", pretraining, dim, layers), split, t["index"]))
            for index, layers, pretraining, dim in t["rows"] for split in t["splits"]]


rule chang2020_table5:
    input:
        profile=PROFILE_INPUT,
        evals=[r[-1] for r in ablation_rows()],
        paper="data/papers/chang2020_table5.csv",
    output:
        csv="results/chang2020/table5.csv",
        json="results/chang2020/table5.json",
    params:
        rows=" ".join(f"--row {q('|'.join(r))}" for r in ablation_rows()),
        metric=CHANG["table5"]["metric"],
        profile=config["profile"],
        dataset=CHANG["table5"]["dataset"],
        note=table_note(CHANG["table5"]["dataset"]),
    log:
        "logs/tables/chang2020_table5.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} ablation-table --paper {input.paper} --profile {params.profile} --dataset {params.dataset}"
        " --note {params.note:q} --metric {params.metric} {params.rows} --csv {output.csv} --json {output.json}"
        " 2>&1 | tee {log}"


# QuadrupletBERT Tables 1-2: every cell is the mean over seeds with its standard deviation.
QB = config["quadrupletbert"]


def qb_model(kind, margin, seed):
    return {"Three-T Emb": f"threet-emb-m{QB['three_t_emb']['margin']}-s{seed}",
            "Three-T BERT": f"threet-bert-m{margin}-s{seed}",
            "QuadrupletBERT": f"quadbert-m{margin}-s{seed}"}[kind]


def qb_row(dataset, split, label, margin, index):
    evals = [eval_json(dataset["name"], qb_model(label, margin, seed), split, index) for seed in QB["seeds"]]
    shown_margin = QB["three_t_emb"]["margin"] if label == "Three-T Emb" else margin
    return (dataset["name"], dataset["paper"], split, label, str(shown_margin), index, evals)


def qb_table1_rows():
    rows = []
    for dataset in QB["datasets"]:
        for split in QB["splits"]:
            rows += [qb_row(dataset, split, label, dataset["margin"], QB["index"])
                     for label in ("Three-T Emb", "Three-T BERT", "QuadrupletBERT")]
            if QB["quantized_index"]:
                rows.append(qb_row(dataset, split, "QuadrupletBERT", dataset["margin"], QB["quantized_index"]))
    return rows


def qb_table2_rows():
    return [qb_row(dataset, split, "QuadrupletBERT", margin, QB["index"])
            for dataset in QB["datasets"] for split in QB["splits"] for margin in QB["margins"]]


def row_flags(rows):
    return " ".join(f"--row {q('|'.join(r[:-1]) + '|' + ','.join(r[-1]))}" for r in rows)


def seeded_table_params(rows):
    return {"rows": row_flags(rows), "metrics": " ".join(map(q, QB["metrics"])), "profile": config["profile"],
            "note": table_note(QB["datasets"][0]["name"], qb_model("QuadrupletBERT", 0, 0)), "test": QB["significance"]["test"],
            "alpha": QB["significance"]["alpha"], "exact": QB["index"]}


SEEDED_TABLE = (
    "{TOWERS} seeded-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
    " --note {params.note:q} --metrics {params.metrics} {params.rows} --compare 'QuadrupletBERT|Three-T BERT'"
    " --test {params.test} --alpha {params.alpha} --exact-index {params.exact}"
    " --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
)


rule quadrupletbert_table1:
    input:
        profile=PROFILE_INPUT,
        evals=[e for r in qb_table1_rows() for e in r[-1]],
        paper="data/papers/quadrupletbert.csv",
    output:
        csv="results/{table}.csv",
        json="results/{table}.json",
    wildcard_constraints:
        table="table1",
    params:
        **seeded_table_params(qb_table1_rows()),
    log:
        "logs/tables/quadrupletbert_{table}.log",
    conda:
        CPU_ENV
    shell:
        SEEDED_TABLE


use rule quadrupletbert_table1 as quadrupletbert_table2 with:
    input:
        profile=PROFILE_INPUT,
        evals=[e for r in qb_table2_rows() for e in r[-1]],
        paper="data/papers/quadrupletbert.csv",
    wildcard_constraints:
        table="table2",
    params:
        **seeded_table_params(qb_table2_rows()),
