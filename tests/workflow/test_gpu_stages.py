"""benchmarks/gpu_stages.py's dry mode: every measured regime's own stage command (as the paper profile plans it,
files swapped for synthetic ones) runs a few steps at tiny shapes on the CPU, and the record gives each paper table
GPU-hours with their basis. The GPU run (docs/gpu.md) is the same code at the paper's shapes."""
import json
import subprocess
import sys

import pytest

from benchmarks.workflow_harness import ROOT

pytestmark = pytest.mark.extended


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-stages")
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_stages", "measure", "--dry", "--out", out],
                          capture_output=True, text=True, cwd=ROOT, env={"TOWERS_DEVICE": "cpu", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "gpu_stages.json").read_text())


def test_every_planned_regime_is_measured_or_says_why_not(measured):
    from benchmarks import gpu_stages, gpu_stages_hours

    assert set(measured["regimes"]) == set(gpu_stages_hours.load_plan()["regimes"])
    for key, entry in measured["regimes"].items():
        skip = [why for what, why in gpu_stages.SKIPPED.items() if what in key]
        assert entry.get("skipped") == (skip[0] if skip else None), key   # only the regimes SKIPPED names
        if skip:
            continue
        run = entry["as_planned"]
        assert "error" not in run, (key, run)
        assert run["steps_run"] == 4 and 0 < run["seconds_a_step"] < run["wall_s"], (key, run)
    assert any("train-repbert" in k and "seconds_a_step" in e.get("as_planned", {}) for k, e in measured["regimes"].items())
    assert all(v["passages_per_s"] > 0 for v in measured["encoding"].values())
    assert set(measured["reranking"]) == {"base", "large"}


def test_each_table_gets_hours_and_says_their_basis(measured):
    from benchmarks import gpu_stages_hours

    plan = gpu_stages_hours.load_plan()
    rates = {"train_base": 258.5e12, "forward_base": 309.9e12, "forward_large": 378.5e12}
    tables = gpu_stages_hours.gpu_hours_of(measured, plan, rates)["tables"]
    repbert = tables["results/repbert/table1.csv"]
    assert repbert["jobs_measured"] >= 2 and repbert["basis"].startswith("measured")   # train-repbert, encoding
    assert repbert["gpu_hours"] == pytest.approx(repbert["measured_hours"] + repbert["flop_estimate_hours"], abs=0.11)
    ltre = tables["results/ltre/table3.csv"]
    assert ltre["jobs_flop_estimate"] > 0   # LTRe's own training keeps the FLOP basis


def test_flop_based_hours_say_their_basis_and_the_small_batch_correction():
    from benchmarks import gpu_hours

    rates = {"train_base": 258.5e12}
    repbert = ("train_repbert", "python -m towers.training.distributed 4 train-repbert --steps 350000 "
                                "--batch-size 52 --query-length 20 --doc-length 256 --out x")
    finetune = ("finetune", "python -m towers.training.distributed 4 finetune --steps 2000 --batch-size 512 "
                            "--query-length 64 --doc-length 288 --out y")
    found = gpu_hours.basis([repbert, finetune], {}, rates)
    assert found["small_batch_rules"] == ["train_repbert"]   # 52 / 4 GPUs is small, 512 / 4 is not
    assert found["small_batch_training_hours"] == pytest.approx(350_000 / 33.6 / 3600, rel=0.01)
    assert "4.9x too low" in found["small_batch_caveat"] and "not measured here" in found["small_batch_caveat"]
    assert gpu_hours.basis([finetune], {}, rates)["small_batch_caveat"] == ""
