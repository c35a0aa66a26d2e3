"""How each group fairness notion partitions the data into constraint groups.

A notion asks that some rate be equal on every *constraint group* and on the
*reference cell* that contains it:

=====================  ============================  ==================  ===========================
notion                 constraint group of a row     reference cell      rate compared
=====================  ============================  ==================  ===========================
demographic_parity     ``s``                         all data            P(ŷ = j | group)
equalized_odds         ``(y, s)``                    ``y``               P(ŷ = j | group)
equal_opportunity      ``(y, s)`` for y = positive   ``y = positive``    P(ŷ = positive | group)
accuracy_parity        ``s``                         all data            P(ŷ = y | group)
=====================  ============================  ==================  ===========================

Rows with ``y ≠ positive`` are unconstrained under equal opportunity; they get
the code ``-1``.  The private algorithms (PF-LD, reductions, certificates)
build their per-group losses and constraint violations from this partition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpfair.fairness._inputs import check_same_length, encode, encode_groups, label_index
from dpfair.validation import check_1d

DEMOGRAPHIC_PARITY = "demographic_parity"
EQUALIZED_ODDS = "equalized_odds"
EQUAL_OPPORTUNITY = "equal_opportunity"
ACCURACY_PARITY = "accuracy_parity"

NOTIONS = (DEMOGRAPHIC_PARITY, EQUALIZED_ODDS, EQUAL_OPPORTUNITY, ACCURACY_PARITY)

#: Notions whose partition does not depend on the label.
LABEL_FREE_NOTIONS = (DEMOGRAPHIC_PARITY, ACCURACY_PARITY)


def check_notion(notion) -> str:
    if notion not in NOTIONS:
        raise ValueError(f"notion must be one of {list(NOTIONS)}, got {notion!r}")
    return notion


@dataclass(frozen=True)
class ConstraintGroups:
    """The partition of the samples that a fairness notion constrains.

    Attributes
    ----------
    notion : str
    codes : ndarray of shape (n,)
        Constraint group of each sample, ``-1`` for unconstrained samples.
    reference : ndarray of shape (n,)
        Reference cell of each sample, ``-1`` for unconstrained samples.
    keys : tuple of (label_code or None, group_code)
        ``keys[g]`` describes constraint group ``g``; ``None`` means "any label".
    reference_of : ndarray of shape (n_constraint_groups,)
        The reference cell that contains each constraint group.
    classes, groups : ndarray
        Original label and group values (``classes`` is None for label-free notions).
    """

    notion: str
    codes: np.ndarray
    reference: np.ndarray
    keys: tuple
    reference_of: np.ndarray
    classes: np.ndarray | None
    groups: np.ndarray

    @property
    def n_constraint_groups(self) -> int:
        return len(self.keys)

    @property
    def n_reference_cells(self) -> int:
        return int(self.reference_of.max()) + 1


def constraint_groups(
    notion: str,
    y,
    s,
    n_classes: int | None = None,
    n_groups: int | None = None,
    positive_label=1,
) -> ConstraintGroups:
    """Map each sample to its constraint group and reference cell under ``notion``.

    Parameters
    ----------
    notion : {"demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity"}
    y : array-like of shape (n,) or None
        True labels; may be None for the label-free notions (demographic and
        accuracy parity).  Arbitrary values are encoded to ``0..l-1`` in sorted
        order unless ``n_classes`` is given, in which case ``y`` must hold those codes.
    s : array-like of shape (n,)
        Sensitive groups, encoded likewise (``n_groups`` keeps codes as given,
        so groups absent from ``s`` keep their index and form empty constraint groups).
    positive_label :
        The value of ``y`` whose rows equal opportunity constrains.

    Group indices: ``s`` for demographic/accuracy parity; ``y * k + s`` for
    equalized odds (one group per (label, group) cell, label-major);
    ``s`` among the rows with ``y = positive_label`` for equal opportunity.
    """
    check_notion(notion)
    s_codes, groups = encode_groups(s, "s", n_groups)
    k = len(groups)
    n = s_codes.shape[0]
    if notion in LABEL_FREE_NOTIONS:
        if y is not None:
            check_same_length(check_1d(y, "y"), "y", s_codes, "s")
        keys = tuple((None, r) for r in range(k))
        return ConstraintGroups(
            notion, s_codes, np.zeros(n, dtype=np.int64), keys,
            np.zeros(k, dtype=np.int64), None, groups,
        )
    if y is None:
        raise ValueError(f"{notion} conditions on the true label; pass y")
    y_codes, classes = encode(y, "y", n_classes, "class")
    check_same_length(y_codes, "y", s_codes, "s")
    if notion == EQUALIZED_ODDS:
        l = len(classes)
        keys = tuple((c, r) for c in range(l) for r in range(k))
        return ConstraintGroups(
            notion, y_codes * k + s_codes, y_codes, keys,
            np.repeat(np.arange(l, dtype=np.int64), k), classes, groups,
        )
    pos = label_index(classes, positive_label)
    is_pos = y_codes == pos
    keys = tuple((pos, r) for r in range(k))
    return ConstraintGroups(
        notion, np.where(is_pos, s_codes, -1), np.where(is_pos, 0, -1), keys,
        np.zeros(k, dtype=np.int64), classes, groups,
    )
