"""Intervals of a private measurement from its mechanism: each figure's released noise law, inverted.

A :class:`~dpfair.measurement.frame.PrivateMetricFrame` releases tables of counts (or sums of a
bounded score) with known noise: every released cell is its exact value plus an independent Gaussian or Laplace
draw of a known std ``τ_t`` (with public margins, group 1's cells carry minus group 0's draws). A figure is a
count ``N`` or a ratio ``r = N/D`` of two linear reads of the tables, so its released numerator and denominator
are ``N̂ = N + e_N`` and ``D̂ = D + e_D`` with ``e_N``, ``e_D`` linear in the cells' draws: a law we know exactly.

**Counts** (the pivot ``N̂ − N = e_N``): ``N ∈ [N̂ − q_{1−α/2}, N̂ − q_{α/2}]``, ``q`` the quantiles of ``e_N``,
intersected with ``[0, n]`` (n public) and rounded inward to integers. Coverage is exactly ≥ 1 − α at every count,
1 included, because the interval is built from the law of the noise itself, not from re-noising an estimate.

**Ratios** (Fieller's construction, test inversion). For a candidate value p the statistic
``S(p) = N̂ − p·D̂ = (N − p·D) + E(p)`` with ``E(p) = e_N − p·e_D`` a weighted sum of the cells' draws (weights
``α_c − p·β_c``, α and β the cells' coefficients in N and D). At the true value:

- ``sampling=False`` (the exact value on these rows, ``N = r·D``): ``S(r) = E(r)``, whose law is known;
- ``sampling=True`` (the population value p, the rows drawn at random within each group, the frame's model):
  given the denominator's rows D, ``N ~ Binomial(D, p)`` for a rate (for a mean of values in ``[0, c]``,
  ``N − pD`` has mean 0 and variance at most ``D·p(c − p)``, Bhatia–Davis: a normal of that variance), so
  ``S(p) = B_D(p) + E(p)`` with ``B_D`` the centred binomial, independent of the noise. D is not released; it lies
  in ``[D_lo, D_hi]``, the noise-only interval of ``D̂`` at level ``1 − α/10`` (with ``D ≤ n``), and p is kept when
  ``S(p)`` is in the central ``1 − 0.9·α`` region of the law for some D of that range: by the union bound the set
  covers p with probability ≥ 1 − α. A range of more than :data:`UNION_MAX` integers is represented by its upper
  end: the law of ``B_D + E`` has a log-concave density (binomial and Gaussian/Laplace are log-concave, and so is
  their convolution), so its tails beyond the mode widen as D grows (adding an independent centred Bernoulli
  term raises a convex tail), and accepting at ``D_hi`` accepts for every smaller D.

The value p is kept when both tails of the law at ``S(p)`` are at least half the test's level (equal tails); the
interval is the hull of the kept values on ``[0, c]`` (c = 1 for a rate): a grid of :data:`GRID` points and the
point estimate, each end refined by bisection between a rejected and a kept point and returned on the rejected
side. When no value is kept — noise far from its law, which happens with probability at most α — the interval is
the whole range. The Gaussian laws are closed-form; a Laplace combination's law is simulated once per figure
family with :data:`DRAWS` draws from a public generator (a sum of m Laplace of scale b is ``b·(Γ(m) − Γ(m))``).
All of it reads released values and public sizes only: post-processing, no privacy cost. ``secure_mode``'s noise
lies on a grid of the same std: its law is taken as the continuous one of that std.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

__all__ = ["DRAWS", "EXACT_ROWS", "GRID", "UNION_MAX", "LinearNoise", "count_intervals", "ratio_intervals"]

#: Draws of a Laplace combination's law (public generator): the tail probability at α/2 = 2.5 % is then known to
#: about ±0.002.
DRAWS = 8000
#: Grid points on ``[0, c]`` where the test is evaluated before each end is refined by bisection.
GRID = 33
#: Denominators up to this many rows take the exact binomial law under ``sampling``; above, its normal law.
EXACT_ROWS = 2000
#: A denominator range of at most this many integers is searched whole under ``sampling`` (above: its upper end).
UNION_MAX = 8
#: Share of the test's level α spent on the denominator's range under ``sampling`` (the union bound).
DENOMINATOR_SHARE = 0.1
_BISECTIONS = 30
#: Bisection stops when an end is known to this share of the range (it is returned on the rejected side: wide).
_RESOLUTION = 1e-5
_TOL = 1e-9


@dataclass(frozen=True)
class LinearNoise:
    """The noise ``E(p) = Σ_c (α_c − p·β_c)·Z_c`` of a read ``N̂ − p·D̂`` of released tables.

    ``Z_c`` is the sum of ``cells[c]`` independent cell draws of std ``stds[c]`` (a class of cells sharing their
    coefficients ``alpha[c]`` in the numerator and ``beta[c]`` in the denominator); ``laplace``: the draws are
    Laplace, else Gaussian. Built by the frame from its plan (:meth:`PrivateMetricFrame`'s readings).
    """

    alpha: tuple
    beta: tuple
    cells: tuple
    stds: tuple
    laplace: bool

    @property
    def silent(self) -> bool:
        """No noise at all (ε = ∞, or every draw cancelled by public margins)."""
        return not any(m > 0 and s > 0 for m, s in zip(self.cells, self.stds))

    def denominator(self) -> LinearNoise:
        """The noise of ``D̂`` alone (``e_D``)."""
        return LinearNoise(self.beta, tuple(0.0 for _ in self.beta), self.cells, self.stds, self.laplace)

    def sd(self, p) -> np.ndarray:
        """The std of ``E(p)``."""
        p = np.asarray(p, dtype=np.float64)
        var = np.zeros_like(p)
        for a, b, m, s in zip(self.alpha, self.beta, self.cells, self.stds):
            var = var + m * s * s * (a - p * b) ** 2
        return np.sqrt(var)

    def sample(self, rng: np.random.Generator, draws: int) -> np.ndarray:
        """``(draws, classes)`` draws of the ``Z_c`` (Laplace: ``b·(Γ(m) − Γ(m))``, b = std/√2)."""
        out = np.zeros((draws, len(self.cells)))
        for c, (m, s) in enumerate(zip(self.cells, self.stds)):
            if m <= 0 or s <= 0:
                continue
            if self.laplace:
                out[:, c] = s / math.sqrt(2.0) * (rng.standard_gamma(m, draws) - rng.standard_gamma(m, draws))
            else:
                out[:, c] = s * math.sqrt(m) * rng.standard_normal(draws)
        return out


class _Law:
    """Tail probabilities ``P(T ≤ x)`` and ``P(T ≥ x)`` of ``T = E(p)`` (+ ``B_D(p)`` under sampling)."""

    def __init__(self, noise: LinearNoise, rng: np.random.Generator, draws: int = DRAWS):
        self.noise = noise
        self.mc = noise.laplace and not noise.silent
        if self.mc:
            self.Z = noise.sample(rng, draws)
            self.alpha = np.asarray(noise.alpha, dtype=np.float64)
            self.beta = np.asarray(noise.beta, dtype=np.float64)

    def draws(self, p: np.ndarray) -> np.ndarray:
        """``(draws, len(p))`` draws of ``E(p)`` (one set of ``Z`` for every p: common random numbers)."""
        w = self.alpha[None, :] - p[:, None] * self.beta[None, :]
        return self.Z @ w.T

    def tails(self, x: np.ndarray, p: np.ndarray, rows=None, scale: float = 1.0, exact: bool = False):
        """Both tails at ``x`` (one per p). ``rows``: D under sampling (``None``: the noise alone); ``exact``: the
        binomial ``B_D`` (a rate), else the normal of variance ``D·p(scale − p)``."""
        x = np.asarray(x, dtype=np.float64)
        if rows is None or rows == 0:
            var_b = np.zeros_like(p)
        else:
            var_b = rows * np.clip(p * (scale - p), 0.0, None)
        if exact and rows:
            return self._binomial_tails(x, p, int(rows))
        if not self.mc:
            sd = np.sqrt(self.noise.sd(p) ** 2 + var_b)
            return _normal_tails(x, sd)
        E = self.draws(p)
        sd_b = np.sqrt(var_b)
        if not np.any(sd_b > 0):
            return (E <= x + _TOL).mean(axis=0), (E >= x - _TOL).mean(axis=0)
        lo, hi = _normal_tails(x[None, :] - E, sd_b[None, :])
        return lo.mean(axis=0), hi.mean(axis=0)

    def _binomial_tails(self, x, p, rows):
        """``T = (K − p·D) + E(p)``, ``K ~ Binomial(D, p)``: ``P(T ≤ x) = E_E[P(K ≤ x + pD − E)]``."""
        k = np.arange(rows + 1)
        pmf = stats.binom.pmf(k[None, :], rows, p[:, None])  # (G, D + 1)
        if not self.mc:
            sd = self.noise.sd(p)
            shift = x[:, None] + p[:, None] * rows - k[None, :]  # T ≤ x ⟺ E ≤ x + pD − K
            lo, hi = _normal_tails(shift, sd[:, None])
            return (pmf * lo).sum(axis=1), (pmf * hi).sum(axis=1)
        cdf = np.concatenate([np.zeros((len(p), 1)), np.cumsum(pmf, axis=1)], axis=1)  # cdf[:, j] = P(K ≤ j − 1)
        E = self.draws(p)  # (M, G)
        at = x[None, :] + p[None, :] * rows - E
        below = np.clip(np.floor(at + _TOL).astype(np.int64) + 1, 0, rows + 1)  # P(K ≤ at) = cdf[floor + 1]
        above = np.clip(np.ceil(at - _TOL).astype(np.int64), 0, rows + 1)  # P(K ≥ at) = 1 − P(K ≤ ceil − 1)
        cols = np.arange(len(p))[None, :]
        lo = cdf[cols, below].mean(axis=0)
        hi = (1.0 - cdf[cols, above]).mean(axis=0)
        return lo, np.clip(hi, 0.0, 1.0)

    def quantiles(self, probs) -> np.ndarray:
        """Quantiles of ``E`` with its weights at p = 0 (a count's noise ``e_N``, or ``e_D``)."""
        probs = np.asarray(probs, dtype=np.float64)
        if self.noise.silent:
            return np.zeros_like(probs)
        if not self.mc:
            return float(self.noise.sd(0.0)) * special.ndtri(probs)
        return np.quantile(self.draws(np.zeros(1))[:, 0], probs)


def _normal_tails(x, sd):
    """``P(Z·sd ≤ x)`` and ``P(Z·sd ≥ x)``, a point mass at 0 when ``sd = 0``. The upper tail is ``1 − lower``:
    exact to 1e-16 absolutely, all the tests here need (they compare tails with α/2)."""
    x, sd = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(sd, dtype=np.float64))
    if np.all(sd > 0):
        lo = special.ndtr(x / sd)
        return lo, 1.0 - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, x / np.where(sd > 0, sd, 1.0), 0.0)
    lo = np.where(sd > 0, special.ndtr(z), (x >= -_TOL).astype(np.float64))
    hi = np.where(sd > 0, special.ndtr(-z), (x <= _TOL).astype(np.float64))
    return lo, hi


def count_intervals(values, noise: LinearNoise, *, confidence: float, upper: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Intervals of counts from their released (unclipped) values ``N̂`` and the noise law of ``e_N`` (the
    module docstring): ``[N̂ − q_{1−α/2}, N̂ − q_{α/2}] ∩ [0, upper]``, rounded inward to integers (an interval
    that holds no integer is the nearest one)."""
    values = np.asarray(values, dtype=np.float64)
    alpha = 1.0 - float(confidence)
    q_lo, q_hi = _Law(noise, rng).quantiles([alpha / 2.0, 1.0 - alpha / 2.0])
    lo = np.clip(np.ceil(values - q_hi - _TOL), 0.0, upper)
    hi = np.clip(np.floor(values - q_lo + _TOL), 0.0, upper)
    nearest = np.clip(np.rint(values), 0.0, upper)
    empty = lo > hi
    return np.where(empty, nearest, lo), np.where(empty, nearest, hi)


def ratio_intervals(num, den, noise: LinearNoise, *, confidence: float, sampling: bool, upper: float,
                    rng: np.random.Generator, scale: float = 1.0,
                    binomial: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Intervals on ``[0, scale]`` of ratios ``N/D`` from their released (unclipped) numerators and denominators,
    all sharing the noise law ``noise`` (Fieller's construction of the module docstring). ``sampling``: of the
    population value (``binomial``: N given D is binomial, a rate; else a mean of values in ``[0, scale]``),
    else of the exact value on the rows. ``upper``: a public bound on D (n)."""
    num, den = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (num, den))
    alpha = 1.0 - float(confidence)
    law = _Law(noise, rng)
    test = alpha * (1.0 - DENOMINATOR_SHARE) if sampling else alpha
    rows_of = _denominator_ranges(den, noise, alpha * DENOMINATOR_SHARE, upper, rng) if sampling else None
    lows, highs = np.empty(len(num)), np.empty(len(num))
    for i in range(len(num)):
        if noise.silent and not sampling:  # nothing to invert: the exact value
            value = num[i] / den[i] if den[i] > 0 else math.nan
            lows[i] = highs[i] = min(max(value, 0.0), scale) if math.isfinite(value) else math.nan
            lows[i], highs[i] = (0.0, scale) if not math.isfinite(value) else (lows[i], highs[i])
            continue
        candidates = [None] if rows_of is None else rows_of[i]

        def kept(p, i=i, candidates=candidates):
            p = np.atleast_1d(np.asarray(p, dtype=np.float64))
            x = num[i] - p * den[i]
            ok = np.zeros(p.shape, dtype=bool)
            for rows in candidates:
                exact = binomial and rows is not None and rows <= EXACT_ROWS
                lo, hi = law.tails(x, p, rows, scale, exact=exact)
                ok |= (lo >= test / 2.0) & (hi >= test / 2.0)
            return ok

        lows[i], highs[i] = _hull(kept, num[i], den[i], scale)
    return lows, highs


def _denominator_ranges(den, noise: LinearNoise, level: float, upper: float, rng) -> list:
    """Per figure, the denominators D to test under sampling: the integers of the noise-only interval of ``D̂``
    at ``1 − level`` within ``[0, upper]`` (at most :data:`UNION_MAX` of them, else the upper end alone)."""
    q_lo, q_hi = _Law(noise.denominator(), rng).quantiles([level / 2.0, 1.0 - level / 2.0])
    out = []
    for d in den:
        lo = int(max(0.0, math.ceil(d - q_hi - _TOL)))
        hi = int(min(upper, math.floor(d - q_lo + _TOL)))
        if hi < lo:  # D̂ far below 0 (a miss of the denominator's range): the smallest denominator
            out.append([max(0, min(lo, int(upper)))])
        elif hi - lo + 1 <= UNION_MAX:
            out.append(list(range(lo, hi + 1)))
        else:
            out.append([hi])
    return out


def _hull(kept, num: float, den: float, scale: float) -> tuple[float, float]:
    """The hull of ``{p ∈ [0, scale] : kept(p)}``: a grid and the point estimate, each end bisected."""
    grid = np.linspace(0.0, scale, GRID)
    if den > 0 and math.isfinite(num / den):
        grid = np.unique(np.append(grid, min(max(num / den, 0.0), scale)))
    ok = kept(grid)
    if not ok.any():
        return 0.0, scale
    i0, i1 = int(np.argmax(ok)), int(len(ok) - 1 - np.argmax(ok[::-1]))
    low = grid[0] if i0 == 0 else _bisect(kept, grid[i0 - 1], grid[i0], scale)
    high = grid[-1] if i1 == len(grid) - 1 else _bisect(kept, grid[i1 + 1], grid[i1], scale)
    return float(low), float(high)


def _bisect(kept, rejected: float, accepted: float, scale: float) -> float:
    """The boundary between a rejected and a kept value, returned on the rejected side (the hull errs wide)."""
    for _ in range(_BISECTIONS):
        if abs(accepted - rejected) <= _RESOLUTION * scale:
            break
        mid = 0.5 * (rejected + accepted)
        if kept(mid)[0]:
            accepted = mid
        else:
            rejected = mid
    return rejected
