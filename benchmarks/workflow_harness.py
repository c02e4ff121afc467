"""Running the workflow from tests and benchmarks (imported as benchmarks.workflow_harness): a fresh copy to run in
(with or without a snapshot of src/), a command timed, a clean run of some targets and its outputs kept, the jobs
of a Snakemake plan, a run watched for its own CPU and threads, and the benchmarks' results file
(benchmarks/results.json), kept through record()."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results.json"
WORKFLOW_FILES = ("Snakefile", "params.yaml", "workflow", "data", "config", "profiles", "envs")


def copy_workflow(dest: Path, root: Path = ROOT) -> Path:
    """The workflow's own files (not artifacts, results or downloads) copied into `dest`."""
    for name in WORKFLOW_FILES:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("raw"))
        else:
            shutil.copy(source, dest / name)
    return dest


def fresh_copy(dest, root: Path = ROOT) -> Path:
    """The workflow and a snapshot of src/ in `dest`: the copy's stages import that snapshot (put it first on
    PYTHONPATH), so code edited in the checkout during a long benchmark does not leak into it."""
    dest = Path(dest)
    copy_workflow(dest, root)
    shutil.copytree(root / "src", dest / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return dest


def job_counts(output: str) -> dict[str, int]:
    """Jobs per rule from the 'Job stats' table that `snakemake -n` prints."""
    table = output.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}


def planned_jobs(output: str) -> list[tuple[str, str]]:
    """(rule, the job's block of text) for every job a `snakemake -n` plan prints, in its order."""
    return [(block.split(":", 1)[0], block) for block in output.split("\nrule ")[1:]]


def spaced_python(folder: Path) -> Path:
    """This virtual environment again under `folder`/"my env" (links to its interpreter and libraries): the
    interpreter of a venv whose path holds a space, for the workflow's quoting."""
    import sys

    venv, spaced = Path(sys.prefix), Path(folder) / "my env"
    (spaced / "bin").mkdir(parents=True)
    (spaced / "bin/python").symlink_to(Path(sys.executable))
    (spaced / "lib").symlink_to(venv / "lib")
    shutil.copy(venv / "pyvenv.cfg", spaced / "pyvenv.cfg")
    return spaced / "bin/python"


def write_results(results: dict, path: Path | None = None) -> None:
    """benchmarks/results.json (or `path`) written whole or not at all (a run killed mid-write keeps the old file).
    RESULTS is read when called, so a test that points it elsewhere is obeyed."""
    from towers.io import atomic_path

    with atomic_path(path or RESULTS) as tmp:
        Path(tmp).write_text(json.dumps(results, indent=2) + "\n")


def refuse(subject, problem: str) -> NoReturn:
    """Stop a benchmark on bad input with one line naming the file or argument and its problem (no traceback)."""
    sys.exit(f"error: {subject}: {problem}")


def read_results(path: Path | None = None) -> dict:
    """benchmarks/results.json (or `path`), {} where there is none yet; a broken file stops with one line naming it
    and where its JSON breaks. Benchmarks call it before they measure, so a bad file costs no run."""
    path = Path(path or RESULTS)
    if not path.exists():
        return {}
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        refuse(path, f"not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})")
    except (OSError, UnicodeDecodeError) as err:
        refuse(path, f"cannot be read: {err}")
    if not isinstance(results, dict):
        refuse(path, f"not a JSON object of results (a {type(results).__name__})")
    return results


def record(key: str | tuple[str, ...], result, replace: bool = False) -> bool:
    """The one way a benchmark keeps a result: under `key` of benchmarks/results.json (a tuple: nested keys), every
    other entry as it is. An entry there already is replaced only when asked (`replace`: a benchmark's refresh of its
    own key, or its --record), else one line says so and it stays. Whether it was set. Read, merge and write happen
    under an exclusive lock (results.json.lock beside it): two benchmarks ending at once would otherwise each write
    back the file as it was before the other's key; the kernel drops the lock when its holder dies. A run that
    measured nothing records nothing: an empty result stops with one line, the entry as it was."""
    keys = (key,) if isinstance(key, str) else tuple(key)
    if result is None or isinstance(result, (dict, list)) and not result:
        refuse(RESULTS, f"nothing measured for {'.'.join(keys)!r}: not recorded")
    with open(RESULTS.with_name(RESULTS.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = read_results()
        where = results
        for part in keys[:-1]:
            where = where.setdefault(part, {})
        if keys[-1] in where and not replace:
            print(f"not recorded: {RESULTS} holds {'.'.join(keys)!r} already; to replace it, run this again with "
                  "--record (or --key NEW to keep both where the command takes --key)", file=sys.stderr)
            return False
        where[keys[-1]] = result
        write_results(results)
    return True


def watched(command: list, cwd) -> dict:
    """Run `command` (a Snakemake, say) to its end: its exit status and standard error, wall seconds, and the
    CPU seconds and most threads of that process itself, not its children (psutil, every 0.1 s)."""
    import psutil

    began = time.perf_counter()
    with tempfile.TemporaryFile("w+") as stderr:   # a file, not a pipe: a full pipe would stop the process
        process = subprocess.Popen([str(c) for c in command], cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr,
                                   text=True)
        seen, cpu, threads = psutil.Process(process.pid), 0.0, 0
        while process.poll() is None:
            try:
                times = seen.cpu_times()
                cpu, threads = times.user + times.system, max(threads, seen.num_threads())
            except psutil.NoSuchProcess:
                break
            time.sleep(0.1)
        stderr.seek(0)
        return {"returncode": process.wait(), "stderr": stderr.read(), "wall": round(time.perf_counter() - began, 1),
                "cpu": round(cpu, 1), "threads": threads}


def timed(cmd, cwd) -> tuple[float, subprocess.CompletedProcess]:
    began = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(cwd) / "src"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"benchmark command failed (exit {done.returncode}): {' '.join(map(str, cmd))}\n"
                 f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - began, done


@contextlib.contextmanager
def clean_run(targets: list[str], cores: int):
    """A fresh copy in which `targets` are planned, then built from nothing: (folder, plan, seconds)."""
    with tempfile.TemporaryDirectory(prefix="towers-bench-") as tmp:
        fresh_copy(tmp)
        snake = [sys.executable, "-m", "snakemake", *targets, "--cores", str(cores)]
        _, plan = timed([*snake, "-n"], tmp)
        seconds, _ = timed(snake, tmp)
        yield Path(tmp), plan, seconds


def keep_outputs(tmp: Path, targets: list[str], folder: str) -> None:
    """Copy each table (CSV + JSON twin) or figure (PNG + CSV) to benchmarks/out/<folder>, so the committed
    ones can be compared with them."""
    for target in targets:
        kept = ROOT / "benchmarks/out" / folder / Path(target).name
        kept.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ((".csv", ".json") if target.endswith(".csv") else (".png", ".csv")):
            shutil.copy(tmp / Path(target).with_suffix(suffix), kept.with_suffix(suffix))
