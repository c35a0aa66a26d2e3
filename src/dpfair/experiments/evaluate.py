"""One evaluation of a fitted estimator on labelled rows: error, every fairness notion, per-group accuracy.

:func:`evaluate` is what ``dpfair train`` and ``dpfair predict`` print and save. It reads
the rows it is given (usually a test part): an evaluation on private rows is a further use of
them that no ledger counts (README, "Privacy model": *Not covered*).
"""

from __future__ import annotations

import numpy as np

from dpfair.fairness import accuracy_inequality, fairness_summary, predict_with_groups

#: FairDP's inequality indices of the per-group accuracies, by key in :func:`evaluate`'s result.
INEQUALITY_INDICES = ("atkinson", "gini", "mean_log_deviation", "theil")


def evaluate(estimator, X, y, s, group_names=None) -> dict:
    """Error, the four fairness violations and the per-group accuracies of ``estimator`` on ``(X, y, s)``.

    Returns ``{"n": rows, "error": P(ŷ ≠ y), "fairness": {notion: pairwise violation},
    "per_group_accuracy": {group name: accuracy}, "accuracy_inequality": {index: value}}``
    (:func:`~dpfair.fairness.fairness_summary`, :func:`~dpfair.fairness.accuracy_inequality`);
    ``group_names[g]`` names group code ``g`` (default: the codes themselves).
    """
    y = np.asarray(y)
    y_pred = predict_with_groups(estimator, X, s)
    inequality = accuracy_inequality(y, y_pred, s)
    name = (lambda g: g) if group_names is None else (lambda g: group_names[g])
    return {
        "n": int(len(y)),
        "error": float(np.mean(y_pred != y)),
        "fairness": fairness_summary(y, y_pred, s),
        "per_group_accuracy": {name(g): a for g, a in inequality["per_group_accuracy"].items()},
        "accuracy_inequality": {k: inequality[k] for k in INEQUALITY_INDICES},
    }
