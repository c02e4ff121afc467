"""Issue 40: NaN and inf stop where they first appear. A non-finite loss stops training at its step; a training run
with a score that is not a number, or a document named twice, is one line naming the line; doc vectors holding NaN
are refused before LTRe trains on them."""
import json

import numpy as np
import pytest
import torch

from towers.io import StageError
from towers.training.settings import Schedule
from towers.training import loop, sampling

from conftest import run_stage
from test_training import finetune_args, setup  # noqa: F401  (the module's tiny world, a fixture)


def test_a_loss_that_is_not_finite_stops_at_its_step_with_the_last_checkpoint_kept(tmp_path):
    model = torch.nn.Linear(2, 1)
    schedule = Schedule(steps=6, batch_size=4, lr=0.1, warmup_ratio=0.0, checkpoint_every=2)
    state = tmp_path / "state"

    def loss_fn(step):
        loss = model(torch.ones(1, 2)).sum()
        return loss * float("nan") if step == 2 else loss   # the third step

    with pytest.raises(StageError) as err:
        loop.run(model, loss_fn, schedule, loop.Run(0, state, tmp_path / "steps.jsonl"), identity={})
    assert str(err.value) == (f"{state}: loss is nan at step 3 (lr 0.0667, batch of 4 drawn from seed 0); "
                              f"nothing was saved for this step")
    assert torch.load(state / "checkpoint.pt", weights_only=True)["step"] == 2   # the last good one, for a look
    assert [json.loads(line)["step"] for line in (state / "steps.jsonl").read_text().splitlines()] == [1, 2]
    assert not (tmp_path / "steps.jsonl").exists()   # no published log: nothing looks finished


def test_an_infinite_loss_is_named_too(tmp_path):
    model = torch.nn.Linear(2, 1)
    schedule = Schedule(steps=2, batch_size=1, lr=0.1, warmup_ratio=0.0, checkpoint_every=1)
    with pytest.raises(StageError, match="loss is inf at step 1 "):
        loop.run(model, lambda step: model(torch.ones(1, 2)).sum() * float("inf") + 1e30, schedule,
                 loop.Run(0, tmp_path / "s"), identity={})


def test_a_training_stage_whose_loss_is_nan_is_one_line_and_leaves_no_model(setup, tmp_path):  # noqa: F811
    out = tmp_path / "m"
    result = run_stage(*finetune_args(setup, out), "--temperature", "nan")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {out}.state: loss is nan at step 1 (lr 0, batch of 8 drawn from seed 3); "
        f"nothing was saved for this step")
    assert not out.exists() and not (tmp_path / "m.meta.json").exists()


# ---- training runs (run_rows)

def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize("score", ["nan", "inf", "-inf"])
def test_a_training_run_score_that_is_not_finite_names_its_line_whatever_the_chunk(tmp_path, monkeypatch, score):
    monkeypatch.setattr(sampling, "RUN_CHUNK", 2)
    lines = [f"q{q} Q0 d{d} {d + 1} {9 - d}.0 bm25" for q in range(3) for d in range(3)]
    lines[8] = lines[8].replace("7.0", score)
    path = write(tmp_path / "run.trec", lines[:4] + [""] + lines[4:])   # a blank line: line numbers are the file's
    with pytest.raises(StageError) as err:
        sampling.run_rows(path, ["q0", "q1", "q2"], sampling.RowLookup([f"d{i}" for i in range(3)]), 10)
    assert str(err.value) == f"{path}: line 10: score {score} of document d2 for query q2 is not a finite number"


def test_a_document_named_twice_in_a_training_run_names_the_second_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sampling, "RUN_CHUNK", 2)
    monkeypatch.setattr(sampling, "REPEAT_BLOCK", 3)   # the repeat in a later block than the first query
    lookup = sampling.RowLookup([f"d{i}" for i in range(5)])
    lines = ["q0 Q0 d0 1 3 t", "q0 Q0 d1 2 2 t", "q1 Q0 d4 1 3 t", "q2 Q0 d1 1 3 t", "q1 Q0 d2 2 2 t",
             "q1 Q0 d4 3 1 t", "q2 Q0 d3 2 2 t"]
    path = write(tmp_path / "run.trec", lines)
    with pytest.raises(StageError) as err:
        sampling.run_rows(path, ["q0", "q1", "q2"], lookup, 10)
    assert str(err.value) == f"{path}: line 6: document d4 appears twice for query q1"
    # a repeat the training data does not hold (below the depth, or of a query not trained on) is not looked for
    assert sampling.run_rows(path, ["q0", "q1", "q2"], lookup, 2)[1].tolist() == [4, 2]
    assert sampling.run_rows(path, ["q0", "q2"], lookup, 10)[1].tolist() == [1, 3]


def test_the_repeat_check_sees_a_pair_in_blocks_of_whole_queries():
    offsets = np.array([0, 2, 6, 7])
    query = np.array([0, 0, 1, 1, 1, 1, 2], dtype=np.int32)
    assert sampling._repeated(query, np.array([1, 2, 1, 2, 3, 4, 1], np.int32), offsets, 5) is None
    for block in (1, 3, 100):   # a query longer than a block is a block of its own
        sampling.REPEAT_BLOCK, kept = block, sampling.REPEAT_BLOCK
        try:
            assert sampling._repeated(query, np.array([1, 2, 1, 2, 3, 2, 1], np.int32), offsets, 5) == (1, 2)
        finally:
            sampling.REPEAT_BLOCK = kept


# ---- LTRe's fixed doc vectors

def test_ltre_refuses_doc_vectors_holding_nan_naming_the_row_and_file(tmp_path):
    from types import SimpleNamespace

    from towers.training import ltre

    matrix = np.ones((4, 3), dtype=np.float32)
    matrix[2, 1] = np.nan
    np.save(tmp_path / "e.npy", matrix)
    data = SimpleNamespace(queries=[], judgements=None, bm25=None, n_docs=4, key={})
    with pytest.raises(StageError) as err:
        ltre.train(None, None, data, np.load(tmp_path / "e.npy", mmap_mode="r"), SimpleNamespace(ntotal=4),
                   SimpleNamespace(negatives="ltre", probe_depth=0, refresh_every=0), loop.Run(0, tmp_path / "s"))
    assert str(err.value) == (f"{tmp_path / 'e.npy'}: row 2 holds NaN or inf, not an embedding: its document would "
                              f"drop out of every ranking")
