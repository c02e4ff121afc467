"""Each training regime's settings as one frozen dataclass: the single place its knobs and their defaults live.

A class gives its stage the command-line flags (`flags()`), is built from the parsed flags (`of(args)`), checks
its choices when made, and is what the checkpoint fingerprint digests (`as_dict()`, the same keys the stages have
always fingerprinted, so a checkpoint written before still resumes). Light on purpose: stages import it to parse
their flags before torch is loaded."""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

from ..io import StageError

# pairwise losses over ranked lists (LTRe sec. 4.3); towers.training.losses checks against these too
LOSSES = ("ranknet", "lambdarank")
METRICS = ("mrr@10", "ndcg@10")
REDUCTIONS = ("query-sum", "pair-mean")


def knob(default=dataclasses.MISSING, *, choices: tuple = (), help: str = "", flag: str | None = "",
         **kw):
    """A field with what its flag needs: `choices` (checked when the settings are made), `help`, and `flag`
    (default --<name with dashes>; None: no flag, the stage supplies the value)."""
    return field(default=default, metadata={"choices": choices, "help": help, "flag": flag}, **kw)


class SettingError(StageError, ValueError):
    """A bad setting, named by its flag: one line from a stage, a ValueError to a caller in Python."""


def check_choice(kind: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"unknown {kind} {value!r}; expected one of {', '.join(map(str, allowed))}")


def flag_of(f: dataclasses.Field) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Base: flags from the fields, choices checked on construction."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if f.metadata.get("choices"):
                try:
                    check_choice(f.name, getattr(self, f.name), f.metadata["choices"])
                except ValueError as error:
                    raise SettingError(flag_of(f), str(error)) from None

    def refuse(self, name: str, problem: str):
        raise SettingError(self.given_by(name), problem)

    def given_by(self, name: str) -> str:
        """What a refusal of setting `name` names: its flag."""
        return flag_of(next(f for f in dataclasses.fields(self) if f.name == name))

    @classmethod
    def flags(cls) -> tuple:
        """(flag, argparse keywords) pairs, as towers.stages.arg makes them."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            flag = f.metadata.get("flag", "")
            if flag is None:
                continue
            kw = {"type": hints[f.name]}
            if f.default is dataclasses.MISSING:
                kw["required"] = True
            else:
                kw["default"] = f.default
            if f.metadata.get("choices"):
                kw["choices"] = list(f.metadata["choices"])
            if f.metadata.get("help"):
                kw["help"] = f.metadata["help"]
            out.append((flag_of(f), {**kw, "dest": f.name}))
        return tuple(out)

    @classmethod
    def of(cls, args, **given):
        """From parsed flags (an argparse namespace); `given` supplies the fields that have no flag."""
        values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if f.metadata.get("flag", "") is not None}
        return cls(**values, **given)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True)
class Schedule(Settings):
    """What every regime has: AdamW, linear warm-up then decay, a checkpoint every so many steps."""
    steps: int = knob()
    batch_size: int = knob()
    lr: float = knob()
    warmup_ratio: float = knob()
    checkpoint_every: int = knob(50)


@dataclass(frozen=True, kw_only=True)
class MaskedLM(Schedule):
    """BERT's masked language model (and NSP) pre-training of the shared encoder."""
    max_length: int = knob()
    mask_probability: float = knob(0.15)
    checkpoint_every: int = knob(100)


@dataclass(frozen=True, kw_only=True)
class InBatch(Schedule):
    """Chang et al.: sampled softmax over the batch's documents."""
    temperature: float = knob(1.0)


@dataclass(frozen=True, kw_only=True)
class Margin(Schedule):
    """QuadrupletBERT: the triplet (three towers) or quadruplet (four towers) margin loss."""
    margin: float = knob()
    reduction: str = knob("mean", choices=("mean", "sum"))
    patience: int = knob(0, help="stop when the validation loss has not improved for this many checks")
    valid_negatives: int = knob(0, help="validation: each question's loss over all of its positives times this many "
                                        "random (and as many mined) negatives, drawn once; 0 = one draw a question")


@dataclass(frozen=True, kw_only=True)
class Pairwise(Schedule):
    """LTRe's pairwise losses over a query's (relevant, negative) documents; the negatives' source by subclass."""
    loss: str = knob("ranknet", choices=LOSSES)
    metric: str = knob("mrr@10", choices=METRICS, help="LambdaRank's |delta metric|")
    reduction: str = knob("query-sum", choices=REDUCTIONS)
    negatives_per_query: int = knob(1)
    negative_depth: int = knob(200)
    refresh_every: int = knob(0)
    nprobe: int = knob(0)


@dataclass(frozen=True, kw_only=True)
class NegativeSampling(Pairwise):
    """LTRe Table 1's baselines: one shared encoder; negatives from a sampler, BM25, the batch or ANCE's refresh."""
    negatives: str = knob(choices=("rand", "bm25", "nce", "bm25+rand", "async"))
    index: str = knob("Flat", flag="--index-factory", help="async: the index each refresh builds")


@dataclass(frozen=True, kw_only=True)
class LearningToRetrieve(Pairwise):
    """LTRe: the query tower trained by full retrieval over a fixed index (Algorithm 1)."""
    negatives: str = knob("ltre", choices=("ltre", "rand", "bm25", "async"),
                          help="ltre: Algorithm 1; the others sample negatives against the same fixed index (Figure 3)")
    top_n: int = knob(200)
    probe_depth: int = knob(200, help="depth of the step log's recall and overlaps (Figure 3)")
    query_length: int = knob(flag=None)   # the start model's


@dataclass(frozen=True, kw_only=True)
class CrossEncoder(Schedule):
    """A BERT sequence-pair classifier reranking a first-stage run (RepBERT sec. 4.4)."""
    negatives_depth: int = knob(1000, help="negatives come from each query's top-k of --run")
    max_length: int = knob(512)
    num_labels: int = knob(1, choices=(1, 2))
    loss: str = knob("pointwise", choices=("pointwise", "listwise"),
                     help="pointwise: BCE on one relevant and one negative (monoBERT); listwise: softmax over a group")
    group_size: int = knob(8, help="listwise: the relevant passage and group-size - 1 negatives")

    def __post_init__(self):
        super().__post_init__()
        if self.negatives_depth < 1:
            self.refuse("negatives_depth", f"must be at least 1, not {self.negatives_depth}")
        if self.loss == "listwise" and self.group_size < 2:
            self.refuse("group_size", f"a listwise group needs the relevant passage and a negative, not {self.group_size}")
        if self.loss == "pointwise":   # a (relevant, negative) pair, whatever the flag said
            object.__setattr__(self, "group_size", 2)


@dataclass(frozen=True, kw_only=True)
class Speed(Settings):
    """How a training step runs, not what it learns (issue 42: small batches on a GPU are bound by kernel launches).
    Not in a checkpoint's fingerprint: a run resumed with other switches takes the same steps. Off by default;
    the paper profile sets them (params `gpu`)."""
    length_buckets: str = knob("", help="comma-separated lengths: a training batch is padded to the smallest that "
                                        "holds it (shapes a GPU can reuse); '': to its longest text")
    fused_adamw: int = knob(0, choices=(0, 1), help="1: AdamW's fused kernel (on a GPU, and on a CPU)")
    compile: int = knob(0, choices=(0, 1), help="1: torch.compile(mode='reduce-overhead'), CUDA graphs (CUDA only)")
    # the fields TOWERS_SPEED set: their refusals name it, not a flag nobody gave (no switch: not in as_dict)
    from_env: tuple = knob((), flag=None, compare=False, repr=False)

    def __post_init__(self):
        super().__post_init__()
        try:
            buckets = self.buckets()
        except ValueError:
            buckets = ()
        if self.length_buckets and (not buckets or min(buckets) < 1):
            self.refuse("length_buckets", f"must be positive whole numbers separated by commas, not {self.length_buckets!r}")

    def buckets(self) -> tuple[int, ...]:
        return tuple(sorted(int(n) for n in self.length_buckets.split(","))) if self.length_buckets else ()

    def fit(self, positions: int | None) -> None:
        """Refuse a bucket past the model's `positions` (None: it has none): a batch padded to it would end
        in the embedding lookup's error, mid-run."""
        if positions and self.buckets() and self.buckets()[-1] > positions:
            self.refuse("length_buckets", f"{self.buckets()[-1]} is longer than the {positions} positions of the "
                                          "model being trained")

    def given_by(self, name: str) -> str:
        flag = super().given_by(name)
        return f"{self.ENV} {flag}" if name in self.from_env else flag

    def as_dict(self) -> dict:
        return {k: v for k, v in super().as_dict().items() if k != "from_env"}

    ENV = "TOWERS_SPEED"   # the workflow's switches, as these flags' words (towers.plan.software)

    @classmethod
    def flags(cls) -> tuple:
        """As Settings.flags, each defaulting to None: a flag given wins over TOWERS_SPEED, which wins over the
        default (read when a stage runs, not when it is imported: the warm-start server imports them once)."""
        return tuple((flag, {**kw, "default": None}) for flag, kw in super().flags())

    @classmethod
    def of(cls, args, environ=None):
        import argparse
        import os
        import shlex

        parser = argparse.ArgumentParser(prog=cls.ENV, add_help=False, exit_on_error=False, allow_abbrev=False)
        for flag, kw in cls.flags():
            parser.add_argument(flag, **kw)
        try:
            env, rest = parser.parse_known_args(shlex.split((os.environ if environ is None else environ).get(cls.ENV, "")))
        except (argparse.ArgumentError, ValueError) as error:
            raise SettingError(cls.ENV, f"not the training stages' speed flags: {error}") from None
        if rest:
            raise SettingError(cls.ENV, f"not the training stages' speed flags: {' '.join(rest)}")
        values, from_env = {}, []
        for f in dataclasses.fields(cls):
            if f.name == "from_env":
                continue
            given, env_value = getattr(args, f.name, None), getattr(env, f.name)
            if given is None and env_value is not None:
                from_env.append(f.name)
            values[f.name] = given if given is not None else env_value if env_value is not None else f.default
        return cls(**values, from_env=tuple(from_env))
