# The whole workflow: `snakemake results/chang2020/table3.csv` (or `all`) on the active profile.
# params.yaml is the embedded default; add `--configfile config/paper.yaml` for paper scale.
import json
import os
import re
import shlex
import sys
import time

import yaml
from snakemake.utils import min_version

from towers.params_check import ParamsError, check as check_params, load_sources, read_yaml, source_of
from towers.reports import papers as paper_list

min_version("9.0")

try:   # Snakemake's own message for a broken YAML file names no file; a duplicate key it takes silently
    read_yaml("params.yaml")
except ParamsError as err:
    sys.exit(f"error: {err}")
configfile: "params.yaml"
try:   # one line naming the file, key and problem (Snakemake's validate() prints the whole schema instead)
    _sources = load_sources(["params.yaml", *workflow.overwrite_configfiles], dict(workflow.config_settings.config))
    check_params(config, os.path.join(workflow.basedir, "workflow/schemas/params.schema.yaml"), _sources)
    # the papers, declared once (data/papers/papers.yaml): rule files, targets, published values, claims
    PAPERS = paper_list.load()
    for _paper in config["claims"]["papers"]:   # the profile picks which declared papers' claims it tests
        if _paper not in PAPERS:
            raise ParamsError(f"{source_of(['claims', 'papers'], _sources)}: claims.papers: {_paper!r} is not a "
                              f"paper of {paper_list.PAPERS_FILE} ({', '.join(PAPERS)})")
except ParamsError as err:
    sys.exit(f"error: {err}")

# Software: the pip route (default) runs every stage with the interpreter snakemake runs in (the project's
# venv); with --software-deployment-method conda each rule runs in its envs/ environment's python.
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
JAVA_ENV = f"{ENVS}/java.yaml"

wildcard_constraints:
    dataset="[a-z0-9-]+",
    split="|".join([*SPLITS, "dev", "all"]),   # "dev": a passage dataset's one split; "all": every question
    kind="emb|bert",
    margin=r"[0-9]+(\.[0-9]+)?",
    seed="[0-9]+",
    index="[a-z0-9]+",
    model="[a-z0-9.+-]+",


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


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/pairs.smk"
include: "workflow/rules/bm25.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/dense.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/zeroshot.smk"
for _paper in PAPERS.values():   # each paper's rule file, in papers.yaml's order
    include: _paper["rules"]


PAPER_TABLES = paper_list.tables(PAPERS)
PAPER_FIGURES = paper_list.figures(PAPERS)

include: "workflow/rules/verdicts.smk"

# A rule's request is its family's (resources.gpu_jobs / train_jobs / java_jobs, or the executor profile's
# default-resources) with resources.rules[<rule>] over it: the paper profile's are measured (benchmarks/scale.py,
# docs/scale.md). A --set-resources on the command line still wins.
_MEASURED = config["resources"].get("rules", {})
for _unknown in sorted(set(_MEASURED) - {r.name for r in workflow.rules}):
    sys.exit(f"error: params: resources.rules.{_unknown}: no rule of that name")
for _rule in workflow.rules:
    _given = workflow.resource_settings.overwrite_resources.get(_rule.name) or {}
    _rule.resources.update({k: v for k, v in _MEASURED.get(_rule.name, {}).items() if k not in _given})


rule all:
    input:
        PAPER_TABLES,
        PAPER_FIGURES,
        ZEROSHOT_TABLES,
        "results/claims.csv",


rule report:
    # one HTML page: every table beside the paper's values, every figure, the rule graph, versions, hardware
    input:
        tables=PAPER_TABLES + ZEROSHOT_TABLES,
        figures=PAPER_FIGURES,
        claims="results/claims.csv",
        check="results/check.csv",
        profile=PROFILE_INPUT,
    output:
        html="results/report.html",
        dag="results/dag.png",
        rulegraph=temp("results/rulegraph.dot"),
    params:
        configfiles=" ".join(q(c) for c in workflow.overwrite_configfiles),
        note=config["profile_note"],
        profile=config["profile"],
        title=f"Dense retrieval: {paper_list.in_words(len(PAPERS))} papers reproduced",
        papers=row_flags(({"id": p["id"], "title": p["title"], "tables": [t["path"] for t in p["tables"]],
                           "figures": [f["path"] for f in p["figures"]]} for p in PAPERS.values()), "--paper"),
        tables=" ".join(f"--table {q(t)}" for t in ZEROSHOT_TABLES),   # the tables of no paper
    conda:
        CPU_ENV
    log:
        "logs/tables/report.log",
    shell:
        "{PY} -m snakemake all --rulegraph --nolock --quiet all"   # target `all`; --quiet all: the graph only
        + (" --configfile {params.configfiles}" if workflow.overwrite_configfiles else "")
        + " > {output.rulegraph} 2> {log} && {TOWERS} report {params.papers} {params.tables}"
        " --claims {input.claims} --check {input.check} --rulegraph {output.rulegraph} --dag-png {output.dag}"
        " --title {params.title:q} --profile {params.profile} --note {params.note:q}"
        " --out {output.html} 2>&1 | tee -a {log}"
