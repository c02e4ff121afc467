# The whole workflow: `snakemake results/chang2020/table3.csv` (or `all`) on the active profile.
# params.yaml is the embedded default; add `--configfile config/paper.yaml` for paper scale.
import os
import sys

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

include: "workflow/rules/common.smk"   # software, wildcard patterns, the clean-up before a run, shared helpers
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
include: "workflow/rules/resources.smk"   # measured requests (resources.rules) over every rule above


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
