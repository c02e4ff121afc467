# QuadrupletBERT Tables 1-2: every cell is the mean over seeds with its standard deviation.

from towers.plan import Plan

plan = Plan.of(workflow)   # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule seeded_table_1:
    input:
        profile=local(plan.profile_marker),
        evals=[e for r in plan.quadrupletbert.qb_table1_rows() for e in r["evals"]],
        paper=plan.paper_values("quadrupletbert", "table1"),
    output:
        csv="results/{table}.csv",
        json="results/{table}.json",
    wildcard_constraints:
        table="table1",
    params:
        **plan.quadrupletbert.seeded_table_params(plan.quadrupletbert.qb_table1_rows()),
    log:
        "logs/tables/quadrupletbert_{table}.log",
    conda:
        plan.software.cpu_env
    shell:
        plan.quadrupletbert.table


use rule seeded_table_1 as seeded_table_2 with:
    input:
        profile=local(plan.profile_marker),
        evals=[e for r in plan.quadrupletbert.qb_table2_rows() for e in r["evals"]],
        paper=plan.paper_values("quadrupletbert", "table2"),
    wildcard_constraints:
        table="table2",
    params:
        **plan.quadrupletbert.seeded_table_params(plan.quadrupletbert.qb_table2_rows()),
