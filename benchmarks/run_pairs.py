"""benchmarks.run's pairs part: the pre-training pairs of enwiki-mini's corpus replicated to growing sizes, each
task timed in a worker process of its own (its peak memory its own)."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .workflow_harness import ROOT

PAIR_TASKS = ["ict", "bfs", "wlp", "ict+bfs+wlp"]
ENWIKI_MINI_CORPUS = ROOT / "artifacts/enwiki-mini/corpus"


def pairs_worker(task: str, articles: str, redirects: str) -> None:
    """One measurement in this (fresh) process: generate every pair of `task`, print count, seconds, peak RSS.

    task 'none' only imports and reads the redirects: the baseline the generators add to."""
    import resource

    from towers.datasets.pretraining_pairs import generate_pairs
    from towers.io import read_json

    links = read_json(redirects)
    count, seconds = 0, 0.0
    if task != "none":
        began = time.perf_counter()
        for _ in generate_pairs(articles, task, seed=13, redirects=links):   # iterated, not kept or written
            count += 1
        seconds = time.perf_counter() - began
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss   # KiB on Linux
    print(json.dumps({"pairs": count, "seconds": seconds, "peak_rss_mb": peak_kb / 1024}))


def replicate_corpus(articles: Path, redirects: Path, copies: int, dest: Path) -> tuple[Path, Path]:
    """`copies` renamed copies of the corpus: ids, titles, link targets and redirects get ' (copy c)', so
    links stay inside their copy and WLP finds as many links per copy as in the original."""
    from towers.datasets.wiki import normalise_title
    from towers.io import read_json

    def rename(title: str, c: int) -> str:
        title = normalise_title(title)
        return f"{title} (copy {c})" if title else title

    out_articles, out_redirects = dest / "articles.jsonl", dest / "redirects.json"
    with open(out_articles, "w", encoding="utf-8") as out:
        for c in range(copies):
            with open(articles, encoding="utf-8") as handle:   # one article in memory at a time
                for line in handle:
                    if not line.strip():
                        continue
                    article = json.loads(line)
                    article["id"], article["title"] = f"{article['id']}-c{c}", rename(article["title"], c)
                    for section in article["sections"]:
                        for paragraph in section["paragraphs"]:
                            for link in paragraph.get("links", []):
                                link["target"] = rename(link.get("target", ""), c)
                    out.write(json.dumps(article, ensure_ascii=False) + "\n")
    source = read_json(redirects)
    out_redirects.write_text(json.dumps({rename(k, c): rename(v, c) for c in range(copies) for k, v in source.items()}))
    return out_articles, out_redirects


def count_lines(path: Path) -> int:
    with open(path, encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def measure_pairs(task: str, articles: Path, redirects: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", "--pairs-worker", task, str(articles),
                           str(redirects)], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)})
    if done.returncode != 0:
        sys.exit(f"pairs benchmark worker failed ({task}, {articles}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def pairs(copies: int, repeats: int) -> dict:
    articles, redirects = ENWIKI_MINI_CORPUS / "articles.jsonl", ENWIKI_MINI_CORPUS / "redirects.json"
    if not (articles.exists() and redirects.exists()):
        sys.exit(f"{articles} is missing: build it with `snakemake {articles.relative_to(ROOT)} --cores 2`")
    big = f"{copies}x"
    load = os.getloadavg()[0]   # rates are sensitive to other work on the machine; peaks are not
    with tempfile.TemporaryDirectory(prefix="towers-bench-pairs-") as tmp:
        corpora = {"1x": (articles, redirects), big: replicate_corpus(articles, redirects, copies, Path(tmp))}
        sizes = {name: {"articles": count_lines(path), "mb": round(path.stat().st_size / 2**20, 2)}
                 for name, (path, _) in corpora.items()}
        baseline = {name: round(max(measure_pairs("none", *corpus)["peak_rss_mb"] for _ in range(repeats)), 1)
                    for name, corpus in corpora.items()}
        tasks = {}
        for task in PAIR_TASKS:
            row = {}
            for name, corpus in corpora.items():
                runs = [measure_pairs(task, *corpus) for _ in range(repeats)]
                if len({r["pairs"] for r in runs}) != 1:
                    sys.exit(f"{task} on {name}: the pair count changed between repeats")
                peak = max(r["peak_rss_mb"] for r in runs)
                row[name] = {"pairs": runs[0]["pairs"],
                             "pairs_per_second": round(statistics.median(r["pairs"] / r["seconds"] for r in runs)),
                             "seconds": round(statistics.median(r["seconds"] for r in runs), 2),
                             "peak_rss_mb": round(peak, 1),
                             "peak_above_baseline_mb": round(peak - baseline[name], 1)}
            row["pairs_ratio"] = round(row[big]["pairs"] / row["1x"]["pairs"], 2)
            row["peak_rss_ratio"] = round(row[big]["peak_rss_mb"] / row["1x"]["peak_rss_mb"], 3)
            row["peak_growth_mb"] = round(row[big]["peak_rss_mb"] - row["1x"]["peak_rss_mb"], 1)
            row["peak_above_baseline_ratio"] = round(row[big]["peak_above_baseline_mb"]
                                                     / max(row["1x"]["peak_above_baseline_mb"], 0.1), 2)
            tasks[task] = row
    return {"corpus": {**sizes, "copies": copies, "size_ratio": round(sizes[big]["mb"] / sizes["1x"]["mb"], 2)},
            "method": ("one fresh process per measurement (peak = its max RSS); pairs iterated, not kept or "
                       f"written; rate and seconds: median of {repeats}, peak: max of {repeats}; baseline: "
                       "a process that only imports towers.datasets.pretraining_pairs and reads the redirects"),
            "load_average_at_start": round(load, 2), "import_baseline_peak_rss_mb": baseline, "tasks": tasks,
            "goal": f"peak_rss_ratio near 1 while the corpus grows {copies}x"}
