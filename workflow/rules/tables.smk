# Paper tables: reproduced values beside the paper's (data/papers/<paper>.csv), with the profile.

INIT_LABEL = {"none": "No Pretraining", "mlm": "MLM"}


def eval_json(dataset, model, split, index):
    return f"{ART}/{dataset}/eval/{model}/{split}/{index}.json"


def chang_table3_rows():
    t = config["chang2020"]["table3"]
    rows = []
    for split in t["splits"]:
        rows.append((split, "BM-25", "No Pretraining", eval_json(t["dataset"], "bm25", split, "lucene")))
        for init in t["transformer_inits"]:
            rows.append((split, "Transformer", INIT_LABEL[init],
                         eval_json(t["dataset"], f"twotower-{init}", split, t["index"])))
    return rows


rule chang2020_table3:
    input:
        evals=[r[3] for r in chang_table3_rows()],
        paper="data/papers/chang2020.csv",
    output:
        csv="results/chang2020/table3.csv",
        json="results/chang2020/table3.json",
    params:
        rows=" ".join(f"--row '{'|'.join(r)}'" for r in chang_table3_rows()),
        metrics=" ".join(m for m in config["metrics"] if m.startswith("R@")),
        profile=config["profile"],
        dataset=config["chang2020"]["table3"]["dataset"],
        note=config["profile_note"],
    log:
        "logs/tables/chang2020_table3.log",
    shell:
        "{TOWERS} table --table table3 --paper {input.paper} --profile {params.profile} --dataset {params.dataset}"
        " --note {params.note:q} --metrics {params.metrics} {params.rows} --csv {output.csv} --json {output.json}"
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
    return " ".join(f"--row '{'|'.join(r[:-1])}|{','.join(r[-1])}'" for r in rows)


def seeded_table_params(rows):
    return {"rows": row_flags(rows), "metrics": " ".join(QB["metrics"]), "profile": config["profile"],
            "note": config["profile_note"], "test": QB["significance"]["test"],
            "alpha": QB["significance"]["alpha"], "exact": QB["index"]}


SEEDED_TABLE = (
    "{TOWERS} seeded-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
    " --note {params.note:q} --metrics {params.metrics} {params.rows} --compare 'QuadrupletBERT|Three-T BERT'"
    " --test {params.test} --alpha {params.alpha} --exact-index {params.exact}"
    " --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
)


rule quadrupletbert_table1:
    input:
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
    shell:
        SEEDED_TABLE


use rule quadrupletbert_table1 as quadrupletbert_table2 with:
    input:
        evals=[e for r in qb_table2_rows() for e in r[-1]],
        paper="data/papers/quadrupletbert.csv",
    wildcard_constraints:
        table="table2",
    params:
        **seeded_table_params(qb_table2_rows()),
