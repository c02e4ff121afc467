import hashlib
import json
import math
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from towers.io import StageError
from towers.training.losses import delta_metric, pairwise_loss
from towers.modeling.models import Tower, load_encoder, load_tokenizer, random_encoder
from towers.modeling.tokens import tokenize_queries
from towers.retrieval import vector_index
from towers.training.settings import LearningToRetrieve, NegativeSampling, Schedule
from towers.modeling.tokenizer import train_wordpiece
from towers.training import loop
from towers.training.ltre import batch_mrr10, ensure_relevant, train
from towers.training.sampling import labels_of, training_data


def sp(x: float) -> float:
    return math.log(1 + math.exp(x))


# ---- ensure_relevant / labels_of

def test_ensure_relevant_replaces_last_id_only_where_needed():
    ranked = np.array([[5, 6, 7], [1, 2, 3]])
    before = ranked.copy()
    out = ensure_relevant(ranked, [{9, 8}, {2}], np.random.default_rng(0))
    assert out[0, :2].tolist() == [5, 6] and out[0, 2] in {8, 9}
    assert out[1].tolist() == [1, 2, 3]
    assert np.array_equal(ranked, before)          # input untouched
    assert out is not ranked


def test_ensure_relevant_is_repeatable_with_the_same_seed():
    ranked = np.arange(40).reshape(10, 4)
    relevant = [{100 + i, 200 + i, 300 + i} for i in range(10)]
    a = ensure_relevant(ranked, relevant, np.random.default_rng(3))
    b = ensure_relevant(ranked, relevant, np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert all(a[i, -1] in relevant[i] for i in range(10))


def test_ensure_relevant_rejects_an_empty_relevant_set():
    with pytest.raises(ValueError, match="query 1"):
        ensure_relevant(np.array([[1, 2], [3, 4]]), [{1}, set()], np.random.default_rng(0))


def test_labels_of_reads_graded_judgements():
    out = labels_of(np.array([[4, 5, 6]]), [{5: 2, 6: 1, 9: 3}])
    assert out.dtype == np.float32 and out.tolist() == [[0.0, 2.0, 1.0]]


# ---- pairwise losses

def test_ranknet_value_and_gradient_signs():
    scores = torch.tensor([[2.0, 1.0, 0.5]], requires_grad=True)
    labels = torch.tensor([[0.0, 1.0, 0.0]])
    loss = pairwise_loss(scores, labels, "ranknet")
    # pairs (1, 0) and (1, 2): log(1 + e^(2 - 1)) + log(1 + e^(0.5 - 1))
    assert math.isclose(loss.item(), sp(1.0) + sp(-0.5), rel_tol=1e-6)
    loss.backward()
    g = scores.grad[0]
    assert g[1] < 0 and g[0] > 0 and g[2] > 0


def test_lambdarank_mrr_weights_pairs_by_delta():
    scores = torch.tensor([[2.0, 1.0, 0.5]], requires_grad=True)
    labels = torch.tensor([[0.0, 1.0, 0.0]])
    # relevant at rank 2 (MRR 1/2): to rank 1 -> MRR 1, |delta| 1/2; to rank 3 -> 1/3, |delta| 1/6
    expected = 0.5 * sp(1.0) + (1 / 6) * sp(-0.5)
    loss = pairwise_loss(scores, labels, "lambdarank", "mrr@10")
    assert math.isclose(loss.item(), expected, rel_tol=1e-6)
    loss.backward()
    assert scores.grad[0, 1] < 0


def test_reductions_query_sum_and_pair_mean():
    scores = torch.tensor([[2.0, 1.0, 0.5], [0.0, 1.0, 3.0], [1.0, 2.0, 3.0]], requires_grad=True)
    labels = torch.tensor([[0.0, 1.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    q0 = sp(1.0) + sp(-0.5)                    # 2 pairs: (1, 0), (1, 2)
    q1 = sp(1.0 - 0.0) + sp(3.0 - 0.0) + sp(3.0 - 1.0)   # 3 pairs: (0, 1), (0, 2), (1, 2)
    # the third query has no pair: left out of the query mean
    query_sum = pairwise_loss(scores, labels, reduction="query-sum").item()
    pair_mean = pairwise_loss(scores, labels, reduction="pair-mean").item()
    assert math.isclose(query_sum, (q0 + q1) / 2, rel_tol=1e-6)
    assert math.isclose(pair_mean, (q0 + q1) / 5, rel_tol=1e-6)


@pytest.mark.parametrize("reduction", ["query-sum", "pair-mean"])
@pytest.mark.parametrize("loss_name", ["ranknet", "lambdarank"])
def test_batch_without_pairs_gives_zero_and_backward_works(reduction, loss_name):
    scores = torch.tensor([[1.0, 2.0], [0.5, 0.1]], requires_grad=True)
    labels = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    loss = pairwise_loss(scores, labels, loss_name, reduction=reduction)
    assert loss.item() == 0.0
    loss.backward()
    assert scores.grad is not None and torch.all(scores.grad == 0)


@pytest.mark.parametrize("kwargs, bad", [({"loss": "listnet"}, "listnet"), ({"metric": "map"}, "map"),
                                         ({"reduction": "mean"}, "mean")])
def test_bad_names_raise(kwargs, bad):
    scores, labels = torch.zeros(1, 2), torch.tensor([[1.0, 0.0]])
    with pytest.raises(ValueError, match=bad):
        pairwise_loss(scores, labels, **kwargs)
    with pytest.raises(ValueError, match="ndcg@10"):
        delta_metric(labels, "recall@10")


# ---- delta_metric

def test_delta_ndcg_on_a_graded_list():
    d = delta_metric(torch.tensor([[2.0, 0.0, 1.0]]), "ndcg@10")[0]
    l3 = math.log2(3)
    # gains 2^l - 1 = 3, 0, 1; discounts 1, 1/log2(3), 1/2
    dcg = 3 + 0 + 1 / 2
    ideal = 3 + 1 / l3 + 0                     # labels sorted: 2, 1, 0
    swap01 = 0 + 3 / l3 + 1 / 2                # 0, 2, 1
    swap02 = 1 + 0 + 3 / 2                     # 1, 0, 2
    swap12 = ideal                             # 2, 1, 0
    expected = [[0, abs(swap01 - dcg), abs(swap02 - dcg)],
                [abs(swap01 - dcg), 0, abs(swap12 - dcg)],
                [abs(swap02 - dcg), abs(swap12 - dcg), 0]]
    assert torch.allclose(d, torch.tensor(expected) / ideal, atol=1e-6)


def test_delta_ndcg_is_zero_without_relevant_documents():
    assert torch.all(delta_metric(torch.zeros(2, 4), "ndcg@10") == 0)


def test_mrr_delta_ignores_swaps_beyond_rank_10():
    labels = torch.zeros(1, 15)
    labels[0, 12] = 1.0                        # only relevant document at rank 13: MRR@10 = 0
    d = delta_metric(labels, "mrr@10")[0]
    assert d[12, 13] == 0 and d[11, 12] == 0 and d[10, 14] == 0
    assert math.isclose(float(d[12, 3]), 1 / 4, rel_tol=1e-6)   # brought to rank 4
    assert math.isclose(float(d[9, 12]), 1 / 10, rel_tol=1e-6)  # brought to rank 10
    assert torch.equal(d, d.T) and torch.all(d.diagonal() == 0)


def test_mrr_delta_only_counts_the_first_relevant_document():
    # relevant at ranks 2 and 4: moving the second one to rank 3 changes nothing
    d = delta_metric(torch.tensor([[0.0, 1.0, 0.0, 1.0]]), "mrr@10")[0]
    assert d[2, 3] == 0
    assert math.isclose(float(d[0, 3]), 1 / 2, rel_tol=1e-6)    # rank 1 now relevant: 1 - 1/2
    assert math.isclose(float(d[1, 2]), 1 / 2 - 1 / 3, rel_tol=1e-6)


# ---- models.head "linear-ln" and loop.run extras

def test_linear_ln_head_gives_layer_normed_embeddings(world):
    batch = tokenize_queries(world.tokenizer, [q["text"] for q in world.queries], 16, torch.device("cpu"))
    with torch.no_grad():
        out = make_tower(world).eval()(**batch)
        plain = make_tower(world, "linear").eval()(**batch)
    assert out.shape == (12, 8) and isinstance(make_tower(world).projection[1], torch.nn.LayerNorm)
    assert torch.allclose(out.mean(-1), torch.zeros(12), atol=1e-5)
    assert torch.allclose(out.std(-1, unbiased=False), torch.ones(12), atol=1e-3)
    assert not torch.allclose(plain.std(-1, unbiased=False), torch.ones(12), atol=1e-2)   # the norm does it


def test_loop_run_logs_the_extras_a_loss_fn_returns(tmp_path):
    model = torch.nn.Linear(2, 1)
    schedule = Schedule(steps=3, batch_size=1, lr=0.1, warmup_ratio=0.0, checkpoint_every=2)
    loop.run(model, lambda step: (model(torch.ones(1, 2)).sum(), {"seen": float(step)}), schedule,
             loop.Run(0, tmp_path / "a", tmp_path / "a.jsonl"), identity={})
    records = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["seen"] for r in records] == [0.0, 1.0, 2.0] and all(r["step_s"] > 0 for r in records)
    loop.run(model, lambda step: model(torch.ones(1, 2)).sum(), schedule, loop.Run(0, tmp_path / "b", tmp_path / "b.jsonl"),
             identity={})
    records = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert all(set(r) == {"step", "loss", "lr"} for r in records)   # a plain loss: records as before


# ---- train (Algorithm 1) on a tiny world: 30 docs with random vectors, 12 queries, one relevant doc each

TEXTS = [f"The lighthouse number {i} stands on pier {i % 7} and was lit in {1800 + i}." for i in range(30)]
ARCH = {"hidden": 32, "layers": 1, "heads": 2, "intermediate": 64, "max_positions": 64}
CFG = {"steps": 6, "batch_size": 4, "lr": 1e-3, "warmup_ratio": 0.0, "checkpoint_every": 2, "top_n": 8,
       "query_length": 16, "loss": "ranknet", "metric": "mrr@10", "reduction": "query-sum", "nprobe": 0,
       "negative_depth": 8, "probe_depth": 0}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("ltre")
    train_wordpiece(TEXTS, root / "tok", vocab_size=200, min_frequency=1, lowercase=True)
    random_encoder(root / "tok", root / "enc", ARCH, seed=1)
    return SimpleNamespace(root=root, tokenizer=load_tokenizer(root / "enc"), doc_ids=[f"d{i}" for i in range(30)],
                           emb=np.random.default_rng(0).standard_normal((30, 8)).astype(np.float32),
                           queries=[{"qid": f"q{i}", "text": f"when was lighthouse {i} lit?"} for i in range(12)],
                           qrels={f"q{i}": {f"d{i}": 1} for i in range(12)})


def make_tower(world, head_kind: str = "linear-ln") -> Tower:
    torch.manual_seed(0)   # the same starting projection every time
    return Tower(load_encoder(world.root / "enc"), "cls", 8, head_kind=head_kind)


def run_train(world, state_dir, tower=None, emb=None, index=None, qrels=None, stop_after_step=None, bm25=None,
              **cfg):
    emb = world.emb if emb is None else emb
    index = vector_index.build(emb, "Flat") if index is None else index
    tower = make_tower(world) if tower is None else tower
    data = training_data(world.queries, world.qrels if qrels is None else qrels, world.doc_ids, bm25)
    report = train(tower, world.tokenizer, data, emb, index, LearningToRetrieve(**{**CFG, **cfg}),
                   loop.Run(3, state_dir, state_dir.with_suffix(".jsonl"), stop_after_step))
    return tower, report


def weights(tower) -> dict:
    return {k: v.detach().cpu().clone() for k, v in tower.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_batch_mrr10_reads_the_first_relevant_rank_in_the_top_10():
    labels = np.array([[0] * 3 + [2] + [0] * 8, [0] * 10 + [1, 1], [1] + [1] * 11])
    assert math.isclose(batch_mrr10(labels), (1 / 4 + 0 + 1) / 3)


@pytest.mark.parametrize("loss,metric,reduction", [("ranknet", "mrr@10", "query-sum"),
                                                   ("lambdarank", "ndcg@10", "pair-mean")])
def test_train_moves_only_the_query_tower_and_leaves_docs_and_index_alone(world, tmp_path, loss, metric, reduction):
    import faiss

    emb = world.emb.copy()
    index = vector_index.build(emb, "Flat")
    before_emb, before_index = sha(emb.tobytes()), sha(faiss.serialize_index(index).tobytes())
    start = weights(make_tower(world))
    tower, report = run_train(world, tmp_path / "s", emb=emb, index=index, loss=loss, metric=metric,
                              reduction=reduction)
    after = weights(tower)
    assert sha(emb.tobytes()) == before_emb and sha(faiss.serialize_index(index).tobytes()) == before_index
    assert np.array_equal(emb, world.emb)
    assert not torch.equal(after["projection.0.weight"], start["projection.0.weight"])
    assert not torch.equal(after["encoder.embeddings.word_embeddings.weight"],
                           start["encoder.embeddings.word_embeddings.weight"])
    assert report["steps"] == 6 and report["train_queries"] == 12 and report["top_n"] == 8
    assert report["resumed_from"] == 0


def test_train_logs_step_timings_and_batch_mrr(world, tmp_path):
    _, report = run_train(world, tmp_path / "s")
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 7))
    for r in records:
        assert r["encode_s"] > 0 and r["search_s"] > 0 and r["step_s"] > r["encode_s"] + r["search_s"]
        assert 0 <= r["mrr@10_batch"] <= 1
    seconds = report["seconds_per_step"]
    assert set(seconds) == {"encode", "search", "update", "total"} and seconds["update"] >= 0
    assert math.isclose(seconds["total"], seconds["encode"] + seconds["search"] + seconds["update"], abs_tol=1e-5)
    assert math.isclose(seconds["encode"], np.mean([r["encode_s"] for r in records]), abs_tol=1e-6)


def test_batch_mrr_is_of_the_lists_as_retrieved(world, tmp_path):
    # every relevant doc scores 0 for any query, below the ~half of the 18 random docs that score > 0,
    # so it is never in a top 3: MRR@10 before the replacement is 0, after it would be 1/3
    emb = world.emb.copy()
    emb[:12] = 0.0
    _, report = run_train(world, tmp_path / "s", emb=emb, top_n=3)
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert all(r["mrr@10_batch"] == 0 for r in records)
    assert all(r["loss"] > 0 for r in records)   # the replaced-in relevant doc gives each query its pairs


def test_train_is_repeatable(world, tmp_path):
    a, _ = run_train(world, tmp_path / "a")
    b, _ = run_train(world, tmp_path / "b")
    assert same(weights(a), weights(b))
    logs = [[json.loads(line)["loss"] for line in (tmp_path / f"{n}.jsonl").read_text().splitlines()] for n in "ab"]
    assert logs[0] == logs[1]


def test_stopped_train_resumes_to_identical_weights(world, tmp_path):
    whole, _ = run_train(world, tmp_path / "whole")
    with pytest.raises(SystemExit):
        run_train(world, tmp_path / "part", stop_after_step=2)
    assert (tmp_path / "part" / "checkpoint.pt").exists()
    resumed, report = run_train(world, tmp_path / "part")
    assert report["resumed_from"] == 2 and report["history"][-1]["step"] == 6
    assert same(weights(resumed), weights(whole))
    assert len(report["seconds_per_step"]) == 4
    steps = [json.loads(line)["step"] for line in (tmp_path / "part.jsonl").read_text().splitlines()]
    assert steps[-4:] == [3, 4, 5, 6]   # the resumed run appends its steps to the log


def test_a_resumed_run_logs_every_step_once_though_its_log_was_removed(world, tmp_path):
    """Snakemake removes a restarted job's outputs (the step log is one) before it runs: the steps before the
    resume must still reach the log (Table 3's training seconds and Figure 3 read them), each once."""
    with pytest.raises(SystemExit):
        run_train(world, tmp_path / "part", stop_after_step=2)
    assert [json.loads(line)["step"] for line in (tmp_path / "part.jsonl").read_text().splitlines()] == [1, 2]
    (tmp_path / "part.jsonl").unlink()
    state_log = tmp_path / "part" / "steps.jsonl"   # a step logged after the checkpoint, then a kill
    state_log.write_text(state_log.read_text() + json.dumps({"step": 3, "loss": 9.9, "lr": 0.0}) + "\n")
    run_train(world, tmp_path / "part")
    records = [json.loads(line) for line in (tmp_path / "part.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6] and all(r["step_s"] > 0 for r in records)
    assert records[2]["loss"] != 9.9
    loop.finish(tmp_path / "part")   # the stage's last act: the state folder's log goes with the checkpoint
    assert not state_log.exists()


def test_checkpoint_of_other_settings_or_docs_is_not_resumed(world, tmp_path):
    with pytest.raises(SystemExit):
        run_train(world, tmp_path / "s", stop_after_step=2)
    assert run_train(world, tmp_path / "s", lr=2e-3)[1]["resumed_from"] == 0
    with pytest.raises(SystemExit):
        run_train(world, tmp_path / "t", stop_after_step=2)
    emb = world.emb.copy()
    emb[5, 0] += 1.0
    assert run_train(world, tmp_path / "t", emb=emb)[1]["resumed_from"] == 0


@pytest.mark.parametrize("qrels_q3", [{"d99": 1}, {"d3": 0}, {}])
def test_query_without_an_indexed_relevant_doc_is_a_stage_error(world, tmp_path, qrels_q3):
    qrels = {**world.qrels, "q3": qrels_q3}
    with pytest.raises(StageError, match="q3"):
        run_train(world, tmp_path / "s", qrels=qrels)
    assert not (tmp_path / "s" / "checkpoint.pt").exists()


# ---- negatives sampled against the fixed index (Figure 3's baselines) and the shared-encoder baselines

def test_sample_negatives_draws_from_the_pool_outside_the_excluded_and_fills_with_random_rows():
    from towers.training.sampling import sample_negatives

    rng = np.random.default_rng(0)
    picked = sample_negatives([5, 1, 7, 9], 3, 30, {1, 9}, rng)
    assert sorted(picked[:2]) == [5, 7] and len(picked) == 3 and len(set(picked)) == 3
    assert not {1, 9} & set(picked)
    assert all(r not in {2, 3} for r in sample_negatives([], 25, 30, {2, 3}, rng))   # no pool: the corpus


def test_sampled_lists_put_a_relevant_row_first():
    from towers.training.ltre import sampled_lists

    relevant = [{0}, {1, 2}]
    lists = sampled_lists([0, 1], relevant, [[0, 4, 5], [1, 2, 6]], 1, 10, np.random.default_rng(3))
    assert lists.shape == (2, 2) and lists[0, 0] == 0 and lists[1, 0] in {1, 2}
    assert lists[0, 1] in {4, 5} and lists[1, 1] == 6


def test_figure3_step_log_has_recall_and_overlaps(world, tmp_path):
    bm25 = {q["qid"]: [f"d{(i + k) % 30}" for k in range(10)] for i, q in enumerate(world.queries)}
    _, report = run_train(world, tmp_path / "s", probe_depth=5, refresh_every=2, bm25=bm25)
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    for r in records:
        assert 0 <= r["r@5_batch"] <= 1 and 0 <= r["bm25_overlap"] <= 1 and 0 <= r["async_overlap"] <= 1
    # right after a refresh the query tower is unchanged but in train mode (dropout): overlap stays high
    assert [("refresh_s" in r) for r in records] == [True, False, True, False, True, False]
    assert "refresh" in report["seconds_per_step"]


@pytest.mark.parametrize("negatives", ["rand", "bm25", "async"])
def test_sampled_negatives_train_only_the_query_tower(world, tmp_path, negatives):
    bm25 = {q["qid"]: [f"d{(i + k) % 30}" for k in range(10)] for i, q in enumerate(world.queries)}
    emb = world.emb.copy()
    start = weights(make_tower(world))
    tower, report = run_train(world, tmp_path / "s", emb=emb, negatives=negatives, refresh_every=3, bm25=bm25,
                              negatives_per_query=2, negative_depth=6, probe_depth=5)
    assert np.array_equal(emb, world.emb) and report["negatives"] == negatives
    assert not torch.equal(weights(tower)["projection.0.weight"], start["projection.0.weight"])


def test_unknown_negatives_and_missing_bm25_are_refused(world, tmp_path):
    with pytest.raises(ValueError, match="negatives"):
        run_train(world, tmp_path / "a", negatives="bm26")
    with pytest.raises(ValueError, match="BM25"):
        run_train(world, tmp_path / "b", negatives="bm25")


def test_hardest_in_batch_skips_relevant_documents():
    from towers.training.negatives import hardest_in_batch

    scores = torch.tensor([[5.0, 4.0, 1.0], [2.0, 9.0, 3.0], [1.0, 1.0, 1.0]])
    relevant = torch.tensor([[True, True, False], [False, True, False], [True, True, True]])
    assert hardest_in_batch(scores, relevant).tolist() == [2, 2, -1]


def shared_model(world):
    from towers.modeling.models import TwoTower

    cfg = {"pooling": "cls", "embedding_dim": 8, "shared": True, "normalize": False, "query_length": 16,
           "doc_length": 24, "doc_text": "contents", "head": "linear-ln"}
    return TwoTower.from_encoder(world.root / "enc", cfg, seed=0), world.tokenizer


NEG_CFG = {"steps": 4, "batch_size": 4, "lr": 1e-3, "warmup_ratio": 0.0, "checkpoint_every": 2,
           "negatives_per_query": 1, "negative_depth": 5, "refresh_every": 2}


@pytest.mark.parametrize("negatives", ["rand", "bm25", "nce", "bm25+rand", "async"])
def test_negative_sampling_baselines_train_the_shared_encoder(world, tmp_path, negatives):
    from towers.training import negatives as neg

    model, tok = shared_model(world)
    before = weights(model)
    bm25 = {q["qid"]: [f"d{(i + k) % 30}" for k in range(10)] for i, q in enumerate(world.queries)}
    data = training_data(world.queries, world.qrels, world.doc_ids, bm25)
    report = neg.train(model, tok, data, TEXTS, NegativeSampling(**NEG_CFG, negatives=negatives),
                       loop.Run(1, tmp_path / "s", tmp_path / "s.jsonl"), "start")
    assert not same(before, weights(model)) and model.shared
    assert report["refreshes"] == (2 if negatives == "async" else 0)
    assert (report["refresh_seconds"] > 0) == (negatives == "async")
    again, _ = shared_model(world)
    neg.train(again, tok, data, TEXTS, NegativeSampling(**NEG_CFG, negatives=negatives), loop.Run(1, tmp_path / "t"),
              "start")
    assert same(weights(model), weights(again))   # seeded: the same run twice gives the same weights


def test_bm25_negatives_come_from_the_bm25_pool(world, monkeypatch, tmp_path):
    from towers.training import negatives as neg

    seen = []
    real = neg.sample_negatives

    def spy(pool, count, n_docs, excluded, rng):
        out = real(pool, count, n_docs, excluded, rng)
        seen.append((list(pool), out, excluded))
        return out

    monkeypatch.setattr(neg, "sample_negatives", spy)
    model, tok = shared_model(world)
    bm25 = {q["qid"]: [f"d{(i + k) % 30}" for k in range(1, 6)] for i, q in enumerate(world.queries)}
    neg.train(model, tok, training_data(world.queries, world.qrels, world.doc_ids, bm25), TEXTS,
              NegativeSampling(**NEG_CFG, negatives="bm25"), loop.Run(1, tmp_path / "s"), "start")
    assert seen and all(set(out) <= set(pool) and not set(out) & excluded for pool, out, excluded in seen)


# ---- the stages' bad input: one line naming the file, nothing written

def saved_world(world, tmp_path):
    """A saved shared-encoder model, the world's candidates, qrels, training queries and doc vectors."""
    model, tok = shared_model(world)
    model.save(tmp_path / "start", tok)
    (tmp_path / "candidates.jsonl").write_text("".join(json.dumps({"id": d, "contents": t}) + "\n"
                                                       for d, t in zip(world.doc_ids, TEXTS)))
    (tmp_path / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(12)))
    (tmp_path / "train.tsv").write_text("".join(f"{q['qid']}\t{q['text']}\n" for q in world.queries))
    np.save(tmp_path / "emb.npy", world.emb)
    (tmp_path / "ids.txt").write_text("\n".join(world.doc_ids) + "\n")
    import faiss
    faiss.write_index(vector_index.build(world.emb, "Flat"), str(tmp_path / "index.faiss"))
    return tmp_path


def ltre_stage(root, *extra):
    from conftest import run_stage

    return run_stage("train-ltre", "--start", root / "start", "--embeddings", root / "emb.npy", "--ids",
                     root / "ids.txt", "--index", root / "index.faiss", "--candidates", root / "candidates.jsonl",
                     "--qrels", root / "qrels.txt", "--train", root / "train.tsv", "--top-n", 5, "--probe-depth", 5,
                     "--steps", 2, "--batch-size", 4, "--lr", 1e-3, "--warmup-ratio", 0, "--checkpoint-every", 2,
                     "--state-dir", root / "state", "--seed", 1, "--out", root / "out", *extra)


def test_train_ltre_stage_trains_and_refuses_ids_of_another_corpus(world, tmp_path):
    root = saved_world(world, tmp_path)
    done = ltre_stage(root)
    assert done.returncode == 0, done.stderr
    assert (root / "out" / "query").is_dir() and (root / "out" / "doc").is_dir()   # the query tower apart
    shutil.rmtree(root / "out")
    (root / "ids.txt").write_text("\n".join(reversed(world.doc_ids)) + "\n")
    bad = ltre_stage(root)
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.returncode == 1 and "ids.txt" in last and "not those of" in last and not (root / "out").exists()


def test_train_ltre_stage_needs_a_bm25_run_for_bm25_negatives(world, tmp_path):
    root = saved_world(world, tmp_path)
    bad = ltre_stage(root, "--negatives", "bm25")
    assert bad.returncode == 1 and "--bm25-run" in bad.stderr.strip().splitlines()[-1]
    assert not (root / "out").exists()


def test_an_index_goes_to_one_gpu_to_all_gpus_or_stays_on_the_cpu():
    from towers.retrieval.vector_index import placement

    gib = 2**30
    assert placement(20 * gib, [80 * gib]) == "gpu"
    assert placement(70 * gib, [80 * gib]) == "cpu"            # 80% of one GPU at most: room for queries
    assert placement(70 * gib, [80 * gib] * 2) == "shard"
    assert placement(200 * gib, [80 * gib] * 2) == "cpu"
    assert placement(1, []) == "cpu"                           # no GPU


def test_the_cpu_build_keeps_indexes_on_the_cpu():
    import faiss

    from towers.retrieval import vector_index

    index = vector_index.build(np.eye(4, dtype=np.float32), "Flat")
    assert vector_index.stored_bytes(index) == 4 * 4 * 4
    if not hasattr(faiss, "StandardGpuResources"):
        assert vector_index.gpu_count() == 0 and vector_index.to_device(index) is index


# ---- compact training data: ids -> rows, BM25 runs as arrays, texts read when asked

def test_row_lookup_gives_rows_the_last_of_a_repeated_id_and_minus_one_for_unknown_ids():
    from towers.training.sampling import RowLookup

    lookup = RowLookup(["b", "a", "c", "a", "long-id-10"])
    assert len(lookup) == 5
    assert lookup.rows_of(["a", "b", "c", "zz", "long-id-10", "long"]).tolist() == [3, 0, 2, -1, 4, -1]
    assert lookup.rows_of([]).tolist() == []
    assert lookup.rows_of(["caf\u00e9", "a"]).tolist() == [-1, 3]   # an id no ASCII set holds
    accented = RowLookup(["caf\u00e9", "b"])
    assert accented.rows_of(["b", "caf\u00e9", "cafe"]).tolist() == [1, 0, -1]


def write_run(path, hits):
    path.write_text("".join(f"{q} Q0 {d} {r} {s:.3f} tag\n" for q, d, r, s in hits))


@pytest.mark.parametrize("in_order", [False, True], ids=["shuffled", "in-order"])
@pytest.mark.parametrize("chunk", [3, 7, 1000])
@pytest.mark.parametrize("depth", [1, 2, 4, 50])
def test_run_rows_are_read_runs_ranked_rows_cut_to_depth_whatever_the_chunks(tmp_path, monkeypatch, chunk, depth,
                                                                            in_order):
    from towers.io import read_run
    from towers.training import sampling

    rng = np.random.default_rng(depth * chunk)
    doc_ids = [f"d{i}" for i in range(20)]
    drawn = [i for i in range(25) if i not in (3, 4)]   # a query names a doc once (d3, d4: the ties below)
    hits = [(f"q{q}", f"d{int(d)}", int(r), float(10 - r))   # d20..d24 are not indexed
            for q in range(6) for d, r in zip(rng.choice(drawn, size=8, replace=False), rng.permutation(np.arange(1, 9)))]
    hits += [("q2", "d3", 3, 7.0), ("q2", "d4", 3, 7.0)]   # tied ranks keep the file's order
    order = rng.permutation(len(hits))
    if in_order:   # the training queries' order, each ranked (a run written by bm25-search), the ties as before
        position = {q: i for i, q in enumerate(["q4", "q0", "q9", "q2", "q5", "q1", "q3"])}
        order = sorted(order, key=lambda i: (position[hits[i][0]], hits[i][2]))
    write_run(tmp_path / "run.trec", [hits[i] for i in order])
    monkeypatch.setattr(sampling, "RUN_CHUNK", chunk)
    qids = ["q4", "q0", "q9", "q2", "q5"]   # q9 has no hits; q1 and q3 are not training queries
    lookup = sampling.RowLookup(doc_ids)
    got = sampling.run_rows(tmp_path / "run.trec", qids, lookup, depth)
    ranked = {qid: [d for d, _ in docs] for qid, docs in read_run(tmp_path / "run.trec").items()}
    expected = sampling.ranked_rows((ranked.get(q, []) for q in qids), lookup, depth)
    assert len(got) == len(qids) and got.values.dtype == np.int32
    assert [got[i].tolist() for i in range(len(qids))] == [expected[i].tolist() for i in range(len(qids))]
    assert got[2].tolist() == [] and all(len(got[i]) <= depth for i in range(len(qids)))


def test_a_run_that_is_not_trec_is_a_one_line_error_naming_it(tmp_path):
    from towers.training import sampling

    (tmp_path / "run.trec").write_text("q1 Q0 d1 1 2.0 tag\nq1 Q0 d2 two 1.0 tag\n")
    with pytest.raises(StageError, match="run.trec: line 2 has a bad rank or score"):
        sampling.run_rows(tmp_path / "run.trec", ["q1"], sampling.RowLookup(["d1", "d2"]), 5)


def test_judgement_labels_are_labels_of_their_rows(world):
    from towers.training.sampling import RowLookup, judgements_of

    qrels = {"q0": {"d3": 2, "d5": 0, "d99": 1}, "q1": {"d1": 1}, "q2": {"d7": 1, "d8": 3}}
    queries = [{"qid": q, "text": ""} for q in qrels]
    judgements = judgements_of(queries, qrels, RowLookup(world.doc_ids))
    ranked = np.array([[3, 5, 7, 8], [1, 2, 3, -1], [8, 0, 7, 7]])
    as_dicts = [{3: 2, 5: 0}, {1: 1}, {7: 1, 8: 3}]
    for picks in ([0, 1, 2], [2, 0, 1]):
        assert np.array_equal(judgements.labels(ranked, picks), labels_of(ranked, [as_dicts[i] for i in picks]))
    assert [judgements.relevant(i) for i in range(3)] == [{3}, {1}, {7, 8}]


class CountingRagged:
    """A Ragged whose row reads are counted (which queries a step touches)."""

    def __init__(self, ragged):
        self.ragged, self.reads = ragged, []

    def __getitem__(self, i):
        self.reads.append(int(i))
        return self.ragged[i]

    def __len__(self):
        return len(self.ragged)


def test_a_step_reads_only_its_own_queries_pools(world, tmp_path):
    from dataclasses import replace

    bm25 = {q["qid"]: [f"d{(i + k) % 30}" for k in range(10)] for i, q in enumerate(world.queries)}
    data = training_data(world.queries, world.qrels, world.doc_ids, bm25)
    counting = CountingRagged(data.bm25)
    cfg = LearningToRetrieve(**{**CFG, "negatives": "bm25", "probe_depth": 5, "steps": 3})
    train(make_tower(world), world.tokenizer, replace(data, bm25=counting), world.emb,
          vector_index.build(world.emb, "Flat"), cfg, loop.Run(3, tmp_path / "s"))
    # each step reads its 4 queries' pools twice (the overlap probe, the negatives), never all 12 queries'
    assert len(counting.reads) == 3 * 2 * 4


def test_candidate_texts_read_rows_when_asked(tmp_path):
    from towers.training.sampling import CandidateTexts

    rows = [{"id": f"p{i}", "contents": f"passage {i} \u00e9"} for i in range(5)]
    path = tmp_path / "candidates.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]) + "\n" +
                    "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[3:]), encoding="utf-8")
    texts = CandidateTexts(path)
    assert len(texts) == 5 and texts[4] == "passage 4 \u00e9" and texts[1:3] == ["passage 1 \u00e9", "passage 2 \u00e9"]
    assert texts[0:5] == [r["contents"] for r in rows] and texts.lookup.rows_of(["p3", "x"]).tolist() == [3, -1]
    key = texts.key
    path.write_text(path.read_text(encoding="utf-8").replace("passage 4", "passage 5"), encoding="utf-8")
    assert CandidateTexts(path).key != key
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "contents": "x"}\n{"contents": "y"}\n')
    with pytest.raises(StageError, match="bad.jsonl.*line 2"):
        CandidateTexts(tmp_path / "bad.jsonl")
