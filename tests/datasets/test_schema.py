"""The public schemas: a row's features depend on that row alone (what the record-level privacy unit needs)."""

import dataclasses
import re

import numpy as np
import pandas as pd
import pytest

from dpfair.datasets import _tabular, base, load_dataset
from dpfair.datasets.base import Column, Schema, Table, finish

TABULAR = ["adult", "compas", "german", "credit", "parkinsons", "bank", "communities", "dutch"]


@pytest.fixture
def capture(monkeypatch):
    """Records the table and the split indices of every :func:`finish` call."""
    seen = []
    preprocess = base._preprocess

    def recording(table, train, test):
        seen.append((table, train, test))
        return preprocess(table, train, test)

    monkeypatch.setattr(base, "_preprocess", recording)
    return seen


def _all_rows(data, train, test):
    """The features of every row of the cleaned table, in table order, from wherever the split put it."""
    X = np.empty((len(train) + len(test), data.n_features))
    X[train], X[test] = data.X_train, data.X_test
    return X


@pytest.mark.parametrize("name", TABULAR)
def test_a_rows_features_do_not_depend_on_the_split(shared_data, capture, name):
    first = load_dataset(name, data_home=shared_data, random_state=0)
    other = load_dataset(name, data_home=shared_data, random_state=7)
    (table, train0, test0), (_, train7, test7) = capture
    assert not np.array_equal(train0, train7)  # rows really moved between the parts
    assert first.feature_names == other.feature_names == first.schema.feature_names
    X0, X7 = _all_rows(first, train0, test0), _all_rows(other, train7, test7)
    np.testing.assert_array_equal(X0, X7)
    np.testing.assert_array_equal(X0, first.schema.transform(table.frame))


def _small_table(frame, schema):
    n = len(frame)
    return Table(name="t", y=np.arange(n) % 2, s=(np.arange(n) // 2) % 2, label_names=["0", "1"],
                 group_names=["a", "b"], sensitive="s", description="", licence="", n_dropped=0, frame=frame,
                 schema=schema)


def _encode_all(table):
    index = np.arange(len(table.y))
    X, _, names, schema = base._preprocess(table, index, index[:0])
    return X, names, schema


def test_removing_any_record_changes_no_other_row():
    """Rare category (one record), extreme numeric value: dropping any one record leaves the rest unchanged."""
    rng = np.random.default_rng(0)
    n = 20
    frame = pd.DataFrame({
        "x": rng.normal(10, 3, n).round(2),
        "colour": ["red", "blue"] * 9 + ["green", "blue"],  # green occurs once
        "flag": rng.integers(0, 2, n),
    })
    frame.loc[3, "x"] = 1e6  # an outlier that a fitted scaler would follow
    schema = Schema((Column.numeric("x", 0, 20, 10, 3), Column.categorical("colour", ["red", "green", "blue"]),
                     Column.binary("flag")), source="test")
    X, names, _ = _encode_all(_small_table(frame, schema))
    assert names == ["x", "colour=red", "colour=green", "colour=blue", "flag"]
    assert X[3, 0] == pytest.approx((20 - 10) / 3)  # clipped to hi before scaling
    for r in range(n):
        X_r, names_r, _ = _encode_all(_small_table(frame.drop(index=r).reset_index(drop=True), schema))
        assert names_r == names
        np.testing.assert_array_equal(X_r, np.delete(X, r, axis=0))


def test_adult_without_its_holand_netherlands_record(shared_data, capture):
    load_dataset("adult", data_home=shared_data)
    table = capture[0][0]
    (rare,) = np.flatnonzero(table.frame["native-country"] == "Holand-Netherlands")
    X, names, _ = _encode_all(table)
    rest = dataclasses.replace(table, frame=table.frame.drop(index=rare).reset_index(drop=True),
                               y=np.delete(table.y, rare), s=np.delete(table.s, rare))
    X_rest, names_rest, _ = _encode_all(rest)
    assert "native-country=Holand-Netherlands" in names and names_rest == names
    np.testing.assert_array_equal(X_rest, np.delete(X, rare, axis=0))


def test_a_value_outside_the_schema_is_an_error_naming_the_column_not_the_value():
    frame = pd.DataFrame({"colour": ["red", "purple"] * 5, "x": np.arange(10.0)})
    schema = Schema((Column.categorical("colour", ["red", "blue"]), Column.numeric("x", 0, 9, 4.5, 3)))
    with pytest.raises(ValueError, match=r"column 'colour' holds values outside") as caught:
        finish(_small_table(frame, schema), 0.25, 0)
    assert "purple" not in str(caught.value)  # an error is published: no value of the private rows
    frame["colour"] = ["red", None] * 5
    with pytest.raises(ValueError, match="column 'colour' has missing values"):
        finish(_small_table(frame, schema), 0.25, 0)
    frame["colour"] = "red"
    with pytest.raises(ValueError, match=r"column\(s\) \['y'\] are not in the data"):
        finish(_small_table(frame, Schema(schema.columns + (Column.binary("y"),))), 0.25, 0)
    with pytest.raises(ValueError, match="declared 0/1"):
        finish(_small_table(frame, Schema((Column.binary("x"),))), 0.25, 0)


@pytest.mark.parametrize("bad", [
    dict(name="c", kind="categorical", categories=("a", "a")),
    dict(name="c", kind="categorical"),
    dict(name="x", kind="numeric", lo=1.0, hi=0.0),
    dict(name="x", kind="numeric", scale=0.0),
    dict(name="x", kind="ordinal"),
])
def test_bad_columns_are_refused(bad):
    with pytest.raises(ValueError):
        Column(**bad)


# Options under which every schema column is a feature, and every variant of the files.
FULL = [
    ("adult", dict(sensitive="sex*race", include_sensitive=True)),
    ("compas", dict(include_sensitive=True)),
    ("compas", dict(include_sensitive=True, all_races=True)),
    ("german", dict(include_sensitive=True)),
    ("credit", dict(include_sensitive=True)),
    ("parkinsons", dict(include_sensitive=True)),
    ("bank", dict(include_sensitive=True, keep_duration=True)),
    ("bank", dict(include_sensitive=True, keep_duration=True, variant="full")),
    ("communities", dict(include_sensitive=True)),
    ("dutch", dict(include_sensitive=True)),
]


@pytest.mark.parametrize("name, options", FULL)
def test_declared_schema_covers_the_files_on_disk(shared_data, capture, name, options):
    data = load_dataset(name, data_home=shared_data, **options)
    frame = capture[0][0].frame
    assert data.feature_names == data.schema.feature_names
    for col in data.schema.columns:
        if col.kind == "categorical":
            assert set(frame[col.name].astype(str)) <= set(col.categories), col.name
        elif col.kind == "numeric":
            assert np.isfinite([col.lo, col.hi]).all()
            assert col.lo <= frame[col.name].min() and frame[col.name].max() <= col.hi, col.name  # nothing clipped
        else:
            assert set(frame[col.name]) <= {0, 1}


def _names_categories(path):
    text = path.read_text()
    return {m[1]: [v.strip() for v in m[2].rstrip(".").split(",")]
            for m in re.finditer(r"^([\w-]+): (.*)$", text, flags=re.M) if m[2] != "continuous."}


def test_categories_are_those_of_the_documentation(shared_data):
    documented = _names_categories(shared_data / "adult" / "adult.names")
    for col in _tabular.ADULT_SCHEMA.columns:
        if col.kind == "categorical":
            assert list(col.categories) == documented[col.name]
    header = (shared_data / "dutch" / "dutch_census_2001.arff").read_text().split("@data")[0]
    arff = dict(re.findall(r"^@attribute\s+(\S+)\s+\{([^}]*)\}", header, flags=re.M))
    assert set(arff) == set(_tabular.DUTCH_SCHEMA.names) | {"occupation"}
    for col in _tabular.DUTCH_SCHEMA.columns:
        assert set(col.categories) == set(arff[col.name].split(","))
    doc = (shared_data / "german" / "german.doc").read_text()
    blocks = re.split(r"Att?r?ibute\s+(\d+):", doc)[1:]  # german.doc spells one "Attibute"
    for number, block in zip(blocks[::2], blocks[1::2]):
        codes = re.findall(r"^\s*(A\d+)\s*:", block, flags=re.M)
        name = _tabular.GERMAN_COLUMNS[int(number) - 1]
        if codes:
            assert list(_tabular.GERMAN_SCHEMA[name].categories) == codes
        else:
            assert _tabular.GERMAN_SCHEMA[name].kind == "numeric"
    bank = (shared_data / "bank" / "bank-names.txt").read_text()
    for col in _tabular.BANK_SCHEMA.columns:
        if col.kind == "categorical" and col.name != "month":  # bank-names.txt elides months: "jan", ..., "dec"
            listed = re.search(rf"- {col.name}\b[^(]*\((?:categorical|binary): ([^);]*)[;)]", bank, flags=re.S)
            assert list(col.categories) == re.findall(r'"([^"]+)"', listed[1])


def test_label_thresholds_are_constants(loaded):
    assert "27.576" in loaded("parkinsons").label_names[1]
    assert loaded("communities").label_names == ["ViolentCrimesPerPop<=0.15", "ViolentCrimesPerPop>0.15"]


def test_every_data_set_exposes_what_it_treats_as_public(loaded):
    for name in TABULAR + ["celeba", "synthetic"]:
        data = loaded(name)
        assert data.schema.feature_names == data.feature_names
        assert data.schema.describe().count("\n") == len(data.schema.columns)
    assert loaded("mnist").schema is None  # pixels passed through, each row its own
    assert "clip to [17, 90], (x - 38.5) / 13.2" in loaded("adult").schema.describe()
