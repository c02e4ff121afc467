"""Every training regime on the GPU against the CPU (make test-gpu).

On CUDA the shared loop (training/loop.py) runs each step under bf16 autocast; on the CPU it runs fp32. Each
regime here takes STEPS steps twice from the same starting weights on the same batches (the loop and the
regimes draw them from (seed, step)): once with TOWERS_DEVICE=cpu, once on the device. The two loss curves
(the loop's step log) must agree within the tolerances below. Models are tiny BERTs without dropout (CUDA's
dropout masks are not the CPU's), data are synthetic; this checks bf16 and device placement, not speed.

Skips without CUDA. TOWERS_GPU_DRY_RUN=1 runs the device side on the CPU too (the harness; curves must agree
to the log's 5 decimals); TOWERS_GPU_DRY_RUN=bf16 runs it on the CPU under CPU bf16 autocast (how far bf16
moves the curves, without a GPU). TOWERS_GPU_RECORD=<file> appends one JSON line per regime."""
from __future__ import annotations

import copy
import json
import time

import numpy as np
import pytest
import torch

from gpu_side import DRY_RUN, SPEED, marks, record as keep, run_on
from towers.training.settings import Speed

pytestmark = marks

STEPS = 20
SEED = 5
LR = 1e-3   # 20 steps move every curve (from a start of wide random weights, INIT_RANGE)
# BERT's usual 0.02 gives every text nearly the same vector: the losses sit at ln(batch) and barely move in 20 steps,
# which would compare nothing; wider weights set the texts apart, as a trained encoder does
INIT_RANGE = 0.2
# Tolerances, measured against bf16 autocast on the CPU (TOWERS_GPU_DRY_RUN=bf16, seeds 5-8): a step passes when
# |device - cpu| <= max(absolute, relative * |cpu|).
# Step 1: the same weights and batch, only the forward pass's rounding differs (bf16 keeps 8 bits of mantissa,
# ~0.4% a value). Seen: up to 2.2% (RankNet over the inner products of LayerNormed vectors, which reach +-30 and
# move by ~0.05); 4% leaves twice that, and a loss computed in bf16 or on other inputs is off by more.
FIRST = (0.02, 0.04)
# Every step: the weights drift apart (AdamW's g / sqrt(v) makes a tiny gradient's rounding a whole lr-sized step)
# and each step scores a new batch, so single steps swing both ways: seen up to 7% (the listwise cross-encoder,
# NCE's hardest in-batch negative), typically 1-4%. 20% catches a run that diverges or stalls; a steady difference
# is MEAN's to catch.
EVERY = (0.05, 0.20)
# The mean loss over the steps: drift swings cancel, a bias does not (a side learning slower, a loss term rounded
# one way). Seen: at most 0.8% of the mean; 3%.
MEAN = 0.03
# dry run: the same fp32 computation twice on the CPU, equal up to the log's rounding (5 decimals)
EXACT = (1e-5, 0.0)

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(60)]
PARAGRAPHS = [f"{t} Its keeper rowed out each {('morning', 'evening', 'night')[i % 3]} to trim lamp {i % 11}."
              for i, t in enumerate(TEXTS)]
QUERIES = [f"when was lighthouse {i} lit?" for i in range(60)]
TRAIN, VALID = range(48), range(48, 60)


# --- the harness ------------------------------------------------------------------------------------------

def cpu_bf16(run):
    """loop.run with each step's loss under CPU bf16 autocast: what the loop does on CUDA, on the CPU."""
    def wrapped(model, loss_fn, *args, **kwargs):
        def in_bf16(step):
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                return loss_fn(step)
        return run(model, in_bf16, *args, **kwargs)
    return wrapped


def side(name: str, train, tmp_path) -> tuple[list[float], float]:
    """One side's loss at every step, and its seconds: train(run) trains a fresh copy of the start and returns it."""
    from towers.training import loop

    on_cpu = name == "cpu" or bool(DRY_RUN)
    with pytest.MonkeyPatch.context() as patch:
        run_on(patch, on_cpu)
        if name == "device" and DRY_RUN == "bf16":
            patch.setattr(loop, "run", cpu_bf16(loop.run))
        log = tmp_path / f"{name}.jsonl"
        began = time.perf_counter()
        # a state folder per side: both have one fingerprint, so a shared one would resume the other's checkpoint
        model = train(loop.Run(SEED, tmp_path / f"{name}.state", log, speed=SPEED if name == "device" else Speed()))
        if not on_cpu:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - began
    places = {p.device.type for p in model.parameters()}
    assert places == {"cpu" if on_cpu else "cuda"}, f"{name} side trained on {places}"
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1)), f"{name} side's step log: {records}"
    return [float(r["loss"]) for r in records], seconds


def allowed(reference: float, tolerance: tuple[float, float]) -> float:
    return max(tolerance[0], tolerance[1] * abs(reference))


def record(regime: str, **values) -> None:
    keep("regime", regime, **values)


def compare(regime: str, train, tmp_path) -> None:
    """The regime's STEPS losses on the CPU and on the device agree: step 1 within FIRST, every step within EVERY,
    the mean over the steps within MEAN."""
    cpu, cpu_s = side("cpu", train, tmp_path)
    try:
        dev, dev_s = side("device", train, tmp_path)
    except Exception as error:   # the record names a device side that failed to run, not only the ones that ran
        record(regime, steps=STEPS, cpu_losses=cpu, error=f"{type(error).__name__}: {error}"[:2000], passed=False)
        raise
    first, every, mean = (EXACT, EXACT, EXACT[0]) if DRY_RUN == "1" else (FIRST, EVERY, MEAN)
    limits = [allowed(c, first if i == 0 else every) for i, c in enumerate(cpu)]
    diffs = [abs(d - c) for c, d in zip(cpu, dev)]
    failed = [i + 1 for i, (diff, limit) in enumerate(zip(diffs, limits)) if not diff <= limit]   # NaN fails too
    scale = sum(map(abs, cpu)) / len(cpu)
    mean_rel = abs(sum(dev) - sum(cpu)) / len(cpu) / scale
    record(regime, steps=STEPS, cpu_losses=cpu, device_losses=dev, max_abs_diff=max(diffs),
           max_rel_diff=max(diff / max(abs(c), 1e-8) for c, diff in zip(cpu, diffs)), mean_rel_diff=mean_rel,
           tolerance={"first_step": dict(zip(("abs", "rel"), first)), "every_step": dict(zip(("abs", "rel"), every)),
                      "mean_rel": mean},
           device_seconds=round(dev_s, 3), cpu_seconds=round(cpu_s, 3),
           passed=not failed and mean_rel <= mean)
    table = "\n".join(f"  step {i + 1:2d}  cpu {c:9.5f}  device {d:9.5f}  diff {diff:8.5f}  allowed {limit:8.5f}"
                      f"{'  <--' if i + 1 in failed else ''}"
                      for i, (c, d, diff, limit) in enumerate(zip(cpu, dev, diffs, limits)))
    assert not failed, f"{regime}: the device's losses leave the CPU's at steps {failed}\n{table}"
    assert mean_rel <= mean, (f"{regime}: the device's mean loss is {mean_rel:.2%} off the CPU's (allowed {mean:.0%})"
                              f"\n{table}")
    # a curve that hardly moves would compare nothing
    assert max(cpu) - min(cpu) > EVERY[0], f"{regime}: the CPU's loss hardly moved\n{table}"


# --- tiny models and data -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from towers.modeling.models import load_tokenizer
    from towers.modeling.tokenizer import train_wordpiece

    folder = tmp_path_factory.mktemp("gpu-tokenizer")
    train_wordpiece(PARAGRAPHS + QUERIES, folder, vocab_size=300, min_frequency=1, lowercase=True)
    return load_tokenizer(folder)


def bert_config(tokenizer, **extra):
    from transformers import BertConfig

    return BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=128, max_position_embeddings=128, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0, initializer_range=INIT_RANGE, **extra)


def without_dropout(model):
    rates = {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)}
    assert rates <= {0.0}, f"dropout {rates}: the GPU's masks would differ from the CPU's"
    return model


def towers(tokenizer, config: dict, seed: int = 0):
    """Two towers as TwoTower.from_encoder starts them (one encoder, copied unless shared; new heads)."""
    from transformers import BertModel

    from towers.modeling.models import Tower, TwoTower

    torch.manual_seed(seed)
    encoder = BertModel(bert_config(tokenizer))

    def tower(enc):
        return Tower(enc, config["pooling"], config.get("embedding_dim") or None, config.get("normalize", False),
                     config.get("head", "linear"))

    query = tower(encoder)
    doc = None if config.get("shared") else tower(copy.deepcopy(encoder))
    return without_dropout(TwoTower(query, doc, config))


def candidates() -> list[dict]:
    return [{"id": f"d{i}", "sentence": t, "paragraph": p, "contents": p, "title": f"Lighthouse {i}"}
            for i, (t, p) in enumerate(zip(TEXTS, PARAGRAPHS))]


def schedule(**extra) -> dict:
    return {"steps": STEPS, "batch_size": 8, "lr": LR, "warmup_ratio": 0.1, "checkpoint_every": STEPS, **extra}


# --- the regimes ------------------------------------------------------------------------------------------

CHANG_PAPER = {"pooling": "cls", "embedding_dim": 32, "shared": False, "normalize": False, "query_length": 16,
               "doc_length": 48, "doc_text": "sentence+paragraph", "head": "linear"}
CHANG_MINI = {**CHANG_PAPER, "pooling": "mean", "normalize": True}


def test_inbatch_finetune(tokenizer, tmp_path):
    """Chang et al. fine-tuning, paper profile: [CLS] + linear, inner product, temperature 1."""
    from towers.training.settings import InBatch
    from towers.training import inbatch

    cands = candidates()
    pairs = [{"query": QUERIES[i], "doc_id": f"d{i}", **cands[i]} for i in range(60)]
    start = towers(tokenizer, CHANG_PAPER)

    def train(run):
        model = copy.deepcopy(start)
        inbatch.finetune(model, tokenizer, [pairs[i] for i in TRAIN], [pairs[i] for i in VALID],
                         InBatch(**schedule(temperature=1.0)), run, "start")
        return model

    compare("inbatch-finetune", train, tmp_path)


def test_inbatch_pretrain(tokenizer, tmp_path):
    """Chang et al. pre-training on an ICT (title, passage) / BFS / WLP mixture; the mini profile's unit-length towers
    and temperature 0.05 (cosines x 20: the hardest on bf16's rounding). lr 3e-4: at 1e-3 a batch of 8 at this
    temperature spikes (3.2 to 3.8 and back), and which spike a run takes turns on any rounding (seen: 25%)."""
    from towers.training.settings import InBatch
    from towers.training import inbatch

    def pair(i: int, task: str) -> dict:
        j = (i + {"ict": 0, "bfs": 1, "wlp": 5}[task]) % 60
        return {"task": task, "query": TEXTS[i], "doc": PARAGRAPHS[j], "title": f"Lighthouse {j}",
                "doc_article": f"a{j}"}

    tasks = {task: [pair(i, task) for i in range(60)] for task in ("ict", "bfs", "wlp")}
    start = towers(tokenizer, CHANG_MINI)

    def train(run):
        model = copy.deepcopy(start)
        inbatch.pretrain(model, tokenizer, tasks, InBatch(**schedule(temperature=0.05, lr=3e-4)), run, "start")
        return model

    compare("inbatch-pretrain", train, tmp_path)


QUADRUPLET_TOWERS = {"pooling": "mean", "embedding_dim": 0, "shared": True, "normalize": True, "query_length": 16,
                     "doc_length": 32, "doc_text": "sentence"}


@pytest.mark.parametrize("hard", [False, True], ids=["triplet", "quadruplet"])
def test_margin(tokenizer, tmp_path, hard):
    """QuadrupletBERT: the triplet loss (phase 1, Three-T BERT) and the quadruplet loss with mined negatives.
    Margin 1 (of the paper's Table 2 grid) keeps every example's hinge open, so the loss moves smoothly with the
    weights; at 0.1 the few examples left inside the margin make a loss near 0, and any rounding switches them."""
    from towers.training.settings import Margin
    from towers.training import margin

    examples = [{"qid": f"q{i}", "query": QUERIES[i], "positives": [i]} for i in range(60)]
    mined = {f"q{i}": [(i + k) % 60 for k in (1, 2, 3, 7)] for i in range(60)} if hard else None
    start = towers(tokenizer, QUADRUPLET_TOWERS)

    def train(run):
        model = copy.deepcopy(start)
        margin.train(model, tokenizer, [examples[i] for i in TRAIN], [examples[i] for i in VALID], candidates(),
                     Margin(**schedule(margin=1.0, reduction="mean")), run, "start", mined=mined)
        return model

    compare(f"margin-{'quadruplet' if hard else 'triplet'}", train, tmp_path)


def test_repbert(tokenizer, tmp_path):
    """RepBERT: one shared encoder, mean pooling, MultiLabelMarginLoss with in-batch positives from the qrels.
    lr 3e-4: at 1e-3 the hinges (margin 1 on unnormalised inner products) switch on and off from step to step,
    and the two sides' curves swung up to 12% apart (3e-4: 4%)."""
    from towers.training.settings import Schedule
    from towers.training import repbert

    docs = {f"d{i}": p for i, p in enumerate(PARAGRAPHS)}
    # every query has its own passage; some also the next one (an in-batch positive when both are drawn)
    qrels = {f"q{i}": {f"d{i}": 1, **({f"d{(i + 1) % 60}": 1} if i % 4 == 0 else {})} for i in range(60)}
    pairs = [{"qid": f"q{i}", "query": QUERIES[i], "doc_id": f"d{i}"} for i in range(60)]
    start = towers(tokenizer, repbert.tower_config(16, 48))

    def train(run):
        model = copy.deepcopy(start)
        repbert.train(model, tokenizer, [pairs[i] for i in TRAIN], [pairs[i] for i in VALID], docs, qrels,
                      Schedule(**schedule(lr=3e-4)), run, "start")
        return model

    compare("repbert", train, tmp_path)


def ltre_world():
    from towers.retrieval import vector_index
    from towers.training.sampling import training_data

    queries = [{"qid": f"q{i}", "text": QUERIES[i]} for i in range(60)]
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(60)}
    bm25 = {f"q{i}": [f"d{(i + k) % 60}" for k in range(12)] for i in range(60)}
    data = training_data(queries, qrels, [f"d{i}" for i in range(60)], bm25)
    emb = np.random.default_rng(0).standard_normal((60, 32)).astype(np.float32)
    return data, emb, vector_index.build(emb, "Flat")


@pytest.mark.parametrize("negatives,loss", [("ltre", "ranknet"), ("rand", "lambdarank")])
def test_ltre(tokenizer, tmp_path, negatives, loss):
    """LTRe: the query tower against a fixed Faiss index (Algorithm 1, RankNet), and a Figure 3 baseline with
    LambdaRank. A (relevant, negative) pair's |delta MRR| is 1/2 whichever comes first, so LambdaRank's weights
    cannot jump when bf16 reorders a near-tie (with longer sampled lists they could, and the curves with them).
    Algorithm 1's top 8 are immune too: a relevant doc just below them is put last, where it would have been."""
    from transformers import BertModel

    from towers.modeling.models import Tower
    from towers.training.settings import LearningToRetrieve
    from towers.training import ltre

    data, emb, index = ltre_world()
    torch.manual_seed(0)
    start = without_dropout(Tower(BertModel(bert_config(tokenizer)), "cls", 32, head_kind="linear-ln"))
    cfg = LearningToRetrieve(**schedule(), top_n=8, query_length=16, loss=loss, metric="mrr@10",
                             reduction="query-sum", negatives=negatives, negatives_per_query=1, negative_depth=8,
                             probe_depth=0, nprobe=0)

    def train(run):
        tower = copy.deepcopy(start)
        ltre.train(tower, tokenizer, data, emb, index, cfg, run)
        return tower

    compare(f"ltre-{negatives}-{loss}", train, tmp_path)


@pytest.mark.parametrize("negatives", ["rand", "bm25", "nce", "bm25+rand", "async"])
def test_negative_sampling(tokenizer, tmp_path, negatives):
    """LTRe Table 1's baselines: one shared encoder, RankNet over (relevant, negative). Async re-encodes the corpus
    (fp16 on CUDA) and searches it every 10 steps; its pool is the whole corpus, so a near-tie bf16 reorders
    swaps two negatives of near-equal score instead of letting the relevant doc in or out of the pool (which
    would shift every later draw of that query)."""
    from towers.training.settings import NegativeSampling
    from towers.training import negatives as baselines

    data, _, _ = ltre_world()
    config = {"pooling": "cls", "embedding_dim": 32, "shared": True, "normalize": False, "query_length": 16,
              "doc_length": 48, "doc_text": "contents", "head": "linear-ln"}
    start = towers(tokenizer, config)
    # async: every other doc is a negative of every query, so the lists do not depend on the refresh's order
    count = 59 if negatives == "async" else 1
    cfg = NegativeSampling(**schedule(), negatives=negatives, negatives_per_query=count,
                           negative_depth=60 if negatives == "async" else 8, refresh_every=10)

    def train(run):
        model = copy.deepcopy(start)
        report = baselines.train(model, tokenizer, data, PARAGRAPHS, cfg, run, "start")
        assert report["refreshes"] == (2 if negatives == "async" else 0)
        return model

    compare(f"negatives-{negatives}", train, tmp_path)


@pytest.mark.parametrize("loss,labels", [("pointwise", 1), ("listwise", 2)])
def test_cross_encoder(tokenizer, tmp_path, loss, labels):
    """The reranker: monoBERT's pointwise BCE (a 1-logit head) and the listwise group softmax (2 logits)."""
    from transformers import BertForSequenceClassification

    from towers.training.settings import CrossEncoder
    from towers.training import cross_encoder

    queries = {f"q{i}": QUERIES[i] for i in range(60)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(60)}
    first_stage = {f"q{i}": [(f"d{(i + k) % 60}", 10.0 - k) for k in range(10)] for i in range(60)}
    examples = cross_encoder.training_examples(queries, qrels, first_stage, depth=10)
    passages = {f"d{i}": p for i, p in enumerate(PARAGRAPHS)}
    torch.manual_seed(0)
    start = without_dropout(BertForSequenceClassification(bert_config(tokenizer, num_labels=labels)))
    settings = CrossEncoder(**schedule(), max_length=64, negatives_depth=10, num_labels=labels, loss=loss,
                            group_size=4)

    def train(run):
        model = copy.deepcopy(start)
        cross_encoder.train(model, tokenizer, [examples[i] for i in TRAIN], [examples[i] for i in VALID], passages,
                            settings, run, "start")
        return model

    compare(f"cross-encoder-{loss}", train, tmp_path)


@pytest.mark.parametrize("nsp", [False, True], ids=["mlm", "mlm+nsp"])
def test_masked_lm(tokenizer, tmp_path, nsp):
    """MLM pre-training (Chang et al.'s MLM baseline), and MLM + NSP (QuadrupletBERT's). The collator masks from
    torch's CPU generator, which the loop seeds each step: both sides mask the same tokens."""
    from transformers import BertForMaskedLM, BertForPreTraining

    from towers.training.settings import MaskedLM
    from towers.training import mlm

    torch.manual_seed(0)   # as mlm.new_model, with dropout 0
    start = without_dropout((BertForPreTraining if nsp else BertForMaskedLM)(bert_config(tokenizer)))
    paragraphs = [[TEXTS[i], PARAGRAPHS[i][len(TEXTS[i]) + 1:]] for i in range(60)] if nsp else None

    def train(run):
        model = copy.deepcopy(start)
        mlm.pretrain(model, tokenizer, PARAGRAPHS, MaskedLM(**schedule(), max_length=32), run, {"arch": "tiny"},
                     paragraphs=paragraphs)
        return model

    compare("mlm+nsp" if nsp else "mlm", train, tmp_path)
