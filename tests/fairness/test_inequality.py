"""Inequality indices against closed forms."""

import numpy as np
import pytest

from dpfair.fairness import (
    accuracy_inequality,
    atkinson_index,
    generalized_entropy,
    gini_coefficient,
    mean_log_deviation,
    per_group_accuracy,
    theil_index,
)

INDICES = [
    lambda x, w=None: atkinson_index(x, 0.5, w),
    lambda x, w=None: atkinson_index(x, 1.0, w),
    lambda x, w=None: atkinson_index(x, 2.0, w),
    gini_coefficient,
    mean_log_deviation,
    theil_index,
    lambda x, w=None: generalized_entropy(x, 2.0, w),
    lambda x, w=None: generalized_entropy(x, -1.0, w),
]


@pytest.mark.parametrize("index", INDICES)
def test_zero_when_all_equal_and_weights_repeat_values(index):
    assert index([0.7] * 5) == pytest.approx(0.0, abs=1e-15)
    # weight 3 on a value is the value repeated three times
    assert index([0.2, 0.9], [1, 3]) == pytest.approx(index([0.2, 0.9, 0.9, 0.9]), abs=1e-12)


def test_closed_forms_on_one_and_four():
    x = [1.0, 4.0]  # arithmetic mean 2.5, geometric 2, harmonic 1.6
    assert atkinson_index(x, 0.5) == pytest.approx(1 - 2.25 / 2.5)
    assert atkinson_index(x, 1.0) == pytest.approx(1 - 2 / 2.5)
    assert atkinson_index(x, 2.0) == pytest.approx(1 - 1.6 / 2.5)
    assert atkinson_index(x, 0.0) == pytest.approx(0.0, abs=1e-15)
    assert mean_log_deviation(x) == pytest.approx(np.log(1.25))
    assert theil_index(x) == pytest.approx(0.5 * (0.4 * np.log(0.4) + 1.6 * np.log(1.6)))
    assert gini_coefficient([1.0, 2.0, 3.0]) == pytest.approx(2 / 9)


@pytest.mark.parametrize("m", [2, 5, 10])
def test_gini_of_one_winner(m):
    assert gini_coefficient([0.0] * (m - 1) + [1.0]) == pytest.approx((m - 1) / m)


def test_generalized_entropy_limits_and_cases():
    rng = np.random.default_rng(0)
    x, w = rng.uniform(0.3, 1.0, 6), rng.uniform(1, 5, 6)
    assert generalized_entropy(x, 1e-7, w) == pytest.approx(mean_log_deviation(x, w), abs=1e-6)
    assert generalized_entropy(x, 1 + 1e-7, w) == pytest.approx(theil_index(x, w), abs=1e-6)
    # GE(2) is half the squared coefficient of variation
    assert generalized_entropy(x, 2.0) == pytest.approx(np.var(x) / (2 * np.mean(x) ** 2))
    # Atkinson ε=1 is one minus geometric over arithmetic mean, i.e. 1 − exp(−MLD)
    assert atkinson_index(x, 1.0) == pytest.approx(1 - np.exp(np.mean(np.log(x))) / np.mean(x))
    assert atkinson_index(x, 1.0) == pytest.approx(1 - np.exp(-mean_log_deviation(x)))


def test_zero_values_take_their_limits():
    x = [0.0, 0.5, 1.0]
    assert atkinson_index(x, 1.0) == 1.0
    assert atkinson_index(x, 3.0) == 1.0
    assert mean_log_deviation(x) == np.inf
    assert np.isfinite(theil_index(x)) and theil_index(x) > 0
    assert atkinson_index([0.0, 1.0, 2.0], 1.0, weights=[0, 1, 1]) == pytest.approx(atkinson_index([1.0, 2.0], 1.0))


def test_per_group_accuracy():
    y = np.array([0, 1, 1, 0, 1, 2])
    p = np.array([0, 1, 0, 0, 2, 2])
    s = np.array(["b", "a", "a", "b", "c", "c"])
    acc = per_group_accuracy(y, p, s)
    assert acc.index.tolist() == ["a", "b", "c"]
    np.testing.assert_allclose(acc.to_numpy(), [0.5, 1.0, 0.5])


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: gini_coefficient([]), "empty"),
        (lambda: gini_coefficient([0.5, -0.1]), "non-negative"),
        (lambda: theil_index([0.5, np.nan]), "finite"),
        (lambda: theil_index([0.0, 0.0]), "zero"),
        (lambda: atkinson_index([0.5, 0.6], -1), "epsilon"),
        (lambda: atkinson_index([0.5, 0.6], weights=[1.0]), "weights has 1 entries"),
        (lambda: gini_coefficient([0.5, 0.6], weights=[-1.0, 2.0]), "weights"),
        (lambda: generalized_entropy([0.5, 0.6], alpha=None), "alpha"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_accuracy_inequality_is_zero_for_equal_accuracies():
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    p = np.array([0, 1, 1, 1, 0, 1, 1, 1])  # one error in each group of four
    s = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    out = accuracy_inequality(y, p, s)
    assert out["per_group_accuracy"] == {0: 0.75, 1: 0.75} and out["group_sizes"] == {0: 4, 1: 4}
    for key in ("atkinson", "gini", "mean_log_deviation", "theil"):
        assert out[key] == pytest.approx(0.0, abs=1e-15)


def test_accuracy_inequality_two_groups_by_hand():
    # group "a": 1 row of 4 right (accuracy 1/4, weight 4/5); group "b": 1 of 1 right (accuracy 1, weight 1/5)
    y = np.zeros(5, int)
    p = np.array([0, 1, 1, 1, 0])
    s = np.array(["a", "a", "a", "a", "b"])
    out = accuracy_inequality(y, p, s)
    assert out["per_group_accuracy"] == {"a": 0.25, "b": 1.0}
    mu = 0.8 * 0.25 + 0.2 * 1.0  # 0.4, the overall accuracy
    assert out["atkinson"] == pytest.approx(1 - 0.25 ** 0.8 * 1.0 ** 0.2 / mu)
    assert out["gini"] == pytest.approx(2 * 0.8 * 0.2 * 0.75 / (2 * mu))
    assert out["mean_log_deviation"] == pytest.approx(0.8 * np.log(mu / 0.25) + 0.2 * np.log(mu / 1.0))
    assert out["theil"] == pytest.approx(0.8 * (0.25 / mu) * np.log(0.25 / mu) + 0.2 * (1 / mu) * np.log(1 / mu))
    # group size matters: the same accuracies with equal weights give other values
    assert out["theil"] != pytest.approx(theil_index([0.25, 1.0]))


def test_accuracy_inequality_with_a_group_always_wrong():
    out = accuracy_inequality([0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 1, 1])
    assert out["atkinson"] == 1.0 and out["mean_log_deviation"] == np.inf and out["theil"] > 0
    nothing_right = accuracy_inequality([0, 0, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1])
    assert np.isnan(nothing_right["gini"]) and nothing_right["per_group_accuracy"] == {0: 0.0, 1: 0.0}
    with pytest.raises(ValueError, match="entries"):
        accuracy_inequality([0, 1, 1], [0, 1, 1], [0, 1])
