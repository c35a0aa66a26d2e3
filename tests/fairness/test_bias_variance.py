"""FairDP's Theorem 1 terms, against hand computation."""

import numpy as np
import pytest

from dpfair.fairness.bias_variance import bias_variance_terms, clipping_bias, mean_excess_norm, noise_variance


def test_mean_excess_norm_by_hand():
    norms = [0.5, 1.0, 2.0, 4.0]
    # C = 1: (0 + 0 + 1 + 3) / 4 = 1; C = 3: 1/4; C = 5: 0
    np.testing.assert_allclose(mean_excess_norm(norms, [1.0, 3.0, 5.0]), [1.0, 0.25, 0.0])
    # a histogram is a weighted set of norms; negative (noisy) counts count as empty
    np.testing.assert_allclose(mean_excess_norm([1.0, 3.0, 9.0], 2.0, counts=[2, 2, -1]), [0.5])
    assert mean_excess_norm([1.0], 2.0, counts=[0.0])[0] == 0.0


def test_theorem_1_terms_by_hand():
    norms = np.array([0.5, 1.0, 2.0, 4.0])
    b = 1.0
    bias = clipping_bias(norms, 1.0, gradient_norm=0.3, learning_rate=0.1, smoothness=5.0)
    assert bias[0] == pytest.approx(2 * (1 + 1 / (0.1 * 5.0)) * 0.3 * b + b**2)
    var = noise_variance([1.0, 2.0], noise_multiplier=1.5, n_params=10, batch_size=50)
    np.testing.assert_allclose(var, 1.5**2 * np.array([1.0, 4.0]) * 10 / 50**2)
    # L = 1/μ by default: coefficient 4
    bias, _ = bias_variance_terms(norms, 1.0, noise_multiplier=1.0, n_params=1, batch_size=1, learning_rate=0.2,
                                  gradient_norm=0.5)
    assert bias[0] == pytest.approx(4 * 0.5 * 1.0 + 1.0)


def test_the_bias_falls_and_the_variance_rises_with_the_bound():
    norms = np.random.default_rng(0).lognormal(size=500)
    grid = np.geomspace(0.1, 20, 30)
    bias, var = bias_variance_terms(norms, grid, noise_multiplier=1.0, n_params=100, batch_size=256,
                                    learning_rate=0.1, gradient_norm=1.0)
    assert np.all(np.diff(bias) <= 0) and np.all(np.diff(var) > 0)
    best = grid[np.argmin(bias + var)]
    assert grid[0] < best < grid[-1]  # an interior optimum: the trade-off FairDP exploits


@pytest.mark.parametrize("kwargs, match", [
    (dict(norms=[-1.0], clip=1.0), "norms"),
    (dict(norms=[1.0], clip=0.0), "clip"),
    (dict(norms=[1.0, 2.0], clip=1.0, counts=[1.0]), "counts"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mean_excess_norm(**kwargs)
