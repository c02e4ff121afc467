"""Where a stage runs: the torch device, and the process group torchrun starts for a data-parallel training
job (training/distributed.py holds what the training steps do with it). Retrieval and training both use
these; nothing here trains."""
from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist


def device() -> torch.device:
    """The GPU when torch sees one, else the CPU; TOWERS_DEVICE=cpu keeps a stage on the CPU of a GPU machine
    (the GPU checks compare the two on one machine)."""
    chosen = os.environ.get("TOWERS_DEVICE", "")
    if chosen not in ("", "cpu", "cuda"):
        raise ValueError(f"TOWERS_DEVICE must be cpu or cuda, not {chosen!r}")
    if chosen == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda")


PRECISIONS = ("float32", "bfloat16")


def cpu_scoring(precision: str):
    """A context for inference (no gradients) on the CPU in `precision`: bfloat16 runs the matrix products under
    autocast (on a CPU with bf16 dot products about 5x a float32 product's rate, a small tower's encoding 1.7x),
    float32 runs as written. Nothing changes on a GPU, which scores in float16 autocast either way."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16" and device().type == "cpu")


def started() -> bool:
    return dist.is_available() and dist.is_initialized()


def world() -> int:
    return dist.get_world_size() if started() else 1


def rank() -> int:
    return dist.get_rank() if started() else 0


def leader() -> bool:
    return rank() == 0


def start() -> None:
    """Join the process group torchrun describes in the environment (WORLD_SIZE > 1); else nothing."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or started():
        return
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))   # "cuda" is then this rank's GPU
    # the other ranks wait in a collective while the leader validates and checkpoints: give that time
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", timeout=timedelta(hours=2))


def finish() -> None:
    """After the last step: the leader goes on to write outputs, every other rank exits."""
    if not started():
        return
    dist.barrier()
    follower = not leader()
    dist.destroy_process_group()
    if follower:
        raise SystemExit(0)
