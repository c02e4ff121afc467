# What workflow/rules/quadrupletbert.smk's rules call: QuadrupletBERT's model names and its tables' rows.

QB = config["quadrupletbert"]


def qb_model(kind, margin, seed):
    return {"Three-T Emb": f"threet-emb-m{QB['three_t_emb']['margin']}-s{seed}",
            "Three-T BERT": f"threet-bert-m{margin}-s{seed}",
            "QuadrupletBERT": f"quadbert-m{margin}-s{seed}"}[kind]


def qb_row(dataset, split, label, margin, index):
    evals = [eval_json(dataset["name"], qb_model(label, margin, seed), split, index) for seed in QB["seeds"]]
    shown_margin = QB["three_t_emb"]["margin"] if label == "Three-T Emb" else margin
    return {"dataset": dataset["name"], "paper_dataset": dataset["paper"], "split": split, "model": label,
            "margin": str(shown_margin), "index": index, "evals": evals}   # evals: every seed's evaluation


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


def seeded_table_params(rows):
    return {"rows": row_flags(rows),
            "metrics": " ".join(map(q, QB["metrics"])), "profile": config["profile"],
            "note": table_note(QB["datasets"][0]["name"], qb_model("QuadrupletBERT", 0, 0)), "test": QB["significance"]["test"],
            "alpha": QB["significance"]["alpha"], "exact": QB["index"]}


SEEDED_TABLE = paper_table("seeded-table", "--metrics {params.metrics} {params.rows} --compare QuadrupletBERT 'Three-T BERT'"
                                           " --test {params.test} --alpha {params.alpha} --exact-index {params.exact}")
