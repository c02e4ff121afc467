# What workflow/rules/data.smk's rules call: the datasets of each kind and the wildcard patterns that give each
# dataset to its builder, each builder's inputs and settings, downloads and their checks.

import hashlib
import re
import shlex
from pathlib import Path

from towers.params_check import PASSAGE_KINDS

PASSAGE_SPLIT = "dev"       # the split name of a passage dataset (never a key of `splits`: those are "<n>-<n>")

# Datasets by kind (the names each one gives another, e.g. an open-domain dataset's base and extra, are checked
# with the rest of params before anything is planned: towers.params_check.reference_problems).
GRADED_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "graded-passages"]
OPEN_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "open-domain"]
PASSAGE_DATASETS = [name for name, cfg in config["datasets"].items() if cfg["kind"] in PASSAGE_KINDS]
# wikipedia datasets with a multistream `index`: parsed in parts (rules wiki_parts, parse_wiki_part,
# merge_wiki_parts); every other dump in one job (parse_wiki)
PARTED_WIKI = [name for name, cfg in config["datasets"].items() if cfg["kind"] == "wikipedia" and cfg.get("index")]
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


def wiki_part_dirs(wildcards):
    return [f"{ART}/{wildcards.dataset}/corpus/parts/{k:03d}" for k in range(dataset_cfg(wildcards.dataset).get("parts", 1))]


def open_inputs(wildcards):
    cfg = dataset_cfg(wildcards.dataset)
    if cfg["kind"] != "open-domain":
        raise ValueError(f"datasets.{wildcards.dataset} is not of kind open-domain")
    return {**collection_files(cfg["base"]), "articles": f"{ART}/{cfg['extra']}/corpus/articles.jsonl"}
