"""Neural-network building blocks: small models and per-sample (clipped) gradients.

Models (:mod:`dpfair.nn.models`) return logits ``(B, n_classes)``; the
per-sample machinery (:mod:`dpfair.nn.per_sample`) computes the clipped
gradient sums DP-SGD needs, with ``torch.func`` (any module) or ghost norms
(models whose trainable layers have a ghost rule, :func:`ghost_rule`: ``nn.Linear``,
``nn.Conv1d``/``nn.Conv2d``, ``nn.GroupNorm``, ``nn.LayerNorm``); :mod:`dpfair.nn.validator` checks
and fixes a user's module for layers that mix the examples of a batch.
"""

from dpfair.nn.models import (
    CNN,
    MLP,
    MODEL_NAMES,
    LogisticRegression,
    count_parameters,
    init_parameters,
    make_model,
)
from dpfair.nn.per_sample import (
    CLIP_METHODS,
    GhostUnsupportedError,
    apply_gradient,
    assign_grads,
    check_batch_independence,
    clip_coefficients,
    clipped_gradient_sum,
    clipped_sum,
    ghost_layers,
    ghost_rule,
    ghost_supported,
    layer_groups,
    padded_size,
    pads,
    per_sample_gradients,
    per_sample_norms,
    trainable_params,
)
from dpfair.nn.validator import ModuleProblem, fix_module, validate_module

__all__ = [
    "CLIP_METHODS",
    "CNN",
    "GhostUnsupportedError",
    "LogisticRegression",
    "MLP",
    "MODEL_NAMES",
    "ModuleProblem",
    "apply_gradient",
    "assign_grads",
    "check_batch_independence",
    "clip_coefficients",
    "clipped_gradient_sum",
    "clipped_sum",
    "count_parameters",
    "fix_module",
    "ghost_layers",
    "ghost_rule",
    "ghost_supported",
    "layer_groups",
    "padded_size",
    "pads",
    "init_parameters",
    "make_model",
    "per_sample_gradients",
    "per_sample_norms",
    "trainable_params",
    "validate_module",
]
