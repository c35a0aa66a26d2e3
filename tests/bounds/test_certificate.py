"""Theorem 4.4 end to end: certificates of output-perturbation and DP-SGD models, and that they hold."""

import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from dpfair.algorithms import DPSGDClassifier, OutputPerturbationClassifier
from dpfair.algorithms.output_perturbation import bound_rows, minimize_regularized_logistic, perturb_minimizer
from dpfair.bounds import (
    CERTIFIED_NOTIONS,
    certify,
    certify_margins,
    confidence_margins,
    fairness_levels,
    linear_lipschitz,
    output_perturbation_radius,
)
from dpfair.cli import main


def _data(n=3000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d)) + 0.5 * s[:, None]
    y = (X @ np.linspace(1, -1, d) + 0.8 * s + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y, s


def _fair(notion, y, pred, s):
    return float(np.mean(np.abs(fairness_levels(notion, y, pred, s))))


def test_the_certificate_holds_for_at_least_the_stated_share_of_private_models():
    """200 output-perturbation draws around one h*: |Fair(h_j) − Fair(h*)| ≤ bound for ≥ 1 − ζ of them.

    The bound holds whenever ‖h_j − h*‖ ≤ d, which the chi-square radius makes an event of probability
    exactly 1 − ζ; the count of draws inside is Binomial(200, ≥ 0.9), tested at its 0.1 % quantile. With
    the reference model h_j itself (what a user computes from the released model) the same holds.
    """
    X, y, s = _data()
    Xtr, ytr, Xte, yte, ste = X[:2000], y[:2000], X[2000:], y[2000:], s[2000:]
    est = OutputPerturbationClassifier(epsilon=0.3, delta=1e-6, l2_regularization=0.05, norm_bound=1.0,
                                       classes=2, groups=2).fit(Xtr, ytr, sensitive_features=s[:2000])
    rows_tr, rows_te = bound_rows(Xtr, 1.0), bound_rows(Xte, 1.0)
    w_star = minimize_regularized_logistic(rows_tr, ytr, n_classes=2, l2_regularization=0.05)
    draws = 200
    models = perturb_minimizer(w_star, est.noise_std_, draws, radius=est.radius_)
    probability = 0.9
    distance = output_perturbation_radius(est.noise_std_, est.n_params_, probability)
    lip = linear_lipschitz(rows_te, single_vector=True)
    star = certify_margins(confidence_margins(rows_te @ w_star, yte), lip, yte, ste, distance)
    pred_star = (rows_te @ w_star > 0).astype(int)
    lowest = binom.ppf(0.001, draws, probability)
    moved = 0
    for notion in CERTIFIED_NOTIONS:
        bound = star.gaps[notion].bound_fair
        assert 0 < bound < 0.5  # informative, not vacuous
        gaps = []
        inside_own = 0
        for w in models:
            scores = rows_te @ w
            gap = abs(_fair(notion, yte, (scores > 0).astype(int), ste) - _fair(notion, yte, pred_star, ste))
            gaps.append(gap)
            own = certify_margins(confidence_margins(scores, yte), lip, yte, ste, distance, notions=(notion,))
            inside_own += gap <= own.gaps[notion].bound_fair
        gaps = np.array(gaps)
        moved += np.count_nonzero(gaps)
        assert np.sum(gaps <= bound) >= lowest
        assert inside_own >= lowest
        assert star.gaps[notion].bound_fair <= star.gaps[notion].chernoff_fair <= star.gaps[notion].markov_fair
    assert moved > 0  # the private models do change the fairness: the test has something to bound


def test_certify_an_output_perturbation_model():
    X, y, s = _data(n=1500)
    est = OutputPerturbationClassifier(epsilon=1.0, classes=2, groups=2).fit(X[:1000], y[:1000],
                                                                              sensitive_features=s[:1000])
    cert = certify(est, X[1000:], y[1000:], s[1000:], probability=0.99)
    out = cert.to_dict()
    assert cert.holds and out["distance"] == pytest.approx(
        output_perturbation_radius(est.noise_std_, est.n_params_, 0.99))
    for notion in CERTIFIED_NOTIONS:
        assert 0 <= out[f"bound.{notion}"] <= out[f"chernoff.{notion}"] <= out[f"markov.{notion}"] + 1e-12
        assert out[f"fairness.{notion}"] == pytest.approx(
            _fair(notion, y[1000:], est.predict(X[1000:]), s[1000:]))
    with pytest.raises(ValueError, match="probability"):
        certify(est, X[1000:], y[1000:], s[1000:], probability=1.5)


def test_certify_dp_sgd_checks_lemma_4_2s_assumptions():
    X, y, s = _data(n=1200, d=4)
    rows = bound_rows(X, 1.0)
    kw = dict(model="logistic", epsilon=2.0, optimizer="sgd", learning_rate=0.5, weight_decay=1.0,
              max_grad_norm=math.sqrt(2), batch_size=100, epochs=2, classes=2, groups=2, random_state=0)
    est = DPSGDClassifier(**kw).fit(rows[:800], y[:800])
    cert = certify(est, rows[800:], y[800:], s[800:], feature_norm_bound=1.0)
    assert cert.holds and 0 < cert.distance < math.inf
    with pytest.raises(ValueError, match="feature_norm_bound"):
        certify(est, rows[800:], y[800:], s[800:])
    with pytest.raises(ValueError, match="clipping"):
        certify(DPSGDClassifier(**{**kw, "max_grad_norm": 0.5}).fit(rows[:800], y[:800]), rows[800:], y[800:],
                s[800:], feature_norm_bound=1.0)
    with pytest.raises(ValueError, match="weight_decay"):
        certify(DPSGDClassifier(**{**kw, "weight_decay": 0.0}).fit(rows[:800], y[:800]), rows[800:], y[800:],
                s[800:], feature_norm_bound=1.0)
    with pytest.raises(ValueError, match="flat clipping"):
        certify(DPSGDClassifier(**{**kw, "clipping": "dpsgd_f"}).fit(rows[:800], y[:800], sensitive_features=s[:800]),
                rows[800:], y[800:], s[800:], feature_norm_bound=1.0)
    mlp = {"model": "mlp", "model_kwargs": {"hidden": (8,)}}  # small enough for 800 rows at epsilon=2
    with pytest.raises(ValueError, match="linear model"):
        certify(DPSGDClassifier(**{**kw, **mlp}).fit(rows[:800], y[:800]), rows[800:], y[800:],
                s[800:], feature_norm_bound=1.0)


def test_a_method_without_a_distance_bound_is_refused():
    from dpfair.algorithms import DPFERMIClassifier

    X, y, s = _data(n=600, d=4)
    # proportions_budget=0.5: the released counts of 600 rows' groups are not too small for a fairness constraint
    est = DPFERMIClassifier(epsilon=1.0, epochs=1, proportions_budget=0.5, groups=2, classes=2,
                            random_state=0).fit(X, y, sensitive_features=s)
    with pytest.raises(ValueError, match="no distance bound is known for DPFERMIClassifier"):
        certify(est, X, y, s)
    assert certify(est, X, y, s, distance=0.01).distance == 0.01  # a user-supplied bound is used as given


def test_cli_certify_prints_the_table_and_writes_the_keys(tmp_path, capsys):
    out = tmp_path / "c.json"
    code = main(["certify", "--dataset", "synthetic", "--epsilon", "1", "--draws", "5", "--quiet",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(out.read_text())
    for notion in CERTIFIED_NOTIONS:
        for key in ("bound", "chernoff", "markov", "empirical"):
            assert f"{key}.{notion}" in result
        assert result[f"bound.{notion}"] <= result[f"markov.{notion}"] + 1e-12
    assert result["epsilon"] <= 1.0 and result["method"] == "output-perturbation" and result["draws"] == 5
    assert "NON-PRIVATE" in result["empirical_note"]
    assert "certified" in captured.out and "equal opportunity" in captured.out


def test_cli_certifies_a_saved_model(tmp_path, capsys):
    trained = tmp_path / "r.json"
    assert main(["train", "--dataset", "synthetic", "--method", "output-perturbation", "--quiet",
                 "--out", str(trained)]) == 0
    out = tmp_path / "c.json"
    code = main(["certify", "--dataset", "synthetic", "--load", str(tmp_path / "r.pt"), "--draws", "0", "--quiet",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["method"] == "output-perturbation" and result["model_file"] == str(tmp_path / "r.pt")
    assert result["epsilon"] == pytest.approx(json.loads(trained.read_text())["epsilon"])
    assert "empirical.accuracy" not in result
    code = main(["certify", "--dataset", "adult", "--load", str(tmp_path / "r.pt"), "--quiet",
                 "--out", str(tmp_path / "d.json")])
    assert code == 2 and "features" in capsys.readouterr().err


@pytest.mark.parametrize("argv,match", [
    (["--epsilon", "inf"], "finite --epsilon"),
    (["--probability", "1"], "--probability"),
    (["--draws", "-1"], "--draws"),
    (["--method", "erm"], "not private"),
])
def test_cli_certify_bad_input_is_one_line(tmp_path, capsys, argv, match):
    code = main(["certify", "--dataset", "synthetic", "--quiet", "--out", str(tmp_path / "x.json"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


def _pm1_rows(n=2000, d=8, seed=3):
    """±1 rows (every norm is √d, a public constant of the encoding), as CelebA's attributes."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2, n)
    X = np.where(rng.random((n, d)) < 0.5 + 0.2 * s[:, None], 1.0, -1.0)
    y = (X @ np.linspace(1, -0.5, d) + 0.5 * s + rng.normal(scale=1.0, size=n) > 0).astype(int)
    return X, y, s


def test_a_public_row_norm_certifies_the_rows_unscaled_as_rescaled_rows_scaled_back():
    # R = √d leaves ±1 rows as they are; the same certificate follows from the rows scaled to norm 1 with
    # μ' = μ/d (then v* = √d w*, σ' = √d σ, margins equal, L' = L/√d): scaling is a change of units.
    X, y, s = _pm1_rows()
    d, mu = X.shape[1], 1.0
    root = math.sqrt(d)
    kw = {"classes": 2, "groups": 2}
    raw = OutputPerturbationClassifier(epsilon=1.0, l2_regularization=mu, norm_bound=root, **kw)
    unit = OutputPerturbationClassifier(epsilon=1.0, l2_regularization=mu / d, norm_bound=1.0, **kw)
    raw.fit(X[:1500], y[:1500], sensitive_features=s[:1500])
    unit.fit(X[:1500] / root, y[:1500], sensitive_features=s[:1500])
    # σ scales with Λ/μ: √d/μ against 1/(μ/d); the solver's 2τ/μ term (τ = 1e-10) is below 1e-6 of it
    assert unit.noise_std_ == pytest.approx(root * raw.noise_std_, rel=1e-6)
    _, norms = raw.certificate_inputs(X[1500:])
    assert np.allclose(norms, root, rtol=1e-12)  # no row rescaled: L = ‖x‖ = √d
    ref_raw = OutputPerturbationClassifier(epsilon=math.inf, l2_regularization=mu, norm_bound=root, **kw)
    ref_unit = OutputPerturbationClassifier(epsilon=math.inf, l2_regularization=mu / d, norm_bound=1.0, **kw)
    ref_raw.fit(X[:1500], y[:1500], sensitive_features=s[:1500])
    ref_unit.fit(X[:1500] / root, y[:1500], sensitive_features=s[:1500])
    assert np.allclose(ref_unit.coef_, root * ref_raw.coef_, rtol=1e-8)
    radius = output_perturbation_radius(raw.noise_std_, raw.n_params_, 0.99)
    a = certify(ref_raw, X[1500:], y[1500:], s[1500:], distance=radius).to_dict()
    b = certify(ref_unit, X[1500:] / root, y[1500:], s[1500:], distance=root * radius).to_dict()
    for notion in CERTIFIED_NOTIONS:
        assert 0 < a[f"bound.{notion}"] < 1
        for key in ("bound", "chernoff", "markov"):
            assert b[f"{key}.{notion}"] == pytest.approx(a[f"{key}.{notion}"], rel=1e-6)


@pytest.mark.parametrize("bad", [0.0, -6.0, float("nan")])
def test_a_bad_public_row_norm_is_one_line(bad):
    X, y, s = _pm1_rows(n=200)
    with pytest.raises(ValueError, match="norm_bound") as info:
        OutputPerturbationClassifier(epsilon=1.0, norm_bound=bad, classes=2, groups=2).fit(X, y, sensitive_features=s)
    assert len(str(info.value).splitlines()) == 1
