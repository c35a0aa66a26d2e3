"""How likely a prediction is to flip: Theorem 3.1's tail bounds (Mangold et al., App. B).

With ``r = |ρ(h, X, Y)| / L_{X,Y}`` the normalised margin of the reference model h
(:func:`dpfair.bounds.margins.normalized_margins`) and ``d ≥ ‖h − h'‖``, the first
step of Theorem 3.1's proof gives, for any event E, ::

    |P(H(X) = Y | E) − P(H'(X) = Y | E)| ≤ P(r ≤ d | E),

and the paper then bounds the right-hand side:

* **Markov** (Theorem 3.1 as stated): ``P(r ≤ d) ≤ d · E[1/r]``;
* **Chernoff** (Remark B.1): ``P(r ≤ d) ≤ inf_{t ≥ 0} e^{t d} E[e^{−t r}]``, minimised over
  ``s = t·d`` with scipy's bounded Brent search (golden-section steps with parabolic
  interpolation; the paper uses plain golden-section search) on the convex
  ``s + log E[e^{−s r/d}]``. At ``s = 1`` the integrand ``e^{1 − r/d} ≤ d/r`` (as
  ``u·e^{1−u} ≤ 1``), so the Chernoff bound is never above the Markov bound;
* **truncation** (Remark B.2): examples with ``r > d`` cannot flip, so both bounds may
  drop them (``r`` replaced by ``+∞``). Truncated Chernoff is minimised at ``t = 0``
  and equals ``P(r ≤ d)`` itself: the empirical fraction of examples whose
  margin a move of size ``d`` can erase.

Every function takes the normalised margins of the examples in E (an empirical
distribution) and returns a bound on ``P(r ≤ d | E)``; none is capped at 1
here (:mod:`dpfair.bounds.certificate` caps probabilities when it combines them).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp

__all__ = ["chernoff_bound", "flip_probability", "markov_bound"]

_S_MAX = 1000.0  # e^{-1000·(r/d − 1)}: far below any probability worth reporting


def _check(ratios, distance) -> tuple[np.ndarray, float]:
    r = np.asarray(ratios, dtype=np.float64).reshape(-1)
    if r.size == 0:
        raise ValueError("no example in this group; a conditional probability needs at least one")
    if np.any(np.isnan(r)) or np.any(r < 0):
        raise ValueError("normalised margins must be non-negative (|ρ|/L), without NaN")
    d = float(distance)
    if not math.isfinite(d) or d < 0:
        raise ValueError(f"distance must be a finite non-negative bound on ‖h − h'‖, got {distance!r}")
    return r, d


def flip_probability(ratios, distance) -> float:
    """``P(r ≤ d)``: the tightest of the three (truncated Chernoff's value)."""
    r, d = _check(ratios, distance)
    return float(np.mean(r <= d))


def markov_bound(ratios, distance, *, truncate: bool = False) -> float:
    """Theorem 3.1: ``d · E[1/r]`` (``truncate``: only examples with ``r ≤ d`` count, Remark B.2)."""
    r, d = _check(ratios, distance)
    if d == 0:
        return float(np.mean(r == 0))
    keep = r <= d if truncate else np.ones_like(r, dtype=bool)
    with np.errstate(divide="ignore"):
        inv = np.where(keep, 1.0 / r, 0.0)
    return float(d * inv.mean())


def chernoff_bound(ratios, distance, *, truncate: bool = False) -> float:
    """Remark B.1: ``inf_{t ≥ 0} e^{t d} E[e^{−t r}]`` (``truncate``: Remark B.2, equals ``P(r ≤ d)``)."""
    r, d = _check(ratios, distance)
    if d == 0:
        return float(np.mean(r == 0))
    u = r[r <= d] / d if truncate else r / d
    u = u[np.isfinite(u)]  # r = ∞ (a margin nothing can move) adds e^{-∞} = 0 for every t > 0
    if u.size == 0:
        return 0.0
    log_n = math.log(r.size)

    def log_bound(s: float) -> float:
        return s + float(logsumexp(-s * u)) - log_n

    found = minimize_scalar(log_bound, bounds=(0.0, _S_MAX), method="bounded", options={"xatol": 1e-10})
    # t = 1/d is the value never above Markov's (t = 0: the truncated optimum)
    best = min(log_bound(0.0), log_bound(1.0), float(found.fun))
    return float(math.exp(best))
