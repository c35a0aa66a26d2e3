"""A fit that learned nothing says so (issue 28): each planted cause is named, a good fit stays quiet, and
under the record unit the check never looks at the private rows."""

import warnings
from unittest import mock

import numpy as np
import pandas as pd
import pytest

from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier, ERMClassifier
from dpfair.exceptions import LearnedNothingWarning, UtilityWarning

CLASSES, GROUPS = ["no", "yes"], ["f", "m"]


def loans(n=2000, seed=0):
    """A loans table that is not a built-in: one-hot education, unscaled money columns (credit_limit up to 1e6)."""
    rng = np.random.default_rng(seed)
    limit = np.round(np.exp(rng.normal(11.5, 0.8, n)).clip(1e4, 1e6), -3)
    bill = rng.gamma(2.0, 2.5e4, n)
    late = rng.integers(0, 4, n).astype(float)
    edu = rng.choice(["school", "uni", "grad"], n)
    z = -2.2 - 0.8 * (np.log(limit) - 11.5) + 0.7 * late - 0.3 * (edu == "grad") + 0.3 * (bill / 5e4 - 1)
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-z)), "yes", "no")
    X = pd.DataFrame({"credit_limit": limit, "age": rng.integers(21, 75, n).astype(float), "bill": bill,
                      "paid_late": late})
    X = pd.concat([X, pd.get_dummies(pd.Series(edu, name="edu"), prefix="edu").astype(float)], axis=1)
    return X, y, rng.choice(GROUPS, n)


@pytest.fixture(scope="module")
def table():
    X, y, s = loans()
    return X, (X - X.mean()) / X.std(), y, s


def fit_warnings(est, X, y, s):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X, y, sensitive_features=s)
    return [w for w in caught if issubclass(w.category, UtilityWarning)]


def learned_nothing(caught):
    return [str(w.message) for w in caught if w.category is LearnedNothingWarning]


def test_unscaled_features_are_named_with_the_fix(table):
    X, _, y, s = table
    est = DPFERMIClassifier(epsilon=1.0, groups=GROUPS, classes=CLASSES, random_state=0)
    caught = fit_warnings(est, X, y, s)
    [message] = learned_nothing(caught)
    assert "learned nothing" in message and "unscaled features" in message
    assert "'credit_limit'" in message and "'bill'" in message and "edu_" not in message  # one-hot: scale ≤ 1
    assert "StandardScaler" in message
    assert [w.filename for w in caught if w.category is LearnedNothingWarning] == [__file__]  # the user's line


def test_even_erm_on_unscaled_features_says_so(table):
    X, _, y, s = table
    [message] = learned_nothing(fit_warnings(ERMClassifier(random_state=0), X, y, s))
    assert "unscaled features" in message and "'credit_limit'" in message


def test_too_few_steps_is_named(table):
    _, Xs, y, s = table
    est = ERMClassifier(solver="minibatch", epochs=1, learning_rate=1e-4, random_state=0)
    [message] = learned_nothing(fit_warnings(est, Xs, y, s))
    assert "too few steps" in message and "8 steps at learning_rate=0.0001" in message
    assert "raise epochs or learning_rate" in message and "unscaled" not in message


def test_record_unit_reads_settings_only(table):
    """Under privacy_unit='record' the predictions on the training rows are private: never computed. A schedule
    that cannot move the model is public, and is said."""
    X, Xs, y, s = table
    est = DPSGDClassifier(epsilon=1.0, epochs=1, learning_rate=1e-3, groups=GROUPS, classes=CLASSES,
                          random_state=0)
    with mock.patch.object(DPSGDClassifier, "predict_proba", side_effect=AssertionError("read the private rows")):
        [message] = learned_nothing(fit_warnings(est, Xs, y, s))
        assert "could not learn" in message and "too few steps" in message and "private" in message
        # the same public settings give the same answer whatever the rows: unscaled rows are not looked at
        assert learned_nothing(fit_warnings(est, X, y, s)) == [message]


def test_too_much_noise_for_n_is_named(table):
    _, Xs, y, s = table
    # DP-FERMI under the record unit now says before training what DP-SGD says: too little data for ε
    est = DPFERMIClassifier(epsilon=0.1, privacy_unit="record", groups=GROUPS, classes=CLASSES, random_state=0)
    caught = fit_warnings(est, Xs, y, s)
    assert any("too little data for that privacy" in str(w.message) and "epsilon=0.1 on 2000 rows"
               in str(w.message) for w in caught)
    # a noise multiplier set by hand skips that calibration-time warning: the check after the fit says it
    est = DPSGDClassifier(noise_multiplier=100.0, epochs=2, groups=GROUPS, classes=CLASSES, random_state=0)
    [message] = learned_nothing(fit_warnings(est, Xs, y, s))
    assert "too much noise for n" in message and "raise epsilon" in message


def test_lambda_too_large_is_named(table):
    _, Xs, y, s = table
    est = DPFERMIClassifier(epsilon=1.0, lam=100.0, groups=GROUPS, classes=CLASSES, random_state=0)
    [message] = learned_nothing(fit_warnings(est, Xs, y, s))
    assert "predicts 'no' for every training row" in message and "lower lam" in message


@pytest.mark.parametrize("make", [
    lambda: ERMClassifier(random_state=0),
    lambda: DPFERMIClassifier(epsilon=1.0, groups=GROUPS, classes=CLASSES, random_state=0),
    lambda: DPSGDClassifier(epsilon=1.0, epochs=5, groups=GROUPS, classes=CLASSES, random_state=0),
], ids=["erm", "dp-fermi", "dp-sgd"])
def test_a_good_fit_on_standardised_data_is_quiet(table, make):
    _, Xs, y, s = table
    est = make()
    assert fit_warnings(est, Xs, y, s) == []
    majority = max(np.mean(y == c) for c in CLASSES)
    assert np.mean(est.predict(Xs) == y) > majority  # it did learn: better than the constant model
