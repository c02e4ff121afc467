"""One console command per stage: `python -m towers <stage> ...`.

Stages take explicit paths and parameters (never params.yaml), write outputs atomically and a
`<output>.meta.json` beside the main output (arguments, versions, counts, seconds). Input
problems end the stage with one line, `error: <file>: <problem>`, and exit status 1."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import sys
import time
from pathlib import Path

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


def usage() -> dict:
    """CPU seconds and peak resident memory of this process and the children it waited for (the JVM of
    Pyserini runs inside it): what the scaling benchmark and rules' resources are measured from."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"cpu_seconds": round(own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime, 2),
            "peak_rss_mb": round(max(own.ru_maxrss, children.ru_maxrss) / 1024, 1)}   # Linux: KiB


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    began = time.perf_counter()
    parallel = int(os.environ.get("WORLD_SIZE", "1")) > 1   # started by the launcher: data-parallel training
    if parallel:   # (imported only then: torch is slow to import for the light stages)
        from . import runtime
        runtime.start()
    # one writer an output: a duplicate of a stage still running (orphaned by a killed Snakemake) stops here
    written = main_output(args.stage, args)
    lock = sole_writer(written) if written and (not parallel or runtime.leader()) else contextlib.nullcontext()
    try:
        with lock:
            output, counts = args.func(args)
    except StageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        if not err.filename:   # not a file's problem: a real fault, with its traceback
            raise
        # a file that cannot be read or written (a read-only folder, a full disk): one line naming it
        # (an atomic output's temporary name shown as the output's own)
        path = re.sub(r"(^|/)\.([^/]+)\.tmp\d+$", r"\1\2", str(err.filename))
        print(f"error: {path}: {err.strerror or type(err).__name__}", file=sys.stderr)
        return 1
    if parallel:
        runtime.finish()   # a stage that returned without training: only the leader writes its record
    cells = counts.pop("cells", None)   # a table's numbers and their sources (towers.reports.common.cell), a list
    meta = {"stage": args.stage, "arguments": {k: v for k, v in vars(args).items() if k not in ("func", "stage")},
            "counts": counts, "seconds": round(time.perf_counter() - began, 2), **usage(),
            "versions": versions("torch", "transformers", "tokenizers", "faiss-cpu", "pyserini", "ir-measures", "pysbd",
                                 "mwparserfromhell")}
    if cells is not None:
        meta["cells"] = cells
    if output is not None:   # a stage that only checks writes nothing
        write_json(Path(str(output).rstrip("/") + ".meta.json"), meta)
    print(json.dumps({"stage": args.stage, "seconds": meta["seconds"], **{k: v for k, v in counts.items()
                                                                          if not isinstance(v, (list, dict))}}))
    return 0
