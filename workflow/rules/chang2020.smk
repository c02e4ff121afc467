# Chang et al. 2020's tables (results/chang2020/): reproduced values beside the paper's (data/papers/chang2020*.csv),
# with the profile. Table 1: the pre-training pairs (rule pretraining_pairs, pairs.smk); Table 2: the ReQA
# collections (rule reqa_statistics); Tables 3-6: the evaluations of Chang's models (train.smk, dense.smk). Each
# rule is named after its stage (chang2020_table runs `python -m towers chang2020-table`).

from towers.plan import Plan, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule pairs_table:
    input:
        profile=local(plan.profile_marker),
        stats=plan.chang2020.pair_stats(),
        paper=plan.paper_values("chang2020", "table1"),
    output:
        csv="results/chang2020/table1.csv",
        json="results/chang2020/table1.json",
    log:
        "logs/tables/chang2020_table1.log",
    conda:
        plan.software.cpu_env
    params:
        profile=config["profile"],
        note=config["profile_note"],
    shell:
        plan.chang2020.pairs_table


rule reqa_table:
    # one row per {name, paper} of chang2020.table2.datasets: the dataset built here beside the paper's
    input:
        profile=local(plan.profile_marker),
        stats=plan.chang2020.reqa_stats(),
        paper=plan.paper_values("chang2020", "table2"),
    output:
        csv="results/chang2020/table2.csv",
        json="results/chang2020/table2.json",
    log:
        "logs/tables/chang2020_table2.log",
    conda:
        plan.software.cpu_env
    params:
        profile=config["profile"],
        note=config["profile_note"],
        rows=row_flags(plan.chang2020.reqa_rows()),
    shell:
        plan.chang2020.reqa_table


rule chang2020_table:
    # Table 3 (SQuAD), Table 4 (NQ) and Table 6 (open domain); the mini profile's one dataset stands in for both
    input:
        profile=local(plan.profile_marker),
        evals=lambda w: plan.chang2020.evals(w.table),
        paper=lambda w: plan.paper_values("chang2020", w.table),
    output:
        csv="results/chang2020/{table}.csv",
        json="results/chang2020/{table}.json",
    log:
        "logs/tables/chang2020_{table}.log",
    wildcard_constraints:
        table="table3|table4|table6",
    conda:
        plan.software.cpu_env
    params:
        rows=lambda w: row_flags(plan.chang2020.chang_rows(w.table)),
        metrics=plan.chang2020.recall_metrics(),
        profile=config["profile"],
        dataset=lambda w: plan.chang2020.chang[w.table]["dataset"],
        note=lambda w: plan.chang2020.table_note(w.table),
    shell:
        plan.chang2020.table


rule ablation_table:
    input:
        profile=local(plan.profile_marker),
        evals=[r["eval"] for r in plan.chang2020.ablation_rows()],
        paper=plan.paper_values("chang2020", "table5"),
    output:
        csv="results/chang2020/table5.csv",
        json="results/chang2020/table5.json",
    log:
        "logs/tables/chang2020_table5.log",
    conda:
        plan.software.cpu_env
    params:
        rows=row_flags(plan.chang2020.ablation_rows()),
        metric=plan.chang2020.chang["table5"]["metric"],
        profile=config["profile"],
        dataset=plan.chang2020.chang["table5"]["dataset"],
        note=plan.evaluation.table_note(plan.chang2020.chang["table5"]["dataset"]),
    shell:
        plan.chang2020.ablation_table
