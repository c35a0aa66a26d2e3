"""Data loaders' preprocessing: a row's features depend on that row alone (Hypothesis over rows, splits, options).

Covers: the synthetic loader, other loader options (sensitive attribute, sensitive columns kept, all races), the split
(seed and test fraction), arbitrary schemas, and the loaders end to end on a random subset of the raw file's rows.
Everything runs on the data embedded in the package (adult, compas) or generated (synthetic).
"""

import contextlib
import io
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.datasets import _tabular, base, load_dataset
from dpfair.datasets.base import Column, Schema

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True)
LOADS = settings(max_examples=6, deadline=None, derandomize=True)  # a loader run per example (≤ 0.3 s)
SPLITS = settings(max_examples=6, deadline=None, derandomize=True)  # adult: encodes 45,222 rows per example


@contextlib.contextmanager
def _capture():
    """Records ``(table, train, test)`` of every preprocessing call (as tests/datasets/test_schema.py does)."""
    seen = []
    preprocess = base._preprocess

    def recording(table, train, test):
        seen.append((table, train, test))
        return preprocess(table, train, test)

    with mock.patch.object(base, "_preprocess", recording):
        yield seen


def _load(name, **options):
    """``(dataset, table, train, test, whole)``: the loaded data set, its cleaned table, the split, and the
    features of every table row from the table's schema."""
    with _capture() as seen:
        data = load_dataset(name, **options)
    (table, train, test), = seen
    return data, table, train, test, data.schema.transform(table.frame)


LOADERS = [
    ("adult", {}),
    ("adult", {"sensitive": "sex*race"}),
    ("adult", {"sensitive": "race", "include_sensitive": True}),
    ("compas", {"all_races": True}),
    ("compas", {"sensitive": "sex", "include_sensitive": True}),
    ("synthetic", {"n_samples": 300, "n_features": 4, "n_groups": 3, "class_sep": 2.0, "feature_bias": 1.5}),
]


@pytest.fixture(scope="module", params=LOADERS, ids=lambda p: f"{p[0]}-{'-'.join(map(str, p[1].values()))}")
def loaded(request):
    name, options = request.param
    return _load(name, **options)


@SETTINGS
@given(data=st.data())
def test_encoding_any_subset_of_rows_gives_those_rows_features(loaded, data):
    """The public schema maps each row by constants fixed in code: encoding any subset of the cleaned table (in any
    order, duplicates allowed) gives exactly those rows of the whole table's features, for every loader option."""
    _, table, _, _, whole = loaded
    n = len(table.frame)
    rows = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=30)))
    np.testing.assert_array_equal(loaded[0].schema.transform(table.frame.iloc[rows]), whole[rows])


@SPLITS
@given(st.integers(0, 2**31 - 1), st.sampled_from([0.1, 0.25, 0.5]))
def test_a_rows_features_do_not_depend_on_the_split(loaded, seed, test_size):
    """Whichever part (train or test) a row falls into, for any seed and test fraction, its features are those the
    schema gives the row alone: the split uses no statistic of the other rows."""
    _, table, _, _, whole = loaded
    with _capture() as seen:
        data = base.finish(table, test_size, seed)
    (_, train, test), = seen
    assert len(train) + len(test) == len(whole) and not np.intersect1d(train, test).size
    np.testing.assert_array_equal(data.X_train, whole[train])
    np.testing.assert_array_equal(data.X_test, whole[test])
    np.testing.assert_array_equal(data.s_train, table.s[train])


@LOADS
@given(st.integers(20, 400), st.integers(1, 5), st.integers(2, 4), st.floats(0.0, 3.0), st.floats(0.0, 3.0),
       st.integers(0, 2**16))
def test_synthetic_features_are_the_generated_rows_clipped(n, d, k, class_sep, feature_bias, seed):
    """load_synthetic's schema is the generating process (center 0, scale 1, clip to ±(8 + class_sep +
    feature_bias)): every row of the data set is the generated row, clipped, wherever the split puts it."""
    from dpfair.datasets import make_synthetic

    options = dict(n_samples=n, n_features=d, n_groups=k, class_sep=class_sep, feature_bias=feature_bias,
                   random_state=seed)
    data, table, train, test, whole = _load("synthetic", **options)
    X, y, s = make_synthetic(**options)
    bound = 8.0 + class_sep + feature_bias
    np.testing.assert_array_equal(whole, np.clip(X, -bound, bound))
    np.testing.assert_array_equal(data.X_train, whole[train])
    np.testing.assert_array_equal(data.X_test, whole[test])
    np.testing.assert_array_equal(data.y_train, y[train])


# ---- arbitrary schemas ------------------------------------------------------------------------------------------

@st.composite
def schema_and_frame(draw):
    """A schema of numeric, categorical and 0/1 columns with random constants, and a frame of values it accepts
    (numbers far outside the declared range included)."""
    n_cols = draw(st.integers(1, 4))
    n = draw(st.integers(1, 25))
    columns, frame = [], {}
    for j in range(n_cols):
        kind = draw(st.sampled_from(["numeric", "categorical", "binary"]))
        name = f"c{j}"
        if kind == "numeric":
            lo = draw(st.floats(-100, 100))
            hi = lo + draw(st.floats(0, 100))
            columns.append(Column.numeric(name, lo, hi, draw(st.floats(-100, 100)), draw(st.floats(0.01, 100))))
            frame[name] = draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n))
        elif kind == "categorical":
            cats = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=5, unique=True))
            columns.append(Column.categorical(name, cats))
            frame[name] = draw(st.lists(st.sampled_from(cats), min_size=n, max_size=n))
        else:
            columns.append(Column.binary(name))
            frame[name] = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    frame["unused"] = np.arange(n)  # a column the schema does not list: ignored
    return Schema(tuple(columns), "test"), pd.DataFrame(frame)


@SETTINGS
@given(schema_and_frame(), st.data())
def test_any_schema_encodes_each_row_alone(case, data):
    """For any schema and frame: encoding each row on its own, or any subset of rows in any order, gives the rows of
    the whole frame's encoding; the feature count is the schema's, whatever the rows; and numeric features lie in
    [(lo − center)/scale, (hi − center)/scale] (clipped before scaling, so no outlier moves the others)."""
    schema, frame = case
    whole = schema.transform(frame)
    assert whole.shape == (len(frame), len(schema.feature_names))
    for i in range(len(frame)):
        np.testing.assert_array_equal(schema.transform(frame.iloc[[i]]), whole[i:i + 1])
    rows = np.array(data.draw(st.lists(st.integers(0, len(frame) - 1), min_size=0, max_size=10)), dtype=int)
    np.testing.assert_array_equal(schema.transform(frame.iloc[rows]), whole[rows])  # no rows: shape (0, d)
    j = 0
    for column in schema.columns:
        width = len(column.feature_names)
        if column.kind == "numeric":
            lo, hi = ((column.lo - column.center) / column.scale, (column.hi - column.center) / column.scale)
            assert np.all((whole[:, j] >= lo - 1e-9 * abs(lo)) & (whole[:, j] <= hi + 1e-9 * abs(hi)))
        j += width


# ---- the loaders end to end on part of the raw file -------------------------------------------------------------

def _lines(raw: bytes) -> list[bytes]:
    return raw.split(b"\n")


def _subset_fetch(kept):
    """A replacement for the loaders' fetch: the real (checksummed) files, keeping only the rows ``kept[f]`` of
    file f (line numbers after its header lines); other lines are dropped."""
    real = _tabular.fetch

    def fetch(files, **kwargs):
        out = []
        for raw, keep in zip(real(files, **kwargs), kept):
            lines = _lines(raw)
            header, body = keep["header"], lines[keep["header"]:]
            out.append(b"\n".join(lines[:header] + [body[i] for i in sorted(keep["rows"])]) + b"\n")
        return out

    return fetch


@pytest.fixture(scope="module")
def compas_whole():
    _, table, _, _, whole = _load("compas", all_races=True)
    raw, = _tabular.fetch(_tabular.COMPAS_FILES)
    n_rows = len(pd.read_csv(io.BytesIO(raw), usecols=["id"]))
    return table, whole, n_rows


@LOADS
@given(st.data())
def test_compas_loaded_from_part_of_its_file_gives_each_kept_row_the_same_features(compas_whole, data):
    """Run the compas loader on a random subset of the raw file's rows (ProPublica's filter, the race filter, the
    schema): every defendant that survives has the features, label and group it has when the whole file is loaded
    (matched by the file's ``id``). Reading, filtering and encoding use no other row."""
    table, whole, n_rows = compas_whole
    rows = data.draw(st.lists(st.integers(0, n_rows - 1), min_size=30, max_size=300, unique=True))
    with mock.patch.object(_tabular, "fetch", _subset_fetch([{"header": 1, "rows": rows}])):
        _, part, _, _, features = _load("compas", all_races=True)
    position = pd.Series(np.arange(len(table.frame)), index=table.frame["id"].to_numpy())
    where = position[part.frame["id"].to_numpy()].to_numpy()
    assert 0 < len(where) <= len(rows)  # the loader read the subset
    np.testing.assert_array_equal(features, whole[where])
    np.testing.assert_array_equal(part.y, table.y[where])
    np.testing.assert_array_equal(part.s, table.s[where])


@pytest.fixture(scope="module")
def adult_whole():
    _, table, _, _, whole = _load("adult", sensitive="race")
    raw_train, raw_test = _tabular.fetch(_tabular.ADULT_FILES)
    # a row of the pooled table per raw line without a missing value ('?'), in file order (adult.test: 1 junk line)
    lines = _lines(raw_train) + _lines(raw_test)[1:]
    usable = np.array([bool(line.strip()) and b"?" not in line for line in lines])
    assert usable.sum() == len(table.frame)
    return table, whole, len(_lines(raw_train)), usable


@LOADS
@given(st.data())
def test_adult_loaded_from_part_of_its_files_gives_each_kept_row_the_same_features(adult_whole, data):
    """Run the adult loader on random subsets of the lines of adult.data and adult.test: each kept record without
    a missing value gets the features, label and group it gets from the whole files (records are matched by their
    line: the loader keeps file order and drops exactly the lines holding '?')."""
    table, whole, n_train_lines, usable = adult_whole
    picked = np.array(sorted(data.draw(st.lists(st.integers(0, len(usable) - 1), min_size=30, max_size=300,
                                                 unique=True))))
    train_rows = picked[picked < n_train_lines]
    test_rows = picked[picked >= n_train_lines] - n_train_lines
    kept = [{"header": 0, "rows": train_rows}, {"header": 1, "rows": test_rows}]
    with mock.patch.object(_tabular, "fetch", _subset_fetch(kept)):
        _, part, _, _, features = _load("adult", sensitive="race")
    where = (np.cumsum(usable) - 1)[picked[usable[picked]]]  # row of each kept usable line in the whole table
    assert len(part.frame) == len(where)  # the loader read the subset and dropped exactly the lines with '?'
    np.testing.assert_array_equal(features, whole[where])
    np.testing.assert_array_equal(part.y, table.y[where])
    np.testing.assert_array_equal(part.s, table.s[where])
