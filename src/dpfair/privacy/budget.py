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
* a grid (:func:`~dpfair.algorithms.fit_dpfermi_grid`) is charged the joint event of its models
  (:attr:`~dpfair.algorithms.GridFit.privacy_spent`), checked before its first release;
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

What the total covers: the fits. Choosing among models by their scores on the private data, and
publishing those scores, are further uses of the data that no ledger counts
(:mod:`dpfair.model_selection` warns).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar

import dp_accounting as dpa

from dpfair.exceptions import BudgetExceededError
from dpfair.privacy.accounting import ACCOUNTANTS, PrivacyLedger
from dpfair.privacy.plan import ledger_totals
from dpfair.privacy.units import PrivacyUnit, check_privacy_unit
from dpfair.validation import check_delta, check_epsilon

#: Relative slack of the check (the last digits of a PLD's ε move with the order of composition).
_RTOL = 1e-9

#: The claim of the fit (or grid) running in this thread, that the estimators' hooks report to.
_ACTIVE: ContextVar = ContextVar("dpfair_privacy_charge", default=None)
_SERIAL = itertools.count()


def _unit_name(relation) -> str:
    return next(u.value for u in PrivacyUnit if u.relation is relation)


def planned_ledger(estimator) -> PrivacyLedger:
    """The ledger a fit records when it runs its calibrated plan (``privacy_plan_`` with its noise)."""
    ledger = PrivacyLedger(estimator.privacy_ledger_.relation)
    for (label, event), count in estimator.privacy_plan_.expected_ledger(estimator._sigmas).items():
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
    take ``budget=``. :meth:`spent` is the (ε, δ) of everything charged, :meth:`remaining` the ε left.
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
        self._charges: list[_Charge] = []
        self._refusals: list[str] = []
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

    # ---- estimators ----------------------------------------------------------------------------
    def attach(self, estimator):
        """Make every fit of ``estimator``, of its clones and of the dpfair estimators among its parameters (a
        pipeline's steps) draw from this budget; returns ``estimator``."""
        fair = _fair_estimators(estimator)
        if not fair:
            raise ValueError(f"{type(estimator).__name__} holds no dpfair estimator; a PrivacyBudget charges the "
                             "fits of dpfair estimators (a non-private scikit-learn fit on the data spends ε = ∞)")
        for est in fair:
            est._budget = self
        return estimator

    @staticmethod
    def detach(estimator):
        """Undo :meth:`attach` (e.g. before pickling a fitted model; ``save`` leaves the budget out); returns
        ``estimator``."""
        for est in _fair_estimators(estimator):
            vars(est).pop("_budget", None)
        return estimator

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

    # ---- the charges (called by the estimators' hooks, under the lock) ---------------------------
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

    def _mark(self) -> int:
        """A serial number: :meth:`_spent_since` counts the charges made after it (one search's fits)."""
        return next(_SERIAL)

    def _spent_since(self, mark: int) -> tuple[float, float]:
        with self._lock:
            return self._spent([c for c in self._charges if c.serial > mark])

    def _claim(self, charge: _Charge, totals: Counter, delta, relation, fixed: Counter = None) -> None:
        """Admit ``totals`` (a plan, or a grid's joint event) as ``charge``'s claim, or raise BudgetExceededError.

        ``fixed``: releases the plan says were made before its calibration (a base model's): a refused
        claim keeps them, they happened.
        """
        with self._lock:
            parent = charge.parent
            if parent is not None and relation is not getattr(vars(parent.owner).get("privacy_ledger_"),
                                                              "relation", None):
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
                    self._refusals.append(message)
                    if charge.totals is None and fixed:
                        charge.totals, charge.delta = fixed, delta
                        self._charges.append(charge)
                    charge.planned = True
                    raise BudgetExceededError(message)
            charge.totals, charge.delta, charge.planned = totals, delta, True
            if charge not in self._charges:
                self._charges.append(charge)

    def _settle(self, charge: _Charge, totals: Counter | None = None, delta=None) -> None:
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


def _fair_estimators(estimator) -> list:
    from dpfair.algorithms.base import FairEstimator

    found = [estimator]
    if hasattr(estimator, "get_params"):
        found += list(estimator.get_params(deep=True).values())
    return [e for e in found if isinstance(e, FairEstimator)]


class _Charge:
    """One claim on a budget: a fit (or a grid) while it runs (its plan), then what it spent."""

    def __init__(self, budget: PrivacyBudget, owner, parent: _Charge | None = None, name: str | None = None):
        self.budget, self.owner, self.parent = budget, owner, parent
        self.name = name or type(owner).__name__
        self.serial = next(_SERIAL)
        self.totals: Counter | None = None  # {(label, event): count}
        self.delta: float | None = None
        self.planned = False  # a plan was claimed (or refused): it covers the fits nested in this one
        self.skipped = False

    def claim_fit(self, est) -> None:
        """Claim ``est``'s calibrated plan (ε = ∞ for a non-private fit) if it changed since the last claim."""
        if est is not self.owner:
            return
        ledger = vars(est).get("privacy_ledger_")
        if ledger is None:
            return
        if not est._private:
            self.budget._claim(self, Counter({(f"{self.name} (not private)", dpa.NonPrivateDpEvent()): 1}), None,
                               ledger.relation)
            return
        plan, sigmas = vars(est).get("privacy_plan_"), vars(est).get("_sigmas")
        if plan is None or sigmas is None:
            return
        totals = plan.expected_ledger(sigmas)
        if totals != self.totals:
            fixed = Counter({(p.name, p.fixed): p.count for p in plan.parts if p.mechanism == "fixed"})
            self.budget._claim(self, totals, est.delta_, ledger.relation, fixed)

    def claim_event(self, event: dpa.DpEvent, delta: float, relation, label: str) -> None:
        """Claim one composed event (a grid's joint release of its models)."""
        totals = _event_totals(event, label)
        if totals != self.totals:
            self.budget._claim(self, totals, delta, relation)


def _event_totals(event: dpa.DpEvent, label: str) -> Counter:
    """``{(label, event): count}`` of a composed event's parts (composition does not depend on their order)."""
    if isinstance(event, dpa.ComposedDpEvent):
        return sum((_event_totals(e, label) for e in event.events), Counter())
    if isinstance(event, dpa.SelfComposedDpEvent):
        return Counter({key: count * event.count for key, count in _event_totals(event.event, label).items()})
    return Counter({(label, event): 1})


def claim(estimator) -> None:
    """The estimators' hook (``fit``, ``_calibrate``, ``_release``): claim this fit's plan from its budget, if any."""
    charge = _ACTIVE.get()
    if charge is not None:
        charge.claim_fit(estimator)


@contextmanager
def charging(estimator):
    """The budget side of ``FairEstimator.fit``: the estimator's own budget (:meth:`PrivacyBudget.attach`), or
    the budget of the fit it runs inside; on success its ledger is charged, on failure its claim stands."""
    budget, parent = vars(estimator).get("_budget"), _ACTIVE.get()
    if not isinstance(parent, _Charge) or (budget is not None and budget is not parent.budget):
        parent = None
    budget = budget if budget is not None else (parent.budget if parent is not None else None)
    if budget is None:
        yield
        return
    charge = _Charge(budget, estimator, parent)
    token = _ACTIVE.set(charge)
    try:
        yield
    except BaseException:
        budget._settle(charge)
        raise
    else:
        budget._settle(charge, ledger_totals(estimator.privacy_ledger_), vars(estimator).get("delta_"))
    finally:
        _ACTIVE.reset(token)


@contextmanager
def charging_grid(budget: PrivacyBudget | None, grid, name: str):
    """The budget side of a grid: yields its charge (``None`` without a budget), which the grid claims its joint
    event on (:meth:`_Charge.claim_event`) before its first release; the last claim is what it is charged."""
    if budget is None:
        yield None
        return
    charge = _Charge(budget, grid, name=name)
    token = _ACTIVE.set(charge)  # its estimators' own hooks report here and are covered by the joint claim
    try:
        yield charge
    finally:
        _ACTIVE.reset(token)
        budget._settle(charge)


class _Planned(Exception):
    """Raised by the planning hook at a fit's calibration: the plan is known and nothing was released."""


class _Planning:
    def claim_fit(self, est) -> None:
        if est._private and "_sigmas" in vars(est):
            raise _Planned


@contextmanager
def planning():
    """Run a fit's preamble up to its calibration and stop there, before any release (a grid's plan)."""
    token = _ACTIVE.set(_Planning())
    try:
        yield
    except _Planned:
        return
    finally:
        _ACTIVE.reset(token)
    raise RuntimeError("the fit's preamble ended without calibrating its plan")
