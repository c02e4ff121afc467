"""Share the expensive artifacts (pre-trained encoders, trained models, embeddings, indexes: everything
under artifacts/) between machines through a DVC remote, with their Snakemake provenance.

A pulled file alone would fool Snakemake: without its job record (.snakemake/metadata) Snakemake only
compares modification times, so an artifact built with other parameters could pass for a current one.
`push` therefore stores each artifact's record beside it (artifacts/.provenance/) before `dvc add` and
`dvc push`; `pull` puts the records back and gives every artifact the modification time its job ended
with, and every project file git tracks the time of the commit that last changed it (not the clone's). Snakemake then judges a pulled artifact exactly as on the machine that built it: reused when its
params, code and inputs are unchanged, rebuilt (with the reason "params have changed") when not.

What is shared is every output Snakemake keeps (tokenizers, encoders, trained models, corpus matrices, Faiss
indexes, BM25 indexes and runs, evaluations: the tables' inputs), since a missing one would be rebuilt and
everything after it with it. Left out (EXCLUDED, through the project's .dvcignore): training resume state
(train-state/: optimizer moments, ~3x a model, for restarting a killed run only), encoding and BM25 query
shards (temporary: their merged matrix or run holds the same rows) and unfinished atomic writes. `size` prints what a push would store.

    python -m towers.ops.cache push [--remote NAME]   # then commit artifacts.dvc
    python -m towers.ops.cache pull [--remote NAME]
    python -m towers.ops.cache size
"""
from __future__ import annotations

import argparse
import base64
import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ARTIFACTS = Path("artifacts")
PROVENANCE = ARTIFACTS / ".provenance"
METADATA = Path(".snakemake/metadata")
RESULTS = Path("results")


def record_path(relative: Path) -> Path:
    """The output a Snakemake metadata record describes: its path, urlsafe-base64-encoded, is the record's
    name, cut into "@"-prefixed folders where longer than a file name may be."""
    encoded = "".join(part.lstrip("@") for part in relative.parts)
    return Path(base64.urlsafe_b64decode(encoded).decode())


def records(folder: Path):
    """(record file, its path relative to `folder`) for every record under `folder`."""
    for record in sorted(folder.rglob("*")) if folder.is_dir() else []:
        if record.is_file():
            yield record, record.relative_to(folder)


DVC = str(Path(sys.executable).with_name("dvc"))   # the venv's dvc


def dvc(*args: str, cwd=None) -> str:
    """Run the venv's dvc (in `cwd`, default here); its stdout, or exit with a one-line error holding its last
    message line."""
    result = subprocess.run([DVC, *args], capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"error: dvc {' '.join(args)}{f' in {cwd}' if cwd else ''}: {last}")
    return result.stdout


def save_provenance(root: Path = Path(".")) -> int:
    """Copy the Snakemake records of outputs under artifacts/ into artifacts/.provenance/, and those of the tables
    (results/, in git): a table found in a clone without its record is rebuilt (its profile marker, pulled, is
    newer than it), with its record it is judged as where it was built."""
    target = root / PROVENANCE
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    saved = 0
    for record, relative in records(root / METADATA):
        path = record_path(relative)
        if path.parts[:1] in ((ARTIFACTS.name,), (RESULTS.name,)) and (root / path).exists():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(record, target / relative)
            saved += 1
    return saved


def restore_provenance(root: Path = Path(".")) -> int:
    """Put the pulled records back into .snakemake/metadata and give each artifact its job's end time."""
    restored = 0
    for record, relative in records(root / PROVENANCE):
        path = root / record_path(relative)
        if not path.exists():
            continue
        (root / METADATA / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(record, root / METADATA / relative)
        end = json.loads(record.read_text())["endtime"]
        for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
            os.utime(item, (end, end))
        restored += 1
    return restored


# .dvcignore patterns (gitignore syntax, from the repository root) of what is not pushed; `excluded` mirrors them
EXCLUDED = {f"/{ARTIFACTS}/*/train-state/": "training resume state",
            f"/{ARTIFACTS}/**/shards/": "encoding shards (temporary)",
            f"/{ARTIFACTS}/**/*.shards/": "BM25 query shards (temporary)",
            f"/{ARTIFACTS}/**/.*.tmp*": "unfinished atomic writes",
            f"/{ARTIFACTS}/**/.tokens/": "token ids of encoded corpora (a cache: towers.modeling.tokens.cached_tokens)"}
DVCIGNORE = Path(".dvcignore")


def excluded(relative: Path) -> bool:
    """Whether a file under artifacts/ (path relative to it) matches EXCLUDED."""
    parts = relative.parts
    return (len(parts) > 2 and parts[1] == "train-state") or fnmatch.fnmatch(parts[-1], ".*.tmp*") \
        or any(folder == "shards" or folder.endswith(".shards") for folder in parts[:-1])


def selected(root: Path = Path(".")) -> tuple[int, int]:
    """(files, bytes) under artifacts/ that a push stores."""
    files = size = 0
    for path in (root / ARTIFACTS).rglob("*"):
        if path.is_file() and not path.is_symlink() and not excluded(path.relative_to(root / ARTIFACTS)):
            files, size = files + 1, size + path.stat().st_size
    return files, size


def ensure_dvcignore(root: Path = Path(".")) -> bool:
    """Add EXCLUDED's patterns to the root .dvcignore where missing; True if it changed."""
    path = root / DVCIGNORE
    text = path.read_text() if path.is_file() else ""
    missing = [pattern for pattern in EXCLUDED if pattern not in text.splitlines()]
    if missing:
        path.write_text(text + ("" if not text or text.endswith("\n") else "\n")
                        + "".join(f"{pattern}\n" for pattern in missing))
    return bool(missing)


def human(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def push(remote: str | None) -> None:
    if not ARTIFACTS.is_dir():
        sys.exit(f"error: {ARTIFACTS}/: nothing to push (build something first)")
    changed = ensure_dvcignore()
    saved = save_provenance()
    dvc("add", "--quiet", str(ARTIFACTS))
    dvc("push", "--quiet", *(["--remote", remote] if remote else []), f"{ARTIFACTS}.dvc")
    import yaml

    out = yaml.safe_load(Path(f"{ARTIFACTS}.dvc").read_text())["outs"][0]
    print(f"pushed {ARTIFACTS}/ ({out.get('nfiles', '?')} files, {human(int(out.get('size', 0)))}; without "
          f"{', '.join(EXCLUDED.values())}) with the provenance of {saved} outputs; commit {ARTIFACTS}.dvc"
          f"{' and .dvcignore' if changed else ''} to share this version")


def git(*args: str, root: Path = Path(".")) -> str:
    return subprocess.run(["git", "-c", "core.quotepath=off", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout


def restore_source_times(root: Path = Path(".")) -> int:
    """Give every file git tracks (and is unedited) the time of the last commit that changed it, and each folder
    holding them the latest of its contents. A fresh clone dates every file at its checkout, after the pulled
    build, so Snakemake would rerun every job that reads a project file (a local_dir collection, a fixture, a dump)
    by its time alone; with commit times only what was committed after the build looks newer than it."""
    try:
        history = git("log", "--format=%x00%ct", "--name-only", "--no-renames", "HEAD", root=root)
    except (OSError, subprocess.CalledProcessError):   # not a git checkout (an unpacked archive): times as they are
        return 0
    times: dict[str, int] = {}
    when = 0
    for line in history.splitlines():
        if line.startswith("\0"):
            when = int(line[1:])
        elif line:
            times.setdefault(line, when)
    edited = set(git("diff", "--name-only", "HEAD", root=root).splitlines())
    folders: dict[Path, int] = {}
    changed = 0
    for name in git("ls-files", root=root).splitlines():
        path = root / name
        if name in edited or name not in times or not path.is_file():
            continue
        os.utime(path, (times[name], times[name]))
        changed += 1
        for folder in Path(name).parents[:-1]:
            folders[folder] = max(folders.get(folder, 0), times[name])
    for folder, latest in sorted(folders.items(), key=lambda kv: -len(kv[0].parts)):   # deepest first
        os.utime(root / folder, (latest, latest))
    return changed


def pull(remote: str | None) -> None:
    if not Path(f"{ARTIFACTS}.dvc").is_file():
        sys.exit(f"error: {ARTIFACTS}.dvc: missing (a machine that built the artifacts runs `push` and commits it)")
    dvc("pull", "--quiet", *(["--remote", remote] if remote else []), f"{ARTIFACTS}.dvc")
    sources = restore_source_times()   # before the outputs' own times: a table in git keeps its job's end
    print(f"pulled {ARTIFACTS}/; {sources} project files dated at their last commit; restored the provenance of "
          f"{restore_provenance()} outputs")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m towers.ops.cache", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["push", "pull", "size"])
    parser.add_argument("--remote", help="a DVC remote's name (default: the default remote)")
    args = parser.parse_args(argv)
    if args.action == "size":
        files, size = selected()
        print(f"{ARTIFACTS}/: a push stores {files} files, {human(size)} (without {', '.join(EXCLUDED.values())})")
        return
    (push if args.action == "push" else pull)(args.remote)


if __name__ == "__main__":
    main()
