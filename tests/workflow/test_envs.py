"""The conda route: environment files that conda can read from Snakemake's copy of them, and the post-deploy
step that installs the project itself from the repository root (run here with a stand-in python)."""
import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ENVS = sorted((ROOT / "envs").glob("*.yaml"))


def test_every_environment_parses_and_names_no_path_that_only_works_beside_the_repository():
    assert {p.stem for p in ENVS} == {"cpu", "gpu", "java"}
    for path in ENVS:
        env = yaml.safe_load(path.read_text())
        assert env["name"] == f"towers-{path.stem}" and "conda-forge" in env["channels"]
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
        assert any(p.startswith("torch==") for p in pip) and any(p.startswith("faiss-") for p in pip)
        # Snakemake creates the environment from a copy under .snakemake/conda/: '..' would not be the repository
        assert not [p for p in pip if p.startswith(("-r", "-c", "-e")) or ".." in p], path
        deploy = path.with_suffix(".post-deploy.sh")
        assert deploy.resolve() == ROOT / "envs/install-project.sh" and os.access(deploy, os.X_OK)


def fake_python(tmp_path) -> Path:
    """A python that only records its arguments (one call a line)."""
    shim = tmp_path / "python"
    shim.write_text(f'#!/usr/bin/env bash\necho "$*" >> {tmp_path / "calls.txt"}\n')
    shim.chmod(0o755)
    return shim


def test_the_post_deploy_step_installs_the_project_from_the_working_directory(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHON"}, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    fake_python(tmp_path)
    done = subprocess.run(["bash", str(ROOT / "envs/cpu.post-deploy.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert "-m pip install -q -r requirements.txt -c requirements.lock" in calls
    assert "-m pip install -q --no-deps -e ." in calls
    assert all((ROOT / name).is_file() for name in ("requirements.txt", "requirements.lock", "pyproject.toml"))
    # run from anywhere else: one line saying where it is and what to do, and nothing installed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "calls.txt").unlink()
    done = subprocess.run(["bash", str(ROOT / "envs/cpu.post-deploy.sh")], cwd=elsewhere, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 1 and not (tmp_path / "calls.txt").exists()
    assert done.stderr.strip().splitlines() == [f"error: {elsewhere}: not the repository root (no "
                                                "envs/install-project.sh here); run Snakemake from it"]
