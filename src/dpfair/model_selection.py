"""Model selection on private data: scikit-learn's ``GridSearchCV`` and ``cross_validate`` on one privacy budget.

Thin wrappers over scikit-learn's own. Every fit they make (each candidate on each fold, and the
refit of the best one) draws from one :class:`~dpfair.privacy.PrivacyBudget` (an unlimited one that
only adds up if none is given), which refuses a fit that would exceed it before that fit releases
anything. They report the total the fits spent: ``privacy_spent_`` on the search, a
``"privacy_spent"`` entry in ``cross_validate``'s result.

That total covers the fits. The scores are computed on the private data without noise, so choosing
among models by them (``best_params_``), or publishing them, is a further use of the data that it
does not cover: both warn so (:class:`~dpfair.exceptions.PrivacyLeakWarning`). Select on public or
held-out data to keep the printed ε the whole story.

``sensitive_features`` passed to ``fit`` (or in ``params``) is routed by scikit-learn's metadata
routing, switched on for the call: to every fit, to ``score`` (estimators that read the group at
prediction), and to the fairness scorers of :mod:`dpfair.fairness.scorers`.
"""

from __future__ import annotations

import warnings

import numpy as np
import sklearn
from joblib.parallel import get_active_backend
from sklearn import model_selection as _sk
from sklearn.base import clone

from dpfair.exceptions import BudgetExceededError, PrivacyLeakWarning
from dpfair.privacy.budget import PrivacyBudget

__all__ = ["GridSearchCV", "cross_validate"]

_NOT_COVERED = ("the scores are computed on the private data without noise: choosing among models by them, or "
                "publishing them, is a further use of the data that this total does not cover (it covers the fits)")


class _OnBudget:
    """One selection's fits on ``budget`` (else the estimator's attached one, else an unlimited one): metadata
    routing on, a refusal raised, the fits' total measured."""

    def __init__(self, budget: PrivacyBudget | None, estimator, n_jobs):
        attached = PrivacyBudget.attached(estimator)
        self.budget = budget if budget is not None else attached if attached is not None else PrivacyBudget()
        backend, default = get_active_backend()
        jobs = default if n_jobs is None else n_jobs
        if jobs not in (None, 1) and not getattr(backend, "uses_threads", False):
            raise ValueError(f"n_jobs={jobs} would fit in other processes, each on its own copy of the PrivacyBudget: "
                             f"use n_jobs=1, or threads: with joblib.parallel_backend('threading', n_jobs={jobs}): ...")

    def __enter__(self):
        self._mark = self.budget.mark()
        self._routing = sklearn.config_context(enable_metadata_routing=True)
        self._routing.__enter__()
        return self

    def __exit__(self, kind, error, trace):
        self._routing.__exit__(kind, error, trace)
        refusals = self.budget.refusals_since(self._mark)
        if refusals and (kind is None or issubclass(kind, Exception)) and not isinstance(error, BudgetExceededError):
            # scikit-learn turns a failed fit into a NaN score: a refused fit must stop the selection instead
            raise BudgetExceededError(f"{len(refusals)} fit(s) of the selection were refused; the first: "
                                      f"{refusals[0]}") from error
        self.spent = self.budget.spent_since(self._mark)
        return False

    def warn(self, where: str) -> None:
        eps, delta = self.spent
        warnings.warn(f"{where}: the fits spent ε = {eps:.4g} at δ = {delta:.3g} in all; {_NOT_COVERED}",
                      PrivacyLeakWarning, stacklevel=3)


class GridSearchCV(_sk.GridSearchCV):
    """scikit-learn's ``GridSearchCV`` with every fit drawing from one :class:`~dpfair.privacy.PrivacyBudget`.

    Parameters are scikit-learn's, plus ``budget``: the budget every fit draws from (``None``: the one
    attached to ``estimator``, else an unlimited one that only adds up). ``fit(X, y, sensitive_features=s)`` routes s to every fit,
    to ``score`` and to the scorers (see the module docstring); ``scoring`` takes the fairness
    scorers of :mod:`dpfair.fairness.scorers`.

    Beside scikit-learn's fitted attributes: ``privacy_spent_``, the ``(ε, δ)`` of all the search's
    fits composed (at the budget's δ, or the smallest δ of the fits), and ``budget_``. ``fit``
    warns (``PrivacyLeakWarning``) that choosing by the scores is not covered by that total, and
    raises :class:`~dpfair.exceptions.BudgetExceededError` if the budget refused a fit. The fitted
    ``best_estimator_`` is detached from the budget (it can be pickled).
    """

    _parameter_constraints = {**_sk.GridSearchCV._parameter_constraints, "budget": [PrivacyBudget, None]}

    def __init__(self, estimator, param_grid, *, budget=None, scoring=None, n_jobs=None, refit=True, cv=None,
                 verbose=0, pre_dispatch="2*n_jobs", error_score=np.nan, return_train_score=False):
        super().__init__(estimator, param_grid, scoring=scoring, n_jobs=n_jobs, refit=refit, cv=cv, verbose=verbose,
                         pre_dispatch=pre_dispatch, error_score=error_score, return_train_score=return_train_score)
        self.budget = budget

    def fit(self, X, y=None, **params):
        estimator = self.estimator
        with _OnBudget(self.budget, estimator, self.n_jobs) as run:
            self.estimator = run.budget.attach(clone(estimator))  # scikit-learn clones it for every fit
            try:
                super().fit(X, y, **params)
            finally:
                self.estimator = estimator
        if hasattr(self, "best_estimator_"):
            PrivacyBudget.detach(self.best_estimator_)
        self.budget_, self.privacy_spent_ = run.budget, run.spent
        run.warn("GridSearchCV")
        return self


def cross_validate(estimator, X, y=None, *, budget: PrivacyBudget | None = None, sensitive_features=None,
                   params=None, **kwargs) -> dict:
    """scikit-learn's ``cross_validate`` with every fit drawing from ``budget`` (``None``: the one attached to
    ``estimator``, else an unlimited one).

    ``sensitive_features`` (or ``params={"sensitive_features": s}``) is routed to every fit, to
    ``score`` and to the scorers; other keyword arguments are scikit-learn's. The result holds
    scikit-learn's entries and ``"privacy_spent"``: the ``(ε, δ)`` of all the fits composed. Warns
    (``PrivacyLeakWarning``) that the scores themselves are not covered; raises
    :class:`~dpfair.exceptions.BudgetExceededError` if the budget refused a fit.
    """
    params = dict(params or {})
    if sensitive_features is not None:
        params["sensitive_features"] = sensitive_features
    with _OnBudget(budget, estimator, kwargs.get("n_jobs")) as run:
        result = _sk.cross_validate(run.budget.attach(clone(estimator)), X, y, params=params, **kwargs)
    for fitted in result.get("estimator", ()):
        PrivacyBudget.detach(fitted)
    result["privacy_spent"] = run.spent
    run.warn("cross_validate")
    return result
