"""What a stage wrote, as size and hash, and the check of every input against it.

A stage's record (`<output>.meta.json`, towers.cli) holds `written`: each file the stage wrote, by its path
relative to the record's folder, with its size and SHA-256 (for a file over SAMPLED_FROM bytes, the SHA-256 of
SAMPLES evenly spaced blocks: a change of length is always seen, an edit in place inside a sampled block too).
Before a stage runs, every input it is given that a record lists is checked against it, so an artifact edited
by hand (or damaged) after it was built stops the next stage that reads it with one line, instead of flowing
into the tables. Files no record lists (the project's own data, downloads, outputs of older builds) are not
checked here: their content reaches the rules as params (Snakefile)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .io import StageError

SAMPLED_FROM = 256 << 20   # files up to 256 MiB are hashed whole (about half a second here)
SAMPLES = 64
BLOCK = 1 << 20
RECORD = ".meta.json"
FIELD = "written"


def file_digest(path) -> dict:
    """{"size", "sha256"} of a file; {"size", "sampled_sha256"} for one over SAMPLED_FROM bytes."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= SAMPLED_FROM:
            for block in iter(lambda: handle.read(BLOCK), b""):
                digest.update(block)
            return {"size": size, "sha256": digest.hexdigest()}
        for i in range(SAMPLES):   # the first and the last block among them
            handle.seek((size - BLOCK) * i // (SAMPLES - 1))
            digest.update(handle.read(BLOCK))
    return {"size": size, "sampled_sha256": digest.hexdigest()}


def files_under(path) -> list[Path]:
    """A file, or every file under a folder (hidden ones aside: temporary names, locks), sorted."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.endswith(RECORD)
                  and not any(part.startswith(".") for part in p.relative_to(path).parts))


def snapshot(paths) -> dict[str, tuple[int, int]]:
    """(modification time, size) of each file under `paths`: what was there before a stage ran."""
    out = {}
    for path in paths:
        for f in files_under(path):
            stat = f.stat()
            out[os.path.abspath(f)] = (stat.st_mtime_ns, stat.st_size)
    return out


def written(paths, record_dir, before: dict[str, tuple[int, int]]) -> dict[str, dict]:
    """Digests of the files under `paths` that are new or changed since `before` (what this run wrote), keyed
    by their path relative to `record_dir` (where the record lies, so a copied workspace keeps its records)."""
    out = {}
    for path in paths:
        for f in files_under(path):
            stat = f.stat()
            if before.get(os.path.abspath(f)) != (stat.st_mtime_ns, stat.st_size):
                out[os.path.relpath(f, record_dir)] = file_digest(f)
    return dict(sorted(out.items()))


class Records:
    """The records that may list a file, read once each during one check."""

    def __init__(self, ignore=()):
        self.metas: dict[Path, dict] = {}
        self.ignore = {os.path.abspath(r) for r in ignore}   # records about to be replaced (the running stage's own)
        self.beside: dict[Path, list[Path]] = {}

    def candidates(self, path: Path) -> list[Path]:
        """Records that may list `path`: its own (`<path>.meta.json`), its folders' (a file of an output
        folder), and the ones beside it (a stage's second output, such as the ids beside its embeddings)."""
        if path.parent not in self.beside:
            try:
                self.beside[path.parent] = sorted(p for p in path.parent.iterdir() if p.name.endswith(RECORD))
            except OSError:
                self.beside[path.parent] = []
        found = [Path(str(path) + RECORD), *(Path(str(folder) + RECORD) for folder in list(path.parents)[:4])]
        return list(dict.fromkeys([*(c for c in found if c.is_file()), *self.beside[path.parent]]))

    def meta(self, record: Path) -> dict:
        """A record's contents; one that cannot be read stops the stage: it may list the file, and skipping it
        would skip the check (a damaged run read as sound). A record without `written` (older builds) lists none."""
        if record not in self.metas:
            try:
                with open(record, encoding="utf-8") as handle:
                    meta = json.load(handle)
                problem = "" if isinstance(meta, dict) and isinstance(meta.get(FIELD, {}), dict) else "not a stage record"
            except FileNotFoundError:   # listed a moment ago, gone now: another job is replacing its record, and
                meta, problem = {}, ""    # Snakemake never runs a job beside the one that writes its inputs
            except OSError as err:
                problem = err.strerror or type(err).__name__
            except ValueError as err:   # truncated, or not JSON (UnicodeDecodeError is one too)
                problem = f"not complete JSON: {str(err).splitlines()[0][:200]}"
            if problem and os.path.abspath(record) not in self.ignore:
                output = str(record)[:-len(RECORD)]
                raise StageError(record, f"unreadable stage record ({problem}); rebuild {output}")
            self.metas[record] = {} if problem else meta
        return self.metas[record]

    def find(self, path) -> tuple[dict, str, Path] | None:
        """The digest of `path` (a file) in the newest record that lists it, the stage that wrote it, the record."""
        path = Path(path)
        best = None
        for record in self.candidates(path):
            meta = self.meta(record)
            entry = meta.get(FIELD, {}).get(os.path.relpath(path, record.parent)) if meta else None
            if isinstance(entry, dict):
                when = record.stat().st_mtime
                if best is None or when > best[0]:
                    best = (when, entry, str(meta.get("stage", "?")), record)
        return None if best is None else best[1:]


def verify(paths, output=None) -> int:
    """Check each file under `paths` that a record lists against its digest; raise StageError (one line) on the
    first that differs, or on a record that may list it and cannot be read (other than `output`'s own, which the
    stage is about to replace). Returns how many files were checked."""
    records, checked = Records([Path(str(output).rstrip("/") + RECORD)] if output else []), 0
    for path in paths:
        for f in files_under(path):
            found = records.find(f)
            if found is None:
                continue
            entry, stage, record = found
            size = os.path.getsize(f)
            now = file_digest(f) if size == entry.get("size") else {"size": size}
            if now != entry:
                what = (f"{entry.get('size')} bytes when written, {size} now" if size != entry.get("size")
                        else "same size, other content")
                raise StageError(f, f"changed after stage {stage} wrote it ({what}; {record.name}); rebuild it: delete "
                                    "it and rerun snakemake (or snakemake --forcerun on the rule that writes it)")
            checked += 1
    return checked
