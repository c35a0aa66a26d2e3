"""Group fairness notions as objects: which rows a notion compares, and which rate (cf. fairlearn's ``Moment``).

A notion asks that some rate be equal on every *constraint group* and on the *reference cell* that
contains it. It is two choices, each an attribute of its :class:`Notion`:

* its **reference cells**: sets of labels (:meth:`Notion.cell_labels`); a row's cell is fixed by its
  label ``y``, a constraint group is a (cell, group ``s``) pair, and rows in no cell are unconstrained;
* its **rate** (:attr:`Notion.rate`): ``P(ŷ = j | ·)`` for every class j (``"selection"``),
  ``P(ŷ = positive | ·)`` (``"positive"``) or ``P(ŷ = y | ·)`` (``"accuracy"``).

=======================  ==========================  =====================  ==========================
notion                   reference cells             rate                   for binary labels
=======================  ==========================  =====================  ==========================
demographic_parity       all rows                    P(ŷ = j | group)       selection rate
equalized_odds           one per label ``y``         P(ŷ = j | group)       TPR and FPR
equal_opportunity        ``y = positive``            P(ŷ = positive | ·)    TPR (Hardt et al. 2016)
accuracy_parity          all rows                    P(ŷ = y | group)       accuracy
predictive_equality      ``y ≠ positive``            P(ŷ = positive | ·)    FPR (Corbett-Davies 2017)
=======================  ==========================  =====================  ==========================

Everything the library does with a notion derives from these two choices:

* :meth:`Notion.partition` maps each row to its constraint group and reference cell (``-1`` for
  unconstrained rows); the private algorithms build their per-group losses, constraint violations
  and released counts from it;
* :meth:`Notion.rate_table` counts, per cell, group and outcome, the rows of some predictions, and
  :meth:`Notion.violation` is its worst gap (DP-FERMI eq. 10 for demographic parity, eq. 11 for
  equalized odds):

  - ``"pairwise"``: ``max_{cell, j} max_{r, r'} |P(ŷ=j | cell, S=r) − P(ŷ=j | cell, S=r')|``;
  - ``"marginal"``: ``max_{cell, j} max_r |P(ŷ=j | cell, S=r) − P(ŷ=j | cell)|`` (fairlearn's
    ``method="to_overall"``).

  For binary labels the maximum over ``j ∈ {0, 1}`` equals the value for ``j = 1`` (the two rates sum
  to one), so the pairwise values are fairlearn's ``demographic_parity_difference``,
  ``equalized_odds_difference``, ``equal_opportunity_difference``, ``false_positive_rate_difference`` and
  ``MetricFrame(accuracy).difference()``. A group with no row in a cell has no rate there and is
  skipped; a cell where fewer than two groups have rows contributes 0. No NaN is returned.
* both go through the contingency table ``table[r, y, ŷ]`` of the rows (:meth:`Notion.table_rate_table`,
  :meth:`Notion.table_violation`), so a released (noisy) table gives every notion's violation by the same code
  as the exact one (``dpfair.experiments.evaluate`` with ``epsilon=``).

**What a measurement compares.** A private measurement (``dpfair.measurement``, one layer up) releases
per-group rates under fairlearn's names, the positive class against the rest; each notion states, as data, the
rates it compares there (:attr:`Notion.compared_rates`): demographic parity ``selection_rate``, equalized odds
``true_positive_rate`` and ``false_positive_rate``, equal opportunity ``true_positive_rate``, predictive
equality ``false_positive_rate``, accuracy parity ``accuracy``. For two labels the largest between-groups
difference of those rates is the notion's pairwise violation (the identities above); for more labels a
selection-rate notion compares every class, which those rates do not hold, so :meth:`Notion.measured_rates`
claims them for two labels only (a subclass may claim more). :meth:`Notion.difference` and
:meth:`Notion.difference_interval` read a measured frame through a small duck-typed protocol —
``frame.difference(rates)`` (each rate's max − min over the groups) and ``frame.max_difference_interval(rates)``
(the interval of the largest of them, simultaneous over the rates) — so this module imports no measurement
or privacy module: the value is ``max_rate difference(rate)``, its interval the frame's interval of that max.

Notions are registered by name (:func:`register_notion`, :func:`get_notion`): estimators keep a
string hyper-parameter (``notion="equalized_odds"``, as scikit-learn's ``clone`` needs) and resolve
it once here. A new notion is a subclass that states its cells, rate and compared rates, registered in this
file; :func:`unregister_notion` (or the context manager :func:`registered_notion`) takes back one that is not
built in, as tests that register a notion of their own do.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfair.fairness._inputs import (
    check_same_length,
    encode,
    encode_groups,
    encode_label_pair,
    label_index,
)
from dpfair.utils.validation import check_1d, encode_categories

__all__ = [
    "ACCURACY",
    "CONVENTIONS",
    "NOTIONS",
    "POSITIVE",
    "SELECTION",
    "AccuracyParity",
    "ConstraintGroups",
    "DemographicParity",
    "EqualOpportunity",
    "EqualizedOdds",
    "Notion",
    "PredictiveEquality",
    "RateTable",
    "check_convention",
    "check_notion",
    "constraint_groups",
    "contingency_table",
    "get_notion",
    "notion_names",
    "register_notion",
    "registered_notion",
    "unregister_notion",
]

#: The rates a notion can compare.
SELECTION, POSITIVE, ACCURACY = "selection", "positive", "accuracy"

#: How a violation aggregates the gaps of a cell: between two groups, or between a group and the cell.
CONVENTIONS = ("pairwise", "marginal")


def check_convention(convention) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {list(CONVENTIONS)}, got {convention!r}")
    return convention


@dataclass(frozen=True)
class ConstraintGroups:
    """The partition of the samples that a fairness notion constrains.

    Attributes
    ----------
    notion : str
    codes : ndarray, one per row (n)
        Constraint group of each sample, ``-1`` for unconstrained samples.
    reference : ndarray, one per row (n)
        Reference cell of each sample, ``-1`` for unconstrained samples.
    keys : tuple of pairs
        ``keys[g] = (label, group_code)`` describes constraint group ``g``: ``label`` is the label code of its
        cell, ``None`` when the cell holds every label, or a tuple of codes when it holds several but not all.
    reference_of : ndarray, one per constraint group
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


@dataclass(frozen=True)
class RateTable:
    """``counts[c, r, j]``: rows of reference cell c and group r whose outcome is j, and what is compared.

    ``outcomes`` names the outcomes (the classes for a selection rate; ``False``/``True`` for a hit);
    ``compared`` holds the indices of the outcomes whose rates the notion compares; ``cell_keys[c]`` is
    the label entry of cell c's constraint groups (see :class:`ConstraintGroups`).
    """

    notion: str
    counts: np.ndarray
    cell_keys: tuple
    groups: np.ndarray
    outcomes: np.ndarray
    compared: list

    @property
    def sizes(self) -> np.ndarray:
        """``sizes[c, r]``: rows of cell c and group r."""
        return self.counts.sum(axis=2)

    def rates(self) -> np.ndarray:
        """``P(outcome = j | cell c, S = r)`` for the compared j, shape (cells, groups, compared); NaN if empty."""
        sizes = self.sizes[..., None]
        out = np.full(self.counts.shape, np.nan)
        np.divide(self.counts, sizes, out=out, where=sizes > 0)
        return out[:, :, self.compared]

    def gap(self, convention: str = "pairwise") -> float:
        """The worst gap of the compared rates over cells (module docstring); undefined rates are skipped."""
        check_convention(convention)
        counts = self.counts
        sizes = counts.sum(axis=2)  # (cells, groups)
        defined = sizes > 0
        rates = np.divide(counts, sizes[..., None], out=np.zeros(counts.shape), where=defined[..., None])
        rates = rates[:, :, self.compared]
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
            )[:, self.compared]
            gaps = np.where(defined[..., None], np.abs(rates - overall[:, None, :]), 0.0).max(axis=1)
        return float(gaps.max()) if gaps.size else 0.0

    def frame(self) -> pd.DataFrame:
        """One row per constraint group (index ``label, group``), the compared rates and the group's ``count``."""
        n_cells, k = self.counts.shape[:2]
        index = pd.MultiIndex.from_tuples([(self.cell_keys[c], self.groups[r]) for c in range(n_cells)
                                           for r in range(k)], names=["label", "group"])
        table = pd.DataFrame(self.rates().reshape(n_cells * k, -1), index=index,
                             columns=pd.Index(self.outcomes[self.compared], name="outcome"))
        table["count"] = self.sizes.reshape(-1)
        return table


def cell_group_counts(outcome, n_outcomes: int, cell, n_cells: int, s, k: int) -> np.ndarray:
    """``counts[c, r, j]``: samples in cell ``c`` and group ``r`` with outcome ``j`` (all arguments as codes)."""
    flat = (cell * k + s) * n_outcomes + outcome
    return np.bincount(flat, minlength=n_cells * k * n_outcomes).reshape(n_cells, k, n_outcomes)


def contingency_table(y, y_pred, s, n_classes: int, n_groups: int) -> np.ndarray:
    """``table[r, y, ŷ]``: rows of group r with label y and prediction ŷ (all arguments as codes); integers."""
    y, y_pred, s = (np.asarray(a, dtype=np.int64) for a in (y, y_pred, s))
    flat = (s * n_classes + y) * n_classes + y_pred
    return np.bincount(flat, minlength=n_groups * n_classes * n_classes).reshape(n_groups, n_classes, n_classes)


class Notion:
    """A group fairness notion: its reference cells (sets of labels) and the rate it compares in them.

    Subclasses set :attr:`name`, :attr:`rate`, :attr:`conditions_on_label`,
    :attr:`uses_positive_label` and :attr:`compared_rates`, and say which labels each cell holds
    (:meth:`cell_labels`); the partition, the outcomes, the rate table, the violation and the reading
    of a measured frame follow (module docstring). Labels are
    codes ``0..l-1`` in the low-level methods (``positive`` a code too); :meth:`partition`,
    :meth:`rate_table` and :meth:`violation` take arbitrary values and encode them in sorted order.
    """

    #: The registry key and the ``notion=`` value of estimators.
    name: str = ""
    #: SELECTION (``P(ŷ = j | ·)`` for every class j), POSITIVE (``P(ŷ = positive | ·)``) or ACCURACY.
    rate: str = SELECTION
    #: Whether the cells depend on the label (False: one cell, every row).
    conditions_on_label: bool = False
    #: Whether the notion singles out a positive label (its cells or its rate).
    uses_positive_label: bool = False
    #: The rates of a measurement (fairlearn's names, the positive class against the rest) the notion compares
    #: across groups: its difference on a frame is the largest of their between-groups differences (module
    #: docstring). Empty: no measured rate gives the notion.
    compared_rates: tuple[str, ...] = ()

    def cell_labels(self, n_classes: int, positive: int = 1) -> tuple[tuple[int, ...], ...]:
        """The label codes of each reference cell, for ``n_classes`` labels and the ``positive`` code."""
        return (tuple(range(n_classes)),)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # ---- on a measured frame -----------------------------------------------------------------------------
    def measured_rates(self, n_classes: int) -> tuple[str, ...]:
        """The :attr:`compared_rates` when their largest between-groups difference is this notion's pairwise
        violation on ``n_classes`` labels, else ``()``. For two labels it is (``P(ŷ = 0 | ·) = 1 − P(ŷ = 1 | ·)``,
        so the gap of class 1 is every class's); for more, the measured rates single out the positive class and
        the built-in notions claim none."""
        return tuple(self.compared_rates) if int(n_classes) == 2 else ()

    def _compared(self) -> list[str]:
        if not self.compared_rates:
            raise ValueError(f"{self.name} compares no measured rate (its compared_rates is empty); measure it "
                             "from a table with table_violation")
        return list(self.compared_rates)

    def difference(self, frame) -> float:
        """The notion's value on a measured frame: ``max_rate frame.difference(rates)[rate]`` over
        :attr:`compared_rates`, each the largest minus the smallest group's rate (fairlearn's
        ``between_groups``). For two labels the pairwise violation of the released rates; post-processing."""
        rates = self._compared()
        values = frame.difference(rates)
        return float(max(values[r] for r in rates))

    def difference_interval(self, frame) -> tuple[float, float]:
        """The interval of :meth:`difference`: ``frame.max_difference_interval(rates)``, the frame's interval of
        the largest between-groups difference of the compared rates (simultaneous over them)."""
        low, high = frame.max_difference_interval(self._compared())
        return float(low), float(high)

    # ---- on codes ----------------------------------------------------------------------------------------
    def cell_key(self, labels: tuple[int, ...]):
        """The label entry of a cell's constraint-group keys: its one label, None (every label), or the tuple."""
        if not self.conditions_on_label:
            return None
        return labels[0] if len(labels) == 1 else tuple(labels)

    def reference_cells(self, y, n_classes: int, positive: int = 1) -> np.ndarray:
        """The reference cell of each row (label codes ``y``), ``-1`` for rows in none."""
        y = np.asarray(y, dtype=np.int64)
        table = np.full(n_classes, -1, dtype=np.int64)
        for c, labels in enumerate(self.cell_labels(n_classes, positive)):
            table[list(labels)] = c
        return table[y]

    def cells(self, y, n_classes: int, positive: int = 1) -> tuple[np.ndarray, int]:
        """``(reference, n_cells)``: each row's reference cell (label codes ``y``; ``-1``: in none) and the
        number of cells. The structure the private algorithms and the private search build on."""
        return self.reference_cells(y, n_classes, positive), len(self.cell_labels(n_classes, positive))

    def outcomes(self, y, y_pred, n_classes: int, positive: int = 1) -> tuple[np.ndarray, int, list | slice]:
        """``(codes, n_outcomes, compared)``: each row's outcome, how many there are, and which are compared.

        Selection: the predicted class (every class compared); positive: whether ŷ is the positive
        class; accuracy: whether ŷ = y (for the last two, outcome 1 is compared).
        """
        p = np.asarray(y_pred, dtype=np.int64)
        if self.rate == SELECTION:
            return p, n_classes, slice(None)
        hit = (p == positive) if self.rate == POSITIVE else (p == np.asarray(y, dtype=np.int64))
        return hit.astype(np.int64), 2, [1]

    # ---- on values ---------------------------------------------------------------------------------------
    def partition(self, y, s, n_classes: int | None = None, n_groups: int | None = None,
                  positive_label=1) -> ConstraintGroups:
        """Map each sample to its constraint group and reference cell.

        ``y`` may be None for notions that do not condition on the label. Arbitrary label and group
        values are encoded to ``0..l-1`` / ``0..k-1`` in sorted order unless ``n_classes`` /
        ``n_groups`` is given, in which case they must be such codes (kept as given, so codes absent
        from the data keep their index and form empty constraint groups). ``positive_label`` is the
        value of ``y`` that notions singling out a positive label use. Group index of a row in cell c
        and group r: ``c * k + r`` (cell-major).
        """
        s_codes, groups = encode_groups(s, "s", n_groups)
        k, n = len(groups), s_codes.shape[0]
        if not self.conditions_on_label:
            if y is not None:
                check_same_length(check_1d(y, "y"), "y", s_codes, "s")
            keys = tuple((None, r) for r in range(k))
            return ConstraintGroups(self.name, s_codes, np.zeros(n, dtype=np.int64), keys,
                                    np.zeros(k, dtype=np.int64), None, groups)
        if y is None:
            raise ValueError(f"{self.name} conditions on the true label; pass y")
        y_codes, classes = encode(y, "y", n_classes, "class")
        check_same_length(y_codes, "y", s_codes, "s")
        pos = label_index(classes, positive_label) if self.uses_positive_label else 1
        cells = self.cell_labels(len(classes), pos)
        reference = self.reference_cells(y_codes, len(classes), pos)
        keys = tuple((self.cell_key(labels), r) for labels in cells for r in range(k))
        return ConstraintGroups(
            self.name, np.where(reference >= 0, reference * k + s_codes, -1), reference, keys,
            np.repeat(np.arange(len(cells), dtype=np.int64), k), classes, groups,
        )

    def rate_table(self, y_true, y_pred, s, positive_label=1) -> RateTable:
        """Count the predictions ``y_pred`` per reference cell, group and outcome (see :class:`RateTable`).

        Labels are encoded jointly (``y_true`` and ``y_pred`` share one set of classes); a notion that
        neither conditions on the label nor compares accuracy reads ``y_pred`` alone (``y_true`` may be None).
        ``positive_label`` must be one of the labels when the notion uses it.
        """
        if not self.conditions_on_label and self.rate == SELECTION:
            p, classes = encode_categories(check_1d(y_pred, "y_pred"), "y_pred")
            t, ref_name = np.zeros_like(p), "y_pred"
        else:
            t, p, classes = encode_label_pair(y_true, y_pred)
            ref_name = "y_true"
        s_codes, groups = encode_groups(s, "s")
        check_same_length(s_codes, "s", t, ref_name)
        return self.table_rate_table(contingency_table(t, p, s_codes, len(classes), len(groups)), classes, groups,
                                     positive_label)

    def table_rate_table(self, table, classes, groups=None, positive_label=1) -> RateTable:
        """The :class:`RateTable` of a contingency table ``table[r, y, ŷ]`` (rows of group r, label y and
        prediction ŷ; groups × classes × classes, in the order of ``classes`` and ``groups``).

        Cell c's counts are sums of the table's entries: ``counts[c, r, j] = Σ_{y ∈ cell c} table[r, y, j]``
        for a selection rate; for a positive (accuracy) rate, outcome 1 sums ``table[r, y, positive]``
        (``table[r, y, y]``) over the cell's labels and outcome 0 the rest of the cell. Every violation,
        :meth:`rate_table` on rows included, is computed from such a table, so that a released (noisy) table is
        post-processed by the same code as the exact one. ``table`` may hold floats (negative entries should
        be clipped to 0 first); an integer table gives integer counts.
        """
        table = np.asarray(table)
        classes = np.asarray(classes)
        if table.ndim != 3 or table.shape[1] != table.shape[2] or table.shape[1] != len(classes):
            raise ValueError(f"table must be groups × classes × classes with {len(classes)} classes, got shape "
                             f"{table.shape}")
        k, l = table.shape[0], len(classes)
        groups = np.arange(k) if groups is None else np.asarray(groups)
        pos = label_index(classes, positive_label) if self.uses_positive_label else 1
        cells = self.cell_labels(l, pos)
        per_cell = []
        for labels in cells:
            sub = table[:, list(labels), :]  # (k, labels of the cell, ŷ)
            if self.rate == SELECTION:
                per_cell.append(sub.sum(axis=1))
                continue
            if self.rate == POSITIVE:
                hit = sub[:, :, pos].sum(axis=1)
            else:
                hit = sub[:, np.arange(len(labels)), list(labels)].sum(axis=1)
            per_cell.append(np.stack([sub.sum(axis=(1, 2)) - hit, hit], axis=-1))
        counts = np.stack(per_cell)
        if self.rate == SELECTION:
            names, picked = classes, list(range(l))
        elif self.rate == POSITIVE:
            names, picked = np.array([f"not {classes[pos]}", classes[pos]], dtype=object), [1]
        else:
            names, picked = np.array(["wrong", "correct"], dtype=object), [1]
        return RateTable(self.name, counts, tuple(self.cell_key(c) for c in cells), groups, names, picked)

    def table_violation(self, table, classes, convention: str = "pairwise", positive_label=1) -> float:
        """The notion's worst gap (module docstring) read off a contingency table ``table[r, y, ŷ]``
        (:meth:`table_rate_table`): how a released table of counts gives every notion's violation."""
        check_convention(convention)
        return self.table_rate_table(table, classes, None, positive_label).gap(convention)

    def rates(self, y_true, y_pred, s, positive_label=1) -> pd.DataFrame:
        """The compared rates of every constraint group and its size (:meth:`RateTable.frame`); NaN if empty."""
        return self.rate_table(y_true, y_pred, s, positive_label).frame()

    def violation(self, y_true, y_pred, s, convention: str = "pairwise", positive_label=1) -> float:
        """The worst gap of the notion's rates (module docstring), pairwise or marginal."""
        check_convention(convention)
        return self.rate_table(y_true, y_pred, s, positive_label).gap(convention)


class DemographicParity(Notion):
    """``P(ŷ = j | S = r)`` equal for every group r (and every class j)."""

    name, rate = "demographic_parity", SELECTION
    compared_rates = ("selection_rate",)


class EqualizedOdds(Notion):
    """``P(ŷ = j | Y = y, S = r)`` equal for every group r, within each label y (binary: TPR and FPR)."""

    name, rate, conditions_on_label = "equalized_odds", SELECTION, True
    compared_rates = ("true_positive_rate", "false_positive_rate")

    def cell_labels(self, n_classes: int, positive: int = 1) -> tuple[tuple[int, ...], ...]:
        return tuple((c,) for c in range(n_classes))


class EqualOpportunity(Notion):
    """``P(ŷ = + | Y = +, S = r)`` equal for every group r: the true-positive rate (Hardt et al., 2016).

    Rows with ``y ≠ positive`` are unconstrained.
    """

    name, rate, conditions_on_label, uses_positive_label = "equal_opportunity", POSITIVE, True, True
    compared_rates = ("true_positive_rate",)

    def cell_labels(self, n_classes: int, positive: int = 1) -> tuple[tuple[int, ...], ...]:
        return ((positive,),)


class AccuracyParity(Notion):
    """``P(ŷ = y | S = r)`` equal for every group r."""

    name, rate = "accuracy_parity", ACCURACY
    compared_rates = ("accuracy",)


class PredictiveEquality(Notion):
    """``P(ŷ = + | Y ≠ +, S = r)`` equal for every group r: the false-positive rate (Corbett-Davies et al., 2017).

    One cell, the rows whose label is not the positive one (for binary labels: the negatives); the
    positives are unconstrained.
    """

    name, rate, conditions_on_label, uses_positive_label = "predictive_equality", POSITIVE, True, True
    compared_rates = ("false_positive_rate",)

    def cell_labels(self, n_classes: int, positive: int = 1) -> tuple[tuple[int, ...], ...]:
        return (tuple(c for c in range(n_classes) if c != positive),)


# ---- the registry -------------------------------------------------------------------------------------------
_REGISTRY: dict[str, Notion] = {}


def register_notion(notion: Notion) -> Notion:
    """Add ``notion`` to the registry under its name (a name may be registered once)."""
    if not isinstance(notion, Notion) or not notion.name:
        raise ValueError(f"register a named Notion instance, got {notion!r}")
    if notion.name in _REGISTRY:
        raise ValueError(f"a notion named {notion.name!r} is already registered")
    _REGISTRY[notion.name] = notion
    return notion


def unregister_notion(name: str) -> Notion:
    """Take the notion named ``name`` out of the registry and return it; a built-in notion stays (estimators and
    saved models name it)."""
    if name in NOTIONS:
        raise ValueError(f"{name!r} is a built-in notion; only a notion registered later can be unregistered")
    if name not in _REGISTRY:
        raise ValueError(f"no notion named {name!r} is registered; registered: {', '.join(_REGISTRY)}")
    return _REGISTRY.pop(name)


@contextmanager
def registered_notion(notion: Notion):
    """``with registered_notion(MyNotion()):`` the notion is registered inside the block and unregistered after
    it, whatever happens there (a test's own notion)."""
    register_notion(notion)
    try:
        yield notion
    finally:
        unregister_notion(notion.name)


def notion_names() -> tuple[str, ...]:
    """The registered notions' names, in registration order."""
    return tuple(_REGISTRY)


def get_notion(notion, among=None) -> Notion:
    """The registered :class:`Notion` named ``notion`` (a Notion instance is returned as it is).

    ``among``: the names the caller supports (e.g. an estimator's declared notions); any other is a
    ValueError listing them.
    """
    if isinstance(notion, Notion) and among is None:
        return notion
    found = notion if isinstance(notion, Notion) else _REGISTRY.get(notion) if isinstance(notion, str) else None
    allowed = notion_names() if among is None else tuple(among)
    if found is None or found.name not in allowed:
        raise ValueError(f"notion must be one of {', '.join(allowed)}, got {notion!r}")
    return found


for _builtin in (DemographicParity(), EqualizedOdds(), EqualOpportunity(), AccuracyParity(), PredictiveEquality()):
    register_notion(_builtin)
del _builtin

DEMOGRAPHIC_PARITY = "demographic_parity"
EQUALIZED_ODDS = "equalized_odds"
EQUAL_OPPORTUNITY = "equal_opportunity"
ACCURACY_PARITY = "accuracy_parity"
PREDICTIVE_EQUALITY = "predictive_equality"

#: The built-in notions' names, in registration order.
NOTIONS = notion_names()

#: Notions whose partition does not depend on the label.
LABEL_FREE_NOTIONS = tuple(name for name in NOTIONS if not _REGISTRY[name].conditions_on_label)


def check_notion(notion) -> str:
    """The name of a registered notion (a ValueError listing them otherwise)."""
    return get_notion(notion).name


def constraint_groups(notion, y, s, n_classes: int | None = None, n_groups: int | None = None,
                      positive_label=1) -> ConstraintGroups:
    """``get_notion(notion).partition(y, s, ...)``: each sample's constraint group and reference cell."""
    return get_notion(notion).partition(y, s, n_classes, n_groups, positive_label)
