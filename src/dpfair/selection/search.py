"""Private model selection: the fairest model within an error budget, with the search itself on the ledger.

A trade-off curve is drawn by training many models and reading their scores; picking one from it is a
further use of the private data that no model's ε covers. :func:`tune` (and the estimator behind it,
:class:`PrivateSearch`) picks the hyper-parameters privately and prints ε of the whole procedure.

**The mechanism: random stopping** (Liu & Talwar 2019; Papernot & Steinke 2022, "Hyperparameter tuning
with Renyi differential privacy"). The training rows are split (by ``random_state``, public, as the
train/test split is; :func:`~dpfair.selection.state.split_rows`) into a *fit* part and a *validation* part. Then

1. the validation part's group sizes (per constraint cell of the notion) are released once with
   Gaussian noise (``counts_share`` of ε, calibrated alone) and floored: the public denominators of the
   score, and, for DP-FERMI (unless the user gave public ``group_proportions``), every run's group
   proportions, so that no run releases its own;
2. a number of runs K is drawn from the secret generator (:class:`~dpfair.privacy.SecretRandom`, never a
   seed anyone knows; one repeat-and-select release, :meth:`~dpfair.privacy.Release.repeat`, which also draws
   each run's candidate and its public seed) from a truncated negative binomial of shape η and mean μ
   (``repetitions``, :mod:`dpfair.selection.repetitions`: ``"geometric"``, η = 1, Liu & Talwar's random
   stopping; ``"logarithmic"``, η = 0; ``"poisson"``, η = ∞; or a number η > 0);
3. each run picks a candidate uniformly at random (secret coins too), trains it on the fit part at the
   per-model ε (:mod:`dpfair.selection.plan`), and releases its score (:mod:`dpfair.selection.scores`) on the
   validation part with Gaussian noise (``score_share`` of ε, calibrated alone); the runs are fitted by the
   method's :meth:`~dpfair.algorithms.base.FairEstimator.fit_many`: DP-FERMI's as one batched grid, each model
   with its own secret batches and noise, other methods one after the other;
4. the run with the highest *released* score is the output.

Only the winning run is published: its model, its candidate and its released score. The other runs'
scores and K stay secret, since publishing them would forfeit the bound (the search's privacy comes from
hiding how many runs it took). The runs are silent (no progress bar; their warnings, which their number
could be read from, are dropped; each candidate's plan was stated up front, before any release). Every run is
an independent run of the same mechanism (fresh secret generators, distinct batch streams), and the output is
the best run by its released score alone: the conditions of the accountant's theorem
(:mod:`dpfair.selection.repetitions`). The constraint's reference error is :mod:`dpfair.selection.reference`'s.

**The constrained strategy** (``strategy="constrained"``, and ``"auto"``'s choice for DP-FERMI under the
sensitive unit when the grid varies λ alone) fits one model instead: :mod:`dpfair.selection.constrained`.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import ClassVar, NamedTuple

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.validation import check_is_fitted

from dpfair.algorithms.base import named_sensitive_columns, public_categories
from dpfair.algorithms.signal import floor_counts
from dpfair.fairness.notions import get_notion
from dpfair.fairness.scorers import predict_with_groups
from dpfair.privacy import (
    Part,
    PrivacyBudget,
    PrivacyLedger,
    PrivacyUnit,
    calibrate_noise,
    check_privacy_unit,
    gaussian_event,
    ledger_totals,
)
from dpfair.privacy.budget import charging_grid
from dpfair.privacy.session import ReleaseSession
from dpfair.selection.constrained import fit_constrained
from dpfair.selection.plan import (
    COUNTS,
    REFERENCE_ERROR,
    SCORE,
    SearchPlan,
    check_same_plan,
    per_model_epsilon,
)
from dpfair.selection.reference import PROXY, private_reference, public_reference, reference_plan
from dpfair.selection.repetitions import Repetitions
from dpfair.selection.scores import SelectionScore, best_released, cell_counts, counts_bound, group_shares
from dpfair.selection.settings import (
    PARAMETER_CONSTRAINTS,
    check_settings,
    resolve_strategy,
    takes_released_shares,
    validation_share,
)
from dpfair.selection.state import SearchState, split_rows
from dpfair.utils.capabilities import Capabilities, capabilities
from dpfair.utils.validation import check_1d, check_delta, check_features, encode_categories

__all__ = ["PrivateSearch", "tune"]


class _Outcome(NamedTuple):
    """What a random-stopping search's releases give: the winning run's model, candidate and released score, the
    score the runs were ranked by, the released (floored) counts and the reference error."""

    best: object
    point: dict
    released: float
    score: SelectionScore
    denominators: np.ndarray
    reference: float


class PrivateSearch(ClassifierMixin, BaseEstimator):
    """Private selection of hyper-parameters (random stopping, or DP-FERMI's λ by its public error constraint);
    ``privacy_spent_`` covers the whole search.

    Parameters
    ----------
    estimator : a private dpfair estimator; every run fits a clone of it.
    param_grid : the candidates: a dict of value lists (their product) or a list of dicts, as scikit-learn's
        ``ParameterGrid``. They may not set the search's own parameters (``epsilon``, ``delta``,
        ``random_state``, ``notion``, ...) and must share one privacy plan (e.g. λ of DP-FERMI).
    epsilon, delta : the budget of the whole search (``delta=None``: 1/n²).
    notion : the fairness notion scored (``None``: the estimator's ``notion``); a fair estimator is set to it.
    max_error_increase : X ≥ 0 in the constraint "validation error ≤ reference_error + X".
    reference_error : a public proxy of the non-private error (``None``: obtained as
        :mod:`dpfair.selection.reference` says).
    penalty : points of violation one point of error beyond the budget costs in the score.
    repetitions : the law of the number of runs: "geometric" (Liu & Talwar), "logarithmic", "poisson", or a
        truncated negative binomial's shape η ≥ 0 (Papernot & Steinke).
    mean_runs : its mean (``None``: twice the number of candidates).
    strategy : "random_stopping" (the candidates, the module docstring), "constrained" (one DP-FERMI fit whose λ
        follows "training error ≤ reference + X" at no privacy cost: sensitive unit, a grid of λ alone) or
        "auto" (default): "constrained" where it applies, else "random_stopping".
    validation_size : share of the rows held out to be scored rather than fitted; 0 fits and scores every row. A
        held-out part guards against a score flattered by over-fitting (a large model); without one each run
        trains on more rows, and the score's denominators are the whole train part's counts, so its noise
        is several times smaller for the same ε (figures: docs/guide/benchmarks.md, "Measurements behind
        defaults").
        ``"auto"`` (default): 0 for a linear model (``model="logistic"``, which a private fit does not
        over-fit), else 0.2.
    counts_share, score_share, reference_share : shares of ε the validation counts, each run's score and
        (record unit, no ``reference_error``) the private reference spend, each calibrated alone; the
        per-model ε takes what is left of the total.
    budget : a :class:`~dpfair.privacy.PrivacyBudget` charged the search's total before its first release
        (``None``: the one attached to ``estimator``, if any).
    random_state : seeds the public split (and the runs' public initialisation goes with secret seeds).

    The values each accepts are declared in :attr:`parameter_constraints` (:mod:`dpfair.selection.settings`).

    Fitted attributes: ``best_estimator_`` (the winning run's model, or the constrained strategy's one fit; its
    ``privacy_ledger_`` and ``privacy_spent_`` are the search's), ``best_params_``, ``released_score_`` (the
    winner's released score, the only score published; ``None`` under the constrained strategy, which releases
    none), ``privacy_ledger_``, ``privacy_spent_``, ``selection_`` (what was run, all public) and ``classes_``.
    """

    #: The values each hyper-parameter accepts (:data:`dpfair.selection.settings.PARAMETER_CONSTRAINTS`), checked
    #: in one place by :meth:`check_hyperparameters`.
    parameter_constraints: ClassVar[dict] = PARAMETER_CONSTRAINTS

    def __init__(self, estimator, param_grid, *, epsilon=1.0, delta=None, notion=None, max_error_increase=0.01,
                 reference_error=None, penalty=10.0, repetitions="geometric", mean_runs=None, strategy="auto",
                 validation_size="auto", counts_share=0.05, score_share=0.25, reference_share=0.1, budget=None,
                 random_state=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.notion = notion
        self.max_error_increase = max_error_increase
        self.reference_error = reference_error
        self.penalty = penalty
        self.repetitions = repetitions
        self.mean_runs = mean_runs
        self.strategy = strategy
        self.validation_size = validation_size
        self.counts_share = counts_share
        self.score_share = score_share
        self.reference_share = reference_share
        self.budget = budget
        self.random_state = random_state

    # ---- what the auditor and scikit-learn read -----------------------------------------------------
    @property
    def privacy_unit(self) -> str:
        """The privacy unit of the estimator searched over (and of the search)."""
        return getattr(self.estimator, "privacy_unit", "record")

    def __dpfair_capabilities__(self) -> Capabilities:
        """What callers may ask of the search (:func:`dpfair.utils.capabilities.capabilities`): its winner reads s at
        prediction when the estimator searched over does. It declares no more: a search is no method another
        search could repeat."""
        return Capabilities(predict_needs_sensitive=capabilities(self.estimator).predict_needs_sensitive)

    def predict_proba(self, X, **kwargs):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X, **kwargs)

    def predict(self, X, **kwargs):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X, **kwargs)

    # ---- the search -----------------------------------------------------------------------------
    def check_hyperparameters(self) -> PrivateSearch:
        """Refuse settings and candidates that no data could make valid; return ``self``. ``fit`` runs it first.

        It reads the search's parameters alone, never the data, so a bad candidate costs no privacy and the CLI
        refuses it before loading any data: every declared constraint (:attr:`parameter_constraints`), then the
        rules of :func:`~dpfair.selection.settings.check_settings` (every candidate is checked by the estimator's
        own :meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`, a clone with the candidate set,
        and a held-out share is refused where the strategy, the constrained one fitting and scoring every row,
        would ignore it).
        """
        check_settings(self)
        return self

    def _check(self, X, y, s) -> SearchState:
        """The checked settings and data, as a state (all that the constrained strategy needs)."""
        base, target, notion, candidates = check_settings(self)
        valid = base.get_params()
        # a DataFrame's columns named after the sensitive Series encode s: refused where the runs read X as public,
        # else handed to the runs' own accounting (the search fits them on arrays, which carry no names)
        groups = valid.get("groups")
        groups = range(groups) if isinstance(groups, int) and not isinstance(groups, bool) else \
            (() if groups is None else groups)
        names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
        named = named_sensitive_columns(names, getattr(s, "name", None), [str(g) for g in groups])
        if named:
            base = clone(base).declare_sensitive_columns(named, names, s.name)
        X = check_features(X, "X")
        y = check_1d(y, "y", X.shape[0])
        if s is None:
            raise ValueError("a private search scores fairness: call fit(X, y, sensitive_features=s)")
        s = check_1d(s, "sensitive_features", X.shape[0])
        delta = check_delta(self.delta if self.delta is not None else 1.0 / X.shape[0] ** 2, n=X.shape[0])
        unit = check_privacy_unit(getattr(base, "privacy_unit", "record"))
        return SearchState(base, candidates, target, delta, notion, unit, X, y, s)

    def fit(self, X, y, sensitive_features=None):
        """Run the search on ``(X, y, s)`` (module docstring); the winner is ``best_estimator_``."""
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, key)
        state = self._check(X, y, sensitive_features)
        if resolve_strategy(self.strategy, state.base, state.candidates, state.unit) == "constrained":
            self._publish(*fit_constrained(state, reference_error=self.reference_error,
                                           max_error_increase=self.max_error_increase,
                                           random_state=self.random_state, budget=self._budget(), owner=self))
            return self
        state = self._prepare(state)
        plan = per_model_epsilon(state)
        check_same_plan(state, plan.run_epsilon)
        ledger = PrivacyLedger(state.unit.relation)
        outcome = self._release(state, plan, ledger)
        if ledger_totals(ledger) != ledger_totals(plan.ledger):
            raise RuntimeError(f"the search's ledger {ledger.to_records()} differs from its plan; please report this")
        self._finish(state, plan, ledger, outcome)
        return self

    # ---- random stopping ------------------------------------------------------------------------------
    def _prepare(self, state: SearchState) -> SearchState:
        """Random stopping's public plan: the public lists and codes, the runs' fixed settings, the split, the law
        of the runs, the σ's, and the reference (public, the user's, or the private one planned)."""
        base, unit, notion = state.base, state.unit, state.notion
        params = base.get_params()
        classes = public_categories(params.get("classes"), state.y, "classes", unit is PrivacyUnit.RECORD,
                                    "classes=[...] on the estimator (the data set's label values)", stacklevel=5)
        groups = public_categories(params.get("groups"), state.s, "groups", True,
                                   "groups=k or groups=[...] on the estimator (the data set's group values)",
                                   stacklevel=5)
        y_codes, _ = encode_categories(state.y, "y", classes=classes)
        s_codes, _ = encode_categories(state.s, "sensitive_features", classes=groups)
        fixed = {k: v for k, v in (("notion", notion), ("groups", params.get("groups")),
                                   ("classes", params.get("classes"))) if k in params}
        if "groups" in fixed and fixed["groups"] is None:
            fixed["groups"] = groups.tolist()
        if "classes" in fixed and fixed["classes"] is None:
            fixed["classes"] = classes.tolist()
        base = PrivacyBudget.detach(clone(base).set_params(**fixed, delta=state.delta, verbose=False))
        n_cells = len(get_notion(notion).cell_labels(len(classes)))
        shares_released = takes_released_shares(base)
        if shares_released:  # planned with placeholder shares: a plan depends on whether they are public, not on them
            base.set_params(group_proportions=group_shares(np.ones((n_cells, len(groups)))))
        fit_rows, val_rows = split_rows(len(state.y), validation_share(self.validation_size, base), self.random_state)
        mean = float(self.mean_runs) if self.mean_runs is not None else 2.0 * len(state.candidates)
        relation = unit.relation
        state = replace(state, base=base, classes=classes, groups=groups, y_codes=y_codes, s_codes=s_codes,
                        fit_rows=fit_rows, val_rows=val_rows, law=Repetitions.of(self.repetitions, mean),
                        sigma_counts=calibrate_noise(gaussian_event, self.counts_share * state.target, state.delta,
                                                     relation),
                        sigma_score=calibrate_noise(gaussian_event, self.score_share * state.target, state.delta,
                                                    relation),
                        shares_released=shares_released, secure=bool(params.get("secure_mode", False)),
                        reference=self.reference_error, reference_source=PROXY)
        if self.reference_error is None and unit is PrivacyUnit.SENSITIVE:
            reference, source = public_reference(base, state.X, state.y, fit_rows, val_rows, self.random_state)
            return replace(state, reference=reference, reference_source=source)
        if self.reference_error is None:
            return replace(state, reference_plan=reference_plan(state, self.reference_share, self.random_state),
                           reference_source="DP-SGD logistic regression on the fit part, its validation error "
                                            "released")
        return state

    def _release(self, state: SearchState, plan: SearchPlan, ledger: PrivacyLedger) -> _Outcome:
        """The search's releases, on ``ledger`` through one session charged ``plan``'s ledger before the first:
        the counts, the private reference (if planned), then the runs and their scores."""
        run_entry = next(e for e in plan.ledger.entries if e.label.startswith("repeated runs"))
        run_part = Part(run_entry.label, mechanism="fixed", fixed=run_entry.event)
        parts = {Part(COUNTS): state.sigma_counts, run_part: 0.0, Part(SCORE): state.sigma_score}
        if state.reference_plan is not None:
            parts[Part(REFERENCE_ERROR)] = state.reference_plan.sigma
        with charging_grid(self._budget(), self, "a private search") as charge, \
                ReleaseSession.of_parts(ledger, parts, key=("private search", self.random_state),
                                        secure=state.secure, charge=charge) as session:
            if charge is not None:  # the whole search, before its first release
                charge.claim_ledger(plan.ledger, state.delta)
            counts = cell_counts(state.notion, state.yv_codes, state.sv_codes, len(state.classes), len(state.groups))
            noisy = session.release(COUNTS).noisy_sum(counts, bound=counts_bound(state.unit))
            denominators = floor_counts(noisy, state.sigma_counts * counts_bound(state.unit))
            if state.shares_released:  # the runs' shares, on the estimator they clone
                state.base.set_params(group_proportions=group_shares(denominators))
            reference = state.reference
            if state.reference_plan is not None:
                reference = private_reference(state, session)
            score = SelectionScore(state.notion, float(reference) + float(self.max_error_increase), float(self.penalty),
                                   denominators, state.n_val, len(state.classes), state.unit,
                                   capabilities(self).predict_needs_sensitive)
            best, point, released = self._run(state, session.release(run_part.name), plan.run_epsilon, session,
                                              score)
        return _Outcome(best, point, released, score, denominators, reference)

    @staticmethod
    def _run(state: SearchState, runs, run_epsilon: float, session: ReleaseSession, score: SelectionScore):
        """The runs of the repeat-and-select release ``runs`` (K, each run's candidate and seed drawn by it), each
        scored and its score released; the best by released score is returned, K and the others are dropped."""
        candidates = state.candidates
        picks, seeds = runs.repeat(state.law, len(candidates))
        if len(seeds) == 0:
            raise ValueError("the search drew no run (a Poisson number of runs is 0 with probability e^-mean); its "
                             "counts were released, so its budget is spent: run it again with a new budget")
        points = [{**candidates[int(j)], "epsilon": run_epsilon, "delta": state.delta, "random_state": int(seed)}
                  for j, seed in zip(picks, seeds)]
        release = session.release(SCORE, ledger=session.covered(runs.part.name))  # inside the runs' event
        released = []
        base, Xv, sv = state.base, state.Xv, state.sv
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # how many runs warned would tell K (the module docstring)
            fitted = type(base).fit_many([clone(base).set_params(**p) for p in points], state.Xf, state.yf, state.sf,
                                         budget=session.charge)  # the runs are part of the search's claim
            for model in fitted:
                y_pred, _ = encode_categories(predict_with_groups(model, Xv, sv), "predictions", classes=state.classes)
                value = score.value(state.yv_codes, y_pred, state.sv_codes)
                released.append(float(release.noisy_sum(np.array([value]), bound=score.bound)[0]))
        chosen = best_released(released)
        return fitted[chosen], candidates[int(picks[chosen])], released[chosen]

    def _finish(self, state: SearchState, plan: SearchPlan, ledger: PrivacyLedger, outcome: _Outcome) -> None:
        best, score, delta = outcome.best, outcome.score, state.delta
        best.privacy_ledger_ = ledger
        best.delta_ = delta
        best.privacy_spent_ = (ledger.epsilon(delta, "rdp"), delta)
        selection = {
            "strategy": "random_stopping", "chosen": dict(outcome.point), "released_score": outcome.released,
            "candidates": [dict(c) for c in state.candidates],
            "per_model_epsilon": plan.run_epsilon, "repetitions": state.law.describe(), "privacy_unit": state.unit.value,
            "score": {"notion": state.notion, "rule": "-(violation + penalty * max(0, error - threshold))",
                      "threshold": score.threshold, "reference_error": float(outcome.reference),
                      "reference": state.reference_source, "max_error_increase": float(self.max_error_increase),
                      "penalty": score.penalty, "sensitivity": score.sensitivity,
                      "noise_std": state.sigma_score * score.bound},
            "validation": {"rows": state.n_val, "fit_rows": state.n_fit,
                           "released_counts": outcome.denominators.tolist(),
                           "counts_noise_std": state.sigma_counts * counts_bound(state.unit)},
        }
        self._publish(best, selection)

    # ---- shared -------------------------------------------------------------------------------------
    def _budget(self):
        """The budget the search draws from: its own, else the one attached to the estimator, if any."""
        return self.budget if self.budget is not None else getattr(self.estimator, "privacy_budget", None)

    def _publish(self, best, selection: dict) -> None:
        """The search's fitted attributes: ``best`` (whose ledger is the search's) and what was chosen."""
        best.selection_ = selection
        self.best_estimator_, self.best_params_ = best, dict(selection["chosen"])
        self.released_score_ = selection["released_score"]
        self.privacy_ledger_, self.privacy_spent_ = best.privacy_ledger_, best.privacy_spent_
        self.selection_ = selection
        self.classes_ = best.classes_


def tune(estimator, param_grid, X, y, sensitive_features=None, **params):
    """The model a private search selects (:class:`PrivateSearch`; ``params`` are its parameters).

    Returns the winning run's fitted estimator: its ``privacy_spent_`` and ``privacy_ledger_`` are those of
    the whole search, and ``selection_`` says what was chosen, with its released score.
    """
    return PrivateSearch(estimator, param_grid, **params).fit(X, y, sensitive_features).best_estimator_
