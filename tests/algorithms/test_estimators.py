import math

import numpy as np
import pytest
import torch
from sklearn.base import clone

from dpfair.algorithms import DPSGDClassifier, ERMClassifier, load_estimator
from dpfair.datasets import make_synthetic
from dpfair.exceptions import LearnedNothingWarning
from dpfair.privacy import epsilon_for_noise, max_neighbour_distance
from dpfair.algorithms.dpsgd import cross_entropy_one
from dpfair.nn import LogisticRegression, clipped_gradient_sum


@pytest.fixture(scope="module")
def data():
    X, y, s = make_synthetic(n_samples=600, n_features=5, random_state=0)
    return X, y, s


FAST = dict(epochs=2, batch_size=64)
#: the public lists of groups and classes of make_synthetic's binary data: none is inferred from the private rows
PUBLIC = dict(groups=[0, 1], classes=[0, 1])


def test_dpsgd_spends_at_most_its_target_and_calibrates_over_all_steps(data):
    X, y, s = data
    est = DPSGDClassifier(epsilon=1.0, delta=1e-5, random_state=0, **PUBLIC, **FAST).fit(X, y, s)
    eps, delta = est.privacy_spent_
    assert 0.99 <= eps <= 1.0 and delta == 1e-5
    q, steps = 64 / 600, math.ceil(2 / (64 / 600))
    assert (est.sampling_probability_, est.n_steps_) == (q, steps)
    assert epsilon_for_noise(est.noise_multiplier_, q, steps, 1e-5, "record") == pytest.approx(eps, rel=1e-9)
    assert est.privacy_ledger_.to_records() == [{
        "label": "dp-sgd step", "mechanism": "gaussian", "noise_multiplier": est.noise_multiplier_,
        "sampling_probability": q, "count": steps}]


def test_dpsgd_default_delta_is_one_over_n_squared(data):
    X, y, s = data
    est = DPSGDClassifier(epsilon=2.0, random_state=0, **PUBLIC, **FAST).fit(X, y)
    assert est.privacy_spent_[1] == pytest.approx(1 / 600**2)


@pytest.mark.secret_noise
def test_same_seed_same_model_only_when_the_noise_is_replayed(data, replay):
    X, y, s = data
    fit = lambda r: DPSGDClassifier(random_state=r, noise_multiplier=1.0, **PUBLIC, **FAST).fit(X, y)  # noqa: E731
    assert not np.array_equal(fit(3).predict_proba(X), fit(3).predict_proba(X))
    with replay(0):
        a, b, c = fit(3), fit(3), fit(4)
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))
    assert not np.array_equal(a.predict_proba(X), c.predict_proba(X))
    e1, e2 = (ERMClassifier(random_state=1, **FAST).fit(X, y) for _ in range(2))
    assert np.array_equal(e1.predict_proba(X), e2.predict_proba(X))


def test_no_noise_dpsgd_reports_infinite_epsilon(data):
    X, y, s = data
    est = DPSGDClassifier(epsilon=math.inf, random_state=0, **PUBLIC, **FAST).fit(X, y)
    assert est.noise_multiplier_ == 0.0 and math.isinf(est.privacy_spent_[0])
    erm = ERMClassifier(random_state=0, **FAST).fit(X, y)
    assert math.isinf(erm.privacy_spent_[0]) and erm.privacy_ledger_.to_records()[0]["mechanism"] == "nonprivate"


def test_dpsgd_step_sensitivity_by_brute_force():
    # The released quantity of one step is the clipped gradient sum: removing one record moves it by <= C.
    X, y, s = make_synthetic(n_samples=25, n_features=4, random_state=1)
    X = X * 5
    model = LogisticRegression(4, 2, seed=0)
    C = 0.5

    def step_sum(X, y, s):
        summed, _ = clipped_gradient_sum(model, cross_entropy_one, torch.tensor(X, dtype=torch.float64),
                                         torch.tensor(y), C)
        return summed

    model.double()
    assert max_neighbour_distance(step_sum, X, y, s, "record") <= C + 1e-9
    # and the unclipped sum would exceed it
    assert max_neighbour_distance(step_sum, X, y, s, "record") > 0.9 * C


def test_dpsgd_survives_empty_batches(data):
    X, y, s = data
    # noise_multiplier=2 on 40 rows spends epsilon≈0.2: too little for any signal, and the fit says so
    with pytest.warns(LearnedNothingWarning, match="too much noise for n"):
        est = DPSGDClassifier(batch_size=1, epochs=1, random_state=0, noise_multiplier=2.0,
                              **PUBLIC).fit(X[:40], y[:40])
    assert np.isfinite(est.predict_proba(X)).all()


def test_predictions_keep_the_original_labels(data):
    X, y, s = data
    labels = np.array(["no", "yes"])[y]
    est = ERMClassifier(random_state=0, **FAST).fit(X, labels, s)
    assert set(est.predict(X)) <= {"no", "yes"}
    assert est.predict_proba(X).shape == (len(X), 2)


def test_multiclass_mlp_and_custom_module():
    X, y, s = make_synthetic(n_samples=400, n_features=6, n_classes=3, n_groups=3, random_state=2)
    fit = lambda model: DPSGDClassifier(model=model, noise_multiplier=1.0, random_state=0, groups=3,  # noqa: E731
                                        classes=3, **FAST).fit(X, y, s)
    # the default MLP's 4,803 parameters are too many for 400 rows at epsilon≈4.8: the fit says so
    with pytest.warns(LearnedNothingWarning, match="too much noise for n"):
        mlp = fit("mlp")
    module = fit(torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)))
    for est in (mlp, module):
        assert est.predict_proba(X).shape == (400, 3)


def test_dpsgd_learns_on_synthetic_data():
    X, y, s = make_synthetic(n_samples=3000, n_features=5, random_state=0)
    erm = ERMClassifier(random_state=0, epochs=5).fit(X, y)
    dp = DPSGDClassifier(epsilon=2.0, random_state=0, epochs=5, **PUBLIC).fit(X, y)
    acc = lambda m: np.mean(m.predict(X) == y)  # noqa: E731
    assert acc(erm) > 0.7 and acc(dp) > acc(erm) - 0.05


def test_sklearn_clone_and_params():
    est = DPSGDClassifier(epsilon=0.5, batch_size=32)
    c = clone(est)
    assert c.get_params()["epsilon"] == 0.5 and c.get_params()["batch_size"] == 32


def test_save_and_load_round_trip(tmp_path, data):
    X, y, s = data
    est = DPSGDClassifier(random_state=0, noise_multiplier=1.0, **PUBLIC, **FAST).fit(X, y)
    est.save(tmp_path / "m.pt")
    back = load_estimator(tmp_path / "m.pt")
    assert np.array_equal(back.predict_proba(X), est.predict_proba(X))
    assert back.privacy_spent_ == est.privacy_spent_


@pytest.mark.parametrize("kwargs,match", [
    (dict(epsilon=0.0), "epsilon must be > 0"),
    (dict(epsilon=-2.0), "epsilon must be > 0"),
    (dict(delta=0.0), "delta must lie strictly between 0 and 1"),
    (dict(delta=1.0), "delta must lie strictly between 0 and 1"),
    (dict(max_grad_norm=0.0), "max_grad_norm must be > 0"),
    (dict(batch_size=0), "batch_size must be > 0"),
    (dict(epochs=1.5), "epochs must be an integer"),
    (dict(model="resnet"), "unknown model 'resnet'"),
    (dict(random_state="x"), "random_state must be None or an integer >= 0"),
])
def test_bad_hyperparameters(kwargs, match, data):
    X, y, s = data
    with pytest.raises(ValueError, match=match):
        DPSGDClassifier(**{**PUBLIC, **FAST, **kwargs}).fit(X, y)


def test_delta_above_one_over_n_warns(data):
    X, y, s = data
    with pytest.warns(UserWarning, match="exceeds 1/n"):
        DPSGDClassifier(delta=0.01, **PUBLIC, **FAST).fit(X, y)


@pytest.mark.parametrize("X,y,s,match", [
    (np.array([[np.nan, 1.0], [1.0, 2.0]] * 5), np.arange(10) % 2, None, "NaN or infinite"),
    (np.ones((10, 2)), np.arange(9) % 2, None, "y has 9 entries but X has 10 rows"),
    (np.ones((10, 2)), np.zeros(10), None, "single class"),
    (np.ones((10, 2)), np.arange(10) % 2, np.zeros(10), "single group"),
    (np.ones((10, 2)), np.r_[np.zeros(9), 1], None, "class 1 has 1 members"),
    (np.ones(10), np.arange(10) % 2, None, "must be 2-D"),
])
def test_bad_data(X, y, s, match):
    with pytest.raises(ValueError, match=match):
        ERMClassifier(epochs=1).fit(X, y, s)


def test_predict_checks_feature_count(data):
    X, y, s = data
    est = ERMClassifier(random_state=0, epochs=1).fit(X, y)
    with pytest.raises(ValueError, match=f"X has 2 features, but ERMClassifier is expecting {X.shape[1]} features"):
        est.predict(X[:, :2])


def test_dpsgd_history_holds_only_released_quantities(data):
    # history_ is saved with the model, so it may hold public counters and post-processed releases only.
    X, y, s = data
    est = DPSGDClassifier(random_state=0, noise_multiplier=1.0, **PUBLIC, **FAST).fit(X, y)
    assert est.history_ and all(set(h) == {"step", "noisy_gradient_norm"} for h in est.history_)
    assert est.history_[-1]["step"] == est.n_steps_


def test_a_clipping_rule_cannot_exceed_the_bound_the_noise_covers(data, monkeypatch):
    import dpfair.algorithms.clipping as clipping

    class Loose(clipping.FlatClipping):  # a rule whose bound phase hands out 10 C, C_max staying C
        def bounds(self, keys, like):
            return torch.full((len(keys),), 10.0 * self.c0)

    seen = []
    original = clipping.clipped_gradient_sum
    monkeypatch.setattr(clipping, "clipped_gradient_sum", lambda m, f, X, y, bounds, method, **kw: seen.append(
        float(torch.as_tensor(bounds).max()) if len(X) else 0.0) or original(m, f, X, y, bounds, method, **kw))
    X, y, s = data
    DPSGDClassifier(clipping=Loose(by="class"), max_grad_norm=0.5, noise_multiplier=1.0, **PUBLIC,
                    **FAST).fit(X, y)
    assert seen and max(seen) <= 0.5


def test_weight_decay_shrinks_the_weights_at_no_privacy_cost(data):
    X, y, s = data
    plain, decayed = (DPSGDClassifier(noise_multiplier=1.0, weight_decay=wd, random_state=0, **PUBLIC, **FAST).fit(X, y)
                      for wd in (0.0, 0.5))
    norm = lambda est: float(sum(p.detach().pow(2).sum() for p in est.model_.parameters()))  # noqa: E731
    assert norm(decayed) < norm(plain)
    assert decayed.privacy_spent_ == plain.privacy_spent_ and decayed.privacy_ledger_ == plain.privacy_ledger_
    with pytest.raises(ValueError, match="weight_decay"):
        DPSGDClassifier(weight_decay=-1.0, **PUBLIC, **FAST).fit(X, y)


def test_named_columns_are_matched_by_name_at_prediction(tmp_path):
    """Fitted on a DataFrame, a model reads columns by name: a reordered frame predicts the same, a frame with
    other columns is refused (issue 13, item 1: 66 % of predictions changed silently before)."""
    import pandas as pd

    from dpfair.algorithms import OutputPerturbationClassifier

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(300, 5)), columns=list("abcde"))
    y = (frame["a"] - 2 * frame["b"] > 0).astype(int).to_numpy()
    s = rng.integers(0, 2, 300)
    for est in (DPSGDClassifier(epsilon=math.inf, epochs=2, classes=2, groups=2, random_state=0),
                OutputPerturbationClassifier(epsilon=math.inf, classes=2, groups=2)):
        est.fit(frame, y, sensitive_features=s)
        assert list(est.feature_names_in_) == list("abcde")
        reordered = frame[list("bacde")]
        np.testing.assert_array_equal(est.predict(reordered), est.predict(frame))
        np.testing.assert_array_equal(est.predict(frame.to_numpy()), est.predict(frame))
        with pytest.raises(ValueError, match="columns differ"):
            est.predict(frame.rename(columns={"e": "z"}))
    est.save(tmp_path / "m.pt")  # the names travel with the model file
    loaded = load_estimator(tmp_path / "m.pt")
    np.testing.assert_array_equal(loaded.predict(frame[list("edcba")]), est.predict(frame))


@pytest.mark.parametrize("make,match", [
    (lambda X, y: (__import__("scipy.sparse").sparse.csr_matrix(X), y), "sparse matrix"),
    (lambda X, y: (X, y + np.linspace(0.01, 0.5, len(y))), "continuous target"),
])
def test_misleading_inputs_get_errors_that_name_the_problem(make, match):
    """Issue 13, item 4: sparse X and a continuous y each get an error saying what they are and the fix."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), rng.integers(0, 2, 60).astype(float)
    Xb, yb = make(X, y)
    with pytest.raises(ValueError, match=match):
        ERMClassifier(epochs=1).fit(Xb, yb)


def test_a_too_small_epsilon_names_the_users_epsilon_and_the_share():
    """Issue 13, item 4: ε = 1e-6 blamed "epsilon=5e-08" (a part's share) without saying so."""
    rng = np.random.default_rng(0)
    X, y, s = rng.normal(size=(200, 3)), rng.integers(0, 2, 200), rng.integers(0, 2, 200)
    from dpfair.algorithms import DPFERMIClassifier

    with pytest.raises(ValueError, match=r"epsilon=1e-06") as caught:
        DPFERMIClassifier(epsilon=1e-6, epochs=1, groups=2, classes=2).fit(X, y, sensitive_features=s)
    assert "5e-08" not in str(caught.value)


def test_a_cnn_on_a_table_says_to_use_a_tabular_model():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="use model='logistic' or 'mlp'"):
        ERMClassifier(model="cnn", epochs=1).fit(rng.normal(size=(20, 7)), rng.integers(0, 2, 20))


def test_erm_logistic_is_the_exact_optimum_like_scikit_learn():
    """Issue 13, item 6: the non-private reference reaches scikit-learn's logistic-regression loss (within 1e-3)
    on adult and separates scikit-learn's 3-blob check (it reached 57 % there with minibatches)."""
    from sklearn.datasets import make_blobs
    from sklearn.linear_model import LogisticRegression as SkLogistic
    from sklearn.metrics import log_loss

    from dpfair.datasets import load_dataset

    data = load_dataset("adult")
    X, y = data.X_train[:8000], data.y_train[:8000]
    ours = ERMClassifier(random_state=0).fit(X, y)
    theirs = SkLogistic(penalty=None, max_iter=2000).fit(X, y)
    assert log_loss(y, ours.predict_proba(X)) <= log_loss(y, theirs.predict_proba(X)) + 1e-3
    Xb, yb = make_blobs(n_samples=300, centers=3, random_state=0)
    blobs = ERMClassifier(random_state=0).fit(Xb, yb)
    assert np.mean(blobs.predict(Xb) == yb) >= 0.9
    with pytest.warns(LearnedNothingWarning, match="ERMClassifier learned nothing"):  # one epoch of minibatches
        minibatch = ERMClassifier(solver="minibatch", epochs=1, random_state=0).fit(Xb, yb)
    assert minibatch.history_[0]["epoch"] == 1
    with pytest.raises(ValueError, match="solver"):
        ERMClassifier(solver="newton").fit(Xb, yb)


def test_an_inferred_class_list_warns_at_the_users_line():
    """The PrivacyLeakWarning for classes inferred from private labels pointed at dpfair's own fit, not the caller."""
    import warnings

    from dpfair.exceptions import PrivacyLeakWarning

    X, y, _ = make_synthetic(n_samples=300, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DPSGDClassifier(epochs=1, noise_multiplier=1.0, random_state=0).fit(X, y)
    leaks = [w for w in caught if issubclass(w.category, PrivacyLeakWarning) and "inferred" in str(w.message)]
    assert leaks and all(w.filename == __file__ for w in leaks)
