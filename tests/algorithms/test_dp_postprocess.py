import math

import numpy as np
import pytest
from fairlearn.postprocessing import ThresholdOptimizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier
from dpfair.algorithms._jagielski import cell_counts, equalized_odds_lp
from dpfair.algorithms.dp_postprocess import DPPostProcessingClassifier
from dpfair.datasets import make_synthetic
from dpfair.privacy import calibrate_noise, epsilon_of, laplace_event, max_neighbour_distance


#: the public lists of the synthetic data's binary groups and labels: none is inferred from the private rows
PUBLIC = dict(groups=[0, 1], classes=[0, 1])


def biased(n, seed, n_groups=2):
    return make_synthetic(n_samples=n, n_features=5, n_groups=n_groups, label_bias=0.3, feature_bias=1.0,
                          random_state=seed)


@pytest.fixture(scope="module")
def data():
    X, y, s = biased(2000, 0)
    return X, y, s, LogisticRegression().fit(X, y)


def test_released_counts_have_the_sensitivity_of_their_bound():
    # One person's s moves them between two cells: L1 distance 2 = 2 * bound under replace-one;
    # removing a record lowers one cell by 1 = bound under add/remove.
    X, y, s = biased(30, 3, n_groups=3)
    base = LogisticRegression().fit(X, y)

    def counts(X, y, s):
        return cell_counts(base.predict(X), y, s, 2, 2, 3)

    assert max_neighbour_distance(counts, X, y, s, "sensitive", ord=1, n_groups=3) == 2.0
    assert max_neighbour_distance(counts, X, y, s, "record", ord=1) == 1.0


def test_noise_has_the_calibrated_laplace_scale():
    # Pure Laplace on replace-one with bound 1: sigma = 2/eps (the paper's Lap(2/eps)) up to the delta slack.
    # 20 fits x 40 cells: mean |noise| = sigma with standard error sigma/sqrt(800); allow 5 of them.
    X, y, s = biased(6000, 1, n_groups=10)
    base = LogisticRegression().fit(X, y)
    true = cell_counts(base.predict(X), y, s, 2, 2, 10)
    fits = [DPPostProcessingClassifier(base, prefit=True, epsilon=2.0, delta=1e-6, random_state=r,
                                       groups=10, classes=[0, 1])
            .fit(X, y, sensitive_features=s) for r in range(20)]
    sigma = fits[0].noise_multiplier_
    assert sigma == pytest.approx(calibrate_noise(laplace_event, 2.0, 1e-6, "sensitive"))
    assert sigma == pytest.approx(1.0, rel=0.01)
    noise = np.concatenate([(f.noisy_counts_ - true).ravel() for f in fits])
    assert abs(np.abs(noise).mean() - sigma) < 5 * sigma / math.sqrt(noise.size)
    assert abs(noise.mean()) < 5 * math.sqrt(2) * sigma / math.sqrt(noise.size)


@pytest.mark.parametrize("unit", ["sensitive", "record"])
def test_ledger_spends_at_most_the_target(data, unit):
    X, y, s, base = data
    est = DPPostProcessingClassifier(base, prefit=True, epsilon=1.0, privacy_unit=unit, random_state=0,
                                     **PUBLIC)
    est.fit(X, y, sensitive_features=s)
    eps, delta = est.privacy_spent_
    assert 0.99 <= eps <= 1.0 and delta == 1 / 2000**2
    assert est.privacy_ledger_.to_records() == [{
        "label": "joint counts (y_hat, s, y)", "mechanism": "laplace", "noise_multiplier": est.noise_multiplier_,
        "sampling_probability": 1.0, "count": 1}]
    # replace-one doubles the distance, so the same epsilon needs twice the noise
    assert est.noise_multiplier_ == pytest.approx((2.0 if unit == "sensitive" else 1.0), rel=0.01)


def test_a_private_base_trained_here_composes_with_the_counts(data):
    X, y, s, _ = data
    base = DPSGDClassifier(epsilon=0.5, delta=1e-6, epochs=1, batch_size=200, random_state=0)
    est = DPPostProcessingClassifier(base, epsilon=1.0, delta=1e-6, privacy_unit="record", random_state=0,
                                     **PUBLIC)
    est.fit(X, y, sensitive_features=s)
    labels = [e["label"] for e in est.privacy_ledger_.to_records()]
    assert labels == ["base: dp-sgd step", "joint counts (y_hat, s, y)"]
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)
    spent = est.privacy_spent_[0]
    assert 0.99 <= spent <= 1.0
    assert est.estimator_.privacy_spent_[0] < spent
    # the counts alone would spend less than the whole: the budget was shared
    assert epsilon_of(laplace_event(est.noise_multiplier_), 1e-6, "record") < 0.9


def test_a_base_that_ignores_s_costs_nothing_under_the_sensitive_unit(data):
    X, y, s, _ = data
    est = DPPostProcessingClassifier(LogisticRegression(), epsilon=1.0, random_state=0, **PUBLIC)
    est.fit(X, y, sensitive_features=s)
    assert len(est.privacy_ledger_) == 1 and est.privacy_spent_[0] <= 1.0


def test_a_base_that_reads_s_from_declared_columns_of_x_is_charged(data):
    """A base fed s through X (OutputPerturbationClassifier's sensitive_feature_columns) accounts s itself under
    the sensitive unit; it was counted as free because it takes no sensitive_features."""
    from dpfair.algorithms import OutputPerturbationClassifier

    X, y, s, _ = data
    Xs = np.column_stack([X, s])
    base = OutputPerturbationClassifier(epsilon=0.5, delta=1e-6, privacy_unit="sensitive",
                                        sensitive_feature_columns=[X.shape[1]], random_state=0)
    est = DPPostProcessingClassifier(base, epsilon=1.0, delta=1e-6, random_state=0, **PUBLIC).fit(
        Xs, y, sensitive_features=s)
    assert [e["label"] for e in est.privacy_ledger_.to_records()][0].startswith("base: ")
    assert est.estimator_.privacy_spent_[0] > 0 and 0.99 <= est.privacy_spent_[0] <= 1.0
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)


@pytest.mark.parametrize("n_groups", [2, 3])
def test_without_noise_it_is_fairlearns_threshold_optimizer(n_groups):
    X, y, s = biased(3000, 5, n_groups=n_groups)
    Xt, yt, st = biased(3000, 6, n_groups=n_groups)
    base = LogisticRegression().fit(X, y)
    ours = DPPostProcessingClassifier(base, prefit=True, epsilon=math.inf, random_state=0, groups=n_groups,
                                      classes=[0, 1])
    ours.fit(X, y, sensitive_features=s)
    assert math.isinf(ours.privacy_spent_[0]) and np.all(ours.slack_ == 0)
    theirs = ThresholdOptimizer(estimator=base, constraints="equalized_odds", predict_method="predict",
                                prefit=True).fit(X, y, sensitive_features=s)
    # fairlearn searches a grid of 1000 false-positive rates: agreement to a few grid steps.
    p_ours = ours.predict_proba(Xt, sensitive_features=st)[:, 1]
    p_theirs = theirs._pmf_predict(Xt, sensitive_features=st)[:, 1]
    assert np.abs(p_ours - p_theirs).max() < 0.01
    # and the result satisfies equalized odds on the training data it was fitted on
    p_train = ours.predict_proba(X, sensitive_features=s)[:, 1]
    for c in (0, 1):
        rates = [p_train[(y == c) & (s == r)].mean() for r in range(n_groups)]
        assert max(rates) - min(rates) < 1e-6


def test_noisy_solution_meets_the_relaxed_constraints_with_the_papers_slack(data):
    X, y, s, base = data
    est = DPPostProcessingClassifier(base, prefit=True, epsilon=0.5, beta=0.1, tolerance=0.01, random_state=2,
                                     **PUBLIC)
    est.fit(X, y, sensitive_features=s)
    noisy = np.maximum(est.noisy_counts_, 0)
    sizes = noisy.sum(axis=0)
    b = est.noise_multiplier_
    expected = 0.01 + 2 * b * math.log(8 / 0.1) / sizes.min(axis=0)
    np.testing.assert_allclose(est.slack_, expected)
    q = noisy[1] / sizes
    rho = est.mixing_[0][:, None] * (1 - q) + est.mixing_[1][:, None] * q  # (groups, labels)
    assert np.all(np.abs(rho[0] - rho[1]) <= est.slack_ + 1e-9)


def test_lp_reaches_the_constant_classifier_when_rates_cannot_be_matched_otherwise():
    # group 0's base prediction is perfect, group 1's is noise: any EO solution must be blind in group 1
    counts = np.zeros((2, 2, 2))
    counts[:, 0] = [[50, 0], [0, 50]]
    counts[:, 1] = [[25, 25], [25, 25]]
    p = equalized_odds_lp(counts, [0.0, 0.0])
    q = counts[1] / counts.sum(0)
    rho = p[0][:, None] * (1 - q) + p[1][:, None] * q
    np.testing.assert_allclose(rho[0], rho[1], atol=1e-9)


@pytest.mark.secret_noise
def test_same_seed_same_result_only_when_the_noise_is_replayed(data, replay):
    X, y, s, base = data
    fit = lambda r: DPPostProcessingClassifier(base, prefit=True, epsilon=1.0, random_state=r, **PUBLIC).fit(  # noqa: E731
        X, y, sensitive_features=s)
    # the review's attack: the released counts minus noise regenerated from the published seed gave the
    # true counts; the noise is secret now, so refitting with the same seed gives other counts
    assert not np.array_equal(fit(1).noisy_counts_, fit(1).noisy_counts_)
    with replay(0):
        a, b, c = fit(1), fit(1), fit(2)
    assert np.array_equal(a.noisy_counts_, b.noisy_counts_) and not np.array_equal(a.noisy_counts_, c.noisy_counts_)
    assert np.array_equal(a.predict(X, sensitive_features=s), b.predict(X, sensitive_features=s))


def test_predictions_are_randomized_with_the_mixing_probabilities(data):
    X, y, s, base = data
    est = DPPostProcessingClassifier(base, prefit=True, epsilon=math.inf, random_state=0, **PUBLIC)
    est.fit(X, y, sensitive_features=s)
    p = est.predict_proba(X, sensitive_features=s)[:, 1]
    hard = est.predict(X, sensitive_features=s)
    assert set(np.unique(hard)) <= {0, 1}
    # sum of n Bernoulli(p): standard deviation at most sqrt(n)/2
    assert abs(hard.sum() - p.sum()) < 5 * math.sqrt(len(p)) / 2


class NoPredict:
    def fit(self, X, y):
        return self


@pytest.mark.parametrize("kwargs, match", [
    (dict(estimator=NoPredict()), "estimator must be a classifier with fit and predict"),
    (dict(estimator=LinearSVC(), prefit=True), "estimator is not fitted"),
    (dict(epsilon=0.0), "epsilon must be > 0"),
    (dict(epsilon=-1.0), "epsilon must be > 0"),
    (dict(beta=1.5), "beta must lie strictly between 0 and 1"),
    (dict(tolerance=-0.1), "tolerance must be >= 0"),
    (dict(privacy_unit="records"), "privacy_unit must be one of"),
    (dict(privacy_unit="record"), "base estimator alone spends epsilon=inf"),
    (dict(privacy_unit="record", estimator=DPSGDClassifier(epsilon=2.0, epochs=1)), "alone spends epsilon="),
    (dict(estimator=DPFERMIClassifier(privacy_unit="record", epochs=1)), "give the base the same privacy_unit"),
])
def test_bad_input_gives_a_clear_error(data, kwargs, match):
    X, y, s, _ = data
    with pytest.raises(ValueError, match=match):
        DPPostProcessingClassifier(**{**PUBLIC, **kwargs}).fit(X, y, sensitive_features=s)


def test_bad_data_gives_a_clear_error(data):
    X, y, s, base = data
    # y is public under the sensitive unit: its classes are read from it, so a third label is refused as not binary
    est = DPPostProcessingClassifier(base, prefit=True, random_state=0, groups=[0, 1])
    s_bad = s.copy()
    s_bad[(s == 1) & (y == 0)] = 0
    est.fit(X, y, sensitive_features=s_bad)  # an empty (group, label) cell is private: no error
    with pytest.raises(ValueError, match="must be binary"):
        est.fit(X, y + (np.arange(len(y)) % 3 == 0), sensitive_features=s)
    with pytest.raises(ValueError, match="needs sensitive_features"):
        est.fit(X, y)
    est.fit(X, y, sensitive_features=s)
    with pytest.raises(ValueError, match="sensitive_features=s"):
        est.predict(X)
    with pytest.raises(ValueError, match="outside the known list"):
        est.predict(X, sensitive_features=s + 5)
