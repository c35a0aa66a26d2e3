"""Issue 27, item 8: `dpfair tune` and PrivateSearch refuse candidates and settings that cannot mean what they say,
before any data is loaded or any release is made.

Before: `--grid lam=a,b`, `--grid lam=-1,2` and `--validation-size 1.5` ran (the constrained strategy never tried
the grid's values, nor held rows out), and the JSON recorded the grid ["a", "b"] beside a chosen λ of 1.27.
"""

from __future__ import annotations

import math

import pytest

import dpfair.datasets
from dpfair.algorithms import DPSGDClassifier
from dpfair.cli import main
from dpfair.datasets import make_synthetic
from dpfair.selection import PrivateSearch
from tests.selection.stub import StubClassifier

FAST = ["--dataset", "synthetic", "--quiet", "--param", "epochs=1"]


@pytest.fixture
def no_data(monkeypatch):
    """Fails the test if a command loads any data: its refusal must come first."""
    def refuse(*args, **kwargs):
        raise AssertionError("the data were loaded before the refusal")

    monkeypatch.setattr(dpfair.datasets, "load_dataset", refuse)


@pytest.mark.parametrize("argv, match", [
    (["--grid", "lam=a,b"], "the grid's candidate {'lam': 'a'}: lam must be a number >= 0, got 'a'"),
    (["--grid", "lam=-1,2"], "the grid's candidate {'lam': -1}: lam must be >= 0"),
    (["--grid", "lam=1e999"], "lam must be a finite number"),
    (["--grid", "lam=a,b", "--strategy", "random-stopping"], "lam must be a number >= 0, got 'a'"),
    (["--validation-size", "1.5"], "validation_size must lie in [0, 1)"),
    (["--validation-size", "-0.1", "--strategy", "random-stopping"], "validation_size must lie in [0, 1)"),
    (["--validation-size", "nan"], "validation_size must lie in [0, 1)"),
    (["--validation-size", "0.2"], "the constrained strategy scores none"),
    (["--grid", "lam=0,1", "--grid", "epochs=0,1"], "epochs must be > 0"),
])
def test_tune_refuses_before_loading_anything(tmp_path, capsys, no_data, argv, match):
    code = main(["tune", *FAST, *argv, "--out", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    assert code == 2 and match in err and err.count("\n") == 1 and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # no JSON with the grid ["a", "b"], no model


def test_train_refuses_an_infinite_lam_before_loading_anything(tmp_path, capsys, no_data):
    """Before: `--lam inf` trained (test error 0.470, every violation 0: a constant classifier)."""
    for argv in (["--lam", "inf"], ["--param", "lam=1e999"], ["--param", "learning_rate=1e999"]):
        code = main(["train", *FAST, *argv, "--out", str(tmp_path / "m.json")])
        err = capsys.readouterr().err
        assert code == 2 and "must be a finite number" in err and err.count("\n") == 1
    assert not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def data():
    return make_synthetic(300, random_state=0)


def _stub(**params):
    """The closed-form stub (tests/selection/stub.py): λ as DP-FERMI's, the constrained strategy included."""
    return StubClassifier(**{"groups": 2, "classes": 2, "random_state": 0, **params})


@pytest.mark.parametrize("estimator, grid, settings, match", [
    (_stub(), {"lam": ["a", "b"]}, {}, "lam must be a number"),
    (_stub(), {"lam": [-1.0, 2.0]}, {}, "lam must be >= 0"),
    (_stub(), {"lam": [math.inf]}, {}, "lam must be a finite number"),
    (_stub(), {"lam": [0.0, 1.0]}, {"validation_size": 1.5}, "validation_size must lie in"),
    (_stub(), {"lam": [0.0, 1.0]}, {"validation_size": "half"}, "validation_size must lie in"),
    (_stub(), {"lam": [0.0, 1.0]}, {"validation_size": 0.3}, "the constrained strategy scores none"),
    (_stub(), {"lam": [0.0, 1.0]}, {"penalty": math.inf}, "penalty must be finite"),
    (DPSGDClassifier(epochs=1, groups=2, classes=2), {"max_grad_norm": [1.0, -1.0]},
     {"strategy": "random_stopping"}, "max_grad_norm must be > 0"),
])
def test_a_bad_candidate_or_setting_costs_no_privacy(data, release_spy, estimator, grid, settings, match):
    search = PrivateSearch(estimator, grid, epsilon=1.0, notion="demographic_parity", random_state=0, **settings)
    with pytest.raises(ValueError, match=match):
        search.check_hyperparameters()  # no data needed
    X, y, s = data
    with pytest.raises(ValueError, match=match):
        search.fit(X, y, sensitive_features=s)
    assert sum(release_spy.calls.values()) == 0 and release_spy.outside_draws == 0


def test_good_settings_pass_the_check(data):
    PrivateSearch(_stub(), {"lam": [0.0, 2]}, validation_size=0.0).check_hyperparameters()
    PrivateSearch(_stub(), {"lam": [0.0, 2]}, strategy="random_stopping", validation_size=0.2).check_hyperparameters()
