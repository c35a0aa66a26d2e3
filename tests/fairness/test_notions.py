"""Constraint groups and reference cells of each notion."""

import numpy as np
import pytest

from dpfair.fairness import NOTIONS, constraint_groups


def test_demographic_and_accuracy_parity_partition_by_group():
    s = np.array([0, 2, 1, 2, 0])
    for notion in ("demographic_parity", "accuracy_parity"):
        groups = constraint_groups(notion, None, s)
        np.testing.assert_array_equal(groups.codes, s)
        np.testing.assert_array_equal(groups.reference, 0)
        assert groups.keys == ((None, 0), (None, 1), (None, 2))
        assert groups.n_reference_cells == 1


def test_equalized_odds_partition_by_label_and_group():
    y = np.array([0, 1, 2, 1, 0, 2])
    s = np.array([0, 1, 1, 0, 1, 0])
    groups = constraint_groups("equalized_odds", y, s)
    np.testing.assert_array_equal(groups.codes, y * 2 + s)
    np.testing.assert_array_equal(groups.reference, y)
    assert groups.n_constraint_groups == 6
    for g, (label, group) in enumerate(groups.keys):
        assert groups.reference_of[g] == label
        np.testing.assert_array_equal(groups.codes == g, (y == label) & (s == group))


def test_equal_opportunity_leaves_negatives_unconstrained():
    y = np.array(["no", "yes", "yes", "no"])
    s = np.array(["a", "b", "a", "b"])
    groups = constraint_groups("equal_opportunity", y, s, positive_label="yes")
    np.testing.assert_array_equal(groups.codes, [-1, 1, 0, -1])
    np.testing.assert_array_equal(groups.reference, [-1, 0, 0, -1])
    assert groups.keys == ((1, 0), (1, 1))
    assert groups.classes.tolist() == ["no", "yes"]


def test_given_counts_keep_absent_codes():
    y = np.array([0, 2, 2, 0])
    s = np.array([0, 0, 2, 2])
    groups = constraint_groups("equalized_odds", y, s, n_classes=3, n_groups=4)
    assert groups.n_constraint_groups == 12
    np.testing.assert_array_equal(groups.codes, y * 4 + s)
    assert not np.any(groups.codes == 1 * 4 + 1)  # the empty cell keeps its index


@pytest.mark.parametrize(
    "args,match",
    [
        (("parity", [0, 1], [0, 1]), "notion must be one of"),
        (("equalized_odds", None, [0, 1]), "pass y"),
        (("equalized_odds", [0, 1, 1], [0, 1]), "y has 3 entries but s has 2"),
        (("demographic_parity", None, [0, 0]), "single group"),
        (("equal_opportunity", [0, 2], [0, 1]), "positive_label=1"),
    ],
)
def test_bad_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        constraint_groups(*args)


def test_codes_out_of_range():
    with pytest.raises(ValueError, match="outside 0..1"):
        constraint_groups("demographic_parity", None, [0, 2], n_groups=2)
    with pytest.raises(ValueError, match="integer codes"):
        constraint_groups("equalized_odds", ["a", "b"], [0, 1], n_classes=2)
    assert set(NOTIONS) == {"demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity"}
