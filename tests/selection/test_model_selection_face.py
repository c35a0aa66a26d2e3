"""dpfair.model_selection: searches and cross-validation on one privacy budget, with their total and a warning
(issue 13, item 5)."""

import math
import pickle

import numpy as np
import pytest
import sklearn
import sklearn.model_selection as skms
from sklearn.base import clone

from dpfair.algorithms import DPFERMIClassifier, DPPostProcessingClassifier
from dpfair.datasets import make_synthetic
from dpfair.exceptions import BudgetExceededError, PrivacyLeakWarning
from dpfair.fairness import error_scorer, fairness_scorer, violation_scorer
from dpfair.model_selection import GridSearchCV, cross_validate
from dpfair.privacy import PrivacyBudget
from dpfair.privacy.calibration import CALIBRATION_RTOL

DELTA = 1e-5
POST = dict(delta=DELTA, groups=2, classes=2, random_state=0)
#: DP-FERMI with its σ fixed and public proportions (no calibration search): ~0.1 s a fit; C = 1 leaves λ = 10
#: its effect (the n-scaled default clips more on 267 rows)
FERMI = dict(noise_multiplier=1.0, group_proportions=[0.5, 0.5], epochs=10, batch_size=100, max_grad_norm=1.0,
             groups=2, classes=2, random_state=0)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(400, 4, label_bias=0.3, feature_bias=1.0, random_state=0)


def test_search_reports_the_total_of_its_fits_and_warns(data):
    X, y, s = data
    search = GridSearchCV(DPPostProcessingClassifier(epsilon=1.0, **POST), {"tolerance": [0.0, 0.05]}, cv=2)
    with pytest.warns(PrivacyLeakWarning, match=r"the fits spent ε = (5|4\.9\d*) .*further use of the data"):
        search.fit(X, y, sensitive_features=s)
    # 2 candidates × 2 folds + the refit, each a pure ε = 1 release: they compose to (at most) 5
    eps, delta = search.privacy_spent_
    assert 4.95 < eps <= 5.0 and delta == DELTA
    assert 1 - CALIBRATION_RTOL <= search.best_estimator_.privacy_spent_[0] <= 1.0  # one fit's, not the total
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()  # score(X, y, sensitive_features=s)
    pickle.dumps(search.best_estimator_)  # detached from the budget
    assert "_budget" not in vars(search.estimator)  # the user's estimator is left as it was


def test_search_draws_from_a_given_budget_and_stops_when_refused(data):
    X, y, s = data
    budget = PrivacyBudget(4.0, DELTA)
    search = GridSearchCV(DPPostProcessingClassifier(epsilon=1.0, **POST), {"tolerance": [0.0, 0.05]}, cv=2,
                          budget=budget)
    with pytest.raises(BudgetExceededError, match=r"PrivacyBudget of ε = 4 that has spent ε = (4|3\.9\d*): together ε = (5|4\.9\d*) > 4"):
        search.fit(X, y, sensitive_features=s)
    assert 3.9 < budget.spent()[0] <= 4.0  # the four CV fits; the refit was refused
    with pytest.raises(BudgetExceededError):  # without budget=, the estimator's attached budget
        cross_validate(budget.attach(DPPostProcessingClassifier(epsilon=1.0, **POST)), X, y, sensitive_features=s)


def test_plain_scikit_learn_search_charges_an_attached_budget(data):
    X, y, s = data
    budget = PrivacyBudget()
    search = skms.GridSearchCV(budget.attach(DPPostProcessingClassifier(epsilon=1.0, **POST)),
                               {"tolerance": [0.0, 0.05]}, cv=2)
    with sklearn.config_context(enable_metadata_routing=True):  # s to fit and to score
        search.fit(X, y, sensitive_features=s)  # scikit-learn's fits are clones: each one is charged
    assert 4.95 < budget.spent()[0] <= 5.0
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_a_fairness_scorer_picks_a_fairer_lambda_than_accuracy(data):
    X, y, s = data
    est = DPFERMIClassifier(**FERMI)
    grid = {"lam": [0.0, 10.0]}
    spent = "GridSearchCV: the fits spent ε"  # every search says what its fits spent in all, on no budget
    with pytest.warns(PrivacyLeakWarning, match=spent):
        by_accuracy = GridSearchCV(est, grid, cv=3, scoring="accuracy").fit(X, y, sensitive_features=s)
    with pytest.warns(PrivacyLeakWarning, match=spent):
        by_fairness = GridSearchCV(est, grid, cv=3, scoring=fairness_scorer("demographic_parity", 1.0)).fit(
            X, y, sensitive_features=s)
    assert by_accuracy.best_params_ == {"lam": 0.0} and by_fairness.best_params_ == {"lam": 10.0}
    with pytest.warns(PrivacyLeakWarning, match=spent):
        both = GridSearchCV(est, grid, cv=3, scoring={"error": error_scorer(), "dp": violation_scorer()},
                            refit=False).fit(X, y, sensitive_features=s)
    error, violation = -both.cv_results_["mean_test_error"], -both.cv_results_["mean_test_dp"]
    assert error[1] > error[0] and violation[1] < violation[0]  # λ = 10 trades error for parity
    # each search spends the same total: 2 × 3 fits and the refit (none with refit=False)
    assert by_fairness.privacy_spent_ == by_accuracy.privacy_spent_
    assert both.privacy_spent_[0] < by_accuracy.privacy_spent_[0]


def test_cross_validate_post_processing_gives_scores_and_its_total(data):
    X, y, s = data
    est = DPPostProcessingClassifier(epsilon=1.0, **POST)
    with pytest.warns(PrivacyLeakWarning, match=r"cross_validate: the fits spent ε = (3|2\.9\d*) "):
        result = cross_validate(est, X, y, sensitive_features=s, cv=3)
    assert np.isfinite(result["test_score"]).all() and (result["test_score"] > 0.6).all()
    eps, delta = result["privacy_spent"]
    assert 2.95 < eps <= 3.0 and delta == DELTA
    with pytest.warns(PrivacyLeakWarning, match="cross_validate: the fits spent ε"):
        multi = cross_validate(est, X, y, sensitive_features=s, cv=3,
                               scoring={"error": error_scorer(), "eo": violation_scorer("equalized_odds")})
    assert np.isfinite(multi["test_error"]).all() and np.isfinite(multi["test_eo"]).all()


def test_scikit_learn_cross_validate_with_routing_scores_post_processing(data):
    X, y, s = data
    # each fold's fit says that scikit-learn's own cross_validate accounts nothing across the folds
    with sklearn.config_context(enable_metadata_routing=True), \
            pytest.warns(PrivacyLeakWarning, match="fitted inside scikit-learn's cross_validate"):
        result = skms.cross_validate(DPPostProcessingClassifier(epsilon=1.0, **POST), X, y, cv=3,
                                     params={"sensitive_features": s})
    assert np.isfinite(result["test_score"]).all()


def test_process_pools_are_refused_before_any_fit(data):
    X, y, s = data
    with pytest.raises(ValueError, match="n_jobs=2 would fit in other processes"):
        cross_validate(DPPostProcessingClassifier(**POST), X, y, sensitive_features=s, cv=2, n_jobs=2)


def test_search_is_a_scikit_learn_estimator():
    search = GridSearchCV(DPFERMIClassifier(**FERMI), {"lam": [0.0, 1.0]}, budget=PrivacyBudget())
    assert clone(search).get_params()["budget"] is search.budget
    assert search.get_params()["param_grid"] == {"lam": [0.0, 1.0]} and math.isinf(search.budget.epsilon)
