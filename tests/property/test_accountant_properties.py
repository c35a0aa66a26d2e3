"""The accountant on random parameters (Hypothesis): every event type, both privacy units, both accountants.

Complements ``test_accounting_invariants.py`` (PLD monotonicity of DP-SGD in σ, q and T under the record unit,
two-event order, calibration to 1 %): the pure-DP, Laplace and randomized-response events against their closed
forms, the replace-one conversions, order-free and monotone composition of mixed ledgers, run-length encoding,
and calibration to the tolerance the module states (``CALIBRATION_RTOL``) under the sensitive unit and for plans.
PLD calls are slow: parameters stay moderate and examples few.
"""

import math

import dp_accounting as dpa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.privacy import (
    Part,
    PrivacyLedger,
    PrivacyPlan,
    epsilon_for_noise,
    epsilon_of,
    gaussian_event,
    keep_probability,
    laplace_event,
    ledger_totals,
    noise_for_epsilon,
    pure_dp_event,
    randomized_response_event,
)
from dpfair.privacy.accounting import PLD_DISCRETIZATION
from dpfair.privacy.calibration import CALIBRATION_RTOL

CHEAP = settings(max_examples=25, deadline=None, derandomize=True)  # closed forms, pure events: milliseconds
SOME = settings(max_examples=10, deadline=None, derandomize=True)  # Laplace / Gaussian PLDs, RDP: ~0.05-0.3 s
FEW = settings(max_examples=6, deadline=None, derandomize=True)  # calibrations on cheap accountants / events
PLD = settings(max_examples=6, deadline=None, derandomize=True)  # ledgers with Poisson-sampled Gaussian steps
CALIBRATION = settings(max_examples=2, deadline=None, derandomize=True)  # a search over ~10 sampled PLDs

units = st.sampled_from(["record", "sensitive"])
deltas = st.sampled_from([1e-9, 1e-6, 1e-5, 1e-3])
def slack(epsilon: float) -> float:
    """The PLD rounds each privacy loss up by at most one discretisation interval per composed release; the
    interval is PLD_DISCRETIZATION, scaled by ε (read off a coarse pass, hence the margin) above PLD_SCALE_FROM."""
    return PLD_DISCRETIZATION * max(1.0, 1.01 * epsilon + 0.1)


# ---- single events against their closed forms -----------------------------------------------------------------

@SOME
@given(st.floats(0.5, 10.0), st.floats(1.05, 3.0), deltas)
def test_laplace_costs_at_most_its_pure_epsilon_and_replace_one_doubles_the_distance(b, factor, delta):
    """Laplace with multiplier b (scale / bound) is (1/b)-DP under add/remove (neighbours' sums differ by one
    bound) and (2/b)-DP under replace-one (they differ by twice the bound): its ε is at most that at every δ, the
    replace-one ε is exactly the add/remove ε of multiplier b/2 (the conversion of workaround 2), and more noise
    never costs more."""
    record, sensitive = epsilon_of(laplace_event(b), delta, "record"), epsilon_of(laplace_event(b), delta, "sensitive")
    assert record <= 1 / b + slack(1 / b) and sensitive <= 2 / b + slack(2 / b)
    assert sensitive == pytest.approx(epsilon_of(laplace_event(b / 2), delta, "record"), rel=1e-12)
    for unit, eps in (("record", record), ("sensitive", sensitive)):
        assert epsilon_of(laplace_event(b * factor), delta, unit) <= eps + 1e-12


@SOME
@given(st.floats(2.0, 8.0), st.integers(1, 4), deltas, st.sampled_from(["pld", "rdp"]))
def test_unsampled_gaussian_under_replace_one_is_add_remove_at_half_the_multiplier(sigma, count, delta, accountant):
    """Without sampling, two replace-one neighbours' sums differ by up to 2·bound, so T Gaussian releases of
    multiplier σ cost what they cost under add/remove with σ/2 — on both accountants (the RDP one ignores
    REPLACE_ONE upstream: workaround 1) and through self-composition."""
    event = dpa.SelfComposedDpEvent(gaussian_event(sigma), count)
    half = dpa.SelfComposedDpEvent(gaussian_event(sigma / 2), count)
    assert epsilon_of(event, delta, "sensitive", accountant) == pytest.approx(
        epsilon_of(half, delta, "record", accountant), rel=1e-6)  # two PLD paths: ~1e-9 apart at δ = 1e-9


@CHEAP
@given(st.floats(0.05, 6.0), st.integers(1, 6), deltas, units)
def test_a_pure_event_costs_its_epsilon_and_counts_every_repetition(eps, count, delta, unit):
    """pure_dp_event(ε) is binary randomized response with ε, whose privacy loss is ±ε: alone it spends
    ε + log(1 − δ/π) ∈ [ε + log(1 − 2δ), ε] at δ (π = e^ε/(1+e^ε) ≥ 1/2), under either unit (the dominating pair
    of every ε-DP mechanism). Repeated c times it spends at most c·ε (basic composition) and each repetition
    costs something (upstream's PLD composes a randomized response once whatever its count: workaround 3)."""
    one = epsilon_of(pure_dp_event(eps), delta, unit)
    assert eps + math.log1p(-2 * delta) - 1e-9 <= one <= eps + slack(eps)
    spent = epsilon_of(dpa.SelfComposedDpEvent(pure_dp_event(eps), count), delta, unit)
    more = epsilon_of(dpa.SelfComposedDpEvent(pure_dp_event(eps), count + 1), delta, unit)
    assert spent <= count * (eps + slack(count * eps))
    assert more > spent


@CHEAP
@given(st.floats(0.05, 6.0), st.integers(2, 8), deltas)
def test_randomized_response_event_is_the_mechanism_release_runs(eps, k, delta):
    """Release.randomize keeps the true value with probability π = keep_probability(ε, k) and otherwise reports one
    of the k − 1 others uniformly: the likelihood ratio π / ((1 − π)/(k − 1)) is e^ε. The recorded event (uniform
    output with probability p) keeps the value with probability 1 − p + p/k, which must be π. Its ε under
    replace-one is then ε + log(1 − δ/π) ∈ [ε + log(1 − kδ), ε]."""
    pi = keep_probability(eps, k)
    assert pi / ((1 - pi) / (k - 1)) == pytest.approx(math.exp(eps), rel=1e-9)
    event = randomized_response_event(eps, k)
    p = event.noise_parameter
    assert 0.0 <= p <= 1.0 and event.num_buckets == k
    assert 1 - p + p / k == pytest.approx(pi, rel=1e-12)
    spent = epsilon_of(event, delta, "sensitive")
    assert eps + math.log1p(-k * delta) - 1e-9 <= spent <= eps + slack(eps)


# ---- ledgers of mixed events ------------------------------------------------------------------------------------

def _event(kind, x, count):
    """One ledger line from a drawn kind and parameter x ∈ [0, 1] (moderate parameters keep the PLDs quick)."""
    if kind == "gaussian":
        return dpa.SelfComposedDpEvent(gaussian_event(1.0 + 3 * x, 0.01 + 0.04 * x), count * 5)
    if kind == "laplace":
        return laplace_event(1.0 + 9 * x)
    return pure_dp_event(0.05 + x)  # binary randomized response / exponential mechanism


entries = st.lists(st.tuples(st.sampled_from(["gaussian", "laplace", "pure"]), st.floats(0.0, 1.0),
                             st.integers(1, 4)), min_size=2, max_size=4)


def _ledger(unit, lines, order=None):
    ledger = PrivacyLedger(unit)
    for i in order if order is not None else range(len(lines)):
        kind, x, count = lines[i]
        ledger.record(_event(kind, x, count), f"{kind}{i}", count=1 if kind == "gaussian" else count)
    return ledger


@PLD
@given(entries.flatmap(lambda lines: st.tuples(st.just(lines), st.permutations(range(len(lines))))), units)
def test_the_order_of_releases_does_not_change_epsilon(lines_and_order, unit):
    """Composition is commutative: a ledger of Gaussian steps, Laplace releases and pure-DP choices spends the same
    ε in any order, under either unit (the plan check relies on it: PrivacyPlan.matches ignores order)."""
    lines, order = lines_and_order
    a, b = _ledger(unit, lines), _ledger(unit, lines, order)
    assert ledger_totals(a) == ledger_totals(b)
    assert a.epsilon(1e-5) == pytest.approx(b.epsilon(1e-5), rel=1e-9, abs=1e-9)


@PLD
@given(entries, st.integers(1, 3), units)
def test_recording_more_never_spends_less_nor_more_than_the_parts(lines, split, unit):
    """For ledgers A and B on the same data: ε(A) ≤ ε(A then B) (ignoring B's output is post-processing), and
    ε(A then B) at δ is at most ε_A(δ/2) + ε_B(δ/2) (basic composition), up to the PLD's rounding of each
    composed release."""
    split = min(split, len(lines) - 1)
    a, b, both = _ledger(unit, lines[:split]), _ledger(unit, lines[split:]), _ledger(unit, lines)
    releases = sum(count * (5 if kind == "gaussian" else 1) for kind, _, count in lines)
    delta = 1e-5
    total = both.epsilon(delta)
    assert a.epsilon(delta) <= total + 1e-9 and b.epsilon(delta) <= total + 1e-9
    assert total <= a.epsilon(delta / 2) + b.epsilon(delta / 2) + releases * slack(total)


@CHEAP
@given(st.sampled_from(["laplace", "pure"]), st.floats(0.0, 1.0), st.integers(2, 5), units)
def test_run_length_encoding_and_combining_ledgers_change_nothing(kind, x, count, unit):
    """A ledger stores c consecutive identical releases as one line of count c (self-composed by FFT); c lines
    that cannot merge (alternating labels, composed one by one) and PrivacyLedger.combined of c one-line ledgers
    hold the same releases and must spend the same ε."""
    event = _event(kind, x, 1)
    encoded = PrivacyLedger(unit)
    encoded.record(event, "x", count=count)
    assert len(encoded) == 1
    separate = PrivacyLedger(unit)
    for i in range(count):
        separate.record(event, "ab"[i % 2])
    assert len(separate) == count
    singles = []
    for _ in range(count):
        singles.append(PrivacyLedger(unit))
        singles[-1].record(event, "x")
    combined = PrivacyLedger.combined(singles)
    assert ledger_totals(combined) == ledger_totals(encoded)
    eps = encoded.epsilon(1e-5)
    assert separate.epsilon(1e-5) == pytest.approx(eps, rel=1e-9)
    assert combined.epsilon(1e-5) == pytest.approx(eps, rel=1e-9)


# ---- calibration ------------------------------------------------------------------------------------------------

@SOME
@given(st.floats(0.5, 5.0), st.floats(1.05, 2.0), st.floats(0.005, 0.1), st.floats(1.05, 3.0), st.integers(10, 300),
       st.integers(1, 200))
def test_rdp_epsilon_is_monotone_in_every_parameter(sigma, more_noise, q, more_rate, steps, more_steps):
    """On the RDP accountant too (the cheap one that brackets every PLD calibration): ε is non-increasing in σ and
    non-decreasing in the sampling rate and the number of steps."""
    eps = epsilon_for_noise(sigma, q, steps, 1e-5, accountant="rdp")
    assert epsilon_for_noise(sigma * more_noise, q, steps, 1e-5, accountant="rdp") <= eps + 1e-12
    assert epsilon_for_noise(sigma, min(1.0, q * more_rate), steps, 1e-5, accountant="rdp") >= eps - 1e-12
    assert epsilon_for_noise(sigma, q, steps + more_steps, 1e-5, accountant="rdp") >= eps - 1e-12


@FEW
@given(st.floats(0.3, 8.0), st.floats(1.02, 2.0), st.floats(0.005, 0.1), st.integers(10, 300))
def test_a_larger_budget_never_needs_more_noise(target, factor, q, steps):
    """Calibration returns σ with ε(σ) ∈ [(1 − rtol)·target, target]. For target' ≥ target/(1 − rtol),
    ε(σ') ≥ (1 − rtol)·target' > target ≥ ε(σ), so σ' < σ since ε falls with σ (RDP accountant: cheap)."""
    sigma = noise_for_epsilon(target, 1e-5, q, steps, accountant="rdp")
    sigma_more = noise_for_epsilon(target * factor, 1e-5, q, steps, accountant="rdp")
    assert sigma_more < sigma


@CALIBRATION
@given(st.floats(0.5, 2.0), st.floats(0.01, 0.03), st.integers(20, 100))
def test_calibration_under_the_sensitive_unit_spends_the_target_within_the_stated_tolerance(target, q, steps):
    """Under replace-one (the sensitive unit: Poisson-sampled Gaussian on the PLD accountant, no RDP bracket), the
    calibrated σ spends at most the target and at least (1 − CALIBRATION_RTOL) of it, as the module states."""
    sigma = noise_for_epsilon(target, 1e-5, q, steps, "sensitive")
    spent = epsilon_for_noise(sigma, q, steps, 1e-5, "sensitive")
    assert (1 - CALIBRATION_RTOL) * target <= spent <= target


parts = st.lists(st.tuples(st.sampled_from(["gaussian", "laplace", "exponential", "randomized_response"]),
                           st.integers(1, 5), st.sampled_from([None, None, 0.1, 0.3])), min_size=1, max_size=3)


@FEW
@given(parts, st.floats(0.5, 4.0), units)
def test_a_calibrated_plan_spends_its_epsilon_and_each_share_at_most_its_share(drawn, epsilon, unit):
    """PrivacyPlan.calibrate: parts with a fixed share are calibrated alone to at most share·ε; the others share one
    σ chosen so that the whole plan spends at most ε and at least (1 − rtol)·ε (unsampled parts: quick PLDs)."""
    # k-ary randomized response is a replace-one mechanism: 3 buckets under the sensitive unit, 2 under record
    plan = PrivacyPlan(tuple(Part(f"{m}{i}", mechanism=m, count=c, share=s, buckets=2 if unit == "record" else 3)
                             for i, (m, c, s) in enumerate(drawn)))
    sigmas = plan.calibrate(epsilon, 1e-5, unit)
    spent = plan.epsilon(sigmas, 1e-5, unit)
    assert spent <= epsilon
    if any(s is None for _, _, s in drawn):
        assert spent >= (1 - CALIBRATION_RTOL) * epsilon
    for part in plan.parts:
        if part.share is not None:
            assert epsilon_of(part.repeated(sigmas[part.name]), 1e-5, unit) <= part.share * epsilon
