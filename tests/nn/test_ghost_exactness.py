"""Ghost norms only where exact, batch-mixing layers refused, per-example clipping bounds.

Every model here is checked three ways: which method ``"auto"`` picks, that the
clipped sum equals the vmap reference (per-example gradients clipped, then
summed), and by brute force that removing one example from the batch moves the
clipped sum by at most that example's bound: the sensitivity DP-SGD relies on.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from dpfair.nn.per_sample import methods
from dpfair.nn import (
    MLP,
    GhostUnsupportedError,
    check_batch_independence,
    clip_coefficients,
    clipped_gradient_sum,
    clipped_sum,
    ghost_supported,
    per_sample_gradients,
    per_sample_norms,
)

D, K = 5, 3


def ce(logits, y):
    return F.cross_entropy(logits, y)


class DirectUse(nn.Module):
    """A Linear's weight also used directly in forward (besides calling the Linear)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.out = nn.Linear(D, K)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)) + F.linear(x, self.fc.weight))


class TiedTransposed(nn.Module):
    """Embedding-like tying: the encoder's weight, transposed, is the decoder's."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(D, 4, bias=False)
        self.head = nn.Linear(D, K)

    def forward(self, x):
        return self.head(torch.tanh(F.linear(torch.tanh(self.enc(x)), self.enc.weight.t()) + x))


class TiedSame(nn.Module):
    """One Parameter is the weight of two nn.Linear modules (with their own biases)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(D, D)
        self.b = nn.Linear(D, D)
        self.b.weight = self.a.weight
        self.out = nn.Linear(D, K)

    def forward(self, x):
        return self.out(torch.tanh(self.b(torch.relu(self.a(x)))))


class SharedModule(nn.Module):
    """The same Linear registered under two names and called three times (twice in sequence)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.again = self.fc
        self.out = nn.Linear(D, K)

    def forward(self, x):
        h = self.again(torch.tanh(self.fc(x)))
        return self.out(torch.relu(h) + self.fc(input=x.flip(1)))  # keyword input as well


class SwappedWeight(nn.Module):
    """A functional call that runs the Linear with a weight derived from its parameter."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.out = nn.Linear(D, K)

    def forward(self, x):
        h = functional_call(self.fc, {"weight": 2 * self.fc.weight, "bias": self.fc.bias}, (x,))
        return self.out(torch.relu(h))


class ReplacedForward(nn.Module):
    """A plain nn.Linear whose forward was replaced on the instance."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.fc.forward = lambda x: 1.5 * F.linear(x, self.fc.weight, self.fc.bias)
        self.out = nn.Linear(D, K)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x)))


class Centred(nn.Module):
    """Cross-example operation without a module: inputs centred on the batch mean."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 8)
        self.out = nn.Linear(8, K)

    def forward(self, x):
        return self.out(torch.relu(self.fc(x - x.mean(0))))


class HiddenStandardised(nn.Module):
    """Cross-example operation between two Linears (hand-written batch normalisation)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, 8)
        self.out = nn.Linear(8, K)

    def forward(self, x):
        h = self.fc(x)
        return self.out(torch.relu((h - h.mean(0)) / (h.std(0, correction=0) + 1.0)))


def bn_mlp(affine=False, **kw):
    return nn.Sequential(nn.Linear(D, 8), nn.BatchNorm1d(8, affine=affine, **kw), nn.ReLU(), nn.Linear(8, K))


def make(name):
    torch.manual_seed(0)
    if name == "mlp":
        model = MLP(D, K, hidden=(6, 4), seed=0)
    elif name == "bn_eval":
        model = bn_mlp()
    elif name == "bn_affine_eval":
        model = bn_mlp(affine=True)
    elif name == "weight_norm":
        model = nn.Sequential(nn.utils.parametrizations.weight_norm(nn.Linear(D, 6)), nn.Tanh(), nn.Linear(6, K))
    else:
        model = MODELS[name]()
    model = model.double()
    if name.startswith("bn_"):  # running statistics from some other (public) data, then frozen
        with torch.no_grad():
            model.train()(torch.randn(64, D, dtype=torch.float64) * 2 + 1)
        model.eval()
    return model


MODELS = {
    "direct_use": DirectUse,
    "tied_transposed": TiedTransposed,
    "tied_same": TiedSame,
    "shared_module": SharedModule,
    "swapped_weight": SwappedWeight,
    "replaced_forward": ReplacedForward,
    "centred": Centred,
    "hidden_standardised": HiddenStandardised,
}
# name -> what "auto" must pick: ghost only where it is exact
AUTO = {
    "mlp": "ghost",
    "tied_same": "ghost",
    "shared_module": "ghost",
    "bn_eval": "ghost",
    "direct_use": "vmap",
    "tied_transposed": "vmap",
    "swapped_weight": "vmap",
    "replaced_forward": "vmap",
    "centred": "vmap",
    "hidden_standardised": "vmap",
    "bn_affine_eval": "vmap",
    "weight_norm": "vmap",
}


def data(n=10, seed=1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    X = (3 * torch.randn(n, D, generator=g)).to(dtype)
    y = torch.randint(0, K, (n,), generator=g)
    return X, y


def chosen_method(model, X, y, max_norm, monkeypatch):
    """Run method="auto" and report which path produced the result."""
    used = []
    vmap_path = methods.vmap_gradients

    def spy(*args, **kwargs):
        used.append("vmap")
        return vmap_path(*args, **kwargs)

    monkeypatch.setattr(methods, "vmap_gradients", spy)
    result = clipped_gradient_sum(model, ce, X, y, max_norm, method="auto")
    return ("vmap" if used else "ghost"), result


def reference(model, X, y, max_norm):
    """Per-example gradients (vmap), clipped to their bound and summed, by hand."""
    grads = per_sample_gradients(model, ce, X, y)
    norms = per_sample_norms(grads)
    coef = torch.clamp(torch.as_tensor(max_norm, dtype=norms.dtype) / norms, max=1.0)
    return {k: (coef.view(-1, *[1] * (g.dim() - 1)) * g).sum(0) for k, g in grads.items()}, norms


def distance(a, b):
    return float(torch.sqrt(sum((a[k] - b[k]).pow(2).sum() for k in a)))


def allowed_methods(name):
    return ("auto", "vmap", "ghost") if AUTO[name] == "ghost" else ("auto", "vmap")


@pytest.mark.parametrize("name", list(AUTO))
def test_auto_picks_ghost_only_where_exact_and_matches_vmap_reference(name, monkeypatch):
    model = make(name)
    X, y = data()
    max_norm = 0.5
    method, (summed, norms) = chosen_method(model, X, y, max_norm, monkeypatch)
    assert method == AUTO[name]
    ref, ref_norms = reference(model, X, y, max_norm)
    assert torch.all(norms > max_norm), "clipping should be active for every example"
    torch.testing.assert_close(norms, ref_norms, atol=1e-10, rtol=1e-8)
    assert set(summed) == set(ref)
    for k in ref:
        torch.testing.assert_close(summed[k], ref[k], atol=1e-10, rtol=1e-8)
    for explicit in allowed_methods(name)[1:]:
        s, nn_ = clipped_gradient_sum(model, ce, X, y, max_norm, method=explicit)
        torch.testing.assert_close(nn_, ref_norms, atol=1e-10, rtol=1e-8)
        for k in ref:
            torch.testing.assert_close(s[k], ref[k], atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("name", [n for n, m in AUTO.items() if m == "vmap"])
def test_explicit_ghost_refuses_inexact_models(name):
    model = make(name)
    X, y = data()
    with pytest.raises(GhostUnsupportedError, match="method='vmap'"):
        clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("direct_use", "outside"),
        ("tied_transposed", "outside"),
        ("swapped_weight", "outside"),
        ("replaced_forward", "outside"),
        ("centred", "inputs of other examples"),
        ("hidden_standardised", "interact|inputs of other examples"),
        ("bn_affine_eval", "not the weight/bias"),
        ("weight_norm", "not the weight/bias"),
    ],
)
def test_ghost_refusal_names_the_cause(name, reason):
    model = make(name)
    X, y = data()
    with pytest.raises(GhostUnsupportedError, match=reason):
        clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost")


@pytest.mark.parametrize("max_norm", [1e6, 0.5])
def test_runtime_checks_hold_without_active_clipping(max_norm):
    """With every c_i = 1 the probe weights still expose outside use and mixing."""
    X, y = data()
    for name in ("direct_use", "centred", "hidden_standardised"):
        with pytest.raises(GhostUnsupportedError):
            clipped_gradient_sum(make(name), ce, X, y, max_norm, method="ghost")


@pytest.mark.parametrize("name", list(AUTO))
@pytest.mark.parametrize("max_norm", [0.5, 2.0])
def test_removing_one_example_moves_the_sum_by_at_most_the_bound(name, max_norm):
    model = make(name)
    X, y = data(n=8, seed=2)
    for method in allowed_methods(name):
        full, _ = clipped_gradient_sum(model, ce, X, y, max_norm, method=method)
        for j in range(X.shape[0]):
            keep = [i for i in range(X.shape[0]) if i != j]
            part, _ = clipped_gradient_sum(model, ce, X[keep], y[keep], max_norm, method=method)
            assert distance(full, part) <= max_norm + 1e-5, (method, j)


def test_neighbour_bound_float32_mlp():
    model = MLP(D, K, hidden=(16, 16), seed=3)
    X, y = data(n=16, seed=3, dtype=torch.float32)
    for method in ("auto", "ghost", "vmap"):
        full, _ = clipped_gradient_sum(model, ce, X, y, 1.0, method=method)
        for j in range(16):
            keep = [i for i in range(16) if i != j]
            part, _ = clipped_gradient_sum(model, ce, X[keep], y[keep], 1.0, method=method)
            assert distance(full, part) <= 1.0 + 1e-5


# --------------------------------------------------------------------------- batch-mixing layers


REFUSED = {
    "batchnorm1d_train": lambda: bn_mlp().train(),
    "batchnorm1d_affine_train": lambda: bn_mlp(affine=True).train(),
    "batchnorm_no_running_stats_eval": lambda: bn_mlp(track_running_stats=False).eval(),
    "batchnorm2d_train": lambda: nn.Sequential(
        nn.Unflatten(1, (1, 1, D)), nn.BatchNorm2d(1), nn.Flatten(1), nn.Linear(D, K)
    ),
    "sync_batchnorm_train": lambda: nn.Sequential(nn.Linear(D, 4), nn.SyncBatchNorm(4), nn.Linear(4, K)),
    "instancenorm_running_stats_train": lambda: nn.Sequential(
        nn.Unflatten(1, (1, D)), nn.InstanceNorm1d(1, track_running_stats=True), nn.Flatten(1), nn.Linear(D, K)
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
@pytest.mark.parametrize("method", ["auto", "vmap", "ghost"])
def test_batch_mixing_layers_are_refused_for_every_method(name, method):
    model = REFUSED[name]().double()
    X, y = data()
    with pytest.raises(ValueError, match="differentially private") as info:
        clipped_gradient_sum(model, ce, X, y, 1.0, method=method)
    assert not isinstance(info.value, GhostUnsupportedError)  # no silent fallback
    if "batchnorm" in name:
        assert "GroupNorm or LayerNorm" in str(info.value)
    assert not ghost_supported(model)
    with pytest.raises(ValueError, match="differentially private"):
        per_sample_gradients(model, ce, X, y)
    with pytest.raises(ValueError, match="differentially private"):
        clipped_gradient_sum(model, ce, X[:0], y[:0], 1.0, method=method)  # even an empty batch


def test_allowed_normalisation_layers_pass():
    for model in (
        bn_mlp().eval(),
        nn.Sequential(nn.Unflatten(1, (1, D)), nn.InstanceNorm1d(1), nn.Flatten(1), nn.Linear(D, K)),
        nn.Sequential(nn.Linear(D, 4), nn.LayerNorm(4), nn.GroupNorm(2, 4), nn.Linear(4, K)),
    ):
        check_batch_independence(model)


class RunningMean(nn.Module):
    """Updates a buffer from the batch in forward: neither vmap-able nor private."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(D))
        self.fc = nn.Linear(D, K)

    def forward(self, x):
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return self.fc(x - self.mean)


def test_torch_func_errors_become_a_clear_message():
    model = RunningMean().double()
    X, y = data()
    with pytest.raises(ValueError, match="every example\\s+alone") as info:
        clipped_gradient_sum(model, ce, X, y, 1.0, method="vmap")
    assert "torch.func said" in str(info.value) and isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(ValueError, match="every example\\s+alone"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="auto")  # ghost sees the mixing, vmap cannot run
    with pytest.raises(GhostUnsupportedError, match="inputs of other examples"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")


def test_other_errors_are_not_reworded():
    model = MLP(D, K, seed=0).double()
    X, y = data()
    with pytest.raises(RuntimeError, match="shape|size"):
        per_sample_gradients(model, ce, X[:, :3], y)


# --------------------------------------------------------------------------- per-example bounds


@pytest.mark.parametrize("name", ["mlp", "shared_module", "direct_use"])
def test_per_example_bounds(name):
    model = make(name)
    X, y = data(n=12, seed=4)
    bounds = torch.linspace(0.05, 3.0, 12, dtype=torch.float64)
    grads = per_sample_gradients(model, ce, X, y)
    norms = per_sample_norms(grads)
    assert torch.any(norms < bounds) and torch.any(norms > bounds)  # both regimes present
    coef = clip_coefficients(norms, bounds)
    clipped = per_sample_norms({k: coef.view(-1, *[1] * (g.dim() - 1)) * g for k, g in grads.items()})
    assert torch.all(clipped <= bounds * (1 + 1e-12))
    torch.testing.assert_close(clipped, torch.minimum(norms, bounds))
    ref, _ = reference(model, X, y, bounds)
    via_clipped_sum, _ = clipped_sum(grads, bounds)
    for method in allowed_methods(name):
        summed, got_norms = clipped_gradient_sum(model, ce, X, y, bounds, method=method)
        torch.testing.assert_close(got_norms, norms, atol=1e-10, rtol=1e-8)
        for k in ref:
            torch.testing.assert_close(summed[k], ref[k], atol=1e-10, rtol=1e-8)
            torch.testing.assert_close(via_clipped_sum[k], ref[k], atol=1e-10, rtol=1e-8)
        for j in range(12):  # removing example j moves the sum by at most its own bound
            keep = [i for i in range(12) if i != j]
            part, _ = clipped_gradient_sum(model, ce, X[keep], y[keep], bounds[keep], method=method)
            assert distance(summed, part) <= float(bounds[j]) + 1e-5


def test_per_example_bounds_dtype_and_scalar_tensor():
    model = make("mlp")
    X, y = data(n=6)
    s1, n1 = clipped_gradient_sum(model, ce, X, y, 0.7)
    s2, n2 = clipped_gradient_sum(model, ce, X, y, torch.full((6,), 0.7, dtype=torch.float32))
    s3, n3 = clipped_gradient_sum(model, ce, X, y, torch.tensor(0.7))
    for k in s1:
        torch.testing.assert_close(s2[k], s1[k], atol=1e-7, rtol=1e-6)  # bounds rounded to float32
        torch.testing.assert_close(s3[k], s1[k])
    summed, norms = clipped_gradient_sum(model, ce, X[:0], y[:0], torch.ones(0))
    assert norms.shape == (0,)


@pytest.mark.parametrize(
    "bad",
    [
        torch.ones(5),
        torch.ones(6, 1),
        torch.tensor([1.0, 1, 1, 0, 1, 1]),
        torch.tensor([1.0, 1, 1, -2, 1, 1]),
        torch.tensor([1.0, float("nan"), 1, 1, 1, 1]),
        torch.tensor([1.0, float("inf"), 1, 1, 1, 1]),
        torch.ones(6, dtype=torch.bool),
    ],
)
def test_per_example_bounds_are_validated(bad):
    model = make("mlp")
    X, y = data(n=6)
    for method in ("auto", "vmap", "ghost"):
        with pytest.raises(ValueError, match="max_norm"):
            clipped_gradient_sum(model, ce, X, y, bad, method=method)
    if bad.dim() == 1 and bad.shape[0] != 6:
        with pytest.raises(ValueError, match="max_norm"):
            clip_coefficients(torch.ones(6), bad)
