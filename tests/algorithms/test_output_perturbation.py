"""Output perturbation (Mangold et al. 2023, Sec. 4.1, App. E): the solver, the sensitivities, the release."""

import math
import warnings

import numpy as np
import pytest
from scipy.stats import chi2
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from dpfair.algorithms import METHODS, OutputPerturbationClassifier, load_estimator
from dpfair.algorithms.output_perturbation import (
    bound_rows,
    lipschitz_constant,
    minimize_regularized_logistic,
    perturb_minimizer,
    project_onto_ball,
)
from dpfair.exceptions import LearnedNothingWarning, PrivacyLeakWarning, UtilityWarning
from dpfair.privacy import SecretRandom, max_neighbour_distance

TOL = 1e-10


def _data(n=200, d=4, n_classes=2, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    W = rng.normal(size=(n_classes, d))
    y = np.argmax(X @ W.T + rng.gumbel(size=(n, n_classes)), axis=1)
    return X, y, rng.integers(0, 2, n)


def _wstar(X, y, n_classes, mu=1.0, N=None, R=1.0, c=None):
    return minimize_regularized_logistic(bound_rows(X, R, c), y, n_classes=n_classes, l2_regularization=mu,
                                         normalizer=N, tol=TOL)


def _gradient_norm(W, X, y, n_classes, mu, N):
    """‖∇f‖ computed independently of the module: (1/N) Σ (p_i − e_yi) x_iᵀ + μW."""
    W = np.atleast_2d(W)
    scores = X @ W.T
    if n_classes == 2:
        residual = 1.0 / (1.0 + np.exp(-scores[:, 0])) - y
        return np.linalg.norm(residual @ X / N + mu * W[0])
    P = np.exp(scores - scores.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    return np.linalg.norm((P - np.eye(n_classes)[y]).T @ X / N + mu * W)


def _est(**kw):
    return OutputPerturbationClassifier(**{"classes": 2, "groups": 2, "random_state": 0, **kw})


# ---- the solver reaches the minimiser -----------------------------------------------------------------------

@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("mu", [1.0, 0.05])
def test_the_solver_matches_scikit_learn(n_classes, mu):
    X, y, _ = _data(n=300, d=5, n_classes=n_classes, scale=0.7)
    Xb = bound_rows(X, 1.0)
    W = _wstar(X, y, n_classes, mu)
    sk = LogisticRegression(C=1.0 / (mu * len(X)), fit_intercept=False, solver="newton-cholesky", tol=1e-14,
                            max_iter=1000).fit(Xb, y)
    np.testing.assert_allclose(np.atleast_2d(W), sk.coef_, atol=1e-8)
    assert _gradient_norm(W, Xb, y, n_classes, mu, len(X)) <= TOL
    assert W.shape == ((5,) if n_classes == 2 else (3, 5))


@pytest.mark.parametrize("n_classes,mu", [(2, 1e-3), (2, 1e-6), (4, 1e-4), (4, 1e-8)])
def test_the_solver_stops_at_tol_on_separable_data_with_weak_regularisation(n_classes, mu):
    # The sensitivity needs ‖∇f(ŵ)‖ ≤ τ at the stop: hard cases (separable, ‖w*‖ far from 0) still reach it.
    rng = np.random.default_rng(3)
    X = bound_rows(rng.normal(size=(400, 6)), 1.0)
    y = np.argmax(X @ rng.normal(size=(n_classes, 6)).T, axis=1)
    W = minimize_regularized_logistic(X, y, n_classes=n_classes, l2_regularization=mu, tol=TOL)
    assert _gradient_norm(W, X, y, n_classes, mu, len(X)) <= TOL
    assert np.linalg.norm(W) <= lipschitz_constant(1.0, n_classes) / mu  # ∇f(w*) = 0 ⇒ μ‖w*‖ ≤ Λ


def test_the_estimator_at_infinite_epsilon_is_scikit_learns_model_with_an_intercept():
    # fit_intercept appends the public column c BEFORE the rows are bounded, and regularises its weight.
    X, y, _ = _data(n=250, d=3, scale=0.8)
    c, mu = 0.5, 0.2
    est = _est(epsilon=math.inf, fit_intercept=True, intercept_scaling=c, l2_regularization=mu,
               sample_size=250).fit(X, y)
    sk = LogisticRegression(C=1.0 / (mu * 250), fit_intercept=False, solver="newton-cholesky", tol=1e-14,
                            max_iter=1000).fit(bound_rows(X, 1.0, c), y)
    np.testing.assert_allclose(est.coef_, sk.coef_[:, :3], atol=1e-8)
    np.testing.assert_allclose(est.intercept_, sk.coef_[:, 3] * c, atol=1e-8)
    np.testing.assert_allclose(est.decision_function(X), sk.decision_function(bound_rows(X, 1.0, c)), atol=1e-8)
    assert est.n_params_ == 4 and est.privacy_spent_[0] == math.inf


# ---- sensitivity by brute force -------------------------------------------------------------------------

def _adversarial_rows(w, d, rng):
    """Rows of norm 10 (bounded to R by the estimator) along random axes, the coordinate axes and ±w*."""
    dirs = [*rng.normal(size=(12, d)), *np.eye(d), *np.atleast_2d(w), *(-np.atleast_2d(w))]
    return [10.0 * v / np.linalg.norm(v) for v in dirs if np.linalg.norm(v) > 0]


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_record_sensitivity_by_brute_force(n_classes, seed):
    """Add/remove one record with the public normaliser N: ‖w*_D − w*_D'‖ ≤ Λ/(μN) (+ 2τ/μ), fairly tight."""
    rng = np.random.default_rng(seed)
    n, d, mu = 12, 3, 1.0
    X, y = rng.normal(size=(n, d)) * 2.0, rng.integers(0, n_classes, n)
    w = _wstar(X, y, n_classes, mu, N=n)
    f = lambda X, y, s: _wstar(X, y, n_classes, mu, N=n)  # noqa: E731
    worst = max_neighbour_distance(f, X, y, np.zeros(n, dtype=int), "record")  # every removal
    for x in _adversarial_rows(w, d, rng):  # every addition of a large row, with each label
        for label in range(n_classes):
            added = _wstar(np.vstack([X, x]), np.r_[y, label], n_classes, mu, N=n)
            worst = max(worst, float(np.linalg.norm(added - w)))
    bound = lipschitz_constant(1.0, n_classes) / (mu * n)
    assert worst <= bound + 2 * TOL / mu
    assert worst >= 0.4 * bound  # at μ = 1 the loss's slope at w* is about Λ/2: the bound is not loose


@pytest.mark.parametrize("n_classes", [2, 3])
def test_sensitive_unit_with_s_among_the_features_by_brute_force(n_classes):
    """Changing one person's s changes their row's s-column: replace-one, ‖w*_D − w*_D'‖ ≤ 2Λ/(μN) (+ 2τ/μ)."""
    rng = np.random.default_rng(5)
    n, mu = 14, 1.0
    X, y, s = rng.normal(size=(n, 3)), rng.integers(0, n_classes, n), rng.integers(0, 2, n)

    def with_s(X, s):  # s as a ±5 column: after bounding, the row is nearly ±R·e_s
        return np.column_stack([0.1 * X, 5.0 * (2 * s - 1)])

    f = lambda X, y, s: _wstar(with_s(X, s), y, n_classes, mu, N=n)  # noqa: E731
    worst = max_neighbour_distance(f, X, y, s, "sensitive", n_groups=2)
    bound = 2 * lipschitz_constant(1.0, n_classes) / (mu * n)
    assert 0.4 * bound <= worst <= bound + 2 * TOL / mu
    with pytest.warns(LearnedNothingWarning, match="learned nothing"):  # y is random: nothing to learn, as it says
        est = _est(privacy_unit="sensitive", sensitive_feature_columns=[3], classes=n_classes).fit(with_s(X, s), y, s)
    assert est.sensitivity_ == pytest.approx(bound + 2 * TOL / mu, rel=1e-12)


def test_sensitive_unit_without_s_the_model_does_not_move_when_s_does():
    X, y, s = _data(n=40)
    fits = [_est(privacy_unit="sensitive", epsilon=1.0).fit(X, y, s2) for s2 in (s, 1 - s)]
    assert np.array_equal(fits[0].coef_, fits[1].coef_)


def test_sensitivity_attributes_follow_the_derivation():
    X, y, _ = _data(n=300, n_classes=3)
    # ε = 2: enough for 12 parameters on 500 records (the derivation does not depend on ε)
    est = _est(classes=3, l2_regularization=0.5, norm_bound=2.0, sample_size=500, epsilon=2.0).fit(X, y)
    lam = math.sqrt(2) * 2.0
    assert (est.lipschitz_, est.strong_convexity_, est.radius_) == (lam, 0.5, lam / 0.5)
    assert est.sensitivity_ == pytest.approx(lam / (0.5 * 500) + 2 * TOL / 0.5, rel=1e-12)
    assert est.noise_std_ == pytest.approx(est.noise_multiplier_ * est.sensitivity_, rel=1e-12)
    assert est.sample_size_ == 500 and est.n_params_ == 3 * 4 and est.coef_.shape == (3, 4)


# ---- the release ------------------------------------------------------------------------------------------

def test_infinite_epsilon_releases_the_minimiser_exactly():
    X, y, _ = _data()
    est = _est(epsilon=math.inf, sample_size=200).fit(X, y)
    assert est.noise_std_ == 0.0 and math.isinf(est.privacy_spent_[0])
    np.testing.assert_array_equal(est.coef_[0], _wstar(X, y, 2, N=200))


def test_the_added_noise_has_the_calibrated_std():
    """coef_ − w* over 150 fits (independent reproducible noise per random_state): Σ z²/σ² ~ χ²(150·p)."""
    X, y, _ = _data(n=200, d=4)
    w = _wstar(X, y, 2, N=200)
    noise, sigmas = [], set()
    for r in range(150):  # ε = 2: enough for 4 parameters on 200 records (the test reads σ, whatever it is)
        est = _est(epsilon=2.0, delta=1e-5, sample_size=200, project=False, random_state=r).fit(X, y)
        noise.append(est.coef_[0] - w)
        sigmas.add(est.noise_std_)
    (sigma,) = sigmas
    stat, dof = float(np.sum(np.square(noise)) / sigma**2), 150 * 4
    assert chi2.ppf(1e-4, dof) < stat < chi2.ppf(1 - 1e-4, dof)


def test_perturb_minimizer_draws_with_std_sigma_and_projects():
    w = np.array([[0.3, -0.2, 0.1], [0.0, 0.5, -0.4]])
    sigma, draws = 0.05, 2000
    models = perturb_minimizer(w, sigma, draws, secret=SecretRandom(("test",)))
    stat, dof = float(np.sum((models - w) ** 2) / sigma**2), draws * w.size
    assert models.shape == (draws, 2, 3) and chi2.ppf(1e-4, dof) < stat < chi2.ppf(1 - 1e-4, dof)
    projected = perturb_minimizer(w, 1.0, 200, radius=0.8)
    assert np.sqrt(np.sum(projected**2, axis=(1, 2))).max() <= 0.8 + 1e-12


@pytest.mark.parametrize("n_classes", [2, 3])
def test_the_projection_keeps_the_release_in_the_ball_and_is_the_only_change(n_classes):
    X, y, _ = _data(n=50, d=5, n_classes=n_classes)
    kw = dict(epsilon=0.1, delta=1e-5, fit_intercept=True, intercept_scaling=0.5, sample_size=50, classes=n_classes)
    with pytest.warns(UtilityWarning, match="too little data for that privacy"):  # ε = 0.1 on 50 rows: on purpose
        kept, free = [_est(project=p, **kw).fit(X, y) for p in (True, False)]  # same reproducible noise
    full = lambda est: np.hstack([est.coef_, est.intercept_[:, None] / 0.5])  # noqa: E731 (the released w)
    assert kept.radius_ == lipschitz_constant(1.0, n_classes)
    assert np.linalg.norm(full(free)) > kept.radius_  # the noise leaves the ball ...
    assert np.linalg.norm(full(kept)) <= kept.radius_ + 1e-12  # ... and π brings it back, in Frobenius norm
    np.testing.assert_allclose(full(kept), full(free) * kept.radius_ / np.linalg.norm(full(free)), rtol=1e-12)
    np.testing.assert_allclose(project_onto_ball(full(free), kept.radius_), full(kept), rtol=1e-12)


def test_a_large_row_behaves_as_the_row_scaled_to_the_norm_bound():
    X, y, _ = _data(n=60, d=3)
    u = np.array([0.6, -0.8, 0.0])
    X_big, X_unit = X.copy(), X.copy()
    X_big[0], X_unit[0] = 10.0 * u, 0.5 * u
    a, b = (_est(epsilon=math.inf, norm_bound=0.5, sample_size=60).fit(Z, y) for Z in (X_big, X_unit))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.decision_function(10.0 * u[None]), a.decision_function(0.5 * u[None]),
                               rtol=1e-12)
    np.testing.assert_allclose(a.predict_proba(10.0 * u[None]), a.predict_proba(0.5 * u[None]), rtol=1e-12)


# ---- accounting ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [dict(), dict(privacy_unit="sensitive", sensitive_feature_columns=[0, 1])])
def test_ledger_equals_plan_and_spends_at_most_the_target(kw):
    X, y, s = _data(n=1000)  # enough records for ε = 0.7
    est = _est(epsilon=0.7, delta=1e-6, sample_size=1000, **kw).fit(X, y, s)
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)
    eps, delta = est.privacy_spent_
    assert 0.99 * 0.7 <= eps <= 0.7 and delta == 1e-6
    assert est.privacy_ledger_.to_records() == [{"label": "perturbed minimiser", "mechanism": "gaussian",
                                                 "noise_multiplier": est.noise_multiplier_,
                                                 "sampling_probability": 1.0, "count": 1}]


def test_replace_one_costs_twice_the_noise_of_add_remove_at_the_same_budget():
    # bound convention: add/remove bound Δ = Λ/(μN); replace-one moves the mean by 2Λ/(μN), bound (radius) Λ/(μN)
    X, y, s = _data(n=1000)  # enough records for ε = 1
    record = _est(sample_size=1000).fit(X, y)
    sensitive = _est(privacy_unit="sensitive", sensitive_feature_columns=[0]).fit(X, y, s)
    assert sensitive.noise_multiplier_ == pytest.approx(2 * record.noise_multiplier_, rel=0.01)
    assert sensitive.noise_std_ == pytest.approx(2 * record.noise_std_, rel=0.01)


def test_sensitive_unit_without_s_as_a_feature_spends_nothing_and_releases_the_minimiser():
    X, y, s = _data()
    est = _est(privacy_unit="sensitive", epsilon=0.5, delta=1e-6).fit(X, y, s)
    assert est.privacy_spent_ == (0.0, 1e-6)
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)
    assert [(e["label"], e["mechanism"]) for e in est.privacy_ledger_.to_records()] == [
        ("minimiser (reads no sensitive attribute)", "noop")]
    assert est.noise_std_ == est.sensitivity_ == 0.0
    np.testing.assert_array_equal(est.coef_[0], _wstar(X, y, 2, N=200))


def test_paper_calibration_is_the_classical_gaussian_mechanism_and_spends_less():
    from dpfair.bounds.distance import paper_noise_std

    X, y, s = _data()
    est = _est(privacy_unit="sensitive", sensitive_feature_columns=[0], calibration="paper", epsilon=0.5,
               delta=1e-5).fit(X, y, s)
    factor = math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5
    assert est.noise_std_ == pytest.approx(est.sensitivity_ * factor, rel=1e-12)
    assert est.noise_std_ == pytest.approx(paper_noise_std(1.0, 1.0, 200, 0.5, 1e-5), rel=1e-6)  # Δ = 2Λ/(μn)
    assert est.privacy_spent_[0] < 0.5
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)


@pytest.mark.secret_noise
def test_sample_size_fixes_the_normaliser_and_delta():
    X, y, _ = _data(n=1000)  # enough records for ε = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        default = _est().fit(X, y)  # N = the number of rows, public in dpfair's model
        est = _est(sample_size=5000).fit(X, y)
    assert default.sample_size_ == len(y) and default.privacy_spent_[1] == 1 / len(y) ** 2
    assert est.privacy_spent_[1] == 1 / 5000**2 and est.sample_size_ == 5000
    assert est.sensitivity_ == pytest.approx(1.0 / 5000 + 2 * TOL, rel=1e-12)


def test_the_minimiser_is_not_stored_on_a_private_model():
    X, y, _ = _data(n=1000)  # enough records for ε = 1
    est = _est(epsilon=1.0, sample_size=1000).fit(X, y)
    w = _wstar(X, y, 2, N=1000)
    for key, value in vars(est).items():
        if isinstance(value, np.ndarray) and value.size >= w.size:
            assert not np.allclose(value.ravel()[:w.size], w, atol=1e-9), key


# ---- predictions, labels ---------------------------------------------------------------------------------------

def test_multiclass_predictions_keep_the_labels():
    X, y, _ = _data(n=300, n_classes=3)
    labels = np.array(["a", "b", "c"])[y]
    est = _est(classes=["a", "b", "c"], epsilon=math.inf, sample_size=300).fit(X, labels)
    proba = est.predict_proba(X)
    assert proba.shape == (300, 3) and np.allclose(proba.sum(1), 1.0)
    assert est.decision_function(X).shape == (300, 3)
    assert set(est.predict(X)) <= {"a", "b", "c"} and np.mean(est.predict(X) == labels) > 0.5
    binary = _est(sample_size=300, epsilon=2.0).fit(X, (y > 0).astype(int))  # ε = 2: enough for 300 records
    assert binary.decision_function(X).shape == (300,) and binary.coef_.shape == (1, 4)
    assert binary.intercept_.tolist() == [0.0]


# ---- bad input ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    (dict(epsilon=0.0), "epsilon must be > 0"),
    (dict(epsilon=-1.0), "epsilon must be > 0"),
    (dict(delta=0.0), "delta must lie strictly between 0 and 1.*1/n"),
    (dict(delta=1.5), "delta must lie strictly between 0 and 1"),
    (dict(norm_bound=0.0), "norm_bound must be > 0.*norm rows are scaled to"),
    (dict(norm_bound=-1.0), "norm_bound must be > 0"),
    (dict(l2_regularization=0.0), "l2_regularization must be > 0.*strong convexity"),
    (dict(l2_regularization=-0.5), "l2_regularization must be > 0"),
    (dict(l2_regularization=1e-10, norm_bound=2.0), r"l2_regularization must be >= 1e-10 \* norm_bound\*\*2"),
    (dict(tol=1e-16), "tol must be >= 1e-12"),
    (dict(max_iter=0), "max_iter must be > 0"),
    (dict(sample_size=0), "sample_size must be > 0.*public number of training records"),
    (dict(fit_intercept=True, intercept_scaling=0.0), "intercept_scaling must be > 0"),
    (dict(fit_intercept="yes"), "fit_intercept must be True or False"),
    (dict(calibration="closed-form"), "calibration must be one of 'accountant', 'paper'"),
    (dict(calibration="paper", epsilon=2.0), "needs epsilon < 1.*calibration='accountant'"),
    (dict(calibration="paper", epsilon=0.5, noise_multiplier=1.0), "drop noise_multiplier"),
    (dict(privacy_unit="sensitive", sensitive_feature_columns=[4]), "sensitive_feature_columns must list"),
    (dict(privacy_unit="person"), "privacy_unit must be one of"),
])
def test_bad_hyperparameters_name_the_argument_and_the_fix(kwargs, match):
    X, y, s = _data(n=30)
    est = _est(**{"sample_size": 30, **kwargs})
    with pytest.raises(ValueError, match=match):
        est.fit(X, y, s)
    assert not hasattr(est, "coef_")


def test_nan_in_X_is_refused_with_the_fix():
    X, y, _ = _data(n=30)
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="X contains NaN or infinite values.*drop or impute"):
        _est(sample_size=30).fit(X, y)


# ---- scikit-learn conventions, persistence ------------------------------------------------------------------------

def test_clone_and_registry():
    est = _est(epsilon=0.3, l2_regularization=0.1, sensitive_feature_columns=[1])
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy is not est
    assert METHODS["output-perturbation"] is OutputPerturbationClassifier


@pytest.mark.parametrize("kw", [dict(fit_intercept=True, intercept_scaling=0.5, classes=3),
                                dict(privacy_unit="sensitive")])
def test_save_and_load_round_trip(kw, tmp_path):
    X, y, s = _data(n=1000, n_classes=kw.get("classes", 2))  # enough records for 15 parameters at ε = 1
    est = _est(sample_size=1000, **kw).fit(X, y, s)
    est.save(tmp_path / "m.pt")
    back = load_estimator(tmp_path / "m.pt")
    assert type(back) is OutputPerturbationClassifier
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(back.coef_, est.coef_)
    assert back.privacy_spent_ == est.privacy_spent_ and back.privacy_ledger_ == est.privacy_ledger_
    assert back.privacy_plan_ == est.privacy_plan_
    for key in ("noise_std_", "sensitivity_", "lipschitz_", "strong_convexity_", "radius_", "n_params_",
                "sample_size_"):
        assert getattr(back, key) == getattr(est, key), key
    assert back.get_params() == est.get_params()
