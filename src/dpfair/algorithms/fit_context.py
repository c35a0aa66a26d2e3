"""The fit contract's two objects: what a fit will release (:class:`FitPlan`), and what one fit holds while it
runs (:class:`FitContext`).

**The plan.** Every private estimator states what it will release from public inputs alone
(:class:`PublicShape`: the number of rows n, the number of features, the public group and class lists, the
columns of X a public schema says encode s) as a :class:`~dpfair.privacy.PrivacyPlan`, and
:meth:`FairEstimator.plan <dpfair.algorithms.FairEstimator.plan>` calibrates it on the accountant into a
:class:`FitPlan`: the parts, every part's σ, the ε target, δ, the privacy unit. The fit calibrates through the
same method, so a plan and the fit it announces cannot disagree; since nothing in it reads data, the plan may be
computed, compared, claimed on a budget and printed before any data is touched.

**The context.** ``fit`` makes one :class:`FitContext` per fit and hands it to the method's
``_fit(ctx, X, y, s)``: this fit's secret generator (:class:`~dpfair.privacy.SecretRandom`, never stored on the
estimator), its public generators (seeded from ``random_state``), its ledger, its calibrated plan and σ, its
progress bar and callback, and the budget charge it hands its claims. The release path runs through its
:class:`~dpfair.privacy.session.ReleaseSession`, the one door every private consumer of dpfair releases through
(:meth:`FitContext.calibrate` before the first release, then :meth:`FitContext.release` for each part), and it
is dropped when the fit ends: the estimator keeps its fitted ``name_`` attributes only.

While a fit runs, its estimator holds its context (``FairEstimator.fit_context``, read-only, dropped when the fit
ends), for the two readers that cannot be handed it: a ``callback`` that asks the estimator's
``privacy_spent_so_far()``, and the steps of a fit that a grid drives itself (``begin_fit``, the method's steps,
``end_fit``). There is no registry of running fits.
"""

from __future__ import annotations

import math
import numbers
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dpfair.privacy import (
    PrivacyLedger,
    PrivacyPlan,
    PrivacyUnit,
    Release,
    SecretRandom,
)
from dpfair.privacy.budget import Claim
from dpfair.privacy.session import ReleaseSession
from dpfair.utils.progress import SILENT, Progress

#: Seconds between two computations of the ε spent so far for a fit's progress bar.
EPSILON_INTERVAL = 1.0


def _public_list(value) -> tuple | None:
    """A public list as a tuple: an int k → ``(0, …, k−1)``, values as given, ``None`` as ``None``."""
    if value is None:
        return None
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return tuple(range(int(value)))
    return tuple(np.asarray(list(value)).tolist())


@dataclass(frozen=True)
class PublicShape:
    """The public inputs a plan is made from: nothing here is read from private values.

    ``n``: the number of training rows (public in dpfair's privacy model; a method with a declared public size,
    ``sample_size``, uses that instead); ``n_features``: the columns of X; ``groups`` and ``classes``: the public
    group and class lists (``None``: not given); ``sensitive_columns``: the columns of X that a public schema says
    encode s (a DataFrame's columns named after the sensitive Series), which output perturbation accounts for.
    """

    n: int
    n_features: int | None = None
    groups: tuple | None = None
    classes: tuple | None = None
    sensitive_columns: tuple[int, ...] = ()

    @classmethod
    def of(cls, n, n_features=None, groups=None, classes=None, sensitive_columns=()) -> PublicShape:
        """A shape from plain values (``groups``/``classes``: an int k, or the values), checked."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n must be the number of training rows (an integer >= 1), got {n!r}")
        if n_features is not None and (isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral)
                                       or n_features < 1):
            raise ValueError(f"n_features must be the number of columns of X (an integer >= 1), got {n_features!r}")
        return cls(int(n), None if n_features is None else int(n_features), _public_list(groups),
                   _public_list(classes), tuple(sorted({int(c) for c in sensitive_columns})))

    def need(self, what: str, method: str) -> int:
        """``len(groups)``, ``len(classes)`` or ``n_features`` (``what``), or one line saying that the plan of
        ``method`` needs it."""
        value = {"groups": self.groups, "classes": self.classes, "n_features": self.n_features}[what]
        if value is None:
            fix = "n_features=X.shape[1]" if what == "n_features" else f"{what}=k or {what}=[...] (the public list)"
            raise ValueError(f"{method}'s plan depends on the number of {what.replace('n_', '')}: pass {fix}")
        return value if isinstance(value, int) else len(value)


@dataclass(frozen=True)
class FitPlan:
    """What a fit will release, calibrated: :meth:`FairEstimator.plan <dpfair.algorithms.FairEstimator.plan>`'s
    answer, and what a fit adopts at :meth:`FitContext.calibrate`.

    ``plan``: the :class:`~dpfair.privacy.PrivacyPlan` (its named parts, counts, sampling rates, shares; ``None``
    for a method that is not private); ``sigmas``: every part's noise multiplier; ``epsilon``: the ε target;
    ``delta``; ``unit``: the privacy unit; ``accountant``. All public: functions of hyper-parameters and of a
    :class:`PublicShape`.
    """

    plan: PrivacyPlan | None
    sigmas: Mapping[str, float]
    epsilon: float
    delta: float | None
    unit: PrivacyUnit | None
    accountant: str = "pld"

    @property
    def private(self) -> bool:
        return self.plan is not None

    def expected_ledger(self) -> Counter:
        """``{(label, event): count}``: what the fit's ledger holds when it has run (``{}`` if not private)."""
        return Counter() if self.plan is None else self.plan.expected_ledger(dict(self.sigmas))

    def ledger(self) -> PrivacyLedger:
        """The ledger a fit records when it runs this plan."""
        ledger = PrivacyLedger(self.unit if self.unit is not None else "record")
        for (label, event), count in self.expected_ledger().items():
            ledger.record(event, label, count)
        return ledger

    @property
    def privacy_spent(self) -> tuple[float, float]:
        """``(ε, δ)`` the fit will report as ``privacy_spent_``: the plan's composition at δ (``(inf, 0)`` if not
        private)."""
        if self.plan is None:
            return math.inf, 0.0
        return self.plan.epsilon(dict(self.sigmas), self.delta, self.unit, self.accountant), self.delta


@dataclass(eq=False)
class FitContext:
    """One fit of ``estimator`` while it runs: handed to its ``_fit(ctx, X, y, s)``, dropped when it ends.

    ``session``: the fit's :class:`~dpfair.privacy.session.ReleaseSession` (``None`` for a method that is not
    private): its secret generator, its ledger (the estimator's ``privacy_ledger_``), the plan and σ it adopts at
    :meth:`calibrate`, and the budget claim made before each release; ``np_rng`` and ``torch_rng``: the public
    generators seeded from ``random_state`` (initialisation, public minibatch orders); ``ledger``: the estimator's
    ``privacy_ledger_``; ``shape``: the fit's :class:`PublicShape`; ``private``, ``delta``, ``accountant``: how
    its ledger is measured; ``sample_weight``: the checked row weights of a method that takes them (else
    ``None``); ``bar`` and ``callback``: its progress bar and the ``callback`` given to ``fit``; ``charge``: the
    budget charge its claims go to (set by ``fit``; ``None``: no budget, or a grid that claims for its models).
    After :meth:`calibrate`: ``plan`` (the :class:`FitPlan`) and ``sigmas`` (every part's σ).
    """

    estimator: object
    ledger: PrivacyLedger
    shape: PublicShape
    np_rng: np.random.Generator
    torch_rng: object
    session: ReleaseSession | None = None
    private: bool = False
    delta: float | None = None
    accountant: str = "pld"
    sample_weight: np.ndarray | None = None
    bar: Progress = SILENT
    callback: object = None
    charge: object = None
    plan: FitPlan | None = None
    epochs_ended: int = 0
    accounting_seconds: float = 0.0

    def __post_init__(self):
        if self.session is not None:
            self.session.claim = self.claim

    @property
    def secret(self) -> SecretRandom | None:
        """The fit's secret generator (its session's; ``None`` for a method that is not private, or once closed)."""
        return None if self.session is None else self.session.secret

    @property
    def sigmas(self) -> dict:
        """Every part's σ, once calibrated (``{}`` before)."""
        if self.session is None:
            return {} if self.plan is None else dict(self.plan.sigmas)
        return self.session.sigmas

    @property
    def side_ledgers(self) -> list:
        """The side ledgers opened and not yet closed (:meth:`side_ledger`)."""
        return [] if self.session is None else self.session.side_ledgers

    # ---- while it runs ---------------------------------------------------------------------------
    def close(self) -> None:
        """The fit ended: its session closes (the secret generator goes with it)."""
        if self.session is not None:
            self.session.close()

    # ---- the budget ------------------------------------------------------------------------------
    def claim(self) -> None:
        """Hand the budget this fit draws from its :class:`~dpfair.privacy.budget.Claim`, as plain values: the
        unit's relation, whether the fit is private, its calibrated plan and σ (once calibrated), its δ."""
        if self.charge is None:
            return
        plan = None if self.plan is None else self.plan.plan
        self.charge.claim_fit(self.estimator, Claim(self.ledger.relation, self.private, plan,
                                                    dict(self.sigmas) if self.plan is not None else None,
                                                    self.delta))

    # ---- the release path ------------------------------------------------------------------------
    def calibrate(self, plan: FitPlan) -> dict[str, float]:
        """Adopt ``plan`` (the estimator's :meth:`~dpfair.algorithms.FairEstimator.plan` of this fit's shape)
        before the first release: published as ``privacy_plan_`` and ``noise_multipliers_`` (public: functions of
        the plan and the budget), adopted by the session and claimed from the budget. Returns every part's σ."""
        self.plan = plan
        self.estimator.privacy_plan_ = plan.plan
        self.estimator.noise_multipliers_ = dict(plan.sigmas)
        if self.session is not None:
            self.session.adopt(plan.plan, plan.sigmas)
        return self.sigmas

    def set_sigmas(self, sigmas: Mapping[str, float]) -> None:
        """Set some parts' σ after calibration (a method's own rule, e.g. a paper's closed form); published and
        claimed again before the next release."""
        merged = {**self.sigmas, **sigmas}
        self.plan = FitPlan(self.plan.plan, merged, self.plan.epsilon, self.plan.delta, self.plan.unit,
                            self.plan.accountant)
        self.estimator.noise_multipliers_ = dict(merged)
        if self.session is not None:
            self.session.set_sigmas(sigmas)

    def release(self, name: str, ledger: PrivacyLedger | None = None) -> Release:
        """The release of the plan's part ``name`` through the fit's session (its secret generator; recorded on
        the fit's ledger, or on ``ledger``, one of :meth:`side_ledger`'s). The plan and σ are claimed again first."""
        return self._session().release(name, ledger)

    def side_ledger(self) -> PrivacyLedger:
        """A ledger for one recurring release, appended to the fit's at :meth:`close_side_ledgers` (composition does
        not depend on the order, and a ledger grouped by kind is fast to account); :meth:`spent_so_far` reads it."""
        return self._session().side_ledger()

    def close_side_ledgers(self) -> None:
        """Append every side ledger's entries to the fit's ledger, in the order they were opened."""
        self._session().close_side_ledgers()

    def _session(self) -> ReleaseSession:
        if self.session is None:
            raise RuntimeError(f"{type(self.estimator).__name__} is not private: it has no release session")
        return self.session

    # ---- progress --------------------------------------------------------------------------------
    def progress(self, total, unit: str = "step") -> Progress:
        """This fit's bar, now counting ``total`` ``unit`` s."""
        self.bar.set_total(total, unit)
        return self.bar

    def spent_so_far(self) -> tuple[float, float]:
        """``(ε, δ)`` of the releases made so far (side ledgers included): a function of the public plan and of how
        many releases were made, never of the data; ``(inf, 0)`` for a method that is not private."""
        if not self.private:
            return math.inf, 0.0
        return self.session.spent_so_far(self.delta, self.accountant)[0], self.delta

    def end_epoch(self, **info) -> None:
        """An epoch (round, solve) ended; ``info``: its public counters (``epoch``, ``step``, ``steps``).

        A shown bar gets the ε spent so far at the last step and otherwise at most every
        :data:`EPSILON_INTERVAL` seconds or ten times the last accounting's duration, whichever is longer (so the
        bar's accountings take at most about a tenth of a fit's time; nothing is computed when no bar is shown);
        then the ``callback`` given to ``fit`` runs, as ``callback(estimator, info)``.
        """
        self.epochs_ended = info["epoch"]
        wait = max(EPSILON_INTERVAL, 10.0 * self.accounting_seconds)
        if self.private and (self.bar.due(wait) or (self.bar.shown and info.get("step") == info.get("steps"))):
            start = time.perf_counter()
            epsilon = self.spent_so_far()[0]
            self.accounting_seconds = time.perf_counter() - start
            self.bar.update(0, ε=epsilon)
        if self.callback is not None:
            self.callback(self.estimator, dict(info))
