"""Every ε the command line prints or writes names whom it protects (issue 41, item 4): DP-FERMI (each person's
sensitive attribute) and DP-SGD (whole records) once printed the same bare ``epsilon spent`` line, only `dpfair
info` showed the unit, ``--privacy-unit`` did not exist, and the Atkinson index's parameter was printed as another
"ε". Also item 7: an ε after a schema read off the rows says what it does not cover."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main

FAST = ["--dataset", "synthetic", "--quiet", "--param", "epochs=2"]
SENSITIVE = "each person's group; their features and label public"
RECORD = "each person's whole record (group, features and label)"
GROUPS = "group 0,group 1"


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def epsilon_lines(stdout: str) -> list[str]:
    """The printed lines that state an ε spent or claimed: a table row whose label is an ε (not an audit's lower
    bound, which is a finding, nor the row saying what ε does not cover), or ``ε =`` / ``epsilon =`` a number."""
    lines = []
    for line in stdout.splitlines():
        label = re.split(r"\s{2,}", line.strip())[0]
        if label.startswith("("):  # a note about ε, not an ε
            continue
        stated = re.search(r"(ε|epsilon)\s*=\s*[0-9]", line)
        if stated or (re.search(r"epsilon|ε", label) and "lower bound" not in label and "not covered" not in label):
            lines.append(line)
    return lines


def assert_every_epsilon_names_its_unit(stdout: str, protects: str) -> None:
    lines = epsilon_lines(stdout)
    assert lines, stdout
    for line in lines:
        assert protects in line or "not private: protects no one" in line, line
    assert "Atkinson index (ε" not in stdout


@pytest.fixture(scope="module")
def sensitive_sex_name():
    """The synthetic data set's sensitive column, as the commands name it."""
    from dpfair.datasets import load_dataset

    return load_dataset("synthetic").sensitive


def test_train_names_the_attribute_under_each_unit(tmp_path, capsys, sensitive_sex_name):
    assert sensitive_sex_name == "group"
    out = tmp_path / "s.json"
    stdout = run(capsys, "train", *FAST, "--epsilon", "2", "--out", str(out))
    assert_every_epsilon_names_its_unit(stdout, SENSITIVE)
    assert "Atkinson index (aversion 1)" in stdout
    result = json.loads(out.read_text())
    assert result["privacy_unit"] == "sensitive" and result["protects"] == SENSITIVE
    out = tmp_path / "r.json"
    stdout = run(capsys, "train", *FAST, "--method", "dp-sgd", "--privacy-unit", "record", "--epsilon", "2",
                 "--out", str(out))
    assert_every_epsilon_names_its_unit(stdout, RECORD)
    result = json.loads(out.read_text())
    assert result["privacy_unit"] == "record" and result["protects"] == RECORD
    out = tmp_path / "f.json"
    stdout = run(capsys, "train", *FAST, "--privacy-unit", "record", "--epsilon", "2", "--out", str(out))
    assert_every_epsilon_names_its_unit(stdout, RECORD)
    assert json.loads(out.read_text())["hyperparameters"]["privacy_unit"] == "record"


def test_a_non_private_method_says_it_protects_no_one(tmp_path, capsys):
    stdout = run(capsys, "train", *FAST, "--method", "erm", "--out", str(tmp_path / "e.json"))
    assert "epsilon spent                  inf (not private: protects no one)" in stdout
    assert json.loads((tmp_path / "e.json").read_text())["protects"] == "not private: protects no one"


def test_info_predict_and_measure_name_the_unit(tmp_path, capsys):
    model, predictions = tmp_path / "m.pt", tmp_path / "p.csv"
    run(capsys, "train", *FAST, "--epsilon", "2", "--out", str(tmp_path / "m.json"))
    assert_every_epsilon_names_its_unit(run(capsys, "info", str(model)), SENSITIVE)
    info = json.loads(run(capsys, "info", str(model), "--json"))
    assert info["protects"] == SENSITIVE and info["privacy_unit"] == "sensitive"
    stdout = run(capsys, "predict", str(model), "--out", str(predictions), "--eval-epsilon", "1")
    assert_every_epsilon_names_its_unit(stdout, "each person's group; their")
    assert "ε = 1, δ = 0 for each person's group; their label and prediction public" in stdout
    out = tmp_path / "measure.json"
    stdout = run(capsys, "measure", "--predictions", str(predictions), "--label", "y_true", "--prediction",
                 "y_pred", "--sensitive", "group", "--groups", GROUPS, "--epsilon", "1", "--out", str(out), "--quiet")
    assert_every_epsilon_names_its_unit(stdout, "each person's group; their label and prediction public")
    assert json.loads(out.read_text())["protects"] == "each person's group; their label and prediction public"
    stdout = run(capsys, "measure", "--predictions", str(predictions), "--label", "y_true", "--prediction",
                 "y_pred", "--sensitive", "group", "--groups", GROUPS, "--epsilon", "1", "--privacy-unit",
                 "record", "--out", str(tmp_path / "measure-r.json"), "--quiet")
    assert_every_epsilon_names_its_unit(stdout, "each person's whole record (group, label and prediction)")


def test_tune_certify_audits_and_the_accountant_name_the_unit(tmp_path, capsys):
    # half of each run's ε on DP-FERMI's group counts: synthetic's groups are then not too small to be fair on
    stdout = run(capsys, "tune", *FAST, "--epsilon", "1", "--grid", "lam=0,1", "--strategy", "random-stopping",
                 "--param", "proportions_budget=0.5", "--out", str(tmp_path / "t.json"))
    assert_every_epsilon_names_its_unit(stdout, SENSITIVE)
    assert json.loads((tmp_path / "t.json").read_text())["protects"] == SENSITIVE
    stdout = run(capsys, "certify", "--dataset", "synthetic", "--draws", "0", "--quiet", "--epsilon", "2",
                 "--privacy-unit", "record", "--out", str(tmp_path / "c.json"))
    assert_every_epsilon_names_its_unit(stdout, RECORD)
    stdout = run(capsys, "audit", "--method", "dp-fermi", *FAST, "--runs", "4", "--rows", "200",
                 "--param", "proportions_budget=0.5", "--privacy-unit", "sensitive", "--out", str(tmp_path / "a.json"))
    assert_every_epsilon_names_its_unit(stdout, SENSITIVE)
    assert json.loads((tmp_path / "a.json").read_text())["protects"] == SENSITIVE
    stdout = run(capsys, "audit", "release", "--mechanism", "laplace", "--releases", "1000", "--quiet",
                 "--out", str(tmp_path / "r.json"))
    assert_every_epsilon_names_its_unit(stdout, "one person's contribution (neighbours add or remove it)")
    stdout = run(capsys, "accountant", "--noise", "1", "--delta", "1e-5", "--sampling-rate", "0.01", "--steps",
                 "100", "--privacy-unit", "sensitive")
    assert_every_epsilon_names_its_unit(stdout, "each person's sensitive attribute; their features and label public")


def test_privacy_unit_flag_checks(tmp_path, capsys):
    for argv, match in (
            (["--method", "erm", "--privacy-unit", "record"], "not private"),
            (["--privacy-unit", "record", "--param", "privacy_unit=sensitive"], "give one"),
            (["--method", "dp-sgd", "--privacy-unit", "sensitive"], "protects privacy_unit=record only")):
        assert main(["train", *FAST, *argv, "--out", str(tmp_path / "x.json")]) == 2
        assert match in capsys.readouterr().err


@pytest.fixture
def own_table(tmp_path):
    """A user's table with a group of 3 people in 600 rows."""
    rng = np.random.default_rng(0)
    n = 600
    group = np.where(np.arange(n) < 3, "z", rng.choice(["a", "b"], size=n))
    x = rng.normal(size=n)
    path = tmp_path / "own.csv"
    pd.DataFrame({"x": x, "g": group, "y": (x + rng.normal(size=n) > 0).astype(int)}).to_csv(path, index=False)
    return path


# the command prints them, one line each: the schema read off the rows (the subject) and the 3-person group 'z'
@pytest.mark.filterwarnings("default:infer_schema read the rows:dpfair.exceptions.PrivacyLeakWarning",
                            "default::dpfair.exceptions.SmallGroupWarning")
def test_a_group_list_read_off_the_rows_is_said_not_covered(own_table, tmp_path, capsys):
    base = ["train", "--data", str(own_table), "--label", "y", "--sensitive", "g", "--quiet", "--param", "epochs=2"]
    out = tmp_path / "inferred.json"
    stdout = run(capsys, *base, "--out", str(out))
    line = next(line for line in stdout.splitlines() if line.strip().startswith("not covered by ε"))
    assert "the group list read off the rows" in line and "--groups" in line
    assert "the group list read off the rows" in json.loads(out.read_text())["not_covered"]
    # declared: nothing is read off s, so nothing is left uncovered under the sensitive unit
    out = tmp_path / "declared.json"
    stdout = run(capsys, *base, "--groups", "a,b,z,w", "--out", str(out))
    assert "  not covered by ε  " not in stdout and "not_covered" not in json.loads(out.read_text())
    assert json.loads(out.read_text())["groups"] == ["a", "b", "z", "w"]
    # a value outside the declared list is refused, and not named
    assert main([*base, "--groups", "a,b", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "outside the declared groups" in err and "'z'" not in err.split("groups")[1].split("[")[0]
    # under the record unit the whole schema is read off the rows
    stdout = run(capsys, *base, "--privacy-unit", "record", "--infer-schema", "--out", str(tmp_path / "r.json"))
    assert "the schema read off the rows" in next(line for line in stdout.splitlines()
                                                  if line.strip().startswith("not covered by ε"))
