# QuadrupletBERT Tables 1-2: every cell is the mean over seeds with its standard deviation. The values the command
# takes come from towers.plan.quadrupletbert (rows, inputs, note, command: one shape for every paper's tables).

from towers.plan import Plan, option_flags, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule quadrupletbert_table:
    input:
        profile=local(plan.profile_marker),
        evals=lambda w: plan.quadrupletbert.inputs(w.table),
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
        rows=lambda w: row_flags(plan.quadrupletbert.rows(w.table)),
        options=lambda w: option_flags(plan.quadrupletbert.command(w.table)),  # the metrics, the exact index
        profile=config["profile"],
        note=lambda w: plan.quadrupletbert.note(w.table),
    shell:
        "{TOWERS} quadrupletbert-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule quadrupletbert_phase2:
    # phase 2 stopped by validation: each Table 1 run's validation curve and the check whose weights it kept
    input:
        profile=local(plan.profile_marker),
        models=[run["model"] for run in plan.quadrupletbert.phase2_runs()],
    output:
        csv="results/phase2.csv",
        png="results/phase2.png",
        curves=[run["curve"] for run in plan.quadrupletbert.phase2_runs()],  # not directory(): its marker is no curve
    log:
        "logs/tables/quadrupletbert_phase2.log",
    conda:
        plan.software.cpu_env
    params:
        runs=row_flags(plan.quadrupletbert.phase2_runs(), "--run"),
        note=plan.quadrupletbert.phase2_note(),
    shell:
        "{TOWERS} quadrupletbert-phase2 {params.runs} --note {params.note:q} --csv {output.csv} --png {output.png}"
        " 2>&1 | tee {log}"
