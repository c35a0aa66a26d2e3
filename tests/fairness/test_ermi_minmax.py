"""Theorem C.1 of DP-FERMI: ERMI as a maximum over W, and the gradients the trainer uses."""

import pytest
import torch

import dpfair.algorithms.dpfermi.batched as batched
import dpfair.algorithms.dpfermi.models as fmodels
from dpfair.fairness import ermi
from dpfair.fairness.ermi_minmax import optimal_w, psi_hat


def _soft(n=300, k=3, l=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randint(0, k, (n,), generator=g)
    logits = torch.randn(n, l, generator=g, dtype=torch.float64) + 0.8 * torch.nn.functional.one_hot(s % l, l)
    F = torch.softmax(logits, 1)
    p = torch.bincount(s, minlength=k).double() / n
    return F, s, p


def test_maximum_over_w_is_the_closed_form_ermi():
    F, s, p = _soft()
    W = optimal_w(F, s, p)
    value = psi_hat(F, s, W, 1 / p.sqrt()).mean().item()
    assert value == pytest.approx(ermi(F.numpy(), s.numpy()), abs=1e-12)
    # W* is the maximiser: random perturbations only lower the (concave) objective
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        other = W + 0.05 * torch.randn(W.shape, generator=g, dtype=W.dtype)
        assert psi_hat(F, s, other, 1 / p.sqrt()).mean().item() < value


def test_ermi_through_w_is_zero_exactly_when_independent():
    k, l = 3, 2
    rows = torch.softmax(torch.randn(50, l, dtype=torch.float64, generator=torch.Generator().manual_seed(2)), 1)
    F = rows.repeat(k, 1)  # every group sees exactly the same predictions
    s = torch.arange(k).repeat_interleave(50)
    p = torch.full((k,), 1 / k, dtype=torch.float64)
    assert psi_hat(F, s, optimal_w(F, s, p), 1 / p.sqrt()).mean().item() == pytest.approx(0.0, abs=1e-12)
    F2, s2, p2 = _soft()
    assert psi_hat(F2, s2, optimal_w(F2, s2, p2), 1 / p2.sqrt()).mean().item() > 1e-3


def test_w_gradient_of_the_trainer_agrees_with_autograd():
    F, s, p = _soft(n=40, k=3, l=2)
    W = torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3), requires_grad=True)
    (want,) = torch.autograd.grad(psi_hat(F, s, W, 1 / p.sqrt()).sum(), W)
    onehot = torch.nn.functional.one_hot(s, 3).double()[None]
    cell_F = (onehot[0].T @ F)[None, :, None]  # Σ_rows onehot ⊗ F, shape (1, k, 1, l)
    got = batched._w_gradient(W.detach()[None, None, None], cell_F, (1 / p.sqrt())[None, None, None],
                             public=True, sensitive=True)
    torch.testing.assert_close(got[0, 0, 0], want)


def test_trainer_loss_is_psi_hat_plus_one():
    F, s, p = _soft(n=30, k=2, l=3)
    logits = torch.log(F)
    W = torch.randn(2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    u = W[s] / p.sqrt()[s, None]
    wsq = (W**2).sum(0).expand(30, 3)
    zero = torch.zeros(30, dtype=torch.float64)
    loss = fmodels.fermi_loss(logits, (torch.zeros(30, dtype=torch.long), 2 * u - wsq, zero, zero + 1))
    assert loss.item() == pytest.approx((psi_hat(F, s, W, 1 / p.sqrt()) + 1).sum().item(), rel=1e-12)
