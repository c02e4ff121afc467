"""The shared training loop: AdamW, linear warm-up and decay, periodic checkpoints, resume.

Each step reseeds torch from (seed, step) and each regime draws its batch from (seed, step), so a
run resumed from a checkpoint takes exactly the same steps as one that was never interrupted. Under
torchrun the same loop runs data-parallel (see distributed.py)."""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from tqdm import tqdm
from transformers import get_linear_schedule_with_warmup

from ..io import StageError, atomic_path, sha256_of
from ..modeling.tokens import length_buckets, token_memo
from ..runtime import device  # noqa: F401  (the regimes' loop.device())
from .settings import Schedule, Speed
from . import distributed


def fingerprint(settings) -> str:
    """Short digest of any JSON-able value (settings, training pairs, token blocks)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def folder_digest(folder) -> str:
    """Digest of every file in a folder (a checkpoint or tokenizer directory)."""
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file())
    return fingerprint({str(p.relative_to(folder)): sha256_of(p) for p in files})


@dataclass(frozen=True)
class Run:
    """A training run's bookkeeping beside its settings: the seed, the folder of its checkpoints and step log, where
    the step log is published, and a step to stop after (tests of resuming)."""
    seed: int
    state_dir: str | Path
    log_path: str | Path | None = None
    stop_after_step: int | None = None
    speed: Speed = Speed()
    # a checkpoint to resume from is written at the first checkpoint step, then when this long has passed since the
    # last one: a short run writes one, not one each `checkpoint_every` steps (Three-T Emb spent ~21% writing them)
    resume_seconds: float = 60.0


def positions(model: torch.nn.Module) -> int | None:
    """The fewest positions of the model's encoders (None: none has positions, a bag of words)."""
    return min((m.config.max_position_embeddings for m in model.modules()
                if isinstance(getattr(getattr(m, "config", None), "max_position_embeddings", None), int)), default=None)


def step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step) % (2**31)


def run(model: torch.nn.Module, loss_fn: Callable[[int], torch.Tensor | tuple[torch.Tensor, dict]],
        schedule: Schedule, run: Run, *, identity: dict, weight_decay: float = 0.01,
        on_checkpoint: Callable[[int], dict] | None = None, patience: int = 0, desc: str = "train") -> dict:
    """Train `model` for `schedule.steps` steps; `loss_fn(step)` builds and scores the step's batch.

    `loss_fn` may return (loss, extras): the dict of floats `extras` joins that step's log record,
    with the step's wall seconds added to it as `step_s` (the caller, holding the dict, sees them too).

    `run.state_dir` holds checkpoint.pt; a checkpoint whose `identity` (the settings and digests of the data and start)
    has another fingerprint is ignored. The step log
    is kept there too (steps.jsonl) and copied to `run.log_path` when the run ends or stops: a restarted job's
    outputs are removed before it runs (LTRe's log is one), so only a log beside the checkpoint still holds
    the steps before a resume.
    `run.speed` (settings.Speed): fixed padded lengths, fused AdamW and CUDA graphs; off, the step is as it was.
    `run.stop_after_step` exits right after that step's checkpoint (used to test resuming).
    `patience` > 0 validates the start too (step 0), stops early once `valid_loss` (from on_checkpoint) has not
    improved for that many checkpoints, and returns the weights of the best one, the start's included (kept in
    memory, and in checkpoint.pt for a resume)."""
    run.speed.fit(positions(model))   # before the state folder is made: a bucket past them fails only mid-step
    steps, lr, warmup_ratio, checkpoint_every = schedule.steps, schedule.lr, schedule.warmup_ratio, schedule.checkpoint_every
    seed, log_path, stop_after_step = run.seed, run.log_path, run.stop_after_step
    state_dir = Path(run.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    checkpoint_path = state_dir / "checkpoint.pt"
    key = fingerprint(identity)
    params = [p for p in model.parameters() if p.requires_grad]
    cuda = device().type == "cuda"
    fused = {"fused": True} if run.speed.fused_adamw else {}   # one kernel for all tensors' updates (CUDA or CPU)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **fused)
    if run.speed.compile and cuda:
        compile_encoders(model)
    buckets = run.speed.buckets()
    scheduler = get_linear_schedule_with_warmup(optimizer, int(warmup_ratio * steps), steps)
    start, history, best_weights = 0, [], None   # best_weights: {"step", "model"} of the best validation so far
    if checkpoint_path.exists():
        saved = load_checkpoint(checkpoint_path)
        if saved.get("fingerprint") == key:
            model.load_state_dict(saved["model"])
            optimizer.load_state_dict(saved["optimizer"])
            scheduler.load_state_dict(saved["scheduler"])
            start, history, best_weights = saved["step"], saved["history"], saved.get("best")
            print(f"resumed from step {start} of {steps} ({checkpoint_path})", flush=True)
    distributed.broadcast_weights(model)
    leader = distributed.leader()
    if patience and on_checkpoint and not start and leader:
        # the start is a candidate too: a run whose every check is worse than its start keeps the start's weights
        model.eval()
        history.append({"step": 0, **on_checkpoint(0)})
        if "valid_loss" in history[0]:
            best_weights = weights_at(model, 0)
    model.train()
    use_amp = device().type == "cuda"
    seconds, last_written = 0.0, None
    # a resumed run keeps the steps up to its checkpoint (later ones, logged before a kill, are taken again),
    # a fresh one starts the log over
    state_log = state_dir / "steps.jsonl"
    log = None
    if log_path and leader:
        kept = [line for line in state_log.read_text(encoding="utf-8").splitlines()
                if json.loads(line)["step"] <= start] if start and state_log.exists() else []
        with atomic_path(state_log) as tmp:
            tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        log = open(state_log, "a", encoding="utf-8")
    # each text's token ids, tokenised at its first draw (tokens.token_memo): the same tensors, sooner.
    # TOWERS_TOKEN_MEMO=off tokenises every batch afresh (benchmarks/README.md compares the two)
    memo = None if os.environ.get("TOWERS_TOKEN_MEMO") == "off" else {}
    bar = tqdm(range(start, steps), desc=desc, initial=start, total=steps, mininterval=2, disable=not leader)
    for step in bar:
        began, stop = time.perf_counter(), False
        torch.manual_seed(step_seed(seed, step))
        if distributed.rank():   # every rank masks the same batch (CPU generator), GPUs differ in dropout
            torch.cuda.manual_seed(step_seed(seed, step) + distributed.rank())
        if run.speed.compile and cuda:   # a new step: the graphs may overwrite the last step's outputs
            torch.compiler.cudagraph_mark_step_begin()
        with distributed.stepping(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=use_amp), \
                length_buckets(buckets), token_memo(memo):
            loss = loss_fn(step)
        loss, extras = loss if isinstance(loss, tuple) else (loss, None)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()   # a gathered batch sends gradients to the other ranks' rows
        distributed.average_gradients(params)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        lr_used = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        value = round(distributed.mean_value(float(loss.detach())), 5)   # waits for the GPU: seconds cover the update
        if not math.isfinite(value):   # the float above is read every step anyway: the check costs no GPU sync
            if log:
                log.close()   # the steps before stay in the state folder's log; none is published
            raise StageError(state_dir, f"loss is {value} at step {step + 1} (lr {lr_used:.3g}, batch of "
                                        f"{schedule.batch_size} drawn from seed {seed}); nothing was saved for this step")
        elapsed = time.perf_counter() - began
        seconds += elapsed
        record = {"step": step + 1, "loss": value, "lr": scheduler.get_last_lr()[0]}
        if extras is not None:
            # a regime timing its own phases needs the whole step's seconds to tell the update apart
            extras["step_s"] = elapsed
            record.update(extras)
        bar.set_postfix(loss=f"{record['loss']:.3f}")
        done = step + 1
        if done % checkpoint_every == 0 or done == steps:
            if on_checkpoint and leader:   # the leader alone validates; it decides early stopping for all
                model.eval()
                with token_memo(memo):
                    record.update(on_checkpoint(done))
                model.train()
            history.append(record)
            if patience:
                scored = [h for h in history if "valid_loss" in h]
                best = min(scored, key=lambda h: h["valid_loss"]) if scored else None
                if best is record and leader:
                    best_weights = weights_at(model, done)
                stop = distributed.leader_decides(
                    best is not None and sum(h["step"] > best["step"] for h in scored) >= patience)
            if log:   # every step up to the checkpoint is on disk before the checkpoint a resume starts from
                log.write(json.dumps(record) + "\n")
                log.flush()
            asked_to_stop = stop_after_step is not None and done >= stop_after_step and done < steps
            if leader and not stop and (last_written is None or asked_to_stop
                                        or time.monotonic() - last_written >= run.resume_seconds):
                save_atomic({"fingerprint": key, "step": done, "model": model.state_dict(),
                             "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                             "history": history, "best": best_weights}, checkpoint_path)
                last_written = time.monotonic()
            if asked_to_stop:
                if log:
                    publish_log(log, state_log, log_path)
                distributed.finish()   # the others wait for the leader's checkpoint, then leave
                raise SystemExit(f"stopped after step {done} as asked (checkpoint kept)")
        elif log:
            log.write(json.dumps(record) + "\n")
        if stop:
            print(f"early stop at step {done}: valid_loss has not improved for {patience} checkpoints", flush=True)
            break
    if log:
        publish_log(log, state_log, log_path)
    distributed.finish()   # other ranks exit here: the leader writes the outputs
    report = {"steps": steps, "resumed_from": start, "train_seconds_this_run": round(seconds, 2), "history": history}
    if patience and best_weights is not None:
        model.load_state_dict(best_weights["model"])
        report.update(best_step=best_weights["step"], stopped_at_step=history[-1]["step"] if history else start)
    model.eval()
    return report


def weights_at(model: torch.nn.Module, step: int) -> dict:
    """A copy of the weights as they are at `step`: early stopping's best so far."""
    return {"step": step, "model": {k: v.detach().clone() for k, v in model.state_dict().items()}}


def compile_encoders(model: torch.nn.Module) -> None:
    """Each transformer in `model` compiled in place with CUDA graphs (its callers, the regimes' loss functions,
    call the submodules, not `model`): launches of a small batch's hundreds of kernels replayed as one graph."""
    from transformers import PreTrainedModel

    done: list[torch.nn.Module] = []
    for module in model.modules():
        if isinstance(module, PreTrainedModel) and not any(module in set(d.modules()) for d in done):
            module.compile(mode="reduce-overhead", dynamic=False)   # one graph a bucket's shape
            done.append(module)


def fixed_draw_valid_loss(batch_loss, rows: list, picks: list, size: int) -> dict:
    """The validation loss of `rows` with draws fixed once (`picks`), in batches, weighted by batch size."""
    if not rows:
        return {}
    with torch.no_grad():
        total = sum(float(batch_loss(rows[i:i + size], picks[i:i + size])) * len(rows[i:i + size])
                    for i in range(0, len(rows), size))
    return {"valid_loss": round(total / len(rows), 5)}


def load_checkpoint(path: Path) -> dict:
    """A checkpoint of tensors, numbers and strings only (weights_only): checkpoints travel through the DVC
    remote (make cache-push), and a full unpickler would run whatever code a tampered one holds."""
    import pickle

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise StageError(path, f"not a training checkpoint this loop wrote ({first}); delete it to start over") from None


def publish_log(log, state_log: Path, log_path) -> None:
    """Close the step log kept in the state folder and copy it, whole, to where the caller asked."""
    log.close()
    with atomic_path(log_path) as tmp:
        tmp.write_bytes(state_log.read_bytes())


def save_atomic(obj, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def finish(state_dir) -> None:
    """Drop the checkpoint once the final model is safely written."""
    for name in ("checkpoint.pt", "best.pt", "steps.jsonl"):
        path = Path(state_dir) / name
        if path.exists():
            path.unlink()
