"""The score a private search ranks its runs by, its sensitivity, and the choice of the winner.

**The score** of a run, on the validation part (greater is better)::

    u = −( violation + penalty · max(0, error − (reference_error + max_error_increase)) )

the constraint "error ≤ reference + X" as an exact penalty: among runs within the error budget the
fairest wins, and a run over it loses ``penalty`` points of violation per point of excess error. A
lexicographic rule (feasible first, then fairest) is this rule as the penalty grows without bound; its
score jumps at the budget's edge, so one person could move it by the whole range and no finite noise
would hide them. The penalty keeps the score Lipschitz in (error, violation), hence of bounded
sensitivity. ``violation`` is the pairwise gap of the notion (as :mod:`dpfair.fairness.metrics`
defines it; for binary labels the positive class's rates) with each rate's denominator the *released*
count of its (cell, group) (:func:`cell_counts`, released once by the search), so that every denominator is public.

**Sensitivity** (a brute-force test enumerates the neighbours of small data sets). For a fixed model
(the run's training is accounted by its own plan, and the score is released after it: adaptive
composition, so the score's sensitivity is that of a fixed model even where the scored rows were also
fitted, as with ``validation_size=0``), let m be the released (floored) counts and n_val the validation
size (public, as n is):

* sensitive unit (one person's s changes, x and y fixed): the person moves from group a to group b in
  their cell; one outcome count at a falls by one and one at b rises by one (the same outcome unless the
  model reads s), so every rate gap moves by at most 1/m[c, a] + 1/m[c, b]: Δ_violation = max over cells
  of the sum of the two largest 1/m. The error moves only if the model reads s at prediction: 1/n_val;
* record unit (a validation record added or removed, denominators fixed): one count moves by one,
  Δ_violation = 1/min m, and Δ_error = 1/n_val.

Δ = Δ_violation + penalty · Δ_error; the Gaussian release uses the bound convention of
:mod:`dpfair.privacy.units` (radius Δ/2 under replace-one, Δ under add/remove).

**The winner** is the run with the highest *released* score (:func:`best_released`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfair.fairness.notions import get_notion
from dpfair.privacy import PrivacyUnit

__all__ = ["SelectionScore", "best_released", "cell_counts", "counts_bound", "group_shares"]


def cell_counts(notion: str, y: np.ndarray, s: np.ndarray, n_classes: int, n_groups: int) -> np.ndarray:
    """``counts[c, r]``: rows of constraint cell c (of ``notion``) and group r; ``y``, ``s`` as codes (class 1
    positive)."""
    cells, n_cells = get_notion(notion).cells(y, n_classes)
    counts = np.zeros((n_cells, n_groups))
    keep = cells >= 0
    np.add.at(counts, (cells[keep], s[keep]), 1.0)
    return counts


@dataclass(frozen=True)
class SelectionScore:
    """``u = −(violation + penalty·max(0, error − threshold))`` of predictions on the validation part.

    ``denominators[c, r]``: the public (released) size of cell c, group r; ``n_val``: the public
    normaliser of the error; ``reads_s``: whether the scored model reads s at prediction. Labels,
    predictions and groups are passed as codes; the positive class of binary labels is code 1.
    """

    notion: str
    threshold: float
    penalty: float
    denominators: np.ndarray
    n_val: int
    n_classes: int
    unit: PrivacyUnit
    reads_s: bool

    def violation(self, y: np.ndarray, y_pred: np.ndarray, s: np.ndarray) -> float:
        """The pairwise gap of the notion's rates, each over its public denominator."""
        notion = get_notion(self.notion)
        cells, n_cells = notion.cells(y, self.n_classes)
        outcome, n_out, _ = notion.outcomes(y, y_pred, self.n_classes)
        hits = np.zeros((n_cells, self.denominators.shape[1], n_out))
        keep = cells >= 0
        np.add.at(hits, (cells[keep], s[keep], outcome[keep]), 1.0)
        rates = hits / self.denominators[..., None]
        if n_out == 2:  # the positive outcome (correct, hit, class 1); the other's rates add nothing for two
            rates = rates[..., 1:]
        return float((rates.max(axis=1) - rates.min(axis=1)).max())

    def value(self, y: np.ndarray, y_pred: np.ndarray, s: np.ndarray) -> float:
        error = float(np.sum(y_pred != y)) / self.n_val
        return -(self.violation(y, y_pred, s) + self.penalty * max(0.0, error - self.threshold))

    @property
    def sensitivity(self) -> float:
        """Δ: the largest change of :meth:`value` between neighbours, for a fixed model (this module's docstring)."""
        inverse = 1.0 / self.denominators
        if self.unit is PrivacyUnit.SENSITIVE:
            two = np.sort(inverse, axis=1)[:, -2:].sum(axis=1)
            return float(two.max()) + (self.penalty / self.n_val if self.reads_s else 0.0)
        return float(inverse.max()) + self.penalty / self.n_val

    @property
    def bound(self) -> float:
        """The bound of the score's release (:mod:`dpfair.privacy.units`: radius under replace-one)."""
        return self.sensitivity / 2.0 if self.unit is PrivacyUnit.SENSITIVE else self.sensitivity


def counts_bound(unit: PrivacyUnit) -> float:
    """One person's one-hot cell: replace-one moves it between two cells (radius √2/2), add/remove by one."""
    return math.sqrt(2) / 2 if unit is PrivacyUnit.SENSITIVE else 1.0


def group_shares(counts: np.ndarray) -> list:
    """Per-cell group shares from (released, floored: positive) counts ``(cells, groups)``; one row as ``(k,)``."""
    shares = counts / counts.sum(axis=1, keepdims=True)
    return (shares[0] if len(shares) == 1 else shares).tolist()


def best_released(released: list[float]) -> int:
    """The run a random-stopping search keeps: the index of the highest released score (the first on a tie).

    The choice reads the released scores alone, so it is post-processing of releases the search's
    ``RepeatAndSelectDpEvent`` already covers; a choice read off the exact scores would reveal the validation
    part through which run wins, whatever the ledger says.
    """
    return int(np.argmax(released))
