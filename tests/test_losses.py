import math

import torch

from towers.losses import in_batch_softmax


def test_in_batch_softmax_matches_hand_computation():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    d = torch.tensor([[2.0, 0.0], [1.0, 1.0]])
    # scores: row0 = [2, 1], row1 = [0, 2]
    expected = 0.5 * ((math.log(math.exp(2) + math.exp(1)) - 2) + (math.log(1 + math.exp(2)) - 2))
    assert math.isclose(float(in_batch_softmax(q, d)), expected, rel_tol=1e-6)


def test_gradient_pulls_query_towards_its_document():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]], requires_grad=True)
    d = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    in_batch_softmax(q, d).backward()
    # descending the gradient raises q0 . d0 (d0 = e1) and lowers q0 . d1 (d1 = e0)
    assert q.grad[0, 1] < 0 and q.grad[0, 0] > 0


def test_shared_document_is_not_a_negative():
    q = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    d = torch.tensor([[3.0, 0.0], [3.0, 0.0]])
    # both rows hold the same document: with masking each row has only its positive left
    assert float(in_batch_softmax(q, d, ["x", "x"])) == 0.0
    assert math.isclose(float(in_batch_softmax(q, d)), math.log(2), rel_tol=1e-6)


def test_temperature_scales_scores():
    q, d = torch.eye(2), torch.eye(2)
    assert float(in_batch_softmax(q, d, temperature=0.1)) < float(in_batch_softmax(q, d))
