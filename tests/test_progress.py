"""Progress on long operations (issue 13, items 3 and 7): one helper, one switch, one bar per operation."""

import logging
import math
import re
from pathlib import Path

import pytest
from sklearn.exceptions import NotFittedError

from dpfair.utils import progress as progress_module
from dpfair.algorithms import (
    METHODS,
    DPFERMIClassifier,
    DPSGDClassifier,
    ERMClassifier,
    PFLDClassifier,
    fit_dpfermi_grid,
)
from dpfair.audit.games import audit_epsilon
from dpfair.cli import main
from dpfair.datasets import make_synthetic
from dpfair.privacy import calibration
from dpfair.privacy.calibration import calibrate_noise, dpsgd_event

SRC = Path(__file__).resolve().parents[1] / "src" / "dpfair"


def _data(n=400):
    X, y, s = make_synthetic(n, n_features=4, random_state=0)
    return X, y, s


#: half of ε on DP-FERMI's group counts (default 5 %): their noise then does not make a group of ~180 look possibly
#: under 30 (a SmallGroupWarning); the fit releases the same things
COUNTS = dict(proportions_budget=0.5)


def _fermi(**kw):
    return DPFERMIClassifier(**{"epochs": 2, "batch_size": 100, "groups": 2, "classes": 2, "random_state": 0,
                                **COUNTS, **kw})


def _bars(err: str, name: str) -> int:
    """How many bars called ``name`` were shown: tqdm redraws a bar in place (``\\r``) and ends it with a newline."""
    return sum(f"{name}:" in line for line in err.split("\n"))


def test_verbose_fit_shows_a_bar_with_epsilon_and_a_quiet_one_prints_nothing(capsys):
    X, y, s = _data()
    _fermi().fit(X, y, sensitive_features=s)
    assert capsys.readouterr().err == ""
    est = _fermi(verbose=True).fit(X, y, sensitive_features=s)
    err = capsys.readouterr().err
    assert "DPFERMIClassifier" in err and f"{est.n_steps_}/{est.n_steps_}" in err
    assert f"ε={est.privacy_spent_[0]:.4g}" in err  # the last frame shows the ε spent, which is the total


def test_quiet_silences_a_verbose_fit_and_restores_the_switch(capsys):
    X, y, s = _data()
    with progress_module.quiet():
        assert not progress_module.is_enabled()
        _fermi(verbose=True).fit(X, y, sensitive_features=s)
    assert progress_module.is_enabled()
    assert capsys.readouterr().err == ""


def test_callback_sees_the_epsilon_spent_so_far_grow_to_the_total():
    X, y, s = _data()
    seen = []
    est = _fermi(epochs=3).fit(X, y, sensitive_features=s,
                               callback=lambda e, info: seen.append((info, e.privacy_spent_so_far())))
    steps = [info["step"] for info, _ in seen]
    epsilons = [spent[0] for _, spent in seen]
    assert steps == sorted(steps) and steps[-1] == est.n_steps_ and [i["epoch"] for i, _ in seen] == [1, 2, 3]
    assert all(0 < a <= b for a, b in zip(epsilons, epsilons[1:]))
    assert seen[-1][1] == est.privacy_spent_  # exactly: the same ledger, accounted once
    assert est.privacy_spent_so_far() == est.privacy_spent_


def test_pfld_epsilon_so_far_counts_the_releases_kept_aside_until_the_end():
    X, y, s = _data()
    seen = []
    # learning_rate 0.1: at the default 0.001, 8 steps learn nothing (a LearnedNothingWarning); dual_tolerance
    # chosen: "auto" at ε = 1 on 400 rows is above 0.05 and warns that the dual cannot see a violation
    est = PFLDClassifier(model="logistic", epochs=2, batch_size=100, groups=2, classes=2, random_state=0,
                         group_proportions=[0.5, 0.5], noise_multiplier=1.0,  # only the dual part to calibrate
                         learning_rate=0.1, dual_tolerance=0.05)
    est.fit(X, y, sensitive_features=s, callback=lambda e, info: seen.append(e.privacy_spent_so_far()[0]))
    assert len(seen) == 2 and 0 < seen[0] < seen[1] == est.privacy_spent_[0]


def test_epsilon_so_far_before_fit_and_for_a_non_private_method():
    with pytest.raises(NotFittedError):
        _fermi().privacy_spent_so_far()
    X, y, s = _data()
    seen = []
    ERMClassifier().fit(X, y, callback=lambda e, info: seen.append(e.privacy_spent_so_far()))
    assert seen == [(math.inf, 0.0)]  # one L-BFGS solve, one call


def test_every_method_takes_verbose_and_no_module_but_progress_imports_tqdm():
    for name, cls in METHODS.items():
        assert "verbose" in cls().get_params(), name
    users = [p.relative_to(SRC) for p in SRC.rglob("*.py")
             if p.name != "progress.py" and re.search(r"^\s*(from|import) tqdm", p.read_text(), re.M)]
    assert users == []


def test_a_grid_shows_one_bar(capsys):
    X, y, s = _data()
    grid = fit_dpfermi_grid(X, y, s, {"lam": [0, 1], "random_state": [0, 1]}, epochs=2, batch_size=100,
                            groups=2, classes=2, verbose=True, **COUNTS)
    err = capsys.readouterr().err
    assert _bars(err, "DP-FERMI grid (4 models)") == 1 and "DPFERMIClassifier" not in err
    assert f"{grid[0].n_steps_}/{grid[0].n_steps_}" in err


def test_an_audit_shows_one_bar_over_its_fits_whatever_the_fits_say(capsys):
    X, y, s = _data(200)
    est = DPSGDClassifier(epochs=1, batch_size=50, noise_multiplier=1.0, classes=2, groups=2, verbose=True)
    audit_epsilon(est, X, y, s, runs=4, verbose=True)
    err = capsys.readouterr().err
    assert _bars(err, "audit") == 1 and "4/4" in err and _bars(err, "DPSGDClassifier") == 0
    audit_epsilon(est, X, y, s, runs=4)  # a silent outer operation silences its verbose fits
    assert capsys.readouterr().err == ""


def test_a_slow_calibration_says_so_unless_quiet(capsys, monkeypatch):
    monkeypatch.setattr(calibration, "CALIBRATION_DELAY", 0.0)
    plan = lambda sigma: dpsgd_event(sigma, 0.01, 100)  # noqa: E731
    calibrate_noise(plan, 0.7, 1e-6, accountant="rdp")
    assert "calibrating noise" in capsys.readouterr().err
    with progress_module.quiet():
        calibrate_noise(plan, 0.6, 1e-6, accountant="rdp")
    assert capsys.readouterr().err == ""


def test_cli_train_shows_the_default_methods_progress(tmp_path, capsys):
    code = main(["train", "--dataset", "synthetic", "--option", "n_samples=400", "--param", "epochs=1",
                 "--param", "proportions_budget=0.5", "--out", str(tmp_path / "r.json")])  # COUNTS
    err = capsys.readouterr().err
    assert code == 0, err
    assert "DPFERMIClassifier" in err and "ε=" in err


def test_cli_quiet_prints_no_bar_and_no_absl_warning(tmp_path, capsys, caplog):
    # a large sampling rate and little noise: RDP orders whose series does not converge, which dp_accounting logs
    caplog.set_level(logging.WARNING)
    code = main(["train", "--method", "dp-sgd", "--dataset", "synthetic", "--option", "n_samples=400", "--quiet",
                 "--param", "epochs=1", "--param", "batch_size=150", "--param", "noise_multiplier=0.3",
                 "--param", "accountant=rdp", "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err == "" and not [r for r in caplog.records if r.name == "absl"]
    assert progress_module.is_enabled()  # the switch is restored after the command


def test_epsilon_of_on_rdp_logs_nothing(caplog):
    from dpfair.privacy import epsilon_for_noise

    caplog.set_level(logging.WARNING)
    epsilon_for_noise(0.31, 0.5, 3, 1e-5, accountant="rdp")
    assert not [r for r in caplog.records if r.name == "absl"]


def test_nested_bars_are_silent_and_note_on_the_outer_one(capsys):
    with progress_module.progress(2, "outer", "job") as outer:
        with progress_module.progress(5, "inner", "step", enabled=True) as inner:
            assert outer.shown and not inner.shown
            inner.update(5)
        outer.update(2)
    err = capsys.readouterr().err
    assert _bars(err, "outer") == 1 and "inner:" not in err
    with progress_module.progress(2, "silent outer", enabled=False), progress_module.progress(3, "inner") as inner:
        assert not inner.shown
    assert capsys.readouterr().err == ""
