"""What the GPU check leaves (benchmarks/gpu_check.sh) becomes results.json's `gpu`, and its rates the GPU-hours.
Runs without a GPU: it reads a check's folder, written here."""
import json

import pytest


def test_record_keeps_the_checks_and_rates(tmp_path, monkeypatch):
    from benchmarks import gpu_throughput
    from benchmarks import workflow_harness

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"other": 1}))
    monkeypatch.setattr(workflow_harness, "RESULTS", results)
    run = tmp_path / "check"
    run.mkdir()
    (run / "env.txt").write_text("WARNING: Target directory exists\nNVIDIA H200, 143771 MiB\n16\n")
    (run / "tests.log").write_text("..s.\n===== 3 passed, 1 skipped in 40.17s =====\n")
    (run / "gpu_checks.jsonl").write_text('{"regime": "mlm", "passed": true}\n{"check": "faiss_gpu", "installed": false}\n')
    (run / "gpu_throughput.json").write_text(json.dumps({"device": "NVIDIA H200", "flops": {"train_base": 2.0e14}}))
    gpu_throughput.record_check(str(run))
    kept = json.loads(results.read_text())
    assert kept["other"] == 1
    assert kept["gpu"]["machine"] == ["NVIDIA H200, 143771 MiB", "16"]
    assert kept["gpu"]["tests"] == "3 passed, 1 skipped in 40.17s"
    assert [c.get("regime") or c["check"] for c in kept["gpu"]["checks"]] == ["mlm", "faiss_gpu"]
    assert kept["gpu"]["throughput"]["flops"]["train_base"] == 2.0e14


def test_gpu_hours_divide_by_measured_rates_else_the_assumed_one():
    from benchmarks import gpu_hours

    flops = {"train_base": 3600 * 2e14, "forward_base": 3600 * 1e14}
    assert gpu_hours.hours(flops, {"train_base": 2e14, "forward_base": 1e14}) == pytest.approx(2.0)
    assert gpu_hours.hours(flops, None) == pytest.approx(3e14 / gpu_hours.GPU_FLOPS)
