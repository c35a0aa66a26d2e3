"""A row's prediction is a function of the row alone, whatever batch it comes in (issue 41, item 1).

scikit-learn's ``check_methods_subset_invariance`` failed on fresh machines for ``ERMClassifier``: the float32
logits of a row differed by ~1e-7 relative between the full batch and a subset, because BLAS picks its kernel by
the batch's shape. The probability path now runs in float64, where that dependence is ~1e-16 relative; the
tolerance below (1e-9 relative) is six orders above it and two below the old float32 error, so it holds on any
BLAS and fails on the float32 path.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier, ERMClassifier
from dpfair.exceptions import LearnedNothingWarning

RTOL, ATOL = 1e-9, 1e-12
#: the public lists of the binary groups and labels below: none is inferred from the private rows
PUBLIC = dict(groups=[0, 1], classes=[0, 1])


def _data(n=300, d=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 20.0, size=d)  # wide scales: large logits, as in the issue
    s = rng.integers(0, 2, n)
    y = (X[:, 0] / 20 + X[:, 1] / 5 + 0.5 * s + rng.normal(size=n) > 0).astype(int)
    return X, y, s


# epsilon=8: enough signal for 300 rows at the record unit (DP-SGD) and for released group counts (DP-FERMI)
# that are not too small, so that the fits warn of nothing they need not; what is checked is prediction alone
ESTIMATORS = {
    "erm": (lambda: ERMClassifier(max_iter=100), None),
    "dpsgd": (lambda: DPSGDClassifier(epsilon=8.0, epochs=2, random_state=0, **PUBLIC), None),
    # the columns' scales up to 20 (large logits, on purpose) are too much for DP-FERMI's noisy steps: it says so
    "dpfermi": (lambda: DPFERMIClassifier(epsilon=8.0, epochs=2, random_state=0, **PUBLIC), "unscaled features"),
}


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_predictions_do_not_depend_on_the_batch(name):
    make, warns = ESTIMATORS[name]
    X, y, s = _data()
    with pytest.warns(LearnedNothingWarning, match=warns) if warns else contextlib.nullcontext():
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
