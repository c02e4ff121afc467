"""Values that reach the shell: quoted every time (a virtualenv path or a local model folder with a space), and
anything that could run a command refused before planning."""
import shlex
import subprocess

import pytest
import yaml

from benchmarks.workflow_harness import planned_jobs, spaced_python

from test_workflow import copy_workflow, snakemake


pytestmark = pytest.mark.snakemake   # every test here starts Snakemake (make test-fast leaves them out)


def commands(plan: str) -> dict[str, list[list[str]]]:
    """rule -> the argument lists of its planned shell commands (`snakemake -n -p`)."""
    found: dict[str, list[list[str]]] = {}
    for rule, block in planned_jobs(plan):
        for line in block.splitlines():
            if line.startswith("Shell command: "):
                found.setdefault(rule, []).append(shlex.split(line.removeprefix("Shell command: ")))
    return found


def value_after(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_an_injection_through_params_is_refused_and_never_runs(tmp_path):
    work = copy_workflow(tmp_path)
    (work / "fixtures/evil.yaml").write_text("tokenizer: {hub_model: \"x'$(touch pwned)'\"}\n")
    done = snakemake(work, "artifacts/enwiki-mini/tokenizer", "--configfile", "fixtures/tiny.yaml",
                     "fixtures/evil.yaml", "--cores", 1)
    assert done.returncode != 0 and not (work / "pwned").exists()
    assert done.stderr.strip().splitlines()[-1].startswith("error: fixtures/evil.yaml: tokenizer.hub_model: ")


def test_model_folders_and_factory_strings_reach_the_stage_as_one_argument(tmp_path):
    work = copy_workflow(tmp_path)
    overlay = {"ltre": {"start_hub_model": "my models/roberta"},
               "repbert": {"reranker": {"hub_model": "my models/monobert"}},
               "faiss": {"indexes": {"flat": "Flat", "ivf": "IVF2(Flat),SQ8"}}}
    (work / "fixtures/spaces.yaml").write_text(yaml.safe_dump(overlay))
    plan = snakemake(work, "results/ltre/table1.csv", "results/repbert/table2.csv", "results/table1.csv",
                     "--configfile", "fixtures/tiny.yaml", "fixtures/spaces.yaml", "-n", "-p")
    assert plan.returncode == 0, plan.stderr[-2000:]
    planned = commands(plan.stdout)
    assert {value_after(c, "--start") for c in planned["train_negatives"] if "neg-rand" in " ".join(c)} == \
        {"my models/roberta"}
    assert {value_after(c, "--model") for c in planned["rerank_shard"] if "--model" in c} == {"my models/monobert"}
    assert "IVF2(Flat),SQ8" in {value_after(c, "--factory") for c in planned["build_index"]}


def test_a_virtualenv_path_with_a_space_runs_the_jobs(tmp_path):
    """{PY} is the interpreter Snakemake runs in; its path is quoted in every job."""
    python = spaced_python(tmp_path)
    (tmp_path / "work").mkdir()
    work = copy_workflow(tmp_path / "work")
    done = subprocess.run([str(python), "-m", "snakemake", "artifacts/enwiki-mini/corpus/stats.json",
                           "--configfile", "fixtures/tiny.yaml", "--cores", "1"], cwd=work, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (work / "artifacts/enwiki-mini/corpus/articles.jsonl").stat().st_size > 0
