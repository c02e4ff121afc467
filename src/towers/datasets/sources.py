"""Where a dataset's files are: a folder, a tar or zip archive (read once, as a stream), a single file; any
member may be gzipped."""
from __future__ import annotations

import gzip
import io
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Iterator, TextIO

from ..io import StageError, require_file

def open_text(binary, name: str) -> TextIO:
    """A text handle over a binary one, gunzipped when the name ends in .gz; lines end at \\n only. A byte-order
    mark at the start (Windows editors write one) is dropped, not read as part of the first field."""
    if name.endswith(".gz"):
        binary = gzip.GzipFile(fileobj=binary, mode="rb")
    return io.TextIOWrapper(binary, encoding="utf-8-sig", newline="\n")


class _Sequential(io.RawIOBase):
    """A read-only, non-seekable view of a file object (a tar member read as a stream: Python's own
    object for it fails when asked whether it can seek)."""

    def __init__(self, handle):
        self.handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.handle.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


def _matches(member: str, name: str) -> bool:
    member = member.replace("\\", "/")
    return any(member == n or member.endswith("/" + n) for n in (name, name + ".gz"))


class Source:
    """A dataset's files: a folder, a tar archive (plain, .gz, .bz2 or .xz; read once, as a stream),
    a zip archive, or one file. A file is found by its name (a relative path such as qrels/test.tsv),
    or that name plus .gz, which is decompressed as it is read."""

    def __init__(self, path):
        self.path = Path(path)
        if self.path.is_dir():
            self.kind = "folder"
            return
        require_file(self.path)
        if tarfile.is_tarfile(self.path):
            self.kind = "tar"
        elif zipfile.is_zipfile(self.path):
            self.kind = "zip"
        else:
            self.kind = "file"

    def members(self, names: list[str]) -> Iterator[tuple[str, str, TextIO]]:
        """(name, where, text handle) for each of `names`: a tar's in archive order (one pass), the others'
        in the order given. Each handle must be read before the next is asked for."""
        if self.kind == "folder":
            for name in names:
                found = [p for p in (self.path / name, self.path / f"{name}.gz") if p.is_file()]
                if not found:
                    raise StageError(self.path, f"no {name} (or {name}.gz) in the folder")
                if len(found) > 1:   # which one is meant cannot be told (an old copy beside a newer one)
                    raise StageError(self.path, f"holds both {name} and {name}.gz; keep only the one to read")
                path = found[0]
                with open(path, "rb") as binary, open_text(binary, path.name) as handle:
                    yield name, str(path), handle
        elif self.kind == "file":
            if len(names) != 1:
                raise StageError(self.path, f"a single file cannot hold {', '.join(names)}; give a folder or an archive")
            with open(self.path, "rb") as binary, open_text(binary, self.path.name) as handle:
                yield names[0], str(self.path), handle
        elif self.kind == "zip":
            yield from self._zip_members(names)
        else:
            yield from self._tar_members(names)

    def _zip_members(self, names):
        try:
            with zipfile.ZipFile(self.path) as archive:
                listed = [m for m in archive.namelist() if not m.endswith("/")]
                for name in names:
                    found = [m for m in listed if _matches(m, name)]
                    if len(found) != 1:
                        problem = "no member" if not found else f"{len(found)} members"
                        raise StageError(self.path, f"{problem} named {name} (or {name}.gz) in the archive")
                    with archive.open(found[0]) as binary, open_text(binary, found[0]) as handle:
                        yield name, f"{self.path}:{found[0]}", handle
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as err:
            raise StageError(self.path, f"cannot read the archive ({err})") from None

    def _tar_members(self, names):
        seen: dict[str, str] = {}
        try:
            with tarfile.open(self.path, mode="r|*") as archive:
                for member in archive:
                    if not member.isfile():
                        continue
                    name = next((n for n in names if _matches(member.name, n)), None)
                    if name is None:
                        continue
                    if name in seen:
                        raise StageError(self.path, f"two members named {name}: {seen[name]} and {member.name}")
                    seen[name] = member.name
                    binary = io.BufferedReader(_Sequential(archive.extractfile(member)), 1 << 20)
                    with open_text(binary, member.name) as handle:
                        yield name, f"{self.path}:{member.name}", handle
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise StageError(self.path, f"cannot read the archive ({err})") from None
        missing = [n for n in names if n not in seen]
        if missing:
            raise StageError(self.path, f"no member named {missing[0]} (or {missing[0]}.gz) in the archive")


def lines(handle: TextIO, where) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) for each line; undecodable or truncated input is one line."""
    number = 0
    try:
        for number, line in enumerate(handle, 1):
            yield number, line.rstrip("\n").rstrip("\r")
    except UnicodeDecodeError as err:
        raise StageError(where, f"not UTF-8 text after line {number} ({err.reason})") from None
    except (OSError, EOFError, zlib.error, tarfile.TarError) as err:
        raise StageError(where, f"cannot read the file after line {number} ({err})") from None
