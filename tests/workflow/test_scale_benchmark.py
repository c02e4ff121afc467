"""benchmarks/scale.py's fits beside what the paper profile declares."""
from benchmarks import scale, scale_report


def _row(stage, largest_job, peak):
    return {"stage": stage, "largest_job": largest_job, "paper_peak_mb": peak}


def test_a_fit_is_judged_against_its_rules_memory_and_the_bm25_family_by_its_heap_probe():
    plan = {"artifacts/x/run.trec": {"rule": "bm25_search_split", "threads": 4, "mem_mb": 8000, "runtime": 60},
            "artifacts/x/index": {"rule": "build_index", "threads": 4, "mem_mb": 1000, "runtime": 60}}
    rows = [_row("bm25-search", "artifacts/x/run.trec", 46000), _row("bm25-search (job of 3000 MB, same run)",
                                                                      "standin/probe.trec", 5000),
            _row("build-index Flat", "standin/flat.faiss", 2000), _row("train-cross-encoder", "artifacts/y", 9e4)]
    scale_report.beside_declared(rows, plan)
    fits = {r["stage"]: r.get("fits") for r in rows}
    assert fits == {"bm25-search": "probe", "bm25-search (job of 3000 MB, same run)": True, "build-index Flat": False,
                    "train-cross-encoder": None}
    over = [_row("bm25-search", "artifacts/x/run.trec", 4000), _row("bm25-search (probe)", "standin/p.trec", 9000)]
    scale_report.beside_declared(over, plan)   # a probe over its job's memory: the family does not fit either
    assert [r["fits"] for r in over] == [False, False]


def test_a_stage_measured_again_alone_is_fitted_on_its_own_sizes():
    series = {str(n): {"stages": {"train-cross-encoder": {"jobs": 1, "job_cpu_seconds": cpu, "peak_rss_mb": rss,
                                                          "largest_job": "artifacts/y"}}}
              for n, cpu, rss in ((30000, 3.0, 700.0), (300000, 30.0, 3700.0))}
    (row,) = scale.fit(series)
    assert row["sizes"] == [30000, 300000] and row["time_exponent"] == 1.0
    assert abs(row["memory_per_1k_passages_mb"] - 3000 / 270) < 1e-3
