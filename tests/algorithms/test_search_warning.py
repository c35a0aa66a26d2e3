"""A private fit repeated by a scikit-learn search warns once that the search's total is not accounted (issue
41, item 3: GridSearchCV over DP-FERMI ran 10 fits on the same people and `best_estimator_.privacy_spent_`
reported one fit's ε, with no warning)."""

import warnings

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dpfair import model_selection
from dpfair.algorithms import DPFERMIClassifier
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.privacy import PrivacyBudget


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3))
    return X, (X[:, 0] + rng.normal(size=240) > 0).astype(int), rng.integers(0, 2, 240)


def fermi():
    return DPFERMIClassifier(epochs=1, groups=2, verbose=False, random_state=0)


def search_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, PrivacyLeakWarning)
            and "inside scikit-learn's" in str(w.message)]


def run(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, search_warnings(caught)


def test_grid_search_warns_once_with_the_number_of_fits(data):
    X, y, s = data
    pipe = Pipeline([("scale", StandardScaler()), ("fermi", fermi())])
    search, said = run(lambda: GridSearchCV(pipe, {"fermi__lam": [0, 1, 4]}, cv=3).fit(
        X, y, fermi__sensitive_features=s))
    assert len(said) == 1
    eps = float(said[0].split("this fit spent ε = ")[1].split()[0])  # the first fold's fit (fewer rows, its own δ)
    assert 0.9 < eps <= search.best_estimator_[-1].epsilon and "privacy_spent_ covers it alone" in said[0]
    assert "its 10 fits (candidates × folds + refit)" in said[0] and "dpfair tune" in said[0]
    assert "dpfair.model_selection.GridSearchCV" in said[0]


def test_cross_val_score_warns_once(data):
    X, y, s = data
    _, said = run(lambda: cross_val_score(fermi(), X, y, cv=3, params={"sensitive_features": s}))
    assert len(said) == 1 and "cross_val_score()" in said[0]


def test_a_plain_fit_and_dpfairs_own_searches_do_not_warn(data):
    X, y, s = data
    _, said = run(lambda: fermi().fit(X, y, sensitive_features=s))
    assert said == []
    _, said = run(lambda: model_selection.GridSearchCV(fermi(), {"lam": [0, 1]}, cv=2, budget=PrivacyBudget()).fit(
        X, y, sensitive_features=s))
    assert said == []
    _, said = run(lambda: model_selection.cross_validate(fermi(), X, y, cv=2, sensitive_features=s))
    assert said == []


def test_a_non_private_fit_does_not_warn(data):
    X, y, s = data
    _, said = run(lambda: GridSearchCV(DPFERMIClassifier(epsilon=np.inf, epochs=1, groups=2, verbose=False),
                                       {"lam": [0, 1]}, cv=2).fit(X, y, sensitive_features=s))
    assert said == []
