# Did it reproduce? The papers' claims tested on this profile's tables (results/claims.csv), and every table
# cell checked against the profile's expected values (results/check.csv; `snakemake check` fails on a FAIL).
# Both read the cells each table stage records in its meta file (towers.verdicts.cells.cell).

include: "../helpers/verdicts.smk"


rule claims:
    input:
        profile=PROFILE_INPUT,
        tables=RESULT_CSVS,
        claims=CLAIMS_FILES,
        schema="workflow/schemas/claims.schema.yaml",
    output:
        csv="results/claims.csv",
        json="results/claims.json",
    params:
        tables=named_tables(RESULT_CSVS),
        profile=config["profile"],
        test=CLAIMS["test"],
        alpha=CLAIMS["alpha"],
        claims_digest=[content_digest(path) for path in CLAIMS_FILES],   # by content
    log:
        "logs/tables/claims.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} claims --claims {input.claims} --schema {input.schema} {params.tables} --profile {params.profile:q}"
        " --test {params.test:q} --alpha {params.alpha:q} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule check_cells:
    # every cell against data/expected/<profile>.csv (or the paper policy): OK / OKish / FAIL, both ways
    input:
        profile=PROFILE_INPUT,
        tables=RESULT_CSVS,
        expected=config["check"]["expected"],
    output:
        "results/check.csv",
    params:
        tables=named_tables(RESULT_CSVS),
        expected_digest=content_digest(config["check"]["expected"]),   # tracked by content, not only by time
    log:
        "logs/tables/check.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} check {params.tables} --expected {input.expected} --csv {output} 2>&1 | tee {log}"


rule expected:
    # `make expected`: this build's cells as the profile's expected values (copied to check.expected)
    input:
        profile=PROFILE_INPUT,
        tables=RESULT_CSVS,
    output:
        "results/expected-values.csv",
    params:
        tables=named_tables(RESULT_CSVS),
        basis=config["check"].get("basis", "estimate"),
    log:
        "logs/tables/expected_values.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} expected {params.tables} --basis {params.basis:q} --out {output} 2>&1 | tee {log}"


localrules: check


rule check:
    # `snakemake check`: exits non-zero when a cell FAILed or went MISSING (results/check.csv says which)
    input:
        "results/check.csv",
    log:   # stays empty: the verdict goes to the terminal, where `snakemake check` is read
        "logs/tables/check_status.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} check-status --csv {input}"
