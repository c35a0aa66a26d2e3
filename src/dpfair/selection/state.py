"""What the phases of one private search hand each other: a :class:`SearchState`, instead of lists of arguments.

:meth:`~dpfair.selection.PrivateSearch.fit` checks its inputs into a state (all that the constrained strategy
needs), then, for random stopping, fills in the public split, the codes, the law of the runs, the σ's and the
reference; the plan (:mod:`dpfair.selection.plan`), the reference error (:mod:`dpfair.selection.reference`) and
the runs read it. Every field is public (a hyper-parameter, the public split of the rows, a σ, a plan) or the
data themselves; nothing in it was released, so a state may be built, read and dropped at no privacy cost.
The public split of the rows into a fit and a validation part is :func:`split_rows`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from dpfair.utils.validation import check_positive

if TYPE_CHECKING:
    from dpfair.privacy import PrivacyLedger, PrivacyUnit
    from dpfair.selection.repetitions import Repetitions

__all__ = ["ReferencePlan", "SearchState", "split_rows"]


def split_rows(n: int, validation_size: float, random_state) -> tuple[np.ndarray, np.ndarray]:
    """``(fit rows, validation rows)``: a public random split of ``range(n)`` seeded by ``random_state``.

    ``validation_size = 0``: no held-out part; every row is both fitted and scored.
    """
    size = check_positive(validation_size, "validation_size", allow_zero=True)
    if size >= 1.0:
        raise ValueError(f"validation_size must lie in [0, 1), got {validation_size!r}")
    if size == 0.0:
        rows = np.arange(n)
        return rows, rows
    n_val = round(size * n)
    if n_val < 1 or n_val > n - 2:
        raise ValueError(f"validation_size={size:g} of {n} rows leaves {n_val} validation and {n - n_val} fit "
                         "rows; give more rows or another validation_size (0: score on the fitted rows)")
    order = np.random.default_rng(random_state).permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


class ReferencePlan(NamedTuple):
    """The private reference of the record unit (:mod:`dpfair.selection.reference`): the DP-SGD ``model`` fitted
    on the fit part, the noise multiplier ``sigma`` of its validation error's release, and the ``ledger`` the
    model's fit plans."""

    model: object
    sigma: float
    ledger: PrivacyLedger


@dataclass(frozen=True, eq=False)
class SearchState:
    """One search's public plan and its data, passed from phase to phase (module docstring).

    The checked inputs: ``base`` (the estimator every run clones; for random stopping, with the search's own
    settings set and detached from any budget), ``candidates`` (the grid's points), ``target`` (ε of the whole
    search), ``delta``, ``notion``, ``unit``, and the data ``X``, ``y``, ``s`` as arrays.

    Random stopping's plan (``None`` until :meth:`~dpfair.selection.PrivateSearch.fit` fills them in):
    ``classes`` and ``groups`` (the public lists), ``y_codes`` and ``s_codes`` (the labels and groups as their
    codes), ``fit_rows`` and ``val_rows`` (the public split), ``law`` (of the number of runs), ``sigma_counts``
    and ``sigma_score`` (the noise multipliers of the counts' and the scores' releases), ``shares_released``
    (whether the runs take their group shares from the released counts), the ``reference`` error (``None`` while
    the private one is still to be released) and where it comes from (``reference_source``), the private
    ``reference_plan`` (record unit only) and ``secure`` (the estimator's ``secure_mode``).
    """

    base: object
    candidates: list[dict]
    target: float
    delta: float
    notion: str
    unit: PrivacyUnit
    X: np.ndarray
    y: np.ndarray
    s: np.ndarray
    classes: np.ndarray | None = None
    groups: np.ndarray | None = None
    y_codes: np.ndarray | None = None
    s_codes: np.ndarray | None = None
    fit_rows: np.ndarray | None = None
    val_rows: np.ndarray | None = None
    law: Repetitions | None = None
    sigma_counts: float | None = None
    sigma_score: float | None = None
    shares_released: bool = False
    reference: float | None = None
    reference_source: str | None = None
    reference_plan: ReferencePlan | None = None
    secure: bool = False

    # the parts of the split (each taken once: a state is frozen, and dataclasses.replace makes a new one)
    @cached_property
    def Xf(self) -> np.ndarray:  # noqa: N802 (X as everywhere in dpfair)
        return self.X[self.fit_rows]

    @cached_property
    def yf(self) -> np.ndarray:
        return self.y[self.fit_rows]

    @cached_property
    def sf(self) -> np.ndarray:
        return self.s[self.fit_rows]

    @cached_property
    def Xv(self) -> np.ndarray:  # noqa: N802
        return self.X[self.val_rows]

    @cached_property
    def yv(self) -> np.ndarray:
        return self.y[self.val_rows]

    @cached_property
    def sv(self) -> np.ndarray:
        return self.s[self.val_rows]

    @cached_property
    def yv_codes(self) -> np.ndarray:
        return self.y_codes[self.val_rows]

    @cached_property
    def sv_codes(self) -> np.ndarray:
        return self.s_codes[self.val_rows]

    @property
    def n_fit(self) -> int:
        return len(self.fit_rows)

    @property
    def n_val(self) -> int:
        return len(self.val_rows)

    @property
    def method(self) -> str:
        """The name of the estimator's class (the ledger's label of the repeated runs)."""
        return type(self.base).__name__
