"""Record-level releases read under replace-one of s (issue 26): the exact conversion and the group-privacy one.

A record-level release with bound C moves its output by at most C when one record is added or removed, so
changing one person's s (their record stays) moves it by at most 2C, and, under Poisson sampling, both
neighbours' outputs lie within C of the output without that person. The exact route re-accounts the same
event under REPLACE_ONE; these tests check it against the truth computed independently (closed form, or
the hockey-stick divergence of the actual pair of output distributions by quadrature), and check that
reading the record-level ε as is would understate it.
"""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dpfair.privacy import epsilon_of, pure_dp_event
from dpfair.privacy.accounting import replace_one_by_group_privacy, replace_one_equivalent


def _gaussian_epsilon(shift: float, sigma: float, delta: float) -> float:
    """ε at δ of the Gaussian mechanism whose two outputs differ by ``shift`` (Balle & Wang 2018, Thm 8)."""
    def excess(eps):
        return (norm.cdf(shift / (2 * sigma) - eps * sigma / shift)
                - math.exp(eps) * norm.cdf(-shift / (2 * sigma) - eps * sigma / shift) - delta)
    return brentq(excess, 0.0, 100.0, xtol=1e-12)


def test_a_record_level_gaussian_read_under_replace_one_has_its_sensitivity_doubled_and_is_never_below_the_truth():
    sigma, delta = 2.0, 1e-5
    event = dpa.GaussianDpEvent(sigma)
    assert replace_one_equivalent(event) == event
    exact = epsilon_of(replace_one_equivalent(event), delta, "sensitive")
    truth = _gaussian_epsilon(2.0, sigma, delta)  # two outputs within bound 1 of f(S∖i): 2 apart
    assert truth <= exact <= truth * 1.002 + 1e-4  # the PLD is pessimistic, within its discretisation
    assert epsilon_of(event, delta, "record") < truth  # the record-level ε as is understates it
    # group privacy bounds the same release, more loosely
    assert replace_one_by_group_privacy(event, delta) >= exact


def test_a_record_level_poisson_sampled_gaussian_read_under_replace_one_bounds_every_pair_of_neighbours():
    """The one-step mechanism's hockey-stick divergence, by quadrature, for outputs b, b' within 1 of f(S∖i)
    (the record's contribution has norm ≤ 1 either way): never above δ at the accountant's ε."""
    sigma, q, delta = 1.0, 0.3, 1e-3
    event = dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma))
    assert replace_one_equivalent(event) == event
    eps = epsilon_of(event, delta, "sensitive")
    step = 0.002
    x = np.arange(-12.0, 12.0 + step / 2, step)

    def density(centre):
        return (1 - q) * norm.pdf(x, 0.0, sigma) + q * norm.pdf(x, centre, sigma)

    def hockey_stick(p, r, e):
        return float(np.maximum(p - math.exp(e) * r, 0.0).sum() * step)

    centres = (-1.0, -0.5, 0.0, 0.5, 1.0)
    worst = max(hockey_stick(density(b), density(c), eps) for b in centres for c in centres)
    assert worst <= delta * (1 + 1e-4)  # quadrature error of this grid is far below 1e-4 of δ
    assert worst >= delta * 0.99  # b = −1, b' = +1 is the accountant's own pair: the bound is tight
    # reading the record-level ε as is would leave about three times δ uncovered
    assert hockey_stick(density(-1.0), density(1.0), epsilon_of(event, delta, "record")) > 2 * delta


def test_a_pure_record_level_release_costs_twice_its_epsilon_under_replace_one():
    converted = replace_one_equivalent(pure_dp_event(0.7))
    assert isinstance(converted, dpa.RandomizedResponseDpEvent)
    assert converted.noise_parameter == pytest.approx(pure_dp_event(1.4).noise_parameter, rel=1e-12)
    assert epsilon_of(converted, 1e-12, "sensitive") == pytest.approx(1.4, abs=2e-3)
    assert isinstance(replace_one_equivalent(pure_dp_event(math.inf)), dpa.NonPrivateDpEvent)


def test_composite_events_convert_part_by_part_and_uncovered_kinds_give_none():
    sgd = dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(2.0))
    composed = dpa.ComposedDpEvent([dpa.GaussianDpEvent(5.0), dpa.SelfComposedDpEvent(sgd, 20), pure_dp_event(0.3)])
    converted = replace_one_equivalent(composed)
    assert converted.events[:2] == composed.events[:2]
    assert converted.events[2].noise_parameter == pytest.approx(pure_dp_event(0.6).noise_parameter, rel=1e-12)
    run = dpa.ComposedDpEvent(composed.events[:2])  # (no randomized response: RDP has none under add/remove)
    runs = dpa.dp_event.RepeatAndSelectDpEvent(run, 3.0, 1.0)
    assert replace_one_equivalent(runs) == runs
    # the accountant composes the converted runs under REPLACE_ONE (on RDP, the only one with repeated runs)
    assert epsilon_of(runs, 1e-5, "record") < epsilon_of(replace_one_equivalent(runs), 1e-5, "sensitive") < 50
    for uncovered in (dpa.PoissonSampledDpEvent(0.1, dpa.LaplaceDpEvent(1.0)),
                      dpa.dp_event.DiscreteLaplaceDpEvent(1, 1.0), dpa.RandomizedResponseDpEvent(0.5, 3)):
        assert replace_one_equivalent(uncovered) is None
        assert replace_one_equivalent(dpa.ComposedDpEvent([dpa.GaussianDpEvent(1.0), uncovered])) is None


def test_group_privacy_holds_at_the_delta_asked_for():
    """(ε, δ') add/remove gives (2ε, (1 + e^ε)·δ') replace-one: the δ' chosen keeps the second within δ."""
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.LaplaceDpEvent(2.0)), 50)
    delta = 1e-5
    eps = replace_one_by_group_privacy(event, delta)
    # some δ' ≤ δ/(1 + e^(ε/2)) gives the add/remove ε/2: the record-level ε there is at most ε/2
    assert epsilon_of(event, delta / (1 + math.exp(eps / 2)), "record") <= eps / 2 + 1e-12
    assert eps >= 2 * epsilon_of(event, delta, "record")
    assert math.isinf(replace_one_by_group_privacy(dpa.NonPrivateDpEvent(), delta))


def test_equal_releases_compose_as_one_self_composition_with_the_same_epsilon():
    """A store's totals compose many equal release groups (every seed of a grid at one ε) through
    compose_releases: k equal events become one k-fold self-composition, which accounts the same releases."""
    from dpfair.privacy.accounting import compose_releases

    sigma, delta, k = 3.0, 1e-5, 9
    gaussian = dpa.GaussianDpEvent(sigma)
    sampled = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.2)), 50)
    merged = compose_releases([gaussian] * k + [sampled, sampled])
    assert merged == dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(gaussian, k), dpa.SelfComposedDpEvent(sampled, 2)])
    assert compose_releases([gaussian]) == dpa.ComposedDpEvent([gaussian])  # one release stays as it is
    # k Gaussians of σ are one Gaussian of σ/√k: the closed form bounds the merged accounting from below
    truth = _gaussian_epsilon(1.0, sigma / math.sqrt(k), delta)
    merged_gaussians = epsilon_of(compose_releases([gaussian] * k), delta, "record")
    assert truth <= merged_gaussians <= truth * 1.002 + 1e-4
    # and the merged event's ε is the one-by-one composition's, within the PLD's discretisation
    one_by_one = epsilon_of(dpa.ComposedDpEvent([gaussian] * k + [sampled, sampled]), delta, "record")
    assert epsilon_of(merged, delta, "record") == pytest.approx(one_by_one, rel=2e-3)
