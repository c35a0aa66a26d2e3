r"""Exact discrete Laplace and Gaussian noise, on the integers and on a power-of-two grid, and the secure release.

Contract: :func:`secure_discrete_laplace` draws exactly ``P(y) ∝ e^{−|y|/s}`` on ℤ, :func:`secure_discrete_gaussian`
exactly ``P(y) ∝ e^{−y²/(2σ²)}`` (Canonne, Kamath & Steinke 2020, "The discrete Gaussian for differential
privacy", Algorithms 2 and 3), each reduced to the exact Bernoulli(e^{−r}) of :mod:`~dpfair.privacy.samplers.exact`.
:func:`secure_gaussian` / :func:`secure_laplace` return ``g·Y`` on the grid ``gℤ`` (``g`` a power of two, by
default :func:`default_granularity`), exact float64 values. :func:`add_secure_gaussian` / :func:`add_secure_laplace`
release ``round(x/g)·g + g·Y`` in float64, the correctly rounded sum of two grid values, so the output is a
function of the exact mechanism output ``round(x/g) + Y`` (post-processing); the rounding costs sensitivity
(:mod:`~dpfair.privacy.samplers.grid_accounting`). This is OpenDP's route against the floating-point attacks on
textbook samplers (Mironov 2012; Jin et al. 2022). The samplers are not constant-time: the number of rejections
correlates with the noise drawn. The derivations: the guide's :ref:`secure-noise`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from dpfair.privacy.samplers.exact import bernoulli_exp_neg, check_shape, geometric, random_u32, random_u64

__all__ = [
    "GRID_BITS",
    "add_secure_gaussian",
    "add_secure_laplace",
    "default_granularity",
    "round_to_grid",
    "secure_discrete_gaussian",
    "secure_discrete_laplace",
    "secure_gaussian",
    "secure_laplace",
]

#: Default grid: ``g = 2^(⌊log₂ scale⌋ − GRID_BITS)``, i.e. the noise scale is 2^30 to 2^31 grid steps.
GRID_BITS = 30

# Block bits of the discrete Laplace split M = L·H + W: L = 2^(⌊log₂ s⌋ − _BLOCK_BITS).
_BLOCK_BITS = 12
# Largest scale (grid steps) of the integer samplers: keeps every integer below 2^53 and L ≤ 2^31.
_MAX_SCALE = 2.0**42
_MIN_SCALE = 2.0**-30
# Draws are made in chunks of this many values: numpy's passes then stay in cache (measured: docs/guide/benchmarks.md).
_CHUNK = 1 << 16


# ---- validation -----------------------------------------------------------------------------------------------


def check_positive(value, name: str, lo: float = 0.0, hi: float = math.inf) -> float:
    """``value`` as a positive finite float in ``[lo, hi]``; ``ValueError`` naming ``name`` otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if not lo <= v <= hi:
        raise ValueError(f"{name} must lie in [{lo:g}, {hi:g}], got {v!r}")
    return v


def resolve_granularity(granularity, scale: float, name: str) -> float:
    """The grid of noise of scale ``scale``: ``granularity`` (a power of two leaving 2^-30 to 2^42 grid steps)
    or, when ``None``, :func:`default_granularity`."""
    if granularity is None:
        return default_granularity(scale)
    g = check_pow2(granularity)
    steps = scale / g
    if not _MIN_SCALE <= steps <= _MAX_SCALE:
        raise ValueError(f"{name}/granularity = {steps:g} grid steps; it must lie in [2^-30, 2^42] "
                         f"(use the default granularity)")
    return g


def default_granularity(scale: float) -> float:
    """The default grid for noise of standard deviation (or Laplace scale) ``scale``: ``2^(⌊log₂ scale⌋ − 30)``.

    So ``scale/g ∈ [2^30, 2^31)``.
    """
    s = check_positive(scale, "scale", 2.0**-900, 2.0**900)
    _, exponent = math.frexp(s)  # s = m·2^e, m ∈ [0.5, 1): ⌊log₂ s⌋ = e − 1
    return math.ldexp(1.0, exponent - 1 - GRID_BITS)


def check_pow2(granularity) -> float:
    """``granularity`` as a float; ``ValueError`` unless it is a power of two in ``[2^-1000, 2^1000]``."""
    g = check_positive(granularity, "granularity")
    mantissa, exponent = math.frexp(g)
    if mantissa != 0.5 or not -1000 <= exponent <= 1000:
        raise ValueError(f"granularity must be a power of two in [2^-1000, 2^1000], got {granularity!r}")
    return g


# ---- integer samplers -----------------------------------------------------------------------------------------


def _dlap_magnitudes(n: int, s: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws of ``M`` with ``P(M = m) ∝ e^{−m/s}`` on ``m ≥ 0``, and ``n`` independent fair bits.

    ``M = L·H + W`` with independent parts (the guide's :ref:`secure-noise`).
    """
    s_exact = Fraction(s)
    _, exponent = math.frexp(s)
    block = 1 << max(0, exponent - 1 - _BLOCK_BITS)
    words = random_u64(n)
    high = geometric(words >> np.uint64(11), Fraction(block) / s_exact)  # top 53 bits
    negative = (words & np.uint64(1)).astype(bool)  # bit 0: independent of the top 53
    if block == 1:
        return high, negative
    low = np.empty(n, dtype=np.int64)
    # W uniform on [0, L) from the low 32 bits, accepted with probability e^{−W/s} ≥ e^{−L/s} ≥ e^{−2^−12}
    # using the top 32 bits U: certainly accepted when u_hi = (u+1)·2^−32 ≤ e^{−L/s} − 2^−30.
    sure = np.uint64(math.floor((math.exp(-block / s) - 2.0**-30) * 2.0**32) - 1)
    filled = 0
    while filled < n:
        k = n - filled
        words = random_u64(k + k // 512 + 8)
        w = (words & np.uint64(block - 1)).astype(np.int64)
        u = words >> np.uint64(32)
        accept = u <= sure
        rest = np.flatnonzero(~accept)
        if len(rest):
            wr = w[rest]
            accept[rest] = bernoulli_exp_neg(u[rest], 32, wr / s, lambda i: Fraction(int(wr[i])) / s_exact)
        w = w[accept][:k]
        low[filled:filled + len(w)] = w
        filled += len(w)
    return high * block + low, negative


def _dlap(n: int, s: float) -> np.ndarray:
    """``n`` exact draws of the discrete Laplace ``P(Y = y) ∝ e^{−|y|/s}`` on ℤ: ``±M``, ``(−, 0)`` rejected."""
    out = np.empty(n, dtype=np.int64)
    zero_rate = -math.expm1(-1.0 / s) / 2.0  # P(rejected) = P(M = 0)/2
    filled = 0
    while filled < n:
        k = n - filled
        m = k + int(k * zero_rate * 1.1 + 6 * math.sqrt(k * zero_rate)) + 16
        mag, negative = _dlap_magnitudes(m, s)
        keep = ~(negative & (mag == 0))
        y = np.where(negative, -mag, mag)[keep][:k]
        out[filled:filled + len(y)] = y
        filled += len(y)
    return out


def _dgauss(n: int, sigma: float) -> np.ndarray:
    """``n`` exact draws of the discrete Gaussian ``P(Y = y) ∝ e^{−y²/(2σ²)}`` on ℤ (CKS20 Algorithm 3).

    ``Y`` discrete Laplace with scale ``t = ⌊σ⌋ + 1``, accepted with probability
    ``exp(−(|Y| − σ²/t)²/(2σ²))``. Float ``γ`` is within ``(4γ + 2)·2^−52`` of the exact value.
    """
    t = math.floor(sigma) + 1
    s2 = sigma * sigma
    s2_exact = Fraction(sigma) ** 2
    s2t_exact = s2_exact / t
    x = sigma / t  # acceptance → √(π/2)·x·e^{−x²/2} (≈ 0.76 for large σ); smaller σ: a first guess
    rate = max(0.3, math.sqrt(math.pi / 2) * x * math.exp(-x * x / 2) - 0.01) if sigma > 4 else 0.3
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        k = n - filled
        m = int(k / rate + 6 * math.sqrt(k)) + 32
        y = _dlap(m, float(t))
        ay = np.abs(y)
        a = ay.astype(np.float64) - s2 / t
        gamma = a * a / (2.0 * s2)

        def exact_gamma(i: int) -> Fraction:
            return (Fraction(int(ay[i])) - s2t_exact) ** 2 / (2 * s2_exact)

        accept = bernoulli_exp_neg(random_u32(m), 32, gamma, exact_gamma)
        y = y[accept][:k]
        out[filled:filled + len(y)] = y
        filled += len(y)
    return out


def _chunked(draw: Callable[[int, float], np.ndarray], n: int, param: float) -> np.ndarray:
    """``draw(n, param)`` made in chunks of ``_CHUNK`` values (independent draws, so the law is unchanged)."""
    if n <= _CHUNK:
        return draw(n, param)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        out[start:stop] = draw(stop - start, param)
    return out


# ---- public samplers ------------------------------------------------------------------------------------------


def secure_discrete_gaussian(shape, sigma: float) -> np.ndarray:
    """Exact draws of the discrete Gaussian ``P(y) ∝ exp(−y²/(2σ²))`` on the integers (int64).

    ``σ`` is the float given (``σ²`` its exact square), ``2^−30 ≤ σ ≤ 2^42``. The variance is ``σ²``
    up to a relative ``O(e^{−2π²σ²})`` (and smaller than ``σ²``).
    """
    dims = check_shape(shape)
    sigma = check_positive(sigma, "sigma", _MIN_SCALE, _MAX_SCALE)
    return _chunked(_dgauss, math.prod(dims), sigma).reshape(dims)


def secure_discrete_laplace(shape, scale: float) -> np.ndarray:
    """Exact draws of the discrete Laplace ``P(y) ∝ exp(−|y|/scale)`` on the integers (int64).

    ``2^−30 ≤ scale ≤ 2^42``; variance ``2q/(1 − q)²``, ``q = e^{−1/scale}``.
    """
    dims = check_shape(shape)
    scale = check_positive(scale, "scale", _MIN_SCALE, _MAX_SCALE)
    return _chunked(_dlap, math.prod(dims), scale).reshape(dims)


def secure_gaussian(shape, std: float, *, granularity: float | None = None) -> np.ndarray:
    """Gaussian noise of standard deviation ``std`` on the grid ``g·ℤ`` (float64): ``g·Y``, ``Y ~ N_ℤ(0, (std/g)²)``.

    Every value is an exact multiple of ``g`` (default :func:`default_granularity`). Add it to a
    sum rounded to the same grid, in float64 — :func:`add_secure_gaussian` — and charge
    :func:`~dpfair.privacy.samplers.grid_accounting.grid_sensitivity`; see the guide's :ref:`secure-noise`.
    """
    dims = check_shape(shape)
    std = check_positive(std, "std")
    g = resolve_granularity(granularity, std, "std")
    return (_chunked(_dgauss, math.prod(dims), std / g).astype(np.float64) * g).reshape(dims)


def secure_laplace(shape, scale: float, *, granularity: float | None = None) -> np.ndarray:
    """Laplace noise of scale ``scale`` on the grid ``g·ℤ`` (float64): ``g·Y``, ``P(Y = y) ∝ e^{−|y|·g/scale}``.

    Variance ``2·scale² − g²/6`` (to ``O(g⁴/scale²)``). Use with :func:`add_secure_laplace`;
    the release is exactly ``ε = Δ₁'/scale`` pure DP with ``Δ₁' = Δ₁ + g·k``
    (:mod:`~dpfair.privacy.samplers.grid_accounting`).
    """
    dims = check_shape(shape)
    scale = check_positive(scale, "scale")
    g = resolve_granularity(granularity, scale, "scale")
    return (_chunked(_dlap, math.prod(dims), scale / g).astype(np.float64) * g).reshape(dims)


# ---- releases -------------------------------------------------------------------------------------------------


def round_to_grid(values, granularity: float) -> np.ndarray:
    """``values`` rounded to the nearest multiple of the power of two ``granularity`` (float64, exact; ties to even)."""
    g = check_pow2(granularity)
    x = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("values to release must be finite")
    return np.rint(x / g) * g


def _to_numpy(values):
    """``(float64 array, restore)``: torch tensors go to CPU float64 and come back with their dtype and device."""
    if type(values).__module__.split(".")[0] == "torch":
        import torch

        if not values.dtype.is_floating_point:
            raise ValueError(f"values to release must be a floating tensor, got {values.dtype}")
        dtype, device = values.dtype, values.device
        arr = values.detach().to(device="cpu", dtype=torch.float64).numpy()
        return arr, lambda out: torch.from_numpy(out).to(device=device, dtype=dtype)
    return np.asarray(values, dtype=np.float64), lambda out: out


def add_secure_gaussian(values, std: float, *, granularity: float | None = None):
    """``round(values/g)·g + g·Y`` in float64 (``Y`` discrete Gaussian, ``std/g``): the secure Gaussian release.

    ``values``: array-like or torch tensor (the result comes back as the same kind, dtype and
    device; a float32 cast happens only after the exact float64 addition, as post-processing).
    Privacy: L2 sensitivity ``Δ₂ + g·√k`` (:func:`~dpfair.privacy.samplers.grid_sensitivity`,
    :func:`~dpfair.privacy.samplers.secure_gaussian_accounting`).
    """
    std = check_positive(std, "std")
    g = resolve_granularity(granularity, std, "std")
    x, restore = _to_numpy(values)
    out = round_to_grid(x, g) + secure_gaussian(x.shape, std, granularity=g)
    return restore(out)


def add_secure_laplace(values, scale: float, *, granularity: float | None = None):
    """``round(values/g)·g + g·Y`` in float64 (``Y`` discrete Laplace, ``scale/g``): the secure Laplace release.

    Exactly ``ε = (Δ₁ + g·k)/scale`` pure DP (:func:`~dpfair.privacy.samplers.secure_laplace_accounting`).
    """
    scale = check_positive(scale, "scale")
    g = resolve_granularity(granularity, scale, "scale")
    x, restore = _to_numpy(values)
    out = round_to_grid(x, g) + secure_laplace(x.shape, scale, granularity=g)
    return restore(out)
