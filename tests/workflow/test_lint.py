"""The workflow's house rules: `snakemake --lint` finds nothing but what ALLOWED lists (each entry with the reason
it stays), and a rule is named after the stage it runs (rule build_index runs `python -m towers build-index`), so
that grepping a rule's name finds its stage and module."""
import ast
import builtins
import io
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from benchmarks.workflow_harness import ROOT, copy_workflow

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
# A rule is named after the stage it runs, exactly: rule build_index runs `python -m towers build-index`. The only
# rules that cannot be, listed with their stage. Snakemake's rule names are unique, so where a stage has a second
# rule (its command another shape, outputs of their own) that rule adds what differs; renaming the stage or
# folding the rules together would change the command, which is the rule's code and so a rerun trigger of every
# job below it in every existing build.
SECOND_RULE_OF = {
    "bm25_search_split": "bm25-search", "bm25_search_shard": "bm25-search",   # a query set's run; one part of it
    "encode_candidates_shard": "encode-candidates",                          # one part of a corpus
    "pretrain_mlm_nsp": "pretrain-mlm",                                      # with Next Sentence Prediction
    "train_margin_threet": "train-margin", "train_margin_quadbert": "train-margin",   # three towers; four
    "repbert_figure_1": "repbert-figure", "repbert_figure_2": "repbert-figure",       # measured apart (resources)
    "rerank_shard": "rerank", "merge_rerank": "merge-runs",                  # the deepest reranking's query shards
    "evaluation_qrels_passages": "evaluation-qrels",                         # a passage set's (unexposed.json too)
    # Chang et al.'s Tables 1, 2 and 5, laid out by the paper's one table stage (their names kept: their jobs)
    "pairs_table": "chang2020-table", "reqa_table": "chang2020-table", "ablation_table": "chang2020-table",
}
# Rules whose stage is their dataset's kind's (a run block, or the stage's name in params): splitting each into
# a rule a kind would change their code, and so rebuild every collection and all below it.
RULE_OF_STAGES = {"reqa": {"reqa-wiki", "reqa-nq", "reqa-squad"},
                  "passages": {"passages-wiki", "passages-beir", "passages-msmarco"}}


def named_after(rule: str, stage: str) -> bool:
    """build_index runs build-index: the rule's name is the stage's, '-' read as '_'; no prefix or suffix passes
    but the listed exceptions."""
    return rule == stage.replace("-", "_") or SECOND_RULE_OF.get(rule) == stage or stage in RULE_OF_STAGES.get(rule, ())


@pytest.mark.snakemake   # reads the workflow with Snakemake
def test_every_rule_is_named_after_the_stage_it_runs(tmp_path):
    work = copy_workflow(tmp_path)
    done = subprocess.run([sys.executable, "-c", RULE_CODE], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    code = json.loads(done.stdout.splitlines()[-1])
    assert len(code) > 50
    stages = {rule: STAGE.findall(text) for rule, text in code.items()}
    assert stages["passages"] == []   # its stage comes from params (towers.plan.datasets.passage_command)
    stages["passages"] = sorted(RULE_OF_STAGES["passages"])
    misnamed = [f"{rule}: {', '.join(found)}" for rule, found in stages.items()
                if any(not named_after(rule, stage) for stage in found)]
    assert not misnamed, "rules not named after their stage:\n" + "\n".join(misnamed)
    assert {rule for rule, found in stages.items() if not found} == {"all"}   # every other rule runs a stage
    stale = {rule for rule in {**SECOND_RULE_OF, **RULE_OF_STAGES} if rule not in stages}
    assert not stale, f"exceptions for rules that are gone: {stale}"
    assert set(stages["reqa"]) == RULE_OF_STAGES["reqa"]


def test_rule_names_follow_their_stage_and_nothing_else():
    assert named_after("build_index", "build-index") and named_after("chang2020_table", "chang2020-table")
    assert named_after("check", "check") and named_after("check_cells", "check-cells")
    assert named_after("encode_candidates_shard", "encode-candidates") and named_after("reqa", "reqa-squad")
    # what the prefix match once let through
    assert not named_after("table_chang2020_3", "table") and not named_after("seeded_table_1", "seeded-table")
    assert not named_after("check", "check-status") and not named_after("check_cells", "check")
    assert not named_after("encode_candidates_more", "encode-candidates") and not named_after("reqa", "reqa-open")
    assert not named_after("faiss_index", "build-index") and not named_after("train_quadruplet", "train-margin")


# --- rule files hold rules, and every name they use is their own --------------------------------------------

# What Snakemake gives every Snakefile: its config and workflow, and the functions of its directives
SNAKEMAKE_NAMES = {"config", "workflow", "rules", "checkpoints", "shell", "local", "temp", "directory", "unpack",
                   "protected", "ancient", "expand", "touch", "pipe", "service", "multiext", "storage"}
SHELL_FIELD = re.compile(r"(?<!{){([A-Z][A-Z0-9_]*)}")   # a global in a command: {TOWERS}, {TRAIN}, {ART}


def python_of(path: Path) -> str:
    """A Snakemake file as the Python Snakemake makes of it (its rules as functions named __rule_<name>)."""
    from snakemake.parser import parse
    from snakemake.sourcecache import LocalSourceFile

    class Cache:
        def open(self, source):
            return io.StringIO(Path(source.get_path_or_uri(secret_free=True)).read_text())

    return parse(LocalSourceFile(str(path)), types.SimpleNamespace(sourcecache=Cache()), {})[0]


def foreign_names(path: Path) -> tuple[list[str], list[str]]:
    """(the names a Snakemake file uses that it neither imports nor assigns, Snakemake's own and Python's aside,
    shell fields such as {TOWERS} included; the functions it defines)."""
    tree = ast.parse(python_of(path))
    bound, functions = set(SNAKEMAKE_NAMES) | set(dir(builtins)), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
            if not node.name.startswith("__"):   # Snakemake's own: __rule_<name>, the onstart handler
                functions.append(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    used |= {field for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
             for field in SHELL_FIELD.findall(node.value)}
    return sorted(used - bound), functions


SNAKEMAKE_FILES = [ROOT / "Snakefile", *sorted((ROOT / "workflow/rules").glob("*.smk"))]


@pytest.mark.parametrize("path", SNAKEMAKE_FILES, ids=lambda p: p.name)
def test_a_rule_file_defines_no_function_and_uses_no_name_it_does_not_import(path):
    """The planning is towers.plan's (unit-tested there); a rule file asks for it by name, so that what it uses is
    found in the file itself, not in whichever file Snakemake happened to include before it."""
    foreign, functions = foreign_names(path)
    assert not foreign, f"{path.name} uses names it neither imports nor defines: {foreign}"
    assert not functions, f"{path.name} defines functions (towers.plan is their place): {functions}"
    assert not (ROOT / "workflow/helpers").exists()


def test_the_name_check_sees_a_borrowed_name_a_shell_global_and_a_function(tmp_path):
    rules = tmp_path / "x.smk"
    rules.write_text("from towers.plan import Plan\n\nplan = Plan.of(workflow)\n\ndef helper(w):\n    return 1\n\n"
                     "rule x:\n    input: collection('d'), plan.data.dump_inputs\n    output: 'o'\n"
                     "    shell: '{TOWERS} x {input} {output} {params.a}'\n")
    assert foreign_names(rules) == (["TOWERS", "collection"], ["helper"])
