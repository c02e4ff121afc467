# Chang et al. 2020's tables (results/chang2020/): reproduced values beside the paper's (data/papers/chang2020*.csv),
# with the profile. Table 1: the pre-training pairs (rule pretraining_pairs, pairs.smk); Table 2: the ReQA
# collections (rule reqa_statistics); Tables 3-6: the evaluations of Chang's models (train.smk, dense.smk).

include: "../helpers/chang2020.smk"


rule pairs_table:
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


rule reqa_table:
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


rule table_chang2020_3:
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


use rule table_chang2020_3 as table_chang2020_4 with:
    input:
        profile=PROFILE_INPUT,
        evals=[r["eval"] for r in chang_rows("table4")],
        paper=paper_values("chang2020", "table4"),
    wildcard_constraints:
        table="table4",
    params:
        **chang_table_params("table4"),


use rule table_chang2020_3 as table_chang2020_6 with:
    input:
        profile=PROFILE_INPUT,
        evals=[r["eval"] for r in chang_rows("table6")],
        paper=paper_values("chang2020", "table6"),
    wildcard_constraints:
        table="table6",
    params:
        **chang_table_params("table6"),


rule ablation_table:
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
