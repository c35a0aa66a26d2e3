"""Mangold et al.'s affine form F = C0 + C · accuracies against the direct definitions."""

import numpy as np
import pytest

from dpfair.fairness import (
    NOTIONS,
    constraint_group_accuracies,
    fairness_coefficients,
    group_fairness_values,
)


def random_binary(seed, n=500, k=3):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, k, n)
    y = (rng.random(n) < 0.2 + 0.6 * s / k).astype(int)  # label distribution depends on s
    p = np.where(rng.random(n) < 0.3, 1 - y, y)
    return y, p, s


def direct(notion, y, p, s):
    """The definitions, one conditional probability at a time."""
    k = s.max() + 1
    if notion == "demographic_parity":
        return np.array([p[s == r].mean() - p.mean() for r in range(k)])
    if notion == "accuracy_parity":
        return np.array([(p == y)[s == r].mean() - (p == y).mean() for r in range(k)])
    labels = {"equal_opportunity": (1,), "predictive_equality": (0,)}.get(notion, (0, 1))
    return np.array([p[(y == c) & (s == r)].mean() - p[y == c].mean() for c in labels for r in range(k)])


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize("seed,k", [(0, 2), (1, 3), (2, 5)])
def test_affine_form_equals_definition(notion, seed, k):
    y, p, s = random_binary(seed, k=k)
    coef = fairness_coefficients(notion, y, s)
    accuracies = constraint_group_accuracies(notion, y, p, s)
    values = group_fairness_values(notion, y, p, s)
    assert coef.C.shape == (len(coef.measure_keys), len(coef.group_keys)) == (len(values), len(accuracies))
    np.testing.assert_allclose(values, direct(notion, y, p, s), rtol=0, atol=1e-12)
    np.testing.assert_allclose(coef.C0 + coef.C @ accuracies, values, rtol=0, atol=1e-12)


def test_layout_and_known_coefficients():
    y = np.array([0, 1, 1, 0, 1, 1])
    s = np.array([0, 0, 0, 1, 1, 1])
    C0, C, measures, groups = fairness_coefficients("demographic_parity", y, s)
    assert measures == ((None, 0), (None, 1))
    assert groups == ((0, 0), (0, 1), (1, 0), (1, 1))
    # P(Y=0|S=r) = 1/3 for both groups and P(Y=0) = 1/3
    np.testing.assert_allclose(C0, [0.0, 0.0], atol=1e-15)
    # row r=0: π_{0,·} − 1[r'=0]/3 , 1[r'=0]·2/3 − π_{1,·}
    np.testing.assert_allclose(C[0], [1 / 6 - 1 / 3, 1 / 6, 2 / 3 - 1 / 3, -1 / 3], atol=1e-15)
    _, C_eo, keys, _ = fairness_coefficients("equalized_odds", y, s)
    assert keys == ((0, 0), (0, 1), (1, 0), (1, 1))
    np.testing.assert_allclose(C_eo[:2, :2], -(np.eye(2) - 0.5), atol=1e-15)
    np.testing.assert_allclose(C_eo[2:, 2:], np.eye(2) - 0.5, atol=1e-15)
    np.testing.assert_allclose(C_eo[:2, 2:], 0.0)


def test_rows_sum_to_zero_for_difference_notions():
    # an equally accurate classifier on every accuracy group has F = 0
    y, _, s = random_binary(3)
    for notion in ("equalized_odds", "equal_opportunity", "accuracy_parity"):
        coef = fairness_coefficients(notion, y, s)
        np.testing.assert_allclose(coef.C.sum(axis=1), 0.0, atol=1e-12)


def test_string_labels_use_sorted_positive_class():
    y, p, s = random_binary(4)
    words = np.array(["bad", "good"])
    np.testing.assert_allclose(
        group_fairness_values("equalized_odds", words[y], words[p], s),
        group_fairness_values("equalized_odds", y, p, s),
    )


def test_empty_demographic_parity_cell_is_harmless():
    y = np.array([0, 0, 0, 1, 1, 0])
    p = np.array([1, 0, 1, 1, 0, 0])
    s = np.array([0, 0, 0, 1, 1, 1])  # group 0 has no positives
    coef = fairness_coefficients("demographic_parity", y, s)
    acc = constraint_group_accuracies("demographic_parity", y, p, s)
    np.testing.assert_allclose(coef.C0 + coef.C @ acc, direct("demographic_parity", y, p, s), atol=1e-12)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: fairness_coefficients("equalized_odds", [0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1]), "no sample"),
        (lambda: group_fairness_values("equal_opportunity", [0, 0, 1], [0, 1, 1], [0, 0, 1]), "no sample"),
        (lambda: fairness_coefficients("demographic_parity", [0, 1, 2], [0, 1, 1]), "binary labels"),
        (lambda: fairness_coefficients("equal_opportunity", [0, 1, 2], [0, 1, 1]), "positive_label"),
        (lambda: group_fairness_values("demographic_parity", [0, 1], [0, 3], [0, 1]), "not labels of y"),
        (lambda: fairness_coefficients("equalized_odds", [0, 1], [0, 1, 1]), "entries"),
    ],
)
def test_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_multiclass_affine_form():
    """With three labels, equalized odds / opportunity compare each label's accuracy, accuracy parity as before."""
    rng = np.random.default_rng(7)
    n, k = 900, 3
    s = rng.integers(0, k, n)
    y = (rng.integers(0, 3, n) + s) % 3
    p = np.where(rng.random(n) < 0.4, rng.integers(0, 3, n), y)
    correct = p == y
    for notion, labels in (("equalized_odds", (0, 1, 2)), ("equal_opportunity", (2,))):
        coef = fairness_coefficients(notion, y, s, positive_label=2)
        acc = constraint_group_accuracies(notion, y, p, s, positive_label=2)
        direct_values = [correct[(y == c) & (s == r)].mean() - correct[y == c].mean() for c in labels for r in range(k)]
        np.testing.assert_allclose(coef.C0 + coef.C @ acc, direct_values, atol=1e-12)
    coef = fairness_coefficients("accuracy_parity", y, s)
    acc = constraint_group_accuracies("accuracy_parity", y, p, s)
    np.testing.assert_allclose(coef.C @ acc, [correct[s == r].mean() - correct.mean() for r in range(k)], atol=1e-12)
