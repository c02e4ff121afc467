"""What the workflow reads of files while it plans: a small file's digest and a folder's listing (params, so
that an edit reruns its jobs), the first input modified in the future, and the profile's marker written once."""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from ..io import atomic_open, sha256_of


def content_digest(path) -> str:
    """The SHA-256 of a small file the project owns (questions, claims, expected values), for a rule's params:
    an edit reruns its jobs even where the file's time does not move forward (a clock set back, a copy that
    keeps times), which Snakemake's time check alone would miss."""
    return sha256_of(path)[:16] if path and os.path.isfile(path) else ""


def folder_files(folder) -> list[str]:
    """Every file under a folder (hidden ones aside), sorted; none when `folder` is not one (an archive)."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(str(p) for p in root.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


def folder_listing(folder) -> str:
    """A digest of each file's name, size and modification time under a folder: a param, so that a file swapped
    for another, even an older one (which Snakemake's time check misses), reruns the job. Nothing is read."""
    entries = [(str(Path(f).relative_to(folder)), Path(f).stat().st_size, Path(f).stat().st_mtime_ns)
               for f in folder_files(folder)]
    return hashlib.sha256(repr(entries).encode()).hexdigest()[:16] if entries else ""


def future_dated(paths, slack: float = 2.0):
    """(path, its time) of the first input file (or file under an input folder) modified after now."""
    now = time.time() + slack
    for path in dict.fromkeys(map(str, paths)):
        files = [os.path.join(d, f) for d, _, names in os.walk(path) for f in names] if os.path.isdir(path) else [path]
        for f in [path, *files]:
            try:
                when = os.stat(f).st_mtime
            except OSError:
                continue
            if when > now:
                return (path, time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(when)))
    return None


def mark_profile(path: str, profile: str) -> None:
    """Write the profile's marker where it is missing; never rewrite it (workflow/rules/common.smk says why)."""
    if not os.path.exists(path):
        with atomic_open(path) as handle:
            handle.write(json.dumps({"profile": profile}) + "\n")
