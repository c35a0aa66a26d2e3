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

These four are instances of one construction on the notion's reference cells
and rate (:class:`~dpfair.fairness.notions.Notion`, :func:`fairness_coefficients`),
which gives any registered notion its coefficients: a cell of one label is
the block of equalized odds for that label, a selection rate over both labels
the demographic-parity block restricted to the cell's rows.

Every cell of one label that a measure conditions on must be non-empty,
otherwise that measure is undefined and a ValueError says which.
The coefficients depend on the label and group distribution, which is private
data: a private algorithm must release them, or take them as public knowledge.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dpfair.fairness._inputs import check_same_length, encode_groups, label_index
from dpfair.fairness.notions import ACCURACY, Notion, get_notion
from dpfair.utils.validation import check_1d, encode_categories, encode_on


class FairnessCoefficients(NamedTuple):
    """``F = C0 + C @ accuracies``; rows follow ``measure_keys``, columns ``group_keys``."""

    C0: np.ndarray
    C: np.ndarray
    measure_keys: tuple
    group_keys: tuple


def _needs_binary(notion: Notion) -> bool:
    """A rate of a predicted class over a cell of several labels is an affine map of accuracies only for two
    labels (P(ŷ = 1 | Y = 0) = 1 − A₀); with more, only accuracy rates and one-label cells are."""
    return notion.rate != ACCURACY and any(len(cell) > 1 for cell in notion.cell_labels(3, 1))


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


def _require_groups(keys, sizes) -> None:
    """Every constraint group of a label cell must have rows, else its measure is undefined."""
    for (label, group), size in zip(keys, sizes):
        if label is not None and size == 0:
            raise ValueError(
                f"no sample has y code {label} in group code {group}: the measure of that cell is "
                "undefined; merge or drop that group, or use demographic_parity / accuracy_parity"
            )


def _positive(notion: Notion, classes, positive_label) -> int:
    if not notion.uses_positive_label:
        return 1
    if positive_label is None:
        if len(classes) != 2:
            raise ValueError(f"{notion.name} with {len(classes)} labels needs positive_label (the desirable "
                             f"outcome), one of {classes.tolist()[:10]}")
        return 1
    return label_index(classes, positive_label)


def _rate_of_accuracy(notion: Notion, label, n_labels: int, positive: int) -> tuple[int, int]:
    """``(α, β)`` with the notion's rate on label ``label``'s rows ``= α + β·P(ŷ = label | Y = label)``.

    Accuracy: (0, 1). A selection rate is that of class 1 (binary; the positive class when the notion has
    one): (0, 1) on the rows of that class, (1, −1) on the others (``P(ŷ=1 | Y=0) = 1 − A₀``). With more
    than two labels only one-label cells get here, and their rate is that label's (Mangold et al.'s
    multi-class setting).
    """
    if notion.rate == ACCURACY or n_labels != 2:
        return 0, 1
    return (0, 1) if label == positive else (1, -1)


def fairness_coefficients(notion, y, s, *, positive_label=None) -> FairnessCoefficients:
    """``(C0, C, measure_keys, group_keys)`` of ``notion`` on the distribution of ``(y, s)``.

    ``C0`` has shape (K,), ``C`` shape (K, K'); ``measure_keys[k]`` names the
    measure ``F_k`` and ``group_keys[k']`` the accuracy group ``D_{k'}`` (see the
    module docstring for the formulas, Mangold et al. Sec. 2 and App. A).
    With more than two labels (Mangold et al.'s multi-class setting),
    equalized odds compares every label's accuracy ``P(ŷ=Y | Y=y, S=r) − P(ŷ=Y | Y=y)``,
    equal opportunity does so for ``positive_label`` only (binary default: the larger
    label) and accuracy parity is unchanged; demographic parity and predictive equality
    need binary labels (their Example 4).

    Built from the notion's cells (:class:`~dpfair.fairness.notions.Notion`), one block per cell c:
    the measures are its constraint groups ``F_{c,r} = rate_{c,r} − Σ_{r'} P(S=r' | c) rate_{c,r'}``.
    A cell of one label, or any cell under an accuracy rate, is its own accuracy groups
    (``rate = α + β A``, ``C = β (I − 1 P(S | c)ᵀ)``, ``C0 = 0``); a cell of several labels under a
    selection rate (binary) has one accuracy group per (label, group), weighted by ``P(Y=y | c, S=r)``.
    """
    notion = get_notion(notion)
    y_codes, s_codes, k, classes = _codes(y, s, binary=_needs_binary(notion))
    n_labels = len(classes)
    pos = _positive(notion, classes, positive_label)
    counts = _cell_counts(y_codes, s_codes, k, n_labels)
    eye = np.eye(k)
    C0s, blocks, measure_keys, group_keys = [], [], [], []
    for labels in notion.cell_labels(n_labels, pos):
        keys = tuple((notion.cell_key(labels), r) for r in range(k))
        cell = counts[list(labels)]
        if len(labels) == 1 or notion.rate == ACCURACY:
            sizes = cell.sum(axis=0)
            _require_groups(keys, sizes)
            _, beta = _rate_of_accuracy(notion, labels[0] if len(labels) == 1 else None, n_labels, pos)
            blocks.append(beta * (eye - (sizes / sizes.sum())[None, :]))
            C0s.append(np.zeros(k))
            group_keys += keys
        else:  # binary labels, a selection rate over both: F_r = Σ_y P(Y=y | c, S=r)(α_y + β_y A_{y,r}) − ...
            joint = cell / cell.sum()
            given = cell / cell.sum(axis=0)  # P(Y=y | c, S=r)
            C0 = np.zeros(k)
            columns = []
            for i, label in enumerate(labels):
                alpha, beta = _rate_of_accuracy(notion, label, n_labels, pos)
                if alpha:
                    C0 = C0 + alpha * (given[i] - joint[i].sum())
                own, shared = eye * given[i][:, None], joint[i][None, :]
                columns.append(own - shared if beta > 0 else shared - own)  # β = ±1
            blocks.append(np.hstack(columns))
            C0s.append(C0)
            group_keys += [(label, r) for label in labels for r in range(k)]
        measure_keys += keys
    C = np.zeros((len(measure_keys), len(group_keys)))
    row = col = 0
    for block in blocks:
        C[row:row + block.shape[0], col:col + block.shape[1]] = block
        row, col = row + block.shape[0], col + block.shape[1]
    return FairnessCoefficients(np.concatenate(C0s), C, tuple(measure_keys), tuple(group_keys))


def accuracy_group_codes(group_keys: tuple, y_codes: np.ndarray, s_codes: np.ndarray) -> np.ndarray:
    """The accuracy group ``D_{k'}`` of each row: an index into ``group_keys``, or -1 (in none of them)."""
    codes = np.full(len(y_codes), -1, dtype=np.int64)
    for g, (label, group) in enumerate(group_keys):
        codes[(s_codes == group) & ((y_codes == label) if label is not None else True)] = g
    return codes


def constraint_group_accuracies(notion, y_true, y_pred, s, *, positive_label=None) -> np.ndarray:
    """``P(ŷ = Y | D_{k'})`` for each accuracy group, in ``group_keys`` order.

    Empty cells (possible only under demographic parity, where their
    coefficient is zero) get 0.
    """
    t, s_codes, _, classes, p = _codes(y_true, s, y_pred, binary=_needs_binary(get_notion(notion)))
    keys = fairness_coefficients(notion, y_true, s, positive_label=positive_label).group_keys
    codes = accuracy_group_codes(keys, t, s_codes)
    inside = codes >= 0
    hits = np.bincount(codes[inside], weights=(t == p)[inside].astype(np.float64), minlength=len(keys))
    counts = np.bincount(codes[inside], minlength=len(keys))
    return np.divide(hits, counts, out=np.zeros_like(hits), where=counts > 0)


def group_fairness_values(notion, y_true, y_pred, s) -> np.ndarray:
    """The measures ``F_k`` computed from their definitions, in ``measure_keys`` order.

    The rate of each constraint group minus that of its reference cell (the notion's partition; binary
    labels, 1 the positive class): demographic_parity ``P(ŷ=1 | S=r) − P(ŷ=1)``; equalized_odds
    ``P(ŷ=1 | Y=y, S=r) − P(ŷ=1 | Y=y)`` for cells ``(y, r)``, label-major; equal_opportunity the
    ``y = 1`` cells of equalized odds, predictive_equality the ``y = 0`` ones; accuracy_parity
    ``P(ŷ=Y | S=r) − P(ŷ=Y)``. They equal ``C0 + C @ constraint_group_accuracies(...)``.
    """
    notion = get_notion(notion)
    t, s_codes, k, p = _binary_codes(y_true, s, y_pred)
    part = notion.partition(t, s_codes, n_classes=2, n_groups=k)
    hit = (notion.outcomes(t, p, 2, 1)[0] == 1).astype(np.float64)
    inside = part.codes >= 0
    sizes = np.bincount(part.codes[inside], minlength=part.n_constraint_groups)
    _require_groups(part.keys, sizes)
    rate = np.bincount(part.codes[inside], weights=hit[inside], minlength=part.n_constraint_groups) / sizes
    cells = part.reference[inside]
    cell_rate = (np.bincount(cells, weights=hit[inside], minlength=part.n_reference_cells)
                 / np.bincount(cells, minlength=part.n_reference_cells))
    return rate - cell_rate[part.reference_of]
