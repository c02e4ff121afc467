"""Share the expensive artifacts (pre-trained encoders, trained models, embeddings, indexes: everything
under artifacts/) between machines through a DVC remote, with their Snakemake provenance.

A pulled file alone would fool Snakemake: without its job record (.snakemake/metadata) Snakemake only
compares modification times, so an artifact built with other parameters could pass for a current one.
`push` therefore stores each artifact's record beside it (artifacts/.provenance/) before `dvc add` and
`dvc push`; `pull` puts the records back and gives every artifact the modification time its job ended
with. Snakemake then judges a pulled artifact exactly as on the machine that built it: reused when its
params, code and inputs are unchanged, rebuilt (with the reason "params have changed") when not.

    python -m towers.cache push [--remote NAME]   # then commit artifacts.dvc
    python -m towers.cache pull [--remote NAME]
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ARTIFACTS = Path("artifacts")
PROVENANCE = ARTIFACTS / ".provenance"
METADATA = Path(".snakemake/metadata")


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


def dvc(*args: str) -> str:
    """Run the venv's dvc; its stdout, or exit with a one-line error holding its last message line."""
    result = subprocess.run([DVC, *args], capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no message"])[-1]
        sys.exit(f"error: dvc {' '.join(args)}: {last}")
    return result.stdout


def save_provenance(root: Path = Path(".")) -> int:
    """Copy the Snakemake records of outputs under artifacts/ into artifacts/.provenance/."""
    target = root / PROVENANCE
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    saved = 0
    for record, relative in records(root / METADATA):
        path = record_path(relative)
        if path.parts[:1] == (ARTIFACTS.name,) and (root / path).exists():
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


def push(remote: str | None) -> None:
    if not ARTIFACTS.is_dir():
        sys.exit(f"error: {ARTIFACTS}/: nothing to push (build something first)")
    saved = save_provenance()
    dvc("add", "--quiet", str(ARTIFACTS))
    dvc("push", "--quiet", *(["--remote", remote] if remote else []), f"{ARTIFACTS}.dvc")
    print(f"pushed {ARTIFACTS}/ with the provenance of {saved} outputs; commit {ARTIFACTS}.dvc to share this version")


def pull(remote: str | None) -> None:
    if not Path(f"{ARTIFACTS}.dvc").is_file():
        sys.exit(f"error: {ARTIFACTS}.dvc: missing (a machine that built the artifacts runs `push` and commits it)")
    dvc("pull", "--quiet", *(["--remote", remote] if remote else []), f"{ARTIFACTS}.dvc")
    print(f"pulled {ARTIFACTS}/; restored the provenance of {restore_provenance()} outputs")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m towers.cache", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["push", "pull"])
    parser.add_argument("--remote", help="a DVC remote's name (default: the default remote)")
    args = parser.parse_args(argv)
    (push if args.action == "push" else pull)(args.remote)


if __name__ == "__main__":
    main()
