"""Peak memory of reading a training-query run into rows (towers.training.sampling.run_rows), the way LTRe, the
negative-sampling baselines and the cross-encoder read theirs.

    python -m benchmarks.run_rows_memory [--queries 4000] [--depth 1000] [--src OTHER/src] [--record]

A synthetic run of `--queries` x `--depth` hits over 200K doc ids is written once, then read in a process of
its own twice: its queries asked for in the file's order, and shuffled (which makes the rows be sorted). Each
prints its peak RSS above the process before reading, seconds, and a digest of the rows; `--src` runs another
checkout's code on the same file (a before), `--record` keeps the figures under `run_rows_memory`."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .workflow_harness import ROOT, record

DOCS = 200_000

READ = """
import resource, sys, time
import numpy as np
from towers.training import sampling
queries, depth, path, how = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
lookup = sampling.RowLookup([f"d{i}" for i in range(%d)])
qids = [f"q{q}" for q in range(queries)]
if how == "shuffled":
    qids = [str(q) for q in np.random.default_rng(1).permutation(qids)]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
began = time.perf_counter()
rows = sampling.run_rows(path, qids, lookup, depth)
print(round(time.perf_counter() - began, 1), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024,
      rows.digest())
""" % DOCS


def write_run(path: Path, queries: int, depth: int) -> None:
    rng = np.random.default_rng(0)
    with open(path, "w") as out:
        for q in range(queries):
            docs = rng.choice(DOCS, size=depth, replace=False)
            out.writelines(f"q{q} Q0 d{d} {r} {100 - r * 0.01:.3f} bm25\n" for r, d in enumerate(docs, 1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=4000)
    p.add_argument("--depth", type=int, default=1000)
    p.add_argument("--src", type=Path, default=ROOT / "src")
    p.add_argument("--record", action="store_true")
    a = p.parse_args(argv)
    found = {"hits": a.queries * a.depth, "depth": a.depth, "src": str(a.src)}
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run.trec"
        write_run(run, a.queries, a.depth)
        for how in ("in-order", "shuffled"):
            done = subprocess.run([sys.executable, "-c", READ, str(a.queries), str(a.depth), str(run), how],
                                  env={**os.environ, "PYTHONPATH": str(a.src)}, capture_output=True, text=True, check=True)
            seconds, peak_mb, digest = done.stdout.split()
            found[how] = {"seconds": float(seconds), "peak_mb_above_start": int(peak_mb), "rows_digest": digest}
    print(json.dumps(found, indent=1))
    if a.record:
        record("run_rows_memory", found, replace=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
