"""The regimes' settings: flags made from the fields, choices refused by flag, fingerprints as before."""
import argparse

import pytest

from towers.training.settings import CrossEncoder, InBatch, LearningToRetrieve, Margin, NegativeSampling, SettingError
from towers.training import loop


def parse(settings, argv: list[str], **given):
    parser = argparse.ArgumentParser()
    for flag, kw in settings.flags():
        parser.add_argument(flag, **kw)
    return settings.of(parser.parse_args(argv), **given)


SCHEDULE = ["--steps", "10", "--batch-size", "4", "--lr", "1e-4", "--warmup-ratio", "0.1"]


def test_flags_carry_types_defaults_and_requirements():
    margin = parse(Margin, [*SCHEDULE, "--margin", "0.5"])
    assert margin == Margin(steps=10, batch_size=4, lr=1e-4, warmup_ratio=0.1, margin=0.5)
    assert (margin.reduction, margin.patience, margin.checkpoint_every) == ("mean", 0, 50)
    with pytest.raises(SystemExit):   # --margin has no default
        parse(Margin, SCHEDULE)


def test_the_fingerprinted_keys_are_those_the_stages_always_wrote():
    # a checkpoint saved before the settings became classes must still resume: same keys, same digest
    # (margin runs since valid_negatives: a checkpoint validated another way must not resume, its history differs)
    before = {"steps": 10, "batch_size": 4, "lr": 1e-4, "warmup_ratio": 0.1, "checkpoint_every": 50,
              "margin": 0.5, "reduction": "mean", "patience": 0, "valid_negatives": 0}
    assert loop.fingerprint(parse(Margin, [*SCHEDULE, "--margin", "0.5"]).as_dict()) == loop.fingerprint(before)
    ltre = parse(LearningToRetrieve, SCHEDULE, query_length=32).as_dict()
    assert set(ltre) == {"steps", "batch_size", "lr", "warmup_ratio", "checkpoint_every", "loss", "metric",
                         "reduction", "negatives", "negatives_per_query", "negative_depth", "refresh_every", "nprobe",
                         "top_n", "probe_depth", "query_length"}
    assert parse(NegativeSampling, [*SCHEDULE, "--negatives", "bm25", "--index-factory", "HNSW32"]).index == "HNSW32"
    assert set(parse(InBatch, SCHEDULE).as_dict()) == {"steps", "batch_size", "lr", "warmup_ratio",
                                                       "checkpoint_every", "temperature"}


def test_a_bad_choice_is_refused_by_its_flag_in_one_line():
    with pytest.raises(SettingError, match=r"^--negatives: unknown negatives 'bm26'"):
        LearningToRetrieve(steps=1, batch_size=1, lr=0.1, warmup_ratio=0.0, query_length=8, negatives="bm26")
    with pytest.raises(ValueError, match="--group-size"):   # a ValueError to Python callers as well
        CrossEncoder(steps=1, batch_size=1, lr=0.1, warmup_ratio=0.0, loss="listwise", group_size=1)
    # pointwise training scores a (relevant, negative) pair whatever the group size says
    assert CrossEncoder(steps=1, batch_size=1, lr=0.1, warmup_ratio=0.0, group_size=8).group_size == 2


def test_settings_are_frozen():
    settings = InBatch(steps=1, batch_size=1, lr=0.1, warmup_ratio=0.0)
    with pytest.raises(AttributeError):
        settings.lr = 1.0
