"""A privacy budget shared by many fits on the same data (diffprivlib's ``BudgetAccountant``, on our accountant).

Fits on the same data compose: each draws its noise from its own secret generator, so releasing
several models spends the composition of their ledgers (:meth:`PrivacyLedger.combined`). A
:class:`PrivacyBudget` keeps that composition for many fits (CV folds, the candidates of a search,
retries, grids) and refuses the fit that would take it past its total:

* **before** a fit releases anything, its planned ledger (the :class:`~dpfair.privacy.PrivacyPlan`
  its calibration made, with the calibrated noise multipliers) composed with everything charged so
  far must spend at most ``epsilon`` at the budget's ``delta``; otherwise a
  :class:`~dpfair.exceptions.BudgetExceededError`, and the estimator stays unfitted. The check
  reads only public things (plans, noise multipliers, the events of ledgers), so a refusal reveals
  nothing about the data;
* **after** the fit, its ledger is charged. A fit that fails after its calibration is charged its
  whole plan (part of it was released, and which part can depend on the data); a non-private fit
  is charged ε = ∞, which any finite budget refuses;
* a batched grid (DP-FERMI's ``fit_many``, :func:`~dpfair.algorithms.fit_dpfermi_grid`) is charged the joint
  event of its models (:attr:`~dpfair.algorithms.dpfermi.GridFit.privacy_spent`), checked before its first
  release;
* a fit inside another fit (the base model that ``DPPostProcessingClassifier`` trains) is checked
  like any fit; it is part of the enclosing fit's ledger, which replaces it once the enclosing fit
  has a plan. A nested fit under another privacy unit is the enclosing fit's to account (a base that
  does not read s costs nothing on s).

Composition is computed on one accountant (PLD by default) under the budget's neighbouring
relation, identical releases merged into self-compositions, at the budget's ``delta``.

Estimators draw from a budget attached to them (:meth:`PrivacyBudget.attach`). scikit-learn's
``clone`` keeps it (each clone draws from the same budget), so a plain ``GridSearchCV`` or
``cross_validate`` of an attached estimator charges every fit, the refit included. A budget is
shared, never copied (``copy.deepcopy`` returns it), is safe across threads, and refuses to be
pickled: a process pool (``n_jobs > 1`` with joblib's default backend) would give every worker its
own copy, each of which would allow the whole total.

How a fit talks to its budget: in plain values, never by the budget reading the estimator. The fit runs inside
:func:`charging` (the budget it draws from, its :class:`Charge`, which the fit's release session holds), hands a
:class:`Claim` to :meth:`Charge.claim_fit` at its start, at its calibration and before each release (its privacy unit's relation, whether it is private, its
calibrated plan and σ, its δ), and reports its ledger with :meth:`Charge.spent`. A grid or a private search claims
its joint release whole (:func:`charging_grid`). A fit that is part of a running claim (a base model inside an
enclosing fit, a search's runs) is handed that :class:`Charge` by its caller (``fit_within``, ``fit_many(budget=charge)``):
nothing is found in ambient state. A caller that needs a fit's plan before it runs asks the estimator
(``FairEstimator.plan``: public inputs only, no side effect). So this module knows no estimator class, and anything that makes these claims can draw from a budget.

What the total covers: the fits. Choosing among models by their scores on the private data, and
publishing those scores, are further uses of the data that no ledger counts
(:mod:`dpfair.model_selection` warns).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dp_accounting as dpa

from dpfair.exceptions import BudgetExceededError
from dpfair.privacy.accounting import ACCOUNTANTS, PrivacyLedger
from dpfair.privacy.plan import PrivacyPlan, ledger_totals
from dpfair.privacy.units import PrivacyUnit, check_privacy_unit
from dpfair.utils.validation import check_delta, check_epsilon

#: Relative slack of the check (the last digits of a PLD's ε move with the order of composition).
_RTOL = 1e-9

_SERIAL = itertools.count()


def _unit_name(relation) -> str:
    return next(u.value for u in PrivacyUnit if u.relation is relation)


@dataclass(frozen=True)
class Claim:
    """What a fit asks of a budget, as plain values that its estimator hands over: the budget reads nothing off
    the estimator.

    ``relation``: the neighbouring relation of the fit's privacy unit; ``private``: whether the fit is private
    (a non-private fit claims ε = ∞); ``plan`` and ``sigmas``: its :class:`~dpfair.privacy.PrivacyPlan` and the
    calibrated noise multipliers of its parts (``None`` until its calibration); ``delta``: the δ it is measured at.
    A calibrated claim costs exactly what its plan's ledger at those σ costs (:meth:`ledger`): that is what a fit
    that runs its plan records, and all of it is public (plans, σ, events), so a check of it reveals no data.
    """

    relation: Any
    private: bool
    plan: PrivacyPlan | None = None
    sigmas: Mapping[str, float] | None = None
    delta: float | None = None

    @property
    def calibrated(self) -> bool:
        """Whether the claim states a calibrated plan (a private fit past its calibration)."""
        return self.private and self.plan is not None and self.sigmas is not None

    def totals(self) -> Counter:
        """``{(label, event): count}`` of the calibrated plan: what the fit's ledger holds when it has run."""
        return self.plan.expected_ledger(self.sigmas)

    def fixed(self) -> Counter:
        """The releases the plan says were made before its calibration (``"fixed"`` parts: a base model's)."""
        return Counter({(p.name, p.fixed): p.count for p in self.plan.parts if p.mechanism == "fixed"})

    def ledger(self) -> PrivacyLedger:
        """The ledger a fit records when it runs this calibrated plan."""
        ledger = PrivacyLedger(self.relation)
        for (label, event), count in self.totals().items():
            ledger.record(event, label, count)
        return ledger


class PrivacyBudget:
    """A total (ε, δ) that many fits on the same data draw from, refusing any fit that would exceed it.

    Parameters
    ----------
    epsilon : the total ε (``inf``: unlimited; it then only adds up what the fits spend).
    delta : the δ at which the composition is measured; needed for a finite ``epsilon``. ``None``
        with an unlimited budget: the smallest δ of the fits charged.
    unit : "sensitive" or "record", the privacy unit every fit must protect; ``None``: the unit of
        the first private fit charged.
    accountant : "pld" (tight, the default) or "rdp": the accountant that composes the fits.

    Use :meth:`attach` to make an estimator's fits (and its clones') draw from the budget;
    :func:`dpfair.model_selection.GridSearchCV` and :func:`~dpfair.model_selection.cross_validate`
    take ``budget=``. :meth:`spent` is the (ε, δ) of everything charged, :meth:`remaining` the ε left;
    :meth:`mark`, :meth:`spent_since` and :meth:`refusals_since` measure one stretch of fits (a selection's).

    An estimator draws from a budget when it has a ``privacy_budget`` attribute (dpfair's estimators: the
    budget it draws from, or ``None``), which :meth:`attach` and :meth:`detach` set; its fits hand their
    claims to the budget as plain values (:class:`Claim`, through :func:`charging` and :func:`claim`).
    """

    def __init__(self, epsilon=math.inf, delta=None, *, unit=None, accountant="pld"):
        self.epsilon = check_epsilon(epsilon, "epsilon")
        if delta is None and math.isfinite(self.epsilon):
            raise ValueError(f"a PrivacyBudget of epsilon={self.epsilon:g} needs the delta at which it is measured: "
                             "PrivacyBudget(epsilon, delta), e.g. delta=1/n**2 for n rows")
        self.delta = None if delta is None else check_delta(delta)
        self.unit = None if unit is None else check_privacy_unit(unit)
        if accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
        self.accountant = accountant
        self._relation = None if self.unit is None else self.unit.relation
        self._charges: list[Charge] = []
        self._refusals: list[tuple[int, str]] = []  # (serial, message)
        self._lock = threading.RLock()

    # ---- what was spent ------------------------------------------------------------------------
    def ledger(self) -> PrivacyLedger:
        """Everything charged as one ledger: each fit's ledger (a grid: its joint event), identical releases merged."""
        with self._lock:
            return self._ledger([c.totals for c in self._charges])

    def spent(self) -> tuple[float, float]:
        """``(ε, δ)`` of everything charged so far: the composition of every fit's releases."""
        with self._lock:
            return self._spent(self._charges)

    def remaining(self) -> tuple[float, float]:
        """``(total ε − spent ε, δ)``: a guide to what is left. A fit is admitted by composing its plan with
        what was spent on the accountant, usually less than adding them up (two ε = 1 DP-FERMI fits: ≈ 1.46)."""
        eps, delta = self.spent()
        return max(self.epsilon - eps, 0.0), delta

    def mark(self) -> int:
        """A point in the budget's history: :meth:`spent_since` and :meth:`refusals_since` count what came after
        it (the fits of one selection, say)."""
        return next(_SERIAL)

    def spent_since(self, mark: int) -> tuple[float, float]:
        """``(ε, δ)`` of the charges made after :meth:`mark` returned ``mark``, composed as :meth:`spent` does."""
        with self._lock:
            return self._spent([c for c in self._charges if c.serial > mark])

    def refusals_since(self, mark: int) -> list[str]:
        """The messages of the claims refused (``BudgetExceededError``) after :meth:`mark` returned ``mark``, in
        order. A caller that turns a failed fit into a score (scikit-learn's searches) reads them to stop."""
        with self._lock:
            return [message for serial, message in self._refusals if serial > mark]

    # ---- estimators ----------------------------------------------------------------------------
    def attach(self, estimator):
        """Make every fit of ``estimator``, of its clones and of the dpfair estimators among its parameters (a
        pipeline's steps) draw from this budget; returns ``estimator``."""
        holders = _budget_holders(estimator)
        if not holders:
            raise ValueError(f"{type(estimator).__name__} holds no dpfair estimator; a PrivacyBudget charges the "
                             "fits of dpfair estimators (a non-private scikit-learn fit on the data spends ε = ∞)")
        for est in holders:
            est.privacy_budget = self
        return estimator

    @staticmethod
    def detach(estimator):
        """Undo :meth:`attach` (e.g. before pickling a fitted model; ``save`` leaves the budget out); returns
        ``estimator``."""
        for est in _budget_holders(estimator):
            est.privacy_budget = None
        return estimator

    @staticmethod
    def attached(estimator) -> PrivacyBudget | None:
        """The budget attached to ``estimator`` or to the first dpfair estimator among its parameters, if any."""
        found = [est.privacy_budget for est in _budget_holders(estimator) if est.privacy_budget is not None]
        return found[0] if found else None

    # ---- sharing -------------------------------------------------------------------------------
    def __deepcopy__(self, memo):
        return self  # clone() deep-copies parameters: every clone must draw from this same budget

    def __copy__(self):
        return self

    def __reduce_ex__(self, protocol):
        raise TypeError("a PrivacyBudget cannot be pickled: a copy in another process (n_jobs > 1 with joblib's "
                        "process-based backend) would spend the same total again. Use n_jobs=1 or "
                        "joblib.parallel_backend('threading'); to pickle a fitted model, PrivacyBudget.detach(model) "
                        "first (model.save(path) needs no detaching)")

    def __repr__(self) -> str:
        eps, delta = self.spent()
        unit = "" if self.unit is None else f", unit={self.unit.value!r}"
        return (f"PrivacyBudget(epsilon={self.epsilon:g}, delta={self.delta}{unit}; "
                f"spent ε={eps:.4g} at δ={delta:.3g})")

    # ---- the charges (made by Charge, under the lock) ------------------------------------------
    def _ledger(self, totals_list) -> PrivacyLedger:
        ledger = PrivacyLedger(self._relation or PrivacyUnit.RECORD.relation)
        for (label, event), count in sum((t for t in totals_list if t), Counter()).items():
            ledger.record(event, label, count)
        return ledger

    def _spent(self, charges) -> tuple[float, float]:
        deltas = [c.delta for c in charges if c.delta is not None]
        delta = self.delta if self.delta is not None else min(deltas, default=0.0)
        return self._epsilon([c.totals for c in charges], delta), delta

    def _epsilon(self, totals_list, delta: float) -> float:
        ledger = self._ledger(totals_list)
        if any(isinstance(e.event, dpa.NonPrivateDpEvent) for e in ledger.entries):
            return math.inf
        return ledger.epsilon(delta, self.accountant) if len(ledger) else 0.0

    def _claim(self, charge: Charge, totals: Counter, delta, relation, fixed: Counter = None) -> None:
        """Admit ``totals`` (a plan, or a grid's joint event) as ``charge``'s claim, or raise BudgetExceededError.

        ``fixed``: releases the plan says were made before its calibration (a base model's): a refused
        claim keeps them, they happened.
        """
        with self._lock:
            parent = charge.parent
            if parent is not None and relation is not parent.relation:
                charge.skipped = True  # another unit: the enclosing fit's plan says what this fit costs on its own
                return
            if delta is not None:  # a private claim: it must protect the budget's unit
                if self._relation is None:
                    self._relation = relation
                elif relation is not self._relation:
                    raise ValueError(
                        f"{charge.name} protects privacy_unit={_unit_name(relation)!r} but its PrivacyBudget "
                        f"protects {_unit_name(self._relation)!r}: the ε of the two do not compose; give the "
                        "estimator the budget's privacy_unit, or use one budget per unit")
            if math.isfinite(self.epsilon):
                others = [c.totals for c in self._charges if c is not charge and c.parent is not charge]
                total = self._epsilon([*others, totals], self.delta)
                if total > self.epsilon * (1.0 + _RTOL):
                    alone, before = self._epsilon([totals], self.delta), self._epsilon(others, self.delta)
                    what = (f"is not private: fitting it spends ε = ∞ of a PrivacyBudget of ε = {self.epsilon:g}"
                            if delta is None else
                            f"would spend ε = {alone:.4g} (its plan, at the budget's δ = {self.delta:g}) from a "
                            f"PrivacyBudget of ε = {self.epsilon:g}")
                    fix = ("use a private method" if delta is None else
                           "lower its epsilon, fit fewer models, or draw from a larger budget")
                    message = (f"{charge.name} {what} that has spent ε = {before:.4g}: together ε = {total:.4g} > "
                               f"{self.epsilon:g}, so it was refused before releasing anything; {fix}")
                    self._refusals.append((next(_SERIAL), message))
                    if charge.totals is None and fixed:
                        charge.totals, charge.delta = fixed, delta
                        self._charges.append(charge)
                    charge.planned = True
                    raise BudgetExceededError(message)
            charge.totals, charge.delta, charge.planned = totals, delta, True
            if charge not in self._charges:
                self._charges.append(charge)

    def _settle(self, charge: Charge, totals: Counter | None = None, delta=None) -> None:
        """The end of ``charge``'s fit: ``totals`` is its ledger (success), or None (failure: its claim stands)."""
        with self._lock:
            if charge.skipped:
                return
            if totals is not None:
                charge.totals = totals
                charge.delta = delta if delta is not None else charge.delta
            if charge.planned:  # its plan holds the fits nested in it
                self._charges = [c for c in self._charges if c.parent is not charge]
            if charge.totals and charge not in self._charges:
                self._charges.append(charge)
            elif not charge.totals and charge in self._charges:
                self._charges.remove(charge)


def _budget_holders(estimator) -> list:
    """``estimator`` and the estimators among its parameters (a pipeline's steps) that can draw from a budget:
    those with a ``privacy_budget`` attribute (dpfair's estimators)."""
    found = [estimator]
    if hasattr(estimator, "get_params"):
        found += list(estimator.get_params(deep=True).values())
    return [e for e in found if not isinstance(e, type) and hasattr(e, "privacy_budget")]


class Charge:
    """One claim on a budget: a fit (or a grid, or a private search) while it runs (its plan), then what it spent.

    The fit's estimator hands it plain values: :meth:`claim_fit` (its :class:`Claim`: before any release, and again
    whenever its plan's σ change), :meth:`spent` (its ledger, at the end). A grid or a search claims its joint
    release whole (:meth:`claim_event`, :meth:`claim_ledger`) before its first release. Each claim is checked
    against everything else charged and raises :class:`~dpfair.exceptions.BudgetExceededError` past the total.
    """

    def __init__(self, budget: PrivacyBudget, owner, parent: Charge | None = None, name: str | None = None):
        self.budget, self.owner, self.parent = budget, owner, parent
        self.name = name or type(owner).__name__
        self.serial = next(_SERIAL)
        self.relation = None  # the relation of the owner's fit (its claims): nested fits under another are skipped
        self.totals: Counter | None = None  # {(label, event): count}
        self.delta: float | None = None
        self.planned = False  # a plan was claimed (or refused): it covers the fits nested in this one
        self.skipped = False
        self.result: tuple[Counter, float | None] | None = None

    def claim_fit(self, owner, claim: Claim) -> None:
        """Claim ``owner``'s fit: ε = ∞ for a non-private fit, else its calibrated plan if it changed since the last
        claim (nothing before its calibration). Claims of other estimators (a grid's models) are not this
        charge's: they are covered by its own claim."""
        if owner is not self.owner:
            return
        self.relation = claim.relation
        if not claim.private:
            self.budget._claim(self, Counter({(f"{self.name} (not private)", dpa.NonPrivateDpEvent()): 1}), None,
                               claim.relation)
            return
        if not claim.calibrated:
            return
        totals = claim.totals()
        if totals != self.totals:
            self.budget._claim(self, totals, claim.delta, claim.relation, claim.fixed())

    def claim_event(self, event: dpa.DpEvent, delta: float, relation, label: str) -> None:
        """Claim one composed event (a grid's joint release of its models)."""
        totals = _event_totals(event, label)
        if totals != self.totals:
            self.budget._claim(self, totals, delta, relation)

    def claim_ledger(self, ledger: PrivacyLedger, delta: float) -> None:
        """Claim a planned ledger whole (a private search's, before its first release)."""
        self.budget._claim(self, ledger_totals(ledger), delta, ledger.relation)

    def spent(self, ledger: PrivacyLedger, delta: float | None) -> None:
        """The fit ended and released ``ledger`` (at ``delta``; ``None``: not private): what it is charged."""
        self.result = ledger_totals(ledger), delta


class _NoCharge:
    """What :func:`charging` yields for a fit that draws from no budget."""

    def claim_fit(self, owner, claim: Claim) -> None:
        pass

    def spent(self, ledger, delta) -> None:
        pass


def _event_totals(event: dpa.DpEvent, label: str) -> Counter:
    """``{(label, event): count}`` of a composed event's parts (composition does not depend on their order)."""
    if isinstance(event, dpa.ComposedDpEvent):
        return sum((_event_totals(e, label) for e in event.events), Counter())
    if isinstance(event, dpa.SelfComposedDpEvent):
        return Counter({key: count * event.count for key, count in _event_totals(event.event, label).items()})
    return Counter({(label, event): 1})


def _parent(budget, within):
    """The running claim a fit or grid is part of: ``within`` (a :class:`Charge`) when it draws from that claim's
    budget (or from none of its own), else ``None``: a fit with a budget of its own is charged on it apart."""
    if not isinstance(within, Charge) or (budget is not None and budget is not within.budget):
        return None
    return within


@contextmanager
def charging(owner, budget: PrivacyBudget | None, within: Charge | None = None):
    """The budget side of a fit of ``owner``: ``budget`` (the one attached to it, :meth:`PrivacyBudget.attach`), or
    else the budget of ``within``, the running claim the fit is part of (an enclosing fit's, a search's), which its
    caller passes down (:meth:`~dpfair.algorithms.base.FairEstimator.fit_within`, ``fit_many(budget=charge)``); no
    fit finds its parent in ambient state. Yields the :class:`Charge` that the fit's claims go to (a no-op when
    there is no budget); the fit reports its ledger with :meth:`Charge.spent` before it ends. On success that ledger
    is charged; on failure (or without a report) its claim stands."""
    parent = _parent(budget, within)
    budget = budget if budget is not None else (parent.budget if parent is not None else None)
    if budget is None:
        yield _NoCharge()
        return
    charge = Charge(budget, owner, parent)
    try:
        yield charge
    except BaseException:
        budget._settle(charge)
        raise
    else:
        budget._settle(charge, *(charge.result or (None, None)))


@contextmanager
def charging_grid(budget, grid, name: str):
    """The budget side of a grid (or a private search): yields its :class:`Charge` (``None`` without a budget), which
    the grid claims its joint release on (:meth:`Charge.claim_event`, :meth:`Charge.claim_ledger`) before its first
    release; the last claim is what it is charged. ``budget``: a :class:`PrivacyBudget`, or the running
    :class:`Charge` the grid is part of (a search's runs: ``fit_many(budget=charge)``), whose claim covers it. The
    fits the grid runs are handed its charge by the grid (they are part of it)."""
    if budget is None:
        yield None
        return
    parent = budget if isinstance(budget, Charge) else None
    budget = parent.budget if parent is not None else budget
    charge = Charge(budget, grid, parent, name=name)
    try:
        yield charge
    finally:
        budget._settle(charge)


