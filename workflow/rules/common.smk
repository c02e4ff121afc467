# Names the rule files share (includes share one namespace): shell quoting and stage flags, the profile
# marker every table depends on, dataset lookups, and the models and files more than one paper's rules name.

import json
import os
import re
import shlex

def q(value) -> str:
    """A value as one shell word. Every value from params reaches the shell through this or Snakemake's
    `:q` (which leaves an empty string out, where a flag needs it as '')."""
    return shlex.quote(str(value))


def flags(settings: dict) -> str:
    """{'batch_size': 32, 'shared': True} -> '--batch-size 32 --shared 1' for a stage command."""
    return " ".join(f"--{k.replace('_', '-')} {q(int(v) if isinstance(v, bool) else v)}" for k, v in settings.items())

def row_flags(rows, flag="--row") -> str:
    """A table stage's rows ({field: value}, every value a string or, where the stage takes one, a list of them)
    as --row words, each row a JSON object."""
    return " ".join(f"{flag} {q(json.dumps(row))}" for row in rows)


def paper_values(paper, table):
    """The published values a paper's table sits beside (data/papers/papers.yaml: the table's own, else the paper's)."""
    return paper_list.values_of(PAPERS[paper], table)


def paper_table(stage: str, rows: str = "{params.rows}", before_note: str = "", table: bool = True) -> str:
    """The shell of a paper's table rule: its stage with the paper's values (input.paper), the profile and the
    note (params), the table's own flags; CSV and JSON out (output.csv, output.json), the log kept."""
    which = " --table {wildcards.table}" if table else ""
    return ("{TOWERS} " + stage + which + " --paper {input.paper} --profile {params.profile}" + before_note
            + " --note {params.note:q} " + rows + " --csv {output.csv} --json {output.json} 2>&1 | tee {log}")

# Every table and figure depends on a marker file of the profile they are made with, written here when it
# is missing. A table committed and found in a fresh clone (Snakemake has no record of it there, and would
# take it as up to date) is then older than the marker and is rebuilt; a table another profile made has
# another marker as input, so switching profiles reruns the tables, while the jobs below them keep their
# own records. One marker a profile, never rewritten: a dry run of another profile leaves this one's
# tables alone. (A file made by a rule would not do: Snakemake does not rerun a finished target only
# because an input of it is missing.)
PROFILE_MARKER = f"{ART}/profile-{config['profile']}.json"


def mark_profile(path: str, profile: str) -> None:
    if not os.path.exists(path):
        text = json.dumps({"profile": profile}) + "\n"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as handle:
            handle.write(text)
        os.replace(path + ".tmp", path)


mark_profile(PROFILE_MARKER, config["profile"])
PROFILE_INPUT = local(PROFILE_MARKER)   # written where snakemake parses this file, never through a storage provider

# --- datasets ---------------------------------------------------------------------------------------

def collection(dataset, name=""):
    """A dataset's collection (its candidates, queries, qrels and statistics, whichever builder made them: ReQA,
    open-domain, MS MARCO, BEIR), or one file of it; `dataset` may be the wildcard "{dataset}"."""
    return f"{ART}/{dataset}/collection" + (f"/{name}" if name else "")


def collection_files(dataset, *more):
    """{name: path} of a collection's candidates, queries and qrels (and "stats" if asked): the outputs every
    collection builder writes, the inputs of one that starts from another's."""
    suffix = {"candidates": "jsonl", "queries": "tsv", "qrels": "txt", "stats": "json"}
    return {name: collection(dataset, f"{name}.{suffix[name]}") for name in ("candidates", "queries", "qrels", *more)}


def dataset_cfg(name):
    if name not in config["datasets"]:
        raise ValueError(f"params.yaml: datasets.{name} is not defined")
    return config["datasets"][name]

def one_of(names):
    return "|".join(re.escape(name) for name in names) or "(?!)"

def run_depth(dataset, default):
    """How deep runs go: a passage dataset's first-stage runs feed reranking and fusion (repbert.depth)."""
    return config["repbert"]["depth"] if base_of(dataset) in PASSAGE_DATASETS else default


def metrics_for(dataset):
    return config["repbert"]["metrics"] if base_of(dataset) in PASSAGE_DATASETS else config["metrics"]


def base_of(dataset):
    """The dataset whose trained models serve `dataset`: an open-domain or graded dataset's base, else itself."""
    cfg = config["datasets"].get(dataset, {})
    return cfg["base"] if cfg.get("kind") in ("open-domain", "graded-passages") else dataset


def corpus_of(dataset):
    """The dataset whose candidates (and BM25 and Faiss indexes) `dataset` searches: a graded set's base."""
    cfg = config["datasets"].get(dataset, {})
    return cfg["base"] if cfg.get("kind") == "graded-passages" else dataset


def questions_of(dataset):
    """The dataset whose split files hold `dataset`'s test questions: an open-domain dataset's base."""
    cfg = config["datasets"].get(dataset, {})
    return cfg["base"] if cfg.get("kind") == "open-domain" else dataset

# --- models and evaluations named across rule files ---------------------------------------------------

# Chang et al.'s two-tower models are named <arch>-<pre-training>[-l<layers>]-d<dim>, e.g.
# transformer-ict+bfs+wlp-l2-d128 or bowmlp-none-d128; pre-training is none, mlm, a pair task or a
# '+'-joined uniform mixture of them (ict, bfs, wlp).
CHANG = config["chang2020"]
CHANG_MODEL = r"(transformer-[a-z+]+-l[0-9]+|bowmlp-[a-z+]+)-d[0-9]+"
PAIR_TASKS = ("ict", "bfs", "wlp")


def chang_model(arch, pretraining, dim, layers=None):
    layers = f"-l{layers or config['encoder']['layers']}" if arch == "transformer" else ""
    return f"{arch}-{pretraining}{layers}-d{dim}"

def mlm_encoder(w):
    """The dataset's MLM encoder; a wikipedia-passages dataset's text is its articles dataset's, so it
    reuses that dataset's encoder (and tokenizer) instead of pre-training a second one on the same text."""
    spec = config["datasets"][w.dataset]
    home = spec["articles"] if spec["kind"] == "wikipedia-passages" else w.dataset
    return f"{ART}/{home}/encoders/mlm"

def eval_json(dataset, model, split, index):
    return f"{ART}/{dataset}/eval/{model}/{split}/{index}.json"

CKPTS = config["checkpoints"]


def checkpoint_cfg(model):
    name = model[len("ckpt-"):]
    if name not in CKPTS:
        raise ValueError(f"params.yaml: checkpoints.{name} is not defined (model {model}); defined: {', '.join(CKPTS)}")
    return CKPTS[name]
