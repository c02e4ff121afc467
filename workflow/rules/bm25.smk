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

include: "../helpers/bm25.smk"


rule bm25_index:
    input:
        collection("{dataset}", "candidates.jsonl"),
    output:
        directory(f"{ART}/{{dataset}}/bm25/index"),
    threads: BM25_THREADS
    resources:
        **JAVA_JOB,
    conda:
        JAVA_ENV
    log:
        "logs/{dataset}/bm25_index.log",
    shell:
        "{TOWERS} bm25-index --candidates {input} --index {output} --threads {threads}"
        " --memory-mb {resources.mem_mb} > {log} 2>&1"


rule bm25_search:
    # every query of the collection (a dataset not in bm25.split_runs)
    input:
        index=lambda w: f"{ART}/{corpus_of(w.dataset)}/bm25/index",   # a graded set: its base's index
        queries=collection("{dataset}", "queries.tsv"),
    output:
        f"{ART}/{{dataset}}/bm25/run.trec",
    params:
        k1=BM25["k1"],
        b=BM25["b"],
        depth=lambda w: run_depth(w.dataset, BM25["depth"]),
    threads: BM25_THREADS
    resources:
        **JAVA_JOB,
    conda:
        JAVA_ENV
    log:
        "logs/{dataset}/bm25_search.log",
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --k1 {params.k1} --b {params.b}"
        " --threads {threads} --memory-mb {resources.mem_mb} --run {output} --depth {params.depth} > {log} 2>&1"


rule bm25_search_split:
    # a dataset in bm25.split_runs: a split's test or training queries, to the depth in the run's name, in one job
    input:
        index=lambda w: f"{ART}/{corpus_of(w.dataset)}/bm25/index",
        queries=bm25_queries,
    output:
        f"{ART}/{{dataset}}/bm25/{{split}}/{{parts}}-d{{depth}}.trec",
    wildcard_constraints:
        parts=f"test|{TRAINING_PARTS}",
        depth="[1-9][0-9]*",
    params:
        k1=BM25["k1"],
        b=BM25["b"],
    threads: BM25_THREADS
    resources:
        **JAVA_JOB,
    conda:
        JAVA_ENV
    log:
        "logs/{dataset}/bm25_search_{split}_{parts}-d{depth}.log",
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --k1 {params.k1} --b {params.b}"
        " --threads {threads} --memory-mb {resources.mem_mb} --run {output} --depth {wildcards.depth} > {log} 2>&1"


rule bm25_search_shard:
    # part {shard} of bm25.query_shards[dataset] of a training-query set, one job each; merge_runs joins them
    input:
        index=lambda w: f"{ART}/{corpus_of(w.dataset)}/bm25/index",
        queries=bm25_queries,
    output:
        temp(f"{ART}/{{dataset}}/bm25/{{split}}/{{parts}}-d{{depth}}.shards/{{shard}}.trec"),
    wildcard_constraints:
        dataset=QUERY_SHARDED_RE,
        parts=TRAINING_PARTS,
        depth="[1-9][0-9]*",
        shard="[0-9]+",
    params:
        k1=BM25["k1"],
        b=BM25["b"],
        shards=lambda w: QUERY_SHARDS[w.dataset],
    threads: BM25_THREADS
    resources:
        **JAVA_JOB,
    conda:
        JAVA_ENV
    log:
        "logs/{dataset}/bm25_search_{split}_{parts}-d{depth}_{shard}.log",
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --k1 {params.k1} --b {params.b}"
        " --threads {threads} --memory-mb {resources.mem_mb}"
        " --run {output} --depth {wildcards.depth} --shard {wildcards.shard} --shards {params.shards} > {log} 2>&1"


rule merge_runs:
    input:
        lambda w: [f"{ART}/{w.dataset}/bm25/{w.split}/{w.parts}-d{w.depth}.shards/{i}.trec"
                   for i in range(QUERY_SHARDS[w.dataset])],
    output:
        f"{ART}/{{dataset}}/bm25/{{split}}/{{parts}}-d{{depth}}.trec",
    wildcard_constraints:
        dataset=QUERY_SHARDED_RE,
        parts=TRAINING_PARTS,
        depth="[1-9][0-9]*",
    conda:
        CPU_ENV
    log:
        "logs/{dataset}/merge_bm25_{split}_{parts}-d{depth}.log",
    shell:
        "{TOWERS} merge-runs --parts {input} --run {output} > {log} 2>&1"


ruleorder: merge_runs > bm25_search_split
