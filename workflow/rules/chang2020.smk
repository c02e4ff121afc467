# Chang et al. 2020's tables (results/chang2020/): reproduced values beside the paper's (data/papers/chang2020*.csv),
# with the profile. Table 1: the pre-training pairs (rule pretraining_pairs, pairs.smk); Table 2: the ReQA
# collections (rule reqa_statistics); Tables 3-6: the evaluations of Chang's models (train.smk, dense.smk). Each
# rule runs the paper's one table stage (`python -m towers chang2020-table --table <name>`, laid out by
# towers.reports.chang2020); the values its command takes come from towers.plan.chang2020 (rows, inputs, note,
# command: one shape for every paper's tables).

from towers.plan import Plan, option_flags, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule pairs_table:
    input:
        profile=local(plan.profile_marker),
        stats=plan.chang2020.inputs("table1"),
        paper=plan.paper_values("chang2020", "table1"),
    output:
        csv="results/chang2020/table1.csv",
        json="results/chang2020/table1.json",
    log:
        "logs/tables/chang2020_table1.log",
    conda:
        plan.software.cpu_env
    params:
        rows=row_flags(plan.chang2020.rows("table1")),
        options=option_flags(plan.chang2020.command("table1")),
        profile=config["profile"],
        note=plan.chang2020.note("table1"),
    shell:
        "{TOWERS} chang2020-table --table table1 --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule reqa_table:
    # one row per {name, paper} of chang2020.table2.datasets: the dataset built here beside the paper's
    input:
        profile=local(plan.profile_marker),
        stats=plan.chang2020.inputs("table2"),
        paper=plan.paper_values("chang2020", "table2"),
    output:
        csv="results/chang2020/table2.csv",
        json="results/chang2020/table2.json",
    log:
        "logs/tables/chang2020_table2.log",
    conda:
        plan.software.cpu_env
    params:
        rows=row_flags(plan.chang2020.rows("table2")),
        options=option_flags(plan.chang2020.command("table2")),
        profile=config["profile"],
        note=plan.chang2020.note("table2"),
    shell:
        "{TOWERS} chang2020-table --table table2 --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule chang2020_table:
    # Table 3 (SQuAD), Table 4 (NQ) and Table 6 (open domain); the mini profile's one dataset stands in for both
    input:
        profile=local(plan.profile_marker),
        evals=lambda w: plan.chang2020.inputs(w.table),
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
        rows=lambda w: row_flags(plan.chang2020.rows(w.table)),
        options=lambda w: option_flags(plan.chang2020.command(w.table)),  # the dataset, the recall metrics
        profile=config["profile"],
        note=lambda w: plan.chang2020.note(w.table),
    shell:
        "{TOWERS} chang2020-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule ablation_table:
    input:
        profile=local(plan.profile_marker),
        evals=plan.chang2020.inputs("table5"),
        paper=plan.paper_values("chang2020", "table5"),
    output:
        csv="results/chang2020/table5.csv",
        json="results/chang2020/table5.json",
    log:
        "logs/tables/chang2020_table5.log",
    conda:
        plan.software.cpu_env
    params:
        rows=row_flags(plan.chang2020.rows("table5")),
        options=option_flags(plan.chang2020.command("table5")),  # the dataset and the metric
        profile=config["profile"],
        note=plan.chang2020.note("table5"),
    shell:
        "{TOWERS} chang2020-table --table table5 --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
