# Datasets -> ReQA form: candidates.jsonl, queries.tsv, qrels.txt; then cold-start splits.
# Kinds: wikipedia-qa, squad, nq (question sets); wikipedia (parsed articles only, no questions);
# open-domain (a QA dataset's ReQA form with extra candidates from a wikipedia dataset's articles,
# Chang et al. 2020 sec. 4.4: evaluated with the models and splits of its base dataset);
# passage ranking (RepBERT): msmarco-passage (the official archive), msmarco-tsv (MS MARCO TSV form,
# a folder or archive of one's own), beir (BEIR JSONL form, a folder or zip), wikipedia-passages (a
# wikipedia(-qa) dataset's paragraphs, its questions and ICT pseudo-queries). A passage dataset's
# candidates are passages ({"id", "contents"}) and its one split, "dev" (test = the dataset's
# evaluation queries), comes from its own rule, `passages`, not from rule `split`. graded-passages (TREC DL
# 2019): extra test queries with graded qrels over a passage dataset's collection, searched with its
# base's models and indexes (rule passages_graded).

import hashlib
import re
import shlex
from pathlib import Path

QA_KINDS = ("wikipedia-qa", "squad", "nq")
PASSAGE_KINDS = ("msmarco-passage", "msmarco-tsv", "beir", "wikipedia-passages")
PASSAGE_SPLIT = "dev"       # the split name of a passage dataset (never a key of `splits`: those are "<n>-<n>")


def check_open_domain(name):
    cfg = dataset_cfg(name)
    base, extra = cfg["base"], cfg["extra"]
    if base not in config["datasets"] or dataset_cfg(base)["kind"] not in QA_KINDS:
        raise ValueError(f"params.yaml: datasets.{name}.base must name a question-answering dataset "
                         f"(kind {', '.join(QA_KINDS)}), not {base!r}")
    if extra not in config["datasets"] or dataset_cfg(extra)["kind"] != "wikipedia":
        raise ValueError(f"params.yaml: datasets.{name}.extra must name a dataset of kind wikipedia, not {extra!r}")


def check_passages(name):
    cfg = dataset_cfg(name)
    if cfg["kind"] == "wikipedia-passages":
        source = cfg["articles"]
        if source not in config["datasets"] or dataset_cfg(source)["kind"] not in ("wikipedia-qa", "wikipedia"):
            raise ValueError(f"params.yaml: datasets.{name}.articles must name a dataset of kind wikipedia-qa or "
                             f"wikipedia (whose parsed articles give the passages), not {source!r}")
        return
    if not cfg.get("files") and not cfg.get("local_dir"):
        raise ValueError(f"params.yaml: datasets.{name} needs `files` (downloads) or `local_dir` (a folder of its files)")
    names = [f["name"] for f in cfg.get("files", [])]
    for key in ("archive", "triples"):
        if cfg.get(key) and cfg[key] not in names:
            raise ValueError(f"params.yaml: datasets.{name}.{key} must name one of its files ({', '.join(names)}), "
                             f"not {cfg[key]!r}")


def check_graded(name):
    cfg = dataset_cfg(name)
    base = cfg["base"]
    if base not in config["datasets"] or dataset_cfg(base)["kind"] not in PASSAGE_KINDS:
        raise ValueError(f"params.yaml: datasets.{name}.base must name a passage dataset "
                         f"(kind {', '.join(PASSAGE_KINDS)}), not {base!r}")
    names = [f["name"] for f in cfg.get("files", [])]
    for key in ("queries", "qrels"):
        if not cfg.get("local_dir") and cfg[key] not in names:
            raise ValueError(f"params.yaml: datasets.{name}.{key} must name one of its files ({', '.join(names)}), "
                             f"not {cfg[key]!r}")


GRADED_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "graded-passages"]
for _name in GRADED_DATASETS:
    check_graded(_name)
OPEN_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "open-domain"]
for _name in OPEN_DATASETS:
    check_open_domain(_name)
PASSAGE_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] in PASSAGE_KINDS]
for _name in PASSAGE_DATASETS:
    check_passages(_name)


def check_parted_wiki(name):
    """A multistream dump parsed in parts: its index is one of its files, and it is read whole."""
    cfg = dataset_cfg(name)
    names = [f["name"] for f in cfg.get("files", [])]
    if cfg.get("dump") or cfg["index"] not in names[1:]:
        raise ValueError(f"params.yaml: datasets.{name}.index must name one of its files after the dump (the first), "
                         f"with no `dump` path, not {cfg['index']!r}")
    if cfg.get("max_articles", 0):
        raise ValueError(f"params.yaml: datasets.{name}: max_articles must be 0 where the dump is parsed in parts")


# wikipedia datasets with a multistream `index`: parsed in parts (rules wiki_parts_plan, parse_wiki_part,
# merge_wiki_parts); every other dump in one job (parse_wiki)
PARTED_WIKI = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "wikipedia" and cfg.get("index")]
for _name in PARTED_WIKI:
    check_parted_wiki(_name)
ONLY_PARTED_WIKI = one_of(PARTED_WIKI)
NOT_PARTED_WIKI = f"(?!(?:{ONLY_PARTED_WIKI})(?:/|$))[a-z0-9-]+"


# wildcard constraints that give an open-domain dataset's ReQA form to rule reqa_open, a passage dataset's
# to rule passages and every other one to reqa
ONLY_OPEN = one_of(OPEN_DATASETS)
ONLY_PASSAGES = one_of(PASSAGE_DATASETS)
ONLY_GRADED = one_of(GRADED_DATASETS)
ONLY_REQA = f"(?!(?:{ONLY_OPEN}|{ONLY_PASSAGES}|{ONLY_GRADED})(?:/|$))[a-z0-9-]+"


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


def passage_source(dataset):
    """A passage dataset's folder or archive: its `archive` file (default: its first file), else its local_dir."""
    cfg = dataset_cfg(dataset)
    if cfg.get("files"):
        return dataset_file(dataset, file_spec(dataset, cfg.get("archive") or cfg["files"][0]["name"]))
    return cfg["local_dir"]


def folder_files(folder) -> list[str]:
    """Every file under a folder (hidden ones aside), sorted; none when `folder` is not one (an archive)."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(str(p) for p in root.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def folder_listing(folder) -> str:
    """A digest of each file's name, size and modification time under a folder: a param, so that a file swapped
    for another, even an older one (which Snakemake's time check misses), reruns the job. Nothing is read."""
    entries = [(str(Path(f).relative_to(folder)), Path(f).stat().st_size, Path(f).stat().st_mtime_ns)
               for f in folder_files(folder)]
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:16] if entries else ""


def passage_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if cfg["kind"] == "wikipedia-passages":
        return {"articles": f"{ART}/{cfg['articles']}/corpus/articles.jsonl", "questions": cfg["questions"]}
    if cfg["kind"] in PASSAGE_KINDS:
        # a local_dir collection: its files are inputs too (the folder's own time moves only when an entry is
        # added or removed, not when a file in it is edited)
        source = passage_source(wildcards.dataset)
        return {"source": source, "collection": folder_files(source)}
    raise ValueError(f"datasets.{wildcards.dataset} is not a passage dataset (kind {', '.join(PASSAGE_KINDS)})")


def source_check(dataset, name=None):
    """The stage's own check of a passage source file (a local copy is not checked by rule download)."""
    cfg = dataset_cfg(dataset)
    if not cfg.get("files"):
        return ""
    spec = file_spec(dataset, name or cfg.get("archive") or cfg["files"][0]["name"])
    return " ".join(f"--{algorithm} {q(spec[algorithm])}" for algorithm in ("sha256", "md5") if spec.get(algorithm))


def passage_command(wildcards):
    """The passages stage and its settings (all of them, so that a change reruns it)."""
    cfg, dataset = dataset_cfg(wildcards.dataset), wildcards.dataset
    valid = f"--seed {config['seed']} --valid-fraction {cfg.get('valid_fraction', config['valid_fraction'])}"
    if cfg["kind"] == "wikipedia-passages":
        return (f"passages-wiki --ict-queries {cfg.get('ict_queries', 0)} --dev-fraction {cfg.get('dev_fraction', 0.2)}"
                f" {valid}")
    valid += f" --max-valid {cfg.get('max_valid', 0)} {source_check(dataset)}"
    if cfg["kind"] == "beir":
        return (f"passages-beir --eval-split {shlex.quote(cfg.get('eval_split', 'test'))}"
                f" --train-split {shlex.quote(cfg.get('train_split', ''))} {valid}")
    return (f"passages-msmarco --collection {shlex.quote(cfg.get('collection', 'collection.tsv'))}"
            f" --train {shlex.quote(cfg.get('train', 'train'))} --dev {shlex.quote(cfg.get('dev', 'dev.small'))} {valid}")


def triples_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if not cfg.get("triples"):
        raise ValueError(f"datasets.{wildcards.dataset} names no `triples` file")
    split = f"{ART}/{wildcards.dataset}/splits/{PASSAGE_SPLIT}"
    return {"triples": dataset_file(wildcards.dataset, file_spec(wildcards.dataset, cfg["triples"])),
            "candidates": collection(wildcards.dataset, "candidates.jsonl"),
            "qrels": collection(wildcards.dataset, "qrels.txt"), "train": f"{split}/train.tsv"}


def graded_file(dataset, key):
    """A graded set's queries or qrels file: downloaded, or in its local_dir."""
    cfg = dataset_cfg(dataset)
    if cfg.get("local_dir"):
        return f"{cfg['local_dir']}/{cfg[key]}"
    return dataset_file(dataset, file_spec(dataset, cfg[key]))


def graded_checks(dataset):
    """A graded set's local files are checked by its stage against their sha256 or md5 when params give one
    (a download was checked by rule download)."""
    cfg = dataset_cfg(dataset)
    if not cfg.get("local_dir"):
        return ""
    specs = {f["name"]: f for f in cfg.get("files", [])}
    out = []
    for key in ("queries", "qrels"):
        spec = specs.get(cfg[key], {})
        algorithm = next((a for a in ("sha256", "md5") if spec.get(a)), None)
        if algorithm:
            out.append(f"--{key}-digest {algorithm}:{spec[algorithm]}")
    return " ".join(out)


def dataset_file(dataset, spec):
    local = dataset_cfg(dataset).get("local_dir", "")
    return f"{local}/{spec['name']}" if local else f"data/raw/{dataset}/{spec['name']}"


def dump_of(dataset):
    """parse_wiki's dump: the dataset's `dump` ('gensim', 'gensim:<file>' or a path), else its first downloaded file."""
    cfg = dataset_cfg(dataset)
    return cfg["dump"] if cfg.get("dump") else dataset_file(dataset, cfg["files"][0])


def dump_inputs(wildcards):
    """The dump file: a download, or a path given as `dump` (an edit reruns the parse); none for gensim's."""
    dump = dump_of(wildcards.dataset)
    return [] if dump == "gensim" or dump.startswith("gensim:") else [dump]


def file_spec(dataset, name):
    spec = next((f for f in dataset_cfg(dataset).get("files", []) if f["name"] == name), None)
    if spec is None:
        raise ValueError(f"datasets.{dataset} has no file named {name!r} under `files`")
    return spec


def download_check(dataset, name):
    """The download stage's check: the file's sha256 or md5 from params, or the sha1 in a published checksum
    list; a file without one is refused unless params say `checksum: none`."""
    spec = file_spec(dataset, name)
    if spec.get("sha256"):
        return f"--sha256 {q(spec['sha256'])}"
    if spec.get("md5"):
        return f"--md5 {q(spec['md5'])}"
    if spec.get("sha1_from"):
        return f"--sha1-from {shlex.quote(spec['sha1_from'])}"
    if spec.get("checksum") == "none":
        return "--no-checksum"
    raise ValueError(f"datasets.{dataset}.files: {name} has no checksum (sha256, md5 or sha1_from); "
                     "write `checksum: none` to download it unchecked")


rule parse_wiki:
    input:
        dump_inputs,
    output:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        stats=f"{ART}/{{dataset}}/corpus/stats.json",
    wildcard_constraints:
        dataset=NOT_PARTED_WIKI,
    params:
        dump=lambda w: dump_of(w.dataset),
        sha256=lambda w: q(dataset_cfg(w.dataset).get("dump_sha256", "")),
        max_articles=lambda w: dataset_cfg(w.dataset).get("max_articles", 0),
    log:
        "logs/{dataset}/parse_wiki.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} parse-wiki --dump {params.dump:q} --sha256 {params.sha256} --max-articles {params.max_articles}"
        " --articles {output.articles} --redirects {output.redirects} --stats {output.stats} 2>&1 | tee {log}"


def wiki_part_dirs(wildcards):
    return [f"{ART}/{wildcards.dataset}/corpus/parts/{k:03d}" for k in range(dataset_cfg(wildcards.dataset).get("parts", 1))]


rule wiki_parts_plan:
    # Byte ranges of whole bz2 streams of a multistream dump, of about equal size, from its index.
    input:
        dump=lambda w: dump_of(w.dataset),
        index=lambda w: dataset_file(w.dataset, file_spec(w.dataset, dataset_cfg(w.dataset)["index"])),
    output:
        f"{ART}/{{dataset}}/corpus/parts/plan.json",
    wildcard_constraints:
        dataset=ONLY_PARTED_WIKI,
    params:
        parts=lambda w: dataset_cfg(w.dataset).get("parts", 1),
    log:
        "logs/{dataset}/wiki_parts_plan.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} wiki-parts --dump {input.dump} --index {input.index} --parts {params.parts} --out {output}"
        " 2>&1 | tee {log}"


rule parse_wiki_part:
    # One part of the dump, read with a seek and decompressed stream by stream; jobs run side by side.
    input:
        dump=lambda w: dump_of(w.dataset),
        plan=f"{ART}/{{dataset}}/corpus/parts/plan.json",
    output:
        **{name.split(".")[0]: f"{ART}/{{dataset}}/corpus/parts/{{part}}/{name}"
           for name in ("articles.jsonl", "redirects.json", "stats.json", "links.npz")},
    wildcard_constraints:
        dataset=ONLY_PARTED_WIKI,
        part=r"\d\d\d+",
    params:
        out_dir=lambda w: f"{ART}/{w.dataset}/corpus/parts/{w.part}",
    log:
        "logs/{dataset}/parse_wiki_part_{part}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} parse-wiki-part --dump {input.dump} --plan {input.plan} --part {wildcards.part}"
        " --out-dir {params.out_dir} 2>&1 | tee {log}"


rule merge_wiki_parts:
    # The parts' articles in dump order, their redirects, and statistics summed (links resolved through
    # digests of every title: 8 bytes an article, 16 a redirect): parse_wiki's three files.
    input:
        lambda w: [f"{d}/{name}" for d in wiki_part_dirs(w) for name in ("articles.jsonl", "redirects.json",
                                                                            "stats.json", "links.npz")],
    output:
        articles=f"{ART}/{{dataset}}/corpus/articles.jsonl",
        redirects=f"{ART}/{{dataset}}/corpus/redirects.json",
        stats=f"{ART}/{{dataset}}/corpus/stats.json",
    wildcard_constraints:
        dataset=ONLY_PARTED_WIKI,
    params:
        parts=lambda w: " ".join(wiki_part_dirs(w)),
    log:
        "logs/{dataset}/merge_wiki_parts.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} merge-wiki-parts --parts {params.parts} --articles {output.articles} --redirects {output.redirects}"
        " --stats {output.stats} 2>&1 | tee {log}"


rule download:
    # Official files, checked against their sha256, their md5 (MS MARCO: as ir_datasets lists them) or
    # the sha1 their publisher lists beside them (sha1_from: Wikimedia's <wiki>-<date>-sha1sums.txt);
    # unchecked only where params say `checksum: none`; retried on network failure.
    output:
        "data/raw/{dataset}/{name}",
    params:
        url=lambda w: file_spec(w.dataset, w.name)["url"],
        check=lambda w: download_check(w.dataset, w.name),
    retries: 3
    log:
        "logs/{dataset}/download_{name}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} download --url {params.url:q} {params.check} --out {output} 2>&1 | tee {log}"


rule reqa:
    input:
        unpack(reqa_inputs),
    output:
        **collection_files("{dataset}", "stats"),
    wildcard_constraints:
        dataset=ONLY_REQA,   # open-domain datasets: rule reqa_open; passage datasets: rule passages
    params:
        out_dir=lambda w: collection(w.dataset),
        kind=lambda w: dataset_cfg(w.dataset)["kind"],
        # "none": a local file given without a sha256 (checked when given, recorded as not verified when not)
        sha256=lambda w: [f.get("sha256") or "none" for f in dataset_cfg(w.dataset).get("files", [])],
        questions_digest=lambda w: content_digest(dataset_cfg(w.dataset).get("questions", "")),   # by content
    log:
        "logs/{dataset}/reqa.log",
    run:
        if params.kind == "wikipedia-qa":
            shell("{TOWERS} reqa-wiki --articles {input.articles} --questions {input.questions:q}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")
        elif params.kind == "nq":
            shell("{TOWERS} reqa-nq --jsonl {input.files:q} --sha256 {params.sha256:q}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")
        else:
            shell("{TOWERS} reqa-squad --json {input.files:q} --sha256 {params.sha256:q}"
                  " --out-dir {params.out_dir} 2>&1 | tee {log}")


def open_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if cfg["kind"] != "open-domain":
        raise ValueError(f"datasets.{wildcards.dataset} is not of kind open-domain")
    return {**collection_files(cfg["base"]), "articles": f"{ART}/{cfg['extra']}/corpus/articles.jsonl"}


rule reqa_open:
    # The base dataset's ReQA form (questions and qrels unchanged) with extra candidates: every sentence
    # of the extra dataset's articles outside the base's articles, sub-sampled to max_extra (seeded).
    input:
        unpack(open_inputs),
    output:
        **collection_files("{dataset}", "stats"),
    wildcard_constraints:
        dataset=ONLY_OPEN,
    params:
        out_dir=lambda w: collection(w.dataset),
        max_extra=lambda w: dataset_cfg(w.dataset).get("max_extra", 0),
        prefix=lambda w: f"{dataset_cfg(w.dataset)['extra']}:",
        seed=config["seed"],
    log:
        "logs/{dataset}/reqa.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} reqa-open --candidates {input.candidates} --queries {input.queries} --qrels {input.qrels}"
        " --articles {input.articles} --max-extra {params.max_extra} --seed {params.seed} --id-prefix {params.prefix:q}"
        " --out-dir {params.out_dir} 2>&1 | tee {log}"


rule passages:
    # A passage-ranking dataset (RepBERT): passages as candidates, queries and TREC qrels of both sides,
    # and its one split, "dev" (test: the dataset's evaluation queries; train: its training queries, and for
    # wikipedia-passages ICT pseudo-queries; valid: a seeded sample of the training queries).
    input:
        unpack(passage_inputs),
    output:
        **collection_files("{dataset}", "stats"),
        train=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/test.tsv",
    wildcard_constraints:
        dataset=ONLY_PASSAGES,
    params:
        command=passage_command,
        listing=lambda w: "" if dataset_cfg(w.dataset)["kind"] == "wikipedia-passages" else folder_listing(passage_source(w.dataset)),
        out_dir=lambda w: collection(w.dataset),
        split_dir=lambda w: f"{ART}/{w.dataset}/splits/{PASSAGE_SPLIT}",
        kind=lambda w: dataset_cfg(w.dataset)["kind"],
        questions_digest=lambda w: content_digest(dataset_cfg(w.dataset).get("questions", "")),   # by content
    log:
        "logs/{dataset}/passages.log",
    run:
        if params.kind == "wikipedia-passages":
            shell("{TOWERS} {params.command} --articles {input.articles} --questions {input.questions:q}"
                  " --out-dir {params.out_dir} --split-dir {params.split_dir} 2>&1 | tee {log}")
        else:
            shell("{TOWERS} {params.command} --source {input.source:q}"
                  " --out-dir {params.out_dir} --split-dir {params.split_dir} 2>&1 | tee {log}")


rule passages_graded:
    # TREC DL 2019 style: judged test queries with graded qrels over the base dataset's collection
    input:
        queries=lambda w: graded_file(w.dataset, "queries"),
        qrels=lambda w: graded_file(w.dataset, "qrels"),
        candidates=lambda w: collection(corpus_of(w.dataset), "candidates.jsonl"),
    output:
        queries=collection("{dataset}", "queries.tsv"),
        qrels=collection("{dataset}", "qrels.txt"),
        stats=collection("{dataset}", "stats.json"),
        train=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{PASSAGE_SPLIT}/test.tsv",
    wildcard_constraints:
        dataset=ONLY_GRADED,
    params:
        checks=lambda w: graded_checks(w.dataset),
        out_dir=lambda w: collection(w.dataset),
        split_dir=lambda w: f"{ART}/{w.dataset}/splits/{PASSAGE_SPLIT}",
    log:
        "logs/{dataset}/passages_graded.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} passages-graded --queries {input.queries:q} --qrels {input.qrels:q} --candidates {input.candidates}"
        " {params.checks} --out-dir {params.out_dir} --split-dir {params.split_dir} 2>&1 | tee {log}"


rule passage_triples:
    # MS MARCO's text triples (query, positive, negative) as ids, for the dev split's training queries
    input:
        unpack(triples_inputs),
    output:
        collection("{dataset}", "triples.tsv"),
    wildcard_constraints:
        dataset=ONLY_PASSAGES,
    params:
        check=lambda w: source_check(w.dataset, dataset_cfg(w.dataset)["triples"]),
        max_triples=lambda w: dataset_cfg(w.dataset).get("max_triples", 0),
    log:
        "logs/{dataset}/passage_triples.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} passages-triples --triples {input.triples:q} {params.check} --candidates {input.candidates}"
        " --queries {input.train} --qrels {input.qrels} --max-triples {params.max_triples} --out {output}"
        " 2>&1 | tee {log}"


rule split:
    input:
        queries=collection("{dataset}", "queries.tsv"),
    output:
        train=f"{ART}/{{dataset}}/splits/{{split}}/train.tsv",
        valid=f"{ART}/{{dataset}}/splits/{{split}}/valid.tsv",
        test=f"{ART}/{{dataset}}/splits/{{split}}/test.tsv",
    wildcard_constraints:
        split="|".join(re.escape(name) for name in SPLITS),   # never a passage dataset's "dev": rule passages
    params:
        fraction=lambda w: SPLITS[w.split],
        valid=config["valid_fraction"],
        seed=config["seed"],
        out_dir=lambda w: f"{ART}/{w.dataset}/splits/{w.split}",
    log:
        "logs/{dataset}/split_{split}.log",
    conda:
        CPU_ENV
    shell:
        "{TOWERS} split --queries {input.queries} --train-fraction {params.fraction} --valid-fraction {params.valid}"
        " --seed {params.seed} --out-dir {params.out_dir} 2>&1 | tee {log}"
