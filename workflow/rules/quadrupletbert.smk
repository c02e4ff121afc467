# QuadrupletBERT Tables 1-2: every cell is the mean over seeds with its standard deviation.

from towers.plan import Plan, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule quadrupletbert_table:
    input:
        profile=local(plan.profile_marker),
        evals=lambda w: plan.quadrupletbert.evals(w.table),
        paper=lambda w: plan.paper_values("quadrupletbert", w.table),
    output:
        csv="results/{table}.csv",
        json="results/{table}.json",
    log:
        "logs/tables/quadrupletbert_{table}.log",
    wildcard_constraints:
        table="table1|table2",
    conda:
        plan.software.cpu_env
    params:
        **plan.quadrupletbert.table_params(),  # metrics, profile, note, the paired test, the exact index
        rows=lambda w: row_flags(plan.quadrupletbert.rows(w.table)),
    shell:
        plan.quadrupletbert.table
