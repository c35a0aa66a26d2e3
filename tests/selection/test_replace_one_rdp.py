"""Rényi DP of the Poisson-sampled Gaussian under replace-one (dpfair.privacy.subsampled_rdp) and its use by the RDP
accountant: exact where closed forms exist, never below the PLD's ε, and what private selection composes."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.rdp import rdp_privacy_accountant as upstream
from scipy import integrate

from dpfair.privacy import epsilon_of, make_accountant
from dpfair.privacy.subsampled_rdp import replace_one_sampled_gaussian_rdp

ORDERS = [1.5, 2.0, 3.0, 8.0, 32.0, 128.0]


def _quadrature(sigma, q, alpha):
    """D_α of dp_accounting's replace-one pair by adaptive quadrature, in log space (an independent computation)."""
    t = 1.0 / sigma

    def integrand(x):
        log_a = np.logaddexp(math.log1p(-q), math.log(q) - t * x - t * t / 2)
        log_b = np.logaddexp(math.log1p(-q), math.log(q) + t * x - t * t / 2)
        return math.exp(-x * x / 2 + alpha * log_a + (1 - alpha) * log_b) / math.sqrt(2 * math.pi)

    total, _ = integrate.quad(integrand, -alpha * t - 40, 40, points=[-alpha * t, -(alpha - 1) * t, 0.0],
                              epsabs=0, epsrel=1e-12, limit=400)
    return math.log(total) / (alpha - 1)


@pytest.mark.parametrize("sigma,q,alpha", [(1.0, 0.03, 2.0), (3.0, 0.01, 10.0), (0.8, 0.2, 5.5), (2.0, 0.05, 1.1)])
def test_divergence_matches_adaptive_quadrature(sigma, q, alpha):
    ours = replace_one_sampled_gaussian_rdp(sigma, q, [alpha])[0]
    assert ours == pytest.approx(_quadrature(sigma, q, alpha), rel=1e-8)


@pytest.mark.parametrize("sigma", [0.7, 2.0, 10.0])
def test_full_sampling_is_the_gaussian_with_twice_the_bound_and_no_sampling_costs_nothing(sigma):
    """q = 1: D_α = 2α/σ² (N(−1, σ²) against N(1, σ²)), the limit as q → 1 (at low orders: at high ones a
    mixture weight of 1e-9 still bounds the likelihood ratio); every q stays below it; q = 0 releases nothing."""
    exact = 2 * np.asarray(ORDERS) / sigma**2
    assert np.allclose(replace_one_sampled_gaussian_rdp(sigma, 1.0, ORDERS), exact, rtol=1e-12)
    assert np.allclose(replace_one_sampled_gaussian_rdp(sigma, 1 - 1e-9, ORDERS[:3]), exact[:3], rtol=1e-4)
    below = replace_one_sampled_gaussian_rdp(sigma, 0.3, ORDERS)
    assert np.all(below <= exact) and np.all(np.diff(below) > 0)
    assert np.all(replace_one_sampled_gaussian_rdp(sigma, 0.0, ORDERS) == 0)
    assert np.all(np.isinf(replace_one_sampled_gaussian_rdp(0.0, 0.1, ORDERS)))


def test_the_same_integrator_reproduces_dp_accountings_add_remove_divergences_at_integer_orders():
    """The add/remove pair, (1 − q)N(0) + qN(1) against N(0), by the module's rule: dp_accounting's exact values
    at integer orders (at fractional ones upstream gives an upper bound)."""
    sigma, q, orders = 2.0, 0.03, np.array([2.0, 3.0, 5.0, 10.0, 20.0, 50.0])
    t, step = 1 / sigma, 0.02
    ours = []
    for alpha in orders:
        x = np.arange(-40 - alpha * t, alpha * t + 40, step)
        log_a = np.logaddexp(math.log1p(-q), math.log(q) + t * x - t * t / 2)
        ours.append((np.logaddexp.reduce(-x * x / 2 + alpha * log_a) - np.logaddexp.reduce(-x * x / 2))
                    / (alpha - 1))
    direct = upstream._compute_rdp_poisson_subsampled_gaussian(q, sigma, orders)
    assert np.allclose(ours, direct, rtol=1e-9)


@pytest.mark.parametrize("sigma,q,steps", [(1.0, 0.03, 1000), (3.0, 0.03, 1650), (20.0, 0.03, 1650), (1.2, 0.1, 200)])
def test_rdp_epsilon_is_never_below_the_pld_of_the_same_pair(sigma, q, steps):
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    rdp, pld = epsilon_of(event, 1e-6, "sensitive", "rdp"), epsilon_of(event, 1e-6, "sensitive", "pld")
    assert pld <= rdp <= 1.2 * pld


def test_rdp_accountant_composes_the_sensitive_units_sampled_releases_and_repeated_runs():
    relation = NeighboringRelation.REPLACE_ONE
    fit = dpa.ComposedDpEvent([dpa.GaussianDpEvent(20.0),
                               dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.03, dpa.GaussianDpEvent(8.0)), 1650)])
    assert not upstream.RdpAccountant(neighboring_relation=relation).supports(fit)  # upstream has no bound
    assert make_accountant("rdp", relation).supports(fit)
    once = epsilon_of(fit, 1e-6, "sensitive", "rdp")
    repeated = [epsilon_of(dp_event.RepeatAndSelectDpEvent(fit, mean, 1.0), 1e-6, "sensitive", "rdp")
                for mean in (2.0, 10.0, 50.0)]
    assert once < repeated[0] < repeated[1] < repeated[2]
    # the PLD accountant has no bound for repeated runs: it defers to RDP instead of refusing
    assert epsilon_of(dp_event.RepeatAndSelectDpEvent(fit, 10.0, 1.0), 1e-6, "sensitive", "pld") == repeated[1]
