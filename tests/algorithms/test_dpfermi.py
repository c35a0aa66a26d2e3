"""DP-FERMI: sensitivity by brute force, noise scale, accounting, the min-max pieces, equivalences, bad input."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression as SkLogistic
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dpfair.algorithms import DPFERMIClassifier, fit_dpfermi_grid
import dpfair.algorithms.dpfermi.batched as batched
import dpfair.algorithms.dpfermi.loop as loop
import dpfair.algorithms.dpfermi.data as fdata
import dpfair.algorithms.dpfermi.models as fmodels
from dpfair.algorithms.dpfermi.data import FermiHyperParameters, FermiSchedule
from dpfair.algorithms.dpfermi.estimator import effective_noise_multiplier, noise_scales, paper_noise
from dpfair.exceptions import LearnedNothingWarning, PrivacyLeakWarning, SmallGroupWarning
from dpfair.nn import LogisticRegression, make_model
from dpfair.privacy import (
    Part,
    PrivacyBudget,
    PrivacyLedger,
    Release,
    SecretRandom,
    epsilon_of,
    max_neighbour_distance,
)

_RELEASE_INIT = Release.__init__

pytestmark = [
    pytest.mark.filterwarnings("ignore::UserWarning:absl"),
    # the module's fits run on a few hundred rows in 3 groups (fast), whose counts released at epsilon <= 4 (5 % of
    # it) are often flagged as maybe too small to be fair on; the tests about small groups assert that warning
    pytest.mark.filterwarnings("ignore::dpfair.exceptions.SmallGroupWarning"),
]


def _data(n=600, k=3, d=5, l=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    s = rng.integers(0, k, n)
    score = X[:, 0] + 0.6 * s + rng.normal(size=n)
    y = (score > 0.6).astype(int) if l == 2 else np.digitize(score, np.quantile(score, [1 / 3, 2 / 3]))
    return X, y, s


#: ... with the public lists of _data's three groups and (binary) labels: none is inferred from the private rows
FAST = dict(batch_size=64, epochs=3, epsilon=4.0, groups=3, classes=2)

def _hp(lam, learning_rate=0.1, w_learning_rate=0.1, w_radius=3.0, noise_theta=1.0, noise_w=1.0, w_bound=3.0,
        target_error=None, lam_rate=20.0):
    """One model's :class:`FermiHyperParameters` (its schedule unused: the loop takes the run's)."""
    return FermiHyperParameters(FermiSchedule(0.5, 1, 8, False, 1.0), lam, learning_rate, w_learning_rate, w_radius,
                                noise_theta, noise_w, w_bound, target_error, lam_rate)


def _train(models, data, schedule, hp):
    """The loop with secret streams keyed by seed group (deterministic under ``replay``); returns W."""
    S, G = hp.lam.shape
    samplers = [SecretRandom(("batches", g)) for g in range(S)]
    release = Release(Part("dp-fermi step", sampling_probability=min(schedule.sampling_probability, 1.0)),
                      [1.0] * (S * G), SecretRandom(("noise",)), [PrivacyLedger("sensitive") for _ in range(S * G)])
    return loop.train(models, data, schedule, hp, samplers, release,
                      [torch.Generator().manual_seed(g) for g in range(S)])


# ---- the release of one step: sensitivity by brute force ------------------------------------------------------

def _release_fn(model, notion, unit, lam, k, l, C=1.0, seed=0):
    """f(X, y, s) = the pre-noise vector one step releases on the whole data (batch = everyone)."""
    rng = np.random.default_rng(seed)
    m = l if notion == "equalized_odds" else 1
    W = torch.tensor(rng.normal(size=(1, 1, m, k, l)), dtype=torch.float32)
    p = rng.dirichlet(np.ones(k) * 5, size=m)
    inv_sqrt_p = torch.tensor(1 / np.sqrt(p), dtype=torch.float32)
    record = unit == "record"
    radius = float(W.flatten(3).norm(dim=-1).max())
    w_bound = 2 / math.sqrt(p.min()) + (2 * radius if record else 0.0)

    def f(X, y, s):
        cells = {"demographic_parity": np.zeros(len(y), int), "equalized_odds": y,
                 "equal_opportunity": np.where(y == 1, 0, -1)}[notion]
        data = fdata.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s),
                                torch.tensor(cells), m, k, l)
        schedule = fdata.FermiSchedule(0.5, 1, 8, record, C)
        hp = fdata.FermiModels.stack([[_hp(lam, w_radius=radius, noise_theta=0.0, noise_w=0.0, w_bound=w_bound)]],
                                      inv_sqrt_p[None, None], "cpu")
        models = model() if callable(model) else model
        idx = torch.arange(len(y))[None]
        theta, wsum = batched.secret_sums(models, data, schedule, hp, W, idx, torch.ones_like(idx, dtype=torch.bool))
        return torch.cat([theta[0, 0] / (math.sqrt(2) * C), wsum[0, 0].flatten() / (math.sqrt(2) * w_bound)])

    return f


def _linear(d, L, seed=0):
    g = torch.Generator().manual_seed(seed)
    weight, bias = torch.randn(1, 1, L, d, generator=g) * 2, torch.randn(1, 1, L, generator=g)
    return lambda: fmodels.LinearModels(weight.clone(), bias.clone())


@pytest.mark.parametrize("notion,l", [("demographic_parity", 2), ("demographic_parity", 3), ("equalized_odds", 2),
                                      ("equalized_odds", 3), ("equal_opportunity", 2)])
def test_sensitive_release_moves_at_most_twice_its_bound(notion, l):
    k, d = 3, 4
    X, y, s = _data(n=14, k=k, d=d, l=l, seed=l)
    f = _release_fn(_linear(d, 1 if l == 2 else l), notion, "sensitive", lam=25.0, k=k, l=l)
    worst = max_neighbour_distance(f, X, y, s, unit="sensitive", n_groups=k)
    assert 0.3 < worst <= 2.0 + 1e-5  # replace-one: each person's contribution lies in the unit ball


@pytest.mark.parametrize("notion", ["demographic_parity", "equalized_odds"])
def test_record_release_moves_at_most_its_bound(notion):
    k, d, l = 2, 4, 2
    X, y, s = _data(n=12, k=k, d=d, seed=3)
    f = _release_fn(_linear(d, 1), notion, "record", lam=5.0, k=k, l=l)
    worst = max_neighbour_distance(f, X, y, s, unit="record")
    assert 0.1 < worst <= 1.0 + 1e-5


def test_module_release_sensitivity_mlp():
    k, d, l = 3, 4, 2
    X, y, s = _data(n=10, k=k, d=d, seed=5)
    mlp = make_model("mlp", d, l, hidden=(8,), seed=0)
    f = _release_fn(fmodels.ModuleModel(mlp), "demographic_parity", "sensitive", lam=50.0, k=k, l=l)
    assert max_neighbour_distance(f, X, y, s, unit="sensitive", n_groups=k) <= 2.0 + 1e-5


def test_module_secret_part_at_lambda_zero_is_zero_without_per_sample_work(monkeypatch):
    """Sensitive unit, λ = 0: the secret θ-sum λ·2u·F is identically zero, so no per-sample pass is run."""
    X, y, s = _data(n=12, k=2, d=4, seed=3)
    model = fmodels.ModuleModel(make_model("mlp", 4, 2, hidden=(5,), seed=0))
    Xb, yb = torch.tensor(X, dtype=torch.float32)[None], torch.tensor(y)[None]
    onehot = torch.nn.functional.one_hot(torch.tensor(s), 2).float()[None]
    h_cells = torch.randn(1, 2, 1, 2)
    args = (Xb, None, None, yb, onehot, h_cells, False)
    full, cells = model.gradient_sum(*args, torch.full((1, 1), 1e-9), 1.0)
    assert full.abs().max() > 0  # a tiny λ still runs the clipped pass
    monkeypatch.setattr(fmodels, "clipped_gradient_sum", lambda *a, **k: pytest.fail("per-sample pass at λ = 0"))
    zero, cells0 = model.gradient_sum(*args, torch.zeros(1, 1), 1.0)
    assert zero.shape == full.shape and not zero.any()
    torch.testing.assert_close(cells0, cells)  # the W part's Σ onehot ⊗ F is still computed


# ---- noise and accounting ------------------------------------------------------------------------------------

def test_added_noise_has_the_calibrated_standard_deviation(replay):
    """One step of 20 seed groups with λ = 0 and no public part's effect on the difference of two runs."""
    n, d, S = 50, 199, 20
    X, y, s = _data(n=n, k=2, d=d)
    data = fdata.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s),
                            torch.zeros(n, dtype=torch.long), 1, 2, 2)
    schedule = fdata.FermiSchedule(0.5, 1, 10, False, 1.0)
    thetas = []
    for noise in (0.0, 3.0):
        hp = fdata.FermiModels.stack([[_hp(0.0, 1.0, 1.0, 1.0, noise, noise, 1.0)]] * S, torch.ones(S, 1, 1, 2),
                                      "cpu")
        models = fmodels.LinearModels(torch.zeros(S, 1, 1, d), torch.zeros(S, 1, 1))
        with replay(0):  # the same secret batches in both runs
            _train(models, data, schedule, hp)
        thetas.append(torch.cat([models.weight.flatten(1), models.bias.flatten(1)], 1))
    diff = (thetas[1] - thetas[0]).flatten().double()
    expected = 3.0 / (0.5 * n)  # learning rate 1 × noise std on the sum / the public normaliser q·n
    # 4,000 draws: the sample std is within 4 × std/√(2N) ≈ 4.5 % of the truth with overwhelming probability
    assert abs(diff.std().item() / expected - 1) < 0.045
    assert abs(diff.mean().item()) < 4 * expected / math.sqrt(diff.numel())


def test_noise_scales_split_one_event_between_theta_and_w():
    a, b = noise_scales(2.0, 1.5, 3.0)
    assert a == pytest.approx(2 * math.sqrt(2) * 1.5) and b == pytest.approx(2 * math.sqrt(2) * 3.0)
    assert effective_noise_multiplier(a, b, 1.5, 3.0) == pytest.approx(2.0)


@pytest.mark.parametrize("unit,relation", [("sensitive", dpa.NeighboringRelation.REPLACE_ONE),
                                           ("record", dpa.NeighboringRelation.ADD_OR_REMOVE_ONE)])
def test_ledger_spends_at_most_the_target_under_the_units_relation(unit, relation):
    X, y, s = _data()
    est = DPFERMIClassifier(privacy_unit=unit, random_state=0, **FAST).fit(X, y, sensitive_features=s)
    assert est.privacy_ledger_.relation is relation
    eps, delta = est.privacy_spent_
    assert 0.99 * 4.0 <= eps <= 4.0
    assert delta == pytest.approx(1 / 600**2)
    labels = [e.label for e in est.privacy_ledger_.entries]
    assert labels == ["group counts", "dp-fermi step"]
    assert est.privacy_ledger_.entries[1].count == est.n_steps_
    assert eps == pytest.approx(est.privacy_plan_.epsilon(est.noise_multipliers_, delta, unit), rel=1e-9)
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)


def test_public_proportions_spend_nothing_on_counts():
    X, y, s = _data()
    p = np.bincount(s) / len(s)
    est = DPFERMIClassifier(group_proportions=p, random_state=0, **FAST).fit(X, y, sensitive_features=s)
    assert [e.label for e in est.privacy_ledger_.entries] == ["dp-fermi step"]
    np.testing.assert_allclose(est.group_proportions_[0], p)


def test_paper_calibration_warns_and_reports_what_it_spends():
    X, y, s = _data()
    with pytest.warns(PrivacyLeakWarning, match="Theorem 3.3"):
        est = DPFERMIClassifier(calibration="paper", random_state=0, **FAST).fit(X, y, sensitive_features=s)
    assert est.privacy_spent_[0] == pytest.approx(
        est.privacy_plan_.epsilon(est.noise_multipliers_, est.delta_, "sensitive"), rel=1e-9)
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)


def test_paper_noise_formula_matches_the_quoted_adult_figure():
    n = 33916
    steps = math.ceil(200 / (1024 / n))
    s_theta, s_w = paper_noise(n, steps, 1.0, 1 / n**2, 0.325, 5.0, 5.0)
    assert s_theta == pytest.approx(1.92, abs=0.01)
    assert s_theta == pytest.approx(25 * s_w)


# ---- the min-max pieces ----------------------------------------------------------------------------------------

def test_linear_closed_form_gradients_agree_with_autograd():
    torch.manual_seed(0)
    for l in (2, 4):
        X, y, s = _data(n=40, k=3, d=6, l=min(l, 3), seed=l)
        y = np.asarray(y) % l
        model = LogisticRegression(6, l, seed=1)
        lin = model.linear
        models = fmodels.LinearModels(lin.weight.detach().clone()[None, None], lin.bias.detach().clone()[None, None])
        onehot = torch.nn.functional.one_hot(torch.tensor(s), 3).float()[None]
        h_cells = torch.randn(1, 3, 1, l)
        Xt = torch.tensor(X, dtype=torch.float32)
        x_norm = torch.sqrt((Xt**2).sum(1) + 1)
        got, _ = models.gradient_sum(Xt[None], x_norm[None], torch.ones(1, 40, dtype=torch.bool),
                                     torch.tensor(y)[None], onehot, h_cells, True, torch.tensor([[0.7]]), None)
        h = (onehot[0] @ h_cells[0, :, 0])
        a = torch.ones(40)
        loss = fmodels.fermi_loss(model(Xt), (torch.tensor(y), h, a, 0.7 * a))
        want = torch.cat([g.flatten() for g in torch.autograd.grad(loss, [lin.weight, lin.bias])])
        torch.testing.assert_close(got[0, 0], want, atol=1e-5, rtol=1e-4)


def test_closed_form_and_torch_func_paths_train_the_same_model(replay):
    X, y, s = _data()

    class Wrapped(torch.nn.Module):  # hides the LogisticRegression type: forces the torch.func path
        def __init__(self):
            super().__init__()
            self.inner = LogisticRegression(5, 2, seed=0)

        def forward(self, x):
            return self.inner(x)

    for notion in ("demographic_parity", "equalized_odds", "equal_opportunity"):
        for unit in ("sensitive", "record"):
            kw = dict(notion=notion, privacy_unit=unit, lam=2.0, random_state=1, **FAST)
            with replay(0):
                a = DPFERMIClassifier(model=LogisticRegression(5, 2, seed=0), **kw).fit(X, y, sensitive_features=s)
            with replay(0):
                b = DPFERMIClassifier(model=Wrapped(), **kw).fit(X, y, sensitive_features=s)
            np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), atol=1e-5)
            np.testing.assert_allclose(a.W_, b.W_, atol=1e-5)


def test_lambda_zero_without_noise_reaches_the_logistic_regression_optimum():
    X, y, s = _data(n=400, k=2, d=3, seed=4)
    est = DPFERMIClassifier(lam=0.0, epsilon=math.inf, group_proportions=[0.5, 0.5], batch_size=400,
                            epochs=3000, learning_rate=1.0, max_grad_norm=1e6, groups=2, classes=2, random_state=0)
    est.fit(X, y, sensitive_features=s)
    ref = SkLogistic(C=1e8, max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(est.predict_proba(X)[:, 1], ref.predict_proba(X)[:, 1], atol=5e-3)
    assert est.privacy_spent_[0] == math.inf


def test_fairness_regulariser_reduces_the_violation():
    from dpfair.fairness import demographic_parity_violation
    X, y, s = _data(n=2000, k=2, seed=7)
    X[:, 1] += 1.5 * s  # a proxy of the group: the unconstrained model picks it up
    kw = dict(epsilon=math.inf, batch_size=256, epochs=40, random_state=0, group_proportions=[0.5, 0.5], groups=2,
              classes=2)
    base = DPFERMIClassifier(lam=0.0, **kw).fit(X, y, sensitive_features=s)
    fair = DPFERMIClassifier(lam=8.0, **kw).fit(X, y, sensitive_features=s)
    v0 = demographic_parity_violation(base.predict(X), s)
    v1 = demographic_parity_violation(fair.predict(X), s)
    assert v1 < 0.5 * v0


# ---- reproducibility, grids, scikit-learn --------------------------------------------------------------------

@pytest.mark.secret_noise
def test_random_state_does_not_reproduce_the_noise_but_replay_does(replay):
    X, y, s = _data()
    a = DPFERMIClassifier(random_state=3, **FAST).fit(X, y, sensitive_features=s)
    b = DPFERMIClassifier(random_state=3, **FAST).fit(X, y, sensitive_features=s)
    assert np.abs(a.predict_proba(X) - b.predict_proba(X)).max() > 1e-4  # the noise is secret
    assert a.privacy_guarantee_ == "differential privacy"
    with replay(5):
        c = DPFERMIClassifier(random_state=3, **FAST).fit(X, y, sensitive_features=s)
    with replay(5):
        d = DPFERMIClassifier(random_state=3, **FAST).fit(X, y, sensitive_features=s)
        e = DPFERMIClassifier(random_state=4, **FAST).fit(X, y, sensitive_features=s)
    np.testing.assert_array_equal(c.predict_proba(X), d.predict_proba(X))
    assert np.abs(c.predict_proba(X) - e.predict_proba(X)).max() > 1e-4
    assert c.privacy_guarantee_.startswith("void")


def test_batched_grid_without_noise_equals_one_fit_per_point(replay):
    X, y, s = _data()
    grid = {"lam": [0.0, 2.0], "random_state": [0, 1]}
    kw = dict(notion="equalized_odds", batch_size=64, epochs=3, epsilon=math.inf, groups=3)
    with replay(0):
        ests = fit_dpfermi_grid(X, y, s, grid, **kw)
    assert len(ests) == 4
    for est in ests:
        with replay(0):
            one = DPFERMIClassifier(**kw, lam=est.lam, random_state=est.random_state).fit(X, y, sensitive_features=s)
        np.testing.assert_allclose(est.predict_proba(X), one.predict_proba(X), atol=1e-5)
        assert est.privacy_ledger_.to_records() == one.privacy_ledger_.to_records()


@pytest.mark.secret_noise
def test_grid_models_have_their_own_ledgers_and_independent_noise():
    X, y, s = _data()
    grid = {"epsilon": [2.0, 4.0], "lam": [0.0, 0.0]}
    ests = fit_dpfermi_grid(X, y, s, grid, batch_size=64, epochs=3, groups=3, random_state=0)
    for est in ests:
        one = DPFERMIClassifier(batch_size=64, epochs=3, groups=3, epsilon=est.epsilon, random_state=0)
        one.fit(X, y, sensitive_features=s)
        assert est.privacy_ledger_.to_records() == one.privacy_ledger_.to_records()
        assert est.privacy_spent_ == one.privacy_spent_
        assert not hasattr(est, "_secret")
    # two points with the same hyper-parameters and seed: the same batches, but their own noise
    assert np.abs(ests[0].predict_proba(X) - ests[1].predict_proba(X)).max() > 1e-4
    assert not np.allclose(ests[0].group_proportions_, ests[1].group_proportions_)


def test_multiclass_crossed_groups_and_mlp():
    X, y, s = _data(l=3, k=2, seed=2)
    race = np.random.default_rng(0).integers(0, 2, len(y))
    crossed = np.array([f"{a}|{b}" for a, b in zip(s, race)])
    est = DPFERMIClassifier(notion="equalized_odds", model="mlp", random_state=0,
                            **{**FAST, "groups": ["0|0", "0|1", "1|0", "1|1"], "classes": 3})
    est.fit(X, y, sensitive_features=crossed)
    assert est.W_.shape == (3, 4, 3)
    assert est.predict(X).shape == y.shape and set(est.predict(X)) <= {0, 1, 2}


def test_scikit_learn_tools():
    X, y, s = _data()
    est = DPFERMIClassifier(random_state=0, **FAST)
    assert clone(est).get_params() == est.get_params()
    pipe = Pipeline([("scale", StandardScaler()), ("fermi", est)])
    pipe.fit(X, y, fermi__sensitive_features=s)
    assert pipe.named_steps["fermi"].privacy_spent_[0] <= 4.0
    # scikit-learn's own CV spends privacy no budget accounts: the fit says so
    with pytest.warns(PrivacyLeakWarning, match="fitted inside scikit-learn's cross_val_score"):
        scores = cross_val_score(est, X, y, cv=3, params={"sensitive_features": s})
    assert scores.shape == (3,) and np.all(scores > 0.5)


# ---- bad input -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,match", [
    (dict(lam=-1.0), "lam must be >= 0"),
    (dict(w_radius=0.0), "w_radius must be > 0"),
    (dict(w_learning_rate=-0.1), "w_learning_rate must be > 0"),
    (dict(learning_rate=0.0), "learning_rate must be > 0"),
    (dict(tail_average=1.0), "tail_average"),
    (dict(notion="parity"), "notion must be one of"),
    (dict(calibration="guess"), "calibration must be one of"),
    (dict(group_proportions=[0.5, 0.3, 0.1]), "sum to 1"),
    (dict(group_proportions=[0.5, 0.5]), "shape"),
    (dict(proportions_budget=1.5), "proportions_budget"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(delta=1.5), "delta"),
    (dict(target_error=1.5), "target_error must lie strictly between 0 and 1"),
    (dict(target_error=0.2, lam_rate=0.0), "lam_rate must be > 0"),
    (dict(target_error=0.2, lam=0.0), "must start above 0"),
    (dict(target_error=0.2, privacy_unit="record", classes=2), "public only under privacy_unit='sensitive'"),
])
def test_bad_hyperparameters_name_the_argument(params, match):
    X, y, s = _data()
    with pytest.raises(ValueError, match=match):
        DPFERMIClassifier(**{**FAST, **params}).fit(X, y, sensitive_features=s)


def test_equal_opportunity_needs_binary_labels():
    X, y, s = _data(l=3)
    with pytest.raises(ValueError, match="equal_opportunity.*binary"):
        # y's classes read from y (public under the sensitive unit), so its third label reaches the notion's check
        DPFERMIClassifier(notion="equal_opportunity", **{**FAST, "classes": None}).fit(X, y, sensitive_features=s)


def test_too_small_epsilon_says_by_how_much():
    X, y, s = _data()
    with pytest.raises(ValueError, match=r"too small for epochs=3 and batch_size=64.*at least"):
        DPFERMIClassifier(**{**FAST, "epsilon": 0.01}, group_proportions=[0.3, 0.3, 0.4]).fit(
            X, y, sensitive_features=s)


def test_a_too_small_epsilon_is_refused_before_the_group_counts_are_released(monkeypatch):
    """The refusal reads only public quantities (σ, n, q), so it comes before any release (it came after the
    group counts' release, a spend for nothing)."""
    X, y, s = _data(n=40)
    made = []

    def spy(self, *args, **kwargs):
        made.append(args)
        _RELEASE_INIT(self, *args, **kwargs)

    monkeypatch.setattr(Release, "__init__", spy)
    with pytest.raises(ValueError, match=r"too small.*every step already sees all 40 rows"):
        DPFERMIClassifier(epsilon=0.2, epochs=50, batch_size=64, groups=3, classes=2).fit(X, y, sensitive_features=s)
    assert made == []


def test_a_group_too_small_for_the_whole_data_is_not_told_to_raise_batch_size():
    """n = 100 with every row in each step: 'raise batch_size' cannot help (issue 13, item 4)."""
    X, y, s = _data(n=100)
    with pytest.warns(SmallGroupWarning, match=r"group\(s\) '0' about 0 training people \(public\)"), \
            pytest.raises(ValueError, match="smallest group's public share is 0.0040") as info:
        DPFERMIClassifier(**{**FAST, "batch_size": 100}, group_proportions=[0.004, 0.496, 0.5]).fit(
            X, y, sensitive_features=s)
    assert "batch_size" not in str(info.value) and "merge small groups" in str(info.value)


def test_group_too_small_for_a_batch():
    X, y, s = _data()
    with pytest.warns(SmallGroupWarning, match=r"group\(s\) '0' about 3 training people \(public\)"), \
            pytest.raises(ValueError, match="smallest group.*batch_size"):
        DPFERMIClassifier(**FAST, group_proportions=[0.005, 0.495, 0.5]).fit(X, y, sensitive_features=s)


def test_missing_sensitive_features():
    X, y, _ = _data()
    with pytest.raises(ValueError, match="sensitive_features"):
        DPFERMIClassifier(**FAST).fit(X, y)


def test_nan_features_rejected():
    X, y, s = _data()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN|finite"):
        DPFERMIClassifier(**FAST).fit(X, y, sensitive_features=s)


def test_cnn_on_small_images():
    rng = np.random.default_rng(0)
    n = 120
    s = rng.integers(0, 2, n)
    y = rng.integers(0, 3, n)
    X = rng.random((n, 64)).astype(np.float32)
    X[s == 1] = 1 - X[s == 1]  # the group is an image property
    est = DPFERMIClassifier(model="cnn", notion="equalized_odds", model_kwargs={"image_size": 8, "channels": (2, 4),
                                                                                 "hidden": 8},
                            batch_size=40, epochs=2, epsilon=8.0, groups=2, classes=3, random_state=0)
    with pytest.warns(LearnedNothingWarning):  # the labels are random: nothing to learn, and the fit says so
        est.fit(X, y, sensitive_features=s)
    assert est.predict_proba(X).shape == (n, 3)
    assert est.privacy_spent_[0] <= 8.0


def test_tail_average_returns_the_mean_of_the_last_iterates(replay):
    X, y, s = _data(n=200, k=2, d=3)
    data = fdata.FermiData(torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s),
                            torch.zeros(200, dtype=torch.long), 1, 2, 2)
    hp = fdata.FermiModels.stack([[_hp(1.0, 0.5, 0.1, 3.0, 2.0, 2.0, 3.0)]], torch.ones(1, 1, 1, 2), "cpu")

    class Recording(fmodels.LinearModels):
        def step(self, update):
            super().step(update)
            self.history.append(self.flat().clone())

    iterates = {}
    for average_from in (None, 6):
        models = Recording(torch.zeros(1, 1, 1, 3), torch.zeros(1, 1, 1))
        models.history = []
        schedule = fdata.FermiSchedule(0.2, 10, 40, False, 1.0, average_from)
        with replay(0):
            _train(models, data, schedule, hp)
        iterates[average_from] = (models.flat(), torch.stack(models.history))
    last, history = iterates[None]
    torch.testing.assert_close(last, history[-1])
    averaged, history6 = iterates[6]
    torch.testing.assert_close(history6, history)  # averaging does not change the trajectory
    torch.testing.assert_close(averaged, history[6:].mean(0), atol=1e-6, rtol=1e-5)


def test_the_joint_event_of_a_grid_merges_gaussians_exactly():
    # unsampled Gaussian releases compose into one Gaussian of multiplier (Σ σ⁻²)^(-1/2): the merge the grid's
    # joint accounting relies on, checked against the PLD composition of the separate events
    separate = dpa.ComposedDpEvent([dpa.GaussianDpEvent(2.0), dpa.GaussianDpEvent(3.0), dpa.GaussianDpEvent(5.0)])
    merged = dpa.GaussianDpEvent((2.0**-2 + 3.0**-2 + 5.0**-2) ** -0.5)
    assert epsilon_of(separate, 1e-6, "sensitive") == pytest.approx(epsilon_of(merged, 1e-6, "sensitive"), rel=2e-3)


def test_a_grid_with_uneven_seed_groups_pads_and_keeps_every_ledger():
    X, y, s = _data()
    ests = fit_dpfermi_grid(X, y, s, {"random_state": [0, 0, 1]}, batch_size=64, epochs=2, groups=3)
    assert [e.privacy_ledger_.to_records() for e in ests[1:]] == [ests[0].privacy_ledger_.to_records()] * 2
    assert ests.shared_batches


def test_a_grid_fitted_one_model_at_a_time_composes_its_models():
    X, y, s = _data()
    ests = fit_dpfermi_grid(X, y, s, {"lam": [0.0, 1.0]}, model="mlp", model_kwargs={"hidden": (4,)},
                            batch_size=64, epochs=1, groups=3, random_state=0)
    assert not ests.shared_batches  # each model sampled its own batches: the joint ε is their composition
    both = PrivacyLedger.combined(e.privacy_ledger_ for e in ests).epsilon(ests[0].delta_)
    assert ests.privacy_spent[0] == pytest.approx(both, rel=1e-2)


def test_a_grid_checks_its_features_once_and_still_refuses_nan(monkeypatch):
    import dpfair.utils.validation as validation

    calls, check = [], validation.check_features
    monkeypatch.setattr(validation, "check_features", lambda X, name: calls.append(name) or check(X, name))
    X, y, s = _data()
    fit_dpfermi_grid(X, y, s, {"lam": [0.0, 1.0, 2.0]}, batch_size=64, epochs=1, groups=3)
    assert calls == ["X"]
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_dpfermi_grid(X, y, s, {"lam": [0.0, 1.0]}, batch_size=64, epochs=1, groups=3)


def _fitted(est):
    """What a fit released and kept, to compare two fits bit for bit."""
    return ([p.detach().numpy().tobytes() for p in est.model_.parameters()], est.W_.tobytes(),
            est.group_proportions_.tobytes(), est.privacy_ledger_.to_records(), est.privacy_spent_, est.history_)


def test_fit_many_is_the_batched_grid_bit_for_bit(replay):
    # the fit contract's grid (DPFERMIClassifier.fit_many) is the grid fit_dpfermi_grid fits: the same models,
    # ledgers and joint ε, from instances or from dicts of parameters, and the same joint claim on a budget
    X, y, s = _data()
    kw = dict(batch_size=64, epochs=2, groups=3)
    points = [{"lam": lam, "random_state": seed} for lam in (0.0, 1.5) for seed in (0, 0, 1)]
    budgets = [PrivacyBudget(50.0, 1e-4) for _ in range(3)]
    with replay(4):
        grid = fit_dpfermi_grid(X, y, s, points, budget=budgets[0], **kw)
    with replay(4):
        many = DPFERMIClassifier.fit_many([clone(DPFERMIClassifier(**kw)).set_params(**p) for p in points], X, y, s,
                                          budget=budgets[1])
    with replay(4):
        by_params = DPFERMIClassifier.fit_many([{**kw, **p} for p in points], X, y, s, budget=budgets[2])
    assert type(many) is type(grid) and many.shared_batches and by_params.shared_batches
    for other in (many, by_params):
        assert [_fitted(e) for e in other] == [_fitted(e) for e in grid]
        assert other.privacy_spent == grid.privacy_spent
    assert budgets[1].spent() == budgets[2].spent() == budgets[0].spent() and budgets[0].spent()[0] > 0


def test_fit_many_trains_other_models_one_at_a_time_as_their_own_fits(replay):
    # a grid whose models cannot share a batched loop (here an MLP) trains each alone: bit for bit its own fit
    X, y, s = _data()
    kw = dict(model="mlp", model_kwargs={"hidden": (4,)}, batch_size=64, epochs=1, groups=3)
    points = [{"lam": 0.0, "random_state": 0}, {"lam": 1.0, "random_state": 1}]
    with replay(2):
        many = DPFERMIClassifier.fit_many([{**kw, **p} for p in points], X, y, s)
    assert not many.shared_batches
    for est, point in zip(many, points):
        with replay(2):
            one = DPFERMIClassifier(**kw, **point).fit(X, y, sensitive_features=s)
        assert _fitted(est) == _fitted(one)


def test_fit_many_refuses_one_estimator_twice():
    X, y, s = _data()
    est = DPFERMIClassifier(batch_size=64, epochs=1, groups=3)
    with pytest.raises(ValueError, match="distinct instances"):
        DPFERMIClassifier.fit_many([est, est], X, y, s)
    assert not hasattr(est, "privacy_spent_")


# ---- λ following a target error -----------------------------------------------------------------------------

def test_adapt_lambda_raises_lambda_below_its_target_error_and_lowers_it_above():
    X, y, s = _data(n=200, k=2, d=3)
    X1 = fmodels.LinearModels.features(torch.tensor(X, dtype=torch.float32))
    yt = torch.tensor(y)
    g = torch.Generator().manual_seed(0)
    models = fmodels.LinearModels(torch.randn(1, 3, 1, 3, generator=g), torch.randn(1, 3, 1, generator=g))
    errors = models.errors(X1, yt)
    manual = [float(np.mean((X1.numpy() @ models.theta[0, j, 0].numpy() > 0) != y)) for j in range(3)]
    assert errors[0].tolist() == pytest.approx(manual)
    hp = fdata.FermiModels.stack([[_hp(2.0, target_error=target, lam_rate=10.0)
                                    for target in (float(errors[0, 0]) + 0.1, float(errors[0, 1]) - 0.1, None)]],
                                  torch.ones(1, 3, 1, 2), "cpu")
    loop.adapt_lambda(models, X1, yt, hp)
    assert hp.lam[0].tolist() == pytest.approx([2.0 * math.exp(1.0), 2.0 * math.exp(-1.0), 2.0])  # NaN: fixed
    hp.target_error.fill_(0.99)  # unreachable: λ grows a factor e an epoch, up to LAM_MAX
    for _ in range(20):
        loop.adapt_lambda(models, X1, yt, hp)
    assert hp.lam[0].tolist() == pytest.approx([fdata.LAM_MAX] * 3)
    data = fdata.FermiData(torch.tensor(X, dtype=torch.float32), yt, torch.tensor(s),
                            torch.zeros(200, dtype=torch.long), 1, 2, 2)
    with pytest.raises(ValueError, match="private under the record unit"):  # the loop refuses it too
        _train(models, data, fdata.FermiSchedule(0.2, 5, 40, True, 1.0), hp)


def test_a_target_error_moves_lambda_at_no_privacy_cost(replay):
    """The plan and the ledger are those of a fixed λ; λ moves towards the constraint, its path in history_."""
    X, y, s = _data()
    params = dict(FAST, epochs=6, random_state=0)
    with replay(0):
        fixed = DPFERMIClassifier(**params).fit(X, y, sensitive_features=s)
    with replay(0):  # binary labels err on at most about half the rows: 0.9 lies above every epoch's, 0.01 below
        # λ raised towards an error of 0.9 (to 1e3 here) outweighs the loss: the fit learns nothing and says so
        with pytest.warns(LearnedNothingWarning, match="too large"):
            raised = DPFERMIClassifier(**params, target_error=0.9).fit(X, y, sensitive_features=s)
        lowered = DPFERMIClassifier(**params, target_error=0.01).fit(X, y, sensitive_features=s)
    for est in (raised, lowered):
        assert est.privacy_ledger_.to_records() == fixed.privacy_ledger_.to_records()
        assert est.privacy_spent_ == fixed.privacy_spent_
        assert [h["lam"] for h in est.history_][-1] == est.lam_
    assert fixed.lam_ == 1.0 and raised.lam_ > 1.0 > lowered.lam_
