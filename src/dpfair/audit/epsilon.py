"""Empirical lower bounds on ε: what an attack's success proves about a mechanism.

**Many runs** (Jagielski, Ullman, Oprea 2020; Nasr et al. 2021). Run the mechanism
in world 0 and in world 1 (neighbouring data sets) many times and score each
output. A test "world 1 iff score ≥ t" has false-positive rate FPR and
false-negative rate FNR. If the mechanism is (ε, δ)-DP, every test satisfies
(Kairouz, Oh, Viswanath 2015)

    FPR + e^ε · FNR ≥ 1 − δ   and   FNR + e^ε · FPR ≥ 1 − δ,

so rates (FPR, FNR) prove ε ≥ max(ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR))
(:func:`epsilon_from_rates`). The rates are estimated: we take one-sided
Clopper–Pearson upper bounds on FPR and on FNR, each at level (1 − confidence)/2,
so both hold together with probability ≥ ``confidence`` (union bound), and the
bound is decreasing in both rates. The statistic, the direction and the threshold
are chosen on a *calibration* part of the runs and the rates counted on the
other part, so the counted rates are binomial with everything fixed in advance
(:func:`epsilon_lower_bound`). With r evaluation runs per world, the largest
provable ε is about ln(r/ln(2/α)) (≈ 4.2 for r = 100, α = 0.05): auditing a
claim of ε needs runs ≫ e^ε.

**One run** (Steinke, Nasr, Jagielski 2023). m canaries, each included
independently with probability ½, one training run; the auditor guesses
"included" for the k₊ highest scores and "excluded" for the k₋ lowest. For an
(ε, δ)-DP mechanism the number v of correct guesses among r = k₊ + k₋ satisfies
(their Theorem 3.1, δ term as in their Proposition 5.2)

    P[V ≥ v] ≤ P[Binomial(r, q_ε) ≥ v] + 2mδ · max_{1≤i≤v} P[v − i ≤ Binomial(r, q_ε) < v]/i,
    q_ε = e^ε / (1 + e^ε),

and ε is rejected when that p-value is below 1 − confidence
(:func:`one_run_epsilon_lower_bound`; a grid of (k₊, k₋) is corrected by Bonferroni).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


__all__ = ["LowerBound", "epsilon_from_rates", "epsilon_lower_bound", "one_run_epsilon_lower_bound",
           "one_run_p_value"]


def _confidence(confidence) -> float:
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must be in (0, 1), e.g. 0.95, got {confidence!r}")
    return c


#: Thresholds tried per statistic on the calibration runs.
MAX_THRESHOLDS = 128


def epsilon_from_rates(fpr, fnr, delta) -> float:
    """The ε that rates (FPR, FNR) of one test prove (0 when they prove nothing)."""
    fpr, fnr = float(fpr), float(fnr)
    best = 0.0
    for a, b in ((fpr, fnr), (fnr, fpr)):  # ln((1 − δ − b)/a)
        top = 1.0 - delta - b
        if top > 0:
            best = max(best, math.inf if a <= 0 else math.log(top / a))
    return best


def _upper(k: int, n: int, level: float) -> float:
    """One-sided Clopper–Pearson upper bound on a rate with k events in n trials, at ``level``."""
    return 1.0 if k >= n else float(stats.beta.ppf(level, k + 1, n - k))


@dataclass(frozen=True)
class LowerBound:
    """An audited lower bound on ε, with the test that proved it and the counts behind it."""

    epsilon: float
    confidence: float
    delta: float
    runs: int
    statistic: str
    threshold: float
    direction: str
    false_positives: int
    false_negatives: int
    negatives: int
    positives: int
    fpr_upper: float
    fnr_upper: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _best_test(scores0: np.ndarray, scores1: np.ndarray, delta: float, level: float):
    """``(value, threshold, direction)`` maximising the Clopper–Pearson bound on these scores."""
    n0, n1 = len(scores0), len(scores1)
    candidates = np.unique(np.concatenate([scores0, scores1]))
    if candidates.size > MAX_THRESHOLDS:  # quantiles of the pooled scores: enough to find the tails
        candidates = np.unique(np.quantile(candidates, np.linspace(0, 1, MAX_THRESHOLDS)))
    s0, s1 = np.sort(scores0), np.sort(scores1)
    best = (-1.0, math.inf, ">=")
    # world-0 runs called world 1 (false positives) and world-1 runs called world 0 (false negatives)
    above = (">=", n0 - np.searchsorted(s0, candidates, "left"), np.searchsorted(s1, candidates, "left"))
    below = ("<=", np.searchsorted(s0, candidates, "right"), n1 - np.searchsorted(s1, candidates, "right"))
    for direction, fp, fn in (above, below):
        for t, a, b in zip(candidates, fp, fn):
            value = epsilon_from_rates(_upper(int(a), n0, level), _upper(int(b), n1, level), delta)
            if value > best[0]:
                best = (value, float(t), direction)
    return best


def _counts(scores0, scores1, threshold, direction):
    if direction == ">=":
        return int(np.sum(scores0 >= threshold)), int(np.sum(scores1 < threshold))
    return int(np.sum(scores0 <= threshold)), int(np.sum(scores1 > threshold))


def epsilon_lower_bound(scores0, scores1, *, delta, confidence=0.95, calibration=0.5) -> LowerBound:
    """The ε lower bound of the best test on ``scores0`` (world 0 runs) vs ``scores1`` (world 1 runs).

    ``scores*`` is a dict ``{statistic name: array of per-run scores}`` or one array.
    The first ``calibration`` share of each world's runs chooses the statistic,
    direction and threshold; the rest count the rates.
    """
    level = 1.0 - (1.0 - _confidence(confidence)) / 2.0
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    if not isinstance(scores0, dict):
        scores0, scores1 = {"score": scores0}, {"score": scores1}
    if set(scores0) != set(scores1):
        raise ValueError("scores0 and scores1 must hold the same statistics")
    arrays = {k: (np.asarray(scores0[k], dtype=np.float64).ravel(), np.asarray(scores1[k], dtype=np.float64).ravel())
              for k in scores0}
    n0, n1 = (len(next(iter(arrays.values()))[i]) for i in (0, 1))
    c0, c1 = int(round(calibration * n0)), int(round(calibration * n1))
    if min(c0, c1, n0 - c0, n1 - c1) < 1:
        raise ValueError(f"each world needs runs for calibration and for evaluation; got {n0} and {n1} runs")
    best = None
    for name, (a, b) in arrays.items():
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
            raise ValueError(f"statistic {name!r} has non-finite scores")
        value, t, direction = _best_test(a[:c0], b[:c1], delta, level)
        if best is None or value > best[0]:
            best = (value, name, t, direction)
    _, name, t, direction = best
    a, b = arrays[name]
    fp, fn = _counts(a[c0:], b[c1:], t, direction)
    fpr_hi, fnr_hi = _upper(fp, n0 - c0, level), _upper(fn, n1 - c1, level)
    return LowerBound(epsilon_from_rates(fpr_hi, fnr_hi, delta), float(confidence), delta, n0 + n1, name, t,
                      direction, fp, fn, n0 - c0, n1 - c1, fpr_hi, fnr_hi)


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[≥ v correct of r guesses] for an (ε, δ)-DP mechanism with m canaries (Steinke et al. 2023)."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0 or v == 0:
        return min(1.0, tail)
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[Bin = v − i], i = 1..v
    worst = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(1.0, tail + 2.0 * m * delta * worst)


def one_run_epsilon_lower_bound(scores, included, *, delta, confidence=0.95, guesses=None) -> dict:
    """Steinke et al.'s one-run bound from canary ``scores`` (higher: included) and their inclusion coins.

    ``guesses``: (k₊, k₋) pairs to try (default: top and bottom 1 %, 2 %, 5 %, 10 %, 25 % of m);
    the confidence is split over them (Bonferroni).
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    inc = np.asarray(included, dtype=bool).ravel()
    if s.shape != inc.shape or s.size < 2:
        raise ValueError("scores and included must be 1-d with one entry per canary (at least two)")
    m = s.size
    alpha = 1.0 - _confidence(confidence)
    delta = float(delta)
    if guesses is None:
        guesses = sorted({(max(1, int(f * m)),) * 2 for f in (0.01, 0.02, 0.05, 0.1, 0.25)})
    order = np.argsort(-s, kind="stable")
    best = dict(epsilon=0.0, guesses=None, correct=0, total=0)
    for k_pos, k_neg in guesses:
        if k_pos + k_neg > m:
            continue
        v = int(inc[order[:k_pos]].sum() + (~inc[order[m - k_neg:]]).sum())
        r = k_pos + k_neg
        level = alpha / len(guesses)
        lo, hi = 0.0, 1.0
        while one_run_p_value(m, r, v, hi, delta) < level and hi < 100:
            hi *= 2.0
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if one_run_p_value(m, r, v, mid, delta) < level else (lo, mid)
        if lo > best["epsilon"]:
            best = dict(epsilon=lo, guesses=(k_pos, k_neg), correct=v, total=r)
    return {**best, "canaries": m, "confidence": float(confidence), "delta": delta}
