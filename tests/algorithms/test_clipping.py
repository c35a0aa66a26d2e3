"""Clipping rules of DP-SGD: per-step sensitivity by brute force, the statistics' noise, the ledger, behaviour."""

import math

import numpy as np
import pytest
import torch

from dpfair.algorithms import DPSGDClassifier
from dpfair.algorithms.clipping import (
    CLIPPING_RULES,
    DPSGDFClipping,
    FairDPClipping,
    QuantileClipping,
    make_clipping_rule,
)
from dpfair.algorithms.dpsgd import cross_entropy_one
from dpfair.nn import clipped_gradient_sum, layer_groups, make_model, per_sample_gradients, per_sample_norms
from dpfair.exceptions import LearnedNothingWarning, UtilityWarning
from dpfair.privacy import Release

RULES = list(CLIPPING_RULES)


def _data(n=240, seed=0):
    """Two groups; group 1 has larger features and noisier labels, so its gradients stay larger."""
    rng = np.random.default_rng(seed)
    s = (rng.random(n) < 0.3).astype(int)
    X = rng.normal(size=(n, 4)) * (1.0 + 2.0 * s[:, None])
    y = (X[:, 0] + rng.normal(size=n) * (1 + 3 * s) > 0).astype(int)
    return X, y, s


def _started(rule_name, model, n_keys=2, sigma=1.3, bounds=None):
    rule = make_clipping_rule(rule_name).start(max_grad_norm=1.0, n_keys=n_keys, noise_multiplier=sigma,
                                               n_params=sum(p.numel() for p in model.parameters()),
                                               expected_batch=20.0, learning_rate=0.1, model=model)
    if bounds is not None and rule.by != "none":
        rule._bounds = np.asarray(bounds, dtype=np.float64)
    return rule


def _released_vector(rule, model, X, y, s):
    """The step's release before noise, in noise units: [clipped sum / B_g, statistics / B_b] (the loop's bounds)."""
    keys = rule.keys(y, s)
    bound = rule.release_bound()
    bounds = rule.bounds(keys, like=X)
    bounds = bounds.clamp(max=bound) if isinstance(bounds, torch.Tensor) else min(bounds, bound)
    summed, norms = rule.clip(model, cross_entropy_one, X, y, bounds, "auto")
    parts = [torch.cat([v.reshape(-1) for v in summed.values()]).double() / bound]
    stats = rule.statistics(norms, keys)
    if stats is not None:
        r = rule.statistics_share
        parts = [parts[0] * math.sqrt(1 - r), stats.double() * math.sqrt(r) / rule.statistics_sensitivity]
    return torch.cat(parts)


@pytest.mark.parametrize("rule_name", RULES)
@pytest.mark.parametrize("model_name", ["logistic", "mlp"])
def test_each_rules_step_moves_by_at_most_one_noise_unit_when_one_record_leaves(rule_name, model_name):
    """Brute force over every record of a batch: removing it moves the step's whole release (gradient and
    statistics together) by at most 1 in units of the noise — the sensitivity the step's Gaussian event assumes."""
    X, y, s = _data(n=24)
    X = X * 3  # large gradients: every rule clips
    model = make_model(model_name, 4, 2, seed=0)
    Xt, yt, st = torch.tensor(X, dtype=torch.float32), torch.tensor(y), torch.tensor(s)
    rule = _started(rule_name, model, bounds=[0.4, 1.7])
    full = _released_vector(rule, model, Xt, yt, st)
    worst = 0.0
    for i in range(len(X)):
        keep = torch.arange(len(X)) != i
        worst = max(worst, float((full - _released_vector(rule, model, Xt[keep], yt[keep], st[keep])).norm()))
    assert worst <= 1.0 + 1e-5
    assert worst > 0.5  # clipping binds: the bound is nearly attained, so the check has teeth


def test_per_layer_clipping_clips_each_layer_to_c_over_root_m():
    model = make_model("mlp", 4, 2, seed=0)
    layers = layer_groups(model)
    assert len(layers) == 3 and sorted(sum(layers, [])) == sorted(n for n, _ in model.named_parameters())
    X = torch.randn(16, 4) * 5
    y = torch.randint(0, 2, (16,))
    grads = per_sample_gradients(model, cross_entropy_one, X, y)
    for i in range(16):
        one = {k: g[i:i + 1] for k, g in grads.items()}
        summed, _ = clipped_gradient_sum(model, cross_entropy_one, X[i:i + 1], y[i:i + 1], 1.0, layers=layers)
        for layer in layers:
            norm = float(per_sample_norms({k: summed[k][None] for k in layer})[0])
            raw = float(per_sample_norms({k: one[k] for k in layer})[0])
            assert norm == pytest.approx(min(raw, 1.0 / math.sqrt(3)), rel=1e-5)
    # one layer: per-layer clipping is flat clipping (and keeps the ghost path)
    logistic = make_model("logistic", 4, 2, seed=0)
    a, _ = clipped_gradient_sum(logistic, cross_entropy_one, X, y, 0.3, "ghost", layers=layer_groups(logistic))
    b, _ = clipped_gradient_sum(logistic, cross_entropy_one, X, y, 0.3, "vmap")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rule_name", RULES)
def test_the_ledger_is_the_plan_and_epsilon_is_the_target(rule_name):
    X, y, s = _data(n=600)  # enough rows for record-level epsilon=1 on 5 parameters (no too-few-records warning)
    est = DPSGDClassifier(epsilon=1.0, clipping=rule_name, epochs=2, batch_size=40, groups=2, classes=2,
                          random_state=0).fit(X, y, sensitive_features=s)
    assert est.privacy_plan_.matches(est.privacy_ledger_, est.noise_multipliers_)
    rule = make_clipping_rule(rule_name)
    # one entry: the steps, each releasing the gradient and (for the adaptive rules) the statistics with it
    label = "dp-sgd step" + ("" if rule.statistics_name is None else f" (gradient + {rule.statistics_name})")
    assert [e.label for e in est.privacy_ledger_.entries] == [label]
    assert est.privacy_spent_[0] <= 1.0 + 1e-9
    share = rule.statistics_share if rule.statistics_sensitivity else 0.0
    assert est.gradient_noise_multiplier_ == pytest.approx(est.noise_multiplier_ / math.sqrt(1 - share))


@pytest.mark.parametrize("rule_name", ["quantile", "dpsgd_f", "fairdp"])
def test_the_statistics_are_released_with_the_noise_their_share_promises(rule_name, monkeypatch):
    """Released minus true statistics, over every cell of every step: std σ·Δ/√r (σ fixed at 2), within the
    chi-square confidence band of that many draws; the gradient block's bound is C_max/√(1−r)."""
    X, y, s = _data(n=400)
    true, released, bounds = [], [], []
    stats_fn = CLIPPING_RULES[rule_name].statistics
    observe_fn = CLIPPING_RULES[rule_name].observe
    noisy_sum = Release.noisy_sum
    monkeypatch.setattr(CLIPPING_RULES[rule_name], "statistics",
                        lambda self, norms, keys: true.append(stats_fn(self, norms, keys)) or true[-1])
    monkeypatch.setattr(CLIPPING_RULES[rule_name], "observe",
                        lambda self, r: released.append(r) or observe_fn(self, r))
    monkeypatch.setattr(Release, "noisy_sum",
                        lambda self, total, bound=1.0, **kw: bounds.append(bound) or noisy_sum(self, total, bound,
                                                                                                **kw))
    est = DPSGDClassifier(noise_multiplier=2.0, clipping=rule_name, epochs=10, batch_size=50, groups=2, classes=2,
                          random_state=0).fit(X, y, sensitive_features=s)
    rule = make_clipping_rule(rule_name)
    noise = torch.cat([r - t for r, t in zip(released, true)]).double().numpy()
    expected = 2.0 * rule.statistics_sensitivity / math.sqrt(rule.statistics_share)
    n = noise.size
    assert n > 300
    assert abs(noise.std() / expected - 1) < 4 / math.sqrt(2 * n)
    assert abs(noise.mean()) < 4 * expected / math.sqrt(n)
    g_bound, s_bound = bounds[0]
    assert s_bound == pytest.approx(rule.statistics_sensitivity / math.sqrt(rule.statistics_share))
    assert g_bound == pytest.approx(1.0 / math.sqrt(1 - rule.statistics_share))  # first step: C_max = C0
    assert est.n_steps_ == len(bounds)


def test_dpsgd_f_bounds_follow_the_clipped_fraction_of_each_group():
    X, y, s = _data(n=600)
    est = DPSGDClassifier(epsilon=math.inf, clipping="dpsgd_f", max_grad_norm=2.0, epochs=3, batch_size=60,
                          groups=2, classes=2, random_state=0).fit(X, y, sensitive_features=s)
    last = est.history_[-1]
    fraction = np.array(list(last["clipped_fraction"].values()))
    assert np.all((0 <= fraction) & (fraction <= 1))
    np.testing.assert_allclose(list(est.clipping_bounds_.values()), 2.0 * (1 + fraction))
    assert est.clipping_bounds_["1"] > est.clipping_bounds_["0"]  # the group with larger gradients gets more room


def test_quantile_clipping_converges_to_the_target_quantile_of_each_class():
    """ε = ∞ (exact counts) and a frozen model: after enough geometric updates, the share of each class's
    per-sample norms under its bound is the target γ, to the resolution one update step allows."""
    X, y, s = _data(n=400)
    rule = QuantileClipping(quantile=0.7, learning_rate=0.5)
    with pytest.warns(LearnedNothingWarning, match="too few steps"):  # frozen on purpose, and the fit says so
        est = DPSGDClassifier(epsilon=math.inf, clipping=rule, learning_rate=1e-12, epochs=40, batch_size=100,
                              classes=2, random_state=0).fit(X, y)
    norms = per_sample_norms(per_sample_gradients(est.model_, cross_entropy_one, torch.tensor(X, dtype=torch.float32),
                                                  torch.tensor(y))).numpy()
    for k in (0, 1):
        below = np.mean(norms[y == k] <= est.clipping_bounds_[str(k)])
        assert below == pytest.approx(0.7, abs=0.08)


def test_fairdp_gives_the_group_with_larger_gradients_a_larger_bound_and_traces_theorem_1():
    X, y, s = _data(n=2000)
    est = DPSGDClassifier(epsilon=math.inf, clipping="fairdp", max_grad_norm=0.5, learning_rate=0.1, epochs=3,
                          batch_size=200, groups=2, classes=2, random_state=0).fit(X, y, sensitive_features=s)
    assert est.clipping_bounds_["1"] > est.clipping_bounds_["0"]
    row = est.history_[-1]
    assert set(row) >= {"clipping_bounds", "clipping_bias", "noise_variance", "gradient_norm_bound"}
    assert all(v >= 0 for v in row["clipping_bias"].values())


def test_group_rules_need_the_sensitive_attribute_and_validate_their_settings():
    X, y, s = _data(n=600)  # enough rows for record-level epsilon=1 (no too-few-records warning)
    with pytest.raises(ValueError, match="sensitive_features"):
        DPSGDClassifier(clipping="fairdp", epochs=1, classes=2).fit(X, y)
    with pytest.raises(ValueError, match="clipping must be one of"):
        DPSGDClassifier(clipping="adaptive", epochs=1, classes=2).fit(X, y)
    with pytest.raises(ValueError, match="statistics_share"):
        DPSGDClassifier(clipping=FairDPClipping(statistics_share=0.0), epochs=1, classes=2, groups=2).fit(X, y, s)
    with pytest.raises(ValueError, match="by must be"):
        DPSGDClassifier(clipping=DPSGDFClipping(by="sex"), epochs=1, classes=2, groups=2).fit(X, y, s)
    # keyed on the class, DPSGD-F needs no s
    est = DPSGDClassifier(clipping=DPSGDFClipping(by="class"), epochs=1, classes=2, random_state=0).fit(X, y)
    assert set(est.clipping_bounds_) == {"0", "1"}


@pytest.mark.parametrize("rule_name", ["quantile", "dpsgd_f", "fairdp"])
def test_a_group_too_small_to_read_through_the_noise_keeps_its_bound(rule_name):
    """Three people in group 1 at σ = 1.5: their released counts are noise, so their bound stays C₀ (decided from
    the released totals only), while the large group's bound moves."""
    X, y, s = _data(n=600)
    s = np.zeros_like(s)
    s[:3] = 1
    rule = make_clipping_rule(rule_name)
    rule.by = "group"
    est = DPSGDClassifier(noise_multiplier=1.5, clipping=rule, max_grad_norm=0.3, epochs=4, batch_size=100,
                          groups=2, classes=2, random_state=0).fit(X, y, sensitive_features=s)
    assert est.clipping_bounds_["1"] == 0.3
    assert est.clipping_bounds_["0"] != 0.3


@pytest.mark.parametrize("rule_name", ["flat", "fairdp", "per_layer"])
def test_padded_poisson_batches_train_the_same_model(rule_name, replay, monkeypatch):
    """On a device that pads (forced here on the CPU) each step's batch is padded to a bucketed size, and the fit
    is the unpadded one: the same noise, the same rule statistics, parameters equal to rounding."""
    from dpfair.nn import per_sample

    X, y, s = _data(400)
    def fit():
        # an MLP of 4,610 parameters on 400 rows at epsilon=2 is too little data, and the fit says so; the test is
        # about the padding alone
        with pytest.warns(UtilityWarning, match="DP-SGD protects whole records"):
            return DPSGDClassifier(model="mlp", epochs=2, batch_size=40, epsilon=2.0, clipping=rule_name,
                                   groups=[0, 1], classes=[0, 1], random_state=0).fit(X, y, sensitive_features=s)
    with replay(3):
        plain = fit()
    sizes = []
    clip = type(make_clipping_rule(rule_name)).clip

    def spy(self, model, loss_fn, X, y, bounds, method, valid=None):
        sizes.append((X.shape[0], valid))
        return clip(self, model, loss_fn, X, y, bounds, method, valid)

    monkeypatch.setattr(type(make_clipping_rule(rule_name)), "clip", spy)
    monkeypatch.setattr(per_sample, "PADDED_DEVICES", ("cuda", "cpu"))
    with replay(3):
        padded = fit()
    assert sizes and all(rows % 4 == 0 and rows - 4 < valid <= rows for rows, valid in sizes if valid)  # √40 → 4
    assert any(rows > valid for rows, valid in sizes if valid)
    assert len({rows for rows, _ in sizes}) < len({valid for _, valid in sizes})
    for a, b in zip(plain.model_.parameters(), padded.model_.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    for a, b in zip(plain.history_, padded.history_):  # the released statistics and the bounds they set
        assert b["noisy_gradient_norm"] == pytest.approx(a["noisy_gradient_norm"], rel=1e-5)
        if a.get("clipping_bounds") is None:  # flat and per-layer clipping release no bounds
            assert b.get("clipping_bounds") is None
        else:
            assert b["clipping_bounds"] == pytest.approx(a["clipping_bounds"], rel=1e-6)
    assert padded.privacy_spent_ == plain.privacy_spent_


def test_padded_size_rounds_up_to_a_power_of_two_near_the_root_of_the_expected_batch():
    from dpfair.nn import padded_size

    assert [padded_size(b, 256.0) for b in (0, 1, 16, 17, 250, 256, 271)] == [0, 16, 16, 32, 256, 256, 272]
    assert padded_size(1000, 4096.0) == 1024 and padded_size(1025, 4096.0) == 1088
    assert padded_size(3, 0.5) == 3  # grain 1: no padding below an expected batch of 4
