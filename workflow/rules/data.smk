# Datasets -> ReQA form: candidates.jsonl, queries.tsv, qrels.txt; then cold-start splits.


def dataset_cfg(name):
    if name not in config["datasets"]:
        raise ValueError(f"params.yaml: datasets.{name} is not defined")
    return config["datasets"][name]


def reqa_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if cfg["kind"] == "wikipedia-qa":
        return {"articles": f"{ART}/{wildcards.dataset}/corpus/articles.jsonl", "questions": cfg["questions"]}
    if cfg["kind"] in ("squad", "nq"):
        return {"files": [dataset_file(wildcards.dataset, f) for f in cfg["files"]]}
    raise ValueError(f"unknown dataset kind {cfg['kind']}")


def dataset_file(dataset, spec):
    local = dataset_cfg(dataset).get("local_dir", "")
    return f"{local}/{spec['name']}" if local else f"data/raw/{dataset}/{spec['name']}"


rule parse_wiki:
    output:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        stats=f"{ART}/{{dataset}}/corpus/stats.json",
    params:
        dump=lambda w: dataset_cfg(w.dataset)["dump"],
        sha256=lambda w: dataset_cfg(w.dataset).get("dump_sha256", ""),
        max_articles=lambda w: dataset_cfg(w.dataset).get("max_articles", 0),
    log:
        "logs/{dataset}/parse_wiki.log",
    shell:
        "{TOWERS} parse-wiki --dump {params.dump:q} --sha256 '{params.sha256}' --max-articles {params.max_articles}"
        " --articles {output.articles} --redirects {output.redirects} --stats {output.stats} 2>&1 | tee {log}"


rule download:
    # Official files, checked against their sha256; retried on network failure.
    output:
        "data/raw/{dataset}/{name}",
    params:
        url=lambda w: next(f["url"] for f in dataset_cfg(w.dataset)["files"] if f["name"] == w.name),
        sha256=lambda w: next(f["sha256"] for f in dataset_cfg(w.dataset)["files"] if f["name"] == w.name),
    retries: 3
    log:
        "logs/{dataset}/download_{name}.log",
    shell:
        "{TOWERS} download --url {params.url:q} --sha256 {params.sha256} --out {output} 2>&1 | tee {log}"


rule reqa:
    input:
        unpack(reqa_inputs),
    output:
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        queries=f"{ART}/{{dataset}}/reqa/queries.tsv",
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        stats=f"{ART}/{{dataset}}/reqa/stats.json",
    params:
        out_dir=lambda w: f"{ART}/{w.dataset}/reqa",
        kind=lambda w: dataset_cfg(w.dataset)["kind"],
        sha256=lambda w: " ".join(f["sha256"] for f in dataset_cfg(w.dataset).get("files", [])),
    log:
        "logs/{dataset}/reqa.log",
    run:
        if params.kind == "wikipedia-qa":
            shell("{TOWERS} reqa-wiki --articles {input.articles} --questions {input.questions:q}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")
        elif params.kind == "nq":
            shell("{TOWERS} reqa-nq --jsonl {input.files:q} --sha256 {params.sha256}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")
        else:
            shell("{TOWERS} reqa-squad --json {input.files:q} --sha256 {params.sha256}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")


rule split:
    input:
        queries=f"{ART}/{{dataset}}/reqa/queries.tsv",
    output:
        train=f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{{split}}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    params:
        fraction=lambda w: SPLITS[w.split],
        valid=config["valid_fraction"],
        seed=config["seed"],
        out_dir=lambda w: f"{ART}/{w.dataset}/splits/{w.split}",
    log:
        "logs/{dataset}/split_{split}.log",
    shell:
        "{TOWERS} split --queries {input.queries} --train-fraction {params.fraction} --valid-fraction {params.valid}"
        " --seed {params.seed} --out-dir {params.out_dir} 2>&1 | tee {log}"
