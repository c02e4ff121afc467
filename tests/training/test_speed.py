"""The GPU speed switches of the training loop (settings.Speed, issue 42): off, a step is what it always was; fixed
length buckets and fused AdamW (on a CPU too) move the losses by rounding only; CUDA graphs are left out on the CPU."""
import json

import pytest
import torch
from transformers import AutoTokenizer, BertConfig

from towers.modeling import tokens
from towers.modeling.models import random_encoder
from towers.training.settings import SettingError, Speed

from conftest import lighthouse_world, run_stage

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(40)]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}
# train-repbert's step losses below, as the loop gave them before the switches existed (dropout on)
BEFORE = [0.82376, 0.78661, 0.82381, 0.82802, 0.80964, 0.82614]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = lighthouse_world(tmp_path_factory.mktemp("speed"), TEXTS, ARCH, train=30)
    config = BertConfig.from_pretrained(root / "enc")   # without dropout: its masks follow the padded shape
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    random_encoder(root / "tok", root / "enc-nodrop", ARCH, seed=1)
    config.save_pretrained(root / "enc-nodrop")
    return root


def repbert_losses(root, name: str, *extra, start: str = "enc") -> list[float]:
    out = root / name
    done = run_stage("train-repbert", "--start", root / start, "--candidates", root / "candidates.jsonl",
                     "--qrels", root / "qrels.txt", "--train", root / "train.tsv", "--valid", root / "valid.tsv",
                     "--out", out, "--state-dir", f"{out}.state", "--seed", 4, "--steps", 6, "--batch-size", 8,
                     "--lr", 1e-3, "--warmup-ratio", 0.25, "--checkpoint-every", 3, "--query-length", 16,
                     "--doc-length", 32, "--log", f"{out}.jsonl", *extra)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line)["loss"] for line in (root / f"{name}.jsonl").read_text().splitlines()]


def test_with_the_switches_off_the_losses_are_todays(world):
    assert repbert_losses(world, "off") == BEFORE


def test_fused_adamw_runs_on_the_cpu_too_and_cuda_graphs_are_left_out(world, monkeypatch):
    made, adamw = [], torch.optim.AdamW
    monkeypatch.setattr(torch.optim, "AdamW", lambda *a, **kw: made.append(kw) or adamw(*a, **kw))
    monkeypatch.setattr(torch.nn.Module, "compile", lambda *a, **kw: pytest.fail("compiled on the CPU"))
    losses = repbert_losses(world, "cpu-switches", "--fused-adamw", 1, "--compile", 1)
    assert made and made[0].get("fused") is True
    assert losses[0] == BEFORE[0] and losses == pytest.approx(BEFORE, abs=1e-4)   # the updates move by rounding


def test_cuda_graphs_alone_leave_a_cpu_run_as_it_was(world, monkeypatch):
    """Issue 54: --compile 1 (the paper profile's gpu.compile) is a GPU switch only: on the CPU nothing is compiled
    and the steps are today's, to the bit (fused AdamW, the switch beside it, moves them by rounding)."""
    monkeypatch.setattr(torch.nn.Module, "compile", lambda *a, **kw: pytest.fail("compiled on the CPU"))
    assert repbert_losses(world, "cpu-compile", "--compile", 1) == BEFORE


def test_length_buckets_pad_every_batch_to_a_bucket_and_move_losses_by_rounding_only(world, monkeypatch):
    widths = []
    padded = tokens.to_bucket

    def seen(batch, tokenizer):
        batch = padded(batch, tokenizer)
        if tokens._BUCKETS:   # a training step's batch (validation pads as it always did)
            widths.append(batch["input_ids"].shape[1])
        return batch

    monkeypatch.setattr(tokens, "to_bucket", seen)
    off = repbert_losses(world, "nodrop-off", start="enc-nodrop")
    assert not widths
    on = repbert_losses(world, "nodrop-on", "--length-buckets", "12,24,40", start="enc-nodrop")
    assert len(widths) == 12 and set(widths) <= {12, 24, 40}   # 6 steps of a query and a doc batch
    assert on == pytest.approx(off, rel=1e-4, abs=2e-5)


def test_to_bucket_pads_on_the_right_with_the_pad_ids_and_leaves_longer_batches(world):
    tok = AutoTokenizer.from_pretrained(world / "tok")
    plain = tok(["a lighthouse", "pier"], ["it was lit", "x"], padding=True, return_tensors="pt")
    width = plain["input_ids"].shape[1]
    assert tokens.to_bucket(plain, tok) is plain   # outside length_buckets
    with tokens.length_buckets((4, width + 3, width + 10)):
        got = tokens.to_bucket(plain, tok)
        longer = dict(plain, input_ids=torch.zeros(2, width + 11, dtype=torch.long))
        assert tokens.to_bucket(longer, tok)["input_ids"].shape[1] == width + 11
    assert got["input_ids"].shape[1] == width + 3
    for key, pad in (("input_ids", tok.pad_token_id), ("attention_mask", 0), ("token_type_ids", 0)):
        assert torch.equal(got[key][:, :width], plain[key]) and (got[key][:, width:] == pad).all()
    tok.padding_side = "left"
    with tokens.length_buckets((width + 3,)):
        assert tokens.to_bucket(plain, tok) is plain


@pytest.mark.parametrize("value", ["0,16", "a,b", "16,,32"])
def test_bad_length_buckets_are_refused_naming_the_flag(value):
    with pytest.raises(SettingError, match="--length-buckets"):
        Speed(length_buckets=value)
    assert Speed(length_buckets="32,16").buckets() == (16, 32)


def test_the_workflows_switches_come_in_the_environment_and_a_flag_wins():
    """The paper profile passes its switches in TOWERS_SPEED (towers.plan.software), keeping the rules'
    commands as they were; a stage's own flag still wins."""
    from argparse import Namespace

    none = Namespace(length_buckets=None, fused_adamw=None, compile=None)
    env = {"TOWERS_SPEED": "--length-buckets 32,16 --fused-adamw 1"}
    assert Speed.of(none, {}) == Speed()
    assert Speed.of(none, env) == Speed(length_buckets="32,16", fused_adamw=1)
    assert Speed.of(Namespace(length_buckets="", fused_adamw=None, compile=1), env) == Speed(fused_adamw=1, compile=1)
    with pytest.raises(SettingError, match="TOWERS_SPEED"):
        Speed.of(none, {"TOWERS_SPEED": "--fused-adam 1"})


def test_a_models_record_says_the_switches_that_trained_it(world, monkeypatch):
    """Issue 56: records held fused_adamw and length_buckets None (the flags' defaults) whatever the workflow's
    TOWERS_SPEED had switched on; the record's `speed` says what trained the model (CUDA graphs: CUDA only)."""
    monkeypatch.setenv(Speed.ENV, "--length-buckets 40,24 --fused-adamw 1 --compile 1")
    repbert_losses(world, "env-switches")
    record = json.loads((world / "env-switches.meta.json").read_text())
    assert record["counts"]["speed"] == {"length_buckets": "40,24", "fused_adamw": 1, "compile": 0}
    assert record["arguments"]["fused_adamw"] is None   # the command's own flags, as it was given them
    monkeypatch.delenv(Speed.ENV)
    repbert_losses(world, "own-switches", "--length-buckets", "24")
    speed = json.loads((world / "own-switches.meta.json").read_text())["counts"]["speed"]
    assert speed == {"length_buckets": "24", "fused_adamw": 0, "compile": 0}


@pytest.mark.parametrize("route", ["flag", "env"])
def test_a_bucket_past_the_encoders_positions_is_one_line_naming_its_route(world, monkeypatch, route):
    """Issue 68: a bucket longer than the encoder's 64 positions, on the command line or in TOWERS_SPEED, ended in
    the embedding lookup's 70-line RuntimeError; it is refused before the run's state folder is made."""
    out = world / f"too-long-{route}"
    flags = ["--length-buckets", "24,128"] if route == "flag" else []
    if route == "env":
        monkeypatch.setenv(Speed.ENV, "--fused-adamw 1 --length-buckets 24,128")
    done = run_stage("train-repbert", "--start", world / "enc", "--candidates", world / "candidates.jsonl",
                     "--qrels", world / "qrels.txt", "--train", world / "train.tsv", "--valid", world / "valid.tsv",
                     "--out", out, "--state-dir", f"{out}.state", "--seed", 4, "--steps", 2, "--batch-size", 8,
                     "--lr", 1e-3, "--warmup-ratio", 0.25, "--query-length", 16, "--doc-length", 32, *flags)
    where = "--length-buckets" if route == "flag" else "TOWERS_SPEED --length-buckets"
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: {where}: 128 is longer than the 64 positions of the model being trained")
    assert not out.exists() and not (world / f"too-long-{route}.state").exists()
