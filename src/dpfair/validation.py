"""Input checks shared by data loaders, metrics and estimators.

Each check returns a clean numpy array or raises a ``ValueError`` that names the
argument and says how to fix it.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd


def check_features(X, name: str = "X") -> np.ndarray:
    """Return ``X`` as a 2-D float array with finite entries."""
    if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy.sparse
        raise ValueError(f"{name} is a sparse matrix; dpfair's estimators take dense arrays: pass {name}.toarray() "
                         "(or reduce its columns first if that does not fit in memory)")
    try:
        arr = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be numeric; encode categorical columns first (e.g. one-hot): {exc}"
        ) from None
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got a 1-D array of length {arr.shape[0]}; "
            f"use {name}.reshape(-1, 1) for a single feature"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no rows; pass at least one sample")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} contains NaN or infinite values (first at row {bad[0]}, column {bad[1]}); "
            "drop or impute those rows before fitting"
        )
    return arr


def check_1d(a, name: str, n: int | None = None) -> np.ndarray:
    """Return ``a`` as a 1-D array, optionally of length ``n``."""
    arr = np.asarray(a)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(
            f"{name} has {arr.shape[0]} entries but X has {n} rows; pass one entry per sample"
        )
    if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values; drop those rows")
    if arr.dtype == object and any(v is None or (isinstance(v, float) and np.isnan(v)) for v in arr):
        raise ValueError(f"{name} contains missing values (None/NaN); drop those rows")
    return arr


def encode_categories(a, name: str, n: int | None = None, classes=None):
    """Map arbitrary labels to codes ``0..k-1`` as scikit-learn does.

    Returns ``(codes, classes)`` where ``classes[codes] == a``.  If ``classes``
    is given (as at prediction time), values outside it are an error.
    """
    arr = check_1d(a, name, n)
    if classes is None:
        classes, codes = np.unique(arr, return_inverse=True)
    else:
        classes = np.asarray(classes)
        codes = np.asarray(pd.Categorical(arr, categories=classes).codes, dtype=np.int64)
        unknown = codes < 0
        if np.any(unknown):
            raise ValueError(
                f"{name} has values {np.unique(arr[unknown])[:5].tolist()} outside the known list "
                f"{classes.tolist()[:10]}; declare every value (groups=/classes=) or fix the data"
            )
    return codes.astype(np.int64), classes


def check_min_count(codes: np.ndarray, k: int, name: str, minimum: int, what: str = "value") -> np.ndarray:
    """Check that each of the ``k`` codes occurs at least ``minimum`` times; return the counts."""
    counts = np.bincount(codes, minlength=k)
    if k < 2:
        raise ValueError(
            f"{name} has a single {what}; fairness and classification need at least two"
        )
    small = np.flatnonzero(counts < minimum)
    if small.size:
        raise ValueError(
            f"{name} {what} {small[0]} has {counts[small[0]]} members, fewer than the {minimum} "
            "this method needs; merge small groups or collect more data"
        )
    return counts


def check_epsilon(epsilon, name: str = "epsilon", allow_inf: bool = True) -> float:
    """ε must be a positive number (``inf`` means no privacy when allowed)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"{name} must be a positive number, got {epsilon!r}")
    eps = float(epsilon)
    if np.isnan(eps) or eps <= 0:
        raise ValueError(f"{name} must be > 0, got {epsilon!r}; smaller ε means more privacy")
    if np.isinf(eps) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {epsilon!r}")
    return eps


def check_delta(delta, n: int | None = None, name: str = "delta") -> float:
    """δ must lie in (0, 1); warn when it exceeds 1/n (it then allows leaking a whole record)."""
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real):
        raise ValueError(f"{name} must be a number in (0, 1), got {delta!r}")
    d = float(delta)
    if not (0.0 < d < 1.0):
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {delta!r}; 1/n² is a common choice")
    if n is not None and d > 1.0 / n:
        warnings.warn(
            f"{name}={d:g} exceeds 1/n = {1.0 / n:g}: a mechanism could publish one person's data "
            "outright with that probability; choose delta < 1/n (e.g. 1/n²)",
            UserWarning,
            stacklevel=3,
        )
    return d


def check_positive(value, name: str, integer: bool = False, allow_zero: bool = False) -> float | int:
    """A positive (or non-negative) real or integer hyper-parameter."""
    ok_type = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, ok_type):
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind}, got {value!r}")
    v = int(value) if integer else float(value)
    if (v < 0 if allow_zero else v <= 0) or (not integer and np.isnan(v)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return v


def check_group_proportions(value, n_rows: int, k: int, notion: str) -> np.ndarray:
    """Public group proportions: shape ``(k,)`` (one row) or ``(n_rows, k)``, positive, rows summing to 1."""
    p = np.asarray(value, dtype=np.float64)
    want = (k,) if n_rows == 1 else (n_rows, k)
    if p.shape != want:
        raise ValueError(f"group_proportions must have shape {want} for notion={notion!r} and {k} groups, "
                         f"got shape {p.shape}")
    p = p.reshape(n_rows, k)
    if np.any(~np.isfinite(p)) or np.any(p <= 0) or not np.allclose(p.sum(1), 1.0, atol=1e-6):
        raise ValueError("group_proportions must be positive and each row must sum to 1 "
                         f"(got row sums {p.sum(1).round(6).tolist()}); pass the groups' shares of the "
                         "population, one positive entry per group")
    return p
