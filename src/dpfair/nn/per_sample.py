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

Clipping bounds
---------------
``max_norm`` is one positive finite bound ``C`` or a 1-D tensor of shape
``(B,)`` holding one bound ``C_i`` per example (group-aware clipping).  The
gradient ``g_i`` of example ``i`` is scaled by ``c_i = min(1, C_i / ||g_i||)``
(1 where ``g_i = 0``), so it adds at most ``C_i`` (L2) to the clipped sum
``sum_i c_i g_i``, and removing example ``i`` from the batch changes that sum by
at most ``C_i``.

Independent examples
--------------------
That bound needs the loss of example ``i`` to depend on example ``i`` alone and
the model to keep no state learnt from the batch.  Batch-statistics layers break
it: any ``_BatchNorm`` (``BatchNorm1d/2d/3d``, ``SyncBatchNorm``, the lazy
variants) in training mode or without running statistics, and an
``InstanceNorm`` that tracks running statistics in training mode (they would be
learnt from the private batch without noise).  :func:`check_batch_independence`
refuses them with a ``ValueError``, for every method: replace BatchNorm by
GroupNorm or LayerNorm (:func:`dpfair.nn.fix_module` does, as Opacus's
``ModuleValidator.fix``) or put it in eval mode with frozen running statistics
(:mod:`dpfair.nn.validator`).  Dropout is allowed.

Methods
-------
``"vmap"``
    ``torch.func.vmap(grad(...))`` over the batch: every example is run alone,
    as a batch of one, so examples cannot interact.  Works for any other
    module (shared parameters and submodules included); materialises every
    per-sample gradient (memory ``B * n_params``); dropout draws one mask per
    example.  A ``torch.func`` error (e.g. a layer
    that updates a buffer from the batch in place) becomes a ``ValueError``
    naming the likely cause.
``"ghost"``
    Ghost norms with book-keeping (Goodfellow 2015; Li et al. 2022; Bu et al.
    2022's mixed ghost clipping).  One batched forward records, for every call
    ``k`` of a plain ``nn.Linear``, ``nn.Conv1d``/``nn.Conv2d`` (zero padding,
    ``groups=1``), ``nn.GroupNorm`` or ``nn.LayerNorm`` holding a trainable
    parameter, its input ``a_k`` and output ``z_k``.  One backward of
    ``sum_j w_j loss_j``, with fixed distinct probe weights ``w_j`` in
    ``[1, 2)``, gives ``delta_{k,i} = d(sum_j w_j loss_j)/dz_{k,i} / w_i``.
    A Linear's or a convolution's weight gradient of example ``i`` is
    ``g_i = sum_{k,t} delta_{k,i,t} a_{k,i,t}^T`` over every call of every
    layer holding ``W`` and every position ``t`` (a Linear's extra leading
    dimensions; a convolution's output positions, ``a_{k,i,t}`` then being the
    unfolded input patch and ``W`` seen as ``(out, in·kernel)``).  Per layer
    the cheaper of two ways gives ``||g_i||``: the ghost norm
    ``||g_i||_F^2 = sum_{t,s} (a_t . a_s)(delta_t . delta_s)`` (cost ``T^2``
    a row, ``||a_i||^2 ||delta_i||^2`` for one position) or the materialised
    ``g_i`` (cost ``T·in·out``).  A bias contributes
    ``||sum_t delta_{i,t}||^2``; a normalisation layer's weight
    ``sum_t x̂_{i,t} ⊙ delta_{i,t}`` (``x̂`` its normalised input, recomputed).
    The clipped sum ``sum_i c_i g_i`` is then read off the same records (one
    matrix product per layer, or a weighted sum of the materialised ``g_i``):
    no second backward pass.

    Exact only when (1) every trainable parameter is the ``weight``/``bias``
    of one or several of those layers (exact type), (2) it reaches the loss
    only through those modules' forward calls and (3) no operation mixes the
    examples.  (1) is checked before the forward pass
    (:func:`ghost_supported`, with the refusals above).  (2) and (3) are
    verified by a second backward of ``sum_i c_i loss_i`` on the first batch
    of every *call structure* of the model (which layers ran on what input
    shapes, the trainable set, the loss, train/eval mode, the forward methods;
    ``verify=True``: on every batch), to ``1000 * eps`` of the dtype
    (``2.2e-13`` in float64, ``1.2e-4`` in float32, at most ``1e-2``) relative
    to the sum of the magnitudes of the terms summed, the check's two backward passes and the
    rebuilt sums computed in IEEE float32 (:func:`ieee_float32`: TF32/bfloat16 matmuls and
    convolutions off, the settings restored after):

    a. for every parameter, autograd's gradient of ``sum_i c_i loss_i`` must
       equal ``sum_i c_i g_i`` rebuilt from the records.  A use outside the
       recorded calls (``F.linear(x, layer.weight)``, an embedding-style tie
       using the weight transposed, a ``functional_call`` running the layer
       with a weight derived from it, a replaced ``forward``), or examples
       mixed after a layer (``c_i / w_i`` differs between examples), breaks
       the equality;
    b. for a floating ``X``, the input gradients of the two backward passes
       must agree row by row (row ``i`` scaled by ``c_i / w_i``): they do not
       when the loss of one example depends on another example's input
       anywhere in the network (e.g. ``x - x.mean(0)``).

    Either failure raises :class:`GhostUnsupportedError` and is remembered for
    that structure.  Mixing that carries no gradient (batch statistics under
    ``no_grad`` or ``detach``) escapes (b); the type checks above cover
    BatchNorm.  Checking once per structure assumes a forward whose mixing of
    examples does not depend on the values of a batch (pass ``verify=True``
    for one that might).  Whether or not the check holds, the released sum is
    ``sum_i c_i g_i`` of per-example terms whose norms set the ``c_i``, so each
    example adds at most its bound as long as (3) holds.
``"auto"``
    ``"ghost"`` when it passes both its checks, else ``"vmap"``.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from dpfair.nn.validator import validate_module

__all__ = [
    "CLIP_METHODS",
    "GhostUnsupportedError",
    "apply_gradient",
    "assign_grads",
    "check_batch_independence",
    "clip_coefficients",
    "clipped_gradient_sum",
    "clipped_sum",
    "ghost_supported",
    "ieee_float32",
    "layer_groups",
    "padded_size",
    "pads",
    "per_sample_gradients",
    "per_sample_norms",
    "trainable_params",
]

CLIP_METHODS = ("auto", "vmap", "ghost")

LossFn = Callable[..., torch.Tensor]

_BATCHNORM_FIX = (
    "replace it with GroupNorm or LayerNorm (dpfair.nn.fix_module does, as Opacus's ModuleValidator.fix), "
    "or put it in eval mode (module.eval()) with frozen running statistics"
)


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


def _check_max_norm(max_norm, n: int | None = None) -> float | torch.Tensor:
    """A clipping bound: a positive finite number, or a 1-D tensor of ``n`` of them."""
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


# --------------------------------------------------------------------------- independence


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


# --------------------------------------------------------------------------- vmap path

# phrases of the errors torch.func raises for what it cannot batch or differentiate
_TORCH_FUNC_ERRORS = ("vmap", "transform", "batching rule", "batched tensor")


def _vmap_gradients(model, loss_fn, X, y, params, chunk_size):
    params, consts = _split_params(model, params)
    n = _batch_size(X, y)
    if n == 0:
        return {k: p.new_zeros((0, *p.shape)) for k, p in params.items()}

    slots = _tensor_slots(model)

    def loss_one(p, x, t):
        values = {**consts, **p}
        tensors = {slot: values[name] for slot, name in slots.items()}
        out = functional_call(model, tensors, (x.unsqueeze(0),), tie_weights=False)
        return loss_fn(out, _slice_one(t, 0)).sum()

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
    through unchanged.  ``loss_fn`` follows the module's convention (one
    example as a batch of one).  ``chunk_size`` bounds how many examples
    ``vmap`` processes at once (memory).  An empty batch returns zero-size
    tensors.  Raises ``ValueError`` for models refused by
    :func:`check_batch_independence` and for what ``torch.func`` cannot run.
    """
    check_batch_independence(model)
    return _vmap_gradients(model, loss_fn, X, y, params, chunk_size)


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
    c = _check_max_norm(max_norm, norms.shape[0] if norms.dim() == 1 else None)
    dtype = norms.dtype if norms.is_floating_point() else torch.get_default_dtype()
    if isinstance(c, torch.Tensor):
        c = c.to(device=norms.device, dtype=dtype)
    tiny = torch.finfo(dtype).tiny
    return (c / norms.to(dtype).clamp_min(tiny)).clamp(max=1.0)


#: The device types on which Poisson batches are padded to :func:`padded_size` rows (:func:`pads`).
PADDED_DEVICES = ("cuda",)


def pads(device: torch.device | str) -> bool:
    """Whether a step on ``device`` pads its Poisson batch: on an accelerator every new batch size costs
    (cuDNN plans its convolutions again; measured: results/speed/private_step_cuda.md); on the CPU padding
    rows only cost their compute."""
    return torch.device(device).type in PADDED_DEVICES


def padded_size(b: int, expected: float) -> int:
    """``b`` rounded up to a multiple of the power of two at most ``√expected`` (at least 1).

    A Poisson batch of mean μ spreads over about ±2√μ: its sizes fall in a handful of buckets, each padded
    by under 1/√μ of the batch (6 % at μ = 256, 1.6 % at 4096). Both numbers are public.
    """
    grain = 1 << max(0, int(math.floor(math.log2(max(expected, 1.0)) / 2)))
    return -(-b // grain) * grain


def _without_padding(coef: torch.Tensor, valid: int | None) -> torch.Tensor:
    """The clip coefficients with those of the padding rows (from index ``valid`` on) set to exactly 0; no
    synchronisation with a device."""
    if valid is None:
        return coef
    return coef * (torch.arange(coef.shape[0], device=coef.device) < valid).to(coef.dtype)


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


def _check_layers(layers: list[list[str]], names) -> None:
    if sorted(n for layer in layers for n in layer) != sorted(names):
        raise ValueError("layers must list every trainable parameter exactly once")


def clipped_sum(
    grads: Mapping[str, torch.Tensor], max_norm: float | torch.Tensor, layers: list[list[str]] | None = None,
    valid: int | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Sum over the batch of the per-example gradients, example ``i`` clipped to L2 norm ``max_norm[i]``.

    ``max_norm`` is one bound or a tensor ``(B,)`` of per-example bounds.
    ``layers`` (lists of parameter names, e.g. :func:`layer_groups`): clip each
    layer's part of ``g_i`` to ``max_norm[i] / √m`` for ``m`` layers (per-layer
    clipping, McMahan et al. 2018), so the whole ``g_i`` still adds at most
    ``max_norm[i]``. Returns ``(summed, norms)``: ``summed[name]`` has the
    parameter's shape, ``norms`` are the unclipped per-example norms ``(B,)``. ``valid``: see
    :func:`clipped_gradient_sum`.
    """
    norms = per_sample_norms(grads)
    if layers is None:
        coef = {k: _without_padding(clip_coefficients(norms, max_norm), valid) for k in grads}
    else:
        _check_layers(layers, grads)
        scale = 1.0 / math.sqrt(len(layers))
        coef = {}
        for layer in layers:
            c = clip_coefficients(per_sample_norms({k: grads[k] for k in layer}), max_norm * scale)
            coef.update({k: _without_padding(c, valid) for k in layer})
    summed = {k: torch.tensordot(coef[k].to(g.dtype), g, dims=([0], [0])) for k, g in grads.items()}
    return summed, norms


# --------------------------------------------------------------------------- ghost path

#: the module types whose weight/bias per-example gradients the ghost path reads off its records
GHOST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.GroupNorm, nn.LayerNorm)


def _conv_padding(m: nn.Module) -> tuple[int, ...]:
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


def _ghost_params(model: nn.Module) -> dict[str, nn.Parameter]:
    """Trainable parameters; raise unless each is only ever the weight/bias of the :data:`GHOST_LAYERS`."""
    check_batch_independence(model)
    trainable = trainable_params(model)
    if not trainable:
        raise ValueError("the model has no trainable parameters (none with requires_grad=True)")
    for mname, m in model.named_modules(remove_duplicate=False):
        held = [attr for attr, p in m.named_parameters(recurse=False) if p.requires_grad]
        if not held:
            continue
        if type(m) not in GHOST_LAYERS or any(attr not in ("weight", "bias") for attr in held):
            attr = next(a for a in held if type(m) not in GHOST_LAYERS or a not in ("weight", "bias"))
            raise GhostUnsupportedError(
                f"parameter {attr!r} of module {mname or '<root>'} ({type(m).__name__}) is not the weight/bias "
                f"of a plain {', '.join(t.__name__ for t in GHOST_LAYERS)}"
            )
        if isinstance(m, (nn.Conv1d, nn.Conv2d)):
            _conv_padding(m)
    return trainable


def ghost_supported(model: nn.Module) -> bool:
    """Whether ``model`` passes the ghost path's checks made before running it.

    Every trainable parameter must be the weight/bias of plain ``nn.Linear``,
    ``nn.Conv1d``/``nn.Conv2d`` (zero padding, ``groups=1``), ``nn.GroupNorm``
    or ``nn.LayerNorm`` modules (several of them may share it) and no module
    may be refused by :func:`check_batch_independence`.  The exactness check
    made after the forward and backward passes can still refuse the model (see
    the module docstring); ``method="auto"`` then uses vmap.
    """
    try:
        _ghost_params(model)
    except ValueError:
        return False
    return True


def _rtol(dtype: torch.dtype) -> float:
    return min(1e3 * torch.finfo(dtype).eps, 1e-2)


#: the float32 precision settings :func:`ieee_float32` pins: (module, operation) of ``torch.backends``
_FP32_SETTINGS = (("cudnn", "conv"), ("cudnn", "rnn"), ("cuda", "matmul"), ("mkldnn", "conv"), ("mkldnn", "matmul"),
                  ("mkldnn", "rnn"))
_FP32_LOCK = threading.Lock()
_FP32_STATE: dict = {"depth": 0, "saved": None}


@contextlib.contextmanager
def ieee_float32() -> Iterator[None]:
    """Float32 matmuls and convolutions in IEEE float32 inside the block (no TF32 or bfloat16 passes on any
    backend), every ``torch.backends.*.fp32_precision`` setting it pins restored on exit, error or not.

    The ghost path's exactness check compares two float32 computations of one gradient to ``1000 * eps``;
    TF32 (cuDNN's convolutions by default on Ampere and later GPUs) keeps 10 mantissa bits, so its rounding
    through a deep network alone can exceed that bound.  The check runs in IEEE float32 rather than with a
    tolerance loosened to TF32's: a bound that loose would let a small structural difference pass.
    Process-wide settings: nested or concurrent blocks (threads) share one save, restored when the last one
    leaves; the per-operation settings are saved and set, so the legacy ``allow_tf32`` flags come back as they were.

    While it is active, torch refuses to read the legacy flags (``torch.backends.cudnn.allow_tf32``,
    ``torch.backends.cuda.matmul.allow_tf32``: "mix of the legacy and new APIs"); read the per-operation
    ``fp32_precision`` settings instead.
    """
    with _FP32_LOCK:
        if _FP32_STATE["depth"] == 0:
            settings = [getattr(getattr(torch.backends, mod, None), op, None) for mod, op in _FP32_SETTINGS]
            settings = [s for s in settings if hasattr(s, "fp32_precision")]  # those this torch build has
            _FP32_STATE["saved"] = [(s, s.fp32_precision) for s in settings]
            for s in settings:
                s.fp32_precision = "ieee"
        _FP32_STATE["depth"] += 1
    try:
        yield
    finally:
        with _FP32_LOCK:
            _FP32_STATE["depth"] -= 1
            if _FP32_STATE["depth"] == 0:
                for s, value in _FP32_STATE["saved"]:
                    s.fp32_precision = value
                _FP32_STATE["saved"] = None


def _probe_weights(n: int, like: torch.Tensor) -> torch.Tensor:
    """Fixed, pairwise distinct weights in ``[1, 2)`` (golden-ratio sequence); no RNG is drawn."""
    i = torch.arange(1, n + 1, dtype=torch.float64, device=like.device)  # made where it is used: no copy
    return (1.0 + torch.remainder(i * 0.6180339887498949, 1.0)).to(dtype=like.dtype)


def _conv_geometry(m: nn.Module) -> dict:
    """A Conv1d/Conv2d's kernel, stride, zero padding and dilation as a 2-D convolution's (Conv1d: height 1)."""
    pad = _conv_padding(m)
    if type(m) is nn.Conv1d:
        return {"kernel_size": (1, *m.kernel_size), "stride": (1, *m.stride), "padding": (0, *pad),
                "dilation": (1, *m.dilation)}
    return {"kernel_size": tuple(m.kernel_size), "stride": tuple(m.stride), "padding": pad,
            "dilation": tuple(m.dilation)}


#: examples per grouped convolution in :func:`_conv_per_example`: one fixed shape per layer, so that the
#: convolution library builds its kernel once (a new group count for every Poisson batch size cost up to
#: a second each)
CONV_CHUNK = 32


def _conv_per_example(a: torch.Tensor, d: torch.Tensor, geometry: dict) -> torch.Tensor:
    """Every example's weight gradient of a 2-D convolution, ``(B, C_out, C_in, *kernel)``.

    On the CPU: convolution-weight backwards with :data:`CONV_CHUNK` examples as groups (input
    ``(1, chunk·C_in, …)``, output gradient ``(1, chunk·C_out, …)``), the last chunk padded with zero
    examples. On an accelerator, where a loop of small kernels costs more than memory:
    :func:`_conv_per_example_unfolded`.
    """
    if a.device.type != "cpu":
        return _conv_per_example_unfolded(a, d, geometry)
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


def _conv_per_example_unfolded(a: torch.Tensor, d: torch.Tensor, geometry: dict) -> torch.Tensor:
    """:func:`_conv_per_example` as one batched product: ``G_i = D_i A_iᵀ`` with ``A_i (C_in·k, T)`` the unfolded
    input patches and ``D_i (C_out, T)`` the output gradient (``B·C_in·k·T`` values held at once)."""
    n, c_in, c_out = a.shape[0], a.shape[1], d.shape[1]
    patches = _unfold(a, geometry)  # (B, C_in·k, T)
    g = torch.bmm(d.reshape(n, c_out, -1), patches.transpose(1, 2))
    return g.view(n, c_out, c_in, *geometry["kernel_size"])


def _unfold(a: torch.Tensor, geometry: dict) -> torch.Tensor:
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


def _patch_norms(a: torch.Tensor, geometry: dict) -> torch.Tensor:
    """``||a_{i,t}||`` of every unfolded input patch of a 2-D convolution, ``(B, T)``."""
    ones = a.new_ones(1, 1, *geometry["kernel_size"])
    sq = F.conv2d(a.pow(2).sum(1, keepdim=True), ones, stride=geometry["stride"], padding=geometry["padding"],
                  dilation=geometry["dilation"])
    return sq.clamp_min(0).sqrt().flatten(1)


def _layer_terms(m: nn.Module, a: torch.Tensor, d: torch.Tensor, n: int):
    """What one call of layer ``m`` (input ``a``, output gradient ``d``) adds to each example's gradient.

    Returns ``(weight term, bias term)``.  A weight term is ``("outer", A (B, T, in), D (B, T, out))``,
    the per-example gradient being ``D_iᵀA_i`` (a Linear: positions ``T`` are the extra leading
    dimensions; a convolution: ``A`` the unfolded input patches, ``T`` the output positions, and the
    weight seen as ``(out, in·k…)``), or ``("dense", G (B, *shape), M)``, the per-example gradient
    itself, with ``M()`` the sum of the magnitudes of the terms summed into it ``(B,)`` (the exactness
    check's scale, computed only when checking).  A convolution materialises ``G`` where that costs
    less than the ghost norm (``T² > in·out``, Bu et al. 2022); normalisation layers always
    (``Σ_positions x̂ ⊙ d``, a few values per example).  A bias term is dense: ``Σ_positions d``.
    """
    if type(m) is nn.Linear:
        D = d.reshape(n, -1, d.shape[-1])
        return ("outer", a.reshape(n, -1, a.shape[-1]), D), ("dense", D.sum(1), lambda: D.abs().sum((1, 2)))
    if type(m) in (nn.Conv1d, nn.Conv2d):
        geometry = _conv_geometry(m)
        if type(m) is nn.Conv1d:  # as a 2-D convolution of height 1
            a, d = a.unsqueeze(2), d.unsqueeze(2)
        D = d.reshape(n, d.shape[1], -1)
        bias = ("dense", D.sum(2), lambda: D.abs().sum((1, 2)))
        positions, fan_in = D.shape[2], m.weight[0].numel()
        if positions * positions > fan_in * D.shape[1]:
            g = _conv_per_example(a, d, geometry).view(n, *m.weight.shape)
            return ("dense", g, lambda: (D.norm(dim=1) * _patch_norms(a, geometry)).sum(1)), bias
        patches = _unfold(a, geometry)
        return ("outer", patches.transpose(1, 2), D.transpose(1, 2)), bias
    if type(m) is nn.GroupNorm:  # per channel, summed over the positions after it
        x_hat, dims = F.group_norm(a, m.num_groups, eps=m.eps), tuple(range(2, a.dim()))
    else:  # nn.LayerNorm over its trailing normalized_shape, summed over the positions before it
        x_hat, dims = F.layer_norm(a, m.normalized_shape, eps=m.eps), tuple(range(1, a.dim() - len(m.normalized_shape)))
    terms = x_hat * d
    every = tuple(range(1, a.dim()))
    # (a sum over an empty tuple of dims would sum over all of them)
    return (("dense", terms.sum(dims) if dims else terms, lambda: terms.abs().sum(every)),
            ("dense", d.sum(dims) if dims else d, lambda: d.abs().sum(every)))


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


def _ghost_clipped_sum(model, loss_fn, X, y, max_norm, layers=None, verify=False, valid=None):
    named = _ghost_params(model)
    if layers is not None:
        _check_layers(layers, named)
    trainable = {id(p) for p in named.values()}
    n = X.shape[0]
    calls = []  # (module, weight or None, bias or None, input, output) per call of a GHOST_LAYERS module

    def hook(mod, args, kwargs, out):
        w = mod.weight if getattr(mod, "weight", None) is not None and id(mod.weight) in trainable else None
        b = mod.bias if getattr(mod, "bias", None) is not None and id(mod.bias) in trainable else None
        if (w is None and b is None) or not out.requires_grad:
            return None
        calls.append((mod, w, b, (args[0] if args else kwargs["input"]).detach(), out))
        # hand the rest of the network a copy so that in-place ops downstream
        # (ReLU(inplace=True)) cannot rewrite the tensor whose gradient we take
        return out.clone()

    layers_used = [m for m in model.modules() if type(m) in GHOST_LAYERS]
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
    losses = per_example(_slice_one(out, 1), _slice_one(y, 1))
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
            weight_term, bias_term = _layer_terms(m, a, d, n)
            if wp is not None:
                records[id(wp)].add(weight_term)
            if bp is not None:
                records[id(bp)].add(bias_term)
        sq = {k: records[id(p)].finish(n) for k, p in named.items()}
        norms = (torch.stack(list(sq.values())).sum(0).clamp_min(0).sqrt() / w).detach()
        coef = _without_padding(clip_coefficients(norms, max_norm).to(losses.dtype), valid)
        if layers is None:
            summed = {k: records[id(p)].weighted_sum(coef / w) for k, p in named.items()}
        else:  # per-layer clipping: layer j's part of g_i clipped to max_norm_i/√m
            summed = {}
            for layer in layers:
                part = torch.stack([sq[k] for k in layer]).sum(0).clamp_min(0).sqrt() / w
                c = _without_padding(clip_coefficients(part, max_norm / math.sqrt(len(layers))).to(losses.dtype),
                                     valid)
                summed.update({k: records[id(named[k])].weighted_sum(c / w) for k in layer})
    if check:
        _verify(model, named, records, losses, coef, w, x_leaf, grads1, signature)
    return summed, norms


def _verify(model, named, records, losses, coef, w, x_leaf, grads1, signature) -> None:
    """The exactness check (module docstring, a and b), with the flat coefficients ``coef``.

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


# --------------------------------------------------------------------------- public entry point


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
    (detached).  ``method`` is ``"auto"``, ``"vmap"`` or ``"ghost"`` (see the
    module docstring); ``"ghost"`` raises :class:`GhostUnsupportedError` where
    it would not be exact.  Models refused by :func:`check_batch_independence`
    raise ``ValueError`` for every method.  An empty batch (``B == 0``, as
    Poisson sampling may draw) returns zeros and an empty ``norms``.  Does not
    touch ``p.grad``.  ``layers``: per-layer clipping (see :func:`clipped_sum`), on either path.
    ``verify``: run the ghost path's exactness check on every call, not only on the first call of
    each call structure of the model (see the module docstring).
    ``valid``: only the first ``valid`` examples count; the rest are padding (a batch padded to a size seen
    before), whose clipped gradients are exactly 0 (their norms are still returned).
    """
    if method not in CLIP_METHODS:
        raise ValueError(f"method must be one of {list(CLIP_METHODS)}, got {method!r}")
    n = _batch_size(X, y)
    _check_max_norm(max_norm, n)
    check_batch_independence(model)
    if n == 0:
        params, _ = _split_params(model, None)
        p0 = next(iter(params.values()))
        zeros = {k: torch.zeros_like(p) for k, p in params.items()}
        return zeros, torch.zeros(0, dtype=p0.dtype, device=p0.device)
    if layers is not None and len(layers) == 1:
        layers = None  # one layer: per-layer clipping is flat clipping
    if method != "vmap":
        try:
            with torch.enable_grad():
                return _ghost_clipped_sum(model, loss_fn, X, y, max_norm, layers, verify, valid)
        except GhostUnsupportedError as err:
            if method == "ghost":
                raise GhostUnsupportedError(
                    f"ghost norms would not be exact for this model: {err}; use method='vmap' "
                    "(or 'auto', which falls back to it)"
                ) from err
    grads = _vmap_gradients(model, loss_fn, X, y, None, chunk_size)
    summed, norms = clipped_sum(grads, max_norm, layers, valid)
    return summed, norms.detach()
