"""CI that reuses what is built (.github/workflows/metrics.yml): `make cache-pull`, `make metrics-diff`, `make cache-push`
with CI_CACHE, the folder CI's cache carries between runs. Played here without a hosted CI: clones of one repository
share one CI_CACHE folder, the first builds the tiny profile and pushes, the second changes LTRe's learning rate,
pulls, reruns only LTRe's jobs and diffs its metrics against the first's commit."""
import base64
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from towers.ops.ci import snakemake_stages
from towers.config.params_check import merge_configs
from benchmarks.workflow_harness import job_counts, planned_jobs

from conftest import FIXTURES, ROOT
from test_workflow import copy_workflow

VENV = Path(sys.executable).parents[1]
DVC = Path(sys.executable).with_name("dvc")
GIT = ["git", "-c", "user.name=ci", "-c", "user.email=ci@example.org"]


def sh(cwd, *args) -> str:
    done = subprocess.run(list(map(str, args)), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert done.returncode == 0, f"{' '.join(map(str, args))}:\n{done.stdout[-4000:]}"
    return done.stdout


def make(cwd, target, cache, *variables) -> str:
    """A Makefile target as CI runs it, with the venv that runs these tests (-o: never rebuilt from here)."""
    return sh(cwd, "make", "--no-print-directory", "-o", ".venv/.installed", target, f"CI_CACHE={cache}", *variables)


def clone(origin: Path, dest: Path) -> Path:
    sh(origin.parent, "git", "clone", "-q", origin, dest)
    (dest / ".venv").symlink_to(VENV)   # ignored by git, as a CI runner's restored venv
    return dest


# --- the cache folder on a hand-made build (DVC only, no Snakemake) ------------------------------------------------

def record(root: Path, output: str, end: float) -> None:
    """A Snakemake metadata record of `output`, as Snakemake names and writes it (towers.ops.cache reads endtime)."""
    path = root / ".snakemake/metadata" / base64.urlsafe_b64encode(output.encode()).decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"endtime": end, "params": [], "code": None}))


def ci(cwd, action, cache) -> str:
    return sh(cwd, sys.executable, "-m", "towers.ops.ci", action, "--folder", cache)


@pytest.fixture
def project(tmp_path):
    """A git + DVC repository with nothing pushed yet, and a clone's worth of 'built' artifacts in it."""
    work = tmp_path / "work"
    work.mkdir()
    sh(work, "git", "init", "-q")
    sh(work, DVC, "init", "-q")
    shutil.copy(ROOT / ".dvc/config", work / ".dvc/config")   # no analytics, no update check
    (work / ".gitignore").write_text("artifacts/\n.snakemake/\n")
    sh(work, *GIT, "add", "-A")
    sh(work, *GIT, "commit", "-qm", "project")
    return work


def test_a_first_ci_run_finds_no_build_and_builds_everything(project, tmp_path):
    out = ci(project, "cache-pull", tmp_path / "ci-cache")
    assert "no pushed build yet" in out and not (project / "artifacts").exists()


def test_the_cache_folder_carries_a_build_and_its_records_to_a_fresh_clone(project, tmp_path):
    cache = tmp_path / "ci-cache"
    model = project / "artifacts/d/model.bin"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"weights")
    (project / "results").mkdir()
    (project / "results/table.csv").write_text("a table, committed in git\n")
    sh(project, *GIT, "add", "results")
    sh(project, *GIT, "commit", "-qm", "the table")
    record(project, "artifacts/d/model.bin", end=1_700_000_000.0)
    record(project, "results/table.csv", end=1_700_000_100.0)
    record(project, "results/gone.csv", end=1_700_000_200.0)   # an output no longer there: its record stays behind
    assert "provenance of 2 outputs" in ci(project, "cache-push", cache)
    assert (cache / "artifacts.dvc").is_file() and (cache / "remote").is_dir()   # no remote named: the folder's own

    fresh = tmp_path / "fresh"
    sh(tmp_path, "git", "clone", "-q", project, fresh)
    assert "restored the provenance of 2 outputs" in ci(fresh, "cache-pull", cache)
    assert (fresh / "artifacts/d/model.bin").read_bytes() == b"weights"
    # each output's time is its job's end, as where it was built; the table's record judges the table from git
    assert (fresh / "artifacts/d/model.bin").stat().st_mtime == 1_700_000_000.0
    assert (fresh / "results/table.csv").stat().st_mtime == 1_700_000_100.0
    names = {path.name for path in (fresh / ".snakemake/metadata").iterdir()}
    assert names == {base64.urlsafe_b64encode(f.encode()).decode() for f in ("artifacts/d/model.bin", "results/table.csv")}


def test_a_pull_dates_project_files_at_their_last_commit_not_the_clone(project, tmp_path):
    """A fresh clone's checkout is newer than the pulled build: dated at their commits, the sources an old build read
    stay older than its outputs, and only what a later commit changed looks newer."""
    from towers.ops.cache import restore_source_times

    (project / "data/set").mkdir(parents=True)
    (project / "data/set/old.tsv").write_text("1\n")
    (project / "data/set/new.tsv").write_text("2\n")
    sh(project, *GIT, "add", "-A")
    sh(project, "env", "GIT_COMMITTER_DATE=@1600000000 +0000", *GIT, "commit", "-qm", "both")
    (project / "data/set/new.tsv").write_text("3\n")
    sh(project, *GIT, "add", "-A")
    sh(project, "env", "GIT_COMMITTER_DATE=@1700000000 +0000", *GIT, "commit", "-qm", "one changed")
    fresh = tmp_path / "fresh"
    sh(tmp_path, "git", "clone", "-q", project, fresh)
    (fresh / ".gitignore").write_text("edited here\n")   # an edit not committed keeps its own time
    edited = (fresh / ".gitignore").stat().st_mtime
    assert restore_source_times(fresh) >= 2
    assert (fresh / "data/set/old.tsv").stat().st_mtime == 1_600_000_000
    assert (fresh / "data/set/new.tsv").stat().st_mtime == 1_700_000_000
    assert (fresh / "data/set").stat().st_mtime == 1_700_000_000   # a folder: its latest file
    assert (fresh / ".gitignore").stat().st_mtime == edited
    assert restore_source_times(tmp_path) == 0   # not a checkout: nothing dated, no error


def test_a_push_keeps_only_the_latest_build_in_the_folders_own_remote(project, tmp_path):
    cache = tmp_path / "ci-cache"
    model = project / "artifacts/d/model.bin"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"first weights")
    ci(project, "cache-push", cache)
    model.write_bytes(b"second weights, retrained")
    ci(project, "cache-push", cache)
    stored = [p for p in (cache / "remote").rglob("*") if p.is_file()]
    contents = {p.read_bytes() for p in stored}
    assert b"second weights, retrained" in contents and b"first weights" not in contents


def test_metrics_diff_builds_every_table_stage_of_dvc_yaml():
    """make metrics-diff builds the outputs of dvc.yaml's Snakemake stages in one run and records them with `dvc
    commit`: every stage must be one (a stage that is not would still run, through `dvc repro` after it)."""
    stages = snakemake_stages(ROOT)
    declared = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    expected = {f"{name}@{item}" if "foreach" in stage else name
                for name, stage in declared.items() for item in stage.get("foreach", [None])}
    assert set(stages) == expected
    assert {"results/ltre/table1.csv", "results/ltre/table1.json"} <= set(stages["ltre@table1"])


def test_dvc_yaml_is_the_one_papers_yaml_makes():
    """dvc.yaml is generated (`make dvc-yaml`): a stage for each paper's tables and figures of data/papers/papers.yaml,
    with the stage names DVC has always listed."""
    from towers.ops.ci import write_dvc_yaml
    from towers.reports import papers

    assert write_dvc_yaml(ROOT, check=True), "dvc.yaml is not what data/papers/papers.yaml makes: run `make dvc-yaml`"
    outputs = {path for paths in snakemake_stages(ROOT).values() for path in paths}
    declared = papers.load(root=ROOT)
    assert set(papers.tables(declared)) | {f["csv"] for p in declared.values() for f in p["figures"]} <= outputs
    assert {"chang2020@table1", "quadrupletbert_table1", "repbert_figures", "ltre_figure3"} <= set(snakemake_stages(ROOT))


# --- two clones, one cache, the tiny profile -------------------------------------------------------------------------

# LTRe's models and step logs, Figure 3's query-only runs (qrand, qbm25, qasync), their tables, claims and check
LTRE_OUTPUT = re.compile(r"(^|/)((ltre|qrand|qbm25|qasync)[-/]|results/ltre/)|^results/(claims|check)\.")


def tiny_project(dest: Path) -> Path:
    """The workflow with the tiny configuration as its params.yaml (dvc.yaml's stages read no --configfile), dvc.yaml,
    the Makefile and the package's sources (the stages' DVC dependencies), committed in a bare repository."""
    (dest / "work").mkdir(parents=True)
    work = copy_workflow(dest / "work")
    for name in ("dvc.yaml", "Makefile", "pyproject.toml", "requirements.txt", "requirements.lock", ".gitignore"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    params = merge_configs(yaml.safe_load((work / "params.yaml").read_text()),
                           yaml.safe_load((FIXTURES / "tiny.yaml").read_text()))
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(work, "git", "init", "-q", "-b", "main")
    sh(work, DVC, "init", "-q")
    shutil.copy(ROOT / ".dvc/config", work / ".dvc/config")
    sh(work, *GIT, "add", "-A")
    sh(work, *GIT, "commit", "-qm", "the tiny workflow")
    sh(dest, "git", "clone", "-q", "--bare", work, dest / "origin.git")
    return dest / "origin.git"


def outputs(block: str) -> list[str]:
    line = next(line for line in block.splitlines() if line.strip().startswith("output:"))
    return [path.strip() for path in line.split(":", 1)[1].split(",")]


@pytest.mark.extended   # the tiny build once (about 10 minutes on 2 cores), then LTRe's part of it again
@pytest.mark.snakemake
def test_a_changed_learning_rate_reruns_only_ltre_from_the_build_main_pushed(tmp_path):
    origin = tiny_project(tmp_path)
    cache = tmp_path / "ci-cache"

    main = clone(origin, tmp_path / "main")   # CI on main: nothing cached yet, builds everything, pushes
    assert "no pushed build yet" in make(main, "cache-pull", cache)
    first = job_counts(make(main, "metrics-diff", cache, "BASE=HEAD"))
    assert "train_ltre" in first and "pretrain_mlm" in first
    make(main, "cache-push", cache)
    sh(main, "git", "add", "results", "dvc.lock")   # the tables main commits
    sh(main, *GIT, "commit", "-qm", "tables")
    sh(main, "git", "push", "-q", "origin", "main")

    pr = clone(origin, tmp_path / "pr")   # CI on a pull request that doubles LTRe's learning rate
    params = yaml.safe_load((pr / "params.yaml").read_text())
    before = params["ltre"]["train"]["lr"]
    params["ltre"]["train"]["lr"] = before * 2
    (pr / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(pr, *GIT, "commit", "-qam", "LTRe: twice the learning rate")
    assert "restored the provenance of" in make(pr, "cache-pull", cache)

    targets = sorted({path for paths in snakemake_stages(pr).values() for path in paths})
    plan = sh(pr, sys.executable, "-m", "snakemake", *targets, "-n")
    planned = job_counts(plan)
    jobs = planned_jobs(plan)
    # LTRe at each training index and Figure 3's query-only runs train again; nothing else trains or encodes
    ltre = params["ltre"]
    assert planned["train_ltre"] == len(ltre["indexes"]) + len(set(ltre["figure3"]["methods"]) - {"ltre"})
    for rule, block in jobs:
        assert all(LTRE_OUTPUT.search(path) for path in outputs(block)), block
        reason = next(line for line in block.splitlines() if line.strip().startswith("reason:"))
        if rule == "train_ltre":
            assert "Params have changed" in reason, block
        else:   # downstream of a retrained query tower, and for no other reason
            assert reason.strip().startswith("reason: Input files updated by another job:") and "; " not in reason, block

    ran = make(pr, "metrics-diff", cache, "BASE=origin/main")
    assert job_counts(ran) == planned
    diff = (pr / "metrics-diff.md").read_text()
    params_part, metrics_part = diff.split("## dvc metrics diff", 1)
    assert re.findall(r"^\| params\.yaml +\| (\S+) ", params_part, re.M) == ["ltre.train.lr"]
    moved = re.findall(r"^\| (results/\S+) +\| (\S+) ", metrics_part, re.M)
    # LTRe's tables, and among the claims only LTRe's verdict counts
    assert all(path in {f"results/ltre/table{n}.json" for n in (1, 3, 4)} or
               path == "results/claims.json" and metric.startswith("papers.ltre.") for path, metric in moved), diff
    assert "results/ltre/table1.json" in {path for path, _ in moved}, diff   # LTRe's own row moved
    print(f"first build: {sum(first.values())} jobs {first}\nrerun: {sum(planned.values())} jobs {planned}\n{diff}")


def test_a_fresh_clone_finds_no_dvc_stage_changed():
    """dvc.lock is recorded from the tracked files alone (`make dvc-lock`): a lock hashed in a workspace counted its
    bytecode caches, and `dvc status` then called every stage's code modified in every clone."""
    from towers.ops.ci import stale_dvc_stages

    assert stale_dvc_stages(ROOT) == {}, "dvc.lock is not what a clean tree records: run `make dvc-lock`"


def test_dvc_lock_outside_a_git_checkout_is_one_line_naming_the_folder(tmp_path):
    """Issue 68: `git ls-files` failed there, ending in a CalledProcessError traceback."""
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "GIT_CEILING_DIRECTORIES": str(tmp_path.parent)}
    done = subprocess.run([sys.executable, "-m", "towers.ops.ci", "dvc-lock", "--check"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1 and done.stderr.strip() == (
        f"error: {tmp_path.resolve()}: not a git checkout; dvc.lock is recorded from the files git tracks, so run "
        "this in the project's checkout"), done.stderr[-2000:]


def test_bytecode_caches_are_no_part_of_a_code_dependency(tmp_path):
    from towers.ops.cache import dvc
    from towers.ops.ci import clean_tree

    copy = clean_tree(ROOT, tmp_path / "clone")
    before = dvc("status", "--json", cwd=copy)
    cache = copy / "src/towers/__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "ci.cpython-311.pyc").write_bytes(b"\0" * 64)
    (copy / "workflow/__pycache__").mkdir(exist_ok=True)
    (copy / "workflow/__pycache__/x.pyc").write_bytes(b"\0")
    assert dvc("status", "--json", cwd=copy) == before


def test_dvc_plots_show_draws_every_phase2_curve_and_nothing_else():
    """dvc.yaml's plots: each Table 1 run's validation checks (results/phase2/), every file a curve with its step
    and validation loss (a directory output's marker file there once made the command fail on it)."""
    shown = subprocess.run([str(Path(sys.executable).parent / "dvc"), "plots", "show", "--json"], cwd=ROOT,
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr[-2000:]
    plots = json.loads(shown.stdout)["data"]
    curves = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results/phase2").iterdir())
    qb = yaml.safe_load((ROOT / "params.yaml").read_text())["quadrupletbert"]
    assert sorted(plots) == curves and len(curves) == len(qb["datasets"]) * len(qb["splits"]) * len(qb["seeds"])
    for path, (plot,) in plots.items():
        values = plot["content"]["data"]["values"]
        assert values and all(v["step"] and v["valid loss"] for v in values), path
