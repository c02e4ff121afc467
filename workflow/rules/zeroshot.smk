# Pretrained checkpoints (params: checkpoints) as models "ckpt-<name>": rule checkpoint_model writes one as
# the project's model folder, which every downstream rule (encode, index, search, mine, evaluate, tables)
# serves as it serves a trained model. It is not trained, so one folder and one corpus encoding serve every
# split of a dataset: they live under the dataset's checkpoint split ("all" for a question set, "dev" for a
# passage set; dense.smk maps the other splits there; towers.plan.checkpoints). results/zeroshot/<dataset>.csv:
# BM25 and zeroshot.checkpoints over the dataset's evaluation queries (towers.plan.zeroshot: the tables of no
# paper, in the papers' shape).

from towers.plan import ART, PASSAGE_SPLIT, Plan, collection, option_flags, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule checkpoint_model:
    output:
        directory(f"{ART}/{{dataset}}/dense/{{model}}/{{split}}/model"),
    log:
        "logs/{dataset}/checkpoint_{model}_{split}.log",
    wildcard_constraints:
        model=plan.checkpoints.model_re,
        split=f"all|{PASSAGE_SPLIT}",
    conda:
        plan.software.torch_env
    resources:
        **plan.software.gpu_job,
    params:
        source=lambda w: plan.checkpoints.settings(w.model)["source"],
        flags=plan.checkpoints.flags,
        label=lambda w: plan.checkpoints.settings(w.model)["label"],
        caveat=lambda w: plan.checkpoints.caveat(w.model),
    shell:
        "{TOWERS} checkpoint-model --source {params.source:q} {params.flags} --label {params.label:q}"
        " --caveat {params.caveat:q} --out {output} 2>&1 | tee {log}"


rule split_all:
    # split "all": every question is on the test side, so BM25 and checkpoints are scored over all of them.
    # The shell names {ART} itself (a lint finding): its text is the rule's code, which reruns the job if changed
    input:
        queries=collection("{dataset}", "queries.tsv"),
    output:
        train=f"{ART}/{{dataset}}/splits/all/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/all/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/all/test.tsv",
    log:
        "logs/{dataset}/split_all.log",
    wildcard_constraints:
        dataset=plan.data.only_reqa,
    conda:
        plan.software.cpu_env
    shell:
        "{TOWERS} split-all --queries {input.queries} --out-dir {ART}/{wildcards.dataset}/splits/all 2>&1 | tee {log}"


rule zeroshot_table:
    input:
        profile=local(plan.profile_marker),
        evals=lambda w: plan.zeroshot.inputs(w.dataset),
    output:
        csv="results/zeroshot/{dataset}.csv",
        json="results/zeroshot/{dataset}.json",
    log:
        "logs/tables/zeroshot_{dataset}.log",
    conda:
        plan.software.cpu_env
    params:
        rows=lambda w: row_flags(plan.zeroshot.rows(w.dataset)),
        options=lambda w: option_flags(plan.zeroshot.command(w.dataset)),  # split, metrics, values published
        profile=config["profile"],
        note=lambda w: plan.zeroshot.note(w.dataset),
    shell:
        "{TOWERS} zeroshot-table --table {wildcards.dataset} --profile {params.profile:q}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
