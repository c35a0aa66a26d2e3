"""The accuracy–fairness trade-off: the models no other model beats in both error and fairness violation.

A set of fitted models (a sweep's points, the curve of one method) trades error against violation; the
Pareto front is the part of it worth drawing or choosing from. :func:`pareto_front` computes it for any
two "lower is better" columns; :func:`dpfair.experiments.frontier` applies it per group of a sweep's
points, and :func:`dpfair.plot.tradeoff` joins a curve's front with a line.

Privacy: the front is post-processing of the figures it is given. When those are test scores of private
models, choosing a model by them is a further use of the test rows that no ledger counts
(:mod:`dpfair.experiments.frontier` says so).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["pareto_front"]


def pareto_front(x, y) -> np.ndarray:
    """Indices of the points no other point beats in both ``x`` and ``y`` (both lower is better), by ``x``.

    A point is dropped when another is at most as large in both and smaller in one (of equal points,
    the first is kept).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    order = np.lexsort((y, x))
    front, best = [], math.inf
    for i in order:
        if y[i] < best:
            front.append(i)
            best = y[i]
    return np.asarray(front, dtype=int)
