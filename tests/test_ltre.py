import math

import numpy as np
import pytest
import torch

from towers.training.ltre import delta_metric, ensure_relevant, labels_of, pairwise_loss


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
