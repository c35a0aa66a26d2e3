"""Shared pieces of Jagielski et al.'s two private fair learners (*Differentially Private Fair Learning*, ICML 2019).

* the cell counts both algorithms release (one person is in exactly one cell, so a change of their
  sensitive attribute moves them between two cells: L1 distance 2, radius 1 under replace-one;
  adding or removing them changes one cell by 1);
* Hardt et al.'s equalized-odds linear program on such counts, solved by HiGHS;
* the prediction side of a randomized classifier that may read the sensitive attribute.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linprog
from sklearn.utils.validation import check_is_fitted

from dpfair.fairness.notions import get_notion
from dpfair.utils.validation import encode_categories

#: Seed stream (beside ``random_state``) of the coins a randomized classifier tosses in ``predict``.
_PREDICT_STREAM = 7


def cell_counts(values, y, s, n_values: int, n_classes: int, n_groups: int) -> np.ndarray:
    """``counts[v, r, c]``: rows with value ``v`` (e.g. the base prediction ŷ), group ``r`` and label ``c``.

    The (label, group) cells are equalized odds' constraint groups (:mod:`dpfair.fairness.notions`).
    """
    part = get_notion("equalized_odds").partition(y, s, n_classes=n_classes, n_groups=n_groups)
    flat = np.asarray(values, dtype=np.int64) * part.n_constraint_groups + part.codes
    counts = np.bincount(flat, minlength=n_values * part.n_constraint_groups)
    return counts.reshape(n_values, n_classes, n_groups).transpose(0, 2, 1)


def laplace_slack(scale: float, cell_sizes: np.ndarray, n_released: int, beta: float | None) -> np.ndarray:
    """Jagielski et al.'s relaxation of the rate constraints for each label: ``2·b·ln(m/β) / min_r N[r, c]``.

    With probability ≥ 1 − β every one of the ``m`` Laplace(b) noises is at most ``b·ln(m/β)`` in
    absolute value (a union bound), so each noisy rate ``ñ₁/Ñ`` lies within about ``2·b·ln(m/β)/Ñ``
    of the true one and the true optimum of the LP stays feasible. ``beta=None`` gives no slack.
    """
    if beta is None or scale == 0.0:
        return np.zeros(cell_sizes.shape[1])
    return 2.0 * scale * math.log(n_released / beta) / cell_sizes.min(axis=0)


def equalized_odds_lp(counts: np.ndarray, slack) -> np.ndarray:
    """Hardt, Price, Srebro (2016), eq. (4)-(5), with relaxed constraints; ``counts[ŷ, r, c]`` (binary ŷ, c).

    Variables ``p[ŷ, r] = P(Ỹ = 1 | Ŷ = ŷ, S = r)``. With ``q[r, c] = n[1, r, c] / (n[0, r, c] + n[1, r, c])``
    the derived rate is ``ρ[r, c] = p[0, r](1 − q[r, c]) + p[1, r] q[r, c]`` (c = 0: false-positive rate,
    c = 1: true-positive rate). Minimise the expected error ``Σ n[ŷ, r, 0] p[ŷ, r] + n[ŷ, r, 1](1 − p[ŷ, r])``
    subject to ``|ρ[r, c] − ρ[r', c]| ≤ slack[c]`` for every label c and pair of groups r < r'.
    """
    k = counts.shape[1]
    totals = counts.sum(axis=0)  # (k, 2)
    q = counts[1] / totals
    cost = (counts[:, :, 0] - counts[:, :, 1]).reshape(-1) / counts.sum()
    rows, bounds = [], []
    for c in range(2):
        for r in range(k):
            for r2 in range(r + 1, k):
                row = np.zeros((2, k))
                row[0, r], row[1, r] = 1 - q[r, c], q[r, c]
                row[0, r2], row[1, r2] = -(1 - q[r2, c]), -q[r2, c]
                rows += [row.reshape(-1), -row.reshape(-1)]
                bounds += [slack[c], slack[c]]
    result = linprog(cost, A_ub=np.array(rows), b_ub=np.array(bounds), bounds=(0.0, 1.0), method="highs")
    if result.status != 0:
        raise ValueError(f"the equalized-odds linear program failed ({result.message}); raise epsilon or the "
                         "tolerance so that the noisy constraints are easier to meet")
    return np.clip(result.x.reshape(2, k), 0.0, 1.0)


class RandomizedGroupClassifierMixin:
    """``predict_proba``/``predict`` of a randomized binary classifier that may read the sensitive attribute.

    Subclasses implement ``_positive_probability(X, s_codes)`` (``s_codes`` is None when
    ``_uses_sensitive_at_prediction()`` is false). ``predict`` tosses the coins with a generator seeded by
    the fitted ``random_state_``, so the same call gives the same labels.
    """

    _predict_needs_sensitive = True
    _binary_only = True

    def _uses_sensitive_at_prediction(self) -> bool:
        return True

    def predict_proba(self, X, sensitive_features=None) -> np.ndarray:
        check_is_fitted(self, "classes_")
        X, sensitive_features = self._prediction_groups(X, sensitive_features)
        X = self._prediction_features(X)
        s = None
        if self._uses_sensitive_at_prediction():
            if sensitive_features is None:
                raise ValueError(f"{type(self).__name__} uses the sensitive attribute at prediction time: call "
                                 "predict(X, sensitive_features=s)")
            s, _ = encode_categories(sensitive_features, "sensitive_features", X.shape[0], classes=self.groups_)
        p1 = self._positive_probability(X, s)
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X, sensitive_features=None) -> np.ndarray:
        p1 = self.predict_proba(X, sensitive_features)[:, 1]
        coins = np.random.default_rng([self.random_state_, _PREDICT_STREAM]).random(len(p1))
        return self.classes_[(coins < p1).astype(np.int64)]
