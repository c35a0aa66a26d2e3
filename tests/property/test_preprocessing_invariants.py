"""A row's features depend on that row alone, for any subset of rows (Hypothesis over subsets)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.datasets import base, load_dataset


def _cleaned_table(name):
    """The cleaned table the loader encodes (captured from its preprocessing call) and its schema."""
    seen = []
    preprocess = base._preprocess

    def recording(table, train, test):
        seen.append(table)
        return preprocess(table, train, test)

    base._preprocess = recording
    try:
        data = load_dataset(name)  # embedded in the package: no data files needed
    finally:
        base._preprocess = preprocess
    return seen[0].frame, data.schema


@pytest.fixture(scope="module", params=["adult", "compas"])
def table(request):
    frame, schema = _cleaned_table(request.param)
    return frame, schema, schema.transform(frame)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(data=st.data())
def test_transforming_a_subset_gives_the_same_rows(table, data):
    """The public schema maps each row alone: encoding any subset gives exactly those rows' features."""
    frame, schema, whole = table
    size = data.draw(st.integers(1, 40))
    rows = np.array(data.draw(st.lists(st.integers(0, len(frame) - 1), min_size=size, max_size=size, unique=True)))
    np.testing.assert_array_equal(schema.transform(frame.iloc[rows]), whole[rows])
