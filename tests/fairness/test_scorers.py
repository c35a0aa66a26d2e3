"""Fairness-aware scorers that receive s by metadata routing; score() of estimators that predict with s
(issue 13, item 5)."""

import numpy as np
import pytest
import sklearn
import sklearn.model_selection as skms
from sklearn.linear_model import LogisticRegression

from dpfair.algorithms import DPPostProcessingClassifier
from dpfair.datasets import make_synthetic
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.fairness import (
    FairScorer,
    MissingGroupsError,
    demographic_parity_violation,
    equal_opportunity_violation,
    equalized_odds_violation,
    error_scorer,
    fairness_scorer,
    violation_scorer,
)

POST = dict(epsilon=1.0, delta=1e-5, groups=2, classes=2, random_state=0)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(400, 4, label_bias=0.3, feature_bias=1.0, random_state=0)


@pytest.fixture(scope="module")
def logistic(data):
    X, y, _ = data
    return LogisticRegression().fit(X, y)


def test_values_are_the_negated_metrics(data, logistic):
    X, y, s = data
    pred = logistic.predict(X)
    error = np.mean(pred != y)
    dp = demographic_parity_violation(pred, s)
    assert error_scorer()(logistic, X, y) == pytest.approx(-error)
    assert violation_scorer()(logistic, X, y, sensitive_features=s) == pytest.approx(-dp)
    assert violation_scorer("equalized_odds")(logistic, X, y, sensitive_features=s) == pytest.approx(
        -equalized_odds_violation(y, pred, s))
    assert violation_scorer("equal_opportunity")(logistic, X, y, sensitive_features=s) == pytest.approx(
        -equal_opportunity_violation(y, pred, s, positive_label=1))
    assert fairness_scorer("demographic_parity", 2.5)(logistic, X, y, sensitive_features=s) == pytest.approx(
        -(error + 2.5 * dp))
    assert 0.0 < dp and 0.0 < error  # the data set is one where both terms count


def test_estimators_that_predict_with_s_get_it(data):
    X, y, s = data
    est = DPPostProcessingClassifier(**POST).fit(X, y, sensitive_features=s)
    pred = est.predict(X, sensitive_features=s)
    assert error_scorer()(est, X, y, sensitive_features=s) == pytest.approx(-np.mean(pred != y))
    assert violation_scorer("equalized_odds")(est, X, y, sensitive_features=s) == pytest.approx(
        -equalized_odds_violation(y, pred, s))
    assert est.score(X, y, sensitive_features=s) == pytest.approx(np.mean(pred == y))
    with pytest.raises(ValueError, match="uses the sensitive attribute at prediction"):
        est.score(X, y)


def test_missing_groups_name_the_routing(data, logistic):
    X, y, _ = data
    with pytest.raises(MissingGroupsError, match="enable_metadata_routing=True.*sensitive_features=s"):
        violation_scorer()(logistic, X, y)  # not a ValueError: scikit-learn's CV would make it a NaN score


def test_scikit_learn_routes_s_to_the_scorers(data):
    X, y, s = data
    scoring = {"dp": violation_scorer(), "fair": fairness_scorer("equalized_odds", 1.0)}
    with sklearn.config_context(enable_metadata_routing=True):
        result = skms.cross_validate(LogisticRegression(), X, y, cv=3, scoring=scoring,
                                     params={"sensitive_features": s})
        aliased = skms.cross_validate(LogisticRegression(), X, y, cv=3,
                                      scoring=violation_scorer().set_score_request(sensitive_features="group"),
                                      params={"group": s})
        with pytest.warns(PrivacyLeakWarning, match="fitted inside scikit-learn's GridSearchCV.fit"):
            search = skms.GridSearchCV(DPPostProcessingClassifier(**POST), {"tolerance": [0.0, 0.1]}, cv=2,
                                       scoring=error_scorer()).fit(X, y, sensitive_features=s)
    assert np.all(result["test_dp"] < 0) and np.all(result["test_fair"] < 0)
    np.testing.assert_allclose(aliased["test_score"], result["test_dp"])
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_requests_and_estimator_defaults():
    assert violation_scorer().get_metadata_routing().score.requests == {"sensitive_features": True}
    assert error_scorer().set_score_request(sensitive_features=False).get_metadata_routing().score.requests == {
        "sensitive_features": False}
    requests = DPPostProcessingClassifier().get_metadata_routing()
    assert requests.fit.requests["sensitive_features"] is True and requests.score.requests["sensitive_features"] is True


@pytest.mark.parametrize("kwargs,match", [
    (dict(notion="parity"), "notion must be one of"),
    (dict(notion="demographic_parity", weight=-1.0), "weight must be a finite number >= 0"),
    (dict(notion="demographic_parity", convention="max"), "convention must be one of"),
    (dict(error_weight=0), "a scorer of nothing"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FairScorer(**kwargs)


def test_repr():
    assert repr(error_scorer()) == "error_scorer()"
    assert repr(violation_scorer("equalized_odds")) == "violation_scorer('equalized_odds')"
    assert repr(fairness_scorer("accuracy_parity", 0.5)) == "fairness_scorer('accuracy_parity', weight=0.5)"
