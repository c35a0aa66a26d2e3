"""MNIST's image-derived group: a fixed random minority of inverted images."""

import numpy as np
import pytest

from dpfair.datasets import load_dataset


def test_inverted_group_is_a_fixed_minority_with_inverted_pixels(shared_data):
    data = load_dataset("mnist", sensitive="inverted", data_home=shared_data, download=False)
    assert data.group_names == ["original", "inverted"]
    s = np.concatenate([data.s_train, data.s_test])
    # 10,000 fair coins of bias 0.3: the share is within 5 standard deviations (0.0046 each) of 0.3
    assert abs(s.mean() - 0.3) < 5 * np.sqrt(0.3 * 0.7 / len(s))
    # inverted digits are mostly bright (background 1), originals mostly dark
    assert data.X_train[data.s_train == 1].mean() > 0.8 > 0.2 > data.X_train[data.s_train == 0].mean()
    again = load_dataset("mnist", sensitive="inverted", data_home=shared_data, download=False)
    np.testing.assert_array_equal(again.s_train, data.s_train)
    assert "inverted" in data.description


def test_inverted_share_must_be_a_fraction(shared_data):
    with pytest.raises(ValueError, match="inverted_share"):
        load_dataset("mnist", sensitive="inverted", inverted_share=1.5, download=False)
