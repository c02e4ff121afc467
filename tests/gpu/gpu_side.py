"""What the GPU checks share: the dry-run switch, the skip without CUDA, and the record of each check.

TOWERS_GPU_DRY_RUN=1 runs the device side on the CPU too (the harness, here); =bf16 runs it on the CPU under
CPU bf16 autocast (training only: how far bf16 moves the curves, without a GPU). TOWERS_GPU_RECORD=<file>
appends one JSON line per check."""
from __future__ import annotations

import json
import os

import pytest
import torch

DRY_RUN = os.environ.get("TOWERS_GPU_DRY_RUN", "")
if DRY_RUN not in ("", "0", "1", "bf16"):
    raise ValueError(f"TOWERS_GPU_DRY_RUN must be 1 or bf16, not {DRY_RUN!r}")
DRY_RUN = "" if DRY_RUN == "0" else DRY_RUN

# TOWERS_GPU_SPEED=1: the device side trains with the paper profile's switches (fixed length buckets, fused AdamW;
# =compile adds CUDA graphs), the CPU side without: the switches' losses against the GPU checks' tolerances
_SPEED = os.environ.get("TOWERS_GPU_SPEED", "")
if _SPEED not in ("", "0", "1", "compile"):
    raise ValueError(f"TOWERS_GPU_SPEED must be 1 or compile, not {_SPEED!r}")


def _speed():
    from towers.training.settings import Speed

    on = _SPEED in ("1", "compile")
    return Speed(length_buckets="16,32,48,64,128" if on else "", fused_adamw=int(on), compile=int(_SPEED == "compile"))


SPEED = _speed()

marks = [pytest.mark.gpu,
         pytest.mark.skipif(not torch.cuda.is_available() and not DRY_RUN,
                            reason="no CUDA device (TOWERS_GPU_DRY_RUN=1 runs both sides on the CPU)")]


def run_on(patch, cpu: bool) -> None:
    """The stages that follow run on the CPU (TOWERS_DEVICE=cpu: runtime.device() reads it on every call), or on
    the GPU (the CPU in a dry run)."""
    if cpu or DRY_RUN:
        patch.setenv("TOWERS_DEVICE", "cpu")
    else:
        patch.delenv("TOWERS_DEVICE", raising=False)


def record(key: str, name: str, **values) -> None:
    """One line of the record: {key: name, "device": ..., **values}."""
    path = os.environ.get("TOWERS_GPU_RECORD")
    if path:
        device = {"1": "cpu (dry run)", "bf16": "cpu (dry run, bf16 autocast)"}.get(DRY_RUN) \
            or torch.cuda.get_device_name(0)
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({key: name, "device": device, "speed": SPEED.as_dict(), **values}) + "\n")
