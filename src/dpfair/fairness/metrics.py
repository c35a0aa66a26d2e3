"""Fairness violations of hard predictions, per notion and convention.

Labels and groups may be any values; they are encoded in sorted order as
scikit-learn does (``y_true`` and ``y_pred`` share one set of classes).
Every violation is a worst case over rates ``P(ŷ = j | cell, S = r)``:

* ``"pairwise"``: ``max_{cell, j} max_{r, r'} |P(ŷ=j | cell, S=r) − P(ŷ=j | cell, S=r')|``
  (Lowy, Gupta, Razaviyayn, DP-FERMI, ICLR 2023, eq. 10 for demographic parity,
  eq. 11 for equalized odds);
* ``"marginal"``: ``max_{cell, j} max_r |P(ŷ=j | cell, S=r) − P(ŷ=j | cell)|``, the
  gap to the rate on the whole cell (fairlearn's ``method="to_overall"``).

For demographic parity the only cell is the whole data set; for equalized
odds the cells are the true labels ``y``; equal opportunity keeps the cell
``y = positive_label`` and the rate of ``ŷ = positive_label``; accuracy parity
compares ``P(ŷ = y | S = r)``.  For binary predictions the maximum over
``j ∈ {0, 1}`` equals the value for ``j = 1`` (the two rates sum to one), so the
pairwise values are fairlearn's ``demographic_parity_difference``,
``equalized_odds_difference`` (max of the TPR and FPR gaps),
``equal_opportunity_difference`` and ``MetricFrame(accuracy).difference()``.

**Undefined rates.**  A group with no sample in a cell (e.g. no positives in
group r) has no rate there; it is skipped and the remaining groups are
compared.  A cell in which fewer than two groups have samples contributes a
gap of 0 (nothing to compare).  No NaN is ever returned.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfair.fairness._inputs import check_same_length, encode_groups, encode_label_pair, label_index
from dpfair.fairness.ermi import conditional_ermi, ermi
from dpfair.fairness.inequality import (
    atkinson_index,
    gini_coefficient,
    mean_log_deviation,
    per_group_accuracy,
    theil_index,
)
from dpfair.fairness.notions import NOTIONS
from dpfair.validation import check_1d, encode_categories

CONVENTIONS = ("pairwise", "marginal")


def _check_convention(convention) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {list(CONVENTIONS)}, got {convention!r}")
    return convention


def _cell_group_counts(outcome, n_outcomes, cell, n_cells, s, k) -> np.ndarray:
    """``counts[c, r, j]``: samples in cell ``c`` and group ``r`` with outcome ``j``."""
    flat = (cell * k + s) * n_outcomes + outcome
    return np.bincount(flat, minlength=n_cells * k * n_outcomes).reshape(n_cells, k, n_outcomes)


def _worst_gap(counts: np.ndarray, convention: str, outcomes=slice(None)) -> float:
    """Worst gap of ``P(outcome = j | cell, S = r)`` over cells ``c``, groups and the ``outcomes`` j.

    ``counts`` has shape (cells, groups, outcomes); groups without samples in a
    cell are skipped (see the module docstring).
    """
    sizes = counts.sum(axis=2)  # (cells, groups)
    defined = sizes > 0
    rates = np.divide(counts, sizes[..., None], out=np.zeros(counts.shape), where=defined[..., None])
    rates = rates[:, :, outcomes]
    if convention == "pairwise":
        highest = np.where(defined[..., None], rates, -np.inf).max(axis=1)
        lowest = np.where(defined[..., None], rates, np.inf).min(axis=1)
        comparable = defined.sum(axis=1) >= 2
        gaps = np.where(comparable[:, None], highest - lowest, 0.0)
    else:
        cell_sizes = sizes.sum(axis=1)
        overall = np.divide(
            counts.sum(axis=1), cell_sizes[:, None],
            out=np.zeros(counts.shape[::2]), where=cell_sizes[:, None] > 0,
        )[:, outcomes]
        gaps = np.where(defined[..., None], np.abs(rates - overall[:, None, :]), 0.0).max(axis=1)
    return float(gaps.max()) if gaps.size else 0.0


def _groups(s, ref: np.ndarray, ref_name: str):
    s_codes, groups = encode_groups(s, "s")
    check_same_length(s_codes, "s", ref, ref_name)
    return s_codes, groups


def demographic_parity_violation(y_pred, s, convention: str = "pairwise") -> float:
    """``max_j max_{r,r'} |P(ŷ=j | S=r) − P(ŷ=j | S=r')|`` (DP-FERMI eq. 10), or the marginal gap.

    ``convention="marginal"`` gives ``max_j max_r |P(ŷ=j | S=r) − P(ŷ=j)|``.
    """
    _check_convention(convention)
    p, classes = encode_categories(check_1d(y_pred, "y_pred"), "y_pred")
    s_codes, groups = _groups(s, p, "y_pred")
    counts = _cell_group_counts(p, len(classes), np.zeros_like(p), 1, s_codes, len(groups))
    return _worst_gap(counts, convention)


def equalized_odds_violation(y_true, y_pred, s, convention: str = "pairwise") -> float:
    """``max_{y,j} max_{r,r'} |P(ŷ=j | Y=y, S=r) − P(ŷ=j | Y=y, S=r')|`` (DP-FERMI eq. 11).

    For binary labels this is the larger of the true- and false-positive-rate
    gaps; ``convention="marginal"`` compares each group with ``P(ŷ=j | Y=y)``.
    """
    _check_convention(convention)
    t, p, classes = encode_label_pair(y_true, y_pred)
    s_codes, groups = _groups(s, t, "y_true")
    l = len(classes)
    return _worst_gap(_cell_group_counts(p, l, t, l, s_codes, len(groups)), convention)


def equal_opportunity_violation(
    y_true, y_pred, s, positive_label=1, convention: str = "pairwise"
) -> float:
    """``max_{r,r'} |P(ŷ=+ | Y=+, S=r) − P(ŷ=+ | Y=+, S=r')|`` with ``+ = positive_label``.

    The true-positive-rate gap (Hardt et al., 2016); for more than two labels it
    is the rate of predicting ``positive_label`` among the rows labelled so.
    ``positive_label`` must be one of the labels of ``y_true`` or ``y_pred``.
    """
    _check_convention(convention)
    t, p, classes = encode_label_pair(y_true, y_pred)
    s_codes, groups = _groups(s, t, "y_true")
    pos = label_index(classes, positive_label)
    rows = t == pos
    hit = (p[rows] == pos).astype(np.int64)
    counts = _cell_group_counts(hit, 2, np.zeros_like(hit), 1, s_codes[rows], len(groups))
    return _worst_gap(counts, convention, outcomes=[1])


def accuracy_parity_violation(y_true, y_pred, s, convention: str = "pairwise") -> float:
    """``max_{r,r'} |P(ŷ=Y | S=r) − P(ŷ=Y | S=r')|``, or ``max_r |P(ŷ=Y | S=r) − P(ŷ=Y)|``."""
    _check_convention(convention)
    t, p, _ = encode_label_pair(y_true, y_pred)
    s_codes, groups = _groups(s, t, "y_true")
    correct = (t == p).astype(np.int64)
    counts = _cell_group_counts(correct, 2, np.zeros_like(correct), 1, s_codes, len(groups))
    return _worst_gap(counts, convention, outcomes=[1])


def selection_rates(y_pred, s) -> pd.DataFrame:
    """Table of ``P(ŷ = j | S = r)``: one row per group, one column per predicted label."""
    p, classes = encode_categories(check_1d(y_pred, "y_pred"), "y_pred")
    s_codes, groups = _groups(s, p, "y_pred")
    counts = _cell_group_counts(p, len(classes), np.zeros_like(p), 1, s_codes, len(groups))[0]
    table = counts / counts.sum(axis=1, keepdims=True)
    return pd.DataFrame(table, index=pd.Index(groups, name="group"), columns=pd.Index(classes, name="y_pred"))


def conditional_rates(y_true, y_pred, s) -> pd.DataFrame:
    """Tidy table of ``P(ŷ = j | Y = y, S = r)`` for the non-empty cells ``(y, r)``.

    Columns ``y_true, group, y_pred, rate, count`` (``count`` = size of the cell);
    empty cells, whose rate is undefined, are left out.
    """
    t, p, classes = encode_label_pair(y_true, y_pred)
    s_codes, groups = _groups(s, t, "y_true")
    l, k = len(classes), len(groups)
    counts = _cell_group_counts(p, l, t, l, s_codes, k)
    sizes = counts.sum(axis=2)
    y_idx, r_idx = np.nonzero(sizes)
    frames = [
        pd.DataFrame({
            "y_true": classes[y], "group": groups[r], "y_pred": classes,
            "rate": counts[y, r] / sizes[y, r], "count": sizes[y, r],
        })
        for y, r in zip(y_idx, r_idx)
    ]
    return pd.concat(frames, ignore_index=True)


def _violation(notion: str, y_true, y_pred, s, convention: str, positive_label) -> float:
    if notion == "demographic_parity":
        return demographic_parity_violation(y_pred, s, convention)
    if notion == "equalized_odds":
        return equalized_odds_violation(y_true, y_pred, s, convention)
    if notion == "equal_opportunity":
        return equal_opportunity_violation(y_true, y_pred, s, positive_label, convention)
    return accuracy_parity_violation(y_true, y_pred, s, convention)


def _summary_positive_label(y_true, y_pred):
    """The second smallest label: scikit-learn's positive class for binary labels, 1 for labels 0..l-1."""
    _, _, classes = encode_label_pair(y_true, y_pred)
    if len(classes) < 2:
        raise ValueError(
            f"y_true and y_pred hold a single label {classes.tolist()}; "
            "equal opportunity needs a positive and a negative label"
        )
    return classes[1]


def fairness_summary(y_true, y_pred, s) -> dict[str, float]:
    """The four pairwise violations, keyed by notion name (the CLI's JSON).

    Equal opportunity uses the second smallest label as positive: 1 when the
    labels are ``0..l-1`` (for ``l > 2`` that is the rate of predicting label 1
    among the rows labelled 1).
    """
    positive = _summary_positive_label(y_true, y_pred)
    return {notion: _violation(notion, y_true, y_pred, s, "pairwise", positive) for notion in NOTIONS}


def _group_name_list(groups: np.ndarray, group_names) -> list:
    if group_names is None:
        return groups.tolist()
    if isinstance(group_names, dict):
        missing = [g for g in groups.tolist() if g not in group_names]
        if missing:
            raise ValueError(f"group_names has no name for groups {missing[:5]}; add them")
        return [group_names[g] for g in groups.tolist()]
    names = list(group_names)
    if len(names) != len(groups):
        raise ValueError(
            f"group_names has {len(names)} names but s has {len(groups)} groups {groups.tolist()[:10]}; "
            "pass one name per group in sorted group order, or a dict {group: name}"
        )
    return names


def fairness_report(y_true, y_pred, s, group_names=None) -> pd.DataFrame:
    """One long table with columns ``metric, group, convention, value``.

    Rows:

    * ``accuracy`` and ``error`` overall (group ``"all"``) and per group;
    * the four violations (``demographic_parity``, ``equalized_odds``,
      ``equal_opportunity``, ``accuracy_parity``) in both conventions, equal
      opportunity with the positive label of :func:`fairness_summary`;
    * ``ermi`` (ERMI between ŷ and s) and ``conditional_ermi`` (given y);
    * inequality of the per-group accuracies, each group counted once:
      ``accuracy_atkinson_0.5``, ``accuracy_atkinson_1``, ``accuracy_gini``,
      ``accuracy_mean_log_deviation``, ``accuracy_theil``.

    ``convention`` is missing (NA) for rows that have none.  ``group_names`` renames
    the groups: a sequence in sorted group order, or a dict ``{group: name}``.
    """
    accuracy = per_group_accuracy(y_true, y_pred, s)
    t, p, _ = encode_label_pair(y_true, y_pred)
    names = _group_name_list(accuracy.index.to_numpy(), group_names)
    overall = float(np.mean(t == p))
    rows = [("accuracy", "all", None, overall), ("error", "all", None, 1.0 - overall)]
    for name, acc in zip(names, accuracy.to_numpy()):
        rows += [("accuracy", name, None, float(acc)), ("error", name, None, 1.0 - float(acc))]
    positive = _summary_positive_label(y_true, y_pred)
    for notion in NOTIONS:
        for convention in CONVENTIONS:
            rows.append((notion, "all", convention, _violation(notion, y_true, y_pred, s, convention, positive)))
    rows += [
        ("ermi", "all", None, ermi(y_pred, s)),
        ("conditional_ermi", "all", None, conditional_ermi(y_true, y_pred, s)),
        ("accuracy_atkinson_0.5", "all", None, atkinson_index(accuracy, epsilon=0.5)),
        ("accuracy_atkinson_1", "all", None, atkinson_index(accuracy, epsilon=1.0)),
        ("accuracy_gini", "all", None, gini_coefficient(accuracy)),
        ("accuracy_mean_log_deviation", "all", None, mean_log_deviation(accuracy)),
        ("accuracy_theil", "all", None, theil_index(accuracy)),
    ]
    return pd.DataFrame(rows, columns=["metric", "group", "convention", "value"])
