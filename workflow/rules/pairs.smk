# Chang et al.'s pre-training pairs (ICT, BFS, WLP, and their uniform mixture) from the parsed
# articles, with the statistics of their Table 1 (WordPiece tokens of the dataset's tokenizer).

from towers.plan import ART, Plan, collection

plan = Plan.of(workflow)  # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS, CPU_ENV = plan.software.towers, plan.software.cpu_env


rule pretraining_pairs:
    input:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        pairs=f"{ART}/{{dataset}}/pairs/{{task}}.jsonl",
        stats=f"{ART}/{{dataset}}/pairs/{{task}}.stats.json",
    log:
        "logs/{dataset}/pairs_{task}.log",
    wildcard_constraints:
        task=r"ict|bfs|wlp|ict\+bfs\+wlp",
    conda:
        CPU_ENV
    params:
        seed=config["seed"],
        per_article=plan.chang2020.pairs_per_article(),
    shell:
        "{TOWERS} pretraining-pairs --articles {input.articles} --redirects {input.redirects} --task '{wildcards.task}'"
        " --seed {params.seed} --per-article {params.per_article} --tokenizer {input.tokenizer} --out {output.pairs} --stats {output.stats}"
        " 2>&1 | tee {log}"


# Statistics of a ReQA dataset for Chang et al.'s Table 2 (chang2020.smk), with its own WordPiece tokenizer.
rule reqa_statistics:
    input:
        candidates=collection("{dataset}", "candidates.jsonl"),
        queries=collection("{dataset}", "queries.tsv"),
        qrels=collection("{dataset}", "qrels.txt"),
        tokenizer=lambda w: plan.train.tokenizer(w.dataset),
    output:
        collection("{dataset}", "table2-stats.json"),
    log:
        "logs/{dataset}/reqa_statistics.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} reqa-statistics --candidates {input.candidates} --queries {input.queries} --qrels {input.qrels}"
        " --tokenizer {input.tokenizer} --out {output} 2>&1 | tee {log}"
