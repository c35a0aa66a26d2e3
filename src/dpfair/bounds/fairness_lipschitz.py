"""Group fairness is pointwise Lipschitz in the model (Mangold et al., Theorem 3.2 and Corollary 3.3).

For a notion written ``F_k = C⁰_k + Σ_{k'} C^{k'}_k P(H(X) = Y | D_{k'})``
(:func:`dpfair.fairness.fairness_coefficients`), Theorem 3.1 applied to each
accuracy group ``D_{k'}`` and the triangle inequality give ::

    |F_k(h) − F_k(h')| ≤ Σ_{k'} |C^{k'}_k| · P(r ≤ ‖h − h'‖ | D_{k'})           (proof of Thm 3.2)
                       ≤ χ_k(h) ‖h − h'‖,   χ_k(h) = Σ_{k'} |C^{k'}_k| E[L_{X,Y}/|ρ(h,X,Y)| | D_{k'}],

with ``r = |ρ(h, X, Y)|/L_{X,Y}`` the normalised margins of h; and for the
aggregate ``Fair = (1/K) Σ_k |F_k|``, ``|Fair(h) − Fair(h')| ≤ (1/K) Σ_k χ_k ‖h − h'‖``.
Corollary 3.3's constants for equalized odds, equal opportunity, accuracy
parity, demographic parity (binary labels) and accuracy (one group, ``C = 1``)
are this formula with each notion's coefficients; any number of groups, and of
labels where the notion allows it.

Everything is computed on the rows it is given (the empirical distribution:
the paper's finite-sample version; :mod:`dpfair.bounds.finite_sample` adds
Lemma 3.4's term for the population).
"""

from __future__ import annotations

import numpy as np

from dpfair.bounds.concentration import chernoff_bound, flip_probability, markov_bound
from dpfair.fairness import FairnessCoefficients, accuracy_group_codes, fairness_coefficients, get_notion, notion_names
from dpfair.utils.validation import check_1d

__all__ = ["ACCURACY", "CERTIFIED_NOTIONS", "FairnessGapBound", "fairness_gap_bound", "fairness_levels",
           "notion_coefficients", "pointwise_lipschitz"]

ACCURACY = "accuracy"
#: The notions a certificate covers, in the order the paper's Table 1 reports them.
CERTIFIED_NOTIONS = ("equal_opportunity", "equalized_odds", "demographic_parity", "accuracy_parity", ACCURACY)


def notion_coefficients(notion: str, y, s, *, positive_label=None) -> tuple[FairnessCoefficients, np.ndarray]:
    """The notion's ``(C⁰, C)`` and each row's accuracy group (``-1``: in none); ``"accuracy"`` is ``F = P(H=Y)``."""
    y_arr = check_1d(y, "y")
    s_arr = check_1d(s, "s", len(y_arr))
    if notion == ACCURACY:
        coef = FairnessCoefficients(np.zeros(1), np.ones((1, 1)), (ACCURACY,), ((None, None),))
        return coef, np.zeros(len(y_arr), dtype=np.int64)
    try:
        get_notion(notion)
    except ValueError:
        raise ValueError(f"notion must be one of {[*notion_names(), ACCURACY]}, got {notion!r}") from None
    coef = fairness_coefficients(notion, y_arr, s_arr, positive_label=positive_label)
    _, y_codes = np.unique(y_arr, return_inverse=True)
    _, s_codes = np.unique(s_arr, return_inverse=True)
    return coef, accuracy_group_codes(coef.group_keys, y_codes, s_codes)


def _per_group(values, codes, n_groups, reduce) -> np.ndarray:
    return np.array([reduce(values[codes == g]) if np.any(codes == g) else 0.0 for g in range(n_groups)])


def pointwise_lipschitz(ratios, y, s, notion: str, *, positive_label=None) -> np.ndarray:
    """``χ_k`` for every measure of ``notion`` (Theorem 3.2), from the normalised margins ``|ρ|/L``."""
    r = np.asarray(ratios, dtype=np.float64)
    coef, codes = notion_coefficients(notion, y, s, positive_label=positive_label)
    with np.errstate(divide="ignore"):
        inverse = 1.0 / r
    return np.abs(coef.C) @ _per_group(inverse, codes, len(coef.group_keys), np.mean)


class FairnessGapBound:
    """Bounds on ``|F_k(h) − F_k(h')|`` for ``‖h − h'‖ ≤ distance``, per measure and for ``Fair``.

    ``markov``: Theorem 3.2 with Theorem 3.1's Markov step, ``chernoff``: with Remark
    B.1's, ``bound``: with Remark B.2's truncation (the certified value, the
    tightest); each conditional probability is capped at 1. ``lipschitz`` holds
    the χ_k. Aggregates (``*_fair``) are the means over measures: bounds on
    ``|Fair(h) − Fair(h')|``.
    """

    def __init__(self, notion, measure_keys, distance, lipschitz, markov, chernoff, bound):
        self.notion = notion
        self.measure_keys = measure_keys
        self.distance = float(distance)
        self.lipschitz = lipschitz
        self.markov = markov
        self.chernoff = chernoff
        self.bound = bound

    @property
    def bound_fair(self) -> float:
        return float(np.mean(self.bound))

    @property
    def chernoff_fair(self) -> float:
        return float(np.mean(self.chernoff))

    @property
    def markov_fair(self) -> float:
        return float(np.mean(self.markov))

    def __repr__(self) -> str:
        return (f"FairnessGapBound({self.notion}: bound {self.bound_fair:.4g}, chernoff {self.chernoff_fair:.4g}, "
                f"markov {self.markov_fair:.4g} at distance {self.distance:.4g})")


def fairness_gap_bound(ratios, y, s, distance, notion: str, *, positive_label=None) -> FairnessGapBound:
    """Bounds on the fairness gap between the reference model and any model within ``distance`` of it."""
    r = np.asarray(ratios, dtype=np.float64)
    coef, codes = notion_coefficients(notion, y, s, positive_label=positive_label)
    if r.shape != codes.shape:
        raise ValueError(f"ratios has {r.size} entries for {codes.size} rows; pass one normalised margin per row")
    weights = np.abs(coef.C)
    n_groups = len(coef.group_keys)

    def combine(tail) -> np.ndarray:
        return weights @ _per_group(r, codes, n_groups, lambda g: min(1.0, tail(g, distance)))

    return FairnessGapBound(
        notion, coef.measure_keys, distance,
        lipschitz=pointwise_lipschitz(r, y, s, notion, positive_label=positive_label),
        markov=combine(markov_bound), chernoff=combine(chernoff_bound), bound=combine(flip_probability))


def fairness_levels(notion: str, y, y_pred, s, *, positive_label=None) -> np.ndarray:
    """``F_k`` of predictions ``y_pred`` on these rows, in ``measure_keys`` order (``Fair = mean |F_k|``)."""
    y_arr = check_1d(y, "y")
    pred = check_1d(y_pred, "y_pred", len(y_arr))
    coef, codes = notion_coefficients(notion, y_arr, s, positive_label=positive_label)
    correct = (pred == y_arr).astype(np.float64)
    return coef.C0 + coef.C @ _per_group(correct, codes, len(coef.group_keys), np.mean)
