"""Ghost norms for every layer type they cover, against torch.func, and the once-per-structure check.

For each layer type (Linear on 2-D and sequence input, Conv1d, Conv2d with stride, dilation and every
padding, GroupNorm, LayerNorm) a small float64 model is run through the ghost path and through the
vmap reference (per-example gradients from ``torch.func``, clipped, summed): norms and clipped sums
agree to float64 rounding, with flat and with per-layer clipping; removing one example moves the sum
by at most its bound. The ghost path chooses per layer between the ghost norm (``T²`` a row) and the
materialised per-example gradient (``T·in·out``), as Bu et al.'s mixed ghost clipping does: both
branches are exercised here.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfair.nn import CNN, GhostUnsupportedError, clipped_gradient_sum, ghost_supported, layer_groups
from dpfair.nn.per_sample import ghost as ghost_engine
from dpfair.nn.per_sample import ghost_rules as rules
from dpfair.nn.per_sample import methods


def ce(logits, y):
    return F.cross_entropy(logits, y)


def seq(*layers):
    return nn.Sequential(*layers)


# name -> (model, input shape without the batch); every model ends in 3 logits
CASES = {
    "linear": (lambda: seq(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)), (6,)),
    "linear_sequence": (lambda: seq(nn.Linear(4, 5), nn.Tanh(), nn.Flatten(1), nn.Linear(35, 3)), (7, 4)),
    "conv1d": (lambda: seq(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(1), nn.Linear(40, 3)), (2, 10)),
    "conv1d_stride_dilation_nobias": (
        lambda: seq(nn.Conv1d(3, 2, 3, stride=2, dilation=2, bias=False), nn.Tanh(), nn.Flatten(1),
                    nn.Linear(2 * 5, 3)), (3, 13)),
    "conv2d": (lambda: seq(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(1),
                           nn.Linear(3 * 4 * 4, 3)), (1, 8, 8)),
    "conv2d_stride_rect": (lambda: seq(nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 0)), nn.Tanh(),
                                       nn.Flatten(1), nn.Linear(3 * 4 * 6, 3)), (2, 7, 7)),
    "conv2d_same": (lambda: seq(nn.Conv2d(2, 2, 3, padding="same", dilation=2), nn.Tanh(), nn.Flatten(1),
                                nn.Linear(2 * 6 * 6, 3)), (2, 6, 6)),
    "conv2d_valid_stack": (lambda: seq(nn.Conv2d(1, 4, 3, padding="valid"), nn.ReLU(inplace=True),
                                       nn.Conv2d(4, 4, 3), nn.ReLU(), nn.Flatten(1), nn.Linear(4 * 4 * 4, 3)),
                           (1, 8, 8)),
    "groupnorm": (lambda: seq(nn.Conv2d(2, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.ReLU(), nn.Flatten(1),
                              nn.Linear(4 * 5 * 5, 3)), (2, 5, 5)),
    "groupnorm_2d_input": (lambda: seq(nn.Linear(6, 6), nn.GroupNorm(2, 6), nn.Tanh(), nn.Linear(6, 3)), (6,)),
    "layernorm": (lambda: seq(nn.Linear(6, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 3)), (6,)),
    "layernorm_sequence": (lambda: seq(nn.Linear(4, 5), nn.LayerNorm(5), nn.Tanh(), nn.Flatten(1),
                                       nn.Linear(15, 3)), (3, 4)),
    "layernorm_2d_shape": (lambda: seq(nn.Conv2d(1, 2, 3, padding=1), nn.LayerNorm([4, 4]), nn.Tanh(),
                                       nn.Flatten(1), nn.Linear(32, 3)), (1, 4, 4)),
    "cnn_group": (lambda: CNN(1, 3, image_size=8, channels=(4, 6), hidden=8, kernel_size=3, norm="group",
                              seed=0), (64,)),
}


def case(name, n=7, seed=0):
    torch.manual_seed(seed)
    build, shape = CASES[name]
    model = build().double()
    with torch.no_grad():  # norm layers away from weight 1, bias 0 so that their gradients are generic
        for m in model.modules():
            if isinstance(m, (nn.GroupNorm, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    g = torch.Generator().manual_seed(seed + 1)
    X = torch.randn(n, *shape, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=g)
    return model, X, y


def assert_same(a, b):
    assert set(a[0]) == set(b[0])
    torch.testing.assert_close(a[1], b[1], rtol=1e-9, atol=1e-12)
    for k in a[0]:
        torch.testing.assert_close(a[0][k], b[0][k], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("max_norm", [0.05, 1.0, 1e6])
def test_ghost_matches_torch_func_for_every_layer_type(name, max_norm):
    model, X, y = case(name)
    assert ghost_supported(model)
    ghost = clipped_gradient_sum(model, ce, X, y, max_norm, method="ghost", verify=True)
    assert_same(ghost, clipped_gradient_sum(model, ce, X, y, max_norm, method="vmap"))


@pytest.mark.parametrize("conv", [
    nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 0)),
    nn.Conv2d(2, 2, 3, padding="same", dilation=2), nn.Conv2d(1, 16, 5), nn.Conv1d(3, 2, 3, stride=2, dilation=2)])
def test_per_example_convolution_gradients_unfolded_equal_the_grouped_backward(conv):
    """An accelerator's form (one batched product over unfolded patches) against the CPU's (grouped
    convolution-weight backwards in chunks), on 37 examples: a chunk and a padded one; the patches as
    F.unfold gives them."""
    conv = conv.double()
    g = torch.Generator().manual_seed(0)
    a = torch.randn(37, conv.in_channels, *((11,) if type(conv) is nn.Conv1d else (9, 10)), generator=g,
                    dtype=torch.float64)
    d = torch.randn(conv(a).shape, generator=g, dtype=torch.float64)
    if type(conv) is nn.Conv1d:
        a, d = a.unsqueeze(2), d.unsqueeze(2)
    geometry = rules.conv_geometry(conv)
    torch.testing.assert_close(rules.unfold(a, geometry), F.unfold(a, **geometry), rtol=0, atol=0)
    chunked = rules.conv_per_example(a, d, geometry)
    assert chunked.shape == (37, conv.out_channels, conv.in_channels, *geometry["kernel_size"])
    torch.testing.assert_close(rules.conv_per_example_unfolded(a, d, geometry), chunked, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["conv2d_valid_stack", "groupnorm", "cnn_group", "layernorm_2d_shape"])
def test_per_layer_clipping_on_the_ghost_path(name):
    model, X, y = case(name)
    layers = layer_groups(model)
    assert len(layers) > 1
    bounds = torch.linspace(0.05, 0.5, len(y), dtype=torch.float64)  # per-example bounds too
    ghost = clipped_gradient_sum(model, ce, X, y, bounds, method="ghost", layers=layers)
    assert_same(ghost, clipped_gradient_sum(model, ce, X, y, bounds, method="vmap", layers=layers))
    with pytest.raises(ValueError, match="exactly once"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost", layers=layers[1:])


@pytest.mark.parametrize("name", ["conv1d", "conv2d_same", "groupnorm", "cnn_group"])
def test_removing_one_example_moves_the_ghost_sum_by_at_most_the_bound(name):
    model, X, y = case(name, n=6, seed=3)
    full, _ = clipped_gradient_sum(model, ce, X, y, 0.1, method="ghost")
    for j in range(len(y)):
        keep = [i for i in range(len(y)) if i != j]
        part, _ = clipped_gradient_sum(model, ce, X[keep], y[keep], 0.1, method="ghost")
        gap = torch.sqrt(sum((full[k] - part[k]).pow(2).sum() for k in full))
        assert gap <= 0.1 * (1 + 1e-9), j


def test_mixed_rule_takes_both_branches(monkeypatch):
    """Conv layers of a 28x28 CNN materialise (T² > in·out), the Linear head is a ghost norm (T = 1)."""
    ghost, materialised = [], []
    outer, per_example = ghost_engine._outer_sq_norms, rules.conv_per_example

    def spy_outer(a, d):
        sq, g = outer(a, d)
        (materialised if g is not None else ghost).append(a.shape[1])
        return sq, g

    def spy_conv(a, d, geometry):
        materialised.append(d[0, 0].numel())
        return per_example(a, d, geometry)

    monkeypatch.setattr(ghost_engine, "_outer_sq_norms", spy_outer)
    monkeypatch.setattr(rules, "conv_per_example", spy_conv)
    model = CNN(1, 10, image_size=28, channels=(4, 8), hidden=16, kernel_size=5, seed=0).double()
    X = torch.rand(3, 784, dtype=torch.float64)
    y = torch.tensor([1, 2, 3])
    got = clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost", verify=True)
    assert_same(got, clipped_gradient_sum(model, ce, X, y, 0.5, method="vmap"))
    assert materialised == [784, 196] and ghost == [1, 1]  # conv: materialised, linear layers: ghost
    ghost.clear()
    model = seq(nn.Conv1d(16, 16, 3, padding=1), nn.Flatten(1), nn.Linear(16 * 4, 3)).double()
    X = torch.randn(3, 16, 4, dtype=torch.float64)  # T = 4, T² = 16 < 48·16: ghost for the conv
    got = clipped_gradient_sum(model, ce, X, y % 3, 0.5, method="ghost", verify=True)
    assert_same(got, clipped_gradient_sum(model, ce, X, y % 3, 0.5, method="vmap"))
    assert ghost == [4, 1]


def test_exactness_check_runs_once_per_call_structure(monkeypatch):
    calls = []
    original = ghost_engine._verify
    monkeypatch.setattr(ghost_engine, "_verify", lambda *a: calls.append(1) or original(*a))
    model, X, y = case("cnn_group")
    for _ in range(3):
        clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost")
    assert len(calls) == 1
    clipped_gradient_sum(model, ce, X[:4], y[:4], 0.5, method="ghost")  # a smaller batch: same structure
    assert len(calls) == 1
    model.eval()  # a new structure (mode), a new loss, or verify=True: checked again
    clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost")
    clipped_gradient_sum(model, lambda o, t: 2 * ce(o, t), X, y, 0.5, method="ghost")
    clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost", verify=True)
    assert len(calls) == 4
    model.classifier[-1].weight.requires_grad_(False)  # another trainable set
    clipped_gradient_sum(model, ce, X, y, 0.5, method="ghost")
    assert len(calls) == 5


class MixesExamples(nn.Module):
    """A conv net that subtracts the batch's mean image: the loss of one example reads the others."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.out = nn.Linear(2 * 4 * 4, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.conv(x - x.mean(0))).flatten(1))


def test_a_refused_model_is_remembered_and_auto_uses_vmap(monkeypatch):
    torch.manual_seed(0)
    model = MixesExamples().double()
    X, y = torch.randn(5, 1, 6, 6, dtype=torch.float64), torch.randint(0, 3, (5,))
    with pytest.raises(GhostUnsupportedError, match="mixes the examples"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")
    with pytest.raises(GhostUnsupportedError, match="mixes the examples"):  # remembered, not re-run
        monkeypatch.setattr(ghost_engine, "_verify", lambda *a: pytest.fail("checked twice"))
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")
    auto = clipped_gradient_sum(model, ce, X, y, 1.0, method="auto")
    assert_same(auto, clipped_gradient_sum(model, ce, X, y, 1.0, method="vmap"))


@pytest.mark.parametrize("layer", [
    nn.Conv2d(1, 2, 3, groups=1, padding_mode="circular", padding=1),
    nn.Conv2d(2, 2, 3, groups=2, padding=1),
    nn.Conv2d(1, 2, 2, padding="same"),
    nn.Conv3d(1, 2, 1),
])
def test_unsupported_convolutions_fall_back_to_vmap(layer):
    torch.manual_seed(0)
    c_in = layer.in_channels
    shape = (c_in, 4, 4, 4) if isinstance(layer, nn.Conv3d) else (c_in, 4, 4)
    model = seq(layer, nn.Flatten(1), nn.LazyLinear(3)).double()
    X, y = torch.randn(4, *shape, dtype=torch.float64), torch.randint(0, 3, (4,))
    model(X)  # materialise the lazy layer
    assert not ghost_supported(model)
    with pytest.raises(GhostUnsupportedError):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")
    auto = clipped_gradient_sum(model, ce, X, y, 1.0, method="auto")
    assert_same(auto, clipped_gradient_sum(model, ce, X, y, 1.0, method="vmap"))


def test_float32_cnn_agrees_within_single_precision():
    model = CNN(1, 10, image_size=12, channels=(3, 4), hidden=16, kernel_size=3, norm="group", seed=1)
    X = torch.rand(16, 144)
    y = torch.randint(0, 10, (16,), generator=torch.Generator().manual_seed(0))
    ghost = clipped_gradient_sum(model, ce, X, y, 0.3, method="ghost", verify=True)
    vmap = clipped_gradient_sum(model, ce, X, y, 0.3, method="vmap")
    torch.testing.assert_close(ghost[1], vmap[1], rtol=1e-4, atol=1e-6)
    for k in vmap[0]:
        torch.testing.assert_close(ghost[0][k], vmap[0][k], rtol=1e-4, atol=1e-5)


def test_dp_fermi_module_loss_takes_the_ghost_path(monkeypatch):
    """DP-FERMI's per-sample loss (cross-entropy weight, ERMI logit weights h, λ) on a CNN: ghost, exact."""
    from dpfair.algorithms.dpfermi.models import fermi_loss

    monkeypatch.setattr(methods, "vmap_gradients", lambda *a, **k: pytest.fail("fell back to vmap"))
    model, X, y = case("cnn_group", n=6)
    g = torch.Generator().manual_seed(5)
    h = torch.randn(6, 3, generator=g, dtype=torch.float64)
    target = (y, h, torch.zeros(6, dtype=torch.float64), torch.full((6,), 2.0, dtype=torch.float64))
    ghost = clipped_gradient_sum(model, fermi_loss, X, target, 0.2, method="auto", verify=True)
    monkeypatch.undo()
    assert_same(ghost, clipped_gradient_sum(model, fermi_loss, X, target, 0.2, method="vmap"))
