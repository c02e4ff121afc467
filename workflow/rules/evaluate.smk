# Metrics from ir-measures on a split's test questions, one JSON per (run, split).


def run_path(wildcards):
    if wildcards.method == "bm25":
        return f"{ART}/{wildcards.dataset}/bm25/run.trec"
    init = wildcards.method.removeprefix("twotower-")
    return f"{ART}/{wildcards.dataset}/twotower/{init}/{wildcards.split}/run.trec"


rule evaluate:
    input:
        run=run_path,
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        queries=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    output:
        f"{ART}/{{dataset}}/eval/{{method}}/{{split}}.json",
    wildcard_constraints:
        method="bm25|twotower-none|twotower-mlm",
    params:
        metrics=" ".join(config["metrics"]),
    log:
        "logs/{dataset}/eval_{method}_{split}.log",
    shell:
        "{TOWERS} evaluate --run {input.run} --qrels {input.qrels} --queries {input.queries}"
        " --metrics {params.metrics} --out {output} 2>&1 | tee {log}"
