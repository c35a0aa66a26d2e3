"""Violations against fairlearn, brute-force loops, and bad inputs."""

import itertools

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import (
    MetricFrame,
    demographic_parity_difference,
    equal_opportunity_difference,
    equalized_odds_difference,
)
from sklearn.metrics import accuracy_score

from dpfair.fairness import (
    accuracy_parity_violation,
    conditional_rates,
    demographic_parity_violation,
    equal_opportunity_violation,
    equalized_odds_violation,
    fairness_report,
    fairness_summary,
    selection_rates,
)


def random_data(seed, n=400, n_classes=2, n_groups=3):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, n_groups, n)
    y = rng.integers(0, n_classes, n)
    # predictions correlated with s and y, so the gaps are not all tiny
    flip = rng.random(n) < 0.2 + 0.15 * s / n_groups
    y_pred = np.where(flip, rng.integers(0, n_classes, n), y)
    return y, y_pred, s


def brute_force(y_true, y_pred, s, convention, cells, outcomes, hit):
    """max over cells, outcomes and groups of the gap, looping over everything."""
    worst = 0.0
    groups = sorted(set(s.tolist()))
    for cell, j in itertools.product(cells, outcomes):
        in_cell = np.array([cell(t) for t in y_true])
        rates = {}
        for r in groups:
            rows = in_cell & (s == r)
            if rows.sum():
                rates[r] = np.mean([hit(t, p, j) for t, p in zip(y_true[rows], y_pred[rows])])
        if convention == "pairwise":
            for a, b in itertools.combinations(rates.values(), 2):
                worst = max(worst, abs(a - b))
        else:
            overall = np.mean([hit(t, p, j) for t, p in zip(y_true[in_cell], y_pred[in_cell])])
            for a in rates.values():
                worst = max(worst, abs(a - overall))
    return worst


SEEDS_GROUPS = [(0, 2), (1, 3), (2, 5)]


@pytest.mark.parametrize("seed,k", SEEDS_GROUPS)
def test_demographic_parity_matches_fairlearn(seed, k):
    y, p, s = random_data(seed, n_groups=k)
    for method, convention in (("between_groups", "pairwise"), ("to_overall", "marginal")):
        expected = demographic_parity_difference(y, p, sensitive_features=s, method=method)
        assert demographic_parity_violation(p, s, convention) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed,k", SEEDS_GROUPS)
def test_equalized_odds_matches_fairlearn(seed, k):
    y, p, s = random_data(seed, n_groups=k)
    for method, convention in (("between_groups", "pairwise"), ("to_overall", "marginal")):
        expected = equalized_odds_difference(y, p, sensitive_features=s, method=method, agg="worst_case")
        assert equalized_odds_violation(y, p, s, convention) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed,k", SEEDS_GROUPS)
def test_equal_opportunity_matches_fairlearn(seed, k):
    y, p, s = random_data(seed, n_groups=k)
    for method, convention in (("between_groups", "pairwise"), ("to_overall", "marginal")):
        expected = equal_opportunity_difference(y, p, sensitive_features=s, method=method)
        assert equal_opportunity_violation(y, p, s, convention=convention) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed,k", SEEDS_GROUPS)
def test_accuracy_parity_matches_fairlearn(seed, k):
    y, p, s = random_data(seed, n_groups=k)
    frame = MetricFrame(metrics=accuracy_score, y_true=y, y_pred=p, sensitive_features=s)
    assert accuracy_parity_violation(y, p, s) == pytest.approx(frame.difference(), abs=1e-12)
    assert accuracy_parity_violation(y, p, s, "marginal") == pytest.approx(
        frame.difference(method="to_overall"), abs=1e-12
    )


@pytest.mark.parametrize("seed,n_classes,k", [(3, 3, 2), (4, 4, 3), (5, 3, 5), (6, 2, 4)])
@pytest.mark.parametrize("convention", ["pairwise", "marginal"])
def test_multiclass_multigroup_against_brute_force(seed, n_classes, k, convention):
    y, p, s = random_data(seed, n=300, n_classes=n_classes, n_groups=k)
    labels = range(n_classes)
    everyone = [lambda t: True]
    per_label = [lambda t, c=c: t == c for c in labels]
    predicts = lambda t, q, j: q == j  # noqa: E731
    assert demographic_parity_violation(p, s, convention) == pytest.approx(
        brute_force(y, p, s, convention, everyone, labels, predicts), abs=1e-12
    )
    assert equalized_odds_violation(y, p, s, convention) == pytest.approx(
        brute_force(y, p, s, convention, per_label, labels, predicts), abs=1e-12
    )
    assert equal_opportunity_violation(y, p, s, positive_label=1, convention=convention) == pytest.approx(
        brute_force(y, p, s, convention, [lambda t: t == 1], [1], predicts), abs=1e-12
    )
    assert accuracy_parity_violation(y, p, s, convention) == pytest.approx(
        brute_force(y, p, s, convention, everyone, [None], lambda t, q, j: t == q), abs=1e-12
    )


def test_binary_max_over_outcomes_is_the_positive_rate_gap():
    y, p, s = random_data(7, n_groups=4)
    rates = [np.mean(p[s == r] == 1) for r in range(4)]
    assert demographic_parity_violation(p, s) == pytest.approx(max(rates) - min(rates), abs=1e-15)


def test_arbitrary_label_and_group_values_are_encoded():
    y, p, s = random_data(8, n_classes=3, n_groups=3)
    names = np.array(["cat", "dog", "emu"])
    regions = np.array(["north", "south", "west"])
    assert equalized_odds_violation(names[y], names[p], regions[s]) == equalized_odds_violation(y, p, s)
    assert equal_opportunity_violation(names[y], names[p], regions[s], positive_label="dog") == (
        equal_opportunity_violation(y, p, s, positive_label=1)
    )
    assert demographic_parity_violation(p + 10, s * 7 - 3) == demographic_parity_violation(p, s)


def test_undefined_rates_are_skipped():
    # group 2 has no positives: its TPR is undefined and left out
    y = np.array([1, 1, 0, 1, 1, 0, 0, 0])
    p = np.array([1, 0, 0, 1, 1, 1, 0, 1])
    s = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    assert equal_opportunity_violation(y, p, s) == pytest.approx(0.5)  # TPR 0.5 vs 1.0
    # FPR: group 0: 0/1, group 1: 1/1, group 2: 2/2 -> gap 1
    assert equalized_odds_violation(y, p, s) == pytest.approx(1.0)
    # only one group has positives: nothing to compare
    y_one = np.array([1, 1, 0, 0])
    assert equal_opportunity_violation(y_one, np.array([1, 0, 1, 0]), np.array([0, 0, 1, 1])) == 0.0
    assert equal_opportunity_violation(
        y_one, np.array([1, 0, 1, 0]), np.array([0, 0, 1, 1]), convention="marginal"
    ) == 0.0


def test_summary_keys_and_values():
    y, p, s = random_data(9, n_classes=3)
    summary = fairness_summary(y, p, s)
    assert list(summary) == ["demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity",
                             "predictive_equality"]
    assert all(isinstance(v, float) for v in summary.values())
    assert summary["equal_opportunity"] == equal_opportunity_violation(y, p, s, positive_label=1)
    assert summary["equalized_odds"] == equalized_odds_violation(y, p, s)


def test_report_is_one_long_table():
    y, p, s = random_data(10, n_groups=3)
    report = fairness_report(y, p, s, group_names=["a", "b", "c"])
    assert list(report.columns) == ["metric", "group", "convention", "value"]
    assert np.all(np.isfinite(report["value"]))
    per_group = report[(report.metric == "accuracy") & (report.group != "all")]
    assert per_group.group.tolist() == ["a", "b", "c"]
    np.testing.assert_allclose(per_group.value, [np.mean(y[s == r] == p[s == r]) for r in range(3)])
    violations = report[report.metric == "equalized_odds"].set_index("convention").value
    assert violations["pairwise"] == equalized_odds_violation(y, p, s)
    assert violations["marginal"] == equalized_odds_violation(y, p, s, "marginal")
    for metric in ("ermi", "conditional_ermi", "accuracy_gini", "accuracy_theil",
                   "accuracy_mean_log_deviation", "accuracy_atkinson_0.5", "error"):
        assert metric in set(report.metric)
    named = fairness_report(y, p, s, group_names={0: "x", 1: "y", 2: "z"})
    assert named[named.metric == "accuracy"].group.tolist() == ["all", "x", "y", "z"]


def test_rate_tables():
    y, p, s = random_data(11, n_classes=3, n_groups=2)
    table = selection_rates(p, s)
    assert table.shape == (2, 3)
    assert table.loc[1, 2] == pytest.approx(np.mean(p[s == 1] == 2))
    rates = conditional_rates(y, p, s)
    row = rates[(rates.y_true == 2) & (rates.group == 0) & (rates.y_pred == 1)]
    assert row.rate.item() == pytest.approx(np.mean(p[(s == 0) & (y == 2)] == 1))
    assert isinstance(rates, pd.DataFrame)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: demographic_parity_violation([0, 1, 1], [0, 1]), "s has 2 entries but y_pred has 3"),
        (lambda: equalized_odds_violation([0, 1], [0, 1, 1], [0, 1]), "y_pred has 3 entries but y_true"),
        (lambda: demographic_parity_violation([0, 1, 1], [1, 1, 1]), "single group"),
        (lambda: demographic_parity_violation([0, 1], [0.0, np.nan]), "NaN"),
        (lambda: accuracy_parity_violation([0, 1], [0, None], [0, 1]), "missing"),
        (lambda: demographic_parity_violation([0, 1], [0, 1], convention="max"), "convention"),
        (lambda: equal_opportunity_violation([0, 1], [0, 1], [0, 1], positive_label=2), "positive_label=2"),
        (lambda: equalized_odds_violation([0, "a"], [0, 1], [0, 1]), "one label type"),
        (lambda: equalized_odds_violation(np.array([0, "a"], dtype=object), [0, 1], [0, 1]), "sorted"),
        (lambda: fairness_report([0, 1], [0, 1], [0, 1], group_names=["a"]), "group_names"),
        (lambda: demographic_parity_violation(np.zeros((3, 2)), [0, 1, 1]), "1-D"),
    ],
)
def test_bad_inputs_raise_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
