"""`dpfair methods`, `info` and `predict`; flags checked before any data is loaded; what `train` prints and writes
(issue 13, items 2 and 11)."""

import json
import os
import re
import stat
import subprocess
import sys

import pytest

from dpfair.algorithms import METHODS
from dpfair.algorithms.catalog import describe_parameters, parameter_docs
from dpfair.cli import main

FAST = ["--dataset", "synthetic", "--quiet", "--param", "epochs=2"]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


#: Methods whose full default training (the whole adult train part) takes half a minute or more on 2 cores.
SLOW_DEFAULTS = {"dp-sgd", "pf-ld", "private-demographics", "reductions"}


@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_DEFAULTS else m
                                    for m in sorted(METHODS)])
@pytest.mark.filterwarnings("default::dpfair.exceptions.UtilityWarning")  # each default's warnings: test_defaults
def test_every_method_trains_with_no_other_argument(method, tmp_path, capsys, monkeypatch):
    """Done-when of issue 13: `dpfair train --method M` works with no other argument for every registered M
    (it once refused the non-private methods: "drop --epsilon" though none was given)."""
    monkeypatch.chdir(tmp_path)
    code, stdout, err = run(capsys, "train", "--method", method)
    assert code == 0, err
    (result,) = (tmp_path / "dpfair-runs").glob("*.json")
    assert json.loads(result.read_text())["method"] == method and "test error" in stdout


@pytest.mark.parametrize("argv,match", [
    (["--method", "dp-postprocess", "--notion", "demographic_parity"], "targets equalized_odds"),
    (["--method", "erm", "--notion", "equalized_odds"], "targets no fairness notion"),
    (["--method", "threshold", "--notion", "accuracy_parity"], "targets demographic_parity, equalized_odds"),
    (["--method", "dp-oracle", "--lam", "2"], "--param tolerance="),
    (["--param", "bogus=1"], "dpfair methods dp-fermi"),
    (["--method", "nope"], "unknown method"),
])
def test_flag_errors_come_before_the_data_is_loaded(argv, match, capsys, monkeypatch):
    """Argument errors arrived after a 3–6 s data load; a notion the method rejects was offered by --help."""
    import dpfair.datasets

    def no_loading(*args, **kwargs):
        raise AssertionError("the data set was loaded before the flags were checked")

    monkeypatch.setattr(dpfair.datasets, "load_dataset", no_loading)
    code, _, err = run(capsys, "train", "--quiet", *argv)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1


def test_a_notion_the_method_is_built_for_is_accepted(tmp_path, capsys):
    out = tmp_path / "p.json"
    code, stdout, err = run(capsys, "train", "--dataset", "synthetic", "--quiet", "--method", "dp-postprocess",
                            "--notion", "equalized_odds", "--out", str(out))
    assert code == 0, err
    assert "target: equalized odds, tolerance = 0" in stdout.splitlines()[0]  # it never said what it targeted
    assert json.loads(out.read_text())["target"] == {"notion": "equalized_odds", "tolerance": 0.0}


def test_info_and_predict_read_back_a_trained_model(tmp_path, capsys):
    out = tmp_path / "m.json"
    code, _, err = run(capsys, "train", *FAST, "--lam", "2", "--option", "n_samples=2000", "--seed", "3",
                       "--out", str(out))
    assert code == 0, err
    trained = json.loads(out.read_text())
    model = str(tmp_path / "m.pt")

    code, stdout, err = run(capsys, "info", model)
    assert code == 0, err
    assert "dp-fermi (DPFERMIClassifier), target: demographic parity, λ = 2" in stdout
    assert "synthetic (n_samples=2000)" in stdout and "split seed 3" in stdout and "epsilon spent" in stdout
    code, stdout, _ = run(capsys, "info", model, "--json")
    info = json.loads(stdout)
    assert info["trained_on"]["dataset"] == "synthetic" and info["epsilon"] == pytest.approx(trained["epsilon"])
    assert info["trained_on"]["dataset_options"] == {"n_samples": 2000} and info["hyperparameters"]["lam"] == 2

    preds = tmp_path / "p.csv"
    code, stdout, err = run(capsys, "predict", model, "--out", str(preds))
    assert code == 0, err
    import pandas as pd

    table = pd.read_csv(preds)
    assert len(table) == trained["n_test"] and {"y_true", "y_pred", "group", "proba_0", "proba_1"} <= set(table)
    assert (table.y_pred != table.y_true).mean() == pytest.approx(trained["test_error"])
    assert re.search(rf"\n  test error +{trained['test_error']:.4f}\n", stdout)  # aligned to the longest label
    code, _, err = run(capsys, "predict", model, "--out", str(preds))
    assert code == 2 and "already exists" in err
    code, _, err = run(capsys, "predict", model, "--option", "n_features=3")
    assert code == 2 and "fitted on 10 features" in err


def test_info_of_a_file_that_is_not_a_model_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.pt"
    bad.write_bytes(b"not a model")
    code, _, err = run(capsys, "info", str(bad))
    assert code == 2 and str(bad) in err and len(err.strip().splitlines()) == 1


def test_methods_lists_every_method_with_its_notions(capsys):
    code, stdout, _ = run(capsys, "methods")
    assert code == 0 and all(name in stdout for name in METHODS)
    code, stdout, _ = run(capsys, "methods", "--json")
    rows = {r["method"]: r for r in json.loads(stdout)}
    assert rows["dp-postprocess"]["notions"] == ["equalized_odds"] and rows["erm"]["notions"] == []
    code, stdout, _ = run(capsys, "methods", "dp-fermi")
    assert code == 0 and "lam=1.0" in stdout and "weight of the ERMI regulariser" in stdout


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_hyper_parameter_is_documented(method):
    """Hyper-parameters were discoverable only by provoking an error: each now has its docstring line,
    which `dpfair methods M` prints."""
    undocumented = [p.name for p in describe_parameters(METHODS[method]) if not p.description]
    assert not undocumented, f"{METHODS[method].__name__} does not document {undocumented}"


def test_parameter_docs_read_numpydoc_entries():
    class Doc:
        """Summary.

        Parameters
        ----------
        a, b : first line
            continued.
        c : other.

        Fitted attributes: not parameters.
        """

    assert parameter_docs(Doc) == {"a": "first line continued.", "b": "first line continued.", "c": "other."}


def test_result_files_are_readable_by_others_as_open_would_make_them(tmp_path, capsys):
    """mkstemp made result files mode 0600."""
    old = os.umask(0o022)
    try:
        code, _, err = run(capsys, "train", *FAST, "--method", "erm", "--out", str(tmp_path / "r.json"))
    finally:
        os.umask(old)
    assert code == 0, err
    for name in ("r.json", "r.pt"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


def test_import_dpfair_stays_light():
    """`import dpfair` took 4.5 s; it must not pull in torch or matplotlib."""
    code = "import sys, dpfair; print(sorted(m for m in ('torch', 'matplotlib', 'sklearn') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
