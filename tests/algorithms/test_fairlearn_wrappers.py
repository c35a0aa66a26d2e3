import math

import numpy as np
import pytest
from fairlearn.postprocessing import ThresholdOptimizer
from fairlearn.reductions import DemographicParity, EqualizedOdds, ErrorRateParity, ExponentiatedGradient
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from dpfair.algorithms.fairlearn_wrappers import ReductionsClassifier, ThresholdClassifier
from dpfair.datasets import make_synthetic
from dpfair.fairness import demographic_parity_violation

# fairlearn 0.15 trips pandas' deprecations (enlarging a Series with .at, ...); not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:fairlearn.*")


@pytest.fixture(scope="module")
def datasets():
    return {k: make_synthetic(n_samples=300, n_features=4, n_groups=k, label_bias=0.3, random_state=1)
            for k in (2, 3)}


@pytest.fixture(scope="module")
def data(datasets):
    return datasets[3]


FAST = dict(max_iter=10)


@pytest.mark.parametrize("k, notion, moment", [(2, "demographic_parity", DemographicParity),
                                               (3, "demographic_parity", DemographicParity),
                                               (2, "equalized_odds", EqualizedOdds),
                                               (3, "equalized_odds", EqualizedOdds),
                                               (2, "accuracy_parity", ErrorRateParity)])
def test_reductions_is_fairlearns_exponentiated_gradient(datasets, k, notion, moment):
    X, y, s = datasets[k]
    ours = ReductionsClassifier(notion=notion, difference_bound=0.02, random_state=0, **FAST).fit(X, y, s)
    theirs = ExponentiatedGradient(LogisticRegression(max_iter=1000), moment(difference_bound=0.02), eps=0.01,
                                   **FAST).fit(X, y, sensitive_features=s)
    np.testing.assert_array_equal(ours.predict_proba(X), theirs._pmf_predict(X))
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X, random_state=ours.prediction_seed_))
    assert ours.privacy_spent_ == (math.inf, 0.0)
    assert ours.privacy_ledger_.to_records()[0]["mechanism"] == "nonprivate"


@pytest.mark.parametrize("notion, constraint", [("demographic_parity", "demographic_parity"),
                                                ("equalized_odds", "equalized_odds"),
                                                ("equal_opportunity", "true_positive_rate_parity")])
@pytest.mark.parametrize("k", [2, 3])
def test_threshold_is_fairlearns_threshold_optimizer(datasets, k, notion, constraint):
    X, y, s = datasets[k]
    ours = ThresholdClassifier(notion=notion, random_state=0).fit(X, y, s)
    theirs = ThresholdOptimizer(estimator=LogisticRegression(max_iter=1000), constraints=constraint).fit(
        X, y, sensitive_features=s)
    np.testing.assert_array_equal(ours.predict_proba(X, sensitive_features=s),
                                  theirs._pmf_predict(X, sensitive_features=s))
    np.testing.assert_array_equal(ours.predict(X, sensitive_features=s),
                                  theirs.predict(X, sensitive_features=s, random_state=ours.prediction_seed_))
    assert ours.privacy_spent_ == (math.inf, 0.0)


def test_reductions_lowers_the_demographic_parity_violation():
    # Strongly group-dependent labels: plain logistic regression is far from parity, the reductions are not.
    X, y, s = make_synthetic(n_samples=600, n_features=4, label_bias=0.6, random_state=2)
    plain = LogisticRegression(max_iter=1000).fit(X, y).predict(X)
    fair = ReductionsClassifier(difference_bound=0.01, random_state=0, **FAST).fit(X, y, s)
    proba = fair.predict_proba(X)[:, 1]
    # Expected selection rates of the randomized classifier, per group.
    rates = [proba[s == a].mean() for a in (0, 1)]
    assert demographic_parity_violation(plain, s) > 0.2
    # |rate_a − overall rate| ≤ bound + gap for each group, so the pairwise gap is at most twice that.
    assert abs(rates[0] - rates[1]) <= 2 * (0.01 + fair.mitigator_.best_gap_) + 1e-3


def test_same_seed_same_predictions_other_seed_other_draws(data):
    X, y, s = data
    a, b, c = (ThresholdClassifier(notion="equalized_odds", random_state=r).fit(X, y, s) for r in (5, 5, 6))
    np.testing.assert_array_equal(a.predict(X, sensitive_features=s), b.predict(X, sensitive_features=s))
    p = a.predict_proba(X, sensitive_features=s)[:, 1]
    assert np.any((p > 0) & (p < 1)), "equalized-odds thresholds randomise on some rows"
    assert not np.array_equal(a.predict(X, sensitive_features=s), c.predict(X, sensitive_features=s))
    r1, r2 = (ReductionsClassifier(random_state=3, **FAST).fit(X, y, s) for _ in range(2))
    np.testing.assert_array_equal(r1.predict(X), r2.predict(X))
    np.testing.assert_array_equal(r1.predict(X), r1.predict(X))


def test_estimator_parameters_are_cloneable_and_labels_and_groups_are_mapped_back(data):
    X, y, s = data
    est = ReductionsClassifier(LogisticRegression(C=0.5), notion="equalized_odds", eg_eps=0.05, random_state=1)
    copy = clone(est).get_params()
    assert copy["estimator"] is not est.estimator
    assert {k: v for k, v in copy.items() if k != "estimator"} == \
        {k: v for k, v in est.get_params().items() if k != "estimator"}
    names = np.array(["no", "yes"])[y]
    groups = np.array(["a", "b", "c"])[s]
    thr = ThresholdClassifier(random_state=0).fit(X, names, groups)
    assert set(thr.predict(X, sensitive_features=groups)) <= {"no", "yes"}
    red = ReductionsClassifier(random_state=0, **FAST).fit(X, names, groups)
    assert set(red.predict(X)) <= {"no", "yes"} and list(red.classes_) == ["no", "yes"]


class _NoScores(ClassifierMixin, BaseEstimator):
    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        return np.zeros(len(X), dtype=np.int64)


def test_bad_input_is_a_clear_value_error(data):
    X, y, s = data
    with pytest.raises(ValueError, match="notion must be one of"):
        ReductionsClassifier(notion="parity").fit(X, y, s)
    with pytest.raises(ValueError, match="no accuracy_parity"):
        ThresholdClassifier(notion="accuracy_parity").fit(X, y, s)
    with pytest.raises(ValueError, match="binary labels"):
        ReductionsClassifier().fit(X, np.arange(len(y)) % 3, s)
    with pytest.raises(ValueError, match="sample_weight"):
        ReductionsClassifier(KNeighborsClassifier()).fit(X, y, s)
    with pytest.raises(ValueError, match="neither predict_proba nor decision_function"):
        ThresholdClassifier(_NoScores()).fit(X, y, s)
    with pytest.raises(ValueError, match="prefit=True needs a fitted estimator"):
        ThresholdClassifier(prefit=True).fit(X, y, s)
    with pytest.raises(ValueError, match="needs sensitive_features"):
        ReductionsClassifier().fit(X, y)
    with pytest.raises(ValueError, match="difference_bound"):
        ReductionsClassifier(difference_bound=-0.1).fit(X, y, s)
    s_one_member = s.copy()
    s_one_member[0] = 7
    with pytest.raises(ValueError, match="group 2|group 3"):
        ReductionsClassifier().fit(X, y, s_one_member)
    thr = ThresholdClassifier(random_state=0).fit(X, y, s)
    with pytest.raises(ValueError, match="sensitive_features=s"):
        thr.predict(X)
    with pytest.raises(ValueError, match="outside the known list"):
        thr.predict(X, sensitive_features=np.full(len(X), 9))


def test_prefit_threshold_post_processes_the_given_model(data):
    X, y, s = data
    base = LogisticRegression(C=0.1, max_iter=1000).fit(X, y)
    ours = ThresholdClassifier(base, prefit=True, random_state=0).fit(X, y, s)
    theirs = ThresholdOptimizer(estimator=base, prefit=True).fit(X, y, sensitive_features=s)
    assert ours.postprocessor_.estimator_ is base
    np.testing.assert_array_equal(ours.predict_proba(X, sensitive_features=s),
                                  theirs._pmf_predict(X, sensitive_features=s))
