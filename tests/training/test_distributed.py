"""Data-parallel training under torchrun (two CPU processes, gloo): the same steps as one process,
one set of outputs, and a clear error when the batch does not split."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file

from towers.training.losses import in_batch_softmax
from towers.modeling.models import random_encoder
from towers.training import distributed
from towers.modeling.tokenizer import train_wordpiece

from conftest import ROOT, run_stage, write_lighthouse_split

pytestmark = pytest.mark.extended   # data-parallel runs: make test-extended

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(40)]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}


def torchrun(*args, processes=2):
    """A stage as the workflow's training rules launch it on a multi-GPU node."""
    command = [sys.executable, "-m", "towers.training.distributed", str(processes), *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})


# --- the gradient of a gathered in-batch loss, two ranks in this machine's processes -----------------

KEYS = ["a", "b", "c", "a", "d", "e", "f", "g"]   # rows 0 and 3 share a document


def towers_and_batch():
    torch.manual_seed(0)
    query, doc = torch.nn.Linear(6, 4), torch.nn.Linear(6, 4)
    return query, doc, torch.randn(8, 6), torch.randn(8, 6)


def averaged_gradients():
    query, doc, x, y = towers_and_batch()
    with distributed.stepping():
        mine = distributed.share(len(x))
        loss = in_batch_softmax(query(x[mine]), distributed.gather(doc(y[mine])), KEYS, 0.5, mine.start)
        loss.backward()
    params = [*query.parameters(), *doc.parameters()]
    distributed.average_gradients(params)
    return [p.grad for p in params]


def rank_gradients(rank, folder):
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    torch.save(averaged_gradients(), f"{folder}/grads{rank}.pt")
    dist.destroy_process_group()


def test_a_gathered_batch_gives_the_gradients_of_one_process(tmp_path):
    mp.spawn(rank_gradients, args=(str(tmp_path),), nprocs=2)
    alone = averaged_gradients()
    for rank in (0, 1):
        for single, shared in zip(alone, torch.load(tmp_path / f"grads{rank}.pt")):
            assert torch.allclose(single, shared, atol=1e-6), (rank, single, shared)


# --- work split across ranks and put back together (an asynchronous refresh) ------------------------

def rank_parts(rank, folder, count):
    import numpy as np

    dist.init_process_group("gloo", init_method=f"file://{folder}/store{count}", rank=rank, world_size=2)
    start, stop = distributed.my_rows(count)
    whole = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    gathered = distributed.gather_rows(whole[start:stop].astype(np.int64), count)
    shared = distributed.shared_matrix(whole[start:stop], count, f"{folder}/shared{count}.npy")
    np.save(f"{folder}/out{count}-{rank}.npy", np.stack([gathered.astype(np.float32), np.asarray(shared)]))
    assert isinstance(shared, np.memmap) and not shared.flags.writeable   # mapped, one copy for both ranks
    dist.destroy_process_group()


@pytest.mark.parametrize("count", [1, 5, 8])
def test_rows_split_over_ranks_come_back_whole_on_every_rank(tmp_path, count):
    import numpy as np

    mp.spawn(rank_parts, args=(str(tmp_path), count), nprocs=2)
    whole = np.arange(count * 3, dtype=np.float32).reshape(count, 3)
    for rank in (0, 1):
        gathered, shared = np.load(tmp_path / f"out{count}-{rank}.npy")
        assert np.array_equal(gathered, whole) and np.array_equal(shared, whole)
    assert distributed.my_rows(count) == (0, count)   # alone: all of it
    assert distributed.gather_rows(whole, count) is whole


# --- stages under the launcher -------------------------------------------------------------------

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    train_wordpiece(TEXTS, root / "tok", vocab_size=200, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", ARCH, seed=1)
    # without dropout, two processes and one see the same numbers (dropout masks depend on the batch's shape)
    config = json.loads((root / "enc" / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (root / "enc" / "config.json").write_text(json.dumps(config))
    write_lighthouse_split(root, TEXTS, train=32)
    return root


def schedule(out, steps=6, batch=8):
    return ["--out", out, "--state-dir", f"{out}.state", "--seed", 3, "--steps", steps, "--batch-size", batch,
            "--lr", 5e-3, "--warmup-ratio", 0.0, "--checkpoint-every", 3, "--log", f"{out}.steps.jsonl"]


def finetune(root, out, **kw):   # in-batch softmax: every process sees every process's doc vectors
    return ["finetune", "--encoder", root / "enc", "--candidates", root / "candidates.jsonl", "--qrels",
            root / "qrels.txt", "--train", root / "train.tsv", "--valid", root / "valid.tsv", "--query-length", 16,
            "--doc-length", 32, "--embedding-dim", 16, "--pooling", "mean", *schedule(out, **kw)]


def negatives(method, *extra):   # LTRe's baselines: nce = hardest in-batch doc (gathered), rand = per-row lists,
    def args(root, out, **kw):     # async = ANCE's refresh, its corpus and queries split over the processes
        return ["train-negatives", "--start", root / "enc", "--negatives", method, "--candidates",
                root / "candidates.jsonl", "--qrels", root / "qrels.txt", "--train", root / "train.tsv",
                "--query-length", 16, "--doc-length", 32, "--embedding-dim", 16, "--pooling", "mean",
                *extra, *schedule(out, **kw)]
    return args


def encoder_weights(folder):
    """Every BERT tensor saved under `folder` (the towers' encoders; heads and projections left out)."""
    return {f"{path.relative_to(folder)}:{key}": value for path in sorted(folder.rglob("model.safetensors"))
            for key, value in load_file(str(path)).items()}


def losses(out):
    return [json.loads(line)["loss"] for line in open(f"{out}.steps.jsonl")]


@pytest.mark.parametrize("name, stage", [("finetune", finetune), ("nce", negatives("nce")),
                                         ("rand", negatives("rand")),
                                         ("async", negatives("async", "--refresh-every", 3, "--negative-depth", 5))])
def test_two_processes_take_the_steps_of_one(setup, name, stage):
    one, two = setup / f"{name}-one", setup / f"{name}-two"
    alone = run_stage(*stage(setup, one))
    assert alone.returncode == 0, alone.stderr
    pair = torchrun(*stage(setup, two))
    assert pair.returncode == 0, pair.stderr[-3000:]
    # the whole batch's loss, step by step, and the validation losses
    assert losses(two) == pytest.approx(losses(one), abs=1e-4) and len(losses(two)) == 6   # one log, every step
    # AdamW blows float noise up where a gradient is ~0 in theory (a bias that shifts every in-batch doc
    # alike), so weights are compared by how far apart the runs end against how far training moved them
    start = load_file(str(setup / "enc" / "model.safetensors"))
    a, b = encoder_weights(one), encoder_weights(two)
    assert a.keys() == b.keys() and a
    apart = sum(float((a[k] - b[k]).norm()) ** 2 for k in a) ** 0.5
    moved = sum(float((a[k] - start[k.split(":")[1]]).norm()) ** 2 for k in a) ** 0.5
    assert apart < 0.1 * moved, (apart, moved)
    # the leader alone writes: one model, one meta record, no stray temporary files
    assert sorted(p.name[len(two.name):] for p in setup.glob(f"{two.name}*")) == \
        sorted(p.name[len(one.name):] for p in setup.glob(f"{one.name}*"))
    assert not list(setup.rglob(".*.tmp*"))


def test_masked_lm_trains_on_two_processes(setup):
    out = setup / "mlm-two"
    pair = torchrun("pretrain-mlm", "--candidates", setup / "candidates.jsonl", "--tokenizer", setup / "tok",
                    "--max-length", 24, *schedule(out), *[f"--{k.replace('_', '-')}={v}" for k, v in ARCH.items()])
    assert pair.returncode == 0, pair.stderr[-3000:]
    assert (out / "config.json").exists() and len(losses(out)) == 6
    assert all(loss == loss and loss > 0 for loss in losses(out))


def test_a_batch_that_does_not_split_is_a_one_line_error(setup):
    out = setup / "uneven"
    pair = torchrun(*finetune(setup, out, batch=7))
    assert pair.returncode != 0
    assert "a batch of 7 rows does not split evenly over 2 training processes" in pair.stderr
    assert "error: --batch-size: a batch of 7" in pair.stderr and "Traceback (most recent call last)" not in pair.stderr
    assert not out.exists()


def test_a_stopped_data_parallel_run_resumes_to_the_same_weights(setup):
    whole, resumed = setup / "whole-two", setup / "resumed-two"
    assert torchrun(*finetune(setup, whole)).returncode == 0
    stopped = torchrun(*finetune(setup, resumed), "--stop-after-step", 3)
    assert stopped.returncode != 0 and not resumed.exists() and (setup / "resumed-two.state" / "checkpoint.pt").exists()
    again = torchrun(*finetune(setup, resumed))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from step 3 of 6" in again.stdout + again.stderr
    a, b = encoder_weights(whole), encoder_weights(resumed)
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert losses(resumed)[-3:] == losses(whole)[-3:]
