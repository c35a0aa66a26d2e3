"""Per-sample gradients, norms and clipping against a plain autograd loop."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfair.nn import (
    CNN,
    MLP,
    LogisticRegression,
    apply_gradient,
    assign_grads,
    clip_coefficients,
    clipped_gradient_sum,
    clipped_sum,
    ghost_supported,
    layer_groups,
    per_sample_gradients,
    per_sample_norms,
)


def ce(logits, y):
    return F.cross_entropy(logits, y)


class Custom(nn.Module):
    """Buffer, frozen parameter, a free-standing parameter and a GroupNorm."""

    def __init__(self, d=6, k=3):
        super().__init__()
        self.register_buffer("shift", torch.linspace(-1, 1, d))
        self.frozen = nn.Parameter(torch.randn(d, d), requires_grad=False)
        self.scale = nn.Parameter(torch.rand(d) + 0.5)
        self.fc = nn.Linear(d, 8)
        self.norm = nn.GroupNorm(2, 8)
        self.out = nn.Linear(8, k)

    def forward(self, x):
        h = ((x - self.shift) @ self.frozen) * self.scale
        return self.out(torch.tanh(self.norm(self.fc(h))))


def loop_grads(model, loss_fn, X, y):
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]
    out = {n: [] for n in names}
    for i in range(X.shape[0]):
        loss = loss_fn(model(X[i : i + 1]), y[i : i + 1])
        gs = torch.autograd.grad(loss, params)
        for n, g in zip(names, gs):
            out[n].append(g)
    return {n: torch.stack(v) for n, v in out.items()}


def make_case(kind, n=9, seed=0):
    torch.manual_seed(seed)
    if kind == "logistic_binary":
        m, X, k = LogisticRegression(5, 2, seed=seed), torch.randn(n, 5), 2
    elif kind == "logistic_binary_2logit":
        m, X, k = LogisticRegression(5, 2, binary_single_logit=False, seed=seed), torch.randn(n, 5), 2
    elif kind == "logistic_multi":
        m, X, k = LogisticRegression(5, 4, seed=seed), torch.randn(n, 5), 4
    elif kind == "mlp":
        m, X, k = MLP(7, 3, seed=seed), torch.randn(n, 7), 3
    elif kind == "mlp_tanh":
        m, X, k = MLP(7, 2, hidden=(5, 4, 3), activation="tanh", seed=seed), torch.randn(n, 7), 2
    elif kind == "cnn":
        m = CNN(1, 10, image_size=12, channels=(3, 4), hidden=16, kernel_size=3, seed=seed)
        X, k = torch.randn(n, 144), 10
    elif kind == "cnn_group":
        m = CNN(2, 3, image_size=8, channels=(4,), hidden=8, kernel_size=3, norm="group", seed=seed)
        X, k = torch.randn(n, 2, 8, 8), 3
    elif kind == "custom":
        m, X, k = Custom(), torch.randn(n, 6), 3
    else:
        raise AssertionError(kind)
    y = torch.randint(0, k, (n,))
    return m.double(), X.double(), y


ALL = ["logistic_binary", "logistic_binary_2logit", "logistic_multi", "mlp", "mlp_tanh", "cnn", "cnn_group", "custom"]
GHOSTABLE = ["logistic_binary", "logistic_binary_2logit", "logistic_multi", "mlp", "mlp_tanh"]


@pytest.mark.parametrize("kind", ALL)
def test_per_sample_gradients_match_loop(kind):
    model, X, y = make_case(kind)
    ref = loop_grads(model, ce, X, y)
    got = per_sample_gradients(model, ce, X, y)
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].shape == ref[k].shape
        torch.testing.assert_close(got[k], ref[k], atol=1e-10, rtol=1e-8)
    ref_norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in ref.values()))
    torch.testing.assert_close(per_sample_norms(got), ref_norms, atol=1e-10, rtol=1e-8)


def test_custom_module_frozen_and_buffer_untouched():
    model, X, y = make_case("custom")
    got = per_sample_gradients(model, ce, X, y)
    assert "frozen" not in got and "scale" in got
    assert not ghost_supported(model)


def test_float32_matches_loop():
    model, X, y = make_case("mlp")
    model, X = model.float(), X.float()
    ref = loop_grads(model, ce, X, y)
    got = per_sample_gradients(model, ce, X, y)
    for k in ref:
        torch.testing.assert_close(got[k], ref[k], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", ["logistic_multi", "mlp", "cnn", "custom"])
def test_clipped_sum_matches_loop(kind):
    model, X, y = make_case(kind, n=11)
    ref = loop_grads(model, ce, X, y)
    grads = per_sample_gradients(model, ce, X, y)
    for max_norm in (0.05, 1.0, 100.0):
        _check_clipped_sum(model, X, y, ref, grads, max_norm)


def _check_clipped_sum(model, X, y, ref, grads, max_norm):
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in ref.values()))
    coef = torch.clamp(max_norm / norms, max=1.0)
    expected = {k: (g * coef.view(-1, *[1] * (g.dim() - 1))).sum(0) for k, g in ref.items()}
    summed, got_norms = clipped_sum(grads, max_norm)
    torch.testing.assert_close(got_norms, norms, atol=1e-10, rtol=1e-8)
    for k in expected:
        torch.testing.assert_close(summed[k], expected[k], atol=1e-10, rtol=1e-8)
    # every clipped per-sample gradient has norm <= C
    c = clip_coefficients(got_norms, max_norm)
    clipped_norms = per_sample_norms({k: g * c.view(-1, *[1] * (g.dim() - 1)) for k, g in grads.items()})
    assert torch.all(clipped_norms <= max_norm + 1e-6)
    summed2, norms2 = clipped_gradient_sum(model, ce, X, y, max_norm, method="vmap")
    for k in expected:
        torch.testing.assert_close(summed2[k], expected[k], atol=1e-10, rtol=1e-8)


def test_clip_coefficients_safe_at_zero():
    norms = torch.tensor([0.0, 0.5, 1.0, 2.0, 1e-30], dtype=torch.float64)
    c = clip_coefficients(norms, 1.0)
    torch.testing.assert_close(c, torch.tensor([1.0, 1.0, 1.0, 0.5, 1.0], dtype=torch.float64))
    assert torch.all(torch.isfinite(c))
    assert torch.all(torch.isfinite(clip_coefficients(torch.zeros(3), 0.1)))
    for bad in (0.0, -1.0, float("inf"), float("nan"), "x"):
        with pytest.raises(ValueError, match="max_norm"):
            clip_coefficients(norms, bad)


def test_zero_gradients_are_kept_zero():
    model = LogisticRegression(3, 2, seed=0).double()
    with torch.no_grad():
        model.linear.weight.zero_()
        model.linear.bias.fill_(50.0)  # p(y=1) ~ 1 -> gradient ~ 0 for label 1
    X = torch.zeros(4, 3, dtype=torch.float64)
    y = torch.ones(4, dtype=torch.long)
    for method in ("vmap", "ghost"):
        summed, norms = clipped_gradient_sum(model, ce, X, y, 1.0, method=method)
        assert all(torch.all(torch.isfinite(v)) for v in summed.values())
        assert torch.all(norms < 1e-15)


@pytest.mark.parametrize("kind", GHOSTABLE)
@pytest.mark.parametrize("n", [1, 2, 17])
@pytest.mark.parametrize("max_norm", [0.1, 1.0, 1e3])
def test_ghost_equals_vmap(kind, n, max_norm):
    model, X, y = make_case(kind, n=n)
    assert ghost_supported(model)
    sv, nv = clipped_gradient_sum(model, ce, X, y, max_norm, method="vmap")
    sg, ng = clipped_gradient_sum(model, ce, X, y, max_norm, method="ghost")
    sa, na = clipped_gradient_sum(model, ce, X, y, max_norm, method="auto")
    torch.testing.assert_close(ng, nv, atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(na, nv, atol=1e-10, rtol=1e-8)
    assert set(sg) == set(sv)
    for k in sv:
        assert sg[k].shape == sv[k].shape
        torch.testing.assert_close(sg[k], sv[k], atol=1e-10, rtol=1e-8)
        torch.testing.assert_close(sa[k], sv[k], atol=1e-10, rtol=1e-8)
    # ghost does not touch .grad
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("kind", ["mlp", "cnn", "cnn_group", "custom"])
@pytest.mark.parametrize("method", ["auto", "vmap"])
@pytest.mark.parametrize("per_layer", [False, True])
def test_padding_rows_after_valid_add_exactly_nothing(kind, method, per_layer):
    """A batch padded with rows past ``valid`` (any values, any bounds) sums to the unpadded batch's clipped sum."""
    model, X, y = make_case(kind, n=13)
    layers = layer_groups(model) if per_layer else None
    bounds = torch.rand(13, dtype=X.dtype) + 0.05
    summed, norms = clipped_gradient_sum(model, ce, X[:9], y[:9], bounds[:9], method=method, layers=layers)
    padded, padded_norms = clipped_gradient_sum(model, ce, X, y, bounds, method=method, layers=layers, valid=9)
    torch.testing.assert_close(padded_norms[:9], norms, atol=1e-12, rtol=1e-10)
    for k in summed:
        torch.testing.assert_close(padded[k], summed[k], atol=1e-12, rtol=1e-10)
    # the padding rows' gradients are not zero: their coefficient is
    alone, _ = clipped_gradient_sum(model, ce, X[9:], y[9:], bounds[9:], method=method, layers=layers)
    assert sum(float(v.abs().sum()) for v in alone.values()) > 0


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize("method", ["auto", "vmap", "ghost"])
def test_empty_batch_returns_zeros(kind, method):
    model, X, y = make_case(kind, n=3)
    X0, y0 = X[:0], y[:0]
    summed, norms = clipped_gradient_sum(model, ce, X0, y0, 1.0, method=method)
    assert norms.shape == (0,)
    for n, p in model.named_parameters():
        if p.requires_grad:
            assert summed[n].shape == p.shape and torch.all(summed[n] == 0)
    grads = per_sample_gradients(model, ce, X0, y0)
    assert all(g.shape[0] == 0 for g in grads.values())


def test_ghost_rejects_unsupported_and_auto_falls_back():
    torch.manual_seed(0)
    # a depthwise (grouped) convolution has no ghost path
    model = nn.Sequential(nn.Conv2d(2, 2, 3, groups=2), nn.Flatten(1), nn.Linear(2 * 4 * 4, 3)).double()
    X, y = torch.randn(4, 2, 6, 6, dtype=torch.float64), torch.randint(0, 3, (4,))
    with pytest.raises(ValueError):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")
    sa, na = clipped_gradient_sum(model, ce, X, y, 1.0, method="auto")
    sv, nv = clipped_gradient_sum(model, ce, X, y, 1.0, method="vmap")
    torch.testing.assert_close(na, nv)
    with pytest.raises(ValueError, match="method"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="fast")


def test_ghost_inplace_relu_and_sequence_inputs():
    torch.manual_seed(0)

    class SeqNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 6)
            self.act = nn.ReLU(inplace=True)
            self.b = nn.Linear(6, 3)

        def forward(self, x):  # x: (B, T, 4); self.a used twice (weight sharing across calls)
            h = self.act(self.a(x)) + self.a(x.flip(1)).tanh()
            return self.b(h.mean(1))

    model = SeqNet().double()
    X = torch.randn(5, 3, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (5,))
    assert ghost_supported(model)
    sv, nv = clipped_gradient_sum(model, ce, X, y, 0.3, method="vmap")
    sg, ng = clipped_gradient_sum(model, ce, X, y, 0.3, method="ghost")
    torch.testing.assert_close(ng, nv)
    for k in sv:
        torch.testing.assert_close(sg[k], sv[k])


def test_ghost_large_sequence_uses_materialised_path():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Flatten(1), nn.Linear(2 * 20, 2)).double()
    X = torch.randn(4, 20, 2, dtype=torch.float64)  # T=20, T^2 > 2*2
    y = torch.randint(0, 2, (4,))
    sv, nv = clipped_gradient_sum(model, ce, X, y, 0.5, method="vmap")
    sg, ng = clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost")
    torch.testing.assert_close(ng, nv)
    for k in sv:
        torch.testing.assert_close(sg[k], sv[k])


def test_ghost_detects_direct_weight_use():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(3, 3)
            self.unused = nn.Linear(3, 2)

        def forward(self, x):
            return self.used(x)[:, :2] + x[:, :2] @ self.unused.weight.T[:2]

    model = Tied().double()
    X = torch.randn(4, 3, dtype=torch.float64)
    y = torch.randint(0, 2, (4,))
    with pytest.raises(ValueError, match="outside"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")
    sa, na = clipped_gradient_sum(model, ce, X, y, 1.0, method="auto")
    sv, nv = clipped_gradient_sum(model, ce, X, y, 1.0, method="vmap")
    torch.testing.assert_close(na, nv)


def test_frozen_layer_and_unused_layer_in_ghost():
    model = MLP(4, 2, hidden=(5,), seed=0).double()
    model.net[0].weight.requires_grad_(False)
    model.extra = nn.Linear(4, 4).double()  # never called -> zero gradient
    X = torch.randn(6, 4, dtype=torch.float64)
    y = torch.randint(0, 2, (6,))
    sv, nv = clipped_gradient_sum(model, ce, X, y, 0.2, method="vmap")
    sg, ng = clipped_gradient_sum(model, ce, X, y, 0.2, method="ghost")
    assert "net.0.weight" not in sg and "extra.weight" in sg
    torch.testing.assert_close(ng, nv)
    for k in sv:
        torch.testing.assert_close(sg[k], sv[k])


def test_reduction_none_loss_and_tuple_targets():
    model, X, y = make_case("mlp", n=5)
    w = torch.rand(5, dtype=torch.float64)

    def weighted(logits, t):
        labels, weights = t
        return F.cross_entropy(logits, labels, reduction="none") * weights

    ref = loop_grads(model, lambda o, t: F.cross_entropy(o, t), X, y)
    got = per_sample_gradients(model, weighted, X, (y, w))
    for k in ref:
        torch.testing.assert_close(got[k], ref[k] * w.view(-1, *[1] * (ref[k].dim() - 1)))
    sv, nv = clipped_gradient_sum(model, weighted, X, (y, w), 0.5, method="vmap")
    sg, ng = clipped_gradient_sum(model, weighted, X, (y, w), 0.5, method="ghost")
    torch.testing.assert_close(ng, nv)
    with pytest.raises(ValueError, match="one entry per row"):
        per_sample_gradients(model, ce, X, y[:3])


def test_dropout_vmap_runs_in_train_mode():
    model = MLP(4, 2, dropout=0.5, seed=0).double().train()
    X = torch.randn(8, 4, dtype=torch.float64)
    y = torch.randint(0, 2, (8,))
    summed, norms = clipped_gradient_sum(model, ce, X, y, 1.0, method="vmap")
    assert norms.shape == (8,) and all(torch.all(torch.isfinite(v)) for v in summed.values())
    summed, norms = clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")
    assert norms.shape == (8,)


def test_chunk_size_gives_same_result():
    model, X, y = make_case("cnn", n=7)
    a = per_sample_gradients(model, ce, X, y)
    b = per_sample_gradients(model, ce, X, y, chunk_size=3)
    for k in a:
        torch.testing.assert_close(a[k], b[k])


def test_apply_and_assign_gradient():
    model, X, y = make_case("mlp", n=4)
    before = {k: p.detach().clone() for k, p in model.named_parameters()}
    summed, _ = clipped_gradient_sum(model, ce, X, y, 1.0)
    apply_gradient(model, summed, lr=0.1)
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), before[k] - 0.1 * summed[k])
    assign_grads(model, summed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.step()
    for k, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), before[k] - 0.2 * summed[k])
    with pytest.raises(ValueError, match="unknown"):
        apply_gradient(model, {"nope": torch.zeros(1)}, 0.1)


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
def test_opacus_grad_sample_module_agrees_for_mlp():
    opacus = pytest.importorskip("opacus")
    model, X, y = make_case("mlp", n=6)
    ours = per_sample_gradients(model, ce, X, y)
    gsm = opacus.GradSampleModule(model, loss_reduction="sum")
    loss = F.cross_entropy(gsm(X), y, reduction="sum")
    loss.backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad_sample, ours[name], atol=1e-10, rtol=1e-8)
    gsm.remove_hooks()


def test_works_inside_no_grad():
    model, X, y = make_case("mlp", n=5)
    sv, nv = clipped_gradient_sum(model, ce, X, y, 0.5, method="vmap")
    with torch.no_grad():
        for method in ("ghost", "vmap"):
            s, n = clipped_gradient_sum(model, ce, X, y, 0.5, method=method)
            torch.testing.assert_close(n, nv)
            for k in sv:
                torch.testing.assert_close(s[k], sv[k])
