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
    log:
        "logs/{dataset}/pairs_{task}.log",
    shell:
        "{TOWERS} pretraining-pairs --articles {input.articles} --redirects {input.redirects} --task '{wildcards.task}'"
        " --seed {params.seed} --tokenizer {input.tokenizer} --out {output.pairs} --stats {output.stats}"
        " 2>&1 | tee {log}"


rule chang2020_table1:
    input:
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
    shell:
        "{TOWERS} pairs-table --paper {input.paper} --profile {params.profile} --note {params.note:q}"
        " --stats {input.stats} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
