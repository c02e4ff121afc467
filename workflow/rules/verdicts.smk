# Did it reproduce? The papers' claims tested on this profile's tables (results/claims.csv), and every table
# cell checked against the profile's expected values (results/check.csv; `snakemake check` fails on a FAIL).
# Both read the cells each table stage records in its meta file (towers.verdicts.cells.cell).

from towers.plan import Plan, content_digest

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule claims:
    input:
        profile=local(plan.profile_marker),
        tables=plan.verdicts.result_csvs,
        claims=plan.verdicts.claims_files,
        schema="workflow/schemas/claims.schema.yaml",
        unexposed=plan.verdicts.unexposed_stats,
        questions=plan.verdicts.questions,  # the article each query was asked of (power by article)
    output:
        csv="results/claims.csv",
        json="results/claims.json",
    log:
        "logs/tables/claims.log",
    conda:
        plan.software.cpu_env
    params:
        tables=plan.verdicts.tables,
        profile=config["profile"],
        test=plan.verdicts.claims["test"],
        alpha=plan.verdicts.claims["alpha"],
        articles=plan.verdicts.articles,
        claims_digest=[content_digest(path) for path in plan.verdicts.claims_files],  # by content
        questions_digest=[content_digest(path) for path in plan.verdicts.questions],
    shell:
        "{TOWERS} claims --claims {input.claims} --schema {input.schema} {params.tables} --profile {params.profile:q}"
        " --test {params.test:q} --alpha {params.alpha:q} --unexposed {input.unexposed} {params.articles}"
        " --csv {output.csv}"
        " --json {output.json} 2>&1 | tee {log}"


rule check_cells:
    # every cell against data/expected/<profile>.csv (or the paper policy): OK / OKish / FAIL, both ways
    input:
        profile=local(plan.profile_marker),
        tables=plan.verdicts.result_csvs,
        expected=config["check"]["expected"],
    output:
        "results/check.csv",
    log:
        "logs/tables/check.log",
    conda:
        plan.software.cpu_env
    params:
        tables=plan.verdicts.tables,
        expected_digest=content_digest(config["check"]["expected"]),  # tracked by content, not only by time
    shell:
        "{TOWERS} check-cells {params.tables} --expected {input.expected} --csv {output} 2>&1 | tee {log}"


rule expected:
    # `make expected`: this build's cells as the profile's expected values (copied to check.expected)
    input:
        profile=local(plan.profile_marker),
        tables=plan.verdicts.result_csvs,
    output:
        "results/expected-values.csv",
    log:
        "logs/tables/expected_values.log",
    conda:
        plan.software.cpu_env
    params:
        tables=plan.verdicts.tables,
        basis=config["check"].get("basis", "estimate"),
    shell:
        "{TOWERS} expected {params.tables} --basis {params.basis:q} --out {output} 2>&1 | tee {log}"


localrules:
    check,


rule check:
    # `snakemake check`: exits non-zero when a cell FAILed or went MISSING (results/check.csv says which)
    input:
        "results/check.csv",
    log:  # stays empty: the verdict goes to the terminal, where `snakemake check` is read
        "logs/tables/check_status.log",
    conda:
        plan.software.cpu_env
    shell:
        "{TOWERS} check --csv {input}"
