"""Data-parallel training over the processes torchrun starts (one a GPU; gloo on CPU for tests).

Every rank draws the step's whole batch from (seed, step), exactly as a single process does, and scores
its own contiguous share of the rows; in-batch losses see every rank's document vectors (`gather`),
and the gradients are averaged before the optimiser step. A loss that is a mean over equal shares
therefore takes the same steps on N processes as on one, up to float noise and dropout. Rank 0 alone
validates, checkpoints and writes outputs; the other ranks leave once the last step is taken.

Outside a training step (validation) `share` and `gather` do nothing, so that code runs whole on whichever
rank calls it. Work every rank needs whole but none should repeat (an asynchronous refresh re-encoding the
corpus and searching every training query) is split with `my_rows` and put back together with `gather_rows`
(small arrays, gathered into every rank) or `shared_matrix` (a matrix written by slices into one file that
every rank maps).

Launch: `python -m towers.training.distributed N <stage> <arguments>` runs `python -m towers <stage> ...`
in N processes on this machine (torchrun's standalone mode, through its Python API: torchrun's own
command line would take a stage's --log or --start for one of its options)."""
from __future__ import annotations

import os
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ..io import StageError
from ..runtime import finish, leader, rank, start, started, world  # noqa: F401  (the launched stage's own steps)

_stepping = False   # inside loop.run's loss_fn(step): rows are shared out


@contextmanager
def stepping():
    global _stepping
    _stepping = True
    try:
        yield
    finally:
        _stepping = False


def _active() -> bool:
    return _stepping and world() > 1


def share(rows: int) -> slice:
    """This rank's contiguous share of a batch of `rows` rows (all of them outside a step or alone)."""
    if not _active():
        return slice(0, rows)
    if rows % world():
        raise StageError("--batch-size", f"a batch of {rows} rows does not split evenly over {world()} training "
                         f"processes; make the batch size a multiple of {world()}")
    size = rows // world()
    return slice(rank() * size, (rank() + 1) * size)


def mine(*batches):
    """Each of `batches` (sequences or arrays of one batch's rows) cut to this rank's share."""
    cut = share(len(batches[0]))
    return tuple(batch[cut] for batch in batches)


class _Gather(torch.autograd.Function):
    """all_gather whose backward sums every rank's gradient for each share (all_reduce works on
    gloo as well as NCCL, unlike reduce_scatter) and returns this rank's."""

    @staticmethod
    def forward(ctx, x):
        parts = [torch.empty_like(x) for _ in range(world())]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad)
        size = grad.shape[0] // world()
        return grad[rank() * size:(rank() + 1) * size]


def gather(x: torch.Tensor) -> torch.Tensor:
    """Every rank's rows of `x`, in batch order (this rank's share inside a step; `x` alone otherwise)."""
    return _Gather.apply(x) if _active() else x


def share_weight(local) -> float:
    """For a loss averaged over a varying number of items (MLM's masked tokens; `local`: this rank's
    count, a number or a 0-d tensor): the factor that turns this rank's mean into its part of the
    mean over every rank's items (1.0 when alone)."""
    if not _active():
        return 1.0
    local = float(local)
    total = _all_sum(local)
    return world() * local / total if total else 0.0


def _comm_device() -> torch.device:
    return torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")


def _all_sum(value: float) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=_comm_device())
    dist.all_reduce(tensor)
    return float(tensor)


def mean_value(value: float) -> float:
    """The mean of a logged number over the ranks (the step's loss of the whole batch)."""
    return _all_sum(value) / world() if started() else value


def my_rows(count: int) -> tuple[int, int]:
    """[start, stop): this rank's contiguous part of `count` items of work split across the ranks (all alone)."""
    return count * rank() // world(), count * (rank() + 1) // world()


def gather_rows(part: np.ndarray, count: int) -> np.ndarray:
    """Every rank's `part` (its my_rows(count) rows of one array) in rank order, on every rank; `part` alone."""
    if not started():
        return part
    sizes = [count * (r + 1) // world() - count * r // world() for r in range(world())]
    if len(part) != sizes[rank()]:
        raise ValueError(f"rank {rank()} holds {len(part)} rows, not its {sizes[rank()]} of {count}")
    padded = np.zeros((max(sizes), *part.shape[1:]), dtype=part.dtype)   # all_gather wants equal shapes
    padded[:len(part)] = part
    tensor = torch.from_numpy(padded).to(_comm_device())
    parts = [torch.empty_like(tensor) for _ in range(world())]
    dist.all_gather(parts, tensor)
    return np.concatenate([p.cpu().numpy()[:size] for p, size in zip(parts, sizes)])


def shared_matrix(part: np.ndarray, count: int, path) -> np.ndarray:
    """The float32 (count, width) matrix whose my_rows(count) rows are each rank's `part`: every rank writes its
    rows into one .npy at `path` (a folder all ranks see) and maps it read-only, so the processes share one copy
    through the page cache instead of each holding the whole. `part` itself alone."""
    if not started():
        return part
    width = int(_all_max(part.shape[1] if part.ndim == 2 and len(part) else 0))
    path = Path(path)
    if leader():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)   # a new file: a rank still mapping the last refresh keeps the old one
        np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(count, width)).flush()   # header, size
    dist.barrier()
    first, end = my_rows(count)   # (not `start`: the module re-exports runtime.start)
    if end > first:
        out = np.load(path, mmap_mode="r+")
        out[first:end] = part
        out.flush()
        del out
    dist.barrier()
    return np.load(path, mmap_mode="r")


def _all_max(value: float) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=_comm_device())
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor)


def leader_decides(flag: bool) -> bool:
    """The leader's value of a decision (early stopping) on every rank."""
    return bool(_all_sum(float(flag) if leader() else 0.0)) if started() else flag


def average_gradients(params: list[torch.nn.Parameter]) -> None:
    """Average the gradients over the ranks, in one flat buffer. A parameter that no rank's loss
    reached keeps no gradient (so AdamW leaves it alone, as in one process)."""
    if not started():
        return
    device = params[0].device
    reached = torch.tensor([float(p.grad is not None) for p in params], device=device)
    dist.all_reduce(reached)
    params = [p for p, r in zip(params, reached.tolist()) if r]
    flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
    dist.all_reduce(flat)
    flat /= world()
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p)   # views of one buffer, alive while they are
        offset += n


def broadcast_weights(model: torch.nn.Module) -> None:
    """Start every rank from the leader's weights (a resumed or hub checkpoint read by each)."""
    if not started():
        return
    for tensor in [*model.parameters(), *model.buffers()]:
        dist.broadcast(tensor.data, 0)


def launch(processes: int, argv: list[str]) -> int:
    """`python -m towers <argv>` in `processes` local processes; 0 when every one succeeds."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    threads = int(os.environ.get("OMP_NUM_THREADS", "0"))
    if threads:   # the job's threads, shared out: each process gets its part
        os.environ["OMP_NUM_THREADS"] = str(max(1, threads // processes))
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=processes, run_id=str(uuid.uuid4()),
                          rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0)
    try:
        elastic_launch(config, sys.executable)("-m", "towers", *argv)
    except ChildFailedError as err:
        print(f"error: {argv[0] if argv else 'towers'} failed in {len(err.failures)} of {processes} "
              "training processes (their messages are above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or not sys.argv[1].isdigit():
        sys.exit("usage: python -m towers.training.distributed PROCESSES STAGE [ARGUMENTS...]")
    sys.exit(launch(int(sys.argv[1]), sys.argv[2:]))
