"""PF-LD: release sensitivities by brute force, noise scale, accounting, the non-private limit, inputs."""

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.base import clone

from dpfair.algorithms.pfld import (
    PFLDClassifier,
    constraint_cells,
    dual_sums,
    group_counts,
    per_sample_values,
    primal_sum,
)
from dpfair.datasets import make_synthetic
from dpfair.exceptions import PrivacyLeakWarning, SmallGroupWarning
from dpfair.fairness import demographic_parity_violation
from dpfair.nn import MLP, LogisticRegression
from dpfair.privacy import PrivacyLedger, Release, SecretRandom, epsilon_of, max_neighbour_distance

NOTIONS = ("demographic_parity", "equalized_odds", "accuracy_parity", "predictive_equality")


@pytest.fixture(scope="module")
def data():
    return make_synthetic(n_samples=400, n_features=5, label_bias=0.4, random_state=0)


@pytest.fixture(scope="module")
def large():
    """4,000 rows: groups large enough for their counts released at ε = 1 (noise std about 80)."""
    return make_synthetic(n_samples=4000, n_features=5, label_bias=0.4, random_state=0)


@pytest.fixture(scope="module")
def calibrated(large):
    """One fit whose noise is calibrated to ε = 1 (calibration is the slow part; fits elsewhere pass σ).
    dual_tolerance=0 (the paper's dual step, as in FIXED_NOISE): the "auto" one would warn that at ε = 1 it hides
    violations of these groups; the calibration does not depend on it."""
    X, y, s = large
    return PFLDClassifier(epsilon=1.0, delta=1e-5, epochs=2, batch_size=1000, dual_tolerance=0.0, learning_rate=0.1,
                          groups=2, random_state=0).fit(X, y, s)


#: a fixed primal noise multiplier: skips calibrating it, so that a private fit takes well under a second;
#: dual_tolerance=0 (the paper's dual step): the multipliers grow on noise too, so every fit takes noisy primal steps
#: learning_rate=0.01: enough for these one-epoch fits (on a few thousand rows) to learn something
FIXED_NOISE = dict(epsilon=1.0, delta=1e-5, noise_multiplier=5.0, epochs=1, batch_size=100, dual_tolerance=0.0,
                   learning_rate=0.01)
#: make_synthetic's two groups, declared: none is inferred from the private s
GROUPS = dict(groups=2)


def _codes(s, k):
    """The harness codes "unknown" as the extra group k; the releases take −1."""
    return np.where(s == k, -1, s)


def _small_problem(notion, k=3, n=10, seed=0):
    X, y, s = make_synthetic(n_samples=n, n_features=3, n_groups=k, random_state=seed)
    s = s.copy()
    s[:2] = k  # two rows of unknown s
    y = y.copy()
    y[:k] = 0
    y[k:2 * k] = 1  # every (y, s) cell can be reached
    model = MLP(3, 2, hidden=(4,), seed=seed).double()
    return 3 * X, y, s, model


@pytest.mark.parametrize("notion", NOTIONS)
def test_dual_release_moves_by_at_most_twice_its_bound(notion):
    # Replacing one s (known or unknown) moves one clipped value between two group sums: distance √2·C_d.
    X, y, s, model = _small_problem(notion)
    k, columns = 3, [0] if notion == "accuracy_parity" else [1]
    G = k * (2 if notion == "equalized_odds" else 1)
    clip = 0.3  # binds for losses and probabilities alike

    def release(X, y, s):
        groups, _ = constraint_cells(notion, y, _codes(s, k), k)
        with torch.no_grad():
            values = per_sample_values(model(torch.tensor(X)), torch.tensor(y), notion, columns)
        return dual_sums(values, torch.tensor(groups), G, clip)

    distance = max_neighbour_distance(release, X, y, s, "sensitive", n_groups=k + 1)
    bound = clip / math.sqrt(2)
    assert distance <= 2 * bound + 1e-12
    assert distance >= 0.99 * 2 * bound  # tight: the bound is not loose


@pytest.mark.parametrize("notion", NOTIONS)
def test_primal_release_moves_by_at_most_twice_its_bound_and_each_person_stays_within_it(notion):
    X, y, s, model = _small_problem(notion, seed=1)
    k, l = 3, 2
    G = k * (l if notion == "equalized_odds" else 1)
    g = torch.Generator().manual_seed(0)
    width = 1 if notion == "accuracy_parity" else l
    weights = (2 * torch.rand(G, width, generator=g, dtype=torch.float64) - 1)
    weights[0] = 1.0  # a group at the largest weight
    clip = 0.05

    def release(X, y, s):
        groups, _ = constraint_cells(notion, y, _codes(s, k), k)
        return primal_sum(model, torch.tensor(X), torch.tensor(y), torch.tensor(groups), weights, notion, clip)

    distance = max_neighbour_distance(release, X, y, s, "sensitive", n_groups=k + 1)
    assert distance <= 2 * clip + 1e-12
    assert distance >= 0.5 * clip
    # Poisson-sampled REPLACE_ONE accounting needs every contribution within the bound of 0.
    for i in range(len(y)):
        for r in range(k + 1):
            s1 = s.copy()
            s1[i] = r
            one = release(X[i:i + 1], y[i:i + 1], s1[i:i + 1])
            assert math.sqrt(sum(float((v**2).sum()) for v in one.values())) <= clip + 1e-12


def test_counts_release_moves_by_at_most_twice_its_bound():
    X, y, s, _ = _small_problem("demographic_parity")
    distance = max_neighbour_distance(lambda X, y, s: group_counts(_codes(s, 3), 3), X, y, s, "sensitive",
                                      n_groups=4)
    assert distance == pytest.approx(math.sqrt(2))  # = 2 · √2/2


def test_releases_add_noise_of_the_calibrated_scale(calibrated):
    est = calibrated
    ledger = PrivacyLedger("sensitive")
    sigmas = est.noise_multipliers_
    assert (sigmas["pf-ld dual"], sigmas["pf-ld primal"]) == (est.dual_noise_multiplier_, est.noise_multiplier_)
    dual = Release(est.privacy_plan_["pf-ld dual"], sigmas["pf-ld dual"], SecretRandom(), ledger).noisy_sum(
        torch.zeros(4000, 5), bound=est.dual_clip_ / math.sqrt(2))
    primal = Release(est.privacy_plan_["pf-ld primal"], sigmas["pf-ld primal"], SecretRandom(), ledger).noisy_sum(
        {"w": torch.zeros(20000)}, bound=est.primal_clip)
    # sample std of N iid normals: relative standard error 1/√(2N) < 1 %; allow 4 %
    assert float(dual.std()) == pytest.approx(est.dual_noise_multiplier_ * est.dual_clip_ / math.sqrt(2), rel=0.04)
    assert float(primal["w"].std()) == pytest.approx(est.noise_multiplier_ * est.primal_clip, rel=0.04)
    assert est.dual_clip_ == 1.0  # probabilities: min(C_d, 1)
    records = ledger.to_records()
    assert records[0]["noise_multiplier"] == est.dual_noise_multiplier_
    assert records[1]["sampling_probability"] == est.sampling_probability_ == 0.25


def test_ledger_spends_at_most_the_target_and_close_to_it(calibrated):
    est = calibrated
    eps, delta = est.privacy_spent_
    assert 0.99 <= eps <= 1.0 and delta == 1e-5
    records = est.privacy_ledger_.to_records()
    assert [r["label"] for r in records] == ["pf-ld group counts", "pf-ld dual", "pf-ld primal"]
    assert [r["count"] for r in records] == [1, 2, est.n_steps_] and est.n_steps_ == 8
    assert est.privacy_plan_.epsilon(est.noise_multipliers_, 1e-5, "sensitive") == eps
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)
    # the shares: the counts alone spend 5 % of ε, the dual releases alone 20 %
    assert epsilon_of(est.privacy_ledger_.dp_event.events[0], 1e-5, "sensitive") <= 0.05
    assert epsilon_of(est.privacy_ledger_.dp_event.events[1], 1e-5, "sensitive") == pytest.approx(0.2, rel=0.01)


def test_public_proportions_release_no_counts_and_scale_with_the_sensitive_fraction(data):
    X, y, s = data
    half = np.where(np.arange(len(s)) % 2 == 0, s.astype(float), np.nan)  # as declared: half of the rows' s known
    est = PFLDClassifier(epsilon=math.inf, group_proportions=[0.5, 0.5], sensitive_fraction=0.5, epochs=1,
                         random_state=0, **GROUPS).fit(X, y, half)
    assert np.allclose(est.group_sizes_, [100, 100])  # r · n · p
    assert "pf-ld group counts" not in [r["label"] for r in est.privacy_ledger_.to_records()]
    eo = PFLDClassifier(notion="equalized_odds", epsilon=math.inf, group_proportions=[[0.6, 0.4], [0.4, 0.6]],
                        epochs=1, random_state=0, **GROUPS).fit(X, y, s)
    n_y = np.bincount(y)
    assert np.allclose(eo.group_sizes_, [0.6 * n_y[0], 0.4 * n_y[0], 0.4 * n_y[1], 0.6 * n_y[1]])


def _handwritten_lagrangian_dual(model, X, y, s, epochs, lr, step_lambda):
    """Full-batch Lagrangian dual for demographic parity with exact group means, no clipping, no noise."""
    X, y, s = torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    lam = torch.zeros(2)
    for _ in range(epochs):
        with torch.no_grad():
            p = torch.softmax(model(X), 1)[:, 1]
            v = torch.stack([p[s == g].mean() for g in range(2)]) - p.mean()
            lam, xi = lam + step_lambda * v.abs(), torch.sign(v)
        logits = model(X)
        p = torch.softmax(logits, 1)[:, 1]
        group_terms = sum(lam[g] * xi[g] * (p[s == g].mean() - p.mean()) for g in range(2))
        opt.zero_grad()
        (F.cross_entropy(logits, y) + group_terms).backward()
        opt.step()
    return model, lam


def test_without_noise_pfld_is_the_plain_lagrangian_dual(data):
    X, y, s = data
    init = LogisticRegression(5, 2, seed=3)
    est = PFLDClassifier(copy.deepcopy(init), epsilon=math.inf, epochs=6, batch_size=len(y), optimizer="sgd",
                         learning_rate=0.5, dual_learning_rate=5.0, primal_clip=1e6, random_state=0,
                         **GROUPS).fit(X, y, s)
    model, lam = _handwritten_lagrangian_dual(copy.deepcopy(init), X, y, s, 6, 0.5, 5.0)
    assert np.allclose(est.lambdas_[:, 0], lam.numpy(), atol=1e-5)
    with torch.no_grad():
        hand = torch.softmax(model(torch.tensor(X, dtype=torch.float32)), 1).numpy()
    assert np.allclose(est.predict_proba(X), hand, atol=1e-5)
    assert math.isinf(est.privacy_spent_[0])


def test_lambda_grows_with_the_violation_and_the_constraint_reduces_it():
    X, y, s = make_synthetic(n_samples=1500, n_features=5, label_bias=0.5, feature_bias=1.0, random_state=1)
    common = dict(model="logistic", epsilon=math.inf, epochs=15, batch_size=300, learning_rate=0.05, random_state=0,
                  **GROUPS)
    # a dual step large enough to halve the violation, not so large that the model ends worse than a constant one
    fair = PFLDClassifier(dual_learning_rate=2.0, **common).fit(X, y, s)
    plain = PFLDClassifier(dual_learning_rate=0.0, **common).fit(X, y, s)
    lams = [h["lambda_max"] for h in fair.history_]
    assert all(b >= a for a, b in zip(lams, lams[1:])) and lams[-1] > lams[0]
    assert plain.lambdas_.max() == 0.0
    assert demographic_parity_violation(fair.predict(X), s) < 0.5 * demographic_parity_violation(plain.predict(X), s)


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize("k", [2, 3])
def test_every_notion_runs_with_two_and_three_groups(notion, k):
    # 4,000 rows: (label, group) cells large enough for their counts released at ε = 1
    X, y, s = make_synthetic(n_samples=4000, n_features=4, n_groups=k, random_state=k)
    est = PFLDClassifier(notion=notion, groups=k, random_state=0, **FIXED_NOISE).fit(X, y, s)
    assert 0 < est.privacy_spent_[0] < math.inf
    assert est.lambdas_.shape == (k * (2 if notion == "equalized_odds" else 1), 1)
    assert est.predict_proba(X).shape == (4000, 2) and np.isfinite(est.predict_proba(X)).all()


def test_multiclass_labels_compare_every_class():
    X, y, s = make_synthetic(n_samples=300, n_features=4, n_classes=3, random_state=0)
    est = PFLDClassifier(epsilon=math.inf, epochs=2, learning_rate=0.01, random_state=0, **GROUPS).fit(X, y, s)
    assert est.lambdas_.shape == (2, 3)


def test_missing_sensitive_values(large, replay):
    X, y, s = large
    rng = np.random.default_rng(0)
    unknown = rng.random(len(s)) < 0.4  # r ≈ 0.6
    s_nan = np.where(unknown, np.nan, s.astype(float))
    with replay(0), pytest.warns(PrivacyLeakWarning, match="list of groups was inferred from the private data"):
        est = PFLDClassifier(epsilon=math.inf, epochs=2, random_state=0).fit(X, y, s_nan)
    assert list(est.groups_) == [0.0, 1.0]  # inferred from the known values: NaN is no group
    assert np.array_equal(est.group_sizes_, np.bincount(s[~unknown], minlength=2))
    s_marked = np.where(unknown, -1, s)
    with replay(0):  # the same secret batches
        other = PFLDClassifier(epsilon=math.inf, epochs=2, missing_value=-1, random_state=0, **GROUPS).fit(
            X, y, s_marked)
    assert np.array_equal(other.predict_proba(X), est.predict_proba(X))
    labels = np.where(unknown, None, np.array(["f", "m"])[s]).astype(object)
    private = PFLDClassifier(random_state=0, groups=["f", "m"], **FIXED_NOISE).fit(X, y, labels)
    assert list(private.groups_) == ["f", "m"] and private.privacy_spent_[0] < math.inf


@pytest.mark.secret_noise
def test_same_seed_same_model_only_when_the_noise_is_replayed(large, replay):
    X, y, s = large
    fit = lambda seed: PFLDClassifier(random_state=seed, **GROUPS, **FIXED_NOISE).fit(X, y, s).predict_proba(X)  # noqa: E731
    assert not np.array_equal(fit(3), fit(3))  # the batches and the noise are secret
    with replay(0):
        a, b, c = fit(3), fit(3), fit(4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_clone_keeps_hyperparameters():
    est = PFLDClassifier(notion="equalized_odds", primal_clip=3.0, missing_value=-1)
    assert clone(est).get_params() == est.get_params()


@pytest.mark.parametrize("kwargs,match", [
    (dict(sensitive_fraction=0.0), r"sensitive_fraction must lie in \(0, 1\]"),
    (dict(sensitive_fraction=-0.5), r"sensitive_fraction must lie in \(0, 1\]"),
    (dict(sensitive_fraction=1.5), r"sensitive_fraction must lie in \(0, 1\]"),
    (dict(primal_clip=0.0), "primal_clip must be > 0"),
    (dict(dual_clip=-1.0), "dual_clip must be > 0"),
    (dict(epsilon=0.0), "epsilon must be > 0"),
    (dict(epsilon=-1.0), "epsilon must be > 0"),
    (dict(notion="equal_opportunity"), "notion must be one of"),
    (dict(privacy_unit="record"), "privacy_unit='sensitive'"),
    (dict(counts_budget=0.5, dual_budget=0.5), "counts_budget \\+ dual_budget must be < 1"),
    (dict(group_proportions=[0.2, 0.3, 0.5]), "group_proportions must have shape"),
    (dict(group_proportions=[0.2, 0.3]), "each row must sum to 1"),
])
def test_bad_hyperparameters(kwargs, match, data):
    X, y, s = data
    with pytest.raises(ValueError, match=match):
        PFLDClassifier(epochs=1, **GROUPS, **kwargs).fit(X, y, s)


#: what PF-LD says of groups too small for their constraints: their released sizes, and the noise on their means
TOO_SMALL = "which may be fewer than 30|cannot tell the mean predicted rate"


def test_bad_sensitive_features(data):
    X, y, s = data
    with pytest.raises(ValueError, match="needs sensitive_features"):
        PFLDClassifier(epochs=1).fit(X, y)
    with (pytest.raises(ValueError, match="single group.*pass groups="),
          pytest.warns(PrivacyLeakWarning, match="list of groups was inferred from the private data")):
        PFLDClassifier(epochs=1).fit(X, y, np.where(s == 1, np.nan, 0.0))
    # with the public group list, what the private s holds decides no error: no known value, or a group
    # without any member of a label, still fits (and warns that its groups are too small for their constraints)
    with pytest.warns(SmallGroupWarning, match=TOO_SMALL):
        PFLDClassifier(epochs=1, learning_rate=0.01, groups=[0.0, 1.0]).fit(X, y, np.full(len(y), np.nan))
    lonely = s.copy()
    lonely[np.flatnonzero(y == 0)[0]] = 2  # group 2 has no member with label 1
    with pytest.warns(SmallGroupWarning, match=TOO_SMALL):
        PFLDClassifier(notion="equalized_odds", epochs=1, learning_rate=0.01, groups=3).fit(X, y, lonely)
    with pytest.raises(ValueError, match="one entry per row"):
        PFLDClassifier(epochs=1).fit(X, y, s[:-1])


def _forecast_fit(monkeypatch, groups, s, **params):
    """Fit PF-LD recording its SmallGroupWarnings, and how many had been raised when the first dual step (the
    training loop's first step) ran."""
    import warnings

    from dpfair.exceptions import SmallGroupWarning

    rng = np.random.default_rng(1)
    X = rng.normal(size=(len(s), 3))
    y = (X[:, 0] + rng.normal(size=len(s)) > 0).astype(int)
    before_first_step = []
    step = PFLDClassifier._dual_step

    def spy(self, *args, **kwargs):
        if not before_first_step:
            before_first_step.append(sum(isinstance(w.message, SmallGroupWarning) for w in caught))
        return step(self, *args, **kwargs)

    monkeypatch.setattr(PFLDClassifier, "_dual_step", spy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = PFLDClassifier(epsilon=1.0, epochs=1, model="logistic", groups=groups, random_state=0,
                             **params).fit(X, y, sensitive_features=s)
    said = [w.message for w in caught if isinstance(w.message, SmallGroupWarning)]
    forecast = next(m for m in said if "cannot tell" in str(m))
    assert before_first_step == [len(said)]  # every one of them before training began
    return est, forecast


def test_noise_forecast_names_the_declared_group_and_its_released_size_before_training(monkeypatch):
    """Issue 41: the forecast read "267 members", matching no group size (27 / 3,613 / 4,553 / 12,057 rows), after
    the training loop. It now comes before the loop and names the group as declared with its released (noisy) size."""
    s = np.where(np.arange(3000) < 800, "mid", "large").astype(object)
    est, forecast = _forecast_fit(monkeypatch, ["large", "mid"], s)
    worst = int(np.argmax(est.dual_tolerance_))
    assert est.constraint_keys_[worst] == (None, 1) and forecast.groups == ["mid"]
    released = float(est.group_sizes_[worst])  # a noisy count (std ≈ 112 here): never the exact 800
    assert forecast.sizes == [pytest.approx(released)]
    assert f"'mid' about {released:,.0f} people (a released count, noise std" in str(forecast)
    assert forecast.floor is not None and released > forecast.floor and "or fewer" not in str(forecast)


def test_noise_forecast_shows_a_floored_count_as_the_floor_it_is(monkeypatch):
    """A group whose noisy count fell below the floor is released as the floor (the issue's "267"): the warning says
    it is that floor "or fewer", and never prints a size "about" the floor alone."""
    s = np.where(np.arange(3000) < 20, "tiny", np.where(np.arange(3000) % 2, "a", "b")).astype(object)
    est, forecast = _forecast_fit(monkeypatch, ["a", "b", "tiny"], s, notion="equalized_odds")
    assert forecast.groups == ["tiny"] and "among label" in str(forecast)
    floor = forecast.floor
    assert forecast.sizes == [pytest.approx(floor)] and est.group_sizes_.min() == pytest.approx(floor)
    assert f"'tiny' about {floor:,.0f} or fewer people among label" in str(forecast)
    assert "is the floor of the released counts" in str(forecast) and "about 20 " not in str(forecast)
