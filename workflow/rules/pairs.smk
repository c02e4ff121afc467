# Chang et al.'s pre-training pairs (ICT, BFS, WLP, and their uniform mixture) from the parsed
# articles, with the statistics of their Table 1 (WordPiece tokens of the dataset's tokenizer).


rule pretraining_pairs:
    input:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        pairs=f"{ART}/{{dataset}}/pairs/{{task}}.jsonl",
        stats=f"{ART}/{{dataset}}/pairs/{{task}}.stats.json",
    wildcard_constraints:
        task=r"ict|bfs|wlp|ict\+bfs\+wlp",
    params:
        seed=config["seed"],
        per_article=config["chang2020"]["pretraining"]["per_article"],
    log:
        "logs/{dataset}/pairs_{task}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} pretraining-pairs --articles {input.articles} --redirects {input.redirects} --task '{wildcards.task}'"
        " --seed {params.seed} --per-article {params.per_article} --tokenizer {input.tokenizer} --out {output.pairs} --stats {output.stats}"
        " 2>&1 | tee {log}"


rule chang2020_table1:
    input:
        profile=PROFILE_INPUT,
        stats=[f"{ART}/{config['chang2020']['table1']['dataset']}/pairs/{task}.stats.json" for task in ("ict", "bfs", "wlp")],
        paper="data/papers/chang2020_table1.csv",
    output:
        csv="results/chang2020/table1.csv",
        json="results/chang2020/table1.json",
    params:
        profile=config["profile"],
        note=config["profile_note"],
    log:
        "logs/tables/chang2020_table1.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} pairs-table --paper {input.paper} --profile {params.profile} --note {params.note:q}"
        " --stats {input.stats} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"


# Chang et al.'s Table 2: statistics of the ReQA datasets (the dataset's own WordPiece tokenizer).
rule reqa_statistics:
    input:
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        queries=f"{ART}/{{dataset}}/reqa/queries.tsv",
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        tokenizer=f"{ART}/{{dataset}}/tokenizer",
    output:
        f"{ART}/{{dataset}}/reqa/table2-stats.json",
    log:
        "logs/{dataset}/reqa_statistics.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} reqa-statistics --candidates {input.candidates} --queries {input.queries} --qrels {input.qrels}"
        " --tokenizer {input.tokenizer} --out {output} 2>&1 | tee {log}"


rule chang2020_table2:
    # one row per {name, paper} of chang2020.table2.datasets: the dataset built here beside the paper's
    input:
        profile=PROFILE_INPUT,
        stats=[f"{ART}/{d['name']}/reqa/table2-stats.json" for d in config["chang2020"]["table2"]["datasets"]],
        paper="data/papers/chang2020_table2.csv",
    output:
        csv="results/chang2020/table2.csv",
        json="results/chang2020/table2.json",
    params:
        profile=config["profile"],
        note=config["profile_note"],
        rows=" ".join(f"--row {q(d['name'] + '|' + d['paper'] + '|' + ART + '/' + d['name'] + '/reqa/table2-stats.json')}"
                      for d in config["chang2020"]["table2"]["datasets"]),
    log:
        "logs/tables/chang2020_table2.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} reqa-table --paper {input.paper} --profile {params.profile} --note {params.note:q}"
        " {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
