"""Every data set records which of its features encode the sensitive attribute (issue 26, part 3).

``Dataset.sensitive_columns`` is public schema information: the features ``include_sensitive=True`` keeps that
define the declared attribute, none without it. Checked against the data themselves: the recorded columns are
among the features ``include_sensitive`` adds, and s is a function of them on every row.
"""

import numpy as np
import pandas as pd
import pytest

from dpfair.datasets import load_acs_income, load_dataset

# (data set, options, the schema column(s) whose features encode s under include_sensitive=True)
WITH_S = [
    ("adult", dict(sensitive="sex"), ["sex"]),
    ("adult", dict(sensitive="race"), ["race"]),
    ("adult", dict(sensitive="race_binary"), ["race"]),
    ("adult", dict(sensitive="sex*race"), ["race", "sex"]),
    ("compas", dict(sensitive="race"), ["race"]),  # sex is kept too, but does not encode race
    ("compas", dict(sensitive="sex"), ["sex"]),
    ("compas", dict(sensitive="race", all_races=True), ["race"]),
    ("german", dict(sensitive="sex"), ["personal_status_sex"]),
    ("german", dict(sensitive="age"), ["age"]),
    ("credit", {}, ["SEX"]),
    ("parkinsons", {}, ["sex"]),
    ("bank", {}, ["age"]),
    ("bank", dict(n_groups=5), ["age"]),
    ("communities", {}, ["racePctWhite"]),
    ("dutch", {}, ["sex"]),
    ("celeba", dict(sensitive="Young"), ["Young"]),
]


def _source(feature: str) -> str:
    """The schema column a feature comes from (``race=White`` → ``race``)."""
    return feature.split("=", 1)[0]


def _determines(X: np.ndarray, s: np.ndarray) -> bool:
    """Whether s is a function of the rows of X (every distinct row has one value of s)."""
    frame = pd.DataFrame(X).assign(s=s)
    return bool((frame.groupby(list(range(X.shape[1])))["s"].nunique() == 1).all())


@pytest.mark.parametrize("name, options, columns", WITH_S, ids=lambda v: str(v))
def test_include_sensitive_records_the_columns_that_encode_s(loaded, name, options, columns):
    data = loaded(name, include_sensitive=True, **options)
    without = loaded(name, **options)
    assert without.sensitive_columns == () and without.sensitive_feature_names == []
    names = data.sensitive_feature_names
    assert sorted({_source(f) for f in names}) == sorted(columns)
    assert names == [f for f in data.feature_names if _source(f) in columns]  # every feature of those columns
    assert set(names) <= set(data.feature_names) - set(without.feature_names)
    cols = list(data.sensitive_columns)
    assert _determines(np.vstack([data.X_train, data.X_test])[:, cols], np.concatenate([data.s_train, data.s_test]))


def test_acs_income_records_its_sensitive_column(tmp_path):
    rng = np.random.default_rng(0)
    n = 80
    frame = pd.DataFrame({"AGEP": rng.integers(17, 90, n), "COW": rng.integers(1, 9, n),
                          "SCHL": rng.integers(1, 24, n), "MAR": rng.integers(1, 5, n),
                          "OCCP": rng.choice([10, 440, 2205], n), "POBP": rng.choice([6, 207], n),
                          "RELP": rng.integers(0, 17, n), "WKHP": rng.integers(1, 99, n),
                          "SEX": rng.integers(1, 3, n), "RAC1P": rng.integers(1, 10, n),
                          "PINCP": rng.integers(0, 2, n)})
    path = tmp_path / "acs_income.csv"
    frame.to_csv(path, index=False)
    assert load_acs_income(path=path).sensitive_columns == ()
    for sensitive, prefix in (("SEX", "SEX="), ("RAC1P", "RAC1P=")):
        data = load_acs_income(path=path, sensitive=sensitive, include_sensitive=True)
        assert data.sensitive_feature_names == [f for f in data.feature_names if f.startswith(prefix)]
        assert _determines(np.vstack([data.X_train, data.X_test])[:, list(data.sensitive_columns)],
                           np.concatenate([data.s_train, data.s_test]))


def test_mnist_inverted_group_is_drawn_in_every_pixel(loaded):
    inverted = loaded("mnist")
    assert inverted.sensitive == "inverted" and inverted.sensitive_columns == tuple(range(784))
    assert loaded("mnist", sensitive="class").sensitive_columns == ()  # the group is the label, not a feature


def test_data_sets_without_s_among_their_features_record_none(loaded):
    assert loaded("synthetic").sensitive_columns == ()  # features shifted by group: proxies, not encodings
    assert loaded("adult", preset="dp-fermi").sensitive_columns == ()


def test_hidden_sensitive_values_keep_the_record(shared_data):
    data = load_dataset("german", include_sensitive=True, missing_sensitive=0.2, data_home=shared_data)
    assert data.sensitive_feature_names[0].startswith("personal_status_sex=")
