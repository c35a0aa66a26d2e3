"""A private search's public plan: each run's ledger, the search's ledger, and the per-model ε that spends the total.

One run is the composition of the method's planned releases (its ``privacy_plan_``, identical for every
candidate, which :func:`check_same_plan` checks) and its score's Gaussian release; the search records
dp_accounting's ``RepeatAndSelectDpEvent`` of that run (:meth:`~dpfair.selection.Repetitions.event`), composed
with the count release (and, under the record unit, the private reference) on the RDP accountant, the only one
that bounds repeated runs (the PLD accountant defers to it). The per-model ε is the largest whose total spends
at most ``epsilon`` at ``delta``: a bisection on the public plan (:func:`per_model_epsilon`), kept in the bounded
memo :data:`dpfair.privacy.memo.PER_MODEL_EPSILON` by the plan's public description.
"""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

import dp_accounting as dpa
import numpy as np
from sklearn.base import clone

from dpfair.privacy import PrivacyBudget, PrivacyLedger, gaussian_event, ledger_totals
from dpfair.privacy.memo import PER_MODEL_EPSILON

if TYPE_CHECKING:
    from dpfair.selection.state import SearchState

__all__ = ["COUNTS", "REFERENCE_ERROR", "SCORE", "TOLERANCE", "SearchPlan", "check_same_plan", "per_model_epsilon",
           "plan_of", "reference_entries", "search_ledger"]

#: Part names (and ledger labels) of the search's releases.
COUNTS, SCORE, REFERENCE_ERROR = "validation counts", "selection score", "reference error"

#: The per-model ε is searched until the total lies in [(1 − TOLERANCE)·ε, ε].
TOLERANCE = 0.005


class SearchPlan(NamedTuple):
    """What :func:`per_model_epsilon` finds: each run's ``run_epsilon`` and the ``ledger`` the search will spend."""

    run_epsilon: float
    ledger: PrivacyLedger


def plan_of(estimator, X, y, s, checked: bool = False) -> PrivacyLedger:
    """The ledger ``estimator`` would spend on ``(X, y, s)``: its public plan
    (:meth:`~dpfair.algorithms.FairEstimator.plan`: the rows, X's width, the public group and class lists), before
    anything is read or released. ``checked``: the plan's warnings show (the search's many plans of one candidate
    warn once, when checked). The lists default to the values present, as the fit that follows takes them.
    """
    est = PrivacyBudget.detach(clone(estimator))
    params = est.get_params()
    groups = params.get("groups") if params.get("groups") is not None else np.unique(np.asarray(s))
    classes = params.get("classes") if params.get("classes") is not None else np.unique(np.asarray(y))
    with warnings.catch_warnings():
        if not checked:
            warnings.simplefilter("ignore")
        plan = est.plan(len(X), np.shape(X)[1], groups=groups, classes=classes)
    ledger = plan.ledger()
    if not plan.private or not len(ledger):
        raise ValueError(f"{type(estimator).__name__} released nothing through a calibrated plan; a private search "
                         "needs a private method")
    return ledger


def reference_entries(ledger: PrivacyLedger) -> list:
    """The entries of the reference model's ``ledger``, each labelled as the reference model's on the search's."""
    return [SimpleNamespace(label=f"reference model: {e.label}", event=e.event, count=e.count) for e in ledger.entries]


def search_ledger(run: PrivacyLedger, state: SearchState) -> PrivacyLedger:
    """The search's ledger, were each run to spend ``run``: the counts, the private reference (if any), then the
    best of K runs, each ``run`` and its score's release."""
    ledger = PrivacyLedger(state.unit.relation)
    ledger.record(gaussian_event(state.sigma_counts), COUNTS)
    if state.reference_plan is not None:
        ledger.extend(reference_entries(state.reference_plan.ledger))
        ledger.record(gaussian_event(state.reference_plan.sigma), REFERENCE_ERROR)
    # a tuple, not dp_accounting's usual list: the event is hashed as a ledger entry (budgets, plan checks)
    one_run = dpa.ComposedDpEvent(tuple(e.event if e.count == 1 else dpa.SelfComposedDpEvent(e.event, e.count)
                                        for e in run.entries) + (gaussian_event(state.sigma_score),))
    law = state.law
    ledger.record(law.event(one_run), f"repeated runs of {state.method} (K ~ {law.describe()['distribution']}, "
                                      f"mean {law.mean:.4g})")
    return ledger


def _plan_key(state: SearchState) -> tuple:
    """What the per-model ε is a function of, every part public (the seed aside, which changes no plan)."""
    base, ref = state.base, state.reference_plan
    return (state.method, repr(sorted((k, repr(v)) for k, v in base.get_params().items() if k != "random_state")),
            repr(state.candidates[0]), state.Xf.shape, state.target, state.delta, state.law, state.unit,
            state.sigma_counts, state.sigma_score, None if ref is None else repr(ledger_totals(ref.ledger)))


def per_model_epsilon(state: SearchState) -> SearchPlan:
    """The largest per-model ε whose search spends at most ``state.target`` (within :data:`TOLERANCE` of it), and
    the ledger it plans; refused where the counts, the scores and the repetitions leave too little for any model."""
    return PER_MODEL_EPSILON.lookup(_plan_key(state), lambda: _bisect(state))


def _bisect(state: SearchState) -> SearchPlan:
    base, point, target, delta = state.base, state.candidates[0], state.target, state.delta
    Xf, yf, sf = state.Xf, state.yf, state.sf

    def total(eps_run):
        ledger = search_ledger(plan_of(clone(base).set_params(**point, epsilon=eps_run), Xf, yf, sf), state)
        return ledger.epsilon(delta, "rdp"), ledger

    def refuse(why: str):
        return ValueError(f"epsilon={target:g} is spent before any training: the counts, the scores and the "
                          f"repetitions leave too little for each model ({why}); raise epsilon, lower counts_share "
                          "or score_share, or use fewer runs (mean_runs)")

    hi, lo = target, target / 2.0
    spent, ledger = total(lo)
    while spent > target:
        hi, lo = lo, lo / 2.0
        if lo < target * 1e-3:
            raise refuse(f"with a per-model ε of {hi:.2g} the search spends {spent:.3g}")
        try:
            spent, ledger = total(lo)
        except ValueError as exc:  # the method's own calibration cannot reach so small an ε
            raise refuse(f"per-model ε {lo:.2g}: {exc}") from None
    best = SearchPlan(lo, ledger)
    for _ in range(60):
        if spent >= (1.0 - TOLERANCE) * target:
            break
        mid = math.sqrt(lo * hi)
        trial, ledger = total(mid)
        if trial <= target:
            lo, best, spent = mid, SearchPlan(mid, ledger), trial
        else:
            hi = mid
    return best


def check_same_plan(state: SearchState, run_epsilon: float) -> None:
    """Refuse a grid whose candidates spend differently per run: a private search repeats one mechanism."""
    candidates, base = state.candidates, state.base
    plans = [ledger_totals(plan_of(clone(base).set_params(**p, epsilon=run_epsilon), state.Xf, state.yf, state.sf,
                                   checked=True))
             for p in candidates]
    for point, plan in zip(candidates, plans):
        if plan != plans[0]:
            raise ValueError(f"candidates {candidates[0]} and {point} spend differently per run (their privacy "
                             "plans differ); a private search repeats one mechanism, so vary only "
                             "hyper-parameters that leave the plan unchanged (e.g. lam, learning_rate)")
