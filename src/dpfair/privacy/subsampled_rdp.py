"""Rényi DP of the Poisson-subsampled Gaussian under replace-one, which dp_accounting's RDP accountant lacks.

dp_accounting's RDP accountant composes a ``PoissonSampledDpEvent`` under ``ADD_OR_REMOVE_ONE`` only
(Mironov, Talwar, Zhang 2019), yet DP-FERMI and PF-LD release Poisson-sampled Gaussian sums under
``REPLACE_ONE`` (the sensitive unit), and the repeated-run bounds of private selection
(:mod:`dpfair.selection`, dp_accounting's ``RepeatAndSelectDpEvent``) exist only in RDP. This module
gives the accountant those Rényi divergences.

The pair. dp_accounting's PLD accountant accounts this release by its dominating pair (the REPLACE
case of ``pld.privacy_loss_mechanism.AdditiveNoisePrivacyLoss``): with noise multiplier σ and sampling
rate q, in units of the bound,

    P = (1 − q)·N(0, σ²) + q·N(−1, σ²),    Q = (1 − q)·N(0, σ²) + q·N(+1, σ²).

A pair that dominates in every hockey-stick divergence dominates in every Rényi divergence too (by
Blackwell's theorem one is a post-processing of the other, and Rényi divergences do not grow under
post-processing), so the Rényi divergences of this pair bound those of the mechanism. P and Q are
mirror images (x ↦ −x), so D_α(P‖Q) = D_α(Q‖P).

The integral. With t = 1/σ and x in units of σ,

    exp((α − 1)·D_α(P‖Q)) = ∫ φ(x) · a(x)^α · b(x)^(1−α) dx,
    a(x) = 1 − q + q·e^(−t·x − t²/2),   b(x) = 1 − q + q·e^(t·x − t²/2),

a one-dimensional integral of a smooth, Gaussian-tailed function, evaluated by the trapezoid rule in
log space on a grid of step ``0.02·min(1, σ)`` covering ``[−α·t − 40, 40]`` (the integrand's mass lies
around 0, −(α − 1)·t and −α·t). For such integrands the trapezoid rule converges geometrically in
1/step; the result is divided by the same rule's integral of φ, so the discretisation of the Gaussian
weight cancels, and it is capped by the unsampled value 2α/σ² (by joint quasi-convexity of Rényi
divergence the mixture costs at most its components). q = 1 gives 2α/σ² exactly (a pinned test), and
the ε converted from these divergences never falls below the PLD's (another).

Bounded cost. The grid has about (α·t + 2·40)/(0.02·min(1, σ)) points, ≈ 50·α/σ² for small σ: without
a limit it grows without bound as σ → 0 (a huge target ε). Above :data:`MAX_POINTS` points the divergence is
taken from a closed-form upper bound instead. Q ≥ (1 − q)·N(0, σ²) pointwise and 1 − α < 0, so
Q^(1−α) ≤ ((1 − q)·N(0, σ²))^(1−α); and ∫p^α·r^(1−α) is jointly convex in (p, r) (the perspective of
the convex u ↦ u^α), so splitting P = (1 − q)·N(0, σ²) + q·N(−1, σ²) against
N(0, σ²) = (1 − q)·N(0, σ²) + q·N(0, σ²) gives

    D_α(P‖Q) ≤ log(1/(1 − q)) + log(1 − q + q·e^((α − 1)·α·t²/2)) / (α − 1),

(α·t²/2 = D_α(N(−1, σ²)‖N(0, σ²))), still capped by 2α/σ². It holds at every σ; as σ → 0 the exact
value tends to α·t²/2 + (α·log q)/(α − 1) + log(1/(1 − q)) (the integrand's mass near −α·t, where
P ≈ q·N(−1, σ²) and Q ≈ (1 − q)·N(0, σ²)), so the bound's excess tends to log(1/q) nats beside a
divergence that grows as α·t²/2. Each order costs at most :data:`MAX_POINTS` evaluations, whatever σ.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import logsumexp

__all__ = ["replace_one_sampled_gaussian_rdp"]

#: Step of the trapezoid grid, in units of the noise (times min(1, σ) when the shift 1/σ exceeds 1).
STEP = 0.02

#: Half-width of the grid beyond the integrand's outermost bump, in units of the noise.
TAIL = 40.0

#: Largest trapezoid grid; beyond it (a tiny σ) the closed-form bound of the module docstring is used.
MAX_POINTS = 100_000


def replace_one_sampled_gaussian_rdp(noise_multiplier: float, sampling_probability: float, orders) -> np.ndarray:
    """Rényi divergences D_α, one per order α > 1, of one Poisson-sampled Gaussian release under replace-one.

    ``noise_multiplier`` σ and ``sampling_probability`` q as in dp_accounting's
    ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))`` (σ: the noise over the radius of the ball each
    person's contribution lies in). σ = 0 gives ∞; q = 0 gives 0.
    """
    orders = np.asarray(orders, dtype=np.float64)
    if np.any(orders <= 1.0):
        raise ValueError("Rényi orders must exceed 1")
    return np.array([_rdp(float(noise_multiplier), float(sampling_probability), float(a)) for a in orders])


@lru_cache(maxsize=65536)
def _rdp(sigma: float, q: float, alpha: float) -> float:
    """D_α of one release: a pure function of (σ, q, α), tabled because every prefix of an ε curve and every
    repeated-run bound composes the same few (σ, q) again (below the accounting memo, :mod:`dpfair.privacy.memo`)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"sampling_probability must lie in [0, 1], got {q}")
    if q == 0.0:
        return 0.0
    if sigma <= 0.0:
        return math.inf
    t = 1.0 / sigma
    unsampled = 2.0 * alpha * t * t  # D_α(N(−1, σ²) ‖ N(1, σ²))
    if q == 1.0:
        return unsampled
    step = STEP * min(1.0, sigma)
    if (alpha * t + 2.0 * TAIL) / step > MAX_POINTS:
        return _closed_form_bound(t, q, alpha, unsampled)
    x = np.arange(-alpha * t - TAIL, TAIL + step, step)
    log_phi = -0.5 * x * x
    log_a = np.logaddexp(math.log1p(-q), math.log(q) - t * x - 0.5 * t * t)
    log_b = np.logaddexp(math.log1p(-q), math.log(q) + t * x - 0.5 * t * t)
    log_ratio = logsumexp(log_phi + alpha * log_a + (1.0 - alpha) * log_b) - logsumexp(log_phi)
    return float(min(max(log_ratio / (alpha - 1.0), 0.0), unsampled))


def _closed_form_bound(t: float, q: float, alpha: float, unsampled: float) -> float:
    """log(1/(1 − q)) + log(1 − q + q·e^((α − 1)·α·t²/2)) / (α − 1), capped by the unsampled value
    (module docstring), in log space: never overflows (a huge exponent gives ∞, capped)."""
    with np.errstate(over="ignore"):
        shifted = np.logaddexp(math.log1p(-q), math.log(q) + (alpha - 1.0) * alpha * t * t / 2.0)
    return float(min(max(-math.log1p(-q) + shifted / (alpha - 1.0), 0.0), unsampled))
