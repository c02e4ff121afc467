import math

import torch

from towers.training.losses import in_batch_softmax


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


# QuadrupletBERT eq. 3-4, on vectors whose cosines are easy to work out by hand.
Q, P, N = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
HN = torch.tensor([[1.0, 1.0]])          # cos(hn, n) = 1/sqrt(2)


def test_cosine_distance_is_one_minus_cosine():
    from towers.training.losses import cosine_distance

    assert torch.allclose(cosine_distance(torch.tensor([[2.0, 0.0], [1.0, 1.0]]), torch.tensor([[5.0, 0.0], [0.0, 3.0]])),
                          torch.tensor([0.0, 1 - 1 / math.sqrt(2)]))


def test_quadruplet_loss_takes_the_hard_negative_term_when_it_is_larger():
    from towers.training.losses import quadruplet

    # d_p = 0, d_n = 1, d_h = d(hn, n) = 1 - 1/sqrt(2); m = 0.5:
    # loss^n = max(0 - 1 + 0.5, 0) = 0, loss^h = 0.5 - (1 - 1/sqrt(2)) = 0.2071
    expected = 0.5 - (1 - 1 / math.sqrt(2))
    assert math.isclose(float(quadruplet(Q, P, N, HN, margin=0.5)), expected, rel_tol=1e-6)
    # with loss^h = 0 (no hard negative) only the triplet term is left, which is 0 here
    assert float(quadruplet(Q, P, N, None, margin=0.5)) == 0.0


def test_quadruplet_loss_takes_the_negative_term_when_it_is_larger():
    from towers.training.losses import quadruplet

    q, p = torch.tensor([[1.0, 0.0]]), torch.tensor([[1.0, 1.0]])    # d_p = 1 - 1/sqrt(2) = 0.2929
    n = torch.tensor([[1.0, 0.2]])                                    # d(q, n) = 1 - 1/sqrt(1.04) = 0.0194
    hn = torch.tensor([[-1.0, 0.0]])                                  # d(hn, n) = 1 + 1/sqrt(1.04) = 1.9806
    d_p, d_n = 1 - 1 / math.sqrt(2), 1 - 1 / math.sqrt(1.04)
    assert math.isclose(float(quadruplet(q, p, n, hn, margin=0.1)), d_p - d_n + 0.1, rel_tol=1e-5)


def test_quadruplet_gradient_pushes_hard_negative_away_from_negative_and_query_towards_positive():
    from towers.training.losses import cosine_distance, quadruplet

    q = torch.tensor([[1.0, 0.3]], requires_grad=True)
    hn = HN.clone().requires_grad_(True)
    quadruplet(q, P, N, hn, margin=0.5).backward()
    with torch.no_grad():
        assert cosine_distance(hn - 0.1 * hn.grad, N) > cosine_distance(HN, N)          # d^h grows
        assert cosine_distance(q - 0.1 * q.grad, P) < cosine_distance(q.detach(), P)    # d^p shrinks


def test_quadruplet_reduction_sum_is_batch_size_times_mean():
    from towers.training.losses import quadruplet

    q, p, n, hn = (torch.randn(5, 3, generator=torch.Generator().manual_seed(i)) for i in range(4))
    mean, total = quadruplet(q, p, n, hn, 0.2), quadruplet(q, p, n, hn, 0.2, reduction="sum")
    assert math.isclose(float(total), 5 * float(mean), rel_tol=1e-5)
