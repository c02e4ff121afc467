"""Artifacts shared through a DVC remote (towers.ops.cache): a second clone pulls instead of rebuilding, and
a pulled artifact whose parameters changed there is rebuilt, not mistaken for a current one."""
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.workflow_harness import job_counts

from test_workflow import copy_workflow, snakemake

ENCODER = "artifacts/enwiki-mini/encoders/mlm"
TINY = ["--configfile", "fixtures/tiny.yaml"]


def sh(cwd, *args):
    done = subprocess.run(list(map(str, args)), cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    return done.stdout


def cache(cwd, action):
    return sh(cwd, sys.executable, "-m", "towers.ops.cache", action)


def dvc(cwd, *args):
    return sh(cwd, Path(sys.executable).with_name("dvc"), *args)


@pytest.mark.extended   # DVC push and pull around two Snakemake runs (about a minute)
@pytest.mark.snakemake
def test_pulled_artifacts_are_reused_and_rebuilt_when_their_params_change(tmp_path):
    (tmp_path / "first").mkdir()
    first = copy_workflow(tmp_path / "first")
    sh(first, "git", "init", "-q")
    dvc(first, "init", "-q")
    dvc(first, "remote", "add", "-d", "shared", tmp_path / "remote")
    sh(first, "git", "add", "-A")
    sh(first, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "workflow")
    built = snakemake(first, ENCODER, *TINY, "--cores", 2)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "pushed artifacts/" in cache(first, "push")
    sh(first, "git", "add", "artifacts.dvc", ".gitignore")
    sh(first, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "artifacts")

    second = tmp_path / "second"
    sh(tmp_path, "git", "clone", "-q", first, second)
    assert not (second / ENCODER).exists()
    assert "restored the provenance of" in cache(second, "pull")
    assert (second / ENCODER / "model.safetensors").is_file()
    plan = snakemake(second, ENCODER, *TINY, "-n")
    assert "Nothing to be done" in plan.stdout, plan.stdout[-2000:]

    tiny = second / "fixtures" / "tiny.yaml"
    tiny.write_text(tiny.read_text().replace("pretrain_mlm: {steps: 4,", "pretrain_mlm: {steps: 6,"))
    plan = snakemake(second, ENCODER, *TINY, "-n")
    assert job_counts(plan.stdout) == {"pretrain_mlm": 1}   # the parsed corpus and tokenizer stay pulled
    assert "Params have changed" in plan.stdout


def test_pull_without_a_pushed_version_says_so(tmp_path):
    done = subprocess.run([sys.executable, "-m", "towers.ops.cache", "pull"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode != 0 and "artifacts.dvc: missing" in done.stderr


def test_metrics_diff_lists_changed_params_and_metrics_against_a_revision(tmp_path):
    """`make metrics-diff`'s diff half (towers.ops.ci) on a one-stage DVC project: a params edit and the metric
    it moved both show against HEAD, in the output and in metrics-diff.md."""
    sh(tmp_path, "git", "init", "-q")
    dvc(tmp_path, "init", "-q")
    (tmp_path / "params.yaml").write_text("bm25: {k1: 0.9}\n")
    (tmp_path / "table.json").write_text('{"RR@10": 0.5}\n')
    (tmp_path / "dvc.yaml").write_text("stages:\n  table:\n    cmd: 'true'\n    params: [bm25.k1]\n"
                                       "    metrics: [{table.json: {cache: false}}]\n")
    sh(tmp_path, "git", "add", "-A")
    sh(tmp_path, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (tmp_path / "params.yaml").write_text("bm25: {k1: 1.2}\n")
    (tmp_path / "table.json").write_text('{"RR@10": 0.75}\n')
    out = sh(tmp_path, sys.executable, "-m", "towers.ops.ci", "metrics-diff", "--base", "HEAD", "--no-repro")
    assert "bm25.k1" in out and "0.9" in out and "1.2" in out
    assert "RR@10" in out and "0.5" in out and "0.75" in out
    assert (tmp_path / "metrics-diff.md").read_text().strip() == out.strip()


def test_a_push_stores_what_the_cache_selects_and_nothing_it_leaves_out(tmp_path):
    """DVC, through the .dvcignore patterns cache.ensure_dvcignore writes, stores exactly the files
    cache.excluded keeps: not training resume state, temporary shards or unfinished writes."""
    import json

    from towers.ops import cache

    sh(tmp_path, "git", "init", "-q")
    dvc(tmp_path, "init", "-q")
    files = ["d/encoders/mlm/model.safetensors", "d/dense/m/dev/candidates.npy", "d/dense/m/dev/index-flat.faiss",
             "d/dense/m/dev/shards/0.npy", "d/dense/m/dev/shards/0.ids", "d/bm25/dev/train-d200.shards/1.trec",
             "d/bm25/dev/train-d200.trec", "d/train-state/m-dev/checkpoint.pt", "d/dense/m/dev/.run.trec.tmp42",
             "profile-mini.json"]
    for i, name in enumerate(files):
        (tmp_path / "artifacts" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "artifacts" / name).write_text("x" * (i + 1))
    assert cache.ensure_dvcignore(tmp_path) and not cache.ensure_dvcignore(tmp_path)
    dvc(tmp_path, "add", "-q", "artifacts")
    listing = next((tmp_path / ".dvc" / "cache").rglob("*.dir"))
    stored = sorted(entry["relpath"] for entry in json.loads(listing.read_text()))
    kept = sorted(name for name in files if not cache.excluded(Path(name)))
    assert stored == kept and len(kept) == 5
    assert cache.selected(tmp_path) == (5, sum(i + 1 for i, name in enumerate(files) if name in kept))
