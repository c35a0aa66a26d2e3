"""Exponential Rényi mutual information (ERMI) between predictions and groups.

Mary, Calauzènes, El Karoui (ICML 2019); Lowy, Baharlouei, Pavan, Razaviyayn,
Beirami, *FERMI* (TMLR 2022, definition of ERMI); Lowy, Gupta, Razaviyayn,
*Stochastic Differentially Private and Fair Learning* (ICLR 2023, Sec. 2):

    ERMI(ŷ; s) = Σ_{j,r} P(ŷ=j, s=r)² / (P(ŷ=j) P(s=r)) − 1,

summed over the pairs whose marginals are positive (the others have a zero
joint probability too).  It is the χ²-divergence
``D_χ²(P(ŷ, s) ‖ P(ŷ) P(s)) = Σ (P(j,r) − P(j)P(r))² / (P(j)P(r))``, hence ≥ 0, and
0 exactly when ŷ and s are independent.

Predictions are either hard labels (shape (n,)) or a probability matrix ``F``
of shape (n, l) whose rows sum to 1 (soft predictions, as DP-FERMI trains
with): then ``P(ŷ=j, s=r) = (1/n) Σ_i F_ij 1[s_i = r]``.

The equalized-odds version conditions on the true label (FERMI's conditional ERMI):

    ERMI(ŷ; s | y) = E_y[ Σ_{j,r} P(ŷ=j, s=r | y)² / (P(ŷ=j | y) P(s=r | y)) ] − 1
                   = Σ_y P(y) · ERMI(ŷ; s | Y = y),

the ``P(Y = y)``-weighted sum of the ERMI inside each label.
"""

from __future__ import annotations

import numpy as np

from dpfair.fairness._inputs import check_same_length, encode, encode_groups


def _prediction_matrix(y_pred_or_proba, n_classes: int | None) -> np.ndarray:
    """(n, l) matrix of prediction probabilities; hard labels become one-hot rows."""
    arr = np.asarray(y_pred_or_proba)
    if arr.ndim == 2 and arr.shape[1] > 1:
        try:
            proba = arr.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("y_pred_or_proba as a 2-D array must hold probabilities (numbers)") from None
        if not np.all(np.isfinite(proba)):
            raise ValueError("y_pred_or_proba contains NaN or infinite values; drop those rows")
        if np.any(proba < 0) or not np.allclose(proba.sum(axis=1), 1.0, atol=1e-6):
            raise ValueError(
                "y_pred_or_proba rows must be probabilities (non-negative, summing to 1); "
                "apply a softmax to scores first"
            )
        if n_classes is not None and n_classes != proba.shape[1]:
            raise ValueError(
                f"y_pred_or_proba has {proba.shape[1]} columns but n_classes={n_classes}; "
                "pass one column per class"
            )
        return proba
    codes, classes = encode(arr, "y_pred_or_proba", n_classes, "class")
    return np.eye(len(classes))[codes]


def _ermi_of_joint(joint: np.ndarray) -> float:
    """``Σ P(j,r)² / (P(j) P(r)) − 1`` over positive marginals, for a joint table summing to 1."""
    product = np.outer(joint.sum(axis=1), joint.sum(axis=0))
    support = product > 0
    # ERMI ≥ 0; the clip removes a rounding error of order 1e-16 at independence.
    return max(float(np.sum(joint[support] ** 2 / product[support]) - 1.0), 0.0)


def _joint_table(proba: np.ndarray, s_codes: np.ndarray, k: int) -> np.ndarray:
    """``P(ŷ=j, s=r) = (1/n) Σ_i F_ij 1[s_i=r]`` as an (l, k) table."""
    return proba.T @ np.eye(k)[s_codes] / proba.shape[0]


def _inputs(y_pred_or_proba, s, n_classes, n_groups):
    proba = _prediction_matrix(y_pred_or_proba, n_classes)
    s_codes, groups = encode_groups(s, "s", n_groups)
    check_same_length(s_codes, "s", proba, "y_pred_or_proba")
    return proba, s_codes, len(groups)


def ermi(y_pred_or_proba, s, n_classes: int | None = None, n_groups: int | None = None) -> float:
    """ERMI between predictions and the sensitive attribute (see the module docstring).

    ``n_classes`` / ``n_groups``, when given, mean hard labels / groups are
    already codes ``0..n-1`` (absent codes contribute nothing).
    """
    proba, s_codes, k = _inputs(y_pred_or_proba, s, n_classes, n_groups)
    return _ermi_of_joint(_joint_table(proba, s_codes, k))


def conditional_ermi(
    y_true, y_pred_or_proba, s, n_classes: int | None = None, n_groups: int | None = None
) -> float:
    """``Σ_y P(Y=y) · ERMI(ŷ; s | Y=y)``, the equalized-odds (conditional) ERMI.

    ``y_true`` is encoded on its own (its values only split the samples);
    ``n_classes`` applies to the predictions and, when given, to ``y_true``'s codes.
    """
    proba, s_codes, k = _inputs(y_pred_or_proba, s, n_classes, n_groups)
    y_codes, labels = encode(y_true, "y_true", n_classes, "class")
    check_same_length(y_codes, "y_true", proba, "y_pred_or_proba")
    n = proba.shape[0]
    total = 0.0
    for y in range(len(labels)):
        rows = y_codes == y
        if np.any(rows):
            total += rows.sum() / n * _ermi_of_joint(_joint_table(proba[rows], s_codes[rows], k))
    return total
