"""The ghost path's exactness check tests structure in IEEE float32, whatever the float32 precision settings.

On GPUs from Ampere on, cuDNN runs float32 convolutions in TF32 by default; its rounding made the check refuse a
ResNet-18 that it accepts in IEEE float32. The check's passes now run under
:func:`dpfair.nn.per_sample.ieee_float32`. On a CPU the TF32 settings change nothing numerically, so what is
tested here is what a CPU can show: a residual convolutional network with GroupNorm and in-place ReLUs takes the
ghost path and matches the vmap reference; during the check (and only then) every setting reads IEEE; the
settings, legacy and per-operation, are the caller's again afterwards, also when the check fails.
"""

import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from dpfair.nn import GhostUnsupportedError, clipped_gradient_sum
from dpfair.nn.per_sample import ieee_float32

#: the per-operation settings the check pins (torch.backends.<module>.<op>.fp32_precision)
PINNED = [("cudnn", "conv"), ("cudnn", "rnn"), ("cuda", "matmul"), ("mkldnn", "conv"), ("mkldnn", "matmul"),
          ("mkldnn", "rnn")]


def settings() -> dict:
    return {f"{m}.{op}": getattr(getattr(torch.backends, m), op).fp32_precision for m, op in PINNED}


def legacy() -> tuple:
    return torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision()


@pytest.fixture
def caller_settings():
    """Non-default settings a caller might hold (legacy API: TF32 matmuls asked for, cuDNN TF32 off), put back
    after the test whatever happens."""
    before_legacy = legacy()
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("high")
    yield legacy(), settings()
    torch.backends.cudnn.allow_tf32 = before_legacy[0]
    torch.set_float32_matmul_precision(before_legacy[2])


class Block(nn.Module):
    def __init__(self, c, seen):
        super().__init__()
        self.conv1, self.gn1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.GroupNorm(2, c)
        self.conv2, self.gn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.GroupNorm(2, c)
        self.relu = nn.ReLU(inplace=True)
        self.seen = seen

    def forward(self, x):
        identity = x
        out = self.relu(self.gn1(self.conv1(x)))
        if out.requires_grad:  # the precision settings in force when the backward passes reach this block
            out.register_hook(lambda g: self.seen.append(settings()["cudnn.conv"]))
        out = self.gn2(self.conv2(out))
        out += identity  # in place, as torchvision's BasicBlock
        return self.relu(out)


class ResNetLike(nn.Module):
    def __init__(self, seen=None):
        super().__init__()
        self.seen = [] if seen is None else seen
        self.stem, self.gn = nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.GroupNorm(2, 4)
        self.relu = nn.ReLU(inplace=True)
        self.blocks = nn.Sequential(Block(4, self.seen), Block(4, self.seen))
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        x = self.blocks(self.relu(self.gn(self.stem(x))))
        return self.head(x.mean((2, 3)))


class DirectUse(ResNetLike):
    """The head's weight also used outside its forward: the check must refuse it."""

    def forward(self, x):
        h = self.blocks(self.relu(self.gn(self.stem(x)))).mean((2, 3))
        return self.head(h) + F.linear(h, self.head.weight)


def loss(o, t):
    return F.cross_entropy(o, t, reduction="sum")


def batch(n=6, dtype=torch.float32):
    g = torch.Generator().manual_seed(3)
    return torch.randn(n, 1, 6, 6, generator=g, dtype=dtype), torch.randint(0, 3, (n,), generator=g)


def test_residual_groupnorm_net_with_inplace_relus_takes_the_ghost_path_and_matches_vmap():
    torch.manual_seed(0)
    model = ResNetLike().double()
    X, y = batch(dtype=torch.float64)
    ghost, g_norms = clipped_gradient_sum(model, loss, X, y, 0.5, method="ghost", verify=True)
    ref, r_norms = clipped_gradient_sum(model, loss, X, y, 0.5, method="vmap")
    torch.testing.assert_close(g_norms, r_norms, rtol=1e-10, atol=1e-12)
    for k in ref:
        torch.testing.assert_close(ghost[k], ref[k], rtol=1e-10, atol=1e-12)


def test_check_runs_in_ieee_float32_and_gives_the_callers_settings_back(caller_settings):
    before_legacy, before = caller_settings
    assert before["cuda.matmul"] == "tf32" and before["cudnn.conv"] != "ieee"  # the fixture took effect
    torch.manual_seed(0)
    model = ResNetLike()
    X, y = batch()
    clipped_gradient_sum(model, loss, X, y, 1.0, method="ghost")  # first batch of its structure: checked
    checked = list(model.seen)
    # backward 1 and the check's backward 2 each pass both blocks, all under IEEE
    assert checked == ["ieee"] * 4
    assert settings() == before and legacy() == before_legacy
    model.seen.clear()
    clipped_gradient_sum(model, loss, X, y, 1.0, method="ghost")  # verified structure: no check, caller's settings
    assert model.seen == [before["cudnn.conv"]] * 2
    assert settings() == before and legacy() == before_legacy


def test_settings_come_back_when_the_check_refuses_the_model(caller_settings):
    before_legacy, before = caller_settings
    torch.manual_seed(0)
    model = DirectUse()
    X, y = batch()
    with pytest.raises(GhostUnsupportedError, match="'head.weight'"):
        clipped_gradient_sum(model, loss, X, y, 1.0, method="ghost")
    assert model.seen == ["ieee"] * 4
    assert settings() == before and legacy() == before_legacy
    # auto falls back to vmap, under the caller's settings
    clipped_gradient_sum(model, loss, X, y, 1.0, method="auto")
    assert settings() == before and legacy() == before_legacy


def test_nested_and_concurrent_blocks_restore_once_at_the_end(caller_settings):
    _, before = caller_settings
    inside, release = threading.Event(), threading.Event()

    def other():
        with ieee_float32():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with ieee_float32():
        t.start()
        assert inside.wait(10)
        with ieee_float32():
            assert set(settings().values()) == {"ieee"}
        assert set(settings().values()) == {"ieee"}  # the inner block left, the outer still holds
    assert set(settings().values()) == {"ieee"}  # the other thread's block still holds
    release.set()
    t.join(10)
    assert settings() == before
    with pytest.raises(RuntimeError, match="boom"), ieee_float32():
        raise RuntimeError("boom")
    assert settings() == before
