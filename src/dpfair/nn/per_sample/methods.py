"""The clipping methods and the entry point that runs one: :func:`clipped_gradient_sum`.

Contract: whichever method runs, the result is ``sum_i c_i g_i`` with ``c_i = min(1, C_i / ||g_i||)``
(:mod:`dpfair.nn.per_sample.clipping`), so each example adds at most its bound ``C_i``; ``"ghost"`` runs only where
it is exact (:mod:`dpfair.nn.per_sample.ghost`), ``"vmap"`` everywhere the batch-independence check admits
(:mod:`dpfair.nn.per_sample.vmap`).
"""

from __future__ import annotations

import torch
from torch import nn

from dpfair.nn.per_sample.clipping import check_max_norm, clipped_sum
from dpfair.nn.per_sample.ghost import ghost_clipped_sum
from dpfair.nn.per_sample.ghost_rules import GhostUnsupportedError
from dpfair.nn.per_sample.model import LossFn, batch_rows, check_batch_independence, split_params
from dpfair.nn.per_sample.vmap import vmap_gradients

__all__ = ["CLIP_METHODS", "clipped_gradient_sum"]

#: The clipping methods: ``"vmap"`` (every per-example gradient materialised by ``torch.func``; any module),
#: ``"ghost"`` (ghost norms from one forward and one backward pass, where exact) and ``"auto"`` (``"ghost"`` when
#: it passes both its checks, else ``"vmap"``).
CLIP_METHODS = ("auto", "vmap", "ghost")


def clipped_gradient_sum(
    model: nn.Module,
    loss_fn: LossFn,
    X: torch.Tensor,
    y=None,
    max_norm: float | torch.Tensor = 1.0,
    method: str = "auto",
    *,
    chunk_size: int | None = None,
    layers: list[list[str]] | None = None,
    verify: bool = False,
    valid: int | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum of the per-example gradients, example ``i`` clipped to L2 norm ``max_norm`` (or ``max_norm[i]``).

    ``max_norm`` is one positive bound or a tensor of shape ``(B,)`` with one
    positive bound per example.  Returns ``(summed, norms)``: ``summed`` maps
    every trainable parameter name to a tensor of the parameter's shape,
    ``norms`` holds the unclipped per-example gradient norms ``(B,)``
    (detached).  ``method`` is ``"auto"``, ``"vmap"`` or ``"ghost"`` (see
    :data:`CLIP_METHODS`); ``"ghost"`` raises :class:`GhostUnsupportedError` where
    it would not be exact.  Models refused by :func:`check_batch_independence`
    raise ``ValueError`` for every method.  An empty batch (``B == 0``, as
    Poisson sampling may draw) returns zeros and an empty ``norms``.  Does not
    touch ``p.grad``.  ``layers``: per-layer clipping (see :func:`clipped_sum`), on either path.
    ``verify``: run the ghost path's exactness check on every call, not only on the first call of
    each call structure of the model (:mod:`dpfair.nn.per_sample.ghost`).
    ``valid``: only the first ``valid`` examples count; the rest are padding (a batch padded to a size seen
    before), whose clipped gradients are exactly 0 (their norms are still returned).
    """
    if method not in CLIP_METHODS:
        raise ValueError(f"method must be one of {list(CLIP_METHODS)}, got {method!r}")
    n = batch_rows(X, y)
    check_max_norm(max_norm, n)
    check_batch_independence(model)
    if n == 0:
        params, _ = split_params(model, None)
        p0 = next(iter(params.values()))
        zeros = {k: torch.zeros_like(p) for k, p in params.items()}
        return zeros, torch.zeros(0, dtype=p0.dtype, device=p0.device)
    if layers is not None and len(layers) == 1:
        layers = None  # one layer: per-layer clipping is flat clipping
    if method != "vmap":
        try:
            with torch.enable_grad():
                return ghost_clipped_sum(model, loss_fn, X, y, max_norm, layers, verify, valid)
        except GhostUnsupportedError as err:
            if method == "ghost":
                raise GhostUnsupportedError(
                    f"ghost norms would not be exact for this model: {err}; use method='vmap' "
                    "(or 'auto', which falls back to it)"
                ) from err
    grads = vmap_gradients(model, loss_fn, X, y, None, chunk_size)
    summed, norms = clipped_sum(grads, max_norm, layers, valid)
    return summed, norms.detach()
