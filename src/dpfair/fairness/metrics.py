"""Fairness violations of hard predictions, per notion and convention.

Labels and groups may be any values; they are encoded in sorted order as
scikit-learn does (``y_true`` and ``y_pred`` share one set of classes).
Every violation is a worst case over rates ``P(ŷ = j | cell, S = r)``, pairwise
between groups or marginal to the cell; the cells and the rate of each notion,
and the conventions, are those of its :class:`~dpfair.fairness.notions.Notion`
(:meth:`~dpfair.fairness.notions.Notion.violation`): this module names them.

For demographic parity the only cell is the whole data set; for equalized
odds the cells are the true labels ``y``; equal opportunity keeps the cell
``y = positive_label`` and the rate of ``ŷ = positive_label``; accuracy parity
compares ``P(ŷ = y | S = r)``. For binary predictions the pairwise values are
fairlearn's ``demographic_parity_difference``, ``equalized_odds_difference``
(max of the TPR and FPR gaps), ``equal_opportunity_difference`` and
``MetricFrame(accuracy).difference()``. Any registered notion's violation is
``get_notion(name).violation(y_true, y_pred, s, convention, positive_label)``;
the summary and the report loop over the registry.

**Undefined rates.**  A group with no sample in a cell (e.g. no positives in
group r) has no rate there; it is skipped and the remaining groups are
compared.  A cell in which fewer than two groups have samples contributes a
gap of 0 (nothing to compare).  No NaN is ever returned.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfair.fairness._inputs import encode_label_pair
from dpfair.fairness.ermi import conditional_ermi, ermi
from dpfair.fairness.inequality import (
    atkinson_index,
    gini_coefficient,
    mean_log_deviation,
    per_group_accuracy,
    theil_index,
)
from dpfair.fairness.notions import CONVENTIONS, get_notion, notion_names

__all__ = [
    "CONVENTIONS", "accuracy_parity_violation", "conditional_rates", "demographic_parity_violation",
    "equal_opportunity_violation", "equalized_odds_violation", "fairness_report", "fairness_summary",
    "selection_rates", "summary_positive_label",
]


def demographic_parity_violation(y_pred, s, convention: str = "pairwise") -> float:
    """``max_j max_{r,r'} |P(ŷ=j | S=r) − P(ŷ=j | S=r')|`` (DP-FERMI eq. 10), or the marginal gap.

    ``convention="marginal"`` gives ``max_j max_r |P(ŷ=j | S=r) − P(ŷ=j)|``.
    """
    return get_notion("demographic_parity").violation(None, y_pred, s, convention)


def equalized_odds_violation(y_true, y_pred, s, convention: str = "pairwise") -> float:
    """``max_{y,j} max_{r,r'} |P(ŷ=j | Y=y, S=r) − P(ŷ=j | Y=y, S=r')|`` (DP-FERMI eq. 11).

    For binary labels this is the larger of the true- and false-positive-rate
    gaps; ``convention="marginal"`` compares each group with ``P(ŷ=j | Y=y)``.
    """
    return get_notion("equalized_odds").violation(y_true, y_pred, s, convention)


def equal_opportunity_violation(
    y_true, y_pred, s, positive_label=1, convention: str = "pairwise"
) -> float:
    """``max_{r,r'} |P(ŷ=+ | Y=+, S=r) − P(ŷ=+ | Y=+, S=r')|`` with ``+ = positive_label``.

    The true-positive-rate gap (Hardt et al., 2016); for more than two labels it
    is the rate of predicting ``positive_label`` among the rows labelled so.
    ``positive_label`` must be one of the labels of ``y_true`` or ``y_pred``.
    """
    return get_notion("equal_opportunity").violation(y_true, y_pred, s, convention, positive_label)


def accuracy_parity_violation(y_true, y_pred, s, convention: str = "pairwise") -> float:
    """``max_{r,r'} |P(ŷ=Y | S=r) − P(ŷ=Y | S=r')|``, or ``max_r |P(ŷ=Y | S=r) − P(ŷ=Y)|``."""
    return get_notion("accuracy_parity").violation(y_true, y_pred, s, convention)


def selection_rates(y_pred, s) -> pd.DataFrame:
    """Table of ``P(ŷ = j | S = r)``: one row per group, one column per predicted label."""
    table = get_notion("demographic_parity").rate_table(None, y_pred, s)
    counts = table.counts[0]
    return pd.DataFrame(counts / counts.sum(axis=1, keepdims=True), index=pd.Index(table.groups, name="group"),
                        columns=pd.Index(table.outcomes, name="y_pred"))


def conditional_rates(y_true, y_pred, s) -> pd.DataFrame:
    """Tidy table of ``P(ŷ = j | Y = y, S = r)`` for the non-empty cells ``(y, r)``.

    Columns ``y_true, group, y_pred, rate, count`` (``count`` = size of the cell);
    empty cells, whose rate is undefined, are left out.
    """
    table = get_notion("equalized_odds").rate_table(y_true, y_pred, s)
    classes, groups, counts = table.outcomes, table.groups, table.counts
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


def summary_positive_label(y_true, y_pred):
    """The second smallest label: scikit-learn's positive class for binary labels, 1 for labels 0..l-1."""
    _, _, classes = encode_label_pair(y_true, y_pred)
    if len(classes) < 2:
        raise ValueError(
            f"y_true and y_pred hold a single label {classes.tolist()}; "
            "equal opportunity needs a positive and a negative label"
        )
    return classes[1]


def fairness_summary(y_true, y_pred, s) -> dict[str, float]:
    """The pairwise violation of every registered notion, keyed by its name (the CLI's JSON).

    Notions with a positive label (equal opportunity, predictive equality) use the second smallest
    label: 1 when the labels are ``0..l-1`` (for ``l > 2``, the rate of predicting label 1 among the
    rows labelled 1, resp. labelled otherwise).
    """
    positive = summary_positive_label(y_true, y_pred)
    return {name: get_notion(name).violation(y_true, y_pred, s, "pairwise", positive) for name in notion_names()}


def group_name_list(groups: np.ndarray, group_names) -> list:
    """The names of ``groups`` (sorted group values), as ``group_names`` gives them: ``None`` (the values
    themselves), a dict (value → name; every value needs one) or a list (one name per group, in that order)."""
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
    * the violation of every registered notion (:func:`~dpfair.fairness.notions.notion_names`) in
      both conventions, with the positive label of :func:`fairness_summary`;
    * ``ermi`` (ERMI between ŷ and s) and ``conditional_ermi`` (given y);
    * inequality of the per-group accuracies, each group counted once:
      ``accuracy_atkinson_0.5``, ``accuracy_atkinson_1``, ``accuracy_gini``,
      ``accuracy_mean_log_deviation``, ``accuracy_theil``.

    ``convention`` is missing (NA) for rows that have none.  ``group_names`` renames
    the groups: a sequence in sorted group order, or a dict ``{group: name}``.
    """
    accuracy = per_group_accuracy(y_true, y_pred, s)
    t, p, _ = encode_label_pair(y_true, y_pred)
    names = group_name_list(accuracy.index.to_numpy(), group_names)
    overall = float(np.mean(t == p))
    rows = [("accuracy", "all", None, overall), ("error", "all", None, 1.0 - overall)]
    for name, acc in zip(names, accuracy.to_numpy()):
        rows += [("accuracy", name, None, float(acc)), ("error", name, None, 1.0 - float(acc))]
    positive = summary_positive_label(y_true, y_pred)
    for name in notion_names():
        for convention in CONVENTIONS:
            rows.append((name, "all", convention, get_notion(name).violation(y_true, y_pred, s, convention, positive)))
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
