# RepBERT (Zhan et al. 2020) on a passage dataset (repbert.dataset, split "dev"): the shared-encoder
# model, first-stage runs (BM25, RepBERT) to repbert.depth, their latency, a cross-encoder reranking
# their top-k at each depth, run fusion, the consistency factor against BM25, and results/repbert/.

from towers.plan import ART, Plan, collection, flags, option_flags, row_flags

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS, TRAIN = plan.software.towers, plan.software.train


rule train_repbert:
    # One shared BERT, token embeddings averaged, segment 0 for queries and 1 for passages, inner product;
    # eq. 4 over in-batch negatives (an in-batch passage the qrels call relevant counts as positive).
    input:
        start=plan.train.mlm_encoder,  # paper profile: bert-base-uncased (encoder.hub_model)
        candidates=collection("{dataset}", "candidates.jsonl"),
        qrels=collection("{dataset}", "qrels.txt"),
        train=f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{{split}}/valid.tsv",
    output:
        directory(f"{ART}/{{dataset}}/dense/repbert/{{split}}/model"),
    log:
        "logs/{dataset}/train_repbert_{split}.log",
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        seed=config["seed"],
        train=flags(plan.repbert.settings["train"]),
        lengths=flags(plan.repbert.settings["towers"]),
        state=lambda w: f"{ART}/{w.dataset}/train-state/repbert-{w.split}",
        steps_log=lambda w: f"logs/{w.dataset}/train_repbert_{w.split}.steps.jsonl",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-repbert --start {input.start} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --out {output}"
        " --state-dir {params.state} --seed {params.seed} {params.train} {params.lengths}"
        " --log {params.steps_log} 2>&1 | tee {log}"


rule latency:
    # ms per dev query, one at a time (RepBERT Table 1), on the machine that runs this job
    input:
        index=plan.repbert.latency_index,
        model=plan.repbert.latency_model,
        queries=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    output:
        f"{ART}/{{dataset}}/latency/{{name}}/{{split}}.json",
    log:
        "logs/{dataset}/latency_{name}_{split}.log",
    conda:
        plan.software.cpu_env
    # holds latency_cores (nothing runs beside it on a small machine), times on one thread
    threads: plan.repbert.settings.get("latency_cores", 1)
    params:
        method=lambda w: "bm25" if w.name == "bm25" else "dense",
        model=plan.repbert.latency_model_flag,
        depth=plan.repbert.settings["depth"],
        limit=plan.repbert.settings["latency_queries"],
        k1=config["bm25"]["k1"],
        b=config["bm25"]["b"],
        nprobe=config["faiss"]["nprobe"],
    shell:
        "{TOWERS} latency --method {params.method} --index {input.index} {params.model} --queries {input.queries}"
        " --depth {params.depth} --limit {params.limit} --k1 {params.k1} --b {params.b} --nprobe {params.nprobe}"
        " --threads 1 --out {output} 2>&1 | tee {log}"


rule train_cross_encoder:
    # Mini profile only: BERT over (query, passage), relevant passages against negatives from BM25's
    # top-k of each training query (as MS MARCO's train triples pair qrels with BM25's top 1000).
    input:
        start=plan.train.mlm_encoder,
        candidates=collection("{dataset}", "candidates.jsonl"),
        qrels=collection("{dataset}", "qrels.txt"),
        train=f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{{split}}/valid.tsv",
        run=lambda w: plan.bm25.bm25_run(
            w.dataset, w.split, "train+valid", plan.repbert.settings["reranker"]["negatives_depth"]
        ),
    output:
        directory(f"{ART}/{{dataset}}/crossenc/{{split}}/model"),
    log:
        "logs/{dataset}/train_crossenc_{split}.log",
    priority: 50  # on the critical path (see pretrain_mlm)
    conda:
        plan.software.train_env
    threads: config["torch_threads"]
    resources:
        **plan.software.train_job,
    params:
        seed=config["seed"],
        train=flags(plan.repbert.settings["reranker"]["train"]),
        depth=plan.repbert.settings["reranker"]["negatives_depth"],
        max_length=plan.repbert.settings["reranker"]["max_length"],
        loss=plan.repbert.settings["reranker"]["loss"],
        group_size=plan.repbert.settings["reranker"]["group_size"],
        state=lambda w: f"{ART}/{w.dataset}/train-state/crossenc-{w.split}",
        steps_log=lambda w: f"logs/{w.dataset}/train_crossenc_{w.split}.steps.jsonl",
    shell:
        "OMP_NUM_THREADS={threads} {TRAIN} train-cross-encoder --start {input.start} --candidates {input.candidates}"
        " --qrels {input.qrels} --train {input.train} --valid {input.valid} --run {input.run}"
        " --negatives-depth {params.depth} --max-length {params.max_length} --loss {params.loss}"
        " --group-size {params.group_size} --out {output}"
        " --state-dir {params.state} --seed {params.seed} {params.train} --log {params.steps_log} 2>&1 | tee {log}"


rule rerank_shard:
    # part {shard} of repbert.rerank_shards of the deepest reranking: the cross-encoder scores its queries' top-k
    # (batched query by query, so the parts joined are the unsplit run byte for byte)
    input:
        unpack(plan.repbert.rerank_scorer),
        run=lambda w: plan.repbert.first_stage_run(w.dataset, w.first, w.split),
        candidates=collection("{dataset}", "candidates.jsonl"),
        queries=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    output:
        temp(f"{ART}/{{dataset}}/rerank/{{first}}-d{{depth}}/{{split}}.shards/{{shard}}.trec"),
    log:
        "logs/{dataset}/rerank_{first}-d{depth}_{split}_{shard}.log",
    wildcard_constraints:
        first="|".join(plan.repbert.first_stage),
        depth=str(plan.repbert.rerank_max),
        shard="[0-9]+",
    priority: 50  # on the critical path (see pretrain_mlm)
    conda:
        plan.software.torch_env
    threads: config["torch_threads"]
    resources:
        **plan.software.gpu_job,
    params:
        scorer=lambda w, input: plan.repbert.scorer_flags(w, input),
        max_length=plan.repbert.settings["reranker"]["max_length"],
        batch=plan.repbert.settings["reranker"]["batch_size"],
        shards=plan.repbert.rerank_shards,
        precision=config["inference_precision"],
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} rerank {params.scorer} --run {input.run}"
        " --candidates {input.candidates} --queries {input.queries} --depth {wildcards.depth}"
        " --max-length {params.max_length} --batch-size {params.batch} --threads {threads}"
        " --shard {wildcards.shard} --shards {params.shards} --precision {params.precision}"
        " --tag rerank-{wildcards.first}-d{wildcards.depth} --out {output} 2>&1 | tee {log}"


rule merge_rerank:
    # the deepest reranking: its query shards joined in order
    input:
        plan.repbert.rerank_shard_runs,
    output:
        f"{ART}/{{dataset}}/rerank/{{first}}-d{{depth}}/{{split}}.trec",
    log:
        "logs/{dataset}/merge_rerank_{first}-d{depth}_{split}.log",
    wildcard_constraints:
        first="|".join(plan.repbert.first_stage),
        depth=str(plan.repbert.rerank_max),
    priority: 50
    conda:
        plan.software.cpu_env
    shell:
        "{TOWERS} merge-runs --parts {input} --run {output} > {log} 2>&1"


ruleorder: merge_rerank > rerank


rule rerank:
    # a shallower reranking: the first stage's top-k of each dev query ordered by the deepest one's scores
    input:
        unpack(plan.repbert.rerank_scorer),
        run=lambda w: plan.repbert.first_stage_run(w.dataset, w.first, w.split),
        candidates=collection("{dataset}", "candidates.jsonl"),
        queries=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    output:
        f"{ART}/{{dataset}}/rerank/{{first}}-d{{depth}}/{{split}}.trec",
    log:
        "logs/{dataset}/rerank_{first}-d{depth}_{split}.log",
    wildcard_constraints:
        first="|".join(plan.repbert.first_stage),
        depth="[0-9]+",  # the deepest: merge_rerank (ruleorder)
    conda:
        plan.software.torch_env
    threads: 1
    params:
        scorer=lambda w, input: plan.repbert.scorer_flags(w, input),
        max_length=plan.repbert.settings["reranker"]["max_length"],
        batch=plan.repbert.settings["reranker"]["batch_size"],
        precision=config["inference_precision"],
    shell:
        "OMP_NUM_THREADS={threads} {TOWERS} rerank {params.scorer} --run {input.run}"
        " --candidates {input.candidates} --queries {input.queries} --depth {wildcards.depth}"
        " --max-length {params.max_length} --batch-size {params.batch} --threads {threads}"
        " --precision {params.precision} --tag rerank-{wildcards.first}-d{wildcards.depth} --out {output} 2>&1 | tee {log}"


rule fuse_runs:
    # Two first-stage runs fused: alternate (eq. 6), union (eq. 6 untruncated), rrf, combsum
    input:
        lambda w: [plan.repbert.first_stage_run(w.dataset, name, w.split) for name in (w.a, w.b)],
    output:
        f"{ART}/{{dataset}}/fusion/{{fusion}}/{{a}}+{{b}}/{{split}}.trec",
    log:
        "logs/{dataset}/fuse_{fusion}_{a}+{b}_{split}.log",
    wildcard_constraints:
        fusion="alternate|union|rrf|combsum",
        a="|".join(plan.repbert.first_stage),
        b="|".join(plan.repbert.first_stage),
    conda:
        plan.software.cpu_env
    params:
        method=lambda w: "alternate" if w.fusion == "union" else w.fusion,
        union=lambda w: "--no-truncate" if w.fusion == "union" else "",
        depth=plan.repbert.settings["depth"],
        k=plan.repbert.settings["fusion"]["rrf_k"],
        normalisation=plan.repbert.settings["fusion"]["normalisation"],
    shell:
        "{TOWERS} fuse-runs --runs {input} --method {params.method} {params.union} --depth {params.depth}"
        " --rrf-k {params.k} --normalisation {params.normalisation} --tag {wildcards.fusion}"
        " --out {output} 2>&1 | tee {log}"


rule consistency:
    # C(f, n) of eq. 5: the share of a run's top n that BM25's top repbert.depth also holds
    input:
        run=lambda w: plan.repbert.first_stage_run(w.dataset, w.name, w.split),
        reference=lambda w: plan.bm25.bm25_run(w.dataset, w.split),
        queries=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    output:
        f"{ART}/{{dataset}}/consistency/{{name}}/{{split}}.json",
    log:
        "logs/{dataset}/consistency_{name}_{split}.log",
    conda:
        plan.software.cpu_env
    params:
        depths=" ".join(map(str, plan.repbert.settings["consistency_depths"])),
        reference_depth=plan.repbert.settings["depth"],
    shell:
        "{TOWERS} consistency --run {input.run} --reference {input.reference} --queries {input.queries}"
        " --depths {params.depths} --reference-depth {params.reference_depth} --out {output} 2>&1 | tee {log}"


rule repbert_table:
    input:
        profile=local(plan.profile_marker),
        files=lambda w: plan.repbert.inputs(w.table),
        paper=lambda w: plan.paper_values("repbert", w.table),
    output:
        csv="results/repbert/{table}.csv",
        json="results/repbert/{table}.json",
    log:
        "logs/tables/repbert_{table}.log",
    wildcard_constraints:
        table="table[1-4]",
    conda:
        plan.software.cpu_env
    params:
        rows=lambda w: row_flags(plan.repbert.rows(w.table)),
        options=lambda w: option_flags(plan.repbert.command(w.table)),
        profile=config["profile"],
        note=lambda w: plan.repbert.note(w.table),
    shell:
        "{TOWERS} repbert-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


rule repbert_figure_1:
    input:
        profile=local(plan.profile_marker),
        recall=[row["eval"] for row in plan.repbert.recall_rows()],
        rerank=[row["eval"] for row in plan.repbert.rerank_rows()],
    output:
        csv="results/repbert/figure1.csv",
        png="results/repbert/figure1.png",
    log:
        "logs/tables/repbert_figure1.log",
    conda:
        plan.software.cpu_env
    params:
        recall=row_flags(plan.repbert.recall_rows(), "--recall"),
        rerank=row_flags(plan.repbert.rerank_rows(), "--rerank"),
        depths=" ".join(map(str, plan.repbert.recall_depths)),
        note=config["profile_note"],
    shell:
        "{TOWERS} repbert-figure --figure figure1 {params.recall} --depths {params.depths} {params.rerank}"
        " --note {params.note:q} --csv {output.csv} --png {output.png} 2>&1 | tee {log}"


rule repbert_figure_2:
    input:
        profile=local(plan.profile_marker),
        consistency=[row["json"] for row in plan.repbert.consistency_rows()],
    output:
        csv="results/repbert/figure2.csv",
        png="results/repbert/figure2.png",
    log:
        "logs/tables/repbert_figure2.log",
    conda:
        plan.software.cpu_env
    params:
        rows=row_flags(plan.repbert.consistency_rows(), "--consistency"),
        note=config["profile_note"],
    shell:
        "{TOWERS} repbert-figure --figure figure2 {params.rows} --note {params.note:q}"
        " --csv {output.csv} --png {output.png} 2>&1 | tee {log}"
