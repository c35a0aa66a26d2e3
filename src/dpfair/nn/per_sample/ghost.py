"""The ``"ghost"`` path: per-example gradient norms and the clipped sum from one forward and one backward pass.

Contract: one batched forward records, for every call of a layer that has a ghost rule
(:mod:`dpfair.nn.per_sample.ghost_rules`) and holds a trainable parameter, its input ``a_k`` and output
``z_k``; one backward of ``sum_j w_j loss_j`` (fixed distinct probe weights ``w_j`` in ``[1, 2)``) gives each
example's output gradients, from which the rules give ``||g_i||`` and ``sum_i c_i g_i`` with no second backward
(Goodfellow 2015; Li et al. 2022; Bu et al. 2022). The result is the exact clipped sum only when (1) every
trainable parameter is the ``weight``/``bias`` of such layers (checked before the forward pass,
:func:`ghost_supported`), (2) it reaches the loss only through those layers' forward calls and (3) no operation
mixes the examples. (2) and (3) are verified on the first batch of every call structure of the model
(``verify=True``: every batch) by a second backward of ``sum_i c_i loss_i``, to ``1000 * eps`` of the dtype (at
most ``1e-2``) relative to the terms' magnitudes, in IEEE float32 (:func:`ieee_float32`);
a failure raises :class:`GhostUnsupportedError` and is remembered for that
structure. Whether or not the check runs, the released sum is ``sum_i c_i g_i`` of per-example terms whose norms set
the ``c_i``, so each example adds at most its bound as long as (3) holds. The derivation and what escapes the check
are in the guide (:ref:`ghost-norms`).
"""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Callable

import torch
from torch import nn
from torch.func import vmap

from dpfair.nn.per_sample.clipping import check_layers, clip_coefficients, without_padding
from dpfair.nn.per_sample.ghost_rules import GhostUnsupportedError, ghost_layers, ghost_rule_for
from dpfair.nn.per_sample.model import check_batch_independence, one_example_view, trainable_params
from dpfair.nn.per_sample.precision import ieee_float32

__all__ = ["ghost_supported"]


def ghost_params(model: nn.Module) -> dict[str, nn.Parameter]:
    """Trainable parameters; raise unless each is only ever the weight/bias of layers that have a ghost rule
    (:func:`~dpfair.nn.per_sample.ghost_rules.ghost_layers`) and those layers pass their rule's check."""
    check_batch_independence(model)
    trainable = trainable_params(model)
    if not trainable:
        raise ValueError("the model has no trainable parameters (none with requires_grad=True)")
    for mname, m in model.named_modules(remove_duplicate=False):
        held = [attr for attr, p in m.named_parameters(recurse=False) if p.requires_grad]
        if not held:
            continue
        rule = ghost_rule_for(m)
        if rule is None or any(attr not in ("weight", "bias") for attr in held):
            attr = next(a for a in held if rule is None or a not in ("weight", "bias"))
            raise GhostUnsupportedError(
                f"parameter {attr!r} of module {mname or '<root>'} ({type(m).__name__}) is not the weight/bias "
                f"of a plain {', '.join(t.__name__ for t in ghost_layers())}"
            )
        if rule.check is not None:
            rule.check(m)
    return trainable


def ghost_supported(model: nn.Module) -> bool:
    """Whether ``model`` passes the ghost path's checks made before running it.

    Every trainable parameter must be the weight/bias of modules whose exact type has a ghost rule
    (:func:`~dpfair.nn.per_sample.ghost_rules.ghost_layers`: plain ``nn.Linear``,
    ``nn.Conv1d``/``nn.Conv2d`` (zero padding, ``groups=1``), ``nn.GroupNorm``
    or ``nn.LayerNorm``, and those a user registered; several of them may share it) and no module
    may be refused by :func:`~dpfair.nn.per_sample.model.check_batch_independence`.  The exactness check
    made after the forward and backward passes can still refuse the model (see
    the module docstring); ``method="auto"`` then uses vmap.
    """
    try:
        ghost_params(model)
    except ValueError:
        return False
    return True


def _rtol(dtype: torch.dtype) -> float:
    return min(1e3 * torch.finfo(dtype).eps, 1e-2)


def _probe_weights(n: int, like: torch.Tensor) -> torch.Tensor:
    """Fixed, pairwise distinct weights in ``[1, 2)`` (golden-ratio sequence); no RNG is drawn."""
    i = torch.arange(1, n + 1, dtype=torch.float64, device=like.device)  # made where it is used: no copy
    return (1.0 + torch.remainder(i * 0.6180339887498949, 1.0)).to(dtype=like.dtype)


def _outer_sq_norms(a: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``||d_iᵀa_i||_F²`` per example for ``a (B, T, in)``, ``d (B, T, out)``, the cheaper way (Bu et al. 2022).

    Ghost: ``Σ_{t,s} (a_t·a_s)(d_t·d_s)``, cost ``T²(in + out)`` a row, nothing materialised; or the
    per-example gradient ``d_iᵀa_i`` itself, cost ``T·in·out``, returned as well (so that the clipped
    sum reuses it).  Returns ``(squared norms (B,), per-example gradients (B, out, in) or None)``.
    """
    t = a.shape[1]
    if t == 1:
        return a.pow(2).sum((1, 2)) * d.pow(2).sum((1, 2)), None
    if t * t <= a.shape[2] * d.shape[2]:
        return (torch.bmm(a, a.transpose(1, 2)) * torch.bmm(d, d.transpose(1, 2))).sum((1, 2)), None
    g = torch.bmm(d.transpose(1, 2), a)
    return g.pow(2).sum((1, 2)), g


class _ParamRecord:
    """One trainable parameter's per-example gradients, as read off the recorded calls.

    ``outer``: the ``(A, D)`` pairs of its outer-product uses (side by side along the positions),
    ``dense``: the sum of its materialised per-example gradients ``(B, *shape)``.
    """

    def __init__(self, param: torch.Tensor):
        self.param = param
        self.outer: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.dense: torch.Tensor | None = None
        self.scales: list[Callable[[], torch.Tensor]] = []  # the dense terms' magnitudes, when checking

    def add(self, term) -> None:
        kind, *values = term
        if kind == "outer":
            self.outer.append(tuple(values))
        else:
            self.dense = values[0] if self.dense is None else self.dense + values[0]
            self.scales.append(values[1])

    def finish(self, n: int) -> torch.Tensor:
        """Squared per-example norms ``(B,)``; keeps what the clipped sum needs (ghost pairs or gradients)."""
        if self.outer:
            a, d = (torch.cat(u, 1) if len(self.outer) > 1 else u[0] for u in zip(*self.outer))
            sq, g = _outer_sq_norms(a, d)
            self.outer = [(a, d)]
            if g is not None or self.dense is not None:  # one materialised gradient for every use
                g = g if g is not None else torch.bmm(d.transpose(1, 2), a)
                g = g.reshape(n, *self.param.shape)
                self.dense = g if self.dense is None else self.dense + g
                self.scales.append(lambda: d.norm(dim=2).mul(a.norm(dim=2)).sum(1))
                self.outer = []
                return self.dense.flatten(1).pow(2).sum(1)
            return sq
        if self.dense is None:  # never used: no gradient
            return torch.zeros(n, dtype=self.param.dtype, device=self.param.device)
        return self.dense.flatten(1).pow(2).sum(1)

    def weighted_sum(self, s: torch.Tensor) -> torch.Tensor:
        """``Σ_i s_i g_i`` (for the outer product form, ``(s⊙D)ᵀA`` over all rows and positions: one matmul)."""
        if self.outer:
            a, d = self.outer[0]
            return ((d * s.view(-1, 1, 1)).flatten(0, 1).T @ a.flatten(0, 1)).reshape(self.param.shape)
        if self.dense is None:
            return torch.zeros_like(self.param)
        return torch.tensordot(s.to(self.dense.dtype), self.dense, dims=([0], [0]))

    def magnitude(self, s: torch.Tensor) -> torch.Tensor:
        """``Σ_i s_i Σ_t ||d_{i,t}|| ||a_{i,t}||`` (dense: ``Σ_i s_i M_i``): the scale of the terms summed."""
        if self.outer:
            a, d = self.outer[0]
            return (s.view(-1, 1) * d.norm(dim=2) * a.norm(dim=2)).sum()
        return sum(((s * scale()).sum() for scale in self.scales), torch.zeros((), dtype=s.dtype, device=s.device))


#: per model, the call structures (signatures) whose exactness was verified, and those refused
_VERIFIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_REFUSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _signature(model, loss_fn, X, y, named, calls, layers) -> tuple:
    """What the exactness of the ghost path depends on besides the values: the model's recorded calls
    (which module, with which trainable parameters, on what input shape), the trainable set, the loss,
    the input and target shapes and dtypes, train/eval mode and the forward methods."""
    leaves = [] if y is None else ([y] if isinstance(y, torch.Tensor) else list(y))
    try:  # held weakly: a loss closing over the model must not keep it (the cache's key) alive
        loss = weakref.ref(loss_fn)
    except TypeError:
        loss = loss_fn
    return (
        loss, model.training, getattr(model.forward, "__func__", model.forward),
        tuple((id(m), tuple(a.shape[1:]), a.dtype, w is not None, b is not None) for m, w, b, a, _ in calls),
        tuple(id(p) for p in named.values()), tuple(X.shape[1:]), X.dtype,
        tuple((tuple(t.shape[1:]), t.dtype) for t in leaves),
        None if layers is None else tuple(tuple(layer) for layer in layers),
    )


def ghost_clipped_sum(model, loss_fn, X, y, max_norm, layers=None, verify=False, valid=None):
    """The ghost path of :func:`~dpfair.nn.per_sample.methods.clipped_gradient_sum` (its arguments): ``(summed,
    norms)``, or :class:`GhostUnsupportedError` where the records would not give the exact clipped sum."""
    named = ghost_params(model)
    if layers is not None:
        check_layers(layers, named)
    trainable = {id(p) for p in named.values()}
    n = X.shape[0]
    calls = []  # (module, weight or None, bias or None, input, output) per call of a layer with a ghost rule

    def hook(mod, args, kwargs, out):
        w = mod.weight if getattr(mod, "weight", None) is not None and id(mod.weight) in trainable else None
        b = mod.bias if getattr(mod, "bias", None) is not None and id(mod.bias) in trainable else None
        if (w is None and b is None) or not out.requires_grad:
            return None
        calls.append((mod, w, b, (args[0] if args else kwargs["input"]).detach(), out))
        # hand the rest of the network a copy so that in-place ops downstream
        # (ReLU(inplace=True)) cannot rewrite the tensor whose gradient we take
        return out.clone()

    layers_used = [m for m in model.modules() if ghost_rule_for(m) is not None]
    handles = [m.register_forward_hook(hook, with_kwargs=True, prepend=True) for m in layers_used]
    known = _REFUSED.get(model, {})
    # gradients w.r.t. the input reveal examples that interact (check b); taken only when checking
    x_leaf = X.detach().requires_grad_() if X.is_floating_point() else None
    try:
        out = model(X if x_leaf is None else x_leaf.clone())
    finally:
        for h in handles:
            h.remove()

    # per-example losses with the same convention as the vmap path: example i is
    # presented to loss_fn as a batch of one, (1, n_classes) logits
    per_example = vmap(
        lambda o, t: loss_fn(o, t).sum(), in_dims=(0, None if y is None else 0), randomness="different"
    )
    losses = per_example(one_example_view(out, 1), one_example_view(y, 1))
    if losses.shape != (n,):
        raise ValueError(f"loss_fn must return one value per example, got shape {tuple(losses.shape)}")
    if not calls:
        raise GhostUnsupportedError("no layer holding a trainable parameter took part in the forward pass")
    for m, _, _, a, z in calls:
        if a.dim() < 2 or a.shape[0] != n or z.shape[0] != n:
            raise GhostUnsupportedError(
                f"a {type(m).__name__} received input whose leading dimension is not the batch's "
                f"(its shape after the first: {tuple(a.shape[1:])}); the ghost path needs the batch as the "
                "leading dimension of every layer's input"
            )
    signature = _signature(model, loss_fn, X, y, named, calls, layers)
    if signature in known:
        raise GhostUnsupportedError(known[signature])
    # the exactness check runs on the first batch of each call structure, or on every batch (verify=True)
    check = verify or signature not in _VERIFIED.get(model, ())
    if not check:
        x_leaf = None

    # a checked batch runs both backward passes and the rebuilt sums in IEEE float32 (see ieee_float32)
    with ieee_float32() if check else contextlib.nullcontext():
        return _ghost_backward(model, named, calls, losses, x_leaf, check, layers, max_norm, valid, n, signature)


def _ghost_backward(model, named, calls, losses, x_leaf, check, layers, max_norm, valid, n, signature):
    """Backward 1, the per-example norms and the clipped sum read off the records (and the check)."""
    # backward 1, probe-weighted: output gradients (w_i * delta_i without interaction)
    w = _probe_weights(n, losses)
    inputs = [z for *_, z in calls] + ([] if x_leaf is None else [x_leaf])
    grads1 = torch.autograd.grad((w * losses).sum(), inputs, retain_graph=check, allow_unused=True)
    records = {id(p): _ParamRecord(p) for p in named.values()}
    with torch.no_grad():
        for (m, wp, bp, a, z), d in zip(calls, grads1):
            d = torch.zeros_like(z) if d is None else d.detach()
            weight_term, bias_term = ghost_rule_for(m).terms(m, a, d, n)
            if wp is not None:
                records[id(wp)].add(weight_term)
            if bp is not None:
                records[id(bp)].add(bias_term)
        sq = {k: records[id(p)].finish(n) for k, p in named.items()}
        norms = (torch.stack(list(sq.values())).sum(0).clamp_min(0).sqrt() / w).detach()
        coef = without_padding(clip_coefficients(norms, max_norm).to(losses.dtype), valid)
        if layers is None:
            summed = {k: records[id(p)].weighted_sum(coef / w) for k, p in named.items()}
        else:  # per-layer clipping: layer j's part of g_i clipped to max_norm_i/√m
            summed = {}
            for layer in layers:
                part = torch.stack([sq[k] for k in layer]).sum(0).clamp_min(0).sqrt() / w
                c = without_padding(clip_coefficients(part, max_norm / math.sqrt(len(layers))).to(losses.dtype),
                                     valid)
                summed.update({k: records[id(named[k])].weighted_sum(c / w) for k in layer})
    if check:
        _verify(model, named, records, losses, coef, w, x_leaf, grads1, signature)
    return summed, norms


def _verify(model, named, records, losses, coef, w, x_leaf, grads1, signature) -> None:
    """The exactness check (the guide's :ref:`ghost-norms`, checks a and b), with the flat coefficients ``coef``.

    Backward 2 takes autograd's gradient of ``Σ_i c_i loss_i``; every parameter's must equal
    ``Σ_i c_i g_i`` rebuilt from the records and the input gradients of both backward passes must agree
    row by row; errors relative to the sum of the terms' magnitudes.  A pass is remembered for the
    signature, a failure too (``method="auto"`` then goes straight to vmap).
    """
    names = list(named)
    inputs = [named[k] for k in names] + ([] if x_leaf is None else [x_leaf])
    grads2 = torch.autograd.grad((coef * losses).sum(), inputs, allow_unused=True)
    s = coef / w
    rel = {}  # parameter name (None: the input) -> relative error
    with torch.no_grad():
        for k, g in zip(names, grads2):
            record = records[id(named[k])]
            auto = torch.zeros_like(named[k]) if g is None else g
            rel[k] = (auto - record.weighted_sum(s)).norm() / record.magnitude(s)  # 0/0 = nan passes: unused
        if x_leaf is not None and grads1[-1] is not None:
            gx1, gx2 = grads1[-1].detach(), grads2[-1].detach()
            err = (gx2 - s.view(-1, *[1] * (gx1.dim() - 1)) * gx1).norm()
            rel[None] = err / (s * gx1.reshape(len(s), -1).norm(dim=1)).sum()
        failed = (torch.stack(list(rel.values())) > _rtol(losses.dtype)).tolist()
    for k, bad in zip(rel, failed):
        if not bad:
            continue
        if k is None:
            message = (
                "the loss of one example depends on the inputs of other examples (an operation mixes the "
                "examples of the batch, e.g. batch statistics such as x - x.mean(0)): per-example ghost "
                "norms do not bound each example's contribution")
        else:
            message = (
                f"the gradient of parameter {k!r} differs from the one rebuilt from its layers' calls: "
                "it is used outside those modules' forward "
                "(e.g. F.linear(x, layer.weight)), or examples of the batch interact after the layer")
        _REFUSED.setdefault(model, {})[signature] = message
        raise GhostUnsupportedError(message)
    _VERIFIED.setdefault(model, set()).add(signature)
