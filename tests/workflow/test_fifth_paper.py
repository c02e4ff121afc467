"""A fifth paper, thrown away: added to a copy of the workflow through exactly the files docs/workflow.md lists
for one ("Papers, declared once"), it is planned in every profile beside the four, its table read by the claims,
the check, the report and dvc.yaml. A file the list leaves out that a paper needs fails here; so does a listed
file nothing needs."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES
from towers.verdicts import claims as checker
from benchmarks.workflow_harness import ROOT, fresh_copy, job_counts

pytestmark = pytest.mark.snakemake   # plans with Snakemake (make test-fast leaves it out)

PAPER = "toy"
RULES = '''from towers.plan import Plan, option_flags, row_flags

plan = Plan.of(workflow)   # the names below that are no Snakemake directive's come from here (towers.plan)
TOWERS = plan.software.towers


rule toy_table:
    input:
        profile=local(plan.profile_marker),
        evals=lambda w: plan.toy.inputs(w.table),
        paper=lambda w: plan.paper_values("toy", w.table),
    output:
        csv="results/toy/{table}.csv",
        json="results/toy/{table}.json",
    wildcard_constraints:
        table="table1",
    params:
        rows=lambda w: row_flags(plan.toy.rows(w.table)),
        options=lambda w: option_flags(plan.toy.command(w.table)),
        profile=config["profile"],
        note=lambda w: plan.toy.note(w.table),
    log:
        "logs/tables/toy_{table}.log",
    conda:
        plan.software.cpu_env
    shell:
        "{TOWERS} toy-table --table {wildcards.table} --paper {input.paper} --profile {params.profile}"
        " --note {params.note:q} {params.options} {params.rows} --csv {output.csv} --json {output.json} 2>&1 | tee {log}"
'''
# the paper's plan in the shape of every paper's (towers.plan.tables.Tables: a method left out fails the Plan)
PLAN = '''"""The toy paper's table: each model's evaluation on toy.dataset's split."""
from .paths import eval_json
from .tables import Tables


class Toy(Tables):
    def __init__(self, plan):
        self.plan = plan
        self.settings = plan.config["toy"]

    def rows(self, table):
        t = self.settings
        return [{"model": m, "eval": eval_json(t["dataset"], m, t["split"], "lucene" if m == "bm25" else "flat")}
                for m in t["models"]]

    def inputs(self, table):
        return [row["eval"] for row in self.rows(table)]

    def note(self, table):
        return self.plan.evaluation.table_note(self.settings["dataset"])

    def command(self, table):
        return {"dataset": self.settings["dataset"]}
'''
REPORT = '''"""The toy paper's table: never built (tests/workflow/test_fifth_paper.py only plans it)."""
from .common import Layout, Option


def build(rows, paper, table, profile, note, *, dataset):
    raise NotImplementedError


LAYOUTS = {"table1": Layout(("model", "eval"), build, options=(Option("dataset"),))}
'''
CLAIMS = {"paper": PAPER, "title": "A toy paper", "claims": [
    {"id": "toy-1", "source": "Table 1", "statement": "The checkpoint beats BM25.", "table": "toy/table1",
     "metrics": ["R@1"], "higher": {"model": "ckpt-minilm"}, "lower": {"model": "bm25"}}]}
SETTINGS = {"dataset": "enwiki-mini", "split": "5-95", "models": ["bm25", "ckpt-minilm"]}
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["dataset", "split", "models"],
          "properties": {"dataset": {"type": "string"}, "split": {"type": "string"},
                         "models": {"type": "array", "items": {"type": "string"}}}}


WHERE = {"tests/fixtures/tiny.yaml": "fixtures/tiny.yaml"}   # the copy's tiny profile, as the tiny tests read it
# each profile: the toy's dataset and split there
PROFILES = {"mini": ([], "enwiki-mini", "5-95"), "tiny": (["--configfile", "fixtures/tiny.yaml"], "enwiki-mini", "50-50"),
            "paper": (["--configfile", "config/paper.yaml"], "squad", "5-95")}


def edit(path: Path, change) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(change(path.read_text() if path.exists() else ""))


def add_paper(work: Path) -> set[str]:
    """The throwaway paper through each file a new paper touches; those files' paths."""
    touched = {
        "data/papers/papers.yaml": lambda t: yaml.safe_dump({"papers": [*yaml.safe_load(t)["papers"], {
            "id": PAPER, "title": "A toy paper", "docs": "docs/toy.md", "rules": "workflow/rules/toy.smk",
            "values": "data/papers/toy.csv", "claims": "data/papers/toy.claims.yaml",
            "tables": [{"path": "results/toy/table1.csv"}], "figures": []}]}, sort_keys=False),
        "data/papers/toy.csv": lambda _: "table,model,metric,value\ntable1,bm25,R@1,0.5\n",
        "data/papers/toy.claims.yaml": lambda _: yaml.safe_dump(CLAIMS),
        "docs/toy.md": lambda _: "# A toy paper\n",
        "params.yaml": lambda t: t.replace("papers: [chang2020, quadrupletbert, repbert, ltre]",
                                           "papers: [chang2020, quadrupletbert, repbert, ltre, toy]")
            + "\n" + yaml.safe_dump({PAPER: SETTINGS}),
        "workflow/schemas/params.schema.yaml": lambda t: yaml.safe_dump(
            {**(schema := yaml.safe_load(t)), "properties": {**schema["properties"], PAPER: SCHEMA}}),
        "config/paper.yaml": lambda t: t + "\n" + yaml.safe_dump({PAPER: {"dataset": "squad"}}),
        "tests/fixtures/tiny.yaml": lambda t: t + "\n" + yaml.safe_dump({PAPER: {"split": "50-50"}}),
        "workflow/rules/toy.smk": lambda _: RULES,
        "src/towers/plan/toy.py": lambda _: PLAN,
        "src/towers/reports/toy.py": lambda _: REPORT,
    }
    for name, change in touched.items():
        edit(work / WHERE.get(name, name), change)
    return set(touched)


def listed_files() -> set[str]:
    """The files docs/workflow.md lists for a fifth paper (<paper> read as the toy's id), dvc.yaml aside."""
    text = (ROOT / "docs/workflow.md").read_text()
    section = text.split("A fifth paper touches", 1)[1].split("\n\n", 1)[0]
    paths = set(re.findall(r"`((?:[a-z_]+/)+[A-Za-z0-9_.<>-]+\.[a-z]+|[a-z]+\.yaml)`", section))   # files
    return {p.replace("<paper>", PAPER) for p in paths} - {"dvc.yaml", "tests/workflow/test_fifth_paper.py"}


def snakemake(work: Path, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(work / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "snakemake", *map(str, args)], cwd=work, capture_output=True,
                          text=True, env=env)


def test_a_fifth_paper_needs_the_listed_files_and_no_other(tmp_path):
    (tmp_path / "w").mkdir()
    work = fresh_copy(tmp_path / "w")
    shutil.copytree(FIXTURES, work / "fixtures")
    touched = add_paper(work)
    assert touched == listed_files()
    for name, (overlay, dataset, split) in PROFILES.items():
        plan = snakemake(work, "all", "results/claims.csv", "check", "-n", "-p", "--forceall", *overlay)
        assert plan.returncode == 0, (name, plan.stderr[-3000:])
        counts = job_counts(plan.stdout)
        assert counts["toy_table"] == 1 and counts["chang2020_table"] == 3, (name, counts)
        command = next(line for line in plan.stdout.splitlines() if "-m towers toy-table " in line)
        assert "--table table1 --paper data/papers/toy.csv" in command
        assert f"--option dataset={dataset} " in command and f"evaluation queries of {dataset}" in command, command
        assert f"artifacts/{dataset}/eval/ckpt-minilm/{split}/flat.json" in command, (name, command)
        assert plan.stdout.count("--table toy/table1=results/toy/table1.csv") == 2, name   # the claims and the check
        assert "data/papers/toy.claims.yaml" in plan.stdout, name   # claims.papers names it
    checker.load_claims(work / "data/papers/toy.claims.yaml", work / "workflow/schemas/claims.schema.yaml")
    # the stage is there to run, and dvc.yaml (make dvc-yaml) takes the table from papers.yaml
    stage = subprocess.run([sys.executable, "-m", "towers", "toy-table", "--help"], cwd=work, capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(work / "src")})
    assert stage.returncode == 0 and "--row" in stage.stdout, stage.stderr[-2000:]
    dvc = subprocess.run([sys.executable, "-c", "from towers.ops.ci import dvc_yaml; from towers.reports import papers; "
                          "print(dvc_yaml(papers.load(), []))"], cwd=work, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(work / "src")})
    assert dvc.returncode == 0 and "results/toy/${item}.csv" in dvc.stdout, dvc.stderr[-2000:]
