# BM25 through Pyserini: one Lucene index per dataset, and the runs its consumers read (bm25_run):
#   a dataset not in bm25.split_runs (all of them on the embedded default): one run over its collection's
#     queries.tsv at its run depth, bm25/run.trec; evaluation takes a split's test questions from it, training its
#     training queries.
#   a dataset in bm25.split_runs (the paper's MS MARCO, 502,939 training queries): a run per query set a consumer
#     needs, bm25/<split>/<parts>-d<depth>.trec: a split's test queries at the run depth, its training queries
#     ("train", or "train+valid") at the depth the training stage draws negatives from. bm25.query_shards[dataset]
#     searches its training-query runs as that many jobs (contiguous parts of the queries), joined in order into
#     the run one job would write.
# Search writes a run a batch of queries at a time; the JVM's heap comes from the job's mem_mb (bm25.java_heap_mb).

from towers.plan import ART, Plan, collection

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule bm25_index:
    input:
        collection("{dataset}", "candidates.jsonl"),
    output:
        directory(f"{ART}/{{dataset}}/bm25/index"),
    log:
        "logs/{dataset}/bm25_index.log",
    conda:
        plan.software.java_env
    threads: plan.bm25.threads
    resources:
        **plan.software.java_job,
    shell:
        "{TOWERS} bm25-index --candidates {input} --index {output} --threads {threads}"
        " --memory-mb {resources.mem_mb} > {log} 2>&1"


rule bm25_search:
    # every query of the collection (a dataset not in bm25.split_runs)
    input:
        index=plan.bm25.index_of,  # a graded set: its base's index
        queries=collection("{dataset}", "queries.tsv"),
    output:
        f"{ART}/{{dataset}}/bm25/run.trec",
    log:
        "logs/{dataset}/bm25_search.log",
    conda:
        plan.software.java_env
    threads: plan.bm25.threads
    resources:
        **plan.software.java_job,
    params:
        k1=plan.bm25.settings["k1"],
        b=plan.bm25.settings["b"],
        depth=plan.bm25.search_depth,
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --k1 {params.k1} --b {params.b}"
        " --threads {threads} --memory-mb {resources.mem_mb} --run {output} --depth {params.depth} > {log} 2>&1"


rule bm25_search_split:
    # a dataset in bm25.split_runs: a split's test or training queries, to the depth in the run's name, in one job
    input:
        index=plan.bm25.index_of,
        queries=plan.bm25.bm25_queries,
    output:
        f"{ART}/{{dataset}}/bm25/{{split}}/{{parts}}-d{{depth}}.trec",
    log:
        "logs/{dataset}/bm25_search_{split}_{parts}-d{depth}.log",
    wildcard_constraints:
        parts=f"test|{plan.bm25.training_parts}",
        depth="[1-9][0-9]*",
    conda:
        plan.software.java_env
    threads: plan.bm25.threads
    resources:
        **plan.software.java_job,
    params:
        k1=plan.bm25.settings["k1"],
        b=plan.bm25.settings["b"],
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --k1 {params.k1} --b {params.b}"
        " --threads {threads} --memory-mb {resources.mem_mb} --run {output} --depth {wildcards.depth} > {log} 2>&1"


rule bm25_search_shard:
    # part {shard} of bm25.query_shards[dataset] of a training-query set, one job each; merge_runs joins them
    input:
        index=plan.bm25.index_of,
        queries=plan.bm25.bm25_queries,
    output:
        temp(f"{ART}/{{dataset}}/bm25/{{split}}/{{parts}}-d{{depth}}.shards/{{shard}}.trec"),
    log:
        "logs/{dataset}/bm25_search_{split}_{parts}-d{depth}_{shard}.log",
    wildcard_constraints:
        dataset=plan.bm25.query_sharded_re,
        parts=plan.bm25.training_parts,
        depth="[1-9][0-9]*",
        shard="[0-9]+",
    conda:
        plan.software.java_env
    threads: plan.bm25.threads
    resources:
        **plan.software.java_job,
    params:
        k1=plan.bm25.settings["k1"],
        b=plan.bm25.settings["b"],
        shards=lambda w: plan.bm25.query_shards[w.dataset],
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --k1 {params.k1} --b {params.b}"
        " --threads {threads} --memory-mb {resources.mem_mb}"
        " --run {output} --depth {wildcards.depth} --shard {wildcards.shard} --shards {params.shards} > {log} 2>&1"


rule merge_runs:
    input:
        plan.bm25.shard_runs,
    output:
        f"{ART}/{{dataset}}/bm25/{{split}}/{{parts}}-d{{depth}}.trec",
    log:
        "logs/{dataset}/merge_bm25_{split}_{parts}-d{depth}.log",
    wildcard_constraints:
        dataset=plan.bm25.query_sharded_re,
        parts=plan.bm25.training_parts,
        depth="[1-9][0-9]*",
    conda:
        plan.software.cpu_env
    shell:
        "{TOWERS} merge-runs --parts {input} --run {output} > {log} 2>&1"


ruleorder: merge_runs > bm25_search_split
