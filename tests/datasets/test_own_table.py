"""Issue 28, part A: a user's own table (CSV or Parquet) through a public schema, to a Dataset and a private model."""

import importlib.util
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpfair.algorithms import DPFERMIClassifier
from dpfair.datasets import Column, Schema, infer_schema, load_dataset, load_table, read_table
from dpfair.datasets.base import OTHER, as_text
from dpfair.exceptions import PrivacyLeakWarning

HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None

#: The loans table's schema as a user declares it (public facts: documented ranges and codes, not the rows').
LOANS_TOML = """
source = "loan application form, version 3 (declared by the credit team)"
label = "default"
classes = ["no", "yes"]
sensitive = "sex"
groups = ["F", "M"]
ignore = ["applicant_id"]

[[columns]]
name = "age"
kind = "numeric"
lo = 18
hi = 100

[[columns]]
name = "credit_limit"
kind = "numeric"
lo = 0
hi = 1e6

[[columns]]
name = "utilisation"
kind = "numeric"
lo = 0
hi = 1
center = 0.5
scale = 0.5

[[columns]]
name = "region"
kind = "categorical"
categories = ["north", "south", "east"]
other = true

[[columns]]
name = "owns_home"
kind = "binary"
"""


def loans(n: int, seed: int, regions=("north", "south", "east")) -> pd.DataFrame:
    """A loans table that is not a built-in data set: ints, floats up to 1e6, text, string label and groups, a
    column with values outside its declared range [0, 1], and an identifier."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 80, n)
    limit = rng.uniform(500, 1e6, n).round(2)
    utilisation = rng.uniform(0, 1, n).round(3)
    utilisation[:: 25] = 7.5  # out of range: a data-entry error the declared range clips
    region = rng.choice(list(regions), n)
    z = 3 * (limit / 1e6 - 0.5) + 1.5 * (region == "south") - 0.02 * (age - 50) - 0.5
    return pd.DataFrame({
        "applicant_id": [f"A{seed}-{i:05d}" for i in range(n)],
        "age": age,
        "credit_limit": limit,
        "utilisation": utilisation,
        "region": region,
        "owns_home": rng.integers(0, 2, n),
        "sex": rng.choice(["F", "M"], n),
        "default": np.where(rng.random(n) < 1 / (1 + np.exp(-z)), "yes", "no"),
    })


@pytest.fixture
def files(tmp_path):
    """``(train.csv, test.csv, schema.toml)``: the test file holds a region unseen in training ("west")."""
    train, test = tmp_path / "loans.csv", tmp_path / "loans_new.csv"
    loans(3000, 0).to_csv(train, index=False)
    loans(600, 1, regions=("north", "south", "east", "west")).to_csv(test, index=False)
    schema = tmp_path / "schema.toml"
    schema.write_text(LOANS_TOML)
    return train, test, schema


def test_own_csv_with_a_declared_schema_gives_a_useful_private_model(files):
    """Before: no way to read a user's file, and its unscaled columns (up to 1e6) gave DP-FERMI a constant model.
    Through the declared schema: clipped, scaled features, the unseen region in "other", a non-constant model."""
    train, test, schema_file = files
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)  # a declared schema reads nothing from the rows
        data = load_table(train, schema=schema_file, test_data=test, privacy_unit="record")
    assert data.name == "loans" and len(data.y_train) == 3000 and len(data.y_test) == 600
    assert data.label_names == ["no", "yes"] and data.group_names == ["F", "M"]
    assert data.feature_names == ["age", "credit_limit", "utilisation", "region=north", "region=south",
                                  "region=east", f"region={OTHER}", "owns_home"]
    assert np.abs(np.vstack([data.X_train, data.X_test])).max() <= 1.0  # every numeric column within [-1, 1]
    raw_test = pd.read_csv(test)
    unseen = (raw_test["region"] == "west").to_numpy()
    assert unseen.any() and np.array_equal(data.X_test[:, 6] == 1, unseen)
    clipped = (raw_test["utilisation"] > 1).to_numpy()
    assert clipped.any() and np.all(data.X_test[clipped, 2] == 1.0)
    np.testing.assert_array_equal(data.y_test, (raw_test["default"] == "yes").to_numpy())
    np.testing.assert_array_equal(data.s_test, (raw_test["sex"] == "M").to_numpy())

    model = DPFERMIClassifier(epsilon=4.0, delta=1e-5, epochs=10, groups=data.n_groups, classes=data.n_classes,
                              random_state=0).fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    predicted = model.predict(data.X_test)
    majority = np.bincount(data.y_test).max() / len(data.y_test)
    assert set(np.unique(predicted)) == {0, 1}
    assert (predicted == data.y_test).mean() > majority + 0.1  # the signal is strong (|logit slope| up to 3)

    # Scoring new rows: the schema applies the same preprocessing, columns matched by name in any order.
    shuffled = raw_test[raw_test.columns[::-1]]
    np.testing.assert_array_equal(data.schema.transform(shuffled, strict=True).astype(np.float32), data.X_test)
    np.testing.assert_array_equal(model.predict(data.schema.transform(shuffled.drop(columns=["default", "sex"]),
                                                                      strict=True)), predicted)


def test_a_split_of_one_file_stratifies_as_the_built_ins_do(files):
    train, _, schema_file = files
    data = load_table(train, schema=Schema.from_toml(schema_file).to_dict(), test_size=0.2, random_state=3)
    assert len(data.y_test) == 600 and "stratified by label × group, seed 3" in data.description
    train_cells, test_cells = (np.bincount(2 * y + s, minlength=4) / len(y) for y, s in (data.train[1:], data.test[1:]))
    np.testing.assert_allclose(train_cells, test_cells, atol=0.01)


def test_infer_schema_proposes_one_and_says_it_read_the_rows():
    frame = loans(500, 0)
    with pytest.warns(PrivacyLeakWarning, match=r"read the rows .* ranges of 'age', 'credit_limit', 'utilisation'.*"
                      r"categories of 'region'.*classes of 'default' and the groups of 'sex'.*left out "
                      r"'applicant_id'.*declare it public"):
        schema = infer_schema(frame, label="default", sensitive="sex")
    assert schema.names == ["age", "credit_limit", "utilisation", "region", "owns_home"]
    assert [c.kind for c in schema.columns] == ["numeric", "numeric", "numeric", "categorical", "binary"]
    assert schema.ignore == ("applicant_id",) and schema.classes == ("no", "yes") and schema.groups == ("F", "M")
    age, limit = schema["age"], schema["credit_limit"]
    assert (age.lo, age.hi) == (frame["age"].min(), frame["age"].max())  # integer span 61: whole numbers
    assert limit.lo <= frame["credit_limit"].min() and limit.hi >= frame["credit_limit"].max()
    assert (limit.lo, limit.hi) == (0.0, 1e6)  # rounded outward to two significant digits of the span
    assert (limit.center, limit.scale) == (5e5, 5e5)  # the range maps onto [-1, 1]
    assert schema["region"].categories == ("east", "north", "south") and schema["region"].other


def test_load_table_without_a_schema_warns_and_refuses_under_the_record_unit(files):
    train, _, _ = files
    with pytest.raises(ValueError, match=r"privacy_unit='record'.*schema=.*infer_under_record=True"):
        load_table(train, label="default", sensitive="sex", privacy_unit="record")
    for options in ({}, {"privacy_unit": "record", "infer_under_record": True}):
        with pytest.warns(PrivacyLeakWarning, match="read the rows of '.*loans.csv'"):
            data = load_table(train, label="default", sensitive="sex", **options)
        assert "inferred from the training rows: a statistic of them, not public" in data.description
        assert data.label_names == ["no", "yes"] and data.schema.ignore == ("applicant_id",)
    with pytest.raises(ValueError, match="needs label= and sensitive="):
        load_table(train, label="default")


@pytest.mark.parametrize("drop, match", [
    ("default", r"loans.csv: no label column 'default'"),
    ("sex", r"loans.csv: no sensitive column 'sex'"),
    ("credit_limit", r"loans.csv: the schema's column\(s\) \['credit_limit'\] are not in the data"),
])
def test_a_missing_column_is_one_error_naming_it_and_the_file(files, drop, match):
    train, _, schema_file = files
    pd.read_csv(train).drop(columns=[drop]).to_csv(train, index=False)
    with pytest.raises(ValueError, match=match) as error:
        load_table(train, schema=schema_file)
    assert "\n" not in str(error.value)


def test_an_unknown_column_and_a_bad_test_file_are_errors(files):
    train, test, schema_file = files
    pd.read_csv(test).assign(notes="x").to_csv(test, index=False)
    with pytest.raises(ValueError, match=r"loans_new.csv: column\(s\) \['notes'\] are not in the schema; drop them "
                                         r"from the data or list them in the schema's ignore"):
        load_table(train, schema=schema_file, test_data=test)
    schema = Schema.from_toml(schema_file)
    with pytest.raises(ValueError, match=r"new rows: the schema's column\(s\) \['age'\] are not in the data"):
        schema.transform(loans(5, 2).drop(columns=["age"]), "new rows", strict=True)
    with pytest.raises(ValueError, match="label='y' but the schema declares label = 'default'"):
        load_table(train, schema=schema, label="y")
    features_only = Schema(schema.columns, ignore=("applicant_id",))
    with pytest.raises(ValueError, match=r"the schema declares no label column; add label = \"...\" and its classes"):
        load_table(train, schema=features_only, label="default", sensitive="sex")
    pd.read_csv(test).drop(columns="notes").assign(default="maybe").to_csv(test, index=False)
    with pytest.raises(ValueError, match=r"the label column 'default' holds values outside the declared "
                                         r"classes \['no', 'yes'\] \(the values .* not shown.*add them to the schema's "
                                         r"classes") as caught:
        load_table(train, schema=schema, test_data=test)
    assert "maybe" not in str(caught.value)  # an error is published: no value of the private rows


def test_read_table_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match=r"loans.xlsx: cannot tell the format.*\.csv"):
        read_table(tmp_path / "loans.xlsx")
    with pytest.raises(FileNotFoundError, match="not found"):
        read_table(tmp_path / "absent.csv")
    loans(10, 0).to_csv(tmp_path / "loans.tsv.gz", sep="\t", index=False)
    assert read_table(tmp_path / "loans.tsv.gz").shape == (10, 8)


@pytest.mark.skipif(HAS_PYARROW, reason="pyarrow is installed")
def test_parquet_without_pyarrow_names_the_install(tmp_path):
    (tmp_path / "loans.parquet").write_bytes(b"PAR1")
    with pytest.raises(ValueError, match=r"loans.parquet: reading Parquet needs pyarrow: pip install pyarrow"):
        read_table(tmp_path / "loans.parquet")


@pytest.mark.skipif(not HAS_PYARROW, reason="pyarrow is not installed")
def test_parquet_reads_as_the_csv_does(files, tmp_path):
    train, test, schema_file = files
    for csv in (train, test):
        pd.read_csv(csv).to_parquet(tmp_path / f"{csv.stem}.parquet")
    from_csv = load_table(train, schema=schema_file, test_data=test)
    from_parquet = load_table(tmp_path / "loans.parquet", schema=schema_file, test_data=tmp_path / "loans_new.parquet")
    np.testing.assert_array_equal(from_parquet.X_train, from_csv.X_train)
    np.testing.assert_array_equal(from_parquet.y_test, from_csv.y_test)


# ------------------------------------------------------------------------------------- the schema's forms

def _user_schema() -> Schema:
    return Schema((Column.numeric("income", 0, 1e6), Column.numeric("score", -np.inf, np.inf, 3.5, 2.0),
                   Column.categorical("region", ["n", "s"], other=True), Column.binary("flag"),
                   Column.categorical("race", ["a", "b", "c"], encodes_sensitive=True)),
                  'declared "by hand"\tline 2', label="y", classes=["0", "1"], sensitive="sex", groups=["F", "M"],
                  ignore=["id"])


def test_dict_and_toml_round_trips(tmp_path):
    schema = _user_schema()
    assert Schema.from_dict(json.loads(json.dumps(schema.to_dict(), allow_nan=False))) == schema
    assert Schema.from_toml(schema.to_toml()) == schema
    (tmp_path / "s.toml").write_text(schema.to_toml())
    assert Schema.from_toml(tmp_path / "s.toml") == Schema.from_toml(str(tmp_path / "s.toml")) == schema
    assert schema.feature_names == ["income", "score", "region=n", "region=s", f"region={OTHER}", "flag", "race=a",
                                    "race=b", "race=c"]


@pytest.mark.parametrize("name", ["synthetic", "adult"])
def test_built_in_schemas_round_trip_too(name):
    schema = load_dataset(name).schema  # adult is embedded in the package: no data home needed
    assert Schema.from_toml(schema.to_toml()) == schema == Schema.from_dict(json.loads(json.dumps(schema.to_dict())))


@pytest.mark.parametrize("change, match", [
    ({"colour": 1}, r"schema: unknown key 'colour'; valid: version, source"),
    ({"version": 3}, r"schema: version 3 is not one this dpfair reads"),
    ({"classes": ["yes"]}, r"schema: classes \(of label 'y'\) must be a list of at least 2 distinct"),
    ({"groups": "FM"}, r"schema: groups .*must be a list"),
    ({"label": "income"}, r"schema: the label column 'income' may not also be a feature"),
    ({"columns": [{"name": "income", "kind": "numeric", "low": 0}]},
     r"schema: columns\[0\] \('income'\): unknown key 'low' for a numeric column; valid: name, kind, lo, hi"),
    ({"columns": [{"name": "income", "kind": "numeric", "lo": "0", "hi": 1}]},
     r"schema: columns\[0\] \('income'\).lo must be a number, got '0'"),
    ({"columns": [{"name": "income", "kind": "numeric", "lo": 0}]},
     r"schema: columns\[0\] \('income'\): give its public range lo and hi"),
    ({"columns": [{"name": "c", "kind": "categorical"}]}, r"columns\[0\] \('c'\).categories must be a list"),
    ({"columns": [{"name": "c", "kind": "ordinal"}]}, r"columns\[0\] \('c'\).kind must be one of numeric"),
    ({"columns": [{"name": "c", "kind": "binary", "other": True}]}, r"unknown key 'other' for a binary column"),
    ({"ignore": ["sex"]}, r"ignore lists \['sex'\], which the schema also uses"),
])
def test_bad_schemas_get_one_line_naming_the_key(change, match):
    data = {**_user_schema().to_dict(), **change}
    with pytest.raises(ValueError, match=match) as error:
        Schema.from_dict(data)
    assert "\n" not in str(error.value)


def test_bad_toml_names_the_file(tmp_path):
    (tmp_path / "s.toml").write_text("label = \n")
    with pytest.raises(ValueError, match=r"s.toml: not valid TOML: .*line 1"):
        Schema.from_toml(tmp_path / "s.toml")
    with pytest.raises(ValueError, match="schema file .*absent.toml' not found"):
        Schema.from_toml(str(tmp_path / "absent.toml"))


def test_encoding_rules():
    """Declared scaling, the other level (missing values too), text of integer codes, and one-line value errors."""
    column = Column.numeric("x", 10, 30)
    assert (column.center, column.scale) == (20.0, 10.0)
    np.testing.assert_array_equal(column.encode(pd.Series([0, 10, 25, 1e9])), [[-1.0], [-1.0], [0.5], [1.0]])
    region = Column.categorical("region", ["n", "s"], other=True)
    np.testing.assert_array_equal(region.encode(pd.Series(["s", "w", None])), [[0, 1, 0], [0, 0, 1], [0, 0, 1]])
    assert list(as_text(pd.Series([1.0, 2.0, np.nan, 2.5]))) == ["1", "2", None, "2.5"]
    codes = Column.categorical("code", ["1", "2"])
    np.testing.assert_array_equal(codes.encode(pd.Series([2.0, 1.0])), [[0, 1], [1, 0]])  # a CSV column with a gap
    with pytest.raises(ValueError, match=r"column 'x' is declared numeric but holds cells that are not plain numbers"):
        column.encode(pd.Series(["12", "twelve"]))
    with pytest.raises(ValueError, match=r"column 'x' has missing values; declare missing = \"drop\" or \{fill"):
        column.encode(pd.Series(["12", "n/a"]))  # a token read as missing (pandas' list, unless declared)
    with pytest.raises(ValueError,
                       match=r"outside its declared categories \['1', '2'\] \(.*\); add them, declare other"):
        codes.encode(pd.Series(["3"]))


def test_declared_sensitive_encodings_reach_the_dataset(files):
    """A column the schema declares as encoding s (here s itself, kept as a feature) is in sensitive_columns."""
    train, _, schema_file = files
    schema = Schema.from_toml(schema_file)
    kept = Schema(schema.columns + (Column.categorical("sex", ["F", "M"]),), schema.source, schema.label,
                  schema.classes, schema.sensitive, schema.groups, schema.ignore)
    data = load_table(train, schema=kept)
    assert data.sensitive_feature_names == ["sex=F", "sex=M"]
    flagged = Schema((*schema.columns[:-1], Column.binary("owns_home", encodes_sensitive=True)), schema.source,
                     schema.label, schema.classes, schema.sensitive, schema.groups, schema.ignore)
    assert load_table(train, schema=flagged).sensitive_feature_names == ["owns_home"]
