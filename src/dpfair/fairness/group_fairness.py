"""Group fairness functions as affine maps of subgroup accuracies.

Mangold, Perrot, Bellet, Tommasi, *Differential Privacy has Bounded Impact on
Fairness in Classification* (ICML 2023), Section 2 and Appendix A, write
each group fairness measure of a binary classifier ``h`` as

    F_k(h) = C⁰_k + Σ_{k'} C^{k'}_k · P(h(X) = Y | D_{k'}),        (Mangold et al., Sec. 2)

an affine function of the accuracies on *accuracy groups* ``D_{k'}``.  Their
certificates bound ``|F_k(h_priv) − F_k(h)|`` through the Lipschitz constant of
each accuracy, so all they need from a notion are ``C⁰`` and ``C``; this module
provides them, computed from the empirical distribution of ``(y, s)``.

Labels are binary: the two values of ``y`` are encoded to 0 < 1 in sorted
order and 1 is the positive class (``ŷ = 1`` is the favourable decision).
Write ``A_{y,r} = P(ŷ = y | Y = y, S = r)`` (so ``A_{1,r}`` is the true positive
rate and ``1 − A_{0,r}`` the false positive rate of group ``r``),
``π_{y,r} = P(Y = y, S = r)``, ``p_r = P(S = r)`` and ``q_y = P(Y = y)``.
Keys are ``(label, group)`` codes; label ``None`` means "any label".

**Demographic parity** (measures ``r``, accuracy groups the cells ``(y, r)``):
``F_r = P(ŷ=1 | S=r) − P(ŷ=1)``.  Since
``P(ŷ=1 | S=r) = P(Y=1|S=r)·A_{1,r} + P(Y=0|S=r)·(1 − A_{0,r})`` and
``P(ŷ=1) = Σ_{r'} p_{r'} P(ŷ=1 | S=r')``,

    C⁰_r = P(Y=0 | S=r) − q_0,
    C^{(1,r')}_r = 1[r'=r]·P(Y=1 | S=r) − π_{1,r'},
    C^{(0,r')}_r = π_{0,r'} − 1[r'=r]·P(Y=0 | S=r).

An empty cell ``(y, r')`` has a zero coefficient in every row, so its (undefined)
accuracy is reported as 0.

**Equalized odds** (measures and accuracy groups the cells ``(y, r)``):
``F_{(y,r)} = P(ŷ=1 | Y=y, S=r) − P(ŷ=1 | Y=y)``, the gap of the true positive
rate (y = 1) and of the false positive rate (y = 0) to the label's overall rate.
With ``P(ŷ=1 | Y=y) = Σ_{r'} P(S=r' | Y=y)·P(ŷ=1 | Y=y, S=r')``,

    C⁰_{(y,r)} = 0,
    C^{(y',r')}_{(y,r)} = 1[y'=y]·(2y − 1)·(1[r'=r] − P(S=r' | Y=y)).

For ``y = 0`` this is minus the accuracy form ``A_{0,r} − P(ŷ=Y | Y=0)``;
``|F_k|`` is the same either way.

**Equal opportunity**: the ``y = 1`` rows and columns of equalized odds,
``F_r = A_{1,r} − P(ŷ=1 | Y=1)``, ``C = I − 1·P(S=· | Y=1)ᵀ``, ``C⁰ = 0``.

**Accuracy parity** (measures and accuracy groups ``r``):
``F_r = P(ŷ=Y | S=r) − P(ŷ=Y)``, ``C = I − 1·pᵀ``, ``C⁰ = 0``.

Every cell an equalized-odds or equal-opportunity measure conditions on must
be non-empty, otherwise that measure is undefined and a ValueError says which.
The coefficients depend on the label and group distribution, which is private
data: a private algorithm must release them, or take them as public knowledge.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dpfair.fairness._inputs import check_same_length, encode_groups, encode_on, label_index
from dpfair.fairness.notions import (
    ACCURACY_PARITY,
    DEMOGRAPHIC_PARITY,
    EQUAL_OPPORTUNITY,
    EQUALIZED_ODDS,
    check_notion,
)
from dpfair.validation import check_1d, encode_categories


class FairnessCoefficients(NamedTuple):
    """``F = C0 + C @ accuracies``; rows follow ``measure_keys``, columns ``group_keys``."""

    C0: np.ndarray
    C: np.ndarray
    measure_keys: tuple
    group_keys: tuple


def _codes(y, s, y_pred=None, *, binary: bool):
    """Encode labels (sorted; binary problems need exactly two), groups and predictions on the same classes."""
    y_arr = check_1d(y, "y")
    y_codes, classes = encode_categories(y_arr, "y")
    if len(classes) < 2 or (binary and len(classes) != 2):
        raise ValueError(
            f"this measure is defined for {'binary' if binary else 'at least two'} labels, y has "
            f"{len(classes)} ({classes.tolist()[:10]}); pass y with {'exactly' if binary else 'at least'} two "
            "label values"
        )
    s_codes, groups = encode_groups(s, "s")
    check_same_length(s_codes, "s", y_codes, "y")
    if y_pred is None:
        return y_codes, s_codes, len(groups), classes
    p_arr = check_1d(y_pred, "y_pred")
    check_same_length(p_arr, "y_pred", y_codes, "y")
    return y_codes, s_codes, len(groups), classes, encode_on(p_arr, "y_pred", classes, "y")


def _binary_codes(y, s, y_pred=None):
    out = _codes(y, s, y_pred, binary=True)
    return out[:3] if y_pred is None else (*out[:3], out[4])


def _cell_counts(y_codes, s_codes, k, n_labels=2) -> np.ndarray:
    """``N[y, r]``: number of samples with label ``y`` in group ``r``."""
    return np.bincount(y_codes * k + s_codes, minlength=n_labels * k).reshape(n_labels, k).astype(np.float64)


def _require_cells(counts, labels) -> None:
    for y in labels:
        empty = np.flatnonzero(counts[y] == 0)
        if empty.size:
            raise ValueError(
                f"no sample has y code {y} in group code {empty[0]}: the measure of that cell is "
                "undefined; merge or drop that group, or use demographic_parity / accuracy_parity"
            )


def _cell_keys(labels, k) -> tuple:
    return tuple((y, r) for y in labels for r in range(k))


def _positive(classes, positive_label) -> int:
    if positive_label is None:
        if len(classes) != 2:
            raise ValueError(f"equal_opportunity with {len(classes)} labels needs positive_label (the desirable "
                             f"outcome), one of {classes.tolist()[:10]}")
        return 1
    return label_index(classes, positive_label)


def fairness_coefficients(notion: str, y, s, *, positive_label=None) -> FairnessCoefficients:
    """``(C0, C, measure_keys, group_keys)`` of ``notion`` on the distribution of ``(y, s)``.

    ``C0`` has shape (K,), ``C`` shape (K, K'); ``measure_keys[k]`` names the
    measure ``F_k`` and ``group_keys[k']`` the accuracy group ``D_{k'}`` (see the
    module docstring for the formulas, Mangold et al. Sec. 2 and App. A).
    With more than two labels (Mangold et al.'s multi-class setting),
    equalized odds compares every label's accuracy ``P(ŷ=Y | Y=y, S=r) − P(ŷ=Y | Y=y)``,
    equal opportunity does so for ``positive_label`` only (binary default: the larger
    label) and accuracy parity is unchanged; demographic parity needs binary labels
    (their Example 4).
    """
    check_notion(notion)
    y_codes, s_codes, k, classes = _codes(y, s, binary=notion == DEMOGRAPHIC_PARITY)
    n_labels = len(classes)
    counts = _cell_counts(y_codes, s_codes, k, n_labels)
    eye = np.eye(k)
    if notion == DEMOGRAPHIC_PARITY:
        joint = counts / counts.sum()
        given_s = counts / counts.sum(axis=0)  # P(Y=y | S=r)
        C0 = given_s[0] - joint[0].sum()
        C = np.hstack([joint[0][None, :] - eye * given_s[0][:, None],
                       eye * given_s[1][:, None] - joint[1][None, :]])
        return FairnessCoefficients(C0, C, tuple((None, r) for r in range(k)), _cell_keys((0, 1), k))
    if notion == EQUALIZED_ODDS:
        _require_cells(counts, range(n_labels))
        given_y = counts / counts.sum(axis=1, keepdims=True)  # P(S=r | Y=y)
        C = np.zeros((n_labels * k, n_labels * k))
        for y_val in range(n_labels):
            block = slice(y_val * k, (y_val + 1) * k)
            sign = 2 * y_val - 1 if n_labels == 2 else 1  # binary: the false positive rate's sign (see above)
            C[block, block] = sign * (eye - given_y[y_val][None, :])
        keys = _cell_keys(range(n_labels), k)
        return FairnessCoefficients(np.zeros(n_labels * k), C, keys, keys)
    if notion == EQUAL_OPPORTUNITY:
        pos = _positive(classes, positive_label)
        _require_cells(counts, (pos,))
        keys = _cell_keys((pos,), k)
        return FairnessCoefficients(np.zeros(k), eye - (counts[pos] / counts[pos].sum())[None, :], keys, keys)
    p = counts.sum(axis=0) / counts.sum()
    keys = tuple((None, r) for r in range(k))
    return FairnessCoefficients(np.zeros(k), eye - p[None, :], keys, keys)


def accuracy_group_codes(group_keys: tuple, y_codes: np.ndarray, s_codes: np.ndarray) -> np.ndarray:
    """The accuracy group ``D_{k'}`` of each row: an index into ``group_keys``, or -1 (in none of them)."""
    codes = np.full(len(y_codes), -1, dtype=np.int64)
    for g, (label, group) in enumerate(group_keys):
        codes[(s_codes == group) & ((y_codes == label) if label is not None else True)] = g
    return codes


def constraint_group_accuracies(notion: str, y_true, y_pred, s, *, positive_label=None) -> np.ndarray:
    """``P(ŷ = Y | D_{k'})`` for each accuracy group, in ``group_keys`` order.

    Empty cells (possible only under demographic parity, where their
    coefficient is zero) get 0.
    """
    t, s_codes, _, classes, p = _codes(y_true, s, y_pred, binary=notion == DEMOGRAPHIC_PARITY)
    keys = fairness_coefficients(notion, y_true, s, positive_label=positive_label).group_keys
    codes = accuracy_group_codes(keys, t, s_codes)
    inside = codes >= 0
    hits = np.bincount(codes[inside], weights=(t == p)[inside].astype(np.float64), minlength=len(keys))
    counts = np.bincount(codes[inside], minlength=len(keys))
    return np.divide(hits, counts, out=np.zeros_like(hits), where=counts > 0)


def group_fairness_values(notion: str, y_true, y_pred, s) -> np.ndarray:
    """The measures ``F_k`` computed from their definitions, in ``measure_keys`` order.

    demographic_parity: ``P(ŷ=1 | S=r) − P(ŷ=1)``;
    equalized_odds: ``P(ŷ=1 | Y=y, S=r) − P(ŷ=1 | Y=y)`` for cells ``(y, r)``, label-major;
    equal_opportunity: the ``y = 1`` cells of equalized odds;
    accuracy_parity: ``P(ŷ=Y | S=r) − P(ŷ=Y)``.
    They equal ``C0 + C @ constraint_group_accuracies(...)``.
    """
    check_notion(notion)
    t, s_codes, k, p = _binary_codes(y_true, s, y_pred)
    if notion in (DEMOGRAPHIC_PARITY, ACCURACY_PARITY):
        hit = (p == 1) if notion == DEMOGRAPHIC_PARITY else (p == t)
        rate = np.bincount(s_codes, weights=hit.astype(np.float64), minlength=k) / np.bincount(
            s_codes, minlength=k
        )
        return rate - hit.mean()
    counts = _cell_counts(t, s_codes, k)
    labels = (1,) if notion == EQUAL_OPPORTUNITY else (0, 1)
    _require_cells(counts, labels)
    positives = np.bincount(t * k + s_codes, weights=(p == 1).astype(np.float64), minlength=2 * k)
    positives = positives.reshape(2, k)
    rate = positives / counts
    label_rate = positives.sum(axis=1, keepdims=True) / counts.sum(axis=1, keepdims=True)
    return (rate - label_rate)[list(labels)].ravel()
