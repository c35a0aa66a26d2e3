"""Issue 27, item 8: hyper-parameters and features that cannot mean what they say are refused, never trained into
NaN.

Before: `lam=inf` trained a constant classifier; finite features of 1e20 gave NaN probabilities and constant
predictions for DP-FERMI, DP-SGD and PF-LD, and ERM raised torch's `RuntimeError` (value cannot be converted to
type float without overflow); below that scale, ERM's L-BFGS and DP-FERMI's MLP (whose public part, under the
sensitive unit, is not clipped) diverged into NaN models without a word.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest

from dpfair.algorithms import METHODS, DPFERMIClassifier, DPSGDClassifier, ERMClassifier, PFLDClassifier
from dpfair.datasets import make_synthetic
from dpfair.exceptions import LearnedNothingWarning
from dpfair.utils.validation import FLOAT32_MAX_ROW_NORM, check_feature_scale


@pytest.fixture(scope="module")
def data():
    return make_synthetic(2000, n_features=3, random_state=0)  # groups large enough for the released counts at ε=1


def _scaled(X, norm):
    """``X`` scaled so that its largest row norm is ``norm``."""
    return X * (norm / np.linalg.norm(X, axis=1).max())


def _one_column_scaled(X, norm):
    """``X`` with only its first column scaled, so that the largest row norm is about ``norm``: unscaled data."""
    X = X.copy()
    X[:, 0] *= norm / np.linalg.norm(X, axis=1).max()
    return X


FAST = dict(epochs=1, batch_size=64, groups=2, classes=2, random_state=0)
FLOAT32 = {"dp-fermi": lambda: DPFERMIClassifier(**FAST), "dp-sgd": lambda: DPSGDClassifier(**FAST),
           # a fixed dual tolerance: at ε = 1 on these rows the "auto" one would warn that it hides violations
           "pf-ld": lambda: PFLDClassifier(dual_tolerance=0.05, **FAST), "erm": lambda: ERMClassifier(random_state=0)}
#: the methods that learn nothing on rows of norm near the float32 bound, and say that the features are unscaled
#: (DP-SGD clips each gradient, so its steps stay of the clipping norm's size)
UNSCALED_LEARN_NOTHING = {"dp-fermi", "pf-ld"}


@pytest.mark.parametrize("method", FLOAT32)
def test_rows_too_large_for_float32_training_are_refused(data, method, release_spy):
    X, y, s = data
    with pytest.raises(ValueError, match=r"X has a row of norm 1e\+20 .* standardise X \(e.g. sklearn's StandardScaler"):
        FLOAT32[method]().fit(_scaled(X, 1e20), y, sensitive_features=s)
    assert sum(release_spy.calls.values()) == 0  # refused before any release


@pytest.mark.parametrize("method", ["dp-fermi", "dp-sgd", "pf-ld"])
def test_rows_just_below_the_bound_train_to_finite_predictions(data, method):
    X, y, s = data
    X = _scaled(X, 0.9 * FLOAT32_MAX_ROW_NORM)
    with (pytest.warns(LearnedNothingWarning, match="unscaled features") if method in UNSCALED_LEARN_NOTHING
          else contextlib.nullcontext()):
        model = FLOAT32[method]().fit(X, y, sensitive_features=s)
    assert np.isfinite(model.predict_proba(X)).all()


def test_the_bound_is_on_the_row_norm():
    X = np.zeros((3, 4))
    X[1] = 0.6e18  # each entry below the bound, the row's norm (1.2e18) above it
    with pytest.raises(ValueError, match=r"row of norm 1\.2e\+18 \(row 1\)"):
        check_feature_scale(X)
    X[1] = 0.4e18
    assert check_feature_scale(X) is X


def test_a_diverged_fit_is_an_error_not_a_nan_model(data):
    """Below the float32 bound gradient steps can still diverge on unscaled features: the fitted parameters are
    checked (post-processing of what the fit would publish) and a NaN model is refused."""
    X, y, s = data
    with pytest.raises(ValueError, match="ERMClassifier's training diverged: .* standardise X"):
        ERMClassifier(random_state=0).fit(_one_column_scaled(X, 1e12), y)
    with pytest.raises(ValueError, match="DPFERMIClassifier's training diverged"):
        DPFERMIClassifier(model="mlp", **FAST).fit(_one_column_scaled(X, 1e6), y, sensitive_features=s)
    model = ERMClassifier(random_state=0).fit(X, y)  # the same fit on the data as they are
    assert np.isfinite(model.predict_proba(X)).all()


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_real_hyperparameter_but_epsilon_is_finite(name):
    cls = METHODS[name]
    params = cls().get_params()
    reals = [k for k, v in params.items() if isinstance(v, float) and k != "epsilon"]
    for key in reals:
        with pytest.raises(ValueError, match=f"{key} must be a finite number, got inf"):
            cls(**{key: math.inf}).check_hyperparameters()
    if "epsilon" in params:
        cls(epsilon=math.inf).check_hyperparameters()  # ε = ∞: no privacy, a meaning of its own


def test_lam_inf_is_refused_by_fit(data):
    X, y, s = data
    with pytest.raises(ValueError, match="lam must be a finite number, got inf"):
        DPFERMIClassifier(lam=math.inf, **FAST).fit(X, y, sensitive_features=s)
