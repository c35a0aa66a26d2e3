r"""Exact categorical draws: k-ary randomized response and the exponential mechanism.

Contract: :func:`secure_randomized_response` keeps each value with probability exactly ``e^ε/(e^ε + k − 1)``, else
gives a uniform other one, in a running time that does not depend on the values; :func:`secure_exponential_mechanism`
draws an index exactly ``∝ exp(w_i)`` for the float log-weights given (their rounding error adds to the
sensitivity), by rejection from uniform proposals, in a running time that depends on ``Σ e^{w_i − max w}`` (a timing
channel). Both take their coins and their exact Bernoulli(e^{−r}) from :mod:`~dpfair.privacy.samplers.exact`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpfair.privacy.samplers.exact import bernoulli_exp_neg, check_shape, integers_below, random_u32

__all__ = ["secure_exponential_mechanism", "secure_randomized_response"]


def secure_randomized_response(values, epsilon: float, k: int) -> np.ndarray:
    """Exact k-ary randomized response: keep each value with probability ``e^ε/(e^ε + k − 1)``, else a uniform
    other one.

    Drawn as the exponential mechanism with weight ``e^ε`` on the true value: propose a uniform
    category, accept the true one always and another with probability ``e^{−ε}`` (exact). The number
    of proposals does not depend on the values (acceptance ``(1 + (k−1)e^{−ε})/k`` for everyone).
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"k must be an integer >= 2, got {k!r}")
    k = int(k)
    eps = float(epsilon)
    if math.isnan(eps) or eps < 0:
        raise ValueError(f"epsilon must be non-negative, got {epsilon!r}")
    v = np.asarray(values)
    if v.size and (not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= k):
        raise ValueError(f"values must be integers in [0, {k})")
    v = v.astype(np.int64)
    if math.isinf(eps):
        return v.copy()
    flat = v.reshape(-1)
    out = np.empty_like(flat)
    todo = np.arange(len(flat))
    r_exact = Fraction(eps)
    while len(todo):
        proposal = integers_below(len(todo), k)
        same = proposal == flat[todo]
        accept = same.copy()
        other = np.flatnonzero(~same)
        if len(other):
            accept[other] = bernoulli_exp_neg(random_u32(len(other)), 32, np.full(len(other), eps), lambda i: r_exact)
        out[todo[accept]] = proposal[accept]
        todo = todo[~accept]
    return out.reshape(v.shape)


def secure_exponential_mechanism(log_weights, size=None):
    """Exact draws of an index ``i`` with probability ``∝ exp(log_weights[i])`` (``−inf``: weight 0).

    For the exponential mechanism pass ``log_weights = ε·score/(2Δ)`` (or ``ε·score/Δ`` for monotone
    scores). The draw is exact for the float log-weights given; their float rounding error adds to the
    sensitivity (``|w_i(D) − w_i(D')| ≤ ε/2 + err``). Rejection from uniform proposals: the running
    time grows with ``n / Σ_i e^{w_i − max w}``, which depends on the data (a timing channel).
    Returns an int (``size=None``) or an int64 array of ``size``.
    """
    w = np.asarray(log_weights, dtype=np.float64)
    if w.ndim != 1 or len(w) == 0:
        raise ValueError("log_weights must be a non-empty 1-d array")
    if np.any(np.isnan(w)) or np.any(w == np.inf):
        raise ValueError("log_weights must not contain NaN or +inf")
    top = float(w.max())
    if top == -np.inf:
        raise ValueError("at least one log-weight must be finite")
    dims = (1,) if size is None else check_shape(size)
    n = math.prod(dims)
    finite = np.isfinite(w)
    r = np.where(finite, top - np.where(finite, w, top), np.inf)
    top_exact = Fraction(top)
    rate = float(np.mean(np.exp(-r)))  # acceptance per proposal (approximate, only to size batches)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        m = min(int(need / rate * 1.2) + 32, 1 << 24)
        idx = integers_below(m, len(w))
        keep = np.isfinite(r[idx])
        idx = idx[keep]
        rr = r[idx]
        accept = bernoulli_exp_neg(random_u32(len(idx)), 32, rr,
                                   lambda i: top_exact - Fraction(float(w[idx[i]])))
        got = idx[accept][:need]
        out[filled:filled + len(got)] = got
        filled += len(got)
    return int(out[0]) if size is None else out.reshape(dims)
