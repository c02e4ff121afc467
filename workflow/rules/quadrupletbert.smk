# QuadrupletBERT Tables 1-2: every cell is the mean over seeds with its standard deviation.

include: "../helpers/quadrupletbert.smk"


rule seeded_table_1:
    input:
        profile=PROFILE_INPUT,
        evals=[e for r in qb_table1_rows() for e in r["evals"]],
        paper=paper_values("quadrupletbert", "table1"),
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


use rule seeded_table_1 as seeded_table_2 with:
    input:
        profile=PROFILE_INPUT,
        evals=[e for r in qb_table2_rows() for e in r["evals"]],
        paper=paper_values("quadrupletbert", "table2"),
    wildcard_constraints:
        table="table2",
    params:
        **seeded_table_params(qb_table2_rows()),
