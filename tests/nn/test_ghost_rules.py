"""The registry of ghost-norm rules (``dpfair.nn.per_sample.ghost_rules``): what dpfair registers, lookup by exact
type, a user's rule for a new layer (exact against torch.func), and a wrong rule caught by the exactness check."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfair.nn import GhostUnsupportedError, clipped_gradient_sum, ghost_layers, ghost_rule, ghost_supported
from dpfair.nn.per_sample import ghost_rules as rules


def ce(logits, y):
    return F.cross_entropy(logits, y)


@pytest.fixture
def registry(monkeypatch):
    """A copy of the registry for the test: rules registered in it are gone afterwards."""
    monkeypatch.setattr(rules, "_RULES", dict(rules._RULES))


class Scale(nn.Module):
    """``x ⊙ weight + bias`` on ``(B, d)`` input: no rule of dpfair covers it."""

    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return x * self.weight + self.bias


def scale_terms(m, a, d, n):
    g = a * d
    return ("dense", g, lambda: g.abs().sum(1)), ("dense", d, lambda: d.abs().sum(1))


def data(n=9, d=4):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, d, generator=g, dtype=torch.float64), torch.randint(0, 3, (n,), generator=g)


def test_dpfair_registers_its_layers_in_order():
    assert ghost_layers() == (nn.Linear, nn.Conv1d, nn.Conv2d, nn.GroupNorm, nn.LayerNorm)
    assert rules.GHOST_LAYERS == ghost_layers()
    assert rules.ghost_rule_for(nn.Linear(2, 2)).terms is rules.linear_terms
    assert rules.ghost_rule_for(nn.Conv2d(1, 1, 3)).check is rules.conv_padding
    assert rules.ghost_rule_for(nn.ReLU()) is None


def test_lookup_is_by_exact_type():
    class MyLinear(nn.Linear):
        pass

    model = nn.Sequential(MyLinear(4, 3)).double()
    assert rules.ghost_rule_for(model[0]) is None and not ghost_supported(model)
    X, y = data()
    with pytest.raises(GhostUnsupportedError, match=r"\(MyLinear\) is not the weight/bias of a plain Linear, "
                                                    r"Conv1d, Conv2d, GroupNorm, LayerNorm"):
        clipped_gradient_sum(model, ce, X, y, 1.0, method="ghost")


def test_a_registered_rule_takes_the_ghost_path_and_matches_vmap(registry):
    model = nn.Sequential(nn.Linear(4, 4), Scale(4), nn.Tanh(), nn.Linear(4, 3)).double()
    assert not ghost_supported(model)
    assert ghost_rule(Scale)(scale_terms) is scale_terms
    assert ghost_layers()[-1] is Scale and ghost_supported(model)
    X, y = data()
    bounds = torch.linspace(0.05, 1.0, 9, dtype=torch.float64)
    summed, norms = clipped_gradient_sum(model, ce, X, y, bounds, method="ghost", verify=True)
    ref_summed, ref_norms = clipped_gradient_sum(model, ce, X, y, bounds, method="vmap")
    torch.testing.assert_close(norms, ref_norms, rtol=1e-10, atol=1e-12)
    for k in ref_summed:
        torch.testing.assert_close(summed[k], ref_summed[k], rtol=1e-10, atol=1e-12)


def test_a_wrong_rule_is_caught_by_the_exactness_check(registry):
    @ghost_rule(Scale)
    def doubled_bias(m, a, d, n):
        weight, (kind, b, scale) = scale_terms(m, a, d, n)
        return weight, (kind, 2 * b, scale)

    model = nn.Sequential(Scale(4), nn.Linear(4, 3)).double()
    X, y = data()
    with pytest.raises(GhostUnsupportedError, match="'0.bias' differs from the one rebuilt"):
        clipped_gradient_sum(model, ce, X, y, 0.1, method="ghost")
    auto = clipped_gradient_sum(model, ce, X, y, 0.1, method="auto")  # falls back to vmap
    vmap = clipped_gradient_sum(model, ce, X, y, 0.1, method="vmap")
    for k in vmap[0]:
        torch.testing.assert_close(auto[0][k], vmap[0][k], rtol=0, atol=0)


def test_registration_is_checked(registry):
    with pytest.raises(ValueError, match="Linear already has a ghost rule"):
        ghost_rule(nn.Linear)(scale_terms)
    with pytest.raises(ValueError, match="torch.nn.Module subclasses"):
        ghost_rule()
    with pytest.raises(ValueError, match="torch.nn.Module subclasses"):
        ghost_rule(int)
    assert ghost_layers() == rules.GHOST_LAYERS  # nothing registered by the refusals
