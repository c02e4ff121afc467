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
    return Loop(model, schedule, run, identity, weight_decay, on_checkpoint, patience).train(loss_fn, desc)


class Loop:
    """One training run's state from step to step (run): the optimizer and schedule, the history of checkpoints,
    the best weights so far, the step log, and the seconds spent."""

    def __init__(self, model, schedule: Schedule, run: Run, identity: dict, weight_decay: float, on_checkpoint,
                 patience: int):
        run.speed.fit(positions(model))   # before the state folder is made: a bucket past them fails only mid-step
        self.model, self.schedule, self.run, self.on_checkpoint, self.patience = model, schedule, run, on_checkpoint, patience
        self.state_dir = Path(run.state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_path = self.state_dir / "checkpoint.pt"
        self.key = fingerprint(identity)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.cuda = device().type == "cuda"
        fused = {"fused": True} if run.speed.fused_adamw else {}   # one kernel for all tensors' updates (CUDA or CPU)
        self.optimizer = torch.optim.AdamW(self.params, lr=schedule.lr, weight_decay=weight_decay, **fused)
        if run.speed.compile and self.cuda:
            compile_encoders(model)
        self.buckets = run.speed.buckets()
        self.scheduler = get_linear_schedule_with_warmup(self.optimizer, int(schedule.warmup_ratio * schedule.steps),
                                                         schedule.steps)
        self.start, self.history, self.best_weights = 0, [], None   # best_weights: {"step", "model"} of the best
        self.resume()
        distributed.broadcast_weights(model)
        self.leader = distributed.leader()
        if patience and on_checkpoint and not self.start and self.leader:
            # the start is a candidate too: a run whose every check is worse than its start keeps the start's weights
            model.eval()
            self.history.append({"step": 0, **on_checkpoint(0)})
            if "valid_loss" in self.history[0]:
                self.best_weights = weights_at(model, 0)
        model.train()
        self.seconds, self.last_written = 0.0, None
        self.state_log, self.log = self.state_dir / "steps.jsonl", None
        # each text's token ids, tokenised at its first draw (tokens.token_memo): the same tensors, sooner.
        # TOWERS_TOKEN_MEMO=off tokenises every batch afresh (benchmarks/README.md compares the two)
        self.memo = None if os.environ.get("TOWERS_TOKEN_MEMO") == "off" else {}

    def resume(self) -> None:
        """The checkpoint's weights, optimizer, schedule and history, when it is this run's (its fingerprint)."""
        if not self.checkpoint_path.exists():
            return
        saved = load_checkpoint(self.checkpoint_path)
        if saved.get("fingerprint") == self.key:
            self.model.load_state_dict(saved["model"])
            self.optimizer.load_state_dict(saved["optimizer"])
            self.scheduler.load_state_dict(saved["scheduler"])
            self.start, self.history, self.best_weights = saved["step"], saved["history"], saved.get("best")
            print(f"resumed from step {self.start} of {self.schedule.steps} ({self.checkpoint_path})", flush=True)

    def open_log(self) -> None:
        """A resumed run keeps the steps up to its checkpoint (later ones, logged before a kill, are taken again),
        a fresh one starts the log over."""
        if not (self.run.log_path and self.leader):
            return
        kept = [line for line in self.state_log.read_text(encoding="utf-8").splitlines()
                if json.loads(line)["step"] <= self.start] if self.start and self.state_log.exists() else []
        with atomic_path(self.state_log) as tmp:
            tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        self.log = open(self.state_log, "a", encoding="utf-8")

    def train(self, loss_fn, desc: str) -> dict:
        steps = self.schedule.steps
        self.open_log()
        bar = tqdm(range(self.start, steps), desc=desc, initial=self.start, total=steps, mininterval=2,
                   disable=not self.leader)
        for step in bar:
            record = self.step(step, loss_fn)
            bar.set_postfix(loss=f"{record['loss']:.3f}")
            done = step + 1
            stop = False
            if done % self.schedule.checkpoint_every == 0 or done == steps:
                stop = self.checkpoint(done, record)
            elif self.log:
                self.log.write(json.dumps(record) + "\n")
            if stop:
                print(f"early stop at step {done}: valid_loss has not improved for {self.patience} checkpoints",
                      flush=True)
                break
        if self.log:
            publish_log(self.log, self.state_log, self.run.log_path)
        distributed.finish()   # other ranks exit here: the leader writes the outputs
        return self.report()

    def step(self, step: int, loss_fn) -> dict:
        """One update from `loss_fn(step)`'s batch, seeded by (seed, step); its log record."""
        seed = self.run.seed
        began = time.perf_counter()
        torch.manual_seed(step_seed(seed, step))
        if distributed.rank():   # every rank masks the same batch (CPU generator), GPUs differ in dropout
            torch.cuda.manual_seed(step_seed(seed, step) + distributed.rank())
        if self.run.speed.compile and self.cuda:   # a new step: the graphs may overwrite the last step's outputs
            torch.compiler.cudagraph_mark_step_begin()
        with distributed.stepping(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=self.cuda), \
                length_buckets(self.buckets), token_memo(self.memo):
            loss = loss_fn(step)
        loss, extras = loss if isinstance(loss, tuple) else (loss, None)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()   # a gathered batch sends gradients to the other ranks' rows
        distributed.average_gradients(self.params)
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        lr_used = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        value = round(distributed.mean_value(float(loss.detach())), 5)   # waits for the GPU: seconds cover the update
        if not math.isfinite(value):   # the float above is read every step anyway: the check costs no GPU sync
            if self.log:
                self.log.close()   # the steps before stay in the state folder's log; none is published
            raise StageError(self.state_dir, f"loss is {value} at step {step + 1} (lr {lr_used:.3g}, batch of "
                                             f"{self.schedule.batch_size} drawn from seed {seed}); nothing was saved "
                                             "for this step")
        elapsed = time.perf_counter() - began
        self.seconds += elapsed
        record = {"step": step + 1, "loss": value, "lr": self.scheduler.get_last_lr()[0]}
        if extras is not None:
            # a regime timing its own phases needs the whole step's seconds to tell the update apart
            extras["step_s"] = elapsed
            record.update(extras)
        return record

    def checkpoint(self, done: int, record: dict) -> bool:
        """At a checkpoint step: validate, keep the best weights, log, save the state; whether to stop early."""
        model, stop = self.model, False
        if self.on_checkpoint and self.leader:   # the leader alone validates; it decides early stopping for all
            model.eval()
            with token_memo(self.memo):
                record.update(self.on_checkpoint(done))
            model.train()
        self.history.append(record)
        if self.patience:
            scored = [h for h in self.history if "valid_loss" in h]
            best = min(scored, key=lambda h: h["valid_loss"]) if scored else None
            if best is record and self.leader:
                self.best_weights = weights_at(model, done)
            stop = distributed.leader_decides(
                best is not None and sum(h["step"] > best["step"] for h in scored) >= self.patience)
        if self.log:   # every step up to the checkpoint is on disk before the checkpoint a resume starts from
            self.log.write(json.dumps(record) + "\n")
            self.log.flush()
        stop_after = self.run.stop_after_step
        asked_to_stop = stop_after is not None and done >= stop_after and done < self.schedule.steps
        if self.leader and not stop and (self.last_written is None or asked_to_stop
                                         or time.monotonic() - self.last_written >= self.run.resume_seconds):
            save_atomic({"fingerprint": self.key, "step": done, "model": model.state_dict(),
                         "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                         "history": self.history, "best": self.best_weights}, self.checkpoint_path)
            self.last_written = time.monotonic()
        if asked_to_stop:
            if self.log:
                publish_log(self.log, self.state_log, self.run.log_path)
            distributed.finish()   # the others wait for the leader's checkpoint, then leave
            raise SystemExit(f"stopped after step {done} as asked (checkpoint kept)")
        return stop

    def report(self) -> dict:
        """What the run did; with early stopping, the best checkpoint's weights are put back first."""
        report = {"steps": self.schedule.steps, "resumed_from": self.start,
                  "train_seconds_this_run": round(self.seconds, 2), "history": self.history}
        if self.patience and self.best_weights is not None:
            self.model.load_state_dict(self.best_weights["model"])
            report.update(best_step=self.best_weights["step"],
                          stopped_at_step=self.history[-1]["step"] if self.history else self.start)
        self.model.eval()
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
