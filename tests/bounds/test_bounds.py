"""Mangold et al.'s certificate pieces against brute force: margins, Lipschitz constants, tail bounds, distances."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import binom

from dpfair.bounds import (
    CERTIFIED_NOTIONS,
    chernoff_bound,
    confidence_margins,
    dpsgd_radius,
    fairness_gap_bound,
    fairness_levels,
    finite_sample_term,
    flip_probability,
    linear_lipschitz,
    markov_bound,
    module_lipschitz,
    normalized_margins,
    output_perturbation_radius,
    pointwise_lipschitz,
    refined_lipschitz,
)
from dpfair.fairness import fairness_coefficients
from dpfair.nn import make_model


def _data(seed=0, n=400, d=4, k=2, labels=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    s = rng.integers(0, k, n)
    w = rng.normal(size=(labels, d))
    y = np.argmax(X @ w.T + rng.normal(scale=1.0, size=(n, labels)) + 0.5 * s[:, None] * np.arange(labels), axis=1)
    return X, y, s


def _flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def _set_flat(model, vec):
    i = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(vec[i:i + p.numel()].reshape(p.shape))
            i += p.numel()


def test_confidence_margins():
    scores = np.array([[1.0, 3.0, 2.0], [0.5, 0.0, -1.0]])
    np.testing.assert_allclose(confidence_margins(scores, [1, 2]), [1.0, -1.5])
    np.testing.assert_allclose(confidence_margins(np.array([2.0, -1.0]), [1, 1]), [2.0, -1.0])
    with pytest.raises(ValueError, match="label codes"):
        confidence_margins(scores, [0, 3])


@pytest.mark.parametrize("labels", [2, 3])
def test_module_lipschitz_of_a_linear_model_is_exact(labels):
    """Binary: one logit, L = ‖(x, 1)‖; softmax h(x, y) = W_y·x + b_y: L = √2‖(x, 1)‖."""
    X, y, _ = _data(labels=labels, n=50)
    model = make_model("logistic", X.shape[1], labels, seed=0).double()
    lip = module_lipschitz(model, X, y)
    rows = np.hstack([X, np.ones((len(X), 1))])
    np.testing.assert_allclose(lip, linear_lipschitz(rows, labels, single_vector=labels == 2), rtol=1e-10)
    # finite differences: random directions never beat L; the worst direction attains it
    theta = _flat(model)
    scores = model(torch.as_tensor(X)).detach().numpy()
    rho = confidence_margins(scores, y)
    rng = np.random.default_rng(1)
    step = 1e-4
    for _ in range(20):
        u = torch.as_tensor(rng.normal(size=theta.numel()))
        _set_flat(model, theta + step * u / u.norm())
        moved = confidence_margins(model(torch.as_tensor(X)).detach().numpy(), y)
        assert np.all(np.abs(moved - rho) <= lip * step * (1 + 1e-8))
    _set_flat(model, theta)


def test_module_lipschitz_matches_finite_differences_for_an_mlp():
    """Local constant of a non-linear module: the directional derivative of ρ along ∇(h_y − h_y') equals it."""
    X, y, _ = _data(n=6)
    model = make_model("mlp", X.shape[1], 3, seed=0, hidden=(8,), activation="tanh").double()
    y = np.arange(6) % 3
    lip = module_lipschitz(model, X, y)
    theta = _flat(model)
    for i in range(len(X)):
        x = torch.as_tensor(X[i:i + 1])
        best = 0.0
        for other in set(range(3)) - {y[i]}:
            model.zero_grad()
            out = model(x)[0]
            (out[y[i]] - out[other]).backward()
            g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
            best = max(best, float(g.norm()))
        assert lip[i] == pytest.approx(best, rel=1e-8)
    _set_flat(model, theta)


def test_tail_bounds_order_and_values():
    rng = np.random.default_rng(3)
    for _ in range(50):
        r = rng.exponential(scale=rng.uniform(0.1, 3), size=200)
        d = rng.uniform(0.01, 2)
        exact = flip_probability(r, d)
        chern = chernoff_bound(r, d)
        markov = markov_bound(r, d)
        assert exact <= chernoff_bound(r, d, truncate=True) + 1e-12 <= chern + 2e-12
        assert chern <= markov + 1e-12  # Chernoff at t = 1/d is already below Markov
        assert markov_bound(r, d, truncate=True) <= markov + 1e-12
        assert chernoff_bound(r, d, truncate=True) == pytest.approx(exact, abs=1e-12)
        # the search finds the grid minimum over t
        grid = np.linspace(0, 60, 6001) / d
        brute = min(np.exp(t * d) * np.mean(np.exp(-t * r)) for t in grid)
        assert chern <= brute + 1e-9
        assert markov == pytest.approx(d * np.mean(1 / r))
    # a margin nothing can move (L = 0: r = ∞) never counts, and never makes a bound NaN
    r = np.array([0.5, 2.0, np.inf, np.inf])
    assert chernoff_bound(r, 1.0) <= markov_bound(r, 1.0) == pytest.approx((2 + 0.5) / 4)
    assert flip_probability(r, 1.0) == 0.25


def _random_linear(X, labels, rng):
    W = rng.normal(size=(labels, X.shape[1]))
    return W


@pytest.mark.parametrize("notion", CERTIFIED_NOTIONS)
@pytest.mark.parametrize("k,labels", [(2, 2), (3, 2), (3, 3)])
def test_gap_bound_holds_for_models_at_the_distance(notion, k, labels):
    """|F_k(h) − F_k(h')| never exceeds the certified bound for h' within d (random and adversarial moves)."""
    if notion == "demographic_parity" and labels > 2:
        pytest.skip("demographic parity is defined for binary labels")
    rng = np.random.default_rng(k * 10 + labels)
    X, y, s = _data(seed=k, n=300, k=k, labels=labels)
    W = _random_linear(X, labels, rng)
    margins = confidence_margins(X @ W.T, y)
    lip = linear_lipschitz(X, labels)
    ratios = normalized_margins(margins, lip)
    pos = {"positive_label": labels - 1} if notion == "equal_opportunity" else {}
    base = fairness_levels(notion, y, np.argmax(X @ W.T, axis=1), s, **pos)
    for d in (0.01, 0.05, 0.2):
        gap = fairness_gap_bound(ratios, y, s, d, notion, **pos)
        assert np.all(gap.bound <= gap.chernoff + 1e-12) and np.all(gap.chernoff <= gap.markov + 1e-12)
        np.testing.assert_allclose(np.minimum(gap.markov, 10), np.minimum(gap.markov, 10))
        assert np.all(gap.markov <= gap.lipschitz * d + 1e-12)  # capped Markov ≤ χ_k d
        worst = np.zeros_like(gap.bound)
        for trial in range(200):
            U = rng.normal(size=W.shape)
            if trial % 2:  # push every row toward its nearest flip
                U = -np.sign(margins)[:, None, None] * X[:, None, :] * np.eye(labels)[y][:, :, None]
                U = U.sum(axis=0) + 0.1 * rng.normal(size=W.shape)
            moved = W + d * U / np.linalg.norm(U)
            values = fairness_levels(notion, y, np.argmax(X @ moved.T, axis=1), s, **pos)
            worst = np.maximum(worst, np.abs(values - base))
        assert np.all(worst <= gap.bound + 1e-12)


def test_pointwise_lipschitz_is_the_coefficient_weighted_mean():
    X, y, s = _data(seed=5, k=3)
    W = np.random.default_rng(0).normal(size=(2, X.shape[1]))
    ratios = normalized_margins(confidence_margins(X @ W.T, y), linear_lipschitz(X, 2))
    chi = pointwise_lipschitz(ratios, y, s, "accuracy_parity")
    p = np.bincount(s) / len(s)
    inv = np.array([np.mean(1 / ratios[s == r]) for r in range(3)])
    brute = [(1 - p[r]) * inv[r] + sum(p[q] * inv[q] for q in range(3) if q != r) for r in range(3)]
    np.testing.assert_allclose(chi, brute, rtol=1e-12)
    # Corollary 3.3's printed constant E(L/|ρ|) + E(L/|ρ| | S=r) is never smaller
    assert np.all(chi <= np.mean(1 / ratios) + inv + 1e-12)
    C = fairness_coefficients("equalized_odds", y, s).C
    chi_eo = pointwise_lipschitz(ratios, y, s, "equalized_odds")
    cells = [np.mean(1 / ratios[(y == c) & (s == r)]) for c in (0, 1) for r in range(3)]
    np.testing.assert_allclose(chi_eo, np.abs(C) @ cells, rtol=1e-12)


def test_output_perturbation_radius_covers_the_noise():
    """P(‖N(0, σ²I_p)‖ ≤ d) = 1 − ζ exactly for the chi-square radius; Lemma 4.1's is larger."""
    rng = np.random.default_rng(0)
    sigma, p, prob, draws = 0.3, 40, 0.9, 4000
    d = output_perturbation_radius(sigma, p, prob)
    inside = int(np.sum(np.linalg.norm(rng.normal(scale=sigma, size=(draws, p)), axis=1) <= d))
    lo, hi = binom.ppf([0.0005, 0.9995], draws, prob)
    assert lo <= inside <= hi
    assert output_perturbation_radius(sigma, p, prob, method="lemma_4_1") > d
    with pytest.raises(ValueError, match="probability"):
        output_perturbation_radius(sigma, p, 1.0)


def test_dpsgd_radius_assumptions_and_monotonicity():
    kw = dict(noise_multiplier=1.0, clip=2.0, lipschitz=1.5, batch_size=100, n_params=10, steps=1000,
              learning_rate=0.1, strong_convexity=0.1, smoothness=1.0, initial_distance=5.0)
    d = dpsgd_radius(**kw)
    assert dpsgd_radius(**{**kw, "noise_multiplier": 2.0}) > d
    assert dpsgd_radius(**{**kw, "probability": 0.999}) > d
    with pytest.raises(ValueError, match="clipping"):
        dpsgd_radius(**{**kw, "clip": 1.0})
    with pytest.raises(ValueError, match="learning rate"):
        dpsgd_radius(**{**kw, "learning_rate": 2.0})
    # the closed form: ((1 − γμ)^T D0² + γV/μ)/ζ
    V = 1.5**2 / 100 + 10 * 4.0 / 100**2
    assert d == pytest.approx(math.sqrt(((1 - 0.01) ** 1000 * 25 + 0.1 * V / 0.1) / 0.01))


def test_finite_sample_term():
    C = np.array([[0.5, -0.5], [-0.5, 0.5]])
    small = finite_sample_term(C, [0.5, 0.5], 10_000, 0.05)
    assert np.all(finite_sample_term(C, [0.5, 0.5], 100_000, 0.05) < small)
    assert np.all(finite_sample_term(C, [0.5, 0.5], 10_000, 0.01) > small)
    with pytest.raises(ValueError, match="evaluation rows"):
        finite_sample_term(C, [0.99, 0.01], 100, 0.05)


def test_refined_lipschitz_is_tighter_and_valid():
    X, y, _ = _data(seed=2, n=100)
    rng = np.random.default_rng(0)
    w, w2 = rng.normal(size=X.shape[1]), rng.normal(size=X.shape[1])
    refined = refined_lipschitz(X, w, w2)
    assert np.all(refined <= np.linalg.norm(X, axis=1) + 1e-12)
    # exact along the segment between the two models: |Δρ| = refined · ‖Δw‖
    delta = np.abs(X @ (w - w2))
    np.testing.assert_allclose(delta, refined * np.linalg.norm(w - w2), rtol=1e-12)
