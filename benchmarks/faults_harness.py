"""What every group of fault cases (benchmarks.faults) shares: the workspace built once on the tiny profile, the
classification of an outcome, and small edits of files."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TINY = ["--configfile", "fixtures/tiny.yaml"]
CHANG3 = "results/chang2020/table3.csv"
CHANG2 = "results/chang2020/table2.csv"
LTRE_MODEL = "artifacts/enwiki-mini-passages/dense/ltre-bm25-flat/dev/model"
MLM_MODEL = "artifacts/enwiki-mini/dense/transformer-mlm-l1-d16/50-50/model"
KILLER = '''import os, signal
_wanted = os.environ.get("TOWERS_FAULT_KILL", "").encode()
_command = open("/proc/self/cmdline", "rb").read().split(b"\\0")
if _wanted and b"towers" in _command and _wanted in _command:
    _after = float(os.environ.get("TOWERS_FAULT_AFTER", "0"))
    if _after:   # die part-way, as an out-of-memory kill would
        import threading
        threading.Timer(_after, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    else:
        os.kill(os.getpid(), signal.SIGKILL)
'''
INFO = re.compile(r"^(Config file .* is extended|Building DAG|Assuming unrestricted|Using shell|Provided cores|"
                  r"Rules claiming|Select jobs|Job stats|host:|Nothing to be done|Complete log|$)")
FRAME = re.compile(r'^\s*File ".*", line \d+')


class Workspace:
    """The fresh copy the cases run in: the workflow, a snapshot of src/, the fixtures, built once."""

    def __init__(self, root: Path, src: Path):
        self.root, self.src = root, src

    def env(self, kill: str | None = None, after: float = 0.0, extra: dict | None = None) -> dict:
        env = {**os.environ, "PYTHONPATH": str(self.src)}
        if kill:
            faults = self.root.parent / "faults"
            faults.mkdir(exist_ok=True)
            (faults / "sitecustomize.py").write_text(KILLER)
            env.update(PYTHONPATH=f"{faults}{os.pathsep}{self.src}", TOWERS_FAULT_KILL=kill,
                       TOWERS_FAULT_AFTER=str(after))
        return {**env, **(extra or {})}

    def run(self, cmd, cwd=None, kill=None, after=0.0, timeout=5400, extra=None) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(list(map(str, cmd)), cwd=cwd or self.root, capture_output=True, text=True,
                                  env=self.env(kill, after, extra), timeout=timeout)
        except subprocess.TimeoutExpired as err:
            return subprocess.CompletedProcess(err.cmd, 124, err.stdout or "", f"timed out after {timeout} s")

    def snake(self, *args, cwd=None, **kw):
        return self.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, **kw)

    def stage(self, *args, cwd=None, **kw):
        return self.run([sys.executable, "-m", "towers", *args], cwd=cwd, **kw)

    def clone(self, dest: Path) -> Path:
        """A copy of the built workspace: file times and Snakemake's records kept, so it plans as the original."""
        shutil.copytree(self.root, dest, symlinks=True)
        return dest


def error_lines(result) -> list[str]:
    return [l for l in (result.stdout + "\n" + result.stderr).splitlines() if not INFO.match(l.strip())]


def classify_failure(result, names: list[str], outputs=(), marker: Path | None = None) -> tuple[str, str]:
    """The class of a case expected to fail, and its telling message.

    Clear: a one-line `error: ...` (a stage's, or the params check's) naming the bad file or key, also when
    Snakemake reports the failed job around it; or a short message (Snakemake's missing-input report) naming
    it. A schema dump that names the key somewhere in 900 lines is not clear."""
    text = result.stdout + "\n" + result.stderr
    lines = error_lines(result)
    last = lines[-1].strip() if lines else ""
    names = [str(n) for n in names if n]
    if marker is not None and marker.exists():
        return "injection executed", last
    if result.returncode == 0:
        return "silent wrong result", last
    left = [str(p) for p in outputs if Path(p).exists()]
    if left:
        return "partial output", f"left {left[0]}"
    if "Traceback (most recent call last)" in text or any(FRAME.match(l) for l in lines):
        return "traceback", last[:300]
    one_liners = [l.strip() for l in lines if l.strip().startswith("error: ") and any(n in l for n in names)]
    if one_liners:
        return "clear error", one_liners[-1][:300]
    if len(lines) <= 12 and any(n in l for l in lines for n in names):
        return "clear error", last[:300]
    return "unclear error", f"{last[:240]} ({len(lines)} lines)"


def build(home: Path, src: Path, cores: int) -> Workspace:
    from .workflow_harness import copy_workflow

    root = home / "work"
    root.mkdir()
    copy_workflow(root, src.parent)
    shutil.copytree(src.parent / "tests/fixtures", root / "fixtures")
    shutil.copy(src.parent / "dvc.yaml", root / "dvc.yaml")
    ws = Workspace(root, src)
    done = ws.snake(CHANG2, CHANG3, LTRE_MODEL, *TINY, "--cores", cores, timeout=5400)
    if done.returncode != 0:
        sys.exit(f"faults: the base workspace did not build\n{done.stderr[-3000:]}")
    return ws


def cut(path: Path, fraction: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * fraction)])


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise RuntimeError(f"{path} no longer holds {old!r}")
    path.write_text(text.replace(old, new))


def bounded(outcome: tuple[str, str], result, limit: int = 400) -> tuple[str, str]:
    """A clear error whose output runs past `limit` characters a line is not clear."""
    longest = max((len(l) for l in (result.stdout + "\n" + result.stderr).splitlines()), default=0)
    if outcome[0] == "clear error" and longest > limit:
        return "unclear error", f"a line of {longest:,} characters"
    return outcome


def chang_row(evaluation, **fields) -> str:
    """A --row of Chang et al.'s Table 3 (the table stage's JSON object); a field given as None is left out."""
    row = {"split": "50-50", "encoder": "BM-25", "pretraining": "No Pretraining", "eval": str(evaluation), **fields}
    return json.dumps({k: v for k, v in row.items() if v is not None})
