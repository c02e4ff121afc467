"""The workflow's house rules: `snakemake --lint` finds nothing but what ALLOWED lists (each entry with the reason
it stays), and a rule is named after the stage it runs (rule build_index runs `python -m towers build-index`), so
that grepping a rule's name finds its stage and module."""
import json
import re
import subprocess
import sys

import pytest

from workflow_helpers import copy_workflow

ANY_RULE = "*"
# (lint title, rule it is allowed in, or ANY_RULE): why it stays. Snakemake has no way to silence one lint
# (no inline marker, no setting), so these are the findings the workflow keeps on purpose.
ALLOWED = {
    # Every shell command names its interpreter through one global (workflow/rules/common.smk): `<python> -m
    # towers`, or the data-parallel launcher for a training job given several GPUs. A param would do it "by the
    # book", but a command's text is its rule's code and params are recorded: either change reruns every job of
    # every existing build (every model retrained), and the venv's path would become a rerun trigger.
    ("Shell command directly uses variable TOWERS from outside of the rule", ANY_RULE):
        "the interpreter, global on purpose",
    ("Shell command directly uses variable TRAIN from outside of the rule", ANY_RULE):
        "a training job's interpreter or launcher, global on purpose",
    # the report draws the rule graph with Snakemake run by the same interpreter (PY, as TOWERS)
    ("Shell command directly uses variable PY from outside of the rule", "report"): "the interpreter",
    # the split's folder spelt with ART, the artifacts folder, in the command itself: kept as it is, since a
    # change of the command's text reruns its jobs
    ("Shell command directly uses variable ART from outside of the rule", "split_all"): "kept: a rerun trigger",
}
LINTS_FOR = re.compile(r"^Lints for (?:rule (?P<rule>\S+) \(line \d+, (?P<rule_file>[^)]+)\)|snakefile (?P<file>.+)):$")
FINDING = re.compile(r"^    \* (?P<title>.+):$")


def findings(output: str) -> list[tuple[str, str, str]]:
    """(title, rule or "", file) of each finding `snakemake --lint text` prints."""
    found, where = [], None
    for line in output.splitlines():
        if match := LINTS_FOR.match(line):
            where = (match["rule"] or "", match["rule_file"] or match["file"])
        elif (match := FINDING.match(line)) and where:
            found.append((match["title"], *where))
    return found


def allowed(title: str, rule: str) -> bool:
    return (title, rule) in ALLOWED or (bool(rule) and (title, ANY_RULE) in ALLOWED)


@pytest.mark.snakemake   # starts Snakemake (make test-fast leaves it out)
def test_the_workflow_lints_clean_but_for_the_listed_findings(tmp_path):
    work = copy_workflow(tmp_path)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "text"], cwd=work, capture_output=True,
                          text=True)
    output = done.stdout + done.stderr
    found = findings(output)
    if done.returncode == 0:
        assert "Congratulations" in output and not found, output[-3000:]
    assert found or done.returncode == 0, output[-3000:]   # a failure that is no lint (say, params) is no pass
    unexplained = [f"{title} ({rule or 'file'} in {where})" for title, rule, where in found if not allowed(title, rule)]
    assert not unexplained, "lints outside ALLOWED:\n" + "\n".join(unexplained)
    stale = [key for key in ALLOWED if key[1] != ANY_RULE and not any((t, r) == key for t, r, _ in found)]
    assert not stale, f"ALLOWED entries no finding needs any more: {stale}"


def test_findings_are_read_from_snakemakes_text():
    text = ("Lints for snakefile /w/workflow/rules/common.smk:\n"
            "    * Mixed rules and functions in same snakefile.:\n      Small one-liner functions ...\n\n"
            "Lints for rule split_all (line 33, /w/workflow/rules/zeroshot.smk):\n"
            "    * Shell command directly uses variable ART from outside of the rule:\n      It is recommended ...\n")
    assert findings(text) == [("Mixed rules and functions in same snakefile.", "", "/w/workflow/rules/common.smk"),
                              ("Shell command directly uses variable ART from outside of the rule", "split_all",
                               "/w/workflow/rules/zeroshot.smk")]
    assert allowed("Shell command directly uses variable TOWERS from outside of the rule", "tokenizer")
    assert not allowed("Shell command directly uses variable TOWERS from outside of the rule", "")
    assert not allowed("Mixed rules and functions in same snakefile.", "")


# Every rule's code (its shell, or a run block's source), read by Snakemake itself in a copy of the workflow.
RULE_CODE = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(), config_settings=ConfigSettings(),
                            storage_settings=StorageSettings(), snakefile=Path("Snakefile"))._workflow
    print(json.dumps({r.name: r.shellcmd or r.run_func_src or "" for r in workflow.rules}))
"""
STAGE = re.compile(r"\{(?:TOWERS|TRAIN)\} +([a-z0-9-]+)")


def named_after(rule: str, stage: str) -> bool:
    """build_index runs build-index; where several rules run one stage, each adds a qualifier to its name
    (encode_candidates_shard); a rule that runs a family of stages (reqa-wiki, reqa-nq, ...) is their prefix."""
    stage = stage.replace("-", "_")
    return rule == stage or rule.startswith(f"{stage}_") or stage.startswith(f"{rule}_")


@pytest.mark.snakemake   # reads the workflow with Snakemake
def test_every_rule_is_named_after_the_stage_it_runs(tmp_path):
    work = copy_workflow(tmp_path)
    done = subprocess.run([sys.executable, "-c", RULE_CODE], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    code = json.loads(done.stdout.splitlines()[-1])
    assert len(code) > 50
    stages = {rule: STAGE.findall(text) for rule, text in code.items()}
    stages["passages"] = ["passages-wiki"]   # its stage comes from params (passages-wiki, -beir, -msmarco)
    misnamed = [f"{rule}: {', '.join(found)}" for rule, found in stages.items()
                if any(not named_after(rule, stage) for stage in found)]
    assert not misnamed, "rules not named after their stage:\n" + "\n".join(misnamed)
    assert {rule for rule, found in stages.items() if not found} == {"all"}   # every other rule runs a stage


def test_rule_names_follow_their_stage():
    assert named_after("build_index", "build-index") and named_after("encode_candidates_shard", "encode-candidates")
    assert named_after("reqa", "reqa-squad") and named_after("check", "check-status")
    assert not named_after("faiss_index", "build-index") and not named_after("train_quadruplet", "train-margin")
