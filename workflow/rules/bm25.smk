# BM25 through Pyserini: one Lucene index per dataset, one run over all of its queries
# (BM25 is unsupervised; evaluation restricts the run to each split's test questions).


rule bm25_index:
    input:
        collection("{dataset}", "candidates.jsonl"),
    output:
        directory(f"{ART}/{{dataset}}/bm25/index"),
    threads: config["threads"]
    resources:
        **JAVA_JOB,
    conda:
        JAVA_ENV
    log:
        "logs/{dataset}/bm25_index.log",
    shell:
        "{TOWERS} bm25-index --candidates {input} --index {output} --threads {threads} > {log} 2>&1"


rule bm25_search:
    input:
        index=lambda w: f"{ART}/{corpus_of(w.dataset)}/bm25/index",   # a graded set: its base's index
        queries=collection("{dataset}", "queries.tsv"),
    output:
        f"{ART}/{{dataset}}/bm25/run.trec",
    params:
        k1=config["bm25"]["k1"],
        b=config["bm25"]["b"],
        depth=lambda w: run_depth(w.dataset, config["bm25"]["depth"]),
    threads: config["threads"]
    resources:
        **JAVA_JOB,
    conda:
        JAVA_ENV
    log:
        "logs/{dataset}/bm25_search.log",
    shell:
        "{TOWERS} bm25-search --index {input.index} --queries {input.queries} --run {output}"
        " --k1 {params.k1} --b {params.b} --depth {params.depth} --threads {threads} > {log} 2>&1"
