"""Properties of the fairness metrics on random inputs (Hypothesis), beyond the points the unit tests check."""

import numpy as np
from fairlearn.metrics import demographic_parity_difference, equalized_odds_difference
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.fairness import (
    accuracy_inequality,
    constraint_group_accuracies,
    fairness_coefficients,
    fairness_summary,
    group_fairness_values,
)
from dpfair.fairness.metrics import demographic_parity_violation, equalized_odds_violation

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True)


@st.composite
def predictions(draw, min_size=8, max_size=80):
    """Binary y, predictions and k ∈ {2, 3} groups, every (label, group) cell non-empty."""
    k = draw(st.integers(2, 3))
    n = draw(st.integers(min_size, max_size))
    rows = st.lists(st.integers(0, 1), min_size=n, max_size=n)
    y, p = np.array(draw(rows)), np.array(draw(rows))
    s = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)))
    cells = np.arange(2 * k)  # append one row per cell so no notion is undefined
    y = np.concatenate([y, cells // k])
    s = np.concatenate([s, cells % k])
    p = np.concatenate([p, np.array(draw(st.lists(st.integers(0, 1), min_size=2 * k, max_size=2 * k)))])
    return y, p, s


@SETTINGS
@given(predictions(), st.randoms(use_true_random=False))
def test_metrics_do_not_depend_on_row_order(data, rnd):
    """Every metric is a function of the empirical distribution of (y, ŷ, s): shuffling rows changes nothing."""
    y, p, s = data
    order = np.array(rnd.sample(range(len(y)), len(y)))
    a, b = fairness_summary(y, p, s), fairness_summary(y[order], p[order], s[order])
    assert a == b
    ia, ib = accuracy_inequality(y, p, s), accuracy_inequality(y[order], p[order], s[order])
    for key in ("atkinson", "gini", "mean_log_deviation", "theil"):
        assert abs(ia[key] - ib[key]) < 1e-12


@SETTINGS
@given(predictions())
def test_metrics_lie_in_their_ranges(data):
    """Violations are differences of probabilities: in [0, 1]; inequality indices ≥ 0, Atkinson ≤ 1."""
    y, p, s = data
    assert all(0.0 <= v <= 1.0 for v in fairness_summary(y, p, s).values())
    ineq = accuracy_inequality(y, p, s)
    assert 0.0 <= ineq["atkinson"] <= 1.0
    assert ineq["gini"] >= 0.0 and ineq["mean_log_deviation"] >= -1e-12 and ineq["theil"] >= -1e-12


@SETTINGS
@given(predictions())
def test_renaming_the_groups_changes_nothing(data):
    """Group values are labels only: 0/1/2 → "a"/"b"/"c" (same order) gives the same violations."""
    y, p, s = data
    names = np.array(["a", "b", "c"])[s]
    assert fairness_summary(y, p, s) == fairness_summary(y, p, names)


@SETTINGS
@given(predictions(), st.sampled_from(["demographic_parity", "equalized_odds", "equal_opportunity",
                                       "accuracy_parity"]))
def test_the_affine_form_is_the_definition(data, notion):
    """Mangold et al.'s F_k = C⁰_k + Σ C^{k'}_k P(ŷ = Y | D_k') equals the notion's direct definition."""
    y, p, s = data
    coef = fairness_coefficients(notion, y, s)
    direct = group_fairness_values(notion, y, p, s)
    assert np.allclose(coef.C0 + coef.C @ constraint_group_accuracies(notion, y, p, s), direct, atol=1e-12)


@SETTINGS
@given(predictions())
def test_pairwise_violations_are_fairlearns_differences(data):
    """Binary ŷ: the pairwise demographic-parity violation is fairlearn's demographic_parity_difference
    (max − min selection rate over groups) and the equalized-odds one its equalized_odds_difference
    (the larger of the TPR and FPR gaps), see dpfair.fairness.metrics."""
    y, p, s = data
    assert abs(demographic_parity_violation(p, s) - demographic_parity_difference(y, p, sensitive_features=s)) < 1e-12
    assert abs(equalized_odds_violation(y, p, s) - equalized_odds_difference(y, p, sensitive_features=s)) < 1e-12
