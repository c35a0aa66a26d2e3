"""What the per-sample machinery reads of a model and a batch: the trainable parameters and their layers, the
batch-independence check every clipping method runs first, the batch's shape, and the two ways to hand a gradient
back to the model (a plain SGD step, or ``p.grad`` for any ``torch.optim`` optimizer).

The privacy argument of per-example clipping needs the loss of example ``i`` to depend on example ``i`` alone and
the model to keep no state learnt from the batch: :func:`check_batch_independence` refuses the layers that break
it (:mod:`dpfair.nn.validator` lists them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn

from dpfair.nn.validator import validate_module

__all__ = [
    "apply_gradient",
    "assign_grads",
    "check_batch_independence",
    "layer_groups",
    "trainable_params",
]

#: ``loss_fn(logits, y)``: the loss of one example presented as a batch of one (:mod:`dpfair.nn.per_sample`).
LossFn = Callable[..., torch.Tensor]


def trainable_params(model: nn.Module) -> dict[str, nn.Parameter]:
    """``{name: parameter}`` for the parameters of ``model`` with ``requires_grad``."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


@torch.no_grad()
def apply_gradient(model: nn.Module, grads: Mapping[str, torch.Tensor], lr: float) -> None:
    """Plain SGD step in place: ``p -= lr * grads[name]`` for every name in ``grads``."""
    params = dict(model.named_parameters())
    for name, g in grads.items():
        if name not in params:
            raise ValueError(f"gradient for unknown parameter {name!r}")
        p = params[name]
        p.add_(g.to(dtype=p.dtype, device=p.device), alpha=-float(lr))


def assign_grads(model: nn.Module, grads: Mapping[str, torch.Tensor]) -> None:
    """Set ``p.grad = grads[name]`` so that any ``torch.optim`` optimizer can take the step."""
    params = dict(model.named_parameters())
    for name, g in grads.items():
        if name not in params:
            raise ValueError(f"gradient for unknown parameter {name!r}")
        p = params[name]
        p.grad = g.detach().to(dtype=p.dtype, device=p.device).clone()


def layer_groups(model: nn.Module) -> list[list[str]]:
    """The trainable parameter names of each layer: one list per module that holds trainable parameters."""
    canonical = {id(p): n for n, p in trainable_params(model).items()}
    layers, seen = [], set()
    for _, m in model.named_modules():
        names = [canonical[id(p)] for p in m.parameters(recurse=False) if id(p) in canonical and id(p) not in seen]
        seen.update(id(p) for p in m.parameters(recurse=False))
        if names:
            layers.append(names)
    return layers


def check_batch_independence(model: nn.Module) -> None:
    """Raise ``ValueError`` if a module of ``model`` makes one example's gradient depend on others.

    Refused, for every clipping method: what :func:`dpfair.nn.validate_module` lists (BatchNorm
    normalising with the batch's statistics, InstanceNorm learning running statistics from the
    private batch); the message names the first such layer and the fix (:func:`dpfair.nn.fix_module`).
    """
    problems = validate_module(model)
    if problems:
        more = f" ({len(problems) - 1} more such layers: dpfair.nn.validate_module lists them)" if len(problems) > 1 \
            else ""
        raise ValueError(problems[0].message + more)


def one_example_view(y, dim: int):
    """``y`` (a tensor, a tuple/list of tensors, or None) with a size-1 dimension added at ``dim``: how an example
    is presented to ``loss_fn`` (a batch of one)."""
    if y is None:
        return None
    if isinstance(y, torch.Tensor):
        return y.unsqueeze(dim)
    if isinstance(y, (tuple, list)):
        return type(y)(one_example_view(v, dim) for v in y)
    raise ValueError(f"y must be a tensor, a tuple/list of tensors or None, got {type(y).__name__}")


def batch_rows(X: torch.Tensor, y) -> int:
    """The number of examples of the batch ``(X, y)``; ``ValueError`` unless every leaf of ``y`` has one entry per
    row of ``X``."""
    if not isinstance(X, torch.Tensor):
        raise ValueError(f"X must be a torch.Tensor, got {type(X).__name__}")
    if X.dim() == 0:
        raise ValueError("X must have a leading batch dimension")
    n = X.shape[0]
    leaves = [] if y is None else ([y] if isinstance(y, torch.Tensor) else list(y))
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor) or leaf.dim() == 0 or leaf.shape[0] != n:
            shape = tuple(leaf.shape) if isinstance(leaf, torch.Tensor) else type(leaf).__name__
            raise ValueError(f"y must have one entry per row of X ({n}), got {shape}")
    return n


def split_params(model: nn.Module, params: Mapping[str, torch.Tensor] | None):
    """``(params, consts)``: the tensors to differentiate (``params``, default the trainable parameters, detached)
    and every other parameter and buffer of the model, by name."""
    named = dict(model.named_parameters())
    if params is None:
        params = {n: p.detach() for n, p in named.items() if p.requires_grad}
    else:
        unknown = sorted(set(params) - set(named))
        if unknown:
            raise ValueError(f"params names {unknown} are not parameters of the model")
        params = dict(params)
    if not params:
        raise ValueError("the model has no trainable parameters (none with requires_grad=True)")
    consts = {n: p.detach() for n, p in named.items() if n not in params}
    consts.update(dict(model.named_buffers()))
    return params, consts
