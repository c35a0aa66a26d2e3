"""ERMI: non-negativity, independence, χ² identity, a hand example, soft predictions."""

import numpy as np
import pytest
from scipy.stats import chi2_contingency

from dpfair.fairness import conditional_ermi, ermi


def samples(table):
    """Hard predictions and groups whose empirical joint has ``table[j, r]`` rows of (ŷ=j, s=r)."""
    pairs = [(j, r) for (j, r), count in np.ndenumerate(np.asarray(table)) for _ in range(count)]
    y_pred, s = map(np.array, zip(*pairs))
    return y_pred, s


def test_hand_example():
    # P = [[.3, .1], [.2, .4]]: Σ P²/(P(ŷ)P(s)) = .45 + .05 + .04/.3 + .16/.3 = 7/6
    y_pred, s = samples([[3, 1], [2, 4]])
    assert ermi(y_pred, s) == pytest.approx(1 / 6, abs=1e-12)


def test_zero_for_an_exactly_independent_joint():
    # P(ŷ) = (1/4, 3/4), P(s) = (2/5, 3/5), joint = product
    y_pred, s = samples([[2, 3], [6, 9]])
    assert ermi(y_pred, s) == pytest.approx(0.0, abs=1e-12)
    proba = np.tile([0.2, 0.5, 0.3], (7, 1))
    assert ermi(proba, [0, 1, 2, 0, 1, 1, 2]) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("seed,n_classes,k", [(0, 2, 2), (1, 3, 4), (2, 5, 3)])
def test_equals_chi_square_divergence(seed, n_classes, k):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, k, 300)
    y_pred = np.where(rng.random(300) < 0.5, s % n_classes, rng.integers(0, n_classes, 300))
    table = np.zeros((n_classes, k))
    np.add.at(table, (y_pred, s), 1)
    chi2 = chi2_contingency(table, correction=False).statistic
    value = ermi(y_pred, s)
    assert value > 0
    assert value == pytest.approx(chi2 / 300, abs=1e-12)


def test_soft_predictions_against_direct_chi_square():
    rng = np.random.default_rng(3)
    n, l, k = 200, 3, 4
    s = rng.integers(0, k, n)
    scores = rng.normal(size=(n, l)) + s[:, None] * np.arange(l)
    proba = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    joint = np.array([[proba[s == r, j].sum() / n for r in range(k)] for j in range(l)])
    product = np.outer(joint.sum(1), joint.sum(0))
    assert ermi(proba, s) == pytest.approx(np.sum((joint - product) ** 2 / product), abs=1e-12)
    # one-hot probabilities are hard predictions
    y_pred = proba.argmax(axis=1)
    assert ermi(np.eye(l)[y_pred], s) == pytest.approx(ermi(y_pred, s), abs=1e-12)


def test_absent_classes_and_groups_contribute_nothing():
    y_pred, s = samples([[3, 1], [2, 4]])
    assert ermi(y_pred * 2, s * 3, n_classes=3, n_groups=4) == pytest.approx(1 / 6, abs=1e-12)


def test_conditional_ermi_is_label_weighted_ermi():
    rng = np.random.default_rng(4)
    n = 400
    y = rng.integers(0, 3, n)
    s = rng.integers(0, 2, n)
    y_pred = np.where(rng.random(n) < 0.3 + 0.3 * s, y, rng.integers(0, 3, n))
    expected = sum(np.mean(y == c) * ermi(y_pred[y == c], s[y == c]) for c in range(3))
    assert conditional_ermi(y, y_pred, s) == pytest.approx(expected, abs=1e-12)
    assert conditional_ermi(y, np.eye(3)[y_pred], s) == pytest.approx(expected, abs=1e-12)


def test_conditional_ermi_zero_when_independent_given_y():
    # inside each label, ŷ is independent of s (but ŷ and s both depend on y)
    y_pred0, s0 = samples([[2, 3], [6, 9]])
    y_pred1, s1 = samples([[4, 4], [1, 1]])
    y = np.r_[np.zeros(20, int), np.ones(10, int)]
    assert conditional_ermi(y, np.r_[y_pred0, y_pred1], np.r_[s0, s1]) == pytest.approx(0.0, abs=1e-12)
    # a label that only one group has contributes 0
    assert conditional_ermi([0, 0, 1], [0, 1, 1], [0, 1, 1]) == pytest.approx(2 / 3 * 1.0, abs=1e-12)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: ermi([[0.5, 0.6], [0.5, 0.5]], [0, 1]), "summing to 1"),
        (lambda: ermi([[0.5, 0.5], [np.nan, 0.5]], [0, 1]), "NaN"),
        (lambda: ermi([[0.5, 0.5], [0.5, 0.5]], [0, 1], n_classes=3), "columns"),
        (lambda: ermi([0, 1, 1], [0, 1]), "entries"),
        (lambda: ermi([0, 1], [1, 1]), "single group"),
        (lambda: ermi([0, 1], [0, 1], n_classes=1), "outside"),
        (lambda: conditional_ermi([0, 1, 1], [0, 1], [0, 1]), "entries"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()
