import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import NeighboringRelation
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from dpfair.privacy.accounting import PLD_SCALE_FROM, _pld_at_scale
from dpfair.privacy import (
    PrivacyLedger,
    PrivacyUnit,
    dpsgd_event,
    epsilon_for_noise,
    epsilon_of,
    gaussian_event,
    laplace_event,
    make_accountant,
    noise_for_epsilon,
    pure_dp_event,
)


def test_privacy_units_pin_their_neighbouring_relation():
    assert PrivacyUnit("sensitive").relation is NeighboringRelation.REPLACE_ONE
    assert PrivacyUnit("record").relation is NeighboringRelation.ADD_OR_REMOVE_ONE


def test_bad_privacy_unit_names_the_valid_ones():
    with pytest.raises(ValueError, match="privacy_unit must be one of 'sensitive', 'record'"):
        epsilon_of(dpa.GaussianDpEvent(1.0), 1e-5, "people")


@pytest.mark.parametrize("relation", [NeighboringRelation.ADD_OR_REMOVE_ONE, NeighboringRelation.REPLACE_ONE])
@pytest.mark.parametrize("q,sigma,steps", [(0.01, 1.1, 1000), (0.03, 1.0, 6600), (0.1, 4.0, 200)])
def test_pld_matches_dp_accounting_called_directly(relation, q, sigma, steps):
    event = dpsgd_event(sigma, q, steps)
    direct = pld_privacy_accountant.PLDAccountant(relation)
    direct.compose(event)
    ours, upstream = epsilon_of(event, 1e-6, relation, "pld"), direct.get_epsilon(1e-6)
    if upstream <= PLD_SCALE_FROM:  # upstream's own discretisation: the same number
        assert ours == pytest.approx(upstream, rel=1e-12)
    else:  # a coarser pessimistic discretisation: never below upstream, within 0.1 %
        assert upstream <= ours <= upstream * 1.001


def test_large_epsilon_is_accounted_fast_and_never_below_the_fine_pld():
    """ε ≈ 1000 (issue 13, item 8): the interval scales with ε, so one accounting takes a coarse and a fine pass
    of a few thousand points instead of 10⁷ (26 s at a fixed 1e-4); the result stays an upper bound."""
    event = dpsgd_event(0.078, 0.03, 100)
    fine = pld_privacy_accountant.PLDAccountant(NeighboringRelation.ADD_OR_REMOVE_ONE, 1e-3)
    fine.compose(event)
    ours = epsilon_of(event, 1e-5, "record", "pld")
    assert fine.get_epsilon(1e-5) <= ours <= fine.get_epsilon(1e-5) * 1.001
    assert _pld_at_scale(event, 1e-5, NeighboringRelation.ADD_OR_REMOVE_ONE)._value_discretization_interval > 0.05


@pytest.mark.parametrize("q,sigma,steps", [(0.01, 1.1, 1000), (0.1, 4.0, 200)])
def test_rdp_matches_dp_accounting_called_directly(q, sigma, steps):
    event = dpsgd_event(sigma, q, steps)
    direct = rdp_privacy_accountant.RdpAccountant()
    direct.compose(event)
    assert epsilon_of(event, 1e-5, "record", "rdp") == pytest.approx(direct.get_epsilon(1e-5), rel=1e-12)


def test_replace_one_costs_nearly_twice_add_remove():
    # The DP-FERMI issue's figures: PLD, q = 0.03, sigma = 1, 6,600 steps, delta = 1e-9.
    replace = epsilon_for_noise(1.0, 0.03, 6600, 1e-9, "sensitive")
    add_remove = epsilon_for_noise(1.0, 0.03, 6600, 1e-9, "record")
    assert 40 < replace < 46 and 23 < add_remove < 26
    assert 1.6 < replace / add_remove < 2.0


@pytest.mark.parametrize("mechanism", [dpa.GaussianDpEvent, dpa.LaplaceDpEvent])
def test_unsampled_replace_one_is_add_remove_with_twice_the_bound_on_both_accountants(mechanism):
    """dp_accounting's own RDP accountant ignores REPLACE_ONE for an unsampled Gaussian
    (it would report the add/remove ε) and its PLD accountant refuses a Laplace event;
    ours treat both as a shift of ±bound, i.e. add/remove with sensitivity 2·bound."""
    noise = 3.0
    event = dpa.SelfComposedDpEvent(mechanism(noise), 20)
    half = dpa.SelfComposedDpEvent(mechanism(noise / 2), 20)
    for acc in ("pld", "rdp"):
        assert epsilon_of(event, 1e-6, "sensitive", acc) == pytest.approx(
            epsilon_of(half, 1e-6, "record", acc), rel=1e-9
        )
    pld, rdp = (epsilon_of(event, 1e-6, "sensitive", a) for a in ("pld", "rdp"))
    assert pld <= rdp <= 1.15 * pld


def test_pure_laplace_composition_is_bounded_by_basic_composition():
    # k Laplace releases with scale b = bound/eps0 are (k·eps0)-DP; PLD at small delta is below that.
    eps0, k = 0.5, 10
    eps = epsilon_of(dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(1 / eps0), k), 1e-12, "record", "pld")
    assert eps <= k * eps0 + 1e-3
    single = epsilon_of(dpa.LaplaceDpEvent(1 / eps0), 1e-12, "record", "pld")
    assert single == pytest.approx(eps0, abs=2e-3)


def test_single_gaussian_matches_the_analytic_gaussian_mechanism():
    # Balle & Wang (2018): delta(eps) = Phi(1/(2s) - eps*s) - e^eps Phi(-1/(2s) - eps*s), s = sigma.
    from scipy.stats import norm

    sigma, delta = 2.0, 1e-5
    eps = epsilon_of(dpa.GaussianDpEvent(sigma), delta, "record", "pld")
    exact = norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * norm.cdf(-1 / (2 * sigma) - eps * sigma)
    assert exact == pytest.approx(delta, rel=0.02)


@pytest.mark.parametrize("q,sigma,steps,delta", [(256 / 60000, 1.1, 60 * 234, 1e-5), (0.01, 0.8, 5000, 1e-5)])
def test_rdp_agrees_with_opacus_rdp_and_pld_is_tighter(q, sigma, steps, delta):
    opacus_acc = pytest.importorskip("opacus.accountants")
    ref = opacus_acc.RDPAccountant()
    ref.history = [(sigma, q, steps)]
    eps_opacus = ref.get_epsilon(delta)
    eps_rdp = epsilon_for_noise(sigma, q, steps, delta, "record", "rdp")
    eps_pld = epsilon_for_noise(sigma, q, steps, delta, "record", "pld")
    # Different grids of Renyi orders: agreement within a few percent, ours never looser.
    assert eps_rdp == pytest.approx(eps_opacus, rel=0.03)
    assert eps_pld < eps_rdp
    prv = opacus_acc.PRVAccountant()
    prv.history = [(sigma, q, steps)]
    assert eps_pld == pytest.approx(prv.get_epsilon(delta), rel=0.02)


@pytest.mark.parametrize("unit", ["record", "sensitive"])
@pytest.mark.parametrize("target,q,steps,delta", [(1.0, 1024 / 34000, 6640, 1 / 34000**2), (0.5, 0.01, 1000, 1e-5),
                                                  (9.0, 0.05, 2000, 1e-6)])
def test_calibrated_noise_spends_at_most_and_within_one_percent_of_target(unit, target, q, steps, delta):
    sigma = noise_for_epsilon(target, delta, q, steps, unit)
    eps = epsilon_for_noise(sigma, q, steps, delta, unit)
    assert 0.99 * target <= eps <= target


def test_calibration_reaches_an_epsilon_below_what_rdp_orders_can_certify():
    """ε = 1e-3 for one Gaussian release: RDP's finite orders stop near 0.1, PLD calibrates it (σ ≈ √(2 ln(1.25/δ))/ε)."""
    sigma = noise_for_epsilon(1e-3, 1e-10, 1.0, 1, "record")
    assert 0.99e-3 <= epsilon_for_noise(sigma, 1.0, 1, 1e-10, "record") <= 1e-3
    assert sigma < math.sqrt(2 * math.log(1.25 / 1e-10)) / 1e-3


def test_calibration_with_a_large_delta_where_epsilon_reaches_zero():
    """δ = 0.5 lets ε fall to exactly 0 at finite noise: calibration must not take log(0) (issue 13)."""
    sigma = noise_for_epsilon(0.05, 0.5, 1.0, 1, "record")
    assert epsilon_for_noise(sigma, 1.0, 1, 0.5, "record") <= 0.05


def test_calibration_of_the_issue_example_adult_at_eps_1():
    n = 34_000
    q, steps = 1024 / n, int(200 * n / 1024)
    sigma = noise_for_epsilon(1.0, 1 / n**2, q, steps, "sensitive")
    assert 26.0 < sigma < 29.0


@pytest.mark.parametrize("kwargs,match", [
    (dict(target_epsilon=0.0), "epsilon must be > 0"),
    (dict(target_epsilon=-1.0), "epsilon must be > 0"),
    (dict(delta=0.0), "delta must lie strictly between 0 and 1"),
    (dict(delta=1.5), "delta must lie strictly between 0 and 1"),
    (dict(sampling_probability=1.5), "sampling_probability must lie in"),
    (dict(steps=0), "steps must be > 0"),
])
def test_calibration_rejects_bad_budgets(kwargs, match):
    args = dict(target_epsilon=1.0, delta=1e-5, sampling_probability=0.01, steps=100)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        noise_for_epsilon(**args)


def test_ledger_run_length_encodes_and_composes():
    ledger = PrivacyLedger("record")
    for _ in range(500):
        ledger.record(gaussian_event(1.2, 0.02), "step")
    ledger.record(laplace_event(10.0), "counts")
    assert [(e.label, e.count) for e in ledger.entries] == [("step", 500), ("counts", 1)]
    direct = pld_privacy_accountant.PLDAccountant()
    direct.compose(dpa.SelfComposedDpEvent(gaussian_event(1.2, 0.02), 500))
    direct.compose(laplace_event(10.0))
    assert ledger.epsilon(1e-5) == pytest.approx(direct.get_epsilon(1e-5), rel=1e-12)
    assert ledger.to_records()[0] == {"label": "step", "mechanism": "gaussian", "noise_multiplier": 1.2,
                                      "sampling_probability": 0.02, "count": 500}


def test_empty_ledger_spends_nothing_and_noiseless_release_spends_everything():
    assert PrivacyLedger("record").epsilon(1e-5) == 0.0
    ledger = PrivacyLedger("sensitive")
    ledger.record(gaussian_event(0.0, 0.1), "step")
    assert np.isinf(ledger.epsilon(1e-5))


def test_self_composed_randomized_response_counts_every_release():
    """dp_accounting's PLD accountant composes a RandomizedResponseDpEvent once whatever its count."""
    import dp_accounting as dpa

    from dpfair.privacy import epsilon_of

    rr = dpa.RandomizedResponseDpEvent(0.5, 2)
    once = epsilon_of(rr, 1e-6, "sensitive")
    four = epsilon_of(dpa.SelfComposedDpEvent(rr, 4), 1e-6, "sensitive")
    assert four == pytest.approx(epsilon_of(dpa.ComposedDpEvent([rr] * 4), 1e-6, "sensitive"), rel=1e-6)
    assert four > 3 * once


def test_a_pure_dp_event_is_accounted_alike_under_both_relations():
    # binary randomized response with ε is the dominating pair of any pure ε-DP mechanism, whatever the
    # neighbouring relation (secure_mode's discrete Laplace releases are recorded so under add/remove too)
    for eps in (0.3, 1.0, 2.5):
        spent = {unit: epsilon_of(pure_dp_event(eps), 1e-6, unit) for unit in ("record", "sensitive")}
        assert spent["record"] == pytest.approx(spent["sensitive"]) == pytest.approx(eps, abs=1e-3)
    assert not make_accountant("pld", "record").supports(dpa.RandomizedResponseDpEvent(0.5, 3))


def test_ledgers_of_several_fits_combine_into_one_spend():
    a, b = PrivacyLedger("sensitive"), PrivacyLedger("sensitive")
    a.record(gaussian_event(2.0), "counts")
    b.record(dpsgd_event(1.5, 0.05, 100), "steps")
    both = PrivacyLedger.combined([a, b])
    eps = [ledger.epsilon(1e-6) for ledger in (a, b, both)]
    assert max(eps[:2]) < eps[2] <= eps[0] + eps[1]
    assert len(a) == 1 and len(both) == 2  # the inputs are left as they were
    with pytest.raises(ValueError, match="different neighbouring relations"):
        PrivacyLedger.combined([a, PrivacyLedger("record")])
