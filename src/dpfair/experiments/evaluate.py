"""One evaluation of a fitted estimator on labelled rows: error, every fairness notion, per-group accuracy.

:func:`evaluate` is what ``dpfair train`` and ``dpfair predict`` print and save. It reads
the rows it is given (usually a test part): an evaluation on private rows is a further use of
them that no ledger counts (the guide's privacy model: *Not covered*).
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from dpfair.fairness import accuracy_inequality, fairness_summary, predict_with_groups

#: FairDP's inequality indices of the per-group accuracies, by key in :func:`evaluate`'s result.
INEQUALITY_INDICES = ("atkinson", "gini", "mean_log_deviation", "theil")


def _groups(estimator, X, s):
    """``(X, s)``: s as ``fit`` takes it, one group value per row or the name of a column of the DataFrame X (then
    taken out of X); ``None``: the column the estimator took s from in ``fit`` (``sensitive_column_``)."""
    column = s if isinstance(s, str) else (getattr(estimator, "sensitive_column_", None) if s is None else None)
    if column is not None and isinstance(X, pd.DataFrame) and column in X.columns:
        return X.drop(columns=[column]), X[column]
    if isinstance(s, str):
        raise ValueError(f"sensitive_features={s!r} is not a column of X; pass a DataFrame holding that column, or "
                         "the groups themselves (one value per row)")
    if s is None:
        raise ValueError("evaluate needs the groups of the rows: pass sensitive_features (one value per row, or the "
                         "name of a column of X)")
    return X, s


def _name(g, group_names):
    """A JSON key for group ``g``: ``group_names[g]`` for an integer code when names are given, else the value."""
    if isinstance(g, np.generic):
        g = g.item()
    if group_names is not None and isinstance(g, numbers.Integral) and not isinstance(g, bool):
        return group_names[g]
    return g


def evaluate(estimator, X, y, s=None, group_names=None, *, sensitive_features=None) -> dict:
    """Error, the four fairness violations and the per-group accuracies of ``estimator`` on ``(X, y, s)``.

    Takes what ``fit`` takes: ``s`` (or ``sensitive_features=``) holds one group value per row (codes, strings,
    a Series) or names a column of the DataFrame ``X``; left out, the column ``fit`` took s from is used.
    Returns ``{"n": rows, "error": P(ŷ ≠ y), "fairness": {notion: pairwise violation},
    "per_group_accuracy": {group: accuracy}, "accuracy_inequality": {index: value}}``
    (:func:`~dpfair.fairness.fairness_summary`, :func:`~dpfair.fairness.accuracy_inequality`);
    ``group_names[g]`` names an integer group code ``g`` (other group values name themselves).
    """
    if s is not None and sensitive_features is not None:
        raise ValueError("pass the groups once: as s or as sensitive_features=, not both")
    X, s = _groups(estimator, X, s if s is not None else sensitive_features)
    y = np.asarray(y)
    s = np.asarray(s)
    y_pred = predict_with_groups(estimator, X, s)
    inequality = accuracy_inequality(y, y_pred, s)
    return {
        "n": int(len(y)),
        "error": float(np.mean(y_pred != y)),
        "fairness": fairness_summary(y, y_pred, s),
        "per_group_accuracy": {_name(g, group_names): a for g, a in inequality["per_group_accuracy"].items()},
        "accuracy_inequality": {k: inequality[k] for k in INEQUALITY_INDICES},
    }
