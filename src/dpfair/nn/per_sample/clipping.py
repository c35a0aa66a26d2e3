"""Clipping arithmetic on per-example gradients: the bounds, the coefficients, the norms and the clipped sum.

Contract: the gradient ``g_i`` of example ``i`` is scaled by ``c_i = min(1, C_i / ||g_i||)`` (1 where
``g_i = 0``), so it adds at most ``C_i`` (L2) to ``sum_i c_i g_i``, and removing example ``i`` from the batch
changes that sum by at most ``C_i``. With per-layer clipping (McMahan et al. 2018) each of ``m`` layers' parts of
``g_i`` is clipped to ``C_i / √m``, so the whole ``g_i`` still adds at most ``C_i``. Padding rows (from index
``valid`` on) get the coefficient 0 exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

__all__ = ["clip_coefficients", "clipped_sum", "per_sample_norms"]


def check_max_norm(max_norm, n: int | None = None) -> float | torch.Tensor:
    """A clipping bound: a positive finite number, or a 1-D tensor of ``n`` of them (``ValueError`` otherwise)."""
    if isinstance(max_norm, torch.Tensor) and max_norm.dim() > 0:
        if max_norm.dim() != 1 or (n is not None and max_norm.shape[0] != n):
            raise ValueError(
                "max_norm must be a positive number or a 1-D tensor with one bound per example "
                f"({n}), got a tensor of shape {tuple(max_norm.shape)}"
            )
        if max_norm.dtype == torch.bool or max_norm.is_complex():
            raise ValueError(f"max_norm must hold real numbers, got dtype {max_norm.dtype}")
        bounds = max_norm.detach()
        bad = ~(torch.isfinite(bounds) & (bounds > 0))
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"max_norm must be positive and finite for every example, got {bounds[i].item()!r} at index {i}"
            )
        return bounds
    try:
        c = float(max_norm)
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"max_norm must be a positive number, got {max_norm!r}") from None
    if not (c > 0 and c < float("inf")):
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm!r}")
    return c


def per_sample_norms(grads: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Global L2 norm (over all parameters) of each example's gradient, shape ``(B,)``."""
    if not grads:
        raise ValueError("grads is empty; pass the output of per_sample_gradients")
    sq = None
    for g in grads.values():
        s = g.flatten(1).pow(2).sum(1)  # flatten, not reshape(B, -1): B = 0 (an empty batch) is allowed
        sq = s if sq is None else sq + s
    return sq.sqrt()


def clip_coefficients(norms: torch.Tensor, max_norm: float | torch.Tensor) -> torch.Tensor:
    """``min(1, max_norm / norm)`` per example; 1 where the norm is 0.

    ``max_norm`` is one positive bound or a tensor of shape ``(B,)`` with one
    bound per example (``norms`` has shape ``(B,)``).
    """
    c = check_max_norm(max_norm, norms.shape[0] if norms.dim() == 1 else None)
    dtype = norms.dtype if norms.is_floating_point() else torch.get_default_dtype()
    if isinstance(c, torch.Tensor):
        c = c.to(device=norms.device, dtype=dtype)
    tiny = torch.finfo(dtype).tiny
    return (c / norms.to(dtype).clamp_min(tiny)).clamp(max=1.0)


def without_padding(coef: torch.Tensor, valid: int | None) -> torch.Tensor:
    """The clip coefficients with those of the padding rows (from index ``valid`` on) set to exactly 0; no
    synchronisation with a device."""
    if valid is None:
        return coef
    return coef * (torch.arange(coef.shape[0], device=coef.device) < valid).to(coef.dtype)


def check_layers(layers: list[list[str]], names) -> None:
    """``ValueError`` unless ``layers`` lists every name of ``names`` exactly once."""
    if sorted(n for layer in layers for n in layer) != sorted(names):
        raise ValueError("layers must list every trainable parameter exactly once")


def clipped_sum(
    grads: Mapping[str, torch.Tensor], max_norm: float | torch.Tensor, layers: list[list[str]] | None = None,
    valid: int | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum over the batch of the per-example gradients, example ``i`` clipped to L2 norm ``max_norm[i]``.

    ``max_norm`` is one bound or a tensor ``(B,)`` of per-example bounds.
    ``layers`` (lists of parameter names, e.g. :func:`~dpfair.nn.per_sample.model.layer_groups`): clip each
    layer's part of ``g_i`` to ``max_norm[i] / √m`` for ``m`` layers (per-layer
    clipping, McMahan et al. 2018), so the whole ``g_i`` still adds at most
    ``max_norm[i]``. Returns ``(summed, norms)``: ``summed[name]`` has the
    parameter's shape, ``norms`` are the unclipped per-example norms ``(B,)``. ``valid``: see
    :func:`~dpfair.nn.per_sample.methods.clipped_gradient_sum`.
    """
    norms = per_sample_norms(grads)
    if layers is None:
        coef = {k: without_padding(clip_coefficients(norms, max_norm), valid) for k in grads}
    else:
        check_layers(layers, grads)
        scale = 1.0 / math.sqrt(len(layers))
        coef = {}
        for layer in layers:
            c = clip_coefficients(per_sample_norms({k: grads[k] for k in layer}), max_norm * scale)
            coef.update({k: without_padding(c, valid) for k in layer})
    summed = {k: torch.tensordot(coef[k].to(g.dtype), g, dims=([0], [0])) for k, g in grads.items()}
    return summed, norms
