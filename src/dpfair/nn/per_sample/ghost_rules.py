"""The ghost path's per-layer rules, in a registry keyed by the exact module type (``@ghost_rule(nn.Linear)``).

A rule says what one recorded call of its layer (input ``a``, gradient ``d`` of the output) adds to each
example's gradient of the layer's ``weight`` and ``bias``; :mod:`dpfair.nn.per_sample.ghost` turns those terms
into per-example norms and the clipped sum. dpfair registers ``nn.Linear``, ``nn.Conv1d``/``nn.Conv2d`` (zero
padding, ``groups=1``), ``nn.GroupNorm`` and ``nn.LayerNorm``. Lookup is by exact type: a subclass has no rule
until one is registered for it (its ``forward`` may differ), and a model with a trainable parameter outside the
registered layers is refused (:class:`GhostUnsupportedError`; ``method="auto"`` then takes the vmap path). A rule,
dpfair's or a user's, is trusted only after the exactness check of the ghost path has compared what it rebuilds
with autograd's gradient. The rules of Linear and convolutions follow Goodfellow (2015), Li et al. (2022) and Bu et
al. (2022, mixed ghost clipping); the derivation is in the guide (:ref:`ghost-norms`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["GhostRule", "GhostUnsupportedError", "ghost_layers", "ghost_rule", "ghost_rule_for"]


class GhostUnsupportedError(ValueError):
    """The model cannot use the ghost-norm path (``method="auto"`` then falls back to vmap)."""


#: A rule: ``rule(module, a, d, n) -> (weight term, bias term)`` (see :func:`ghost_rule`).
RuleFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, int], tuple]


@dataclass(frozen=True)
class GhostRule:
    """A registered rule: ``terms(module, a, d, n)`` gives ``(weight term, bias term)``; ``check(module)``, if
    given, raises :class:`GhostUnsupportedError` before the forward pass for a configuration the rule cannot
    read (a convolution's padding mode, its groups)."""

    terms: RuleFn
    check: Callable[[nn.Module], object] | None = None


_RULES: dict[type[nn.Module], GhostRule] = {}


def ghost_rule(*types: type[nn.Module], check: Callable[[nn.Module], object] | None = None):
    """Register the decorated function as the ghost-norm rule of each of the exact module ``types``.

    The function is called as ``rule(module, a, d, n)`` for every call of a ``module`` of one of those types that
    took part in the forward pass with a trainable ``weight`` or ``bias``: ``a`` is the call's input (detached),
    ``d`` the gradient of its output (leading dimension the batch's ``n`` examples). It returns
    ``(weight term, bias term)``, each either

    - ``("outer", A, D)`` with ``A (B, T, in)`` and ``D (B, T, out)``: the example's gradient is ``D_iᵀ A_i``
      (positions ``T``; the parameter seen as ``(out, in)``); its norm then costs the cheaper of the ghost norm
      and the materialised gradient; or
    - ``("dense", G, M)``: ``G (B, *parameter shape)``, the per-example gradients themselves, and ``M()`` the sum
      of the magnitudes of the terms summed into each ``(B,)`` (the exactness check's scale; called only when
      checking).

    The layer's trainable parameters must be named ``weight`` and ``bias``. ``check``: see :class:`GhostRule`.
    Registering a type twice raises ``ValueError``. Returns the function unchanged.
    """
    if not types or not all(isinstance(t, type) and issubclass(t, nn.Module) for t in types):
        raise ValueError(f"ghost_rule takes one or more torch.nn.Module subclasses, got {types!r}")
    taken = [t.__name__ for t in types if t in _RULES]
    if taken:
        raise ValueError(f"{', '.join(taken)} already {'has' if len(taken) == 1 else 'have'} a ghost rule")

    def register(terms: RuleFn) -> RuleFn:
        for t in types:
            _RULES[t] = GhostRule(terms, check)
        return terms

    return register


def ghost_layers() -> tuple[type[nn.Module], ...]:
    """The module types that have a ghost rule, in the order they were registered."""
    return tuple(_RULES)


def ghost_rule_for(module: nn.Module) -> GhostRule | None:
    """The rule of ``type(module)`` exactly (no lookup through base classes), or ``None``."""
    return _RULES.get(type(module))


# --------------------------------------------------------------------------- convolutions

#: examples per grouped convolution in :func:`conv_per_example`: one fixed shape per layer, so that the
#: convolution library builds its kernel once (a new group count for every Poisson batch size cost up to
#: a second each)
CONV_CHUNK = 32


def conv_padding(m: nn.Module) -> tuple[int, ...]:
    """The symmetric zero padding of a convolution (``"same"`` resolved); raise where unfolding cannot copy it."""
    if m.padding_mode != "zeros":
        raise GhostUnsupportedError(f"{type(m).__name__} with padding_mode={m.padding_mode!r} (only zero padding)")
    if m.groups != 1:
        raise GhostUnsupportedError(f"{type(m).__name__} with groups={m.groups} (only groups=1)")
    if m.padding == "valid":
        return (0,) * len(m.kernel_size)
    if m.padding == "same":
        total = [d * (k - 1) for d, k in zip(m.dilation, m.kernel_size)]
        if any(t % 2 for t in total):
            raise GhostUnsupportedError(f"{type(m).__name__} with padding='same' and an even kernel "
                                        "(asymmetric padding)")
        return tuple(t // 2 for t in total)
    return tuple(m.padding)


def conv_geometry(m: nn.Module) -> dict:
    """A Conv1d/Conv2d's kernel, stride, zero padding and dilation as a 2-D convolution's (Conv1d: height 1)."""
    pad = conv_padding(m)
    if len(m.kernel_size) == 1:
        return {"kernel_size": (1, *m.kernel_size), "stride": (1, *m.stride), "padding": (0, *pad),
                "dilation": (1, *m.dilation)}
    return {"kernel_size": tuple(m.kernel_size), "stride": tuple(m.stride), "padding": pad,
            "dilation": tuple(m.dilation)}


def conv_per_example(a: torch.Tensor, d: torch.Tensor, geometry: dict) -> torch.Tensor:
    """Every example's weight gradient of a 2-D convolution, ``(B, C_out, C_in, *kernel)``.

    On the CPU: convolution-weight backwards with :data:`CONV_CHUNK` examples as groups (input
    ``(1, chunk·C_in, …)``, output gradient ``(1, chunk·C_out, …)``), the last chunk padded with zero
    examples. On an accelerator, where a loop of small kernels costs more than memory:
    :func:`conv_per_example_unfolded`.
    """
    if a.device.type != "cpu":
        return conv_per_example_unfolded(a, d, geometry)
    n, c_in, c_out = a.shape[0], a.shape[1], d.shape[1]
    pad = -n % CONV_CHUNK
    if pad:
        a = torch.cat([a, a.new_zeros(pad, *a.shape[1:])])
        d = torch.cat([d, d.new_zeros(pad, *d.shape[1:])])
    size = (CONV_CHUNK * c_out, c_in, *geometry["kernel_size"])
    chunks = [torch.nn.grad.conv2d_weight(
        a[i:i + CONV_CHUNK].reshape(1, CONV_CHUNK * c_in, *a.shape[2:]), size,
        d[i:i + CONV_CHUNK].reshape(1, CONV_CHUNK * c_out, *d.shape[2:]), stride=geometry["stride"],
        padding=geometry["padding"], dilation=geometry["dilation"], groups=CONV_CHUNK)
        for i in range(0, n + pad, CONV_CHUNK)]
    return torch.cat(chunks).view(n + pad, c_out, c_in, *geometry["kernel_size"])[:n]


def conv_per_example_unfolded(a: torch.Tensor, d: torch.Tensor, geometry: dict) -> torch.Tensor:
    """:func:`conv_per_example` as one batched product: ``G_i = D_i A_iᵀ`` with ``A_i (C_in·k, T)`` the unfolded
    input patches and ``D_i (C_out, T)`` the output gradient (``B·C_in·k·T`` values held at once)."""
    n, c_in, c_out = a.shape[0], a.shape[1], d.shape[1]
    patches = unfold(a, geometry)  # (B, C_in·k, T)
    g = torch.bmm(d.reshape(n, c_out, -1), patches.transpose(1, 2))
    return g.view(n, c_out, c_in, *geometry["kernel_size"])


def unfold(a: torch.Tensor, geometry: dict) -> torch.Tensor:
    """``F.unfold(a, **geometry)``, the input patches ``(B, C·kh·kw, T)`` of a 2-D convolution, as one strided copy
    of the zero-padded input (``F.unfold`` runs one im2col kernel per example on CUDA: 4,096 launches at batch
    4,096)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (geometry[k] for k in ("kernel_size", "stride", "padding", "dilation"))
    a = F.pad(a, (pw, pw, ph, ph)) if ph or pw else a.contiguous()
    B, C, H, W = a.shape
    oh, ow = (H - dh * (kh - 1) - 1) // sh + 1, (W - dw * (kw - 1) - 1) // sw + 1
    sB, sC, sH, sW = a.stride()
    view = a.as_strided((B, C, kh, kw, oh, ow), (sB, sC, sH * dh, sW * dw, sH * sh, sW * sw))
    return view.reshape(B, C * kh * kw, oh * ow)


def patch_norms(a: torch.Tensor, geometry: dict) -> torch.Tensor:
    """``||a_{i,t}||`` of every unfolded input patch of a 2-D convolution, ``(B, T)``."""
    ones = a.new_ones(1, 1, *geometry["kernel_size"])
    sq = F.conv2d(a.pow(2).sum(1, keepdim=True), ones, stride=geometry["stride"], padding=geometry["padding"],
                  dilation=geometry["dilation"])
    return sq.clamp_min(0).sqrt().flatten(1)


# --------------------------------------------------------------------------- the rules dpfair ships


@ghost_rule(nn.Linear)
def linear_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int):
    """A Linear: the weight's outer product over its extra leading dimensions (positions ``T``); the bias
    ``Σ_t d_{i,t}``."""
    D = d.reshape(n, -1, d.shape[-1])
    return ("outer", a.reshape(n, -1, a.shape[-1]), D), ("dense", D.sum(1), lambda: D.abs().sum((1, 2)))


def _conv2d_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int, geometry: dict):
    """A 2-D convolution's terms: the weight seen as ``(out, in·k)`` over the output positions, materialised where
    that costs less than the ghost norm (``T² > in·out``, Bu et al. 2022); the bias ``Σ_t d_{i,t}``."""
    D = d.reshape(n, d.shape[1], -1)
    bias = ("dense", D.sum(2), lambda: D.abs().sum((1, 2)))
    positions, fan_in = D.shape[2], m.weight[0].numel()
    if positions * positions > fan_in * D.shape[1]:
        g = conv_per_example(a, d, geometry).view(n, *m.weight.shape)
        return ("dense", g, lambda: (D.norm(dim=1) * patch_norms(a, geometry)).sum(1)), bias
    patches = unfold(a, geometry)
    return ("outer", patches.transpose(1, 2), D.transpose(1, 2)), bias


@ghost_rule(nn.Conv1d, check=conv_padding)
def conv1d_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int):
    """A Conv1d, as a 2-D convolution of height 1."""
    geometry = conv_geometry(m)
    return _conv2d_terms(m, a.unsqueeze(2), d.unsqueeze(2), n, geometry)


@ghost_rule(nn.Conv2d, check=conv_padding)
def conv2d_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int):
    """A Conv2d (zero padding, ``groups=1``)."""
    return _conv2d_terms(m, a, d, n, conv_geometry(m))


def _norm_terms(a: torch.Tensor, d: torch.Tensor, x_hat: torch.Tensor, dims: tuple[int, ...]):
    """A normalisation layer's terms, always materialised (a few values per example): the weight
    ``Σ_positions x̂ ⊙ d``, the bias ``Σ_positions d``."""
    terms = x_hat * d
    every = tuple(range(1, a.dim()))
    # (a sum over an empty tuple of dims would sum over all of them)
    return (("dense", terms.sum(dims) if dims else terms, lambda: terms.abs().sum(every)),
            ("dense", d.sum(dims) if dims else d, lambda: d.abs().sum(every)))


@ghost_rule(nn.GroupNorm)
def group_norm_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int):
    """A GroupNorm: per channel, summed over the positions after it (``x̂`` recomputed from the input)."""
    return _norm_terms(a, d, F.group_norm(a, m.num_groups, eps=m.eps), tuple(range(2, a.dim())))


@ghost_rule(nn.LayerNorm)
def layer_norm_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int):
    """A LayerNorm: over its trailing ``normalized_shape``, summed over the positions before it."""
    x_hat = F.layer_norm(a, m.normalized_shape, eps=m.eps)
    return _norm_terms(a, d, x_hat, tuple(range(1, a.dim() - len(m.normalized_shape))))


#: The module types dpfair ships ghost rules for (:func:`ghost_layers` lists those registered now, a user's too).
GHOST_LAYERS = ghost_layers()
