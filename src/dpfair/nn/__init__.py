"""Neural-network building blocks: small models and per-sample (clipped) gradients.

Models (:mod:`dpfair.nn.models`) return logits ``(B, n_classes)``; the
per-sample machinery (:mod:`dpfair.nn.per_sample`) computes the clipped
gradient sums DP-SGD needs, with ``torch.func`` (any module) or ghost norms
(models made of ``nn.Linear`` and parameter-free layers).
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
    ghost_supported,
    layer_groups,
    per_sample_gradients,
    per_sample_norms,
    trainable_params,
)

__all__ = [
    "CLIP_METHODS",
    "CNN",
    "GhostUnsupportedError",
    "LogisticRegression",
    "MLP",
    "MODEL_NAMES",
    "apply_gradient",
    "assign_grads",
    "check_batch_independence",
    "clip_coefficients",
    "clipped_gradient_sum",
    "clipped_sum",
    "count_parameters",
    "ghost_supported",
    "layer_groups",
    "init_parameters",
    "make_model",
    "per_sample_gradients",
    "per_sample_norms",
    "trainable_params",
]
