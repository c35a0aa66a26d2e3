"""Issue 28: a private fair model from the user's own CSV, from the command line and from Python.

Before: `dpfair train --dataset loans.csv` (and every other spelling) ended in "unknown data set 'loans.csv'", and
`dpfair predict` could not score a file of new rows.
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main
from dpfair.datasets import Schema, read_with_schema
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.persistence import load_estimator, load_provenance


@pytest.fixture(scope="module")
def loans(tmp_path_factory):
    """A loans table that is no built-in: mixed types, string labels and groups, unscaled numbers up to 1e6; the
    new rows hold a credit limit beyond the training range and a job category never seen in training."""
    rng = np.random.default_rng(0)
    n = 3000
    region = rng.choice(["north", "south", "east"], n)
    income = rng.lognormal(10, 0.6, n).round(2)
    limit = rng.uniform(0, 1e6, n).round(0)
    age = rng.integers(18, 90, n)
    job = rng.choice(["clerk", "farmer", "nurse", "teacher"], n)
    logit = 1.5 * (np.log(income) - 10) + 2.5 * (limit / 1e6 - 0.5) + 0.4 * (region == "north")
    default = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    frame = pd.DataFrame({"income": income, "credit_limit": limit, "age": age, "job": job, "region": region,
                          "default": default})
    folder = tmp_path_factory.mktemp("loans")
    frame.iloc[:2500].to_csv(folder / "loans.csv", index=False)
    new = frame.iloc[2500:].drop(columns=["default"]).copy()
    new.iloc[0, new.columns.get_loc("credit_limit")] = 5e6  # out of range: clipped to the schema's hi
    new.iloc[1, new.columns.get_loc("job")] = "pilot"  # unseen: the "other" level
    new = new[list(reversed(new.columns))]  # columns matched by name, not position
    new.to_csv(folder / "new.csv", index=False)
    return folder


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_schema_train_predict_from_the_cli_and_python_agree(loans, capsys):
    code, toml, err = _cli(capsys, "schema", loans / "loans.csv", "--label", "default", "--sensitive", "region")
    assert code == 0 and "review it" in err and 'label = "default"' in toml
    (loans / "schema.toml").write_text(toml)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", ".*read the rows", PrivacyLeakWarning)  # a declared schema reads nothing
        code, out, err = _cli(capsys, "train", "--data", loans / "loans.csv", "--schema", loans / "schema.toml",
                              "--param", "privacy_unit=record", "--epsilon", "4", "--quiet", "--out", loans / "r.json")
    assert code == 0, err
    result = json.loads((loans / "r.json").read_text())
    assert result["dataset"] == "loans" and result["groups"] == ["east", "north", "south"]
    code, out, err = _cli(capsys, "predict", loans / "r.pt", "--input", loans / "new.csv", "--out", loans / "p.csv")
    assert code == 0, err
    cli = pd.read_csv(loans / "p.csv")
    assert len(cli) == 500 and set(cli["default_pred"]) == {"no", "yes"}  # not a constant model

    # the same from Python: the model file carries the schema, which scores the same rows the same way
    model = load_estimator(loans / "r.pt")
    provenance = load_provenance(loans / "r.pt")
    schema = Schema.from_dict(provenance["schema"])
    assert schema.to_dict() == Schema.from_toml(loans / "schema.toml").to_dict()  # the declared one, no statistic
    assert not {"mean", "std", "min", "max"} & set(json.dumps(provenance["schema"]).replace('"', " ").split())
    frame = read_with_schema(loans / "new.csv", schema)
    X = schema.transform(frame, strict=True)
    python = np.asarray(schema.classes, dtype=object)[model.predict(X)]
    assert list(python) == list(cli["default_pred"])
    np.testing.assert_allclose(model.predict_proba(X)[:, 1], cli["proba_yes"], rtol=1e-6)


def test_without_a_schema_the_cli_warns_and_under_record_refuses(loans, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always", PrivacyLeakWarning)  # shown by the CLI on stderr
        code, _, err = _cli(capsys, "train", "--data", loans / "loans.csv", "--label", "default", "--sensitive",
                            "region", "--param", "epochs=1", "--quiet", "--out", loans / "w.json")
    assert code == 0 and re.search("PrivacyLeakWarning: infer_schema read the rows of .*loans.csv", err), err
    code, _, err = _cli(capsys, "train", "--data", loans / "loans.csv", "--label", "default", "--sensitive", "region",
                        "--param", "privacy_unit=record", "--quiet", "--out", loans / "x.json")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "under privacy_unit=record the schema" in err and "dpfair schema" in err and "--infer-schema" in err
    assert not (loans / "x.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["train", "--data", "{loans}/loans.csv", "--dataset", "adult"], "give --data FILE .* or --dataset NAME"),
    (["train", "--label", "default"], "--label goes with --data FILE"),
    (["train", "--data", "{loans}/loans.csv", "--label", "nope", "--sensitive", "region"], "nope"),
    (["train", "--data", "{loans}/missing.csv", "--label", "default", "--sensitive", "region"], "missing.csv"),
    (["train", "--data", "{loans}/loans.xlsx", "--label", "default", "--sensitive", "region"],
     "cannot tell the format"),
])
def test_bad_table_arguments_are_one_line(loans, capsys, argv, message):
    code, _, err = _cli(capsys, *[a.format(loans=loans) for a in argv], "--quiet")
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    assert re.search(message, err), err


@pytest.mark.filterwarnings("default:infer_schema read the rows:dpfair.exceptions.PrivacyLeakWarning")  # asserted below
def test_predict_input_refuses_what_it_cannot_score(loans, capsys, tmp_path):
    code, _, err = _cli(capsys, "train", "--data", loans / "loans.csv", "--label", "default", "--sensitive", "region",
                        "--param", "epochs=1", "--quiet", "--out", tmp_path / "m.json")
    assert code == 0 and "PrivacyLeakWarning: infer_schema read the rows" in err  # no schema: proposed from the rows
    frame = pd.read_csv(loans / "new.csv")
    frame.drop(columns=["age"]).to_csv(tmp_path / "short.csv", index=False)
    frame.assign(extra=1).to_csv(tmp_path / "long.csv", index=False)
    for name, word in (("short.csv", "age"), ("long.csv", "extra")):
        code, _, err = _cli(capsys, "predict", tmp_path / "m.pt", "--input", tmp_path / name)
        assert code == 2 and word in err and len(err.strip().splitlines()) == 1, err
    code, _, err = _cli(capsys, "predict", tmp_path / "m.pt", "--input", loans / "new.csv", "--part", "train")
    assert code == 2 and "--part" in err
    code, _, err = _cli(capsys, "train", "--dataset", "synthetic", "--param", "epochs=1", "--quiet", "--out",
                        tmp_path / "b.json")
    assert code == 0, err
    code, _, err = _cli(capsys, "predict", tmp_path / "b.pt", "--input", loans / "new.csv")
    assert code == 2 and "records no table schema" in err


@pytest.fixture
def schema_file(loans, capsys, tmp_path):
    """The loans table's schema, as `dpfair schema` proposes it (reviewed: declared)."""
    code, toml, err = _cli(capsys, "schema", loans / "loans.csv", "--label", "default", "--sensitive", "region")
    assert code == 0, err
    (tmp_path / "schema.toml").write_text(toml)
    return tmp_path / "schema.toml"


def test_predict_input_streams_in_batches_and_writes_what_one_batch_writes(loans, schema_file, capsys, tmp_path,
                                                                           monkeypatch):
    """Issue 44: `predict --input` reads, scores and writes a record batch at a time; the file it writes is the one a
    single batch writes, byte for byte, and a folder of parts scores as one table."""
    from dpfair.datasets import store

    code, _, err = _cli(capsys, "train", "--data", loans / "loans.csv", "--schema", schema_file,
                        "--param", "epochs=1", "--quiet", "--out", tmp_path / "m.json")
    assert code == 0, err
    code, whole, err = _cli(capsys, "predict", tmp_path / "m.pt", "--input", loans / "new.csv", "--out",
                            tmp_path / "whole.csv")
    assert code == 0, err
    monkeypatch.setattr(store, "CELLS_PER_BATCH", 7 * 60)  # 60 rows of 7 columns a batch: 9 batches of 500 rows
    code, batched, err = _cli(capsys, "predict", tmp_path / "m.pt", "--input", loans / "new.csv", "--out",
                              tmp_path / "batched.csv")
    assert code == 0, err
    assert (tmp_path / "batched.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()
    assert batched.replace("batched.csv", "whole.csv") == whole  # the same summary
    parts = tmp_path / "parts"
    parts.mkdir()
    frame = pd.read_csv(loans / "new.csv", dtype=str, keep_default_na=False)
    frame.iloc[:200].to_csv(parts / "a.csv", index=False)
    frame.iloc[200:].to_csv(parts / "b.csv", index=False)
    code, _, err = _cli(capsys, "predict", tmp_path / "m.pt", "--input", parts, "--out", tmp_path / "parts.csv")
    assert code == 0, err
    assert (tmp_path / "parts.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()


def test_predict_input_that_fails_mid_file_leaves_no_output(loans, schema_file, capsys, tmp_path, monkeypatch):
    """A row the method cannot score in the last batch: one line, and neither the output nor a temporary file."""
    from dpfair.datasets import store

    code, _, err = _cli(capsys, "train", "--data", loans / "loans.csv", "--schema", schema_file,
                        "--method", "threshold", "--quiet", "--out", tmp_path / "t.json")
    assert code == 0, err
    frame = pd.read_csv(loans / "new.csv", dtype=str, keep_default_na=False)
    frame.loc[len(frame) - 1, "region"] = ""  # no group in the last row; threshold reads the group
    frame.to_csv(tmp_path / "gap.csv", index=False)
    monkeypatch.setattr(store, "CELLS_PER_BATCH", 6 * 100)
    out = tmp_path / "scored" / "p.csv"
    out.parent.mkdir()
    code, _, err = _cli(capsys, "predict", tmp_path / "t.pt", "--input", tmp_path / "gap.csv", "--out", out,
                        "--quiet")
    assert code == 2 and "reads the group at prediction time" in err and len(err.strip().splitlines()) == 1, err
    assert list(out.parent.iterdir()) == []


def test_train_on_a_partitioned_folder_with_a_store_on_disk(loans, schema_file, capsys, tmp_path):
    """`train --data FOLDER --store disk --cache-dir DIR`: the parts as one table, the store written once and
    reused by the next run, which trains the same model."""
    root = tmp_path / "warehouse"
    frame = pd.read_csv(loans / "loans.csv", dtype=str, keep_default_na=False)
    for region, part in frame.groupby("region"):
        (root / f"region={region}").mkdir(parents=True)
        part.drop(columns="region").to_csv(root / f"region={region}" / "part-0.csv", index=False)
    cache = tmp_path / "stores"
    for run in ("a", "b"):
        code, out, err = _cli(capsys, "train", "--data", root, "--schema", schema_file, "--param",
                              "epochs=1", "--store", "disk", "--cache-dir", cache, "--quiet", "--out",
                              tmp_path / f"{run}.json")
        assert code == 0, err
    a, b = (json.loads((tmp_path / f"{run}.json").read_text()) for run in ("a", "b"))
    assert a["n_train"] + a["n_test"] == 2500 and a["test_error"] == b["test_error"]
    assert len(list(cache.glob("*.f32"))) == 1 and not [p for p in cache.iterdir() if "tmp" in p.name]
