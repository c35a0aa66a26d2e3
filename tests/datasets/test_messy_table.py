"""Issue 42: a lender's messy export goes schema -> train -> predict -> measure with no hand cleaning."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main
from dpfair.datasets import Column, Schema, load_table, make_messy_loans, propose_schema
from dpfair.datasets.cleaning import MissingRule, NumberFormat, Transform
from dpfair.exceptions import PrivacyLeakWarning, SmallGroupWarning


@pytest.fixture(scope="module")
def messy(tmp_path_factory):
    """``(folder, proposal)``: the messy table as CSV and Parquet (8,000 training rows), new rows to score."""
    folder = tmp_path_factory.mktemp("messy")
    table = make_messy_loans(10_000, random_state=3)
    table.iloc[:8000].to_csv(folder / "loans.csv", index=False)
    table.iloc[:8000].to_parquet(folder / "loans.parquet", index=False)
    new = table.iloc[8000:8100].drop(columns="approved").reset_index(drop=True)
    new.loc[0, "region"] = "Central"            # unseen
    new.loc[1, "income"] = "9,000,000"           # over the range
    new.loc[2, "age"] = "-3"                     # under the range
    new.loc[3, "debt_ratio"] = "NA"              # missing
    new.to_csv(folder / "new.csv", index=False)
    proposal = propose_schema(folder / "loans.csv", label="approved", sensitive="ethnicity")
    (folder / "loans.toml").write_text(proposal.to_toml())
    return folder, proposal


def _without_source(schema):
    data = schema.to_dict()
    data.pop("source")
    return data


def test_csv_and_parquet_of_one_table_propose_the_same_schema(messy):
    folder, proposal = messy
    parquet = propose_schema(folder / "loans.parquet", label="approved", sensitive="ethnicity")
    assert _without_source(parquet.schema) == _without_source(proposal.schema)
    assert [d.line() for d in parquet.decisions] == [d.line() for d in proposal.decisions]


def test_every_ignored_merged_parsed_or_transformed_column_is_named_with_its_reason(messy):
    _, proposal = messy
    why = {d.column: d.line() for d in proposal.decisions}
    assert set(why) == set(make_messy_loans(50).columns)  # every column, the label and sensitive one included
    assert "ignored: looks like an identifier" in why["applicant_id"]
    assert "ignored: a date" in why["applied_on"] and 'kind = "date"' in why["applied_on"]
    assert "leading zeros: a code, read as text" in why["zip"] and why["zip"].startswith("ignored")
    assert "ignored: text over 50 values" in why["notes"]
    assert "near-duplicate categories merged" in why["region"] and "'NORTH', 'North', 'north'" in why["region"]
    assert "thousands separators: parsed as '1,234.5'" in why["income"] and "log1p proposed" in why["income"]
    assert "currency signs" in why["loan_amount"]
    for column in ("income", "age", "debt_ratio", "employment_years", "purpose", "owns_home"):
        assert "% missing" in why[column] and ("indicator" in why[column] or "<missing>" in why[column]), column
    schema = proposal.schema
    assert schema["region"].categories == ("East", "North", "South", "West") and schema["region"].normalize
    assert schema["income"].transform == Transform("log1p") and schema["income"].parse == NumberFormat("1,234.5")
    assert set(schema.ignore) == {"applicant_id", "applied_on", "zip", "notes"}


def test_the_proposal_as_it_stands_trains_within_two_points_of_logistic_regression(messy):
    from sklearn.linear_model import LogisticRegression

    from dpfair.algorithms import DPFERMIClassifier

    folder, _ = messy
    data = load_table(folder / "loans.csv", schema=folder / "loans.toml", privacy_unit="record")
    assert np.isfinite(data.X_train).all() and data.X_train.shape[1] == len(data.feature_names)
    lr = LogisticRegression(max_iter=2000).fit(data.X_train, data.y_train)
    model = DPFERMIClassifier(epsilon=1.0, lam=0.0, privacy_unit="record", groups=len(data.group_names),
                              classes=2, random_state=0)
    with warnings.catch_warnings():  # lam=0 constrains no group: that some ethnicity × sex cells are small is moot
        warnings.filterwarnings("ignore", r"DP-FERMI: group\(s\) ", SmallGroupWarning)
        model.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    gap = (1 - model.score(data.X_test, data.y_test)) - (1 - lr.score(data.X_test, data.y_test))
    assert gap < 0.03  # issue 42 asks 0.02 at 30,000 rows (benchmarks/messy_table.py); 8,000 here


# the table's rarest ethnicity × sex cells are small: the fit and the measurement say so, shown (not an error) and
# asserted below
@pytest.mark.filterwarnings("default::dpfair.exceptions.SmallGroupWarning")  # its message has a colon
@pytest.mark.filterwarnings("default:too few people behind:dpfair.exceptions.UtilityWarning")
def test_the_command_line_path_needs_no_pandas_step(messy, tmp_path, monkeypatch, capsys):
    folder, _ = messy
    monkeypatch.chdir(tmp_path)
    assert main(["schema", str(folder / "loans.csv"), "--label", "approved", "--sensitive", "ethnicity,sex",
                 "--out", "schema.toml"]) == 0
    err = capsys.readouterr().err
    assert "applicant_id" in err and "looks like an identifier" in err and "near-duplicate" in err
    assert main(["train", "--data", str(folder / "loans.csv"), "--schema", "schema.toml", "--param",
                 "privacy_unit=record", "--epsilon", "1", "--out", "loans.json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "each person's whole record (ethnicity × sex" in out and "Other & F" in out
    assert "dpfair: SmallGroupWarning: DP-FERMI: group(s) " in err
    assert main(["predict", "loans.pt", "--input", str(folder / "new.csv"), "--keep", "applicant_id",
                 "--out", "pred.csv"]) == 0
    out = capsys.readouterr().out
    assert "cells of region            1 unlisted, sent to other" in out
    assert "cells of income" in out and "1 clipped to range" in out
    assert "cells of age" in out and "cells of debt_ratio" in out and "missing, filled" in out
    predictions = pd.read_csv("pred.csv", dtype=str)
    new = pd.read_csv(folder / "new.csv", dtype=str)
    assert list(predictions["applicant_id"]) == list(new["applicant_id"])  # joins by ID, row for row
    assert predictions["approved_pred"].isin(["Yes", "No"]).all()
    assert main(["measure", "--model", "loans.pt", "--data", str(folder / "loans.csv"), "--epsilon", "1",
                 "--out", "m.json"]) == 0
    assert "dpfair: UtilityWarning: too few people behind " in capsys.readouterr().err
    record = json.loads(open("m.json").read())
    assert "Black & F" in record["groups"] and record["protects"].startswith("each person's ethnicity × sex")


def test_declared_rules_round_trip_through_toml_and_the_model_file_form():
    schema = Schema(
        (Column.numeric("income", 1000, 5e6, parse="1.234,5", transform="log", missing={"fill": 40000,
                                                                                        "indicator": True}),
         Column.numeric("share", 0, 1, parse="1234.5%", on_out_of_range="missing", missing="drop"),
         Column.numeric("amount", -1e6, 1e6, parse="1,234.5", transform={"bins": [0, 1000, 10000]}),
         Column.categorical("region", ["North", "South"], normalize=True, aliases={"N.": "North"}, other=True,
                            missing={"indicator": True}),
         Column.binary("owns", missing={"fill": 0, "indicator": True}),
         Column.date("applied_on", ["year", "month"], lo=2015, hi=2030, missing={"indicator": True})),
        "test", "y", ("no", "yes"), ("ethnicity", "sex"), {"ethnicity": ["A", "B"], "sex": ["F", "M"]},
        missing_values=("", "NA", "?"), label_missing="drop")
    assert Schema.from_toml(schema.to_toml()) == schema
    assert Schema.from_dict(json.loads(json.dumps(schema.to_dict()))) == schema
    assert schema.groups == ("A & F", "A & M", "B & F", "B & M") and schema.attribute == "ethnicity × sex"


def test_each_rule_reads_one_cell():
    income = Column.numeric("income", 1000, 5e6, parse="1.234,5", transform="log",
                            missing={"fill": 40000, "indicator": True})
    block, dropped = income.features(pd.Series(["40.000", "€ 1.234,5", "", "NA", "(2.000)"]))
    expected = (np.log(np.clip([40000, 1234.5, 40000, 40000, -2000], 1000, 5e6)) - income.center) / income.scale
    np.testing.assert_allclose(block[:, 0], expected, rtol=1e-12)
    np.testing.assert_array_equal(block[:, 1], [0, 0, 1, 1, 0]) and not dropped.any()
    share = Column.numeric("share", 0, 1, parse="1234.5%", on_out_of_range="missing", missing="drop")
    block, dropped = share.features(pd.Series(["12.5%", "50", "250%", ""]))
    np.testing.assert_allclose(block[:2, 0], [0.125 * 2 - 1, 0.0])
    np.testing.assert_array_equal(dropped, [False, False, True, True])
    bins = Column.numeric("amount", -1e6, 1e6, transform={"bins": [0, 1000]})
    np.testing.assert_array_equal(bins.features(pd.Series([-5, 0, 999, 5000]))[0],
                                  [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]])
    assert bins.feature_names == ["amount<0", "amount=[0,1000)", "amount>=1000"]
    region = Column.categorical("region", ["North", "South"], normalize=True, aliases={"N.": "North"}, other=True)
    np.testing.assert_array_equal(region.features(pd.Series(["NORTH", " north ", "n.", "South", "Mars"]))[0],
                                  [[1, 0, 0], [1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    date = Column.date("d", ["year", "weekday"], lo=2020, hi=2030)
    block = date.features(pd.Series(["2025-01-06", "2040-02-29"]))[0]  # a Monday; a year clipped to 2030
    np.testing.assert_allclose(block[:, 0], [0.0, 1.0])
    assert block[0, 1] == 1 and block[:, 1:].sum() == 2
    with pytest.raises(ValueError, match=r"column 'age' holds values outside its declared domain \[18, 100\]"):
        Column.numeric("age", 18, 100, on_out_of_range="error").features(pd.Series(["30", "-3"]), "new.csv")
    with pytest.raises(ValueError, match=r"not plain numbers .*; declare how they are written, e.g. parse"):
        Column.numeric("income", 0, 1e6).features(pd.Series(["12,500"]))
    for bad, match in (({"fill": "x"}, "must be a finite number"), ("skip", "must be \"error\", \"drop\""),
                       ({"indicator": 1}, "true or false")):
        with pytest.raises(ValueError, match=match):
            MissingRule.from_spec(bad, "numeric", "column 'x'")
    with pytest.raises(ValueError, match="unknown number format"):
        NumberFormat("1_234.5")


def test_a_dropped_row_changes_no_other_rows_features_and_the_sensitive_unit_refuses_a_drop_on_groups(tmp_path):
    schema = Schema((Column.numeric("x", 0, 10, missing="drop"),), "t", "y", ("0", "1"), "s", ("a", "b"),
                    sensitive_missing="drop")
    frame = pd.DataFrame({"x": ["1", "", "7", "3"], "y": ["0", "1", "1", "0"], "s": ["a", "b", "", "a"]})
    full = schema.prepare(frame, targets=True)
    np.testing.assert_array_equal(full.kept, [True, False, False, True])
    less = schema.prepare(frame.drop(index=1), targets=True)  # a neighbouring table: one record removed
    np.testing.assert_array_equal(less.X, full.X)
    with pytest.raises(ValueError, match=r"\"drop\" in the schema|declared dropped"):
        schema.transform(frame)
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match="sensitive_missing = \"drop\" drops rows by whether a private group"):
        load_table(tmp_path / "t.csv", schema=schema, privacy_unit="sensitive")


def test_the_proposer_still_warns_that_it_read_the_rows(messy):
    from dpfair.datasets import infer_schema

    folder, _ = messy
    with pytest.warns(PrivacyLeakWarning, match=r"read the rows .* the missing cells.*left out 'applicant_id'"):
        infer_schema(folder / "loans.csv", label="approved", sensitive="ethnicity")
