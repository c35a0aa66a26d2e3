import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from dpfair.algorithms._jagielski import cell_counts
from dpfair.algorithms.dp_oracle import DPOracleClassifier, hypothesis_positives
from dpfair.datasets import make_synthetic
from dpfair.exceptions import UtilityWarning
from dpfair.fairness import equalized_odds_violation
from dpfair.privacy import Part, PrivacyLedger, Release, SecretRandom, pure_dp_event, epsilon_of, max_neighbour_distance


#: the public group list of the binary synthetic data (the oracle protects s only: y is public), none inferred
PUBLIC = dict(groups=[0, 1])

#: what a private fit on these few thousand rows says: its auditor's noisy cell rates hide violations above 0.05
AUDITOR_HIDES = r"the DP oracle's auditor at epsilon=\S+ cannot tell a \(label, group\) cell's positive rate"


def fit_warned(est, X, y, s):
    """``est.fit(X, y, sensitive_features=s)``, asserting the auditor's warning that its noise hides violations."""
    with pytest.warns(UtilityWarning, match=AUDITOR_HIDES):
        return est.fit(X, y, sensitive_features=s)


def biased(n, seed, n_groups=2):
    return make_synthetic(n_samples=n, n_features=5, n_groups=n_groups, label_bias=0.3, feature_bias=2.0,
                          random_state=seed)


@pytest.fixture(scope="module")
def split():
    X, y, s = biased(4000, 2)
    return (X[:2000], y[:2000], s[:2000]), (X[2000:], y[2000:], s[2000:])


@pytest.fixture(scope="module")
def data(split):
    return split[0]


def expected_eo(p, y, s):
    """Equalized-odds violation of a randomized classifier, from its probabilities."""
    return max(abs(p[(y == c) & (s == 0)].mean() - p[(y == c) & (s == 1)].mean()) for c in (0, 1))


@pytest.mark.parametrize("aware", [False, True])
def test_learner_score_and_auditor_counts_have_the_stated_sensitivity(aware):
    X, y, s = biased(24, 4, n_groups=3)
    est = DPOracleClassifier(aware, epsilon=math.inf, n_rounds=3, n_thresholds=5, n_components=1,
                             groups=3, random_state=0).fit(X, y, sensitive_features=s)
    F = X @ est.directions_ + est.offsets_
    lam = np.array([[0.3, -0.5, 0.1], [-0.2, 0.4, 0.0]])
    costs = est._per_person_costs(lam, len(y))
    sizes = lambda y, s: cell_counts(np.zeros_like(y), y, s, 1, 2, 3)[0].T  # noqa: E731

    def scores(X, y, s):
        return est._scores(hypothesis_positives(F, est.thresholds_, y, s, 3), sizes(y, s), costs)

    # the exponential mechanism needs the largest change of any one hypothesis's total score
    totals = lambda X, y, s: scores(X, y, s).sum(axis=1) if aware else scores(X, y, s)  # noqa: E731
    delta = est._sensitivity(costs)
    worst = max_neighbour_distance(totals, X, y, s, "sensitive", ord=np.inf, n_groups=3)
    assert 0.5 * delta < worst <= delta + 1e-9
    # an A-aware product hypothesis: (j, g_r) with one threshold per group
    j, g = 1, np.array([1, 3, 5])

    def hits(X, y, s):
        pred = F[:, j] >= est.thresholds_[j, g[s]]
        return cell_counts(pred.astype(int), y, s, 2, 2, 3)[1]

    assert max_neighbour_distance(hits, X, y, s, "sensitive", ord=1, n_groups=3) == 2.0


def test_exponential_mechanism_samples_the_product_distribution():
    scores = np.array([[[0.0, 1.0], [2.0, 0.5]], [[1.5, 0.0], [0.0, 0.0]]])  # (J=2, m=2, G=2)
    n = 20000
    mechanism = Release(Part("em", mechanism="exponential"), 1.0, SecretRandom(), PrivacyLedger("sensitive"))
    draws = [mechanism.select(scores, 1.0) for _ in range(n)]  # ε₀ = 2/σ = 2
    freq = np.zeros((2, 2, 2))
    for j, g in draws:
        freq[j, g[0], g[1]] += 1 / n
    joint = np.exp(scores[:, 0, :, None] + scores[:, 1, None, :])  # exp(eps * score / (2 * Delta))
    joint /= joint.sum()
    assert np.all(np.abs(freq - joint) < 5 * np.sqrt(joint * (1 - joint) / n) + 1e-12)
    exact = Release(Part("em", mechanism="exponential"), 0.0, SecretRandom(), PrivacyLedger("sensitive"))
    j, g = exact.select(scores, 1.0)
    assert (j, g.tolist()) == (0, [1, 0])


def test_pure_dp_event_has_its_epsilon():
    assert epsilon_of(pure_dp_event(0.7), 1e-9, "sensitive") == pytest.approx(0.7, rel=1e-3)


@pytest.mark.parametrize("aware", [False, True])
def test_ledger_spends_at_most_the_target_and_matches_the_plan(data, aware):
    X, y, s = data
    est = fit_warned(DPOracleClassifier(aware, epsilon=1.0, delta=1e-6, n_rounds=5, random_state=0, **PUBLIC),
                     X, y, s)
    eps = est.privacy_spent_[0]
    assert 0.99 <= eps <= 1.0
    sigma, sigma_c = est.noise_multiplier_, est.noise_multipliers_["cell sizes (y, s)"]
    assert est.privacy_plan_.epsilon(est.noise_multipliers_, 1e-6, "sensitive") == pytest.approx(eps, rel=1e-6)
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)
    records = est.privacy_ledger_.to_records()
    assert len(records) == 1 + 2 * 5
    assert records[0]["label"] == "cell sizes (y, s)" and records[0]["noise_multiplier"] == sigma_c
    # the counts get their share: Laplace on replace-one with bound 1 spends 2 / sigma_c
    assert 2 / sigma_c == pytest.approx(0.1, rel=0.01)
    assert {r["mechanism"] for r in records[1::2]} == {"randomizedresponse"}
    assert all(r["noise_multiplier"] == sigma for r in records[2::2])


@pytest.mark.parametrize("aware", [False, True])
def test_without_noise_it_reduces_the_equalized_odds_violation_of_the_unconstrained_learner(split, aware):
    (X, y, s), (Xt, yt, st) = split
    erm = LogisticRegression().fit(X, y)
    base_eo = equalized_odds_violation(yt, erm.predict(Xt), st)
    est = DPOracleClassifier(aware, epsilon=math.inf, n_rounds=20, random_state=0, **PUBLIC)
    est.fit(X, y, sensitive_features=s)
    p = est.predict_proba(Xt, sensitive_features=st)[:, 1]
    assert base_eo > 0.2
    assert expected_eo(p, yt, st) < 0.4 * base_eo
    # the first round has lambda = 0: its hypothesis is the unconstrained best response (no group term)
    assert est.history_[0]["sensitivity"] == (1.0 if aware else 0.0)
    if aware:  # group thresholds keep most of the accuracy
        assert np.mean(np.where(yt == 1, 1 - p, p)) < np.mean(erm.predict(Xt) != yt) + 0.05


def test_blind_variant_does_not_need_s_at_prediction(data):
    X, y, s = data
    est = fit_warned(DPOracleClassifier(False, epsilon=2.0, n_rounds=4, random_state=0, **PUBLIC), X, y, s)
    np.testing.assert_array_equal(est.predict_proba(X), est.predict_proba(X, sensitive_features=1 - s))
    aware = fit_warned(DPOracleClassifier(True, epsilon=2.0, n_rounds=4, random_state=0, **PUBLIC), X, y, s)
    with pytest.raises(ValueError, match="sensitive_features=s"):
        aware.predict(X)


@pytest.mark.secret_noise
def test_same_seed_same_result_only_when_the_noise_is_replayed(data, replay):
    X, y, s = data
    fit = lambda r: fit_warned(DPOracleClassifier(True, epsilon=1.0, n_rounds=5, random_state=r,  # noqa: E731
                                                  **PUBLIC), X, y, s)
    assert not np.array_equal(fit(3).cell_sizes_, fit(3).cell_sizes_)
    with replay(0):
        a, b, c = fit(3), fit(3), fit(4)
    assert np.array_equal(a.hypotheses_, b.hypotheses_)
    assert np.array_equal(a.predict(X, sensitive_features=s), b.predict(X, sensitive_features=s))
    assert not (np.array_equal(a.hypotheses_, c.hypotheses_) and np.array_equal(a.cell_sizes_, c.cell_sizes_))


@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=0.0), "epsilon must be > 0"),
    (dict(privacy_unit="record"), "protects the sensitive attribute only"),
    (dict(n_rounds=0), "n_rounds must be > 0"),
    (dict(bound=-1.0), "bound must be > 0"),
    (dict(counts_budget=1.0), "counts_budget must lie strictly between 0 and 1"),
    (dict(n_thresholds=2.5), "n_thresholds must be an integer"),
])
def test_bad_input_gives_a_clear_error(data, kwargs, match):
    X, y, s = data
    with pytest.raises(ValueError, match=match):
        DPOracleClassifier(**kwargs).fit(X, y, sensitive_features=s)


def test_bad_data_gives_a_clear_error(data):
    X, y, s = data
    est = DPOracleClassifier(n_rounds=2, random_state=0, **PUBLIC)
    s_bad = s.copy()
    s_bad[(s == 0) & (y == 1)] = 1
    fit_warned(est, X, y, s_bad)  # an empty (group, label) cell is private: no error
    with pytest.raises(ValueError, match="must be binary"):
        est.fit(X, y + (np.arange(len(y)) % 3 == 0), sensitive_features=s)
