"""A row's prediction is a function of the row alone, whatever batch it comes in (issue 41, item 1).

scikit-learn's ``check_methods_subset_invariance`` failed on fresh machines for ``ERMClassifier``: the float32
logits of a row differed by ~1e-7 relative between the full batch and a subset, because BLAS picks its kernel by
the batch's shape. The probability path now runs in float64, where that dependence is ~1e-16 relative; the
tolerance below (1e-9 relative) is six orders above it and two below the old float32 error, so it holds on any
BLAS and fails on the float32 path.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier, ERMClassifier

RTOL, ATOL = 1e-9, 1e-12


def _data(n=300, d=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 20.0, size=d)  # wide scales: large logits, as in the issue
    s = rng.integers(0, 2, n)
    y = (X[:, 0] / 20 + X[:, 1] / 5 + 0.5 * s + rng.normal(size=n) > 0).astype(int)
    return X, y, s


ESTIMATORS = [
    lambda: ERMClassifier(max_iter=100),
    lambda: DPSGDClassifier(epsilon=1.0, epochs=2, random_state=0),
    lambda: DPFERMIClassifier(epsilon=1.0, epochs=2, random_state=0),
]


@pytest.mark.parametrize("make", ESTIMATORS, ids=["erm", "dpsgd", "dpfermi"])
def test_predictions_do_not_depend_on_the_batch(make):
    X, y, s = _data()
    est = make().fit(X, y, sensitive_features=s)
    for method in ("predict_proba", "predict_log_proba", "decision_function"):
        if not hasattr(est, method):
            continue
        full = np.asarray(getattr(est, method)(X))
        batches = [[i] for i in range(0, X.shape[0], 10)]  # one row at a time, as scikit-learn's check does
        batches += [np.arange(0, X.shape[0], X.shape[0] // size)[:size] for size in (3, 17, 64)]
        for rows in batches:
            part = np.asarray(getattr(est, method)(X[rows]))
            np.testing.assert_allclose(part, full[rows], rtol=RTOL, atol=ATOL, err_msg=f"{method}, {len(rows)} rows")
