"""Every release of a private search, checked by brute force: change one person (their s, or their whole record) in
small data sets and compare how far the released quantity moves with the bound its noise is calibrated to."""

import itertools

import numpy as np
import pytest

from dpfair.fairness import get_notion
from dpfair.privacy import PrivacyUnit, max_neighbour_distance
from dpfair.selection import SelectionScore, cell_counts

NOTIONS = ["demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity", "predictive_equality"]


def _data(n, n_classes, n_groups, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = rng.integers(0, n_classes, n)
    s = rng.integers(0, n_groups, n)
    return X, y, s


def _predictor(n_classes, reads_s):
    """A fixed model (the run's, trained on the fit part): ŷ from x, and from s too when ``reads_s``."""
    def predict(X, s):
        score = X[:, 0] + 0.7 * X[:, 1] + (0.8 * s if reads_s else 0.0)
        return np.clip(np.floor(score + n_classes / 2), 0, n_classes - 1).astype(np.int64)
    return predict


@pytest.mark.parametrize("notion,n_classes,n_groups,reads_s,unit", [
    (notion, l, k, reads, unit)
    for notion, (l, k), reads, unit in itertools.product(
        NOTIONS, [(2, 2), (2, 3), (3, 3)], [False, True], ["sensitive", "record"])
])
def test_score_moves_at_most_its_sensitivity(notion, n_classes, n_groups, reads_s, unit):
    X, y, s = _data(24, n_classes, n_groups, seed=n_classes * 10 + n_groups)
    predict = _predictor(n_classes, reads_s)
    rng = np.random.default_rng(1)
    n_cells = n_classes if notion == "equalized_odds" else 1
    # public denominators: released counts, floored; small ones make the bound tight
    denominators = rng.uniform(1.0, 6.0, size=(n_cells, n_groups))
    score = SelectionScore(notion, threshold=0.3, penalty=2.5, denominators=denominators, n_val=len(y),
                           n_classes=n_classes, unit=PrivacyUnit(unit), reads_s=reads_s)

    def value(X_, y_, s_):
        return score.value(y_, predict(X_, s_), s_)

    moved = max_neighbour_distance(value, X, y, s, unit, n_groups=n_groups)
    assert moved <= score.sensitivity * (1 + 1e-12)
    # the bound is the one the release is calibrated to: radius Δ/2 under replace-one, Δ under add/remove
    assert score.bound == (score.sensitivity / 2 if unit == "sensitive" else score.sensitivity)


def test_the_sensitivity_is_attained():
    """Tight: one person moving between the two smallest groups of their cell moves the violation by 1/m_a + 1/m_b."""
    y = np.zeros(6, dtype=np.int64)
    s = np.array([0, 0, 0, 1, 1, 1])
    y_pred = np.array([1, 1, 1, 0, 0, 0])  # rates 1 and 0 with true denominators: the gap is 1
    m = np.array([[3.0, 3.0]])
    score = SelectionScore("demographic_parity", 1.0, 0.0, m, 6, 2, PrivacyUnit.SENSITIVE, reads_s=False)
    # person 0 (predicted positive) moves from group 0 to group 1: rates 2/3 and 1/3, the gap 1/3
    s1 = s.copy()
    s1[0] = 1
    assert score.value(y, y_pred, s1) - score.value(y, y_pred, s) == pytest.approx(2 / 3)
    assert score.sensitivity == pytest.approx(2 / 3)


@pytest.mark.parametrize("notion", NOTIONS)
def test_with_the_true_counts_the_violation_is_the_metrics(notion):
    X, y, s = _data(400, 2, 3, seed=5)
    y_pred = _predictor(2, False)(X, s)
    true = cell_counts(notion, y, s, 2, 3)
    score = SelectionScore(notion, 1.0, 0.0, true, len(y), 2, PrivacyUnit.SENSITIVE, False)
    assert score.violation(y, y_pred, s) == pytest.approx(get_notion(notion).violation(y, y_pred, s, "pairwise", 1))


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize("unit,distance", [("sensitive", np.sqrt(2)), ("record", 1.0)])
def test_validation_counts_move_by_one_person(notion, unit, distance):
    """The counts' release bound: √2/2 under replace-one (a one-hot cell moved: distance √2), 1 under add/remove."""
    X, y, s = _data(30, 3, 3, seed=2)
    moved = max_neighbour_distance(lambda X_, y_, s_: cell_counts(notion, y_, s_, 3, 3), X, y, s, unit,
                                   n_groups=3)
    assert moved <= distance * (1 + 1e-12)


def test_reference_error_moves_by_one_record_over_the_public_size():
    """Record unit: the private reference's validation error, over the public validation size n_val."""
    X, y, s = _data(25, 2, 2, seed=3)
    predict = _predictor(2, False)
    n_val = len(y)
    moved = max_neighbour_distance(lambda X_, y_, s_: np.sum(predict(X_, s_) != y_) / n_val, X, y, s, "record")
    assert moved <= (1.0 / n_val) * (1 + 1e-12)
