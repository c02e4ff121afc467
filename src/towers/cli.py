"""One console command per stage: `python -m towers <stage> ...`.

Stages take explicit paths and parameters (never params.yaml), write outputs atomically and a
`<output>.meta.json` beside the main output (arguments, versions, counts, seconds). Input
problems end the stage with one line, `error: <file>: <problem>`, and exit status 1."""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

from . import digests
from .io import StageError, sole_writer, versions, write_json
from .stages import load_all, main_output


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="towers", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="stage", required=True)
    for name, (func, arguments) in load_all().items():
        p = sub.add_parser(name, help=(func.__doc__ or "").split("\n")[0] or None)
        for flag, kw in arguments:
            p.add_argument(flag, **kw)
        p.set_defaults(func=func)
    return top


def own_peak_kib() -> int:
    """This process's own peak resident memory (VmHWM). ru_maxrss would carry the launcher's peak over fork
    and exec: every stage Snakemake starts would report at least Snakemake's size."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):   # not Linux: the kernel's own figure
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def process_age() -> float | None:
    """Seconds since the kernel started this process: at the top of main, its start-up (interpreter, the
    stages' imports, argument parsing), which the reproduce benchmark splits from the work."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started = int(stat.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")   # field 22
            return round(float(uptime.read().split()[0]) - started, 2)
    except (OSError, ValueError, IndexError):   # not Linux
        return None


def usage() -> dict:
    """CPU seconds and peak resident memory of this process (the JVM of Pyserini runs inside it) and of the
    largest child it waited for (data-parallel workers): what the scaling benchmark measures."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_seconds": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 2),
            "peak_rss_mb": round(max(own_peak_kib(), children.ru_maxrss) / 1024, 1)}   # Linux: KiB


NOT_ARTIFACTS = ("state_dir", "log")   # arguments naming what a stage keeps for itself (training state, logs)
# what a full disk says through libraries that drop the errno (safetensors, torch's zip writer, Lucene via jnius)
DISK_FULL = re.compile(r"No space left on device|Errno 28|ENOSPC|Disk quota exceeded|file write failed", re.I)


def path_arguments(args, skip=()) -> list[str]:
    """Every argument value (or part of one: a --row JSON object's strings, --table name=path) that names an
    existing file or folder."""
    values = []
    for key, value in vars(args).items():
        if key in ("func", "stage", *skip):
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, (str, os.PathLike)) and str(v):
                values += [str(v), *row_strings(str(v)), *re.split(r"[|=]", str(v))]
    here = os.getcwd()   # never the working folder or one above it (a value such as "."): not an artifact
    return [v for v in dict.fromkeys(values) if v and os.path.exists(v)
            and not (here + os.sep).startswith(os.path.abspath(v).rstrip(os.sep) + os.sep)]


def row_strings(value: str) -> list[str]:
    """The strings of a JSON object argument (a table's --row: its fields, and the items of a list field)."""
    try:
        row = json.loads(value) if value.startswith("{") else None
    except ValueError:
        return []
    items = [x for v in row.values() for x in (v if isinstance(v, list) else [v])] if isinstance(row, dict) else []
    return [x for x in items if isinstance(x, str)]


def _shown(path) -> str:
    """An atomic output's temporary name shown as the output's own."""
    return re.sub(r"(^|/)\.([^/]+)\.tmp\d+$", r"\1\2", str(path))


def disk_full(err: BaseException, output) -> str | None:
    """One line for a write that failed on a full disk, naming the output, whatever library raised it."""
    errno_full = isinstance(err, OSError) and err.errno in (28, 122)   # ENOSPC, EDQUOT
    if not (errno_full or DISK_FULL.search(f"{type(err).__name__}: {err}"[:4000])):
        return None
    where = _shown(getattr(err, "filename", None) or output or "(output)")
    return f"error: {where}: no space left on the device while writing it ({type(err).__name__}); free space and rerun"


def kernels() -> dict:
    """Which vector instructions the loaded torch and Faiss compute with (AVX2, AVX512, ...): trained models and
    searches differ at float level between them, so a rebuild repeats byte for byte only where they match."""
    found = {}
    if "torch" in sys.modules:
        found["torch_cpu_kernels"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
    if "faiss" in sys.modules:
        found["faiss_kernels"] = sys.modules["faiss"].get_compile_options().strip()
    return found


# glibc's malloc hands each tensor above its (adaptive) mmap threshold fresh pages from the kernel, which faults
# them in zeroed on first touch: a tenth of an encoding job's time here. Below 256 MB a freed block is reused.
MALLOC_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": (-3, 256 << 20), "MALLOC_TRIM_THRESHOLD_": (-1, 512 << 20)}
# where that was measured to help (benchmarks/malloc_setting.py): forward passes over large batches. Training was
# unchanged and dense search slower (numpy's large arrays then come from the heap, without huge pages)
KEEP_FREED_MEMORY = ("encode-candidates", "rerank")


def keep_freed_memory(stage: str | None = None) -> bool:
    """Opt-in (TOWERS_MALLOC=keep; off otherwise): apply MALLOC_SETTINGS through mallopt for a stage of
    KEEP_FREED_MEMORY (None: any), each knob unless the environment sets it itself. Off by default because it
    takes ~4 of the ~148 minutes off a clean build (benchmarks/README.md), too little for a knob in every run.
    False where nothing was set. Only where memory comes from changes, never what is computed: outputs stay
    byte-identical either way."""
    if os.environ.get("TOWERS_MALLOC") != "keep" or (stage is not None and stage not in KEEP_FREED_MEMORY):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    for name, (option, value) in MALLOC_SETTINGS.items():
        if name not in os.environ and not libc.mallopt(option, value):
            return False
    return True


def stage_record(args, counts: dict, began: float, started_for, warm_start: bool) -> dict:
    """A stage's record beside its output: its arguments, counts, seconds, resources, versions and kernels, and a
    table's cells, note, context and labels (towers.verdicts.cells.cell) as its own fields."""
    table = {k: counts.pop(k) for k in ("cells", "note", "context", "labels") if k in counts}
    meta = {"stage": args.stage, "arguments": {k: v for k, v in vars(args).items() if k not in ("func", "stage")},
            "counts": counts, "seconds": round(time.perf_counter() - began, 2), **usage(),
            # start-up before main; whether the stage loaded torch (its import is inside "seconds" unless the
            # stage was forked from the warm-start server, which had imported it)
            "startup_seconds": started_for, "torch_loaded": "torch" in sys.modules, "warm_start": warm_start,
            "versions": versions("torch", "transformers", "tokenizers", "faiss-cpu", "pyserini", "ir-measures", "pysbd",
                                 "mwparserfromhell")}
    meta.update(kernels())
    meta.update(table)
    return meta


def main(argv=None, warm_start: bool = False) -> int:
    """Run one stage; `warm_start`: forked from the warm-start server (towers.launch.warm), torch already imported."""
    args = parser().parse_args(argv)
    keep_freed_memory(args.stage)
    began, started_for = time.perf_counter(), process_age()
    parallel = int(os.environ.get("WORLD_SIZE", "1")) > 1   # started by the launcher: data-parallel training
    if parallel:   # (imported only then: torch is slow to import for the light stages)
        from . import runtime
        runtime.start()
    # one writer an output: a duplicate of a stage still running (orphaned by a killed Snakemake) stops here
    written = main_output(args.stage, args)
    leader = not parallel or runtime.leader()
    lock = sole_writer(written) if written and leader else contextlib.nullcontext()
    try:
        # every input a stage record lists is what that stage wrote (not edited or damaged since)
        paths = path_arguments(args, NOT_ARTIFACTS)
        checked = digests.verify([p for p in paths if not written or os.path.abspath(p) != os.path.abspath(written)],
                                 written)
        before = digests.snapshot(paths)
        with lock:
            if written and leader:   # an old record beside an output being rebuilt would describe another one
                Path(str(written).rstrip("/") + ".meta.json").unlink(missing_ok=True)
            output, counts = args.func(args)
    except StageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        if line := disk_full(err, written):
            print(line, file=sys.stderr)
            return 1
        if not err.filename:   # not a file's problem: a real fault, with its traceback
            raise
        # a file that cannot be read or written (a read-only folder): one line naming it
        print(f"error: {_shown(err.filename)}: {err.strerror or type(err).__name__}", file=sys.stderr)
        return 1
    except Exception as err:
        if line := disk_full(err, written):
            print(line, file=sys.stderr)
            return 1
        raise
    if parallel:
        runtime.finish()   # a stage that returned without training: only the leader writes its record
    meta = stage_record(args, counts, began, started_for, warm_start)
    if output is not None:   # a stage that only checks writes nothing
        record = Path(str(output).rstrip("/") + ".meta.json")
        meta["inputs_checked"] = checked
        # what this run wrote (files under its path arguments modified since it started), for the next stage
        meta[digests.FIELD] = digests.written(path_arguments(args, NOT_ARTIFACTS), record.parent, before)
        write_json(record, meta)
    print(json.dumps({"stage": args.stage, "seconds": meta["seconds"], **{k: v for k, v in counts.items()
                                                                          if not isinstance(v, (list, dict))}}))
    return 0
