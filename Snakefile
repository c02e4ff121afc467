# The whole workflow: `snakemake results/chang2020/table3.csv` (or `all`) on the active profile.
# params.yaml is the embedded default; add `--configfile config/paper.yaml` for paper scale.
import os
import re
import sys

from snakemake.utils import min_version, validate

min_version("9.0")

configfile: "params.yaml"
validate(config, "workflow/schemas/params.schema.yaml")

PY = sys.executable          # the interpreter snakemake runs in (the project's venv)
if not (config["tokenizer"]["hub_model"] or config["encoder"]["hub_model"]
        or config["quadrupletbert"]["pretrain"]["init_hub_model"] or config["ltre"]["start_hub_model"]):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")   # a profile that names no hub model never reaches the hub
TOWERS = f"{PY} -m towers"
ART = "artifacts"
SPLITS = config["splits"]

wildcard_constraints:
    dataset="[a-z0-9-]+",
    split="|".join([*SPLITS, "dev"]),   # "dev": a passage dataset's one split
    kind="emb|bert",
    margin=r"[0-9]+(\.[0-9]+)?",
    seed="[0-9]+",
    index="[a-z0-9]+",
    model="[a-z0-9.+-]+",


def flags(settings: dict) -> str:
    """{'batch_size': 32, 'shared': True} -> '--batch-size 32 --shared 1' for a stage command."""
    return " ".join(f"--{k.replace('_', '-')} {int(v) if isinstance(v, bool) else v}" for k, v in settings.items())


include: "workflow/rules/data.smk"
include: "workflow/rules/pairs.smk"
include: "workflow/rules/bm25.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/dense.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/tables.smk"
include: "workflow/rules/repbert.smk"
include: "workflow/rules/ltre.smk"


rule all:
    input:
        expand("results/chang2020/table{n}.csv", n=range(1, 7)),
        "results/table1.csv",
        "results/table2.csv",
        REPBERT_TARGETS,
        LTRE_TARGETS,
