# Datasets -> ReQA form: candidates.jsonl, queries.tsv, qrels.txt; then cold-start splits.
# Kinds: wikipedia-qa, squad, nq (question sets); wikipedia (parsed articles only, no questions);
# open-domain (a QA dataset's ReQA form with extra candidates from a wikipedia dataset's articles,
# Chang et al. 2020 sec. 4.4: evaluated with the models and splits of its base dataset).

import re
import shlex

QA_KINDS = ("wikipedia-qa", "squad", "nq")


def dataset_cfg(name):
    if name not in config["datasets"]:
        raise ValueError(f"params.yaml: datasets.{name} is not defined")
    return config["datasets"][name]


def check_open_domain(name):
    cfg = dataset_cfg(name)
    base, extra = cfg["base"], cfg["extra"]
    if base not in config["datasets"] or dataset_cfg(base)["kind"] not in QA_KINDS:
        raise ValueError(f"params.yaml: datasets.{name}.base must name a question-answering dataset "
                         f"(kind {', '.join(QA_KINDS)}), not {base!r}")
    if extra not in config["datasets"] or dataset_cfg(extra)["kind"] != "wikipedia":
        raise ValueError(f"params.yaml: datasets.{name}.extra must name a dataset of kind wikipedia, not {extra!r}")


OPEN_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "open-domain"]
for _name in OPEN_DATASETS:
    check_open_domain(_name)
# wildcard constraints that give an open-domain dataset's ReQA form to rule reqa_open and every other one to reqa
ONLY_OPEN = "|".join(re.escape(name) for name in OPEN_DATASETS) or "(?!)"
NOT_OPEN = f"(?!(?:{ONLY_OPEN})(?:/|$))[a-z0-9-]+"


def base_of(dataset):
    """The dataset whose trained models and splits serve `dataset`: an open-domain dataset's base, else itself."""
    cfg = config["datasets"].get(dataset, {})
    return cfg["base"] if cfg.get("kind") == "open-domain" else dataset


def reqa_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if cfg["kind"] == "wikipedia-qa":
        return {"articles": f"{ART}/{wildcards.dataset}/corpus/articles.jsonl", "questions": cfg["questions"]}
    if cfg["kind"] in ("squad", "nq"):
        return {"files": [dataset_file(wildcards.dataset, f) for f in cfg["files"]]}
    if cfg["kind"] == "wikipedia":
        raise ValueError(f"datasets.{wildcards.dataset} is of kind wikipedia (parsed articles, no questions): it has "
                         f"no ReQA form; build {ART}/{wildcards.dataset}/corpus/articles.jsonl, or name it as the "
                         "`extra` of an open-domain dataset")
    raise ValueError(f"unknown dataset kind {cfg['kind']}")


def dataset_file(dataset, spec):
    local = dataset_cfg(dataset).get("local_dir", "")
    return f"{local}/{spec['name']}" if local else f"data/raw/{dataset}/{spec['name']}"


def dump_of(dataset):
    """parse_wiki's dump: the dataset's `dump` ('gensim', 'gensim:<file>' or a path), else its first downloaded file."""
    cfg = dataset_cfg(dataset)
    return cfg["dump"] if cfg.get("dump") else dataset_file(dataset, cfg["files"][0])


def dump_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    return [] if cfg.get("dump") else [dump_of(wildcards.dataset)]


def file_spec(dataset, name):
    return next(f for f in dataset_cfg(dataset)["files"] if f["name"] == name)


def download_check(dataset, name):
    """The download stage's check: the file's sha256 from params, or the sha1 in a published checksum list."""
    spec = file_spec(dataset, name)
    return f"--sha256 {spec['sha256']}" if spec.get("sha256") else f"--sha1-from {shlex.quote(spec['sha1_from'])}"


rule parse_wiki:
    input:
        dump_inputs,
    output:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        stats=f"{ART}/{{dataset}}/corpus/stats.json",
    params:
        dump=lambda w: dump_of(w.dataset),
        sha256=lambda w: dataset_cfg(w.dataset).get("dump_sha256", ""),
        max_articles=lambda w: dataset_cfg(w.dataset).get("max_articles", 0),
    log:
        "logs/{dataset}/parse_wiki.log",
    shell:
        "{TOWERS} parse-wiki --dump {params.dump:q} --sha256 '{params.sha256}' --max-articles {params.max_articles}"
        " --articles {output.articles} --redirects {output.redirects} --stats {output.stats} 2>&1 | tee {log}"


rule download:
    # Official files, checked against their sha256 or against the sha1 their publisher lists beside
    # them (sha1_from: Wikimedia's <wiki>-<date>-sha1sums.txt); retried on network failure.
    output:
        "data/raw/{dataset}/{name}",
    params:
        url=lambda w: file_spec(w.dataset, w.name)["url"],
        check=lambda w: download_check(w.dataset, w.name),
    retries: 3
    log:
        "logs/{dataset}/download_{name}.log",
    shell:
        "{TOWERS} download --url {params.url:q} {params.check} --out {output} 2>&1 | tee {log}"


rule reqa:
    input:
        unpack(reqa_inputs),
    output:
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        queries=f"{ART}/{{dataset}}/reqa/queries.tsv",
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        stats=f"{ART}/{{dataset}}/reqa/stats.json",
    wildcard_constraints:
        dataset=NOT_OPEN,   # open-domain datasets: rule reqa_open
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


def open_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if cfg["kind"] != "open-domain":
        raise ValueError(f"datasets.{wildcards.dataset} is not of kind open-domain")
    base = f"{ART}/{cfg['base']}/reqa"
    return {"candidates": f"{base}/candidates.jsonl", "queries": f"{base}/queries.tsv", "qrels": f"{base}/qrels.txt",
            "articles": f"{ART}/{cfg['extra']}/corpus/articles.jsonl"}


rule reqa_open:
    # The base dataset's ReQA form (questions and qrels unchanged) with extra candidates: every sentence
    # of the extra dataset's articles outside the base's articles, sub-sampled to max_extra (seeded).
    input:
        unpack(open_inputs),
    output:
        candidates=f"{ART}/{{dataset}}/reqa/candidates.jsonl",
        queries=f"{ART}/{{dataset}}/reqa/queries.tsv",
        qrels=f"{ART}/{{dataset}}/reqa/qrels.txt",
        stats=f"{ART}/{{dataset}}/reqa/stats.json",
    wildcard_constraints:
        dataset=ONLY_OPEN,
    params:
        out_dir=lambda w: f"{ART}/{w.dataset}/reqa",
        max_extra=lambda w: dataset_cfg(w.dataset).get("max_extra", 0),
        prefix=lambda w: f"{dataset_cfg(w.dataset)['extra']}:",
        seed=config["seed"],
    log:
        "logs/{dataset}/reqa.log",
    shell:
        "{TOWERS} reqa-open --candidates {input.candidates} --queries {input.queries} --qrels {input.qrels}"
        " --articles {input.articles} --max-extra {params.max_extra} --seed {params.seed} --id-prefix {params.prefix:q}"
        " --out-dir {params.out_dir} 2>&1 | tee {log}"



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
