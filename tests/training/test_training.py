"""Resumable training: a run stopped after a checkpoint and restarted ends where an uninterrupted one does."""
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from towers.modeling.models import random_encoder

from conftest import ROOT, lighthouse_world, run_stage

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(60)]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return lighthouse_world(tmp_path_factory.mktemp("train"), TEXTS, ARCH, train=50)


def finetune_args(root, out, steps=12, every=4):
    return ["finetune", "--encoder", root / "enc", "--candidates", root / "candidates.jsonl", "--qrels", root / "qrels.txt",
            "--train", root / "train.tsv", "--valid", root / "valid.tsv", "--out", out, "--state-dir", f"{out}.state",
            "--seed", 3, "--steps", steps, "--batch-size", 8, "--lr", 1e-3, "--warmup-ratio", 0.1,
            "--checkpoint-every", every, "--query-length", 16, "--doc-length", 32, "--embedding-dim", 16]


def heads(folder):
    return load_file(str(folder / "heads.safetensors"))


def test_stopped_run_resumes_to_identical_weights(setup):
    whole = run_stage(*finetune_args(setup, setup / "whole"))
    assert whole.returncode == 0, whole.stderr
    stopped = run_stage(*finetune_args(setup, setup / "resumed"), "--stop-after-step", 8)
    assert stopped.returncode != 0 and not (setup / "resumed").exists()
    assert (setup / "resumed.state" / "checkpoint.pt").exists()
    resumed = run_stage(*finetune_args(setup, setup / "resumed"))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from step 8 of 12" in resumed.stdout + resumed.stderr
    for key, value in heads(setup / "whole").items():
        assert torch.equal(value, heads(setup / "resumed")[key]), key
    assert not (setup / "resumed.state" / "checkpoint.pt").exists()   # dropped once the model is saved


@pytest.mark.extended   # a real SIGKILL of a training process; the in-process stop and resume above stays in make test
def test_killed_run_continues_from_last_checkpoint(setup):
    out = setup / "killed"
    args = [sys.executable, "-m", "towers", *map(str, finetune_args(setup, out, steps=60, every=2))]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    checkpoint = setup / "killed.state" / "checkpoint.pt"
    deadline = time.time() + 120
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert checkpoint.exists() and not out.exists(), "the run finished before it could be killed"
    again = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "resumed from step" in again.stdout + again.stderr
    assert (out / "towers.json").exists()


def test_checkpoint_of_other_settings_is_not_reused(setup):
    out = setup / "changed"
    run_stage(*finetune_args(setup, out), "--stop-after-step", 4)
    changed = [str(a) for a in finetune_args(setup, out)]
    changed[changed.index("--lr") + 1] = "0.002"
    again = run_stage(*changed)
    assert again.returncode == 0 and "resumed from step" not in again.stdout + again.stderr


def test_checkpoint_from_another_encoder_is_not_reused(setup, tmp_path):
    out = setup / "other-encoder"
    run_stage(*finetune_args(setup, out), "--stop-after-step", 4)
    random_encoder(setup / "tok", tmp_path / "enc", ARCH, seed=2)
    args = [str(a) for a in finetune_args(setup, out)]
    args[args.index("--encoder") + 1] = str(tmp_path / "enc")
    again = run_stage(*args)
    assert again.returncode == 0 and "resumed from step" not in again.stdout + again.stderr


class _Payload:
    """What a tampered checkpoint could hold: unpickling it runs a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


def test_a_tampered_checkpoint_is_refused_without_running_its_code(setup, tmp_path):
    """Checkpoints travel through the DVC remote: loading one must never unpickle arbitrary objects."""
    out, marker = tmp_path / "tampered", tmp_path / "pwned"
    state = tmp_path / "tampered.state"
    state.mkdir()
    torch.save({"fingerprint": "x", "step": 4, "model": {}, "history": [_Payload(marker)]}, state / "checkpoint.pt")
    args = [str(a) for a in finetune_args(setup, out)]
    args[args.index("--state-dir") + 1] = str(state)
    result = run_stage(*args)
    assert not marker.exists()
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: {state / 'checkpoint.pt'}: not a training checkpoint")
    assert not out.exists()


def test_a_training_question_whose_document_is_not_a_candidate_is_one_line(setup, tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text((setup / "qrels.txt").read_text().replace("q0 0 d0 1", "q0 0 nosuch 1"))
    args = [str(a) for a in finetune_args(setup, tmp_path / "m")]
    args[args.index("--qrels") + 1] = str(qrels)
    result = run_stage(*args)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {qrels}: question q0 of {setup / 'train.tsv'}: its document nosuch is not in {setup / 'candidates.jsonl'}")
    assert not (tmp_path / "m").exists()
