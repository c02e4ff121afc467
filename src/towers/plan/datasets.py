"""Datasets (rules in workflow/rules/data.smk): each dataset's settings, the datasets of each kind and the
wildcard patterns that give each dataset to its builder, each builder's inputs and settings, downloads and their
checks; which dataset's models, candidates, questions and text serve another, and how deep its runs go.

The names each dataset gives another (an open-domain dataset's base and extra, say) are checked with the rest of
params before anything is planned (towers.config.params_check.reference_problems)."""
from __future__ import annotations

import re
import shlex

from ..config.params_check import PASSAGE_KINDS
from .files import folder_files, folder_listing
from .paths import ART, PASSAGE_SPLIT, collection, collection_files
from .shell import one_of, q

SAME_TEXT = ("dump", "dump_sha256", "max_articles")   # wikipedia-qa datasets alike in these share their text


class Datasets:
    def __init__(self, plan, *, passage_runs: dict):
        """`passage_runs`: how deep a passage set's first-stage runs go and its metrics (RepBERT's settings,
        towers.plan.gathered)."""
        self.config = config = plan.config
        self.passage_runs = passage_runs
        self.splits = config["splits"]
        # the splits rule `split` makes (never a passage dataset's "dev": rule passages)
        self.split_names = "|".join(re.escape(name) for name in self.splits)
        # every split name: "dev", a passage dataset's one split; "all", every question (checkpoints, zero-shot)
        self.any_split = "|".join([*self.splits, "dev", "all"])
        kinds = {name: cfg["kind"] for name, cfg in config["datasets"].items()}
        self.graded = [name for name, kind in kinds.items() if kind == "graded-passages"]
        self.open = [name for name, kind in kinds.items() if kind == "open-domain"]
        self.passage = [name for name, kind in kinds.items() if kind in PASSAGE_KINDS]
        # wikipedia datasets with a multistream `index`: parsed in parts (rules wiki_parts, parse_wiki_part,
        # merge_wiki_parts); every other dump in one job (parse_wiki)
        self.parted_wiki = [name for name, cfg in config["datasets"].items()
                            if cfg["kind"] == "wikipedia" and cfg.get("index")]
        self.only_parted_wiki = one_of(self.parted_wiki)
        self.not_parted_wiki = f"(?!(?:{self.only_parted_wiki})(?:/|$))[a-z0-9-]+"
        # wildcard constraints that give an open-domain dataset's ReQA form to rule reqa_open, a passage dataset's
        # to rule passages and every other one to reqa
        self.only_open = one_of(self.open)
        self.only_passages = one_of(self.passage)
        self.only_graded = one_of(self.graded)
        self.only_reqa = f"(?!(?:{self.only_open}|{self.only_passages}|{self.only_graded})(?:/|$))[a-z0-9-]+"

    # --- lookups ------------------------------------------------------------------------------------

    def dataset_cfg(self, name):
        if name not in self.config["datasets"]:
            raise ValueError(f"params.yaml: datasets.{name} is not defined")
        return self.config["datasets"][name]

    def base_of(self, dataset):
        """The dataset whose trained models serve `dataset`: an open-domain or graded dataset's base, else itself."""
        cfg = self.config["datasets"].get(dataset, {})
        return cfg["base"] if cfg.get("kind") in ("open-domain", "graded-passages") else dataset

    def corpus_of(self, dataset):
        """The dataset whose candidates (and BM25 and Faiss indexes) `dataset` searches: a graded set's base."""
        cfg = self.config["datasets"].get(dataset, {})
        return cfg["base"] if cfg.get("kind") == "graded-passages" else dataset

    def questions_of(self, dataset):
        """The dataset whose split files hold `dataset`'s test questions: an open-domain dataset's base."""
        cfg = self.config["datasets"].get(dataset, {})
        return cfg["base"] if cfg.get("kind") == "open-domain" else dataset

    def run_depth(self, dataset, default):
        """How deep runs go: a passage dataset's first-stage runs feed reranking and fusion, so they go to
        repbert.depth (passage_runs) in place of `default` (bm25.depth, faiss.depth), LTRe's included. Declared beside those keys
        in params.yaml and the schema; test_workflow_plans.py fails if this changes."""
        return self.passage_runs["depth"] if self.base_of(dataset) in self.passage else default

    def text_home(self, dataset):
        """The dataset whose text `dataset` shares, so that it is parsed, tokenized and pre-trained on once: a
        wikipedia-passages dataset's articles dataset; for a wikipedia-qa dataset, the first one in params over
        the same articles (dump, dump_sha256, max_articles), e.g. a second question set's; else itself."""
        datasets = self.config["datasets"]
        spec = datasets[dataset]
        if spec["kind"] == "wikipedia-passages":
            return spec["articles"]
        if spec["kind"] == "wikipedia-qa":
            return next(name for name, other in datasets.items() if other["kind"] == "wikipedia-qa"
                        and all(other.get(key) == spec.get(key) for key in SAME_TEXT))
        return dataset

    def metrics_for(self, dataset):
        return self.passage_runs["metrics"] if self.base_of(dataset) in self.passage else self.config["metrics"]

    def dataset_file(self, dataset, spec):
        local = self.dataset_cfg(dataset).get("local_dir", "")
        return f"{local}/{spec['name']}" if local else f"data/raw/{dataset}/{spec['name']}"

    def file_spec(self, dataset, name):
        spec = next((f for f in self.dataset_cfg(dataset).get("files", []) if f["name"] == name), None)
        if spec is None:
            raise ValueError(f"datasets.{dataset} has no file named {name!r} under `files`")
        return spec

    # --- downloads and Wikipedia dumps --------------------------------------------------------------

    def download_check(self, dataset, name):
        """The download stage's check: the file's sha256 or md5 from params, or the sha1 in a published checksum
        list; a file without one is refused unless params say `checksum: none`."""
        spec = self.file_spec(dataset, name)
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

    def dump_of(self, dataset):
        """parse_wiki's dump: the dataset's `dump` ('gensim', 'gensim:<file>' or a path), else its first downloaded
        file."""
        cfg = self.dataset_cfg(dataset)
        return cfg["dump"] if cfg.get("dump") else self.dataset_file(dataset, cfg["files"][0])

    def dump_inputs(self, wildcards):
        """The dump file: a download, or a path given as `dump` (an edit reruns the parse); none for gensim's."""
        dump = self.dump_of(wildcards.dataset)
        return [] if dump == "gensim" or dump.startswith("gensim:") else [dump]

    def dump_index(self, wildcards):
        """A multistream dump's index file (rule wiki_parts)."""
        dataset = wildcards.dataset
        return self.dataset_file(dataset, self.file_spec(dataset, self.dataset_cfg(dataset)["index"]))

    def wiki_part_dirs(self, wildcards):
        return [f"{ART}/{wildcards.dataset}/corpus/parts/{k:03d}"
                for k in range(self.dataset_cfg(wildcards.dataset).get("parts", 1))]

    # --- collections --------------------------------------------------------------------------------

    def reqa_inputs(self, wildcards):
        cfg = self.dataset_cfg(wildcards.dataset)
        if cfg["kind"] == "wikipedia-qa":   # a second question set over the same dump reads the first's parse
            home = self.text_home(wildcards.dataset)
            judged = {"judgements": cfg["judgements"]} if cfg.get("judgements") else {}
            return {"articles": f"{ART}/{home}/corpus/articles.jsonl", "questions": cfg["questions"], **judged}
        if cfg["kind"] in ("squad", "nq"):
            return {"files": [self.dataset_file(wildcards.dataset, f) for f in cfg["files"]]}
        if cfg["kind"] == "wikipedia":
            raise ValueError(f"datasets.{wildcards.dataset} is of kind wikipedia (parsed articles, no questions): it "
                             f"has no ReQA form; build {ART}/{wildcards.dataset}/corpus/articles.jsonl, or name it as "
                             "the `extra` of an open-domain dataset")
        raise ValueError(f"unknown dataset kind {cfg['kind']}")

    def reqa_options(self, wildcards) -> str:
        """reqa-wiki's --judgements, where the question set has graded judgements (else its single labels)."""
        path = self.dataset_cfg(wildcards.dataset).get("judgements")
        return f"--judgements {shlex.quote(path)}" if path else ""

    def open_inputs(self, wildcards):
        cfg = self.dataset_cfg(wildcards.dataset)
        if cfg["kind"] != "open-domain":
            raise ValueError(f"datasets.{wildcards.dataset} is not of kind open-domain")
        return {**collection_files(cfg["base"]), "articles": f"{ART}/{cfg['extra']}/corpus/articles.jsonl"}

    def passage_source(self, dataset):
        """A passage dataset's folder or archive: its `archive` file (default: its first file), else its local_dir."""
        cfg = self.dataset_cfg(dataset)
        if cfg.get("files"):
            return self.dataset_file(dataset, self.file_spec(dataset, cfg.get("archive") or cfg["files"][0]["name"]))
        return cfg["local_dir"]

    # --- the qrels the tables are scored on (rule evaluation_qrels; data/enwiki-mini/JUDGING.md) ----------------

    def evaluation_judged(self, dataset) -> str:
        """The dataset whose `evaluation_qrels` grade `dataset`'s test questions (an open-domain set's base), or ""
        where none does: its own qrels.txt, what trains, is what it is scored on."""
        home = self.questions_of(dataset)
        return home if self.config["datasets"].get(home, {}).get("evaluation_qrels") else ""

    def evaluation_qrels(self, dataset):
        judged = self.evaluation_judged(dataset)
        return collection(judged, "qrels-eval.txt") if judged else collection(dataset, "qrels.txt")

    def evaluation_inputs(self, wildcards):
        cfg = self.dataset_cfg(wildcards.dataset)
        judged = cfg["evaluation_qrels"]
        files = {"articles": f"{ART}/{self.text_home(wildcards.dataset)}/corpus/articles.jsonl",
                 "questions": [cfg["questions"], *([cfg["test_questions"]] if cfg.get("test_questions") else [])],
                 "judgements": judged["judgements"], "pools": judged["pools"], "qrels": collection(wildcards.dataset, "qrels.txt")}
        if cfg["kind"] == "wikipedia-passages":
            split = f"{ART}/{wildcards.dataset}/splits/{PASSAGE_SPLIT}"
            files |= {"train": f"{split}/train.tsv", "test": f"{split}/test.tsv",
                      "stats": collection(wildcards.dataset, "stats.json")}
        return files

    def evaluation_flags(self, wildcards, input) -> str:
        """Each question file with the prefix of its ids (q: questions, n: a passage set's test_questions); a
        passage set's paragraphs and unexposed questions."""
        cfg = self.dataset_cfg(wildcards.dataset)
        passages = cfg["kind"] == "wikipedia-passages"
        specs = [f"{cfg['questions']}=q", *([f"{cfg['test_questions']}=n"] if cfg.get("test_questions") else [])]
        flags = "--questions " + " ".join(q(spec) for spec in specs)
        if passages:
            unexposed = collection(wildcards.dataset, "unexposed.json")
            flags += f" --passages --train {input.train} --test {input.test} --stats {input.stats} --unexposed {unexposed}"
        return flags

    def passage_inputs(self, wildcards):
        cfg = self.dataset_cfg(wildcards.dataset)
        if cfg["kind"] == "wikipedia-passages":
            return {"articles": f"{ART}/{cfg['articles']}/corpus/articles.jsonl", "questions": cfg["questions"],
                    **{key: cfg[key] for key in ("test_questions", "judgements") if cfg.get(key)}}
        if cfg["kind"] in PASSAGE_KINDS:
            # a local_dir collection: its files are inputs too (the folder's own time moves only when an entry is
            # added or removed, not when a file in it is edited)
            source = self.passage_source(wildcards.dataset)
            return {"source": source, "collection": folder_files(source)}
        raise ValueError(f"datasets.{wildcards.dataset} is not a passage dataset (kind {', '.join(PASSAGE_KINDS)})")

    def passage_listing(self, wildcards):
        """The listing of a passage dataset's local folder (towers.plan.files.folder_listing), a param; none for
        wikipedia-passages (made from articles built here)."""
        if self.dataset_cfg(wildcards.dataset)["kind"] == "wikipedia-passages":
            return ""
        return folder_listing(self.passage_source(wildcards.dataset))

    def source_check(self, dataset, name=None):
        """The stage's own check of a passage source file (a local copy is not checked by rule download)."""
        cfg = self.dataset_cfg(dataset)
        if not cfg.get("files"):
            return ""
        spec = self.file_spec(dataset, name or cfg.get("archive") or cfg["files"][0]["name"])
        return " ".join(f"--{algorithm} {q(spec[algorithm])}" for algorithm in ("sha256", "md5") if spec.get(algorithm))

    def passage_command(self, wildcards):
        """The passages stage and its settings (all of them, so that a change reruns it)."""
        cfg, dataset = self.dataset_cfg(wildcards.dataset), wildcards.dataset
        valid = (f"--seed {self.config['seed']}"
                 f" --valid-fraction {cfg.get('valid_fraction', self.config['valid_fraction'])}")
        if cfg["kind"] == "wikipedia-passages":
            later = "".join(f" --{key.replace('_', '-')} {shlex.quote(cfg[key])}"
                            for key in ("test_questions", "judgements") if cfg.get(key))
            return (f"passages-wiki --ict-queries {cfg.get('ict_queries', 0)}"
                    f" --dev-fraction {cfg.get('dev_fraction', 0.2)}{later} {valid}")
        valid += f" --max-valid {cfg.get('max_valid', 0)} {self.source_check(dataset)}"
        if cfg["kind"] == "beir":
            return (f"passages-beir --eval-split {shlex.quote(cfg.get('eval_split', 'test'))}"
                    f" --train-split {shlex.quote(cfg.get('train_split', ''))} {valid}")
        return (f"passages-msmarco --collection {shlex.quote(cfg.get('collection', 'collection.tsv'))}"
                f" --train {shlex.quote(cfg.get('train', 'train'))} --dev {shlex.quote(cfg.get('dev', 'dev.small'))}"
                f" {valid}")

    def triples_inputs(self, wildcards):
        cfg = self.dataset_cfg(wildcards.dataset)
        if not cfg.get("triples"):
            raise ValueError(f"datasets.{wildcards.dataset} names no `triples` file")
        split = f"{ART}/{wildcards.dataset}/splits/{PASSAGE_SPLIT}"
        return {"triples": self.dataset_file(wildcards.dataset, self.file_spec(wildcards.dataset, cfg["triples"])),
                "candidates": collection(wildcards.dataset, "candidates.jsonl"),
                "qrels": collection(wildcards.dataset, "qrels.txt"), "train": f"{split}/train.tsv"}

    def graded_file(self, dataset, key):
        """A graded set's queries or qrels file: downloaded, or in its local_dir."""
        cfg = self.dataset_cfg(dataset)
        if cfg.get("local_dir"):
            return f"{cfg['local_dir']}/{cfg[key]}"
        return self.dataset_file(dataset, self.file_spec(dataset, cfg[key]))

    def graded_checks(self, dataset):
        """A graded set's local files are checked by its stage against their sha256 or md5 when params give one
        (a download was checked by rule download)."""
        cfg = self.dataset_cfg(dataset)
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
