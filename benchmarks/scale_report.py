"""benchmarks.scale's report: each fit beside what the paper profile declares, the figure (docs/scale.png), the
markdown table of docs/scale.md and the resources the fits ask of a cluster."""
from __future__ import annotations

import math
from pathlib import Path

MODEL_STAGES = ("train-", "pretrain-", "encode-", "dense-search", "rerank", "mine-", "latency", "tokenizer")


def beside_declared(rows: list[dict], plan: dict[str, dict]) -> None:
    for row in rows:
        target = row["largest_job"]
        entry = plan.get(target)
        if entry is None:   # stand-ins: Faiss is rule build_index's work, fusion rule fuse_runs', the probe BM25's
            rule = "build_index" if row["stage"].startswith("build-index") else \
                "fuse_runs" if row["stage"].startswith("fuse-runs") else \
                "bm25_search_split" if row["stage"].startswith("bm25-search (") else None
            entry = next((e for e in plan.values() if e["rule"] == rule), None)
        if entry:
            row.update({"rule": entry["rule"], "threads": entry["threads"], "declared_mem_mb": entry["mem_mb"],
                        "declared_runtime_min": entry["runtime"],
                        "fits": row["paper_peak_mb"] <= entry["mem_mb"] if entry["mem_mb"] else None})
    # the BM25 family's jobs ran with a heap of 3/4 of 58 GB, which the JVM fills lazily: what a job needs is what the
    # heap probe (the same run in a job of 3 GB) measures, so the family's fit is the probe's
    probe = next((r for r in rows if r["stage"].startswith("bm25-search (")), None)
    for row in rows:
        if probe and row["stage"] == "bm25-search" and "fits" in probe:
            row["fits"] = "probe" if probe["fits"] else False


def plot(scale: dict, path: Path) -> None:
    """CPU seconds of the largest job and peak RSS per stage against passages, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    for part, style in (("data_fit", "-o"), ("models_fit", "--s")):
        for row in scale.get(part, []):
            axes[0].plot(row["sizes"], row["job_cpu_seconds"], style, label=row["stage"], ms=3)
            axes[1].plot(row["sizes"], row["peak_rss_mb"], style, ms=3)
    for ax, what in zip(axes, ("CPU seconds of the largest job", "peak RSS of the largest job (MB)")):
        ax.set(xscale="log", yscale="log", xlabel="passages (synthetic MS MARCO)", ylabel=what)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle("Paper profile's MS MARCO stages on synthetic collections (2 CPU cores): solid = data stages, "
                 "dashed = model stages (small BERT)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(scale: dict) -> str:
    """The fitted table of docs/scale.md (the page's prose is written around it)."""
    lines = ["| stage | rule | sizes (passages) | CPU s, largest job | time exp. | peak RSS MB | mem. exp. | "
             "MB / 1K passages | at MS MARCO: peak MB | declared MB | fits | CPU h at MS MARCO |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for part in ("data_fit", "models_fit"):
        for r in scale.get(part, []):
            model = part == "models_fit" and r["stage"].startswith(MODEL_STAGES)
            hours = "GPU" if model else r["paper_job_cpu_hours"]   # a small model's CPU time says nothing of it
            sizes = " / ".join(f"{n // 1000}K" for n in r["sizes"])
            cpu = " / ".join(f"{v:.1f}" for v in r["job_cpu_seconds"])
            rss = " / ".join(f"{v:.0f}" for v in r["peak_rss_mb"])
            fits = {True: "yes", False: "**no**", None: "--", "probe": "yes (the probe's)"}[r.get("fits")]
            lines.append(f"| {r['stage']} | {r.get('rule', '--')} | {sizes} | {cpu} | {r['time_exponent']} | {rss} | "
                         f"{r['memory_exponent']} | {r['memory_per_1k_passages_mb']} | {r['paper_peak_mb']:.0f} | "
                         f"{r.get('declared_mem_mb', '--')} | {fits} | {hours} |")
    return "\n".join(lines) + "\n"


def requests(scale: dict) -> dict[str, dict]:
    """resources.rules for config/paper.yaml: per measured rule that is not model compute, memory = 1.5 x the
    extrapolated peak, rounded up to GB, and runtime (minutes) = 2 x the extrapolated CPU time (as on one thread), at
    least 30. Model stages keep their family's GPU job (a GPU's time is not a CPU's, and a BERT-base's memory is not
    the small model's): the report says whether their extrapolated peak fits it; one in no family gets its memory."""
    out = {}
    rows = scale.get("data_fit", []) + scale.get("models_fit", [])
    probed = {r.get("rule") for r in rows if r["stage"].startswith("bm25-search (")}
    for row in rows:
        rule = row.get("rule")
        if not rule or row["stage"].startswith(("build-index", "fuse-runs")) and rule in out:
            continue
        if rule in probed and not row["stage"].startswith("bm25-search ("):
            continue   # its own jobs measured the heap they were allowed; the probe, what search needs
        model = row["stage"].startswith(MODEL_STAGES)
        if model and row.get("declared_mem_mb"):
            continue   # its family's GPU job
        mem = 1000 * math.ceil(1.5 * max(row["paper_peak_mb"], row["peak_rss_mb"][-1]) / 1000)
        entry = out.setdefault(rule, {})
        entry["mem_mb"] = max(entry.get("mem_mb", 0), mem)
        if model:
            continue   # (a model stage in no family: its memory only)
        minutes = math.ceil(2 * row["paper_job_cpu_hours"] * 60)   # as if on one thread: no speed-up assumed
        entry["runtime"] = max(entry.get("runtime", 0), max(30, minutes))
    return dict(sorted(out.items()))
