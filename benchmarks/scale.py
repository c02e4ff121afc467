"""Scaling benchmark: the paper profile's MS MARCO jobs on synthetic collections of growing size.

    python -m benchmarks.scale --part data   --sizes 100000 300000 1000000   # stages that are not model compute
    python -m benchmarks.scale --part models --sizes 30000 100000            # the whole RepBERT + LTRe DAG
    python -m benchmarks.scale --part rerun --target artifacts/msmarco-passage/crossenc/dev/model --sizes 30000 100000 300000
                                                                       # one stage again, alone
    python -m benchmarks.scale --part report                                  # fit, extrapolate, docs/scale.md

Each size is a fresh copy of the workflow (with a snapshot of src/) run with `--configfile config/paper.yaml
benchmarks/scale.yaml`: the paper's settings, code paths and file formats (benchmarks/synthetic_msmarco.py),
a small BERT and few steps (scale.yaml says what is scaled down). Every stage records its wall seconds, CPU
seconds and peak resident memory in its `.meta.json` (towers.cli); this script gathers them per stage, fits
growth exponents (log-log least squares over the sizes run) and a linear memory model (peak = fixed + per-item
x items), extrapolates to MS MARCO (8,841,823 passages, 502,939 training queries, 6,980 dev queries) and sets
each beside what the paper profile's rule declares (`snakemake -n` of config/paper.yaml prints it).
CPU seconds are the fitted time: other work on the machine moves wall seconds, not CPU seconds.
--part data also times Faiss on stand-in vectors of 768 dimensions (the paper's factory strings) and fusion.
Results: benchmarks/results.json, key "scale"; docs/scale.md and docs/scale.png.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .synthetic_msmarco import write_msmarco
from .workflow_harness import ROOT, copy_workflow, fresh_copy, planned_jobs, read_results, record
from .scale_report import beside_declared, markdown, plot, requests

PAPER = {"passages": 8_841_823, "train_queries": 502_939, "dev_queries": 6_980, "dim": 768}
DATA_TARGETS = ["artifacts/msmarco-passage/eval/bm25/dev/lucene.json", "artifacts/msmarco-dl19/eval/bm25/dev/lucene.json",
                "artifacts/msmarco-passage/collection/triples.tsv"]
# LTRe's BM25 negatives: every training query at depth 200, in bm25.query_shards jobs (up to --train-run-max passages:
# beyond, its per-query cost is the test run's, measured at every size)
TRAIN_RUN = "artifacts/msmarco-passage/bm25/dev/train-d200.trec"
MODEL_TARGETS = [*(f"results/repbert/table{n}.csv" for n in range(1, 5)), "results/repbert/figure1.png",
                 "results/repbert/figure2.png", *(f"results/ltre/table{n}.csv" for n in (1, 3, 4)),
                 "results/ltre/figure3.png"]
FACTORIES = ["Flat", "IVF1024,PQ64"]   # MS MARCO's flat index and paper.yaml's ivfpq, at every size
# LTRe's largest OPQ: its training runs on a sample of at most 65,536 rows whatever the corpus (towers.retrieval.vector_index),
# so it is built up to OPQ_MAX passages only (~10 CPU minutes); its add is linear like IVF-PQ's
SAMPLE_TRAINED = ["OPQ96,IVF1,PQ96"]
OPQ_MAX = 100_000


def run(cmd, cwd, env=None) -> float:
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"failed (exit {done.returncode}): {' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return time.perf_counter() - began


def prepare(work: Path, passages: int) -> tuple[Path, dict]:
    """A fresh workflow copy with a src/ snapshot and the synthetic collection, and the overlay naming it."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    fresh_copy(work)
    made = write_msmarco(work / "synthetic", passages)
    overlay = (ROOT / "benchmarks/scale.yaml").read_text()
    names = {"LOCAL_DIR": str(work / "synthetic"), "MD5_COLLECTION": made["md5"]["collectionandqueries.tar.gz"],
             "MD5_TRIPLES": made["md5"]["triples.train.small.tar.gz"],
             "MD5_DL19_QUERIES": made["md5"]["msmarco-test2019-queries.tsv.gz"],
             "MD5_DL19_QRELS": made["md5"]["2019qrels-pass.txt"]}
    for key, value in names.items():
        overlay = overlay.replace(key, value)
    (work / "scale.yaml").write_text(overlay)
    return work, made["counts"]


def environment(work: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(work / "src")}


def snakemake(work: Path, targets: list[str], cores: int) -> float:
    # --keep-going: a failed job stops only what depends on it, so one run shows every failure
    return run([sys.executable, "-m", "snakemake", *targets, "--configfile", "config/paper.yaml", "scale.yaml",
                "--cores", str(cores), "--keep-going"], work, environment(work))


def records(work: Path) -> list[dict]:
    """Every stage record under the copy: stage, output, wall and CPU seconds, peak RSS."""
    found = []
    for meta in [*work.glob("artifacts/**/*.meta.json"), *work.glob("results/**/*.meta.json")]:
        rec = json.loads(meta.read_text())
        if "peak_rss_mb" not in rec:
            continue
        found.append({"stage": rec["stage"], "output": str(meta.relative_to(work))[:-len(".meta.json")],
                      "seconds": rec["seconds"], "cpu_seconds": rec["cpu_seconds"], "peak_rss_mb": rec["peak_rss_mb"]})
    return found


def by_stage(recs: list[dict]) -> dict:
    """Per stage: jobs, total and largest-job CPU seconds, wall seconds, the largest peak RSS of one job."""
    out = {}
    for r in recs:
        s = out.setdefault(r["stage"], {"jobs": 0, "cpu_seconds": 0.0, "job_cpu_seconds": 0.0, "seconds": 0.0,
                                        "peak_rss_mb": 0.0, "largest_job": ""})
        s["jobs"] += 1
        s["cpu_seconds"] += r["cpu_seconds"]
        s["seconds"] += r["seconds"]
        s["job_cpu_seconds"] = max(s["job_cpu_seconds"], r["cpu_seconds"])
        if r["peak_rss_mb"] >= s["peak_rss_mb"]:
            s["peak_rss_mb"], s["largest_job"] = r["peak_rss_mb"], r["output"]
    return {k: {**v, "cpu_seconds": round(v["cpu_seconds"], 2), "seconds": round(v["seconds"], 2)} for k, v in out.items()}


def standin_faiss(work: Path, passages: int, factories: list[str], threads: int, dim: int = PAPER["dim"]) -> list[dict]:
    """build-index on random unit vectors of the paper's dimension (the model's are 96-d)."""
    import numpy as np

    rng = np.random.default_rng(13)
    matrix = work / "standin" / "candidates.npy"
    matrix.parent.mkdir(parents=True, exist_ok=True)
    found = []
    for factory in factories:
        name = re.sub(r"[^a-z0-9]+", "-", factory.lower())
        index = work / "standin" / f"index-{name}.faiss"
        if not Path(f"{index}.meta.json").exists():   # (a collected folder keeps what it built)
            if not matrix.exists():
                out = np.lib.format.open_memmap(matrix, mode="w+", dtype=np.float32, shape=(passages, dim))
                for start in range(0, passages, 100_000):   # written in blocks: the benchmark itself stays small
                    block = rng.standard_normal((min(100_000, passages - start), dim), dtype=np.float32)
                    out[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
                del out
            run([sys.executable, "-m", "towers", "build-index", "--embeddings", str(matrix), "--factory", factory,
                 "--out", str(index), "--threads", str(threads)], work, environment(work))
        rec = json.loads(Path(f"{index}.meta.json").read_text())
        found.append({"stage": f"build-index {factory}", "output": str(index.relative_to(work)), "seconds": rec["seconds"],
                      "cpu_seconds": rec["cpu_seconds"], "peak_rss_mb": rec["peak_rss_mb"]})
    matrix.unlink(missing_ok=True)
    return found


def fusion_records(work: Path) -> list[dict]:
    """fuse-runs of the BM25 dev run with itself reversed in score (two runs of the real depth and shape)."""
    runs = sorted(work.glob("artifacts/msmarco-passage/bm25/**/*.trec"))
    test = [r for r in runs if "test" in r.name or r.name == "run.trec"] or runs
    source = test[0]
    flipped = work / "standin" / "flipped.trec"
    with open(source) as src, open(flipped, "w") as dst:
        for line in src:
            q, z, d, rank, score, tag = line.split()
            dst.write(f"{q} {z} {d} {rank} {-float(score):.6f} other\n")
    out = work / "standin" / "fused.trec"
    run([sys.executable, "-m", "towers", "fuse-runs", "--runs", str(source), str(flipped), "--method", "rrf",
         "--depth", "1000", "--out", str(out)], work, environment(work))
    rec = json.loads(Path(f"{out}.meta.json").read_text())
    return [{"stage": "fuse-runs (rrf, 2 BM25 runs)", "output": str(out.relative_to(work)), "seconds": rec["seconds"],
             "cpu_seconds": rec["cpu_seconds"], "peak_rss_mb": rec["peak_rss_mb"]}]


HEAP_PROBE_MB = 3000   # a job of 3 GB: a 2 GB heap (towers.retrieval.bm25.java_heap_mb)


def heap_probe(work: Path) -> list[dict]:
    """The test-query BM25 run searched again in a job of HEAP_PROBE_MB: the JVM's RSS grows up to whatever heap it is
    allowed and collects lazily, so the family's own jobs measure the heap they were given. A run byte-identical to
    the family's, within a small heap, is what search needs."""
    source = next(iter(sorted(work.glob("artifacts/msmarco-passage/bm25/dev/test-d*.trec"))))
    rec = json.loads(Path(f"{source}.meta.json").read_text())
    args = rec["arguments"]
    out = work / "standin" / "heap-probe.trec"
    out.parent.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "towers", "bm25-search", "--index", args["index"], "--queries", *args["queries"],
         "--run", str(out), "--k1", str(args["k1"]), "--b", str(args["b"]), "--depth", str(args["depth"]),
         "--threads", str(args["threads"]), "--memory-mb", str(HEAP_PROBE_MB)], work, environment(work))
    if out.read_bytes() != source.read_bytes():
        sys.exit(f"heap probe: {out} differs from {source}")
    probe = json.loads(Path(f"{out}.meta.json").read_text())
    return [{"stage": f"bm25-search (job of {HEAP_PROBE_MB} MB, same run)", "output": str(out.relative_to(work)),
             "seconds": probe["seconds"], "cpu_seconds": probe["cpu_seconds"], "peak_rss_mb": probe["peak_rss_mb"]}]


def declared(targets: list[str]) -> dict[str, dict]:
    """Output path -> (rule, the resources the paper profile's rule declares), from its dry run."""
    with_tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "towers-scale-plan"
    if with_tmp.exists():
        shutil.rmtree(with_tmp)
    with_tmp.mkdir(parents=True)
    copy_workflow(with_tmp)
    done = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--configfile", "config/paper.yaml", "-n",
                           "--cores", "16"], cwd=with_tmp, capture_output=True, text=True)
    found = {}
    for rule, block in planned_jobs(done.stdout):
        outputs = re.search(r"^\s+output: (.*)$", block, re.M)
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        threads = re.search(r"^\s+threads: (\d+)$", block, re.M)
        if not outputs:
            continue
        res = dict(kv.split("=", 1) for kv in resources.group(1).split(", ")) if resources else {}
        entry = {"rule": rule.strip(), "mem_mb": int(res.get("mem_mb", 0)), "runtime": int(res.get("runtime", 0)),
                 "threads": int(threads.group(1)) if threads else 1, "gpu": int(res.get("gpu", 0))}
        for output in outputs.group(1).split(", "):
            found[output] = entry
    shutil.rmtree(with_tmp)
    return found


def measure(part: str, sizes: list[int], cores: int, work_root: Path, train_run_max: int, collect: bool,
            opq_max: int = OPQ_MAX) -> None:
    """Each size built (or, with collect, gathered from its folder as a stopped run left it) and kept in
    results.json as soon as it is measured."""
    for size in sizes:
        work = work_root / f"{part}-{size}"
        if collect:
            counts = json.loads((work / "counts.json").read_text())
        else:
            work, counts = prepare(work, size)
            (work / "counts.json").write_text(json.dumps(counts))
        began = time.perf_counter()
        targets = MODEL_TARGETS if part == "models" else DATA_TARGETS + ([TRAIN_RUN] if size <= train_run_max else [])
        snakemake(work, targets, cores)
        wall = time.perf_counter() - began
        recs = records(work)
        if part == "data":
            factories = FACTORIES + (SAMPLE_TRAINED if size <= opq_max else [])
            recs += standin_faiss(work, size, factories, cores) + fusion_records(work) + heap_probe(work)
        raw = ROOT / "benchmarks/out" / f"scale-{part}-{size}.json"   # every job's record, beside the summary
        raw.parent.mkdir(parents=True, exist_ok=True)
        raw.write_text(json.dumps(recs, indent=2) + "\n")
        entry = {"counts": counts, "wall_seconds": None if collect else round(wall, 1), "jobs": len(recs),
                 "stages": by_stage(recs),
                 "disk_mb": round(sum(f.stat().st_size for f in (work / "artifacts").rglob("*") if f.is_file()) / 2**20, 1)}
        record(("scale", part, str(size)), entry, replace=True)
        print(json.dumps({"part": part, "size": size, "wall_seconds": entry["wall_seconds"], "jobs": len(recs)}), flush=True)
        if part == "data":
            shutil.rmtree(work)   # up to GBs a size; the numbers are kept


def rerun(target: str, sizes: list[int], cores: int, work_root: Path) -> None:
    """One model stage measured again on its own: `target` and what it needs built at each size, its record kept
    under scale.rerun.<stage> (the report fits it in place of the full run's row for that stage)."""
    for size in sizes:
        work, counts = prepare(work_root / f"rerun-{size}", size)
        snakemake(work, [target], cores)
        meta = json.loads((work / f"{target}.meta.json").read_text())
        entry = {"counts": counts, "stages": by_stage([{"stage": meta["stage"], "output": target,
                                                         "seconds": meta["seconds"], "cpu_seconds": meta["cpu_seconds"],
                                                         "peak_rss_mb": meta["peak_rss_mb"]}])}
        record(("scale", "rerun", meta["stage"], str(size)), entry, replace=True)
        print(json.dumps({"stage": meta["stage"], "size": size, **entry["stages"][meta["stage"]]}), flush=True)
        shutil.rmtree(work)


def exponent(xs, ys) -> float | None:
    """Slope of log y on log x (least squares); None when fewer than two positive points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx, my = sum(p[0] for p in pts) / len(pts), sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx, 3) if sxx else None


def linear(xs, ys) -> tuple[float, float]:
    """Least-squares fixed + per-item model of ys on xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def same_jobs(series: dict, part: str) -> dict | None:
    """Per size, each stage's summary with its largest job (by CPU at the largest size) replaced by that same output's
    record at every size (benchmarks/out's raw records): a stage of many variants (rerank at depth 5 or 1000, a flat
    or an OPQ index) is fitted on one job, not on whichever variant was largest at each size. None where the raw
    records are not here (another machine than the one that measured): the fit cannot be made again."""
    raw = {n: ROOT / "benchmarks/out" / f"scale-{part}-{n}.json" for n in series}
    if not all(path.exists() for path in raw.values()):
        return None
    jobs = {n: {r["output"]: r for r in json.loads(path.read_text())} for n, path in raw.items()}
    largest = max(series, key=int)
    out = {n: {**entry, "stages": dict(entry["stages"])} for n, entry in series.items()}
    for stage in series[largest]["stages"]:   # the largest of the jobs run at every size
        common = [r for r in jobs[largest].values() if r["stage"] == stage and all(r["output"] in j for j in jobs.values())]
        top = max(common, key=lambda r: r["cpu_seconds"], default=None)
        for n in series:
            rec = jobs[n].get(top["output"]) if top else None
            if rec and stage in out[n]["stages"]:
                out[n]["stages"][stage] = {**out[n]["stages"][stage], "job_cpu_seconds": rec["cpu_seconds"],
                                           "peak_rss_mb": rec["peak_rss_mb"], "largest_job": rec["output"]}
            elif stage in out[n]["stages"]:
                del out[n]["stages"][stage]   # not run at this size: no point to fit
    return out


# stages whose per-passage memory is vectors: the scaling run's are RepBERT's 64-d (a 64-wide BERT, mean-pooled) and
# LTRe's and ANCE's 96-d (benchmarks/scale.yaml), the paper's 768-d, so theirs is extrapolated x 768/d (an upper
# bound where part of it is text)
VECTOR_STAGES = ("encode-candidates", "build-index", "dense-search", "train-ltre", "train-negatives", "latency")


def vector_scale(stage: str, output: str) -> float:
    if not stage.startswith(VECTOR_STAGES):
        return 1.0
    return PAPER["dim"] / (64 if "/repbert/" in output else 96)


def fit(series: dict, vectors: bool = False) -> list[dict]:
    """Per stage over the sizes: exponents of CPU time and peak memory, and the extrapolation to MS MARCO (with
    `vectors`, a vector stage's per-passage memory at 768 dimensions: vector_scale)."""
    sizes = sorted(int(s) for s in series)
    stages = sorted({st for s in series.values() for st in s["stages"]})
    rows = []
    for stage in stages:
        pts = [(n, series[str(n)]["stages"][stage]) for n in sizes if stage in series[str(n)]["stages"]]
        if len(pts) < 2:
            continue
        ns = [n for n, _ in pts]
        job_cpu = [p["job_cpu_seconds"] for _, p in pts]
        rss = [p["peak_rss_mb"] for _, p in pts]
        fixed, per_item = linear(ns, rss)
        per_item = max(per_item, 0.0)   # a negative slope is noise: memory does not shrink with the corpus
        if vectors and stage.startswith(VECTOR_STAGES):
            # at least the 768-d matrix itself once (float32): at these sizes the small model's vectors are within
            # the noise of a process's fixed memory
            per_item = max(per_item * vector_scale(stage, pts[-1][1]["largest_job"]), PAPER["dim"] * 4 / 2**20)
        scale = PAPER["passages"] / ns[-1]
        e_time = exponent(ns, job_cpu)
        rows.append({"stage": stage, "sizes": ns, "job_cpu_seconds": job_cpu, "peak_rss_mb": rss,
                     "jobs": [p["jobs"] for _, p in pts], "largest_job": pts[-1][1]["largest_job"],
                     "time_exponent": e_time, "memory_exponent": exponent(ns, rss),
                     "memory_fixed_mb": round(fixed, 1), "memory_per_1k_passages_mb": round(per_item * 1000, 4),
                     "paper_peak_mb": round(fixed + per_item * PAPER["passages"], 0),
                     "paper_job_cpu_hours": round(job_cpu[-1] * scale ** max(e_time or 1.0, 1.0) / 3600, 2)})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=["data", "models", "rerun", "report"], required=True)
    p.add_argument("--target", help="--part rerun: the output whose stage is measured again (paper profile path)")
    p.add_argument("--sizes", type=int, nargs="+", default=[])
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--work", type=Path, default=Path("/tmp/towers-scale"))
    p.add_argument("--collect", action="store_true", help="gather a stopped run's folder: build only what is missing")
    p.add_argument("--train-run-max", type=int, default=300_000, help="largest size whose training-query run is made")
    p.add_argument("--opq-max", type=int, default=OPQ_MAX, help="largest size the OPQ stand-in index is built at (0: none)")
    a = p.parse_args()
    if a.part == "rerun":
        rerun(a.target, a.sizes, a.cores, a.work)
        return
    if a.part in ("data", "models"):
        measure(a.part, a.sizes, a.cores, a.work, a.train_run_max, a.collect, a.opq_max)
        return
    scale = read_results().get("scale", {})
    if a.part == "report":
        plan = declared(DATA_TARGETS + MODEL_TARGETS)
        for part in ("data", "models"):
            if part in scale:
                sizes = {k: v for k, v in scale[part].items() if k.isdigit()}
                if part == "data":
                    rows = fit(sizes)
                else:
                    same = same_jobs(sizes, part)   # without the raw records, the fit committed with them stays
                    rows = fit(same, vectors=True) if same is not None else \
                        [r for r in scale.get("models_fit", []) if not r.get("rerun")]
                    measured = [d["stage"] for d in scale.get("data_fit", [])]   # measured there at larger sizes
                    rows = [r for r in rows if not any(m.startswith(r["stage"]) for m in measured)]
                    for stage, series in scale.get("rerun", {}).items():   # measured again, alone: that fit
                        rows = [r for r in rows if r["stage"] != stage] + [{**row, "rerun": True} for row in fit(series)]
                    rows.sort(key=lambda r: r["stage"])
                beside_declared(rows, plan)
                scale[f"{part}_fit"] = rows
        plot(scale, ROOT / "docs/scale.png")
        (ROOT / "benchmarks/out").mkdir(exist_ok=True)
        (ROOT / "benchmarks/out/scale-table.md").write_text(markdown(scale))
        page = ROOT / "docs/scale.md"   # the table between its markers is this script's; the prose around it is not
        text = page.read_text()
        head, rest = text.split("<!-- scale-table -->", 1)
        page.write_text(f"{head}<!-- scale-table -->\n{markdown(scale)}<!-- /scale-table -->"
                        f"{rest.split('<!-- /scale-table -->', 1)[1]}")
        print(markdown(scale))
        scale["requests"] = requests(scale)
        print(json.dumps(scale["requests"], indent=1))
    record("scale", scale, replace=True)   # its own key, under the file's lock: other benchmarks' keys stay


if __name__ == "__main__":
    main()
