"""Per-sample gradients, their norms and clipping: the core of DP-SGD.

Loss convention
---------------
``loss_fn(logits, y)`` computes the loss of **one** example, presented as a
batch of one: ``logits`` has shape ``(1, n_classes)`` (the model's output for
that example) and ``y`` is the example's target with a leading dimension of 1
(e.g. shape ``(1,)``).  It returns a scalar or a one-element tensor, which is
summed.  ``torch.nn.functional.cross_entropy`` (any reduction) qualifies.  It
must be traceable by ``torch.func.vmap`` (no ``.item()``, no data-dependent
Python control flow).  ``y`` may also be a tuple/list of tensors (e.g. labels
and sensitive attributes), each sliced the same way, or ``None``.

The model must treat the examples of a batch independently (no BatchNorm in
training mode) and its forward must accept a batch of one.  Dropout is
allowed: under ``vmap`` each example draws its own mask.

Methods
-------
``"vmap"``
    ``torch.func.vmap(grad(...))`` over the batch: works for any module,
    materialises every per-sample gradient (memory ``B * n_params``).
``"ghost"``
    Ghost norms: for every ``nn.Linear`` the per-sample gradient norm is
    computed from its input ``a_i`` and output gradient ``delta_i`` without
    forming the gradient (``||delta_i a_i^T||_F^2 = ||a_i||^2 ||delta_i||^2``;
    for inputs with extra (sequence) dimensions the Gram-matrix identity
    ``sum_{t,s} (a_t . a_s)(delta_t . delta_s)``), then the clipped sum comes
    from ONE extra weighted backward pass of ``sum_i c_i * loss_i`` through the
    same graph.  Supported only when every trainable parameter is the
    ``weight``/``bias`` of a plain ``nn.Linear`` (exact type) and is used only
    through that module's forward (no weight tying, no direct use of
    ``layer.weight`` elsewhere); parameter-free layers (activations, dropout,
    pooling, reshapes) may appear anywhere.
``"auto"``
    ``"ghost"`` when :func:`ghost_supported` holds, else ``"vmap"``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

__all__ = [
    "CLIP_METHODS",
    "GhostUnsupportedError",
    "apply_gradient",
    "assign_grads",
    "clip_coefficients",
    "clipped_gradient_sum",
    "clipped_sum",
    "ghost_supported",
    "per_sample_gradients",
    "per_sample_norms",
    "trainable_params",
]

CLIP_METHODS = ("auto", "vmap", "ghost")

LossFn = Callable[..., torch.Tensor]


class GhostUnsupportedError(ValueError):
    """The model cannot use the ghost-norm path (``method="auto"`` then falls back to vmap)."""


# --------------------------------------------------------------------------- small helpers


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


def _slice_one(y, dim: int):
    """Add a size-1 dimension at ``dim`` to ``y`` (a tensor, a tuple/list of tensors, or None)."""
    if y is None:
        return None
    if isinstance(y, torch.Tensor):
        return y.unsqueeze(dim)
    if isinstance(y, (tuple, list)):
        return type(y)(_slice_one(v, dim) for v in y)
    raise ValueError(f"y must be a tensor, a tuple/list of tensors or None, got {type(y).__name__}")


def _batch_size(X: torch.Tensor, y) -> int:
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


def _check_max_norm(max_norm) -> float:
    try:
        c = float(max_norm)
    except (TypeError, ValueError):
        raise ValueError(f"max_norm must be a positive number, got {max_norm!r}") from None
    if not (c > 0 and c < float("inf")):
        raise ValueError(f"max_norm must be a positive finite number, got {max_norm!r}")
    return c


def _split_params(model: nn.Module, params: Mapping[str, torch.Tensor] | None):
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


# --------------------------------------------------------------------------- vmap path


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
    through unchanged.  ``loss_fn`` follows the module's convention (one
    example as a batch of one).  ``chunk_size`` bounds how many examples
    ``vmap`` processes at once (memory).  An empty batch returns zero-size
    tensors.
    """
    params, consts = _split_params(model, params)
    n = _batch_size(X, y)
    if n == 0:
        return {k: p.new_zeros((0, *p.shape)) for k, p in params.items()}

    def loss_one(p, x, t):
        out = functional_call(model, {**consts, **p}, (x.unsqueeze(0),))
        return loss_fn(out, _slice_one(t, 0)).sum()

    in_dims = (None, 0, None if y is None else 0)
    g = vmap(grad(loss_one), in_dims=in_dims, randomness="different", chunk_size=chunk_size)
    return g(params, X, y)


def per_sample_norms(grads: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Global L2 norm (over all parameters) of each example's gradient, shape ``(B,)``."""
    if not grads:
        raise ValueError("grads is empty; pass the output of per_sample_gradients")
    sq = None
    for g in grads.values():
        s = g.reshape(g.shape[0], -1).pow(2).sum(1)
        sq = s if sq is None else sq + s
    return sq.sqrt()


def clip_coefficients(norms: torch.Tensor, max_norm: float) -> torch.Tensor:
    """``min(1, max_norm / norm)`` per example; 1 where the norm is 0."""
    c = _check_max_norm(max_norm)
    tiny = torch.finfo(norms.dtype).tiny if norms.is_floating_point() else 1e-30
    return (c / norms.clamp_min(tiny)).clamp(max=1.0)


def clipped_sum(
    grads: Mapping[str, torch.Tensor], max_norm: float
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum over the batch of the per-example gradients clipped to L2 norm ``max_norm``.

    Returns ``(summed, norms)``: ``summed[name]`` has the parameter's shape,
    ``norms`` are the unclipped per-example norms ``(B,)``.
    """
    norms = per_sample_norms(grads)
    coef = clip_coefficients(norms, max_norm)
    summed = {k: torch.tensordot(coef.to(g.dtype), g, dims=([0], [0])) for k, g in grads.items()}
    return summed, norms


# --------------------------------------------------------------------------- ghost path


def _linear_owners(model: nn.Module):
    """Map id(param) -> (module, attr) for trainable params; raise if ghost is unsupported."""
    trainable = trainable_params(model)
    if not trainable:
        raise ValueError("the model has no trainable parameters (none with requires_grad=True)")
    owners: dict[int, tuple[nn.Module, str]] = {}
    for mname, m in model.named_modules(remove_duplicate=False):
        for attr, p in m.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if type(m) is not nn.Linear or attr not in ("weight", "bias"):
                raise GhostUnsupportedError(
                    f"parameter {attr!r} of module {mname or '<root>'} ({type(m).__name__}) "
                    "is not the weight/bias of a plain nn.Linear"
                )
            if id(p) in owners and owners[id(p)][0] is not m:
                raise GhostUnsupportedError(f"parameter {mname}.{attr} is shared between modules")
            owners[id(p)] = (m, attr)
    return owners


def ghost_supported(model: nn.Module) -> bool:
    """Whether every trainable parameter is the weight/bias of a plain ``nn.Linear`` (not shared)."""
    try:
        _linear_owners(model)
    except GhostUnsupportedError:
        return False
    return True


def _ghost_clipped_sum(model, loss_fn, X, y, max_norm):
    owners = _linear_owners(model)
    named = trainable_params(model)
    modules: dict[int, nn.Module] = {}
    for m, _ in owners.values():
        modules[id(m)] = m
    records: dict[int, list] = {k: [] for k in modules}
    n = X.shape[0]

    def hook(mod, args, out):
        records[id(mod)].append((args[0].detach(), out))
        # hand the rest of the network a copy so that in-place ops downstream
        # (ReLU(inplace=True)) cannot rewrite the tensor whose gradient we take
        return out.clone()

    handles = [m.register_forward_hook(hook) for m in modules.values()]
    try:
        out = model(X)
    finally:
        for h in handles:
            h.remove()

    # per-example losses with the same convention as the vmap path: example i is
    # presented to loss_fn as a batch of one, (1, n_classes) logits
    per_example = vmap(
        lambda o, t: loss_fn(o, t).sum(), in_dims=(0, None if y is None else 0), randomness="different"
    )
    losses = per_example(_slice_one(out, 1), _slice_one(y, 1))
    if losses.shape != (n,):
        raise ValueError(f"loss_fn must return one value per example, got shape {tuple(losses.shape)}")

    outputs = [o for recs in records.values() for (_, o) in recs]
    for a, o in ((a, o) for recs in records.values() for (a, o) in recs):
        if a.dim() < 2 or a.shape[0] != n or o.shape[0] != n:
            raise GhostUnsupportedError(
                f"an nn.Linear received input of shape {tuple(a.shape)}; the ghost path needs "
                f"the batch ({n}) as its leading dimension"
            )
    deltas = torch.autograd.grad(losses.sum(), outputs, retain_graph=True, allow_unused=True)

    sq = torch.zeros(n, dtype=losses.dtype, device=losses.device)
    i = 0
    for key, m in modules.items():
        recs = records[key]
        if not recs:
            continue
        a = torch.cat([r[0].reshape(n, -1, r[0].shape[-1]) for r in recs], dim=1)  # (B, T, in)
        ds = []
        for r in recs:
            d = deltas[i]
            i += 1
            ds.append(torch.zeros_like(r[1]) if d is None else d.detach())
        d = torch.cat([dd.reshape(n, -1, dd.shape[-1]) for dd in ds], dim=1)  # (B, T, out)
        t = a.shape[1]
        if m.weight.requires_grad:
            if t == 1:
                sq = sq + a.pow(2).sum((1, 2)) * d.pow(2).sum((1, 2))
            elif t * t <= a.shape[2] * d.shape[2]:
                gram_a = torch.bmm(a, a.transpose(1, 2))
                gram_d = torch.bmm(d, d.transpose(1, 2))
                sq = sq + (gram_a * gram_d).sum((1, 2))
            else:
                g = torch.einsum("bto,bti->boi", d, a)
                sq = sq + g.pow(2).sum((1, 2))
        if m.bias is not None and m.bias.requires_grad:
            sq = sq + d.sum(1).pow(2).sum(1)
    norms = sq.clamp_min(0).sqrt().detach()
    coef = clip_coefficients(norms, max_norm).to(losses.dtype)

    names = list(named)
    gs = torch.autograd.grad((coef * losses).sum(), [named[k] for k in names], allow_unused=True)
    summed = {}
    for k, g in zip(names, gs):
        p = named[k]
        m, _ = owners[id(p)]
        if not records[id(m)] and g is not None and bool(torch.any(g != 0)):
            raise GhostUnsupportedError(
                f"parameter {k!r} received a gradient although its nn.Linear was never called; "
                "it is used outside the module's forward"
            )
        summed[k] = torch.zeros_like(p) if g is None else g.detach()
    return summed, norms


# --------------------------------------------------------------------------- public entry point


def clipped_gradient_sum(
    model: nn.Module,
    loss_fn: LossFn,
    X: torch.Tensor,
    y=None,
    max_norm: float = 1.0,
    method: str = "auto",
    *,
    chunk_size: int | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum of the per-example gradients, each clipped to L2 norm ``max_norm``.

    Returns ``(summed, norms)``: ``summed`` maps every trainable parameter name
    to a tensor of the parameter's shape, ``norms`` holds the unclipped
    per-example gradient norms ``(B,)`` (detached).  ``method`` is ``"auto"``,
    ``"vmap"`` or ``"ghost"`` (see the module docstring).  An empty batch
    (``B == 0``, as Poisson sampling may draw) returns zeros and an empty
    ``norms``.  Does not touch ``p.grad``.
    """
    if method not in CLIP_METHODS:
        raise ValueError(f"method must be one of {list(CLIP_METHODS)}, got {method!r}")
    _check_max_norm(max_norm)
    n = _batch_size(X, y)
    if n == 0:
        params, _ = _split_params(model, None)
        p0 = next(iter(params.values()))
        zeros = {k: torch.zeros_like(p) for k, p in params.items()}
        return zeros, torch.zeros(0, dtype=p0.dtype, device=p0.device)
    if method == "auto":
        method = "ghost" if ghost_supported(model) else "vmap"
        if method == "ghost":
            try:
                with torch.enable_grad():
                    return _ghost_clipped_sum(model, loss_fn, X, y, max_norm)
            except GhostUnsupportedError:
                method = "vmap"
    if method == "ghost":
        with torch.enable_grad():
            return _ghost_clipped_sum(model, loss_fn, X, y, max_norm)
    grads = per_sample_gradients(model, loss_fn, X, y, chunk_size=chunk_size)
    summed, norms = clipped_sum(grads, max_norm)
    return summed, norms.detach()
