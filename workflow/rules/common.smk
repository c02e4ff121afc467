# Shared by every rule file (includes share one namespace) and included first. The software each stage runs
# with, a fix to Snakemake's scheduler, global wildcard patterns, the clean-up before a run, shell quoting and
# stage flags, the profile marker every table depends on, dataset lookups, and the models and files more than
# one paper's rules name. What one rule file alone needs sits in workflow/helpers/ under that file's name,
# included at the top of the rule file.

import json
import os
import re
import shlex
import sys
import time

from towers import warm
from towers.scheduler import keep_one_pending_look

# --- software ---------------------------------------------------------------------------------------

# The pip route (default) runs every stage with the interpreter snakemake runs in (the project's venv); with
# --software-deployment-method conda each rule runs in its envs/ environment's python. Every shell command
# names its interpreter through TOWERS or TRAIN (the report, PY): one global on purpose, never a param, so
# that neither the venv's path nor the deployment method is a rerun trigger (`snakemake --lint` reports each
# use; tests/workflow/test_lint.py allows them).
CONDA = "conda" in str(getattr(workflow.deployment_settings, "deployment_method", "")).lower()
PY = "python" if CONDA else shlex.quote(sys.executable)   # quoted: a virtualenv path may hold spaces
ENVS = os.path.join(workflow.basedir, "envs")
CPU_ENV = f"{ENVS}/cpu.yaml"
# a checkpoint named by hub name (not package:<module>, not a folder here) is fetched through the hub's cache
HUB_CHECKPOINTS = [c["source"] for c in config["checkpoints"].values()
                   if not c["source"].startswith("package:") and not os.path.exists(c["source"])]
if not (config["tokenizer"]["hub_model"] or config["encoder"]["hub_model"] or HUB_CHECKPOINTS
        or config["quadrupletbert"]["pretrain"]["init_hub_model"] or config["ltre"]["start_hub_model"]):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")   # a profile that names no hub model never reaches the hub
TOWERS = f"{PY} -m towers"
ART = "artifacts"
SPLITS = config["splits"]
GPU_JOB = config["resources"]["gpu_jobs"]       # cluster requests of encoding/search jobs (profiles/)
TRAIN_JOB = config["resources"]["train_jobs"]   # of training jobs
JAVA_JOB = config["resources"]["java_jobs"]     # and of Pyserini's
TORCH_ENV = f"{ENVS}/gpu.yaml" if GPU_JOB.get("gpu", 0) else CPU_ENV
TRAIN_ENV = f"{ENVS}/gpu.yaml" if TRAIN_JOB.get("gpu", 0) else CPU_ENV
# A training job given several GPUs runs data-parallel, one process a GPU (towers.training.distributed).
TRAIN_PROCESSES = max(1, TRAIN_JOB.get("gpu", 0))
TRAIN = TOWERS if TRAIN_PROCESSES == 1 else f"{PY} -m towers.training.distributed {TRAIN_PROCESSES}"
# How training steps run on a GPU (params `gpu`, settings.Speed): each switch that is on, as the training stages'
# flags, passed in TOWERS_SPEED before TRAIN, so the rules' commands (their code, a rerun trigger) stay as they
# are and a profile with every switch off plans the commands it always did.
GPU_FLAGS = " ".join(f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else int(v)}"
                     for k, v in config.get("gpu", {}).items() if v)
TRAIN = f"TOWERS_SPEED={shlex.quote(GPU_FLAGS)} {TRAIN}" if GPU_FLAGS else TRAIN
JAVA_ENV = f"{ENVS}/java.yaml"

# --- the scheduler ----------------------------------------------------------------------------------

# At most one pending re-check of the ready jobs: Snakemake's own scheduler adds a timer with every finished job
# while others wait for cores, and its growing busyness takes a share of the cores (towers.scheduler). Where this
# Snakemake's method is not the one the fix replaces, one warning line says so and the scheduler runs as it is.
keep_one_pending_look()

wildcard_constraints:
    dataset="[a-z0-9-]+",
    split="|".join([*SPLITS, "dev", "all"]),   # "dev": a passage dataset's one split; "all": every question
    kind="emb|bert",
    margin=r"[0-9]+(\.[0-9]+)?",
    seed="[0-9]+",
    index="[a-z0-9]+",
    model="[a-z0-9.+-]+",

# --- before a run -----------------------------------------------------------------------------------

def content_digest(path) -> str:
    """The SHA-256 of a small file the project owns (questions, claims, expected values), for a rule's params:
    an edit reruns its jobs even where the file's time does not move forward (a clock set back, a copy that
    keeps times), which Snakemake's time check alone would miss."""
    from towers.io import sha256_of

    return sha256_of(path)[:16] if path and os.path.isfile(path) else ""


def future_dated(paths, slack: float = 2.0):
    """(path, its time) of the first input file (or file under an input folder) modified after now."""
    now = time.time() + slack
    for path in dict.fromkeys(map(str, paths)):
        files = [os.path.join(d, f) for d, _, names in os.walk(path) for f in names] if os.path.isdir(path) else [path]
        for f in [path, *files]:
            try:
                when = os.stat(f).st_mtime
            except OSError:
                continue
            if when > now:
                return (path, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)))
    return None


# Nothing stale after a failure. Snakemake does not rerun a present output only because an input of it is
# missing, and schedules a job whose output is missing only when a job that must run asks for it. So when a
# run that rebuilds A -> B -> table (say, after a params change) stops at A (a bug, a kill -9, an out-of-memory
# kill, Ctrl-C), the old B and table look finished to the next run ("Nothing to be done"), or a table is
# rebuilt from some new and some old rows. Hence, before any job starts, every output of every job this run
# will run is removed, as Snakemake removes each job's outputs just before that job: a stop part-way leaves
# those outputs missing, and the next run rebuilds them. Dry runs (-n, which run no hook) and --touch remove
# nothing; training state (train-state/) is no output, so training still resumes. `dvc repro` runs this too.
onstart:
    future = future_dated([f for job in workflow.dag.needrun_jobs() for f in job.input])
    if future:   # else every job ends in Snakemake's clock-skew error, and every rerun too, until that date
        sys.exit(f"error: {future[0]}: modified in the future ({future[1]}, now {time.strftime('%Y-%m-%d %H:%M:%S')}); "
                 f"set its time to now with: touch {shlex.quote(future[0])}"
                 + (" (and the files under it)" if os.path.isdir(future[0]) else ""))
    if not workflow.touch:
        for job in list(workflow.dag.needrun_jobs()):
            workflow.async_run(job.remove_existing_output())
    start_warm_server()


def start_warm_server() -> None:
    """Local runs of the pip route fork their stages from one process that has imported torch and
    transformers (towers.warm; about 3 CPU seconds a model job less). Jobs started before it listens, and every
    job where it does not run (clusters, conda, `warm_start: false`), start a process of their own."""
    if not (config.get("warm_start", True) and workflow.local_exec and not workflow.touch and not CONDA):
        return
    os.makedirs("logs", exist_ok=True)
    with open("logs/warm-start.log", "a") as log:
        socket_path = warm.launch(os.getpid(), log)   # in a folder of this user's alone
    if socket_path:
        os.environ.update({warm.ENV: socket_path})   # set, not read: the jobs' shells inherit it

# --- shell words and table rules --------------------------------------------------------------------

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
    return "".join(["{TOWERS} ", stage, which, " --paper {input.paper} --profile {params.profile}", before_note,
                    " --note {params.note:q} ", rows, " --csv {output.csv} --json {output.json} 2>&1 | tee {log}"])

# Every table and figure depends on a marker file of the profile they are made with, written here when it
# is missing. A table committed and found in a fresh clone (Snakemake has no record of it there, and would
# take it as up to date) is then older than the marker and is rebuilt; a table another profile made has
# another marker as input, so switching profiles reruns the tables, while the jobs below them keep their
# own records. One marker a profile, never rewritten: a dry run of another profile leaves this one's
# tables alone. (A file made by a rule would not do; Snakemake does not rerun a finished target only
# because an input of it is missing.)
PROFILE_MARKER = f"{ART}/profile-{config['profile']}.json"


def mark_profile(path: str, profile: str) -> None:
    if not os.path.exists(path):
        text = json.dumps({"profile": profile}) + "\n"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(f"{path}.tmp", "w") as handle:
            handle.write(text)
        os.replace(f"{path}.tmp", path)


mark_profile(PROFILE_MARKER, config["profile"])
PROFILE_INPUT = local(PROFILE_MARKER)   # written where snakemake parses this file, never through a storage provider

# --- datasets ---------------------------------------------------------------------------------------

def collection(dataset, name=""):
    """A dataset's collection (its candidates, queries, qrels and statistics, whichever builder made them: ReQA,
    open-domain, MS MARCO, BEIR), or one file of it; `dataset` may be the wildcard "{dataset}"."""
    return f"{ART}/{dataset}/collection/{name}" if name else f"{ART}/{dataset}/collection"


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
    """How deep runs go: a passage dataset's first-stage runs feed reranking and fusion, so they go to
    repbert.depth in place of `default` (bm25.depth, faiss.depth), LTRe's included. Declared beside those keys in
    params.yaml and the schema; test_workflow_plans.py fails if this changes."""
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
