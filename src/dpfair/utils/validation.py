"""Input checks shared by data loaders, metrics and estimators.

Each check returns a clean numpy array or raises a ``ValueError`` that names the
argument and says how to fix it.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import pandas as pd


class NonNumericError(ValueError, TypeError):
    """A non-numeric entry where numbers are needed: a ``ValueError`` like every bad input to dpfair, and a
    ``TypeError`` like numpy's and scikit-learn's own (as numpy's ``AxisError`` is both a ValueError and an
    IndexError), so that code written for either catches it."""


def _reject_complex(arr: np.ndarray, name: str) -> None:
    if arr.dtype.kind == "c":
        raise ValueError(f"{name} holds complex numbers (Complex data not supported); pass real values, e.g. "
                         "the real and imaginary parts as separate columns")


class CheckedFeatures:
    """The inputs already passed through :func:`check_features`, by object, with their results.

    For a caller that fits many estimators on one ``X`` it holds unchanged meanwhile (DP-FERMI's grid): it makes
    one and hands it to each fit's ``begin_fit(..., checked=)``, so the data is checked in one pass instead of one
    per estimator. An explicit value, not ambient state: only the fits handed it reuse its results.
    """

    def __init__(self) -> None:
        self._seen: dict[int, tuple[object, np.ndarray]] = {}

    def features(self, X, name: str = "X") -> np.ndarray:
        """:func:`check_features` of ``X``, computed once per object (held, so its ``id`` is not reused)."""
        seen = self._seen.get(id(X))
        if seen is None or seen[0] is not X:
            seen = self._seen[id(X)] = (X, check_features(X, name))
        return seen[1]


#: Cells of ``X`` checked for finiteness at a time (:func:`check_features`): a few MiB of temporaries.
FINITE_CHECK_CELLS = 1 << 22


def check_features(X, name: str = "X") -> np.ndarray:
    """Return ``X`` as a 2-D float array with finite entries, with positive strides and writable.

    A reversed or read-only view (``X[:, ::-1]``, a read-only memory map) is copied, since torch
    takes neither; any other array already of dtype float64 or float32 (a feature store's rows,
    :mod:`dpfair.datasets.store`, or its copy-on-write memory map) is returned as is, without a copy, and
    checked a block of rows at a time, so that the check holds no second table.
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):  # scipy.sparse
        raise ValueError(f"{name} is a sparse matrix; dpfair's estimators take dense arrays: pass {name}.toarray() "
                         "(or reduce its columns first if that does not fit in memory)")
    try:
        arr = np.asarray(X)
        if arr.dtype.kind != "c" and arr.dtype != np.float32:
            arr = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        error = NonNumericError if isinstance(exc, TypeError) else ValueError
        raise error(f"{name} must be numeric; encode categorical columns first (e.g. one-hot): {exc}") from None
    _reject_complex(arr, name)
    if arr.ndim == 1:
        raise ValueError(
            f"{name} must be 2-D (n_samples, n_features), got a 1-D array of length {arr.shape[0]}; "
            f"Reshape your data: {name}.reshape(-1, 1) for a single feature, {name}.reshape(1, -1) for a "
            "single sample"
        )
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} has no rows; pass at least one sample")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required; "
                         "pass at least one feature column")
    if not arr.flags.writeable or min(arr.strides) < 0:
        arr = np.array(arr, order="C")
    block = max(1, FINITE_CHECK_CELLS // max(1, arr.shape[1]))
    for start in range(0, arr.shape[0], block):
        if not np.all(np.isfinite(arr[start:start + block])):
            bad = np.argwhere(~np.isfinite(arr[start:start + block]))[0] + (start, 0)
            break
    else:
        bad = None
    if bad is not None:
        raise ValueError(
            f"{name} contains NaN or infinite values (first at row {bad[0]}, column {bad[1]}); "
            "drop or impute those rows before fitting"
        )
    return arr


#: The Euclidean norm a row of ``X`` must stay below for float32 training (:func:`check_feature_scale`).
FLOAT32_MAX_ROW_NORM = 1e18


def check_feature_scale(X: np.ndarray, name: str = "X", bound: float = FLOAT32_MAX_ROW_NORM) -> np.ndarray:
    """Refuse a row of ``X`` (as :func:`check_features` returns it) whose Euclidean norm reaches ``bound``.

    **Why float32 training needs it.** A per-sample gradient of a linear layer is ``δ ⊗ (x, 1)``, with
    ``‖δ‖² ≤ 2`` for softmax cross-entropy, and clipping computes its squared norm ``‖δ‖²(‖x‖² + 1)``. In
    float32 (largest value 3.4e38) that square is ``inf`` once ``‖x‖`` passes about 1.3e19, and the clipped
    gradient ``0 · inf`` is NaN: the model turns to NaN silently. ``bound = 1e18`` keeps the square 170 times
    below the limit, room for hidden layers and fairness terms.

    **Why the refusal is sound.** It branches on X. Under ``privacy_unit="sensitive"`` X is public: nothing
    private is read. Under ``"record"`` the bound is part of the data universe, a public constant fixed in
    code, as finiteness is (:func:`check_features`): the guarantee is stated for data sets whose rows all
    lie below it, and between two such neighbours the check never fires, so it adds nothing to ε. A data set
    with a row beyond it is outside the guarantee either way: trained on, it would publish a NaN model, which
    tells the same with certainty.
    """
    peak = max(abs(float(X.max())), abs(float(X.min()))) if X.size else 0.0
    if peak * math.sqrt(X.shape[1]) < bound:  # every row's norm is at most peak·√d
        return X
    norms = np.linalg.norm(X, axis=1)
    row = int(np.argmax(norms))  # the largest row, the one the message names
    if norms[row] < bound:
        return X
    raise ValueError(f"{name} has a row of norm {norms[row]:.3g} (row {row}); float32 training overflows on rows of "
                     f"norm {bound:.0e} or more (their squared gradient norms pass 3.4e38 and the model turns to "
                     f"NaN): standardise {name} (e.g. sklearn's StandardScaler) or rescale its large columns")


def check_1d(a, name: str, n: int | None = None) -> np.ndarray:
    """Return ``a`` as a 1-D array, optionally of length ``n``; a column vector ``(n, 1)`` is raveled, with
    scikit-learn's ``DataConversionWarning``."""
    arr = np.asarray(a)
    if arr.ndim == 2 and arr.shape[1] == 1:
        # imported here, so that `dpfair datasets` (reading cached summaries) imports no scikit-learn
        from sklearn.exceptions import DataConversionWarning

        warnings.warn(f"A column-vector {name} was passed when a 1d array was expected; pass {name}.ravel() "
                      "(shape (n_samples,))", DataConversionWarning, stacklevel=2)
        arr = arr.ravel()
    _reject_complex(arr, name)
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


def encode_on(a: np.ndarray, name: str, classes: np.ndarray, source: str) -> np.ndarray:
    """Codes of ``a`` among ``classes`` (sorted: the labels of ``source``, e.g. a fitted model's ``classes_``);
    a value outside them is an error naming it."""
    codes = np.searchsorted(classes, a).clip(0, len(classes) - 1)
    unknown = classes[codes] != a
    if np.any(unknown):
        raise ValueError(
            f"{name} has values {np.unique(a[unknown])[:5].tolist()} that are not labels of {source} "
            f"({classes.tolist()[:10]}); predict one of those labels"
        )
    return codes.astype(np.int64)


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


#: The largest finite privacy budget ε a fit or a noise calibration takes (:func:`check_epsilon` with
#: ``budget=True``). A guarantee e^ε past it means nothing (e^710 is past the float range, so the noise of
#: a randomized response or a Laplace at such an ε is below what a float represents), and the accountants'
#: cost is only proven bounded up to it (:mod:`dpfair.privacy.accounting`): ``inf`` asks for no noise.
MAX_EPSILON = 1e4


def check_epsilon(epsilon, name: str = "epsilon", allow_inf: bool = True, budget: bool = False) -> float:
    """ε must be a positive number (``inf`` means no privacy when allowed); a privacy ``budget`` that is
    finite must also be at most :data:`MAX_EPSILON`."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"{name} must be a positive number, got {epsilon!r}")
    eps = float(epsilon)
    if np.isnan(eps) or eps <= 0:
        raise ValueError(f"{name} must be > 0, got {epsilon!r}; smaller ε means more privacy")
    if np.isinf(eps) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {epsilon!r}")
    if budget and MAX_EPSILON < eps < math.inf:
        raise ValueError(f"{name}={eps:g} is above {MAX_EPSILON:g}, the largest finite privacy budget dpfair calibrates "
                         f"noise for (a guarantee e^ε past it means nothing); give {name} ≤ {MAX_EPSILON:g}"
                         + (f", or {name}=inf to train without noise" if allow_inf else ""))
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
