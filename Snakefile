# The whole workflow: `snakemake results/chang2020/table3.csv` (or `all`) on the active profile.
# params.yaml is the embedded default; add `--configfile config/paper.yaml` for paper scale.
import os
import shlex
import sys

from snakemake.utils import min_version

from towers.config.params_check import ParamsError, check as check_params, load_sources, read_yaml
from towers.plan import Plan, q, row_flags
from towers.reports import papers as paper_list

min_version("9.0")

try:  # Snakemake's own message for a broken YAML file names no file; a duplicate key it takes silently
    read_yaml("params.yaml")
except ParamsError as err:
    sys.exit(f"error: {err}")


configfile: "params.yaml"


try:  # one line naming the file, key and problem (Snakemake's validate() prints the whole schema instead)
    _sources = load_sources(["params.yaml", *workflow.overwrite_configfiles], dict(workflow.config_settings.config))
    # the papers, declared once (data/papers/papers.yaml): rule files, targets, published values, claims (the
    # profile picks which declared papers' claims it tests)
    _papers = paper_list.load()
    check_params(config, os.path.join(workflow.basedir, "workflow/schemas/params.schema.yaml"), _sources, _papers)
    # what every rule reads, writes and passes its stage (towers.plan): one object of this config, which every
    # rule file asks for by name (Plan.of), built once the config is checked
    plan = Plan.of(workflow, papers=_papers)
except ParamsError as err:
    sys.exit(f"error: {err}")
PY, TOWERS = plan.software.py, plan.software.towers  # named in the report's shell command


include: "workflow/rules/common.smk"  # the scheduler fix, wildcard patterns, the clean-up before a run
include: "workflow/rules/data.smk"
include: "workflow/rules/pairs.smk"
include: "workflow/rules/bm25.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/dense.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/zeroshot.smk"


for _paper in plan.papers.values():  # each paper's rule file, in papers.yaml's order

    include: _paper["rules"]


include: "workflow/rules/verdicts.smk"
include: "workflow/rules/resources.smk"  # measured requests (resources.rules) over every rule above


rule all:
    input:
        plan.paper_tables,
        plan.paper_figures,
        plan.zeroshot.tables,
        "results/claims.csv",


rule report:
    # one HTML page: every table beside the paper's values, every figure, the rule graph, versions, hardware
    input:
        tables=plan.paper_tables + plan.zeroshot.tables,
        figures=plan.paper_figures,
        claims="results/claims.csv",
        check="results/check.csv",
        profile=local(plan.profile_marker),
    output:
        html="results/report.html",
        dag="results/dag.png",
        rulegraph=temp("results/rulegraph.dot"),
    log:
        "logs/tables/report.log",
    conda:
        plan.software.cpu_env
    params:
        configfiles=" ".join(q(c) for c in workflow.overwrite_configfiles),
        note=config["profile_note"],
        profile=config["profile"],
        title=f"Dense retrieval: {paper_list.in_words(len(plan.papers))} papers reproduced",
        papers=row_flags(
            (
                {
                    "id": p["id"],
                    "title": p["title"],
                    "tables": [t["path"] for t in p["tables"]],
                    "figures": [f["path"] for f in p["figures"]],
                }
                for p in plan.papers.values()
            ),
            "--paper",
        ),
        tables=" ".join(f"--table {q(t)}" for t in plan.zeroshot.tables),  # the tables of no paper
    # the rule graph of target `all` (--quiet all: the graph only), then the page
    shell:
        "{PY} -m snakemake all --rulegraph --nolock --quiet all"
        + (" --configfile {params.configfiles}" if workflow.overwrite_configfiles else "")
        + " > {output.rulegraph} 2> {log} && {TOWERS} report {params.papers} {params.tables}"
        " --claims {input.claims} --check {input.check} --rulegraph {output.rulegraph} --dag-png {output.dag}"
        " --title {params.title:q} --profile {params.profile} --note {params.note:q}"
        " --build-record benchmarks/results.json --out {output.html} 2>&1 | tee -a {log}"
