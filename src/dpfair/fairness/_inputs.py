"""Turn labels, predictions and sensitive groups into integer codes.

Labels and groups may be arbitrary values (strings, ``{-1, 1}``, ...): they
are encoded to ``0..l-1`` / ``0..k-1`` in sorted order, as scikit-learn does.
When the caller passes ``n_classes`` / ``n_groups`` the values must already be
such codes; they are then kept as they are, so a code absent from the data
(an empty group in a minibatch) keeps its index.
"""

from __future__ import annotations

import numpy as np

from dpfair.utils.validation import check_1d, encode_categories


def check_same_length(a: np.ndarray, name: str, ref: np.ndarray, ref_name: str) -> None:
    """``a`` and ``ref`` describe the same samples, so they must be equally long."""
    if a.shape[0] != ref.shape[0]:
        raise ValueError(
            f"{name} has {a.shape[0]} entries but {ref_name} has {ref.shape[0]}; "
            "pass one entry per sample"
        )


def check_codes(a, name: str, n_values: int, what: str) -> np.ndarray:
    """``a`` holds integer codes in ``0..n_values-1``; return them as int64."""
    if isinstance(n_values, bool) or not isinstance(n_values, (int, np.integer)) or n_values < 1:
        raise ValueError(f"the number of {what}s for {name} must be a positive integer, got {n_values!r}")
    arr = check_1d(a, name)
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and np.any(arr != np.round(arr))):
        raise ValueError(
            f"{name} must hold integer codes 0..{n_values - 1} when the number of {what}s is given; "
            f"leave it out to encode arbitrary values"
        )
    codes = arr.astype(np.int64)
    bad = (codes < 0) | (codes >= n_values)
    if np.any(bad):
        raise ValueError(
            f"{name} has codes {np.unique(codes[bad])[:5].tolist()} outside 0..{n_values - 1}; "
            f"pass the right number of {what}s or leave it out to encode arbitrary values"
        )
    return codes


def encode(a, name: str, n_values: int | None, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(codes, values)`` where ``values[codes]`` are the entries of ``a``."""
    if n_values is not None:
        return check_codes(a, name, n_values, what), np.arange(n_values)
    try:
        return encode_categories(a, name)
    except TypeError:
        raise ValueError(f"{name} mixes values that cannot be sorted together (e.g. numbers and strings)") from None


def encode_groups(s, name: str = "s", n_groups: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Encode the sensitive attribute; fairness needs at least two groups."""
    codes, groups = encode(s, name, n_groups, "group")
    if len(groups) < 2:
        raise ValueError(
            f"{name} has a single group ({groups.tolist()}); fairness compares at least two groups"
        )
    if codes.shape[0] == 0:
        raise ValueError(f"{name} is empty; pass at least one sample")
    return codes, groups


def encode_label_pair(y_true, y_pred, n_classes: int | None = None):
    """Encode true and predicted labels jointly (one set of classes for both).

    Returns ``(t, p, classes)``; with ``n_classes`` given both must be codes.
    """
    t_arr = check_1d(y_true, "y_true")
    p_arr = check_1d(y_pred, "y_pred")
    check_same_length(p_arr, "y_pred", t_arr, "y_true")
    if n_classes is not None:
        return (
            check_codes(t_arr, "y_true", n_classes, "class"),
            check_codes(p_arr, "y_pred", n_classes, "class"),
            np.arange(n_classes),
        )
    kinds = {"str" if a.dtype.kind in "US" else a.dtype.kind for a in (t_arr, p_arr) if a.dtype.kind != "O"}
    if "str" in kinds and len(kinds) > 1:
        raise ValueError(
            f"y_true holds {t_arr.dtype} values but y_pred holds {p_arr.dtype}; use one label type for both"
        )
    try:
        classes = np.unique(np.concatenate([t_arr, p_arr]))
    except TypeError:
        raise ValueError(
            "y_true and y_pred mix values that cannot be sorted together (e.g. numbers and strings); "
            "use one label type"
        ) from None
    t, _ = encode_categories(t_arr, "y_true", classes=classes)
    p, _ = encode_categories(p_arr, "y_pred", classes=classes)
    return t, p, classes


def label_index(classes: np.ndarray, label, name: str = "positive_label") -> int:
    """Index of ``label`` among ``classes``, or a ValueError listing the labels."""
    for i, c in enumerate(classes.tolist()):
        if c == label:
            return i
    raise ValueError(
        f"{name}={label!r} is not one of the labels {classes.tolist()[:10]}; pass one of them"
    )
