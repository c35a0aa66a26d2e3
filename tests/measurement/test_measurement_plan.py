"""The planning helper: public inputs only, the frame's own σ, widths that match the frame's bootstrap."""

import math

import numpy as np
import pytest

from dpfair.measurement.plan import (
    FULL,
    PREDICTIONS,
    MeasurementPlan,
    epsilon_for_width,
    plan_measurement,
)
from dpfair.measurement.frame import PrivateMetricFrame

SHARES = [0.7, 0.3]


def _sample(n, rng):
    """Group 1 holds 30 %; y and ŷ are 1 with probability 0.55 (group 0) and 0.45 (group 1) for ŷ, 0.55 for y:
    p(1 − p) and (1 − p)² + p² are the same at 0.45 and 0.55, so one positive_rate = 0.55 describes both."""
    s = (rng.random(n) < 0.3).astype(int)
    y = (rng.random(n) < 0.55).astype(int)
    p = (rng.random(n) < np.where(s == 1, 0.45, 0.55)).astype(int)
    return y, p, s


def test_forecast_uses_the_frames_plan_and_sigma():
    rng = np.random.default_rng(0)
    y, p, s = _sample(2000, rng)
    for metrics in (["selection_rate"], ["selection_rate", "true_positive_rate", "false_positive_rate"]):
        fc = plan_measurement(metrics, epsilon=0.5, n=2000, group_shares=SHARES)
        frame = PrivateMetricFrame(metrics, y, p, s, groups=[0, 1], epsilon=0.5, n_bootstrap=10)
        assert fc.plan == frame.measurement_plan_
        assert fc.noise_multipliers == frame.noise_multipliers_ and fc.noise_stds == frame.noise_stds_
    assert plan_measurement("selection_rate", epsilon=1, n=2000, group_shares=SHARES).plan.tables == (PREDICTIONS,)
    assert plan_measurement(["selection_rate", "true_positive_rate"], epsilon=1, group_sizes=[1400, 600]
                            ).plan.tables == (FULL,)


def test_forecast_matches_the_bootstrap_width():
    """Predicted half-width of the demographic-parity difference vs the mean half-width of the frame's
    bootstrap interval over 20 releases on fresh samples (n = 2,000, ε = 0.25, Gaussian: noise and sampling both matter).

    Tolerance: a percentile interval from B = 1,000 replicates has a width whose relative standard error is
    about √(2·α(1−α)/B)/(φ(z)·2z) ≈ 3 % (α = 0.025); over 20 releases the mean's is < 1 %. The delta method
    and the binomial approximation are off by O(1/n_g) and O(noise²/D²) (≈ 2 % at n_g = 600 and noise std ≈ 10; two groups: group 1's noise is minus group 0's):
    10 % leaves room for both with a margin, and fails when a term is missing (the noise alone, or the sampling
    alone, is ≥ 15 % off)."""
    fc = plan_measurement("selection_rate", epsilon=0.25, n=2000, group_shares=SHARES, positive_rate=0.55,
                          mechanism="gaussian")
    row = fc.widths.loc[("selection_rate", "difference")]
    predicted = row["half_width"]
    assert row["noise"] < 0.85 * predicted and math.sqrt(predicted ** 2 - row["noise"] ** 2) < 0.85 * predicted
    rng = np.random.default_rng(1)
    widths = []
    for r in range(20):
        y, p, s = _sample(2000, rng)
        frame = PrivateMetricFrame("selection_rate", y, p, s, groups=[0, 1], epsilon=0.25, n_bootstrap=1000,
                                   random_state=r, mechanism="gaussian")
        lo, hi = frame.demographic_parity_interval()
        widths.append((hi - lo) / 2)
    assert np.mean(widths) == pytest.approx(predicted, rel=0.10)


def test_epsilon_for_width_reaches_the_width():
    common = {"n": 2000, "group_shares": SHARES, "positive_rate": 0.55}
    for target in (0.06, 0.1):
        eps = epsilon_for_width("selection_rate", target, **common)
        got = plan_measurement("selection_rate", epsilon=eps, **common).widths.loc[("selection_rate", "difference")]
        # the frame's calibration finds σ within its tolerance (≤ 0.5 %: the σ search's rtol)
        assert got["half_width"] == pytest.approx(target, rel=5e-3)
    wider = epsilon_for_width("selection_rate", 0.1, **common)
    assert wider < epsilon_for_width("selection_rate", 0.06, **common)
    with pytest.raises(ValueError, match="out of reach at any epsilon: the sampling of the rows alone"):
        epsilon_for_width("selection_rate", 0.03, **common)


def test_noise_only_forecast_and_bad_input():
    fc = plan_measurement("selection_rate", epsilon=1.0, group_sizes=[500, 500], sampling=False)
    row = fc.widths.loc[("selection_rate", "difference")]
    assert row["noise"] == row["half_width"]
    # the delta method at p = ½ on the predictions' marginal: Var = τ²·((1−p)² + p²)/n_g² per group; two groups
    # under "sensitive" (public margins): group 1's noise is minus group 0's, Var = τ²·½·(1/n₀ + 1/n₁)²
    tau = fc.noise_stds[PREDICTIONS]
    assert fc.plan.public_margins
    assert row["noise"] == pytest.approx(1.959964 * math.sqrt(tau ** 2 * 0.5 * (2 / 500) ** 2), rel=1e-5)
    apart = plan_measurement("selection_rate", epsilon=1.0, group_sizes=[500, 500, 500], sampling=False)
    tau = apart.noise_stds[PREDICTIONS]
    assert apart.widths.loc[("selection_rate", "difference"), "noise"] == pytest.approx(
        1.959964 * math.sqrt(2 * tau ** 2 * 0.5 / 500 ** 2), rel=1e-5)
    with pytest.raises(ValueError, match="exactly one of group_sizes"):
        plan_measurement("selection_rate", epsilon=1.0, n=100)
    with pytest.raises(ValueError, match="positive_rate must lie strictly between 0 and 1"):
        plan_measurement("selection_rate", epsilon=1.0, group_sizes=[5, 5], positive_rate=1.0)


def test_plan_is_a_function_of_public_inputs():
    a, b = MeasurementPlan.choose(["selection_rate", "count"], 3), MeasurementPlan.choose(["count", "selection_rate"], 3)
    assert a.tables == b.tables and dict(a.weights) == pytest.approx(dict(b.weights))
    # the optimum split: w_t ∝ √C_t
    C = {}
    for m in a.metrics:
        for t, v in a.coefficients(m).items():
            C[t] = C.get(t, 0.0) + v
    roots = {t: math.sqrt(c) for t, c in C.items()}
    assert dict(a.weights) == pytest.approx({t: r / sum(roots.values()) for t, r in roots.items()})
    assert a.variance() == pytest.approx(sum(roots.values()) ** 2)


def test_sigma_is_raised_until_the_split_plan_spends_at_most_epsilon(monkeypatch):
    """Where the accountant puts the plan of several parts above ε (PLD's discretisation can, by a hair), σ is
    raised until it does not: here the accountant is made to report 0.3 % more than it computes."""
    from dpfair.privacy import PrivacyPlan

    plan = MeasurementPlan.choose(["count", "selection_rate"], 3)
    assert len(plan.tables) == 2
    honest = plan.noise_multipliers(1.0, 1e-6, "sensitive")
    true_epsilon = PrivacyPlan.epsilon
    monkeypatch.setattr(PrivacyPlan, "epsilon", lambda self, *a, **k: 1.003 * true_epsilon(self, *a, **k))
    raised = plan.noise_multipliers(1.0, 1e-6, "sensitive")
    assert plan.privacy_plan().epsilon(raised, 1e-6, "sensitive") <= 1.0  # the patched (pessimistic) accountant
    ratio = {t: raised[t] / honest[t] for t in plan.tables}
    assert len({round(r, 12) for r in ratio.values()}) == 1  # one σ scaled: the split is kept
    assert 1.0 < next(iter(ratio.values())) < 1.01
