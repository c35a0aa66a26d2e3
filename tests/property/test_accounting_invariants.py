"""Properties of the accountant on random parameters (Hypothesis): monotonicity and order-free composition."""

import dp_accounting as dpa
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.privacy import PrivacyLedger, epsilon_for_noise, gaussian_event, laplace_event, noise_for_epsilon
from dpfair.privacy.calibration import CALIBRATION_RTOL

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True)
sigmas = st.floats(1.0, 5.0)
rates = st.floats(0.001, 0.1)
steps = st.integers(1, 300)
DELTA = 1e-5


@SETTINGS
@given(sigmas, st.floats(1.05, 2.0), rates, steps)
def test_more_noise_never_costs_more(sigma, factor, q, t):
    assert epsilon_for_noise(sigma * factor, q, t, DELTA) <= epsilon_for_noise(sigma, q, t, DELTA) + 1e-9


@SETTINGS
@given(sigmas, rates, steps, st.integers(1, 100))
def test_more_steps_never_cost_less(sigma, q, t, more):
    assert epsilon_for_noise(sigma, q, t + more, DELTA) >= epsilon_for_noise(sigma, q, t, DELTA) - 1e-9


@SETTINGS
@given(sigmas, rates, st.floats(1.05, 3.0), steps)
def test_a_higher_sampling_rate_never_costs_less(sigma, q, factor, t):
    assert epsilon_for_noise(sigma, min(1.0, q * factor), t, DELTA) >= epsilon_for_noise(sigma, q, t, DELTA) - 1e-9


@SETTINGS
@given(sigmas, st.floats(0.5, 5.0), rates, steps, st.integers(1, 5))
def test_composition_does_not_depend_on_order(sigma, scale, q, t, laplaces):
    """A ledger of Gaussian steps then Laplace releases spends what the reverse order spends."""
    steps_event = dpa.SelfComposedDpEvent(gaussian_event(sigma, q), t)
    a, b = PrivacyLedger("record"), PrivacyLedger("record")
    a.record(steps_event, "steps")
    a.record(laplace_event(scale), "counts", count=laplaces)
    b.record(laplace_event(scale), "counts", count=laplaces)
    b.record(steps_event, "steps")
    assert abs(a.epsilon(DELTA) - b.epsilon(DELTA)) < 1e-9


@settings(max_examples=8, deadline=None, derandomize=True)
@given(st.floats(0.3, 8.0), rates, st.integers(10, 500))
def test_calibration_spends_at_most_the_target_and_close_to_it(target, q, t):
    sigma = noise_for_epsilon(target, DELTA, q, t)
    spent = epsilon_for_noise(sigma, q, t, DELTA)
    assert (1 - CALIBRATION_RTOL) * target <= spent <= target
