"""CheckedFeatures: the checks of one X made once for a caller that fits many models on it, as an explicit value."""

import numpy as np
import pytest

from dpfair.utils.validation import CheckedFeatures, check_features


def test_each_object_is_checked_once_and_its_result_returned_again():
    X = np.arange(12).reshape(6, 2)  # integers: the check makes a float64 copy
    checked = CheckedFeatures()
    first = checked.features(X)
    assert first.dtype == np.float64 and first is not X
    assert checked.features(X) is first  # the same copy, not a second pass
    assert np.array_equal(first, check_features(X))


def test_another_object_is_checked_anew_and_still_refused_when_bad():
    checked = CheckedFeatures()
    good = np.ones((4, 2))
    checked.features(good)
    bad = good.copy()
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        checked.features(bad)


def test_a_list_input_is_held_so_its_id_cannot_be_reused():
    checked = CheckedFeatures()
    rows = [[1.0, 2.0], [3.0, 4.0]]
    first = checked.features(rows)
    assert checked.features(rows) is first
    assert checked.features([[5.0, 6.0], [7.0, 8.0]])[0, 0] == 5.0  # a new list, even if its id were reused
