# Paper tables: reproduced values beside the paper's (data/papers/<paper>.csv), with the profile.

INIT_LABEL = {"none": "No Pretraining", "mlm": "MLM"}


def chang_table3_rows():
    t = config["chang2020"]["table3"]
    rows = []
    for split in t["splits"]:
        rows.append((split, "BM-25", "No Pretraining", f"{ART}/{t['dataset']}/eval/bm25/{split}.json"))
        for init in t["transformer_inits"]:
            rows.append((split, "Transformer", INIT_LABEL[init], f"{ART}/{t['dataset']}/eval/twotower-{init}/{split}.json"))
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
