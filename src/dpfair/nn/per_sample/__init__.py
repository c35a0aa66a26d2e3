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

Contract
--------
``max_norm`` is one positive finite bound ``C`` or a 1-D tensor of shape ``(B,)``
holding one bound ``C_i`` per example (group-aware clipping).
:func:`clipped_gradient_sum` returns ``sum_i c_i g_i`` with
``c_i = min(1, C_i / ||g_i||)`` (1 where ``g_i = 0``): each example adds at most
``C_i`` (L2), so removing it changes the sum by at most ``C_i``
(:mod:`~dpfair.nn.per_sample.clipping`; per layer: McMahan et al. 2018).  That
bound needs the loss of example ``i`` to depend on example ``i`` alone and the
model to keep no state learnt from the batch: BatchNorm normalising with the
batch's statistics, and InstanceNorm learning running statistics in training
mode, are refused for every method
(:func:`~dpfair.nn.per_sample.model.check_batch_independence`; the fix:
:func:`dpfair.nn.fix_module`, or eval mode with frozen running statistics).
Dropout is allowed.

The methods (:data:`~dpfair.nn.per_sample.methods.CLIP_METHODS`): ``"vmap"``
runs every example alone through ``torch.func`` (:mod:`~dpfair.nn.per_sample.vmap`;
any module); ``"ghost"`` reads the norms and the clipped sum off one forward and
one backward pass (ghost norms with book-keeping: Goodfellow 2015; Li et al. 2022;
Bu et al. 2022's mixed ghost clipping; :mod:`~dpfair.nn.per_sample.ghost`), with
one rule per layer type (:func:`~dpfair.nn.per_sample.ghost_rules.ghost_rule`),
and runs only where a check against autograd finds it exact; ``"auto"`` is
``"ghost"`` where it passes its checks, else ``"vmap"``.  The derivation of the
ghost norms and of the exactness check is in the guide (:ref:`ghost-norms`).

The modules: :mod:`~dpfair.nn.per_sample.model` (parameters, layers, the
independence check), :mod:`~dpfair.nn.per_sample.clipping` (bounds, coefficients,
clipped sums), :mod:`~dpfair.nn.per_sample.vmap`,
:mod:`~dpfair.nn.per_sample.ghost_rules` (the registry of per-layer rules),
:mod:`~dpfair.nn.per_sample.ghost` (the ghost engine and its check),
:mod:`~dpfair.nn.per_sample.precision` (IEEE float32 for the check),
:mod:`~dpfair.nn.per_sample.methods` (:func:`clipped_gradient_sum`).  The padding
of Poisson batches (:func:`pads`, :func:`padded_size`) is defined here, so that
:data:`PADDED_DEVICES` is the one setting :func:`pads` reads.
"""

from __future__ import annotations

import math

import torch

from dpfair.nn.per_sample.clipping import clip_coefficients, clipped_sum, per_sample_norms
from dpfair.nn.per_sample.ghost import ghost_supported
from dpfair.nn.per_sample.ghost_rules import (
    CONV_CHUNK,
    GHOST_LAYERS,
    GhostRule,
    GhostUnsupportedError,
    ghost_layers,
    ghost_rule,
    ghost_rule_for,
)
from dpfair.nn.per_sample.methods import CLIP_METHODS, clipped_gradient_sum
from dpfair.nn.per_sample.model import (
    LossFn,
    apply_gradient,
    assign_grads,
    check_batch_independence,
    layer_groups,
    trainable_params,
)
from dpfair.nn.per_sample.precision import ieee_float32
from dpfair.nn.per_sample.vmap import per_sample_gradients

__all__ = [
    "CLIP_METHODS",
    "GhostRule",
    "GhostUnsupportedError",
    "apply_gradient",
    "assign_grads",
    "check_batch_independence",
    "clip_coefficients",
    "clipped_gradient_sum",
    "clipped_sum",
    "ghost_layers",
    "ghost_rule",
    "ghost_rule_for",
    "ghost_supported",
    "ieee_float32",
    "layer_groups",
    "padded_size",
    "pads",
    "per_sample_gradients",
    "per_sample_norms",
    "trainable_params",
]

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
    by under 1/√μ of the batch (6 % at μ = 256, 1.6 % at 4096). Both numbers are public. The rows past the
    batch are padding: :func:`clipped_gradient_sum`'s ``valid`` gives their clipped gradients the weight 0.
    """
    grain = 1 << max(0, int(math.floor(math.log2(max(expected, 1.0)) / 2)))
    return -(-b // grain) * grain
