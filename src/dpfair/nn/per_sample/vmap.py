"""The ``"vmap"`` path: every per-example gradient materialised with ``torch.func.vmap(grad(...))``.

Contract: every example is run alone, as a batch of one, through ``functional_call(model, ...)``, so examples
cannot interact; any module the batch-independence check admits works (shared parameters and submodules
included). Memory ``B * n_params``; dropout draws one mask per example. What ``torch.func`` cannot batch (a layer
updating a buffer from the batch in place, data-dependent Python control flow) becomes a ``ValueError`` naming
the likely cause.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpfair.nn.per_sample.model import LossFn, batch_rows, check_batch_independence, one_example_view, split_params

__all__ = ["per_sample_gradients"]

_BATCHNORM_FIX = (
    "replace it with GroupNorm or LayerNorm (dpfair.nn.fix_module does, as Opacus's ModuleValidator.fix), "
    "or put it in eval mode (module.eval()) with frozen running statistics"
)

# phrases of the errors torch.func raises for what it cannot batch or differentiate
_TORCH_FUNC_ERRORS = ("vmap", "transform", "batching rule", "batched tensor")


def _tensor_slots(model: nn.Module) -> dict[str, str]:
    """``{slot: name}``: every module attribute holding a parameter or buffer, once, and its canonical name.

    A module reachable under two names is listed once and a tensor shared by
    several modules under each of them.  ``functional_call(..., tie_weights=True)``
    swaps an aliased module's tensor twice and restores the wrong one, leaving
    the model holding the substitute (torch 2.13); filling every slot explicitly
    with ``tie_weights=False`` avoids that.
    """
    canonical = {id(t): n for n, t in [*model.named_parameters(), *model.named_buffers()]}
    slots = {}
    for mname, m in model.named_modules():
        held = [*m.named_parameters(recurse=False, remove_duplicate=False),
                *m.named_buffers(recurse=False, remove_duplicate=False)]
        for attr, t in held:
            if t is not None:
                slots[f"{mname}.{attr}" if mname else attr] = canonical[id(t)]
    return slots


def vmap_gradients(model, loss_fn, X, y, params, chunk_size) -> dict[str, torch.Tensor]:
    """:func:`per_sample_gradients` without the batch-independence check (the caller has made it)."""
    params, consts = split_params(model, params)
    n = batch_rows(X, y)
    if n == 0:
        return {k: p.new_zeros((0, *p.shape)) for k, p in params.items()}

    slots = _tensor_slots(model)

    def loss_one(p, x, t):
        values = {**consts, **p}
        tensors = {slot: values[name] for slot, name in slots.items()}
        out = functional_call(model, tensors, (x.unsqueeze(0),), tie_weights=False)
        return loss_fn(out, one_example_view(t, 0)).sum()

    in_dims = (None, 0, None if y is None else 0)
    g = vmap(grad(loss_one), in_dims=in_dims, randomness="different", chunk_size=chunk_size)
    try:
        return g(params, X, y)
    except RuntimeError as err:
        if not any(s in str(err).lower() for s in _TORCH_FUNC_ERRORS):
            raise
        raise ValueError(
            "torch.func could not compute per-example gradients: it runs the model on every example "
            "alone (a batch of one), so forward must not mix the examples of a batch nor update the "
            "model's buffers in place (BatchNorm in training mode does both: "
            f"{_BATCHNORM_FIX}), nor use data-dependent Python control flow such as .item(). "
            f"torch.func said: {err}"
        ) from err


def per_sample_gradients(
    model: nn.Module,
    loss_fn: LossFn,
    X: torch.Tensor,
    y=None,
    *,
    params: Mapping[str, torch.Tensor] | None = None,
    chunk_size: int | None = None,
) -> dict[str, torch.Tensor]:
    """Per-example gradients ``{name: tensor of shape (B, *param.shape)}``.

    Computed with ``torch.func.vmap(torch.func.grad(...))`` over
    ``functional_call(model, ...)``.  ``params`` defaults to the model's
    parameters with ``requires_grad``; frozen parameters and buffers are passed
    through unchanged.  ``loss_fn`` follows the package's convention (one
    example as a batch of one, :mod:`dpfair.nn.per_sample`).  ``chunk_size`` bounds how many examples
    ``vmap`` processes at once (memory).  An empty batch returns zero-size
    tensors.  Raises ``ValueError`` for models refused by
    :func:`~dpfair.nn.per_sample.model.check_batch_independence` and for what ``torch.func`` cannot run.
    """
    check_batch_independence(model)
    return vmap_gradients(model, loss_fn, X, y, params, chunk_size)
