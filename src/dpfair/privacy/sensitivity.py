"""Brute-force sensitivity checks: change one person, measure how far a released quantity moves.

Used by the tests of every private method (and available to users who write
their own contributions): ``f(X, y, s)`` computes the pre-noise quantity of a
release; :func:`max_neighbour_distance` evaluates it on the data and on every
neighbouring data set of a privacy unit and returns the largest distance.
Under ``"sensitive"`` a neighbour replaces one person's group by another
group; under ``"record"`` it removes one record. The release is correct when
this distance is at most ``2·bound`` (replace-one) or ``bound`` (add/remove).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch

from dpfair.privacy.units import PrivacyUnit, check_privacy_unit


def _flatten(value) -> np.ndarray:
    if isinstance(value, dict):
        return np.concatenate([_flatten(v) for _, v in sorted(value.items())])
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().double().reshape(-1).numpy()
    return np.asarray(value, dtype=np.float64).reshape(-1)


def neighbours(X, y, s, unit="sensitive", n_groups: int | None = None, rows: Iterable[int] | None = None):
    """Yield every neighbouring ``(X', y', s')`` of the privacy unit, for the chosen ``rows``."""
    unit = check_privacy_unit(unit)
    s = np.asarray(s)
    n = len(s)
    k = int(n_groups if n_groups is not None else s.max() + 1)
    for i in range(n) if rows is None else rows:
        if unit is PrivacyUnit.SENSITIVE:
            for r in range(k):
                if r != s[i]:
                    s2 = s.copy()
                    s2[i] = r
                    yield X, y, s2
        else:
            keep = np.arange(n) != i
            yield X[keep], y[keep], s[keep]


def max_neighbour_distance(
    f: Callable,
    X,
    y,
    s,
    unit="sensitive",
    ord: float = 2,
    n_groups: int | None = None,
    rows: Iterable[int] | None = None,
) -> float:
    """Largest ``‖f(D) − f(D')‖_ord`` over the neighbours ``D'`` of ``D = (X, y, s)``."""
    base = _flatten(f(X, y, s))
    worst = 0.0
    for Xn, yn, sn in neighbours(X, y, s, unit, n_groups, rows):
        worst = max(worst, float(np.linalg.norm(_flatten(f(Xn, yn, sn)) - base, ord=ord)))
    return worst
