"""Folktables ACSIncome from a local file, on a small synthetic ACS PUMS person file."""

import numpy as np
import pandas as pd
import pytest

from dpfair import cli
from dpfair.datasets import dataset_info, load_acs_income, load_dataset
from dpfair.exceptions import DataNotFoundError

N_KEPT = 300
FEATURES = ["AGEP", "COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "WKHP", "SEX", "RAC1P"]
# One row per filter, each failing exactly one condition of folktables' adult_filter (NaN fails a comparison).
DROPPED = [
    {"AGEP": 16}, {"AGEP": 5}, {"PINCP": 100}, {"PINCP": -4000}, {"PINCP": np.nan},
    {"WKHP": 0}, {"WKHP": np.nan}, {"PWGTP": 0},
]


def _kept_rows(rng) -> pd.DataFrame:
    """Rows passing every filter, with distinct (AGEP, WKHP) so that each row can be found again from its features."""
    grid = rng.choice(83 * 98, N_KEPT, replace=False)  # WKHP 2-99: the boundary rows below have WKHP 1
    rows = pd.DataFrame({
        "RT": "P", "SERIALNO": "2018GQ0000001", "ST": 6,
        "AGEP": 17 + grid // 98, "COW": rng.integers(1, 10, N_KEPT), "SCHL": rng.integers(1, 25, N_KEPT),
        "MAR": rng.integers(1, 6, N_KEPT), "OCCP": rng.choice([10, 440, 1021, 2205, 4720, 9830, 9920], N_KEPT),
        "POBP": rng.choice([1, 56, 72, 110, 207, 303, 440, 501], N_KEPT), "RELP": rng.integers(0, 18, N_KEPT),
        "WKHP": 2 + grid % 98, "SEX": rng.integers(1, 3, N_KEPT), "RAC1P": rng.integers(1, 10, N_KEPT),
        "PINCP": rng.integers(101, 120_000, N_KEPT), "PWGTP": rng.integers(1, 300, N_KEPT),
    })
    rows.loc[:3, ["AGEP", "WKHP", "PINCP", "PWGTP"]] = [[17, 1, 101, 1], [18, 1, 50_000, 1], [19, 1, 50_001, 1],
                                                         [20, 1, 50_000, 1]]
    rows["COW"] = rows["COW"].astype(float)
    rows.loc[4, "COW"] = np.nan  # folktables codes a missing feature 0
    return rows


@pytest.fixture
def pums(tmp_path):
    """``(path, kept)``: a PUMS-like person CSV and the rows the filters must keep."""
    rng = np.random.default_rng(0)
    kept = _kept_rows(rng)
    base = kept.iloc[10].to_dict()
    dropped = pd.DataFrame([{**base, **change} for change in DROPPED])
    raw = pd.concat([kept.iloc[:150], dropped, kept.iloc[150:]], ignore_index=True)
    path = tmp_path / "psam_p06.csv"
    raw.to_csv(path, index=False)
    return path, kept


def _original_rows(data, kept):
    """The rows of ``kept`` behind each train and test row, found from the AGEP and WKHP features."""
    key = {(a, w): i for i, (a, w) in enumerate(zip(kept["AGEP"], kept["WKHP"]))}
    j_age, j_hours = data.feature_names.index("AGEP"), data.feature_names.index("WKHP")
    X = np.vstack([data.X_train, data.X_test])
    age, hours = np.rint(X[:, j_age] * 41 + 58).astype(int), np.rint(X[:, j_hours] * 49 + 50).astype(int)
    return X, kept.iloc[[key[(a, w)] for a, w in zip(age, hours)]].reset_index(drop=True)


def test_filters_label_groups_and_encoding(pums):
    path, kept = pums
    data = load_dataset("acs_income", path=path)
    assert len(data.y_train) + len(data.y_test) == N_KEPT and data.n_dropped == 0
    assert f"({N_KEPT + len(DROPPED):,} rows;" in data.description and f"leave {N_KEPT:,})" in data.description
    X, rows = _original_rows(data, kept)
    assert rows.index.size == N_KEPT and rows[["AGEP", "WKHP"]].drop_duplicates().shape[0] == N_KEPT
    y, s = np.concatenate([data.y_train, data.y_test]), np.concatenate([data.s_train, data.s_test])
    np.testing.assert_array_equal(y, (rows["PINCP"] > 50_000).astype(int))
    assert data.label_names == ["PINCP<=50000", "PINCP>50000"]
    np.testing.assert_array_equal(s, np.where(rows["SEX"] == 2, 0, 1))
    assert data.group_names == ["Female", "Male"] and data.sensitive == "SEX"

    names = data.feature_names
    assert not any(f.startswith("SEX") for f in names) and "RAC1P=9" in names
    assert data.n_features == 2 + 10 + 25 + 5 + 101 + 7 + 18 + 9
    for column in ["COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "RAC1P"]:
        block = [j for j, f in enumerate(names) if f.startswith(f"{column}=")]
        np.testing.assert_array_equal(X[:, block].sum(axis=1), 1)

    def onehot(feature):
        return X[:, names.index(feature)] == 1

    cow = rows["COW"].fillna(0).astype(int)
    assert all(onehot(f"COW={c}")[i] for i, c in enumerate(cow)) and onehot("COW=0").sum() == 1
    occp = {10: "00", 440: "04", 1021: "10", 2205: "22", 4720: "47", 9830: "98", 9920: "99"}
    pobp = {1: "US state or DC", 56: "US state or DC", 72: "US island area", 110: "Europe", 207: "Asia",
            303: "Americas", 440: "Africa", 501: "Oceania or at sea"}
    for i, row in rows.iterrows():
        assert onehot(f"OCCP={occp[row['OCCP']]}")[i] and onehot(f"POBP={pobp[row['POBP']]}")[i]
        assert onehot(f"SCHL={row['SCHL']}")[i] and onehot(f"RELP={row['RELP']}")[i]
    assert X[:, names.index("AGEP")].min() >= -1 and X[:, names.index("WKHP")].max() <= 1


def test_race_groups_and_include_sensitive(pums):
    path, kept = pums
    race = load_acs_income(path=path, sensitive="RAC1P")
    assert race.n_groups == 9 and race.group_names[0] == "White" and race.group_names[8] == "Two or More Races"
    _, rows = _original_rows(race, kept)
    np.testing.assert_array_equal(np.concatenate([race.s_train, race.s_test]), rows["RAC1P"] - 1)
    assert {"SEX=1", "SEX=2"} <= set(race.feature_names) and not any(f.startswith("RAC1P") for f in race.feature_names)
    with_sex = load_acs_income(path=path, include_sensitive=True)
    assert with_sex.n_features == load_acs_income(path=path).n_features + 2
    with pytest.raises(ValueError, match="'sex'.*SEX, RAC1P"):
        load_dataset("acs_income", path=path, sensitive="sex")


def test_pre_extracted_file_gives_the_same_data(pums, tmp_path):
    """Folktables' export (features as floats, a missing code already 0, PINCP as True/False) reads the same."""
    path, kept = pums
    export = kept[FEATURES].astype(float).fillna(0.0).assign(PINCP=kept["PINCP"] > 50_000)
    export.to_csv(tmp_path / "acsincome.csv", index=False)
    from_export = load_acs_income(path=tmp_path / "acsincome.csv")
    from_pums = load_acs_income(path=path)
    for a, b in zip(from_export.train + from_export.test, from_pums.train + from_pums.test):
        np.testing.assert_array_equal(a, b)
    assert "pre-extracted" in from_export.description
    # The income instead of the label: the PINCP and AGEP filters apply.
    kept[FEATURES + ["PINCP"]].to_csv(tmp_path / "income.csv", index=False)
    assert load_acs_income(path=tmp_path / "income.csv").n_features == from_pums.n_features


def test_data_home_lookup_and_gzip(pums, tmp_path):
    path, _ = pums
    folder = tmp_path / "home" / "acs_income"
    folder.mkdir(parents=True)
    pd.read_csv(path).to_csv(folder / "acs_income.csv.gz", index=False)
    data = load_dataset("acs_income", data_home=tmp_path / "home")
    assert len(data.y_train) + len(data.y_test) == N_KEPT
    info = dataset_info("acs_income", data_home=tmp_path / "home")
    assert info["on_disk"] and info["rows"] == N_KEPT and info["groups"] == ["Female", "Male"]


def test_missing_file_says_what_where_and_how(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(DataNotFoundError) as error:
        load_dataset("acs_income", data_home=tmp_path)
    message = str(error.value)
    assert "\n" not in message and "'acs_income.csv'" in message
    assert "https://www2.census.gov/programs-surveys/acs/data/pums/2018/1-Year/" in message
    assert "pip install folktables" in message
    assert f"put it at {tmp_path / 'acs_income' / 'acs_income.csv'}" in message
    info = dataset_info("acs_income", data_home=tmp_path)
    assert info["on_disk"] is False and info["files"] == ["acs_income/acs_income.csv"]
    assert cli.main(["datasets", "--data-home", str(tmp_path)]) == 0
    line = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("acs_income"))
    assert line.split()[1] == "no"


@pytest.mark.parametrize("change, word", [
    ({"RELP": "RELSHIPP"}, "RELSHIPP instead of RELP"),
    ({"OCCP": None}, "OCCP"),
])
def test_files_it_cannot_read(pums, tmp_path, change, word):
    path, _ = pums
    frame = pd.read_csv(path)
    for old, new in change.items():
        frame = frame.rename(columns={old: new}) if new else frame.drop(columns=old)
    frame.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match=word):
        load_acs_income(path=tmp_path / "bad.csv")


def test_codes_outside_the_schema_are_errors(pums, tmp_path):
    path, _ = pums
    frame = pd.read_csv(path)
    frame.loc[0, "MAR"] = 7
    frame.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="column 'MAR' holds values outside its declared categories") as caught:
        load_acs_income(path=tmp_path / "bad.csv")
    assert "'7'" not in str(caught.value)  # an error is published: the schema's errors show no value of the rows


@pytest.mark.parametrize("column, value, message", [
    ("WKHP", "forty", r"column WKHP holds 'forty' on line 2, not a number"),
    ("SCHL", 12.5, r"column SCHL holds 12.5 on line 2, not an integer code"),
    ("SEX", 3, r"column SEX holds 3 on line 2, outside its 2 groups \(codes 1-2\)"),
])
def test_bad_values_are_named_by_file_column_and_line(pums, tmp_path, column, value, message):
    """Issue 27 item 9. Before: "acs_income: a feature holds a non-integer code", "could not convert string to
    float: 'forty'" or "SEX holds a code outside its 2 groups", naming neither the file nor the column or row."""
    path, _ = pums
    frame = pd.read_csv(path)
    frame[column] = frame[column].astype(object)
    frame.loc[0, column] = value
    bad = tmp_path / "bad.csv"
    frame.to_csv(bad, index=False)
    with pytest.raises(ValueError, match=message) as caught:
        load_acs_income(path=bad)
    assert str(bad) in str(caught.value)


@pytest.mark.parametrize("content, message", [
    ("", r"not a readable CSV file"),
    ("AGEP,COW,SCHL,MAR,OCCP,POBP,RELP,WKHP,SEX,RAC1P,PINCP,PWGTP\n", "holds no rows, only a header"),
    ("AGEP,COW,SCHL,MAR,OCCP,POBP,RELP,WKHP,SEX,RAC1P,PINCP,PWGTP\n5,1,1,1,10,1,1,1,1,1,500,1\n",
     "none of its 1 rows passes folktables' filters"),
])
def test_empty_or_unreadable_files_are_named(tmp_path, content, message):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    with pytest.raises(ValueError, match=message) as caught:
        load_acs_income(path=bad)
    assert str(bad) in str(caught.value)
