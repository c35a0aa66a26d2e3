"""FairDP's Theorem 1: the clipping bias and the noise variance of one DP-SGD step.

For a step with learning rate μ_t on an L-smooth objective f, batch size n,
clipping bound C and noise multiplier σ (noise ``N(0, σ²C²I)`` on the sum of
the clipped per-sample gradients g_i, over d parameters), the FairDP appendix
(Theorem 1) bounds the two ways the step departs from ``−μ_t ∇f(θ_t)``:

* clipping bias ``2 (1 + 1/(μ_t L)) ‖∇f(θ_t)‖ · b + b²``, with the mean excess
  norm ``b = (1/n) Σ_{‖g_i‖ > C} (‖g_i‖ − C)``;
* noise variance ``σ² C² d / n²``.

The bias grows as C falls (more examples clipped) and the variance grows with
C: FairDP chooses each group's C_k to minimise their sum for that group
(:class:`dpfair.algorithms.clipping.FairDPClipping`), with ``b`` taken over the
group's examples and ``n`` the batch size (the noise is added once, to the
whole batch).

The functions take per-sample norms, or a histogram of them (``norms`` the
bins' representative values, ``counts`` their — possibly noisy — counts):
both are a weighted set of norms. They are pure arithmetic on what they are
given; a private method passes released (noisy) statistics only.
"""

from __future__ import annotations

import math

import numpy as np

from dpfair.utils.validation import check_positive

__all__ = ["bias_variance_terms", "clipping_bias", "mean_excess_norm", "noise_variance"]


def _weighted(norms, counts) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(norms, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(g)) or np.any(g < 0):
        raise ValueError("norms must be finite and non-negative (per-sample gradient norms or histogram values)")
    w = np.ones_like(g) if counts is None else np.asarray(counts, dtype=np.float64).reshape(-1)
    if w.shape != g.shape:
        raise ValueError(f"counts has {w.size} entries but norms has {g.size}; pass one count per norm")
    if not np.all(np.isfinite(w)):
        raise ValueError("counts must be finite")
    return g, np.clip(w, 0.0, None)  # noisy counts below zero count as empty


def mean_excess_norm(norms, clip, counts=None) -> np.ndarray:
    """``b(C) = (1/n) Σ_i (‖g_i‖ − C)_+`` for each C in ``clip`` (``n = Σ counts``; 0 for an empty set)."""
    g, w = _weighted(norms, counts)
    c = np.atleast_1d(np.asarray(clip, dtype=np.float64))
    if np.any(~np.isfinite(c)) or np.any(c <= 0):
        raise ValueError("clip must hold positive finite clipping bounds")
    total = w.sum()
    if total <= 0:
        return np.zeros_like(c)
    return (np.clip(g[None, :] - c[:, None], 0.0, None) * w[None, :]).sum(axis=1) / total


def clipping_bias(norms, clip, *, gradient_norm, learning_rate, smoothness, counts=None) -> np.ndarray:
    """Theorem 1's clipping-bias bound ``2(1 + 1/(μL))‖∇f‖·b + b²`` for each C in ``clip``."""
    mu = check_positive(learning_rate, "learning_rate")
    lip = check_positive(smoothness, "smoothness")
    grad = check_positive(gradient_norm, "gradient_norm", allow_zero=True)
    b = mean_excess_norm(norms, clip, counts)
    return 2.0 * (1.0 + 1.0 / (mu * lip)) * grad * b + b**2


def noise_variance(clip, *, noise_multiplier, n_params, batch_size) -> np.ndarray:
    """Theorem 1's noise variance ``σ² C² d / n²`` for each C in ``clip``."""
    sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    d = check_positive(n_params, "n_params", integer=True)
    n = check_positive(batch_size, "batch_size")
    c = np.atleast_1d(np.asarray(clip, dtype=np.float64))
    return sigma**2 * c**2 * d / n**2


def bias_variance_terms(norms, clip, *, noise_multiplier, n_params, batch_size, learning_rate, smoothness=None,
                        gradient_norm, counts=None) -> tuple[np.ndarray, np.ndarray]:
    """``(bias, variance)`` of Theorem 1 for each C in ``clip``; ``smoothness=None`` takes ``L = 1/μ``.

    ``L = 1/μ`` (the step size matched to the curvature; Theorem 1 needs ``μ < 2/L``)
    makes the bias coefficient ``2(1 + 1) = 4``.
    """
    mu = check_positive(learning_rate, "learning_rate")
    lip = 1.0 / mu if smoothness is None else smoothness
    if not math.isfinite(float(lip)):
        raise ValueError(f"smoothness must be finite, got {smoothness!r}")
    bias = clipping_bias(norms, clip, gradient_norm=gradient_norm, learning_rate=mu, smoothness=lip, counts=counts)
    return bias, noise_variance(clip, noise_multiplier=noise_multiplier, n_params=n_params, batch_size=batch_size)
