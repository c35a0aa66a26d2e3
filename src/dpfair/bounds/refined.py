"""App. G.3 of Mangold et al.: a tighter Lipschitz constant when both models are known.

For linear models ``h(x, y) = W_y·x``, only the component of x along each
``W_y − W'_y`` moves the scores: ::

    L^{h−h'}_{x} = 2 max_y |(W_y − W'_y)·x| / ‖W_y − W'_y‖                    (Mangold et al., eq. 38)

(for a binary model with one weight vector, ``|(w − w')·x| / ‖w − w'‖``). It needs
h* as well as h_priv, so it is a research diagnostic (the dotted line of their
Figure 1), never part of a released certificate.
"""

from __future__ import annotations

import numpy as np

from dpfair.utils.validation import check_features

__all__ = ["refined_lipschitz"]


def refined_lipschitz(X, coef, coef_other) -> np.ndarray:
    """``L^{h−h'}`` per row of ``X`` for linear coefficients (``(p,)`` one vector, or ``(labels, p)``)."""
    X = check_features(X, "X")
    a = np.atleast_2d(np.asarray(coef, dtype=np.float64))
    b = np.atleast_2d(np.asarray(coef_other, dtype=np.float64))
    if a.shape != b.shape or a.shape[1] != X.shape[1]:
        raise ValueError(f"coef {a.shape} and coef_other {b.shape} must share one shape (labels, {X.shape[1]})")
    diff = a - b
    norms = np.linalg.norm(diff, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        along = np.abs(X @ diff.T) / np.where(norms > 0, norms, 1.0)
    factor = 1.0 if a.shape[0] == 1 else 2.0
    return factor * along.max(axis=1)
