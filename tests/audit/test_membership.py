"""Membership inference: metrics against hand-computed cases, attacks with power and without, bad input."""

import json
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression

from dpfair.algorithms import DPFERMIClassifier
from dpfair.audit import (
    ATTACKS,
    NOTE,
    MembershipReport,
    attack_metrics,
    bootstrap_roc_metrics,
    clopper_pearson,
    membership_inference,
    roc_metrics,
)
from dpfair.audit.membership import balanced_masks, lira_scores, model_statistics
from dpfair.audit.metrics import _curve_metrics, _weighted_curves

# ---- metrics ------------------------------------------------------------------------------------


def test_perfect_separation_and_its_reverse():
    members = np.array([True] * 3 + [False] * 3)
    m = roc_metrics([3.0, 4.0, 5.0, 0.0, 1.0, 2.0], members)
    assert m == {"auc": 1.0, "advantage": 1.0, "tpr_at_0.1%_fpr": 1.0, "tpr_at_1%_fpr": 1.0}
    r = roc_metrics([0.0, 1.0, 2.0, 3.0, 4.0, 5.0], members)
    assert r["auc"] == 0.0 and r["advantage"] == 1.0 and r["tpr_at_0.1%_fpr"] == 0.0


def test_hand_computed_four_examples():
    # members score 0.9 and 0.7, non-members 0.8 and 0.6: three of the four (member, non-member) pairs are
    # ordered right, so AUC = 3/4; thresholds 0.9, 0.8, 0.7, 0.6 give (TPR, FPR) = (.5, 0), (.5, .5), (1, .5), (1, 1)
    m = roc_metrics([0.9, 0.8, 0.7, 0.6], [True, False, True, False])
    assert m["auc"] == pytest.approx(0.75)
    assert m["advantage"] == pytest.approx(0.5)
    assert m["tpr_at_0.1%_fpr"] == pytest.approx(0.5)


def test_ties_count_one_half():
    m = roc_metrics(np.zeros(10), np.arange(10) < 4)
    assert m["auc"] == 0.5 and m["advantage"] == 0.0 and m["tpr_at_1%_fpr"] == 0.0


def test_low_fpr_reads_every_threshold():
    # 1,000 non-members: FPR <= 0.1 % allows exactly one false positive, FPR <= 1 % ten
    rng = np.random.default_rng(1)
    neg = rng.normal(size=1000)
    top = np.sort(neg)[::-1]
    pos = np.r_[np.full(30, top[0] + 1), np.full(20, (top[0] + top[1]) / 2), np.full(50, top[10] - 1e-9)]
    m = roc_metrics(np.r_[pos, neg], np.r_[np.ones(100, bool), np.zeros(1000, bool)])
    assert m["tpr_at_0.1%_fpr"] == pytest.approx(0.5)  # the 30 above all and the 20 above all but one
    assert m["tpr_at_1%_fpr"] == pytest.approx(0.5)  # the other 50 sit below the eleventh non-member
    pos[50:] = top[9] - 1e-9  # now below the tenth only: FPR = 1 % exactly is allowed
    m = roc_metrics(np.r_[pos, neg], np.r_[np.ones(100, bool), np.zeros(1000, bool)])
    assert m["tpr_at_0.1%_fpr"] == pytest.approx(0.5) and m["tpr_at_1%_fpr"] == 1.0


def test_weighted_curves_equal_scikit_learn_on_the_resample():
    rng = np.random.default_rng(2)
    scores = np.round(rng.normal(size=60), 1)  # with ties
    members = rng.random(60) < 0.4
    m, n = members.sum(), (~members).sum()
    w_pos = rng.multinomial(m, np.full(m, 1 / m), size=3).astype(float)
    w_neg = rng.multinomial(n, np.full(n, 1 / n), size=3).astype(float)
    batch = _curve_metrics(*_weighted_curves(scores, members, w_pos, w_neg), (0.001, 0.01, 0.2))
    for b in range(3):
        counts = np.zeros(60, int)
        counts[members] = w_pos[b]
        counts[~members] = w_neg[b]
        direct = roc_metrics(np.repeat(scores, counts), np.repeat(members, counts), (0.001, 0.01, 0.2))
        for key, value in direct.items():
            assert batch[key][b] == pytest.approx(value, abs=1e-12), key
    unit = _curve_metrics(*_weighted_curves(scores, members, np.ones((1, m)), np.ones((1, n))), (0.01,))
    assert unit["auc"][0] == pytest.approx(roc_metrics(scores, members)["auc"])


def test_identical_distributions_give_chance_within_the_sampling_error():
    rng = np.random.default_rng(3)
    m = n = 1500
    scores, members = rng.normal(size=m + n), np.arange(m + n) < m
    out = attack_metrics(scores, members, n_bootstrap=200)
    se = math.sqrt((m + n + 1) / (12 * m * n))  # standard error of the AUC under the null (Mann–Whitney)
    assert abs(out["auc"] - 0.5) < 4 * se
    # the advantage is the two-sample Kolmogorov–Smirnov statistic: below its 0.1 % critical value
    assert out["advantage"] < 1.95 * math.sqrt((m + n) / (m * n))
    assert out["auc_low"] < 0.5 < out["auc_high"]
    assert out["n_members"] == m and out["n_nonmembers"] == n


def test_bootstrap_intervals_contain_the_estimate_and_are_reproducible():
    rng = np.random.default_rng(4)
    members = np.arange(400) < 200
    scores = rng.normal(size=400) + 0.8 * members
    out = attack_metrics(scores, members, confidence=0.9, n_bootstrap=300)
    for key in ("auc", "advantage", "tpr_at_1%_fpr"):
        assert out[f"{key}_low"] <= out[key] <= out[f"{key}_high"], key
    assert out == attack_metrics(scores, members, confidence=0.9, n_bootstrap=300)
    wide = attack_metrics(scores, members, confidence=0.99, n_bootstrap=300)
    assert wide["auc_high"] - wide["auc_low"] > out["auc_high"] - out["auc_low"]
    boot = bootstrap_roc_metrics(scores, members, n_bootstrap=250, chunk=100)
    assert boot["auc"].shape == (250,)
    other = bootstrap_roc_metrics(scores, members, n_bootstrap=250, chunk=7)
    for key in boot:
        np.testing.assert_array_equal(boot[key], other[key])  # the resamples do not depend on the chunking


def test_clopper_pearson():
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10)))
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** (1 / 10)), 1.0)
    exact = stats.binomtest(7, 40).proportion_ci(0.9, method="exact")
    assert clopper_pearson(7, 40, 0.9) == (pytest.approx(exact.low), pytest.approx(exact.high))


@pytest.mark.parametrize("call,match", [
    (lambda: roc_metrics([0.1, np.nan], [True, False]), "NaN"),
    (lambda: roc_metrics([0.1, 0.2, 0.3], [True, False]), "scores has 3 entries but members has 2"),
    (lambda: roc_metrics([0.1, 0.2], [True, True]), "both members"),
    (lambda: roc_metrics([0.1, 0.2], [2, 0]), "boolean mask"),
    (lambda: attack_metrics([0.1, 0.2], [True, False], confidence=1.0), "confidence"),
    (lambda: attack_metrics([0.1, 0.2], [True, False], n_bootstrap=0), "n_bootstrap"),
    (lambda: clopper_pearson(5, 3), "0 <= k <= n"),
    (lambda: clopper_pearson(-1, 3), "k must be"),
])
def test_metric_bad_inputs(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---- attack pieces ------------------------------------------------------------------------------


def test_balanced_masks():
    masks = balanced_masks(7, 50, np.random.default_rng(0))
    assert masks.shape == (7, 50) and np.all(masks.sum(axis=0) == 3)
    assert 0.3 < masks.mean() < 0.6


def test_lira_matches_the_gaussian_likelihood_ratio():
    # 4 shadows, two examples; each IN for 2, OUT for 2: global variances pooled within examples
    phi = np.array([[1.0, 5.0], [3.0, 9.0], [0.0, 2.0], [-2.0, 4.0]])
    masks = np.array([[True, True], [True, False], [False, True], [False, False]])
    target = np.array([2.5, 3.0])
    mu_in, mu_out = np.array([2.0, 3.5]), np.array([-1.0, 6.5])
    var_in = ((1 - 2) ** 2 + (3 - 2) ** 2 + (5 - 3.5) ** 2 + (2 - 3.5) ** 2) / 2
    var_out = ((0 + 1) ** 2 + (-2 + 1) ** 2 + (9 - 6.5) ** 2 + (4 - 6.5) ** 2) / 2
    expected = (stats.norm.logpdf(target, mu_in, math.sqrt(var_in))
                - stats.norm.logpdf(target, mu_out, math.sqrt(var_out)))
    np.testing.assert_allclose(lira_scores(phi, masks, target), expected)
    np.testing.assert_allclose(lira_scores(phi, masks, target, online=False), (target - mu_out) / math.sqrt(var_out))


def test_lira_reaches_the_likelihood_ratio_auc_on_gaussian_confidences():
    # phi ~ N(1, 1) when IN, N(0, 1) when OUT: the optimal test has AUC Φ(1/√2)
    rng = np.random.default_rng(5)
    n, k = 2000, 16
    masks = balanced_masks(k, n, rng)
    phi = rng.normal(size=(k, n)) + masks
    members = np.arange(n) < n // 2
    target = rng.normal(size=n) + members
    auc = roc_metrics(lira_scores(phi, masks, target), members)["auc"]
    assert auc == pytest.approx(stats.norm.cdf(1 / math.sqrt(2)), abs=0.03)


class _Fixed(ClassifierMixin, BaseEstimator):
    """A model that ignores its training data: P(y = 1 | x) = sigmoid(x_0). Also reports classes it is given."""

    def __init__(self, classes=(0, 1), random_state=None):
        self.classes = classes
        self.random_state = random_state

    def fit(self, X, y):
        self.classes_ = np.asarray(self.classes)
        return self

    def predict_proba(self, X):
        return np.column_stack([1 / (1 + np.exp(X[:, 0])), 1 / (1 + np.exp(-X[:, 0]))])


def test_model_statistics_align_columns_and_keep_precision():
    X = np.array([[40.0], [0.0], [-3.0]])
    y = np.array([1, 0, 2])  # class 2 unknown to the model
    logp, phi = model_statistics(_Fixed().fit(X, y), X, y, None, np.array([0, 1, 2]))
    assert logp.shape == (3, 3)
    assert logp[0, 1] == pytest.approx(-math.exp(-40), rel=1e-6)  # not log(1.0) = 0
    assert phi[0] == pytest.approx(40.0, rel=1e-6) and phi[1] == pytest.approx(0.0, abs=1e-12)
    assert logp[2, 2] == pytest.approx(math.log(1e-30))  # a class the model never saw


# ---- the attacks end to end -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def pool():
    """Few rows, many features, noisy labels: an unregularised model memorises its training half."""
    rng = np.random.default_rng(0)
    n, d = 300, 200
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + rng.normal(size=n) > 0).astype(int)
    s = rng.integers(0, 2, n)
    return X, y, s


@pytest.fixture(scope="module")
def overfit_report(pool):
    X, y, s = pool
    return membership_inference(LogisticRegression(C=1e3, max_iter=5000), X, y, s, n_shadow=8, n_bootstrap=200,
                                group_names=["women", "men"])


def test_attacks_have_power_on_an_overfit_model(overfit_report):
    frame = overfit_report.to_frame()
    for attack in ATTACKS:
        row = frame.loc[(attack, "all")]
        assert row["auc"] > 0.7 and row["auc_low"] > 0.6, attack
        assert row["advantage"] > 0.3, attack


def test_report_rows_intervals_and_note(overfit_report, pool):
    X, y, s = pool
    frame = overfit_report.to_frame()
    assert list(frame.index) == [(a, g) for a in ATTACKS for g in ("all", "women", "men")]
    assert list(frame.columns) == list(MembershipReport.COLUMNS)
    assert {"auc", "auc_low", "auc_high", "advantage", "tpr_at_0.1%_fpr", "tpr_at_1%_fpr", "n_members",
            "n_nonmembers"} <= set(frame.columns)
    for key in ("auc", "advantage"):
        assert np.all(frame[f"{key}_low"] <= frame[key]) and np.all(frame[key] <= frame[f"{key}_high"])
    assert frame.loc[("loss", "all"), "n_members"] == 150 and frame.loc[("loss", "all"), "n_nonmembers"] == 150
    per_group = frame.xs("loss", level="attack")
    assert per_group.loc["women", "n_members"] + per_group.loc["men", "n_members"] == 150
    assert overfit_report.members.sum() == 150 and set(overfit_report.scores) == set(ATTACKS)
    assert frame.attrs["note"] == NOTE
    d = overfit_report.to_dict()
    assert d["note"] == NOTE and d["n_shadow"] == 8 and d["target_privacy_spent"] is None
    assert d["attacks"]["lira"]["men"]["auc"] == frame.loc[("lira", "men"), "auc"]
    json.dumps(d, allow_nan=False)
    assert NOTE in str(overfit_report) and "lira-offline" in str(overfit_report)
    assert "not a privacy guarantee" in NOTE and "does not prove privacy" in NOTE


def test_attacks_are_at_chance_on_a_model_that_ignores_its_data(pool):
    X, y, s = pool
    report = membership_inference(_Fixed(), X, y, s, n_shadow=4, n_bootstrap=200)
    se = math.sqrt((300 + 1) / (12 * 150 * 150))
    for attack in ATTACKS:
        assert abs(report.metrics[attack]["all"]["auc"] - 0.5) < 4 * se, attack


def test_same_seed_same_report_and_a_fitted_target(pool):
    X, y, s = pool
    a = membership_inference(LogisticRegression(C=1e3, max_iter=5000), X, y, s, attacks="loss,lira", n_shadow=4,
                             n_bootstrap=50, random_state=3)
    b = membership_inference(LogisticRegression(C=1e3, max_iter=5000), X, y, s, attacks=["lira", "loss"],
                             n_shadow=4, n_bootstrap=50, random_state=3)
    assert a.attacks == ["loss", "lira"] and a.to_dict() == b.to_dict()
    mask = np.zeros(len(y), bool)
    mask[::3] = True
    model = LogisticRegression(C=1e3, max_iter=5000).fit(X[mask], y[mask])
    report = membership_inference(None, X, y, attacks=["loss"], target=(model, mask), n_bootstrap=50)
    assert np.array_equal(report.members, mask) and report.n_shadow == 0
    assert list(report.to_frame().index) == [("loss", "all")]  # no sensitive_features: no group rows
    assert report.metrics["loss"]["all"]["auc"] > 0.7


def test_a_dpfair_estimator_with_public_lists(pool):
    X, y, s = pool
    # proportions_budget=0.5: the released group counts of the pool's halves are not too small to constrain
    est = DPFERMIClassifier(epsilon=1.0, epochs=3, batch_size=64, proportions_budget=0.5, groups=2, classes=2)
    report = membership_inference(est, X[:, :10], y, s, n_shadow=2, n_bootstrap=50)
    eps, delta = report.target_privacy_spent
    assert eps <= 1.0 and 0 < delta < 1 and report.target_estimator == "DPFERMIClassifier"
    assert report.to_dict()["target_privacy_spent"]["epsilon"] == pytest.approx(eps)
    assert set(report.to_frame().index.get_level_values("group")) == {"all", "0", "1"}


@pytest.mark.parametrize("kwargs,match", [
    (dict(n_shadow=1), "n_shadow must be an integer >= 2"),
    (dict(attacks=["loss", "magic"]), "unknown attack 'magic'"),
    (dict(attacks=[]), "attacks is empty"),
    (dict(confidence=95), "confidence must lie strictly between 0 and 1"),
    (dict(random_state=-1), "random_state"),
    (dict(y=np.zeros(5)), "y has 5 entries but X has 300 rows"),
    (dict(sensitive_features=np.zeros(7)), "sensitive_features has 7 entries"),
    (dict(X=np.full((300, 3), np.nan)), "X contains NaN"),
    (dict(target=("model", np.ones(300, bool))), "predict_proba"),
    (dict(target=(_Fixed(), np.ones(10, bool))), "members mask has shape"),
    (dict(target=(_Fixed(), np.ones(300, bool))), "both members and non-members"),
    (dict(estimator=None), "estimator is None"),
    (dict(estimator="logistic"), "fit and predict_proba"),
])
def test_bad_input(pool, kwargs, match):
    X, y, s = pool
    args = dict(estimator=_Fixed(), X=X, y=y, sensitive_features=s, attacks=ATTACKS, n_shadow=2)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        membership_inference(args.pop("estimator"), args.pop("X"), args.pop("y"), **args)


def test_loss_only_needs_no_shadows(pool):
    X, y, s = pool
    report = membership_inference(_Fixed(), X, y, s, attacks=["loss"], n_shadow=0, n_bootstrap=20)
    assert report.n_shadow == 0 and report.attacks == ["loss"]
