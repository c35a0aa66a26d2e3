"""A private fit repeated by a scikit-learn search warns once that the search's total is not accounted (issue
41, item 3: GridSearchCV over DP-FERMI ran 10 fits on the same people and `best_estimator_.privacy_spent_`
reported one fit's ε, with no warning)."""

import warnings

import joblib
import numpy as np
import pytest
from sklearn.experimental import enable_halving_search_cv  # noqa: F401 (makes HalvingGridSearchCV importable)
from sklearn.model_selection import (
    GridSearchCV,
    HalvingGridSearchCV,
    RandomizedSearchCV,
    cross_val_predict,
    cross_val_score,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dpfair import model_selection
import dpfair.algorithms.unaccounted_search as unaccounted_search
from dpfair.algorithms import DPFERMIClassifier
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.privacy import PrivacyBudget
from dpfair.selection import PrivateSearch, tune


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3))
    return X, (X[:, 0] + rng.normal(size=240) > 0).astype(int), rng.integers(0, 2, 240)


def fermi(**params):
    return DPFERMIClassifier(**{"epochs": 1, "groups": 2, "verbose": False, "random_state": 0, **params})


def search_warnings(caught):
    return [w for w in caught
            if issubclass(w.category, PrivacyLeakWarning) and "inside scikit-learn's" in str(w.message)]


def run(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [str(w.message) for w in search_warnings(caught)]


def test_grid_search_warns_once_with_the_number_of_fits(data):
    X, y, s = data
    pipe = Pipeline([("scale", StandardScaler()), ("fermi", fermi())])
    search, said = run(lambda: GridSearchCV(pipe, {"fermi__lam": [0, 1, 4]}, cv=3).fit(
        X, y, fermi__sensitive_features=s))
    assert len(said) == 1
    eps = float(said[0].split("this fit spent ε = ")[1].split()[0])  # the first fold's fit (fewer rows, its own δ)
    assert 0.9 < eps <= search.best_estimator_[-1].epsilon and "privacy_spent_ covers it alone" in said[0]
    assert "protecting each person's sensitive attribute" in said[0]
    assert "its 10 fits (candidates × folds + refit)" in said[0] and "dpfair tune" in said[0]
    assert "dpfair.model_selection.GridSearchCV" in said[0]


def test_the_warning_points_at_the_line_that_ran_the_search(data):
    X, y, s = data
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cross_val_score(fermi(), X, y, cv=2, params={"sensitive_features": s})
    (warning,) = search_warnings(caught)
    assert warning.filename == __file__


def test_cross_validation_warns_once_per_call(data):
    X, y, s = data
    for _ in range(2):  # a second call is a second use of the same people (and may reuse the first frame's id)
        _, said = run(lambda: cross_val_score(fermi(), X, y, cv=3, params={"sensitive_features": s}))
        assert len(said) == 1 and "cross_val_score()" in said[0] and "its 3 fits (one per fold)" in said[0]
    _, said = run(lambda: cross_val_predict(fermi(), X, y, cv=2, params={"sensitive_features": s}))
    assert len(said) == 1 and "cross_val_predict()" in said[0] and "its 2 fits" in said[0]


def test_each_search_call_warns_and_other_searches_count_their_fits(data):
    X, y, s = data
    search = GridSearchCV(fermi(), {"lam": [0, 1]}, cv=2, refit=False)
    for _ in range(2):
        _, said = run(lambda: search.fit(X, y, sensitive_features=s))
        assert len(said) == 1 and "its 4 fits" in said[0]
    # n_iter=5 over 2 candidates samples the 2
    _, said = run(lambda: RandomizedSearchCV(fermi(), {"lam": [0, 1]}, n_iter=5, cv=2, random_state=0).fit(
        X, y, sensitive_features=s))
    assert len(said) == 1 and "its 5 fits (candidates × folds + refit)" in said[0]
    # a halving search's rounds depend on the scores: no count
    _, said = run(lambda: HalvingGridSearchCV(fermi(), {"lam": [0, 1, 2]}, cv=2, min_resources=80,
                                              random_state=0).fit(X, y, sensitive_features=s))
    assert len(said) == 1 and "every fit it makes" in said[0]


@pytest.mark.parametrize("backend", ["threading", "loky"])
def test_parallel_searches_warn_once_in_the_calling_process(data, backend):
    X, y, s = data
    with joblib.parallel_backend(backend):
        _, said = run(lambda: cross_val_score(fermi(), X, y, cv=2, n_jobs=2, params={"sensitive_features": s}))
    assert len(said) == 1 and "n_jobs=2" in said[0] and "parallel workers" in said[0]
    assert "this estimator's: 1" in said[0] and "its 2 fits" in said[0]
    if backend == "threading":  # the refit runs here too, and is not warned about again
        _, said = run(lambda: GridSearchCV(fermi(), {"lam": [0, 1]}, cv=2, n_jobs=2).fit(X, y, sensitive_features=s))
        assert len(said) == 1 and "GridSearchCV.fit with n_jobs=2" in said[0]


def test_a_plain_fit_and_dpfairs_own_searches_do_not_warn(data):
    X, y, s = data
    _, said = run(lambda: fermi().fit(X, y, sensitive_features=s))
    assert said == []
    _, said = run(lambda: model_selection.GridSearchCV(fermi(), {"lam": [0, 1]}, cv=2, budget=PrivacyBudget()).fit(
        X, y, sensitive_features=s))
    assert said == []
    _, said = run(lambda: model_selection.cross_validate(fermi(), X, y, cv=2, sensitive_features=s))
    assert said == []
    # scikit-learn's own search on an estimator attached to a budget: the budget keeps the total
    attached = PrivacyBudget().attach(fermi())
    _, said = run(lambda: GridSearchCV(attached, {"lam": [0, 1]}, cv=2).fit(X, y, sensitive_features=s))
    assert said == []


def test_dpfairs_private_search_does_not_warn(data, monkeypatch):
    """``dpfair tune`` drops its runs' warnings, so the spy sits under the filters: the warning is never built."""
    X, y, s = data
    built = []
    monkeypatch.setattr(unaccounted_search, "_unaccounted", lambda *args: built.append(args) or "")
    # ε = 4 with half on the group counts: the released counts of the 120-row folds' groups are not small
    est = fermi(epsilon=4.0, proportions_budget=0.5)
    tune(est, {"lam": [0.0, 1.0]}, X, y, sensitive_features=s, strategy="random_stopping", mean_runs=2,
         random_state=0)
    PrivateSearch(est, {"lam": [0.0, 1.0]}, random_state=0).fit(X, y, sensitive_features=s)  # "constrained"
    assert built == []
    with pytest.warns(PrivacyLeakWarning, match=r"fitted inside scikit-learn's cross_val_score\(\) with no "
                      "PrivacyBudget"):
        cross_val_score(est, X, y, cv=2, params={"sensitive_features": s})  # the spy does see a search
    assert len(built) == 1


def test_a_non_private_fit_does_not_warn(data):
    X, y, s = data
    _, said = run(lambda: GridSearchCV(DPFERMIClassifier(epsilon=np.inf, epochs=1, groups=2, verbose=False),
                                       {"lam": [0, 1]}, cv=2).fit(X, y, sensitive_features=s))
    assert said == []
    with joblib.parallel_backend("threading"):
        _, said = run(lambda: cross_val_score(fermi(epsilon=np.inf), X, y, cv=2, n_jobs=2,
                                              params={"sensitive_features": s}))
    assert said == []
