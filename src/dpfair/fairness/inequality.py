"""Inequality indices of a vector of non-negative values (e.g. per-group accuracies).

With values ``x_1..x_m``, weights ``w_i ≥ 0`` normalised to sum to one (equal
weights by default; pass group sizes to weight by population) and weighted
mean ``μ = Σ w_i x_i``:

* Atkinson index, ``ε ≥ 0``:
  ``A_ε = 1 − (Σ w_i x_i^{1−ε})^{1/(1−ε)} / μ``, and ``A_1 = 1 − Π x_i^{w_i} / μ``
  (one minus the geometric over the arithmetic mean);
* Gini coefficient: ``G = Σ_i Σ_j w_i w_j |x_i − x_j| / (2μ)``
  (``(m−1)/m`` for ``[0, …, 0, 1]`` with equal weights);
* generalised entropy: ``GE(α) = (Σ w_i (x_i/μ)^α − 1) / (α(α−1))``, whose limits are
  the mean log deviation ``GE(0) = Σ w_i log(μ/x_i)`` and the Theil index
  ``GE(1) = Σ w_i (x_i/μ) log(x_i/μ)``.

All are 0 when every value is equal.  A zero value is allowed, with the
limits ``0·log 0 = 0``: then ``A_ε = 1`` for ``ε ≥ 1`` and ``GE(α) = inf`` for
``α ≤ 0`` (the mean log deviation among them).
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from dpfair.fairness._inputs import check_same_length, encode_groups, encode_label_pair


def _check_values(values, weights):
    """Return ``(x, w)``: finite non-negative values with a positive mean, weights summing to 1.

    Values of zero weight are dropped: they do not count in any index.
    """
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("values is empty; pass at least one value")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError("values must be finite and non-negative (e.g. accuracies or incomes)")
    if weights is None:
        w = np.full(x.size, 1.0 / x.size)
    else:
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        check_same_length(w, "weights", x, "values")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be finite, non-negative and not all zero (e.g. group sizes)")
        x, w = x[w > 0], w[w > 0] / w.sum()
    if np.dot(w, x) <= 0:
        raise ValueError("values have a zero (weighted) mean; inequality indices need a positive mean")
    return x, w


def _check_parameter(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def atkinson_index(values, epsilon: float = 0.5, weights=None) -> float:
    """Atkinson index ``1 − (Σ w_i x_i^{1−ε})^{1/(1−ε)} / μ``; ``ε = 1`` uses the geometric mean."""
    eps = _check_parameter(epsilon, "epsilon")
    if eps < 0:
        raise ValueError(f"epsilon must be >= 0 (inequality aversion), got {epsilon!r}")
    x, w = _check_values(values, weights)
    mu = np.dot(w, x)
    if eps >= 1 and np.any(x == 0):
        return 1.0
    if eps == 1:
        equally_distributed = np.exp(np.dot(w, np.log(x)))
    else:
        equally_distributed = np.dot(w, x ** (1 - eps)) ** (1 / (1 - eps))
    return float(1 - equally_distributed / mu)


def gini_coefficient(values, weights=None) -> float:
    """Gini coefficient ``Σ_i Σ_j w_i w_j |x_i − x_j| / (2μ)``."""
    x, w = _check_values(values, weights)
    mean_abs_difference = w @ np.abs(x[:, None] - x[None, :]) @ w
    return float(mean_abs_difference / (2 * np.dot(w, x)))


def _xlogx(r: np.ndarray) -> np.ndarray:
    """``r log r`` with ``0 log 0 = 0``."""
    return np.where(r > 0, r * np.log(np.where(r > 0, r, 1.0)), 0.0)


def generalized_entropy(values, alpha: float, weights=None) -> float:
    """Generalised entropy ``GE(α) = (Σ w_i (x_i/μ)^α − 1) / (α(α−1))``, with its limits at α = 0, 1."""
    a = _check_parameter(alpha, "alpha")
    x, w = _check_values(values, weights)
    r = x / np.dot(w, x)
    if a <= 0 and np.any(r == 0):
        return float("inf")
    if a == 0:
        return float(-np.dot(w, np.log(r)))
    if a == 1:
        return float(np.dot(w, _xlogx(r)))
    return float((np.dot(w, r**a) - 1) / (a * (a - 1)))


def mean_log_deviation(values, weights=None) -> float:
    """Mean log deviation ``GE(0) = Σ w_i log(μ / x_i)`` (inf if a value is 0)."""
    return generalized_entropy(values, 0.0, weights)


def theil_index(values, weights=None) -> float:
    """Theil index ``GE(1) = Σ w_i (x_i/μ) log(x_i/μ)``."""
    return generalized_entropy(values, 1.0, weights)


def per_group_accuracy(y_true, y_pred, s) -> pd.Series:
    """``P(ŷ = y | S = r)`` for each group, indexed by the group values in sorted order."""
    t, p, _ = encode_label_pair(y_true, y_pred)
    s_codes, groups = encode_groups(s, "s")
    check_same_length(s_codes, "s", t, "y_true")
    correct = np.bincount(s_codes, weights=(t == p).astype(np.float64), minlength=len(groups))
    return pd.Series(
        correct / np.bincount(s_codes, minlength=len(groups)),
        index=pd.Index(groups, name="group"), name="accuracy",
    )


def _scalar(value):
    """A numpy scalar as the Python value (so group keys print and serialise plainly)."""
    return value.item() if isinstance(value, np.generic) else value


def accuracy_inequality(y_true, y_pred, s) -> dict:
    """Per-group accuracy and its inequality across groups, as FairDP's appendix (D.4.1) reports it.

    With group accuracies ``a_k = P(ŷ = y | S = k)`` and group sizes ``G_k`` (rows of each group in the
    data passed, ``G = Σ G_k``), every index weights group ``k`` by ``w_k = G_k / G``, with ``μ = Σ w_k a_k``
    (the overall accuracy):

    * ``atkinson``: Atkinson index with inequality aversion 1 (Atkinson's ε, not a privacy ε), ``1 − Π a_k^{w_k} / μ``;
    * ``gini``: ``Σ_k Σ_k' w_k w_k' |a_k − a_k'| / (2μ)``;
    * ``mean_log_deviation``: ``Σ_k w_k log(μ / a_k)`` (inf if a group has accuracy 0);
    * ``theil``: Theil T index ``Σ_k w_k (a_k/μ) log(a_k/μ)``.

    (FairDP's printed Atkinson formula writes ``ȳ = Σ y_k G_k`` without dividing by ``G``; the
    normalised mean is meant, as in the other three and in the census bureau source it cites.)
    All four are 0 when every group is equally accurate.

    Returns ``{"per_group_accuracy": {group: accuracy}, "group_sizes": {group: G_k}, "atkinson": …,
    "gini": …, "mean_log_deviation": …, "theil": …}``, groups in sorted order. If every group has
    accuracy 0 the indices are undefined and reported as NaN.
    """
    acc = per_group_accuracy(y_true, y_pred, s)
    s_codes, groups = encode_groups(s, "s")
    sizes = np.bincount(s_codes, minlength=len(groups))
    out = {
        "per_group_accuracy": {_scalar(g): float(a) for g, a in zip(groups, acc.to_numpy())},
        "group_sizes": {_scalar(g): int(c) for g, c in zip(groups, sizes)},
    }
    return {**out, **accuracy_inequality_indices(acc.to_numpy(), sizes)}


def accuracy_inequality_indices(accuracies, sizes) -> dict:
    """The four indices of :func:`accuracy_inequality` for group accuracies ``a_k`` weighted by group sizes ``G_k``
    (counts, or released noisy counts clipped to 0: the same formulas post-process a private table); NaN for
    all four when ``Σ G_k a_k = 0``."""
    values = np.asarray(accuracies, dtype=np.float64)
    sizes = np.asarray(sizes)
    if np.dot(sizes, values) == 0:
        return dict.fromkeys(("atkinson", "gini", "mean_log_deviation", "theil"), float("nan"))
    return {"atkinson": atkinson_index(values, 1.0, weights=sizes), "gini": gini_coefficient(values, weights=sizes),
            "mean_log_deviation": mean_log_deviation(values, weights=sizes),
            "theil": theil_index(values, weights=sizes)}
