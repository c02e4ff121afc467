"""The workflow after failures: a job that dies part-way through a change (a bug, a kill -9, an out-of-memory
kill) must leave nothing that looks finished, through Snakemake or `dvc repro`, so the rerun rebuilds every
table from current inputs instead of keeping or mixing in old rows.

Faults are injected from outside the product: a sitecustomize.py on PYTHONPATH kills (SIGKILL, as the
out-of-memory killer does) the one stage process whose command line holds TOWERS_TEST_KILL."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from towers.config.params_check import merge_configs as merged
from benchmarks.workflow_harness import job_counts

from conftest import ROOT
from test_workflow import copy_workflow

pytestmark = pytest.mark.snakemake   # every test here starts Snakemake (make test-fast leaves them out)

KILLER = '''import os, signal
_wanted = os.environ.get("TOWERS_TEST_KILL", "").encode()
_command = open("/proc/self/cmdline", "rb").read().split(b"\\0")
if _wanted and b"towers" in _command and _wanted in _command:
    os.kill(os.getpid(), signal.SIGKILL)
'''
TABLE2 = "results/chang2020/table2.csv"
TWO = {"datasets": {"tiny-two": {"kind": "wikipedia-qa", "dump": "fixtures/tiny-wiki.xml", "dump_sha256": "",
                                 "max_articles": 0, "questions": "fixtures/tiny-questions.tsv"}},
       "chang2020": {"table2": {"datasets": [{"name": "enwiki-mini", "paper": "squad"},
                                             {"name": "tiny-two", "paper": "nq"}]}}}


def run(cwd, *args, kill=None):
    env = dict(os.environ)
    if kill:
        (Path(cwd) / "faults").mkdir(exist_ok=True)
        (Path(cwd) / "faults" / "sitecustomize.py").write_text(KILLER)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(cwd) / "faults"), env.get("PYTHONPATH")]))
        env["TOWERS_TEST_KILL"] = kill
    return subprocess.run(list(map(str, args)), cwd=cwd, capture_output=True, text=True, env=env)


def snake(cwd, *args, kill=None):
    return run(cwd, sys.executable, "-m", "snakemake", *args, "--cores", 1, kill=kill)


@pytest.fixture(scope="module")
def two_datasets(tmp_path_factory):
    """Chang's Table 2 over two datasets of the same text, each row its own tokenizer -> statistics chain, built
    with the tiny configuration written into params.yaml (DVC tracks params.yaml), ready for `dvc repro`."""
    work = copy_workflow(tmp_path_factory.mktemp("two"))
    shutil.copy(ROOT / "dvc.yaml", work / "dvc.yaml")
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (work / ".venv/bin").mkdir(parents=True)
    (work / ".venv/bin/snakemake").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m snakemake "$@"\n')
    (work / ".venv/bin/snakemake").chmod(0o755)
    params = merged(yaml.safe_load((work / "params.yaml").read_text()),
                    yaml.safe_load((work / "fixtures/tiny.yaml").read_text()), TWO)
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = snake(work, TABLE2)
    assert done.returncode == 0, done.stderr[-3000:]
    return work


def numbers(table: pd.DataFrame) -> list[list]:
    columns = [c for c in table.columns if table[c].dtype.kind in "if" and "paper" not in c]
    return table[columns].values.tolist()


@pytest.mark.extended   # three dvc repro runs, one killed (about two minutes with its fixture)
def test_a_job_killed_during_a_params_change_leaves_no_table_to_mix_old_rows_into(two_datasets, tmp_path):
    """Through `dvc repro`, which runs Snakemake: after a failed run, the next one must neither record new params
    over the old table nor rebuild it from one new row and one left over."""
    work = tmp_path / "work"
    shutil.copytree(two_datasets, work, symlinks=True)   # copy2: file times kept, .snakemake's records too
    dvc = Path(sys.executable).with_name("dvc")
    assert run(work, dvc, "init", "--no-scm", "-q").returncode == 0
    first = run(work, dvc, "repro", "chang2020@table2")   # records the built table (Snakemake: nothing to do)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    before = numbers(pd.read_csv(work / TABLE2))
    params = (work / "params.yaml").read_text()
    (work / "params.yaml").write_text(params.replace("vocab_size: 200", "vocab_size: 120"))
    plan = snake(work, TABLE2, "-n")   # a dry run plans the change and removes nothing
    assert job_counts(plan.stdout) == {"tokenizer": 2, "reqa_statistics": 2, "reqa_table": 1}
    assert (work / TABLE2).exists() and (work / "artifacts/tiny-two/collection/table2-stats.json").exists()
    failed = run(work, dvc, "repro", "chang2020@table2", kill="artifacts/enwiki-mini/tokenizer")
    assert failed.returncode != 0
    again = run(work, dvc, "repro", "chang2020@table2")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    after = numbers(pd.read_csv(work / TABLE2))
    # both rows are the same text under the same settings: one rebuilt beside one left over would differ
    assert after[0] == after[1] and after[0] != before[0]
    assert "vocab_size: 120" in (work / "dvc.lock").read_text()
    assert "Nothing to be done" in snake(work, TABLE2, "-n").stdout
