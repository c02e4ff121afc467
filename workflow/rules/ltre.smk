# LTRe (Zhan et al. 2020) on ltre.dataset's split "dev": negative-sampling baselines (one shared
# encoder), LTRe training of the query tower against a fixed index of a baseline's doc vectors, the
# compressed training indexes, and results/ltre/.
#
# Model names (dense/{model}/dev/model, so encode/index/search/evaluate are the generic rules):
#   neg-<chain>                a baseline: "bm25" = BM25 Neg; "bm25.async" = BM25 Neg, then ANCE's async
#                              refresh from that checkpoint (LTRe's "BM25 -> X" warm starts)
#   ltre-<start>-<index>       LTRe trained against neg-<start>'s index <index> (Algorithm 1)
#   q<source>-<start>-<index>  the same fixed doc side, negatives sampled instead (rand | bm25 | async):
#                              Figure 3's baselines

from towers.plan import ART, Plan, flags, option_flags, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS, TRAIN = plan.software.towers, plan.software.train


rule train_negatives:
    # One shared encoder (first token -> projection -> layer norm) on (relevant, negative) pairs
    input:
        unpack(plan.ltre.chain_start),
        **plan.ltre.training_data,
    output:
        model=directory(f"{ART}/{{dataset}}/dense/neg-{{chain}}/{{split}}/model"),
        steps=f"{ART}/{{dataset}}/ltre/steps/neg-{{chain}}-{{split}}.jsonl",
    log:
        "logs/{dataset}/train_neg-{chain}_{split}.log",
    wildcard_constraints:
        chain=plan.ltre.chain,
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        start=lambda w, input: input.start if "start" in input.keys() else plan.ltre.settings["start_hub_model"],
        source=lambda w: w.chain.rsplit(".", 1)[-1],
        seed=config["seed"],
        train=flags(plan.ltre.settings["negatives"]),
        towers=flags(plan.ltre.settings["towers"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/neg-{w.chain}-{w.split}",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-negatives --start {params.start:q} --negatives {params.source}"
        " --candidates {input.candidates} --qrels {input.qrels} --train {input.train} --bm25-run {input.bm25}"
        " {params.towers} {params.train} --out {output.model} --state-dir {params.state} --seed {params.seed}"
        " --threads {threads} --log {output.steps} 2>&1 | tee {log}"


rule train_ltre:
    # Only the query tower learns; every step retrieves from the fixed index (ltre) or samples
    # negatives against it (qrand, qbm25, qasync); the step log is Figure 3's data
    input:
        unpack(plan.ltre.fixed_side),
        **plan.ltre.training_data,
    output:
        model=directory(f"{ART}/{{dataset}}/dense/{{method}}-{{start}}-{{index}}/{{split}}/model"),
        steps=f"{ART}/{{dataset}}/ltre/steps/{{method}}-{{start}}-{{index}}-{{split}}.jsonl",
    log:
        "logs/{dataset}/train_{method}-{start}-{index}_{split}.log",
    wildcard_constraints:
        method="ltre|qrand|qbm25|qasync",
        start=plan.ltre.chain,
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        negatives=lambda w: "ltre" if w.method == "ltre" else w.method[1:],
        seed=config["seed"],
        train=flags(plan.ltre.settings["train"]),
        sampled=flags({k: plan.ltre.settings["negatives"][k] for k in ("negatives_per_query", "negative_depth")}),
        probe=plan.ltre.settings["figure3"]["probe_depth"],
        refresh=plan.ltre.settings["figure3"]["refresh_every"],
        nprobe=config["faiss"]["nprobe"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/{w.method}-{w.start}-{w.index}-{w.split}",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-ltre --start {input.start} --embeddings {input.embeddings}"
        " --ids {input.ids} --index {input.index} --negatives {params.negatives} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --bm25-run {input.bm25} {params.train} {params.sampled}"
        " --probe-depth {params.probe} --refresh-every {params.refresh} --nprobe {params.nprobe}"
        " --out {output.model} --state-dir {params.state} --seed {params.seed} --threads {threads}"
        " --log {output.steps} 2>&1 | tee {log}"


rule ltre_table:
    input:
        profile=local(plan.profile_marker),
        files=lambda w: plan.ltre.inputs(w.table),
        paper=lambda w: plan.paper_values("ltre", w.table),
    output:
        csv="results/ltre/{table}.csv",
        json="results/ltre/{table}.json",
    log:
        "logs/tables/ltre_{table}.log",
    wildcard_constraints:
        table="table[134]",
    conda:
        plan.software.cpu_env
    params:
        rows=lambda w: row_flags(plan.ltre.rows(w.table)),
        options=lambda w: option_flags(plan.ltre.command(w.table)),
        profile=config["profile"],
        note=lambda w: plan.ltre.note(w.table),
    shell:
        "{TOWERS} ltre-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule ltre_figure:
    input:
        profile=local(plan.profile_marker),
        steps=[path for _, path in plan.ltre.figure3_runs()],
    output:
        csv="results/ltre/figure3.csv",
        png="results/ltre/figure3.png",
    log:
        "logs/tables/ltre_figure3.log",
    conda:
        plan.software.cpu_env
    params:
        runs=row_flags(({"method": m, "steps": p} for m, p in plan.ltre.figure3_runs()), "--run"),
        probe=plan.ltre.settings["figure3"]["probe_depth"],
        note=plan.ltre.figure_note,
    shell:
        "{TOWERS} ltre-figure {params.runs} --probe-depth {params.probe} --note {params.note:q}"
        " --csv {output.csv} --png {output.png} 2>&1 | tee {log}"
