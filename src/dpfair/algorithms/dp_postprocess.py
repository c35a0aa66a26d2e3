"""DP post-processing (Jagielski et al., *Differentially Private Fair Learning*, ICML 2019, Algorithm 1).

Hardt, Price and Srebro's equalized-odds post-processing made private. A base classifier Ŷ (any
fitted classifier, private or not) is turned into a randomized classifier Ỹ that reads the sensitive
attribute at prediction time: ``P(Ỹ = 1 | Ŷ = ŷ, S = r) = p[ŷ, r]``. The ``4k`` joint counts
``n[ŷ, r, y]`` of (Ŷ, S, Y) on the training data are released once with Laplace noise; ``p`` solves
the linear program of :func:`~dpfair.algorithms._jagielski.equalized_odds_lp` on the noisy counts:
minimise the error subject to ``|ρ[r, y] − ρ[r', y]| ≤ γ + Δ_y`` for each label y (false- and
true-positive rates), where γ is ``tolerance`` and ``Δ_y = 2 b ln(4k/β) / min_r Ñ[r, y]`` is the slack
the paper prescribes (b the Laplace scale, Ñ the noisy cell sizes) so that the true optimum stays
feasible with probability 1 − β. With ε = ∞ there is no noise and no slack: exactly Hardt et al.'s LP
(fairlearn's ``ThresholdOptimizer(constraints="equalized_odds", predict_method="predict")``).

Privacy. ``privacy_unit="sensitive"`` (the paper's setting; features and labels public): changing one
person's s moves them between two cells, an L1 change of 2 (bound 1 under replace-one), so Laplace
noise of scale σ gives ε = 2/σ — the paper's ``Lap(2/ε)``. ``"record"``: adding or removing a person
changes one cell by 1 (bound 1, ε = 1/σ). σ is calibrated on the accountant so that the whole ledger
spends at most ``epsilon``. The LP, its slack and the prediction rule only post-process the release.

The base classifier composes with the counts as follows. ``prefit=True``: it was trained elsewhere
(on public data or under its own, separate budget); ``privacy_spent_`` covers the counts only.
``prefit=False``: a clone is trained here on the same data, and what it spends on the same privacy
unit is composed into ``privacy_spent_`` (its ledger entries come first on this estimator's ledger)
and σ is calibrated so that base and counts together spend at most ``epsilon``. Under
``"sensitive"`` a base that does not read s (any scikit-learn classifier, or a dpfair estimator that
does not require ``sensitive_features``, e.g. DP-SGD or ERM) costs nothing; a dpfair estimator that
reads s must itself protect s (its ``privacy_unit="sensitive"``). Under ``"record"`` the base must be
a dpfair estimator with record-level privacy; a non-private base spends ε = ∞.
"""

from __future__ import annotations

import math
from typing import ClassVar

import dp_accounting as dpa
import numpy as np
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from dpfair.algorithms._jagielski import (
    RandomizedGroupClassifierMixin,
    cell_counts,
    equalized_odds_lp,
    laplace_slack,
)
from dpfair.algorithms.base import FairEstimator, fit_part
from dpfair.algorithms.fit_context import PublicShape
from dpfair.algorithms.signal import warn_small_groups
from dpfair.utils.capabilities import capabilities
from dpfair.utils.constraints import Bools, HasMethods, Interval
from dpfair.privacy import (
    LedgerEntry,
    Part,
    PrivacyPlan,
    PrivacyUnit,
    check_privacy_unit,
    epsilon_of,
    ledger_totals,
)
from dpfair.utils.validation import check_epsilon, encode_categories

COUNTS = "joint counts (y_hat, s, y)"

#: A (group, label) cell whose released size is below this gets uninformative counts (post-processing).
_SIZE_FLOOR = 1.0


class DPPostProcessingClassifier(RandomizedGroupClassifierMixin, FairEstimator):
    """Differentially private equalized-odds post-processing of a base classifier (Jagielski et al., Alg. 1).

    Parameters
    ----------
    estimator : a classifier with ``fit``/``predict`` (scikit-learn or dpfair); ``None``: scikit-learn's
        ``LogisticRegression(max_iter=1000)``.
    prefit : whether ``estimator`` is already fitted (it is then used as is and not refitted).
    epsilon, delta : the target budget of everything this estimator spends (``delta=None``: 1/n²;
        ``epsilon=inf``: no noise, no slack).
    privacy_unit : "sensitive" (neighbours differ in one person's s; the paper's setting) or "record".
    tolerance : γ ≥ 0, the allowed gap between the groups' false- and true-positive rates.
    beta : confidence β in (0, 1) of the paper's slack; ``None`` uses no slack (plug-in noisy constraints).
    noise_multiplier : Laplace scale σ of the counts; ``None`` calibrates it to (ε, δ) on ``accountant``.
    accountant : "pld" (privacy loss distributions, tight; the default) or "rdp": the accountant that calibrates
        the noise and reports ``privacy_spent_``.
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` where the data are private (s; y under "record").
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks; slower).
    random_state : seeds public randomness only (``predict``'s coins); the noise comes from a secret
        generator made fresh for each fit.
    verbose : a progress bar on stderr (the base classifier's fit shows on it; :mod:`dpfair.utils.progress`).

    Fitted attributes: ``estimator_``, ``mixing_`` (``p[ŷ, r]``), ``noisy_counts_`` (``[ŷ, r, y]``, as released),
    ``slack_`` (per label), ``noise_multiplier_``, ``privacy_spent_``, ``privacy_ledger_``.
    """

    _private = True
    _requires_sensitive = True
    _notions = ("equalized_odds",)
    _fairness_strength = "tolerance"
    _min_per_class = 1
    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "estimator": [HasMethods("fit", "predict", what="a classifier with fit and predict"), None],
        "prefit": [Bools()],
        "tolerance": [Interval(float, 0, None, closed="left")],
        "beta": [None, Interval(float, 0, 1, closed="neither", note="None: no slack")],
    }

    def __init__(self, estimator=None, *, prefit=False, epsilon=1.0, delta=None, privacy_unit="sensitive",
                 tolerance=0.0, beta=0.05, noise_multiplier=None, accountant="pld", groups=None, classes=None,
                 secure_mode=False, random_state=None, verbose=False):
        self.estimator = estimator
        self.prefit = prefit
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.tolerance = tolerance
        self.beta = beta
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    # ---- the base classifier ---------------------------------------------------
    def _base(self):
        est = LogisticRegression(max_iter=1000) if self.estimator is None else self.estimator
        if not (hasattr(est, "predict") and hasattr(est, "fit")):
            raise ValueError(f"estimator must be a classifier with fit and predict, got {type(est).__name__}")
        return est

    def _unfitted_base(self, groups, classes):
        """A clone of the base to train here, sharing this estimator's public lists (where it takes them)."""
        est = clone(self._base())
        if isinstance(est, FairEstimator):
            est.set_params(**{k: list(v) for k, v in (("groups", groups), ("classes", classes))
                              if v is not None and k in est.get_params() and est.get_params()[k] is None})
        return est

    def _fit_base(self, X, y, s, within=None) -> list[LedgerEntry]:
        """Fit (or take) the base classifier, as a part of ``within`` (this fit's budget charge: the base is claimed
        inside it); return the ledger entries it spends on this privacy unit."""
        est = self._base()
        if self.prefit:
            try:
                check_is_fitted(est)
            except NotFittedError:
                raise ValueError("estimator is not fitted but prefit=True: fit it first, or pass "
                                 "prefit=False to train it here") from None
            self.estimator_ = est
            return []
        est = self._unfitted_base(self.groups_, self.classes_)
        reads_s = capabilities(est).requires_sensitive
        if reads_s:
            fit_part(est, within, X, self.classes_[y], sensitive_features=self.groups_[s])
        else:
            fit_part(est, within, X, self.classes_[y])
        self.estimator_ = est
        ledger = getattr(est, "privacy_ledger_", None)
        private = capabilities(est).private
        return self._base_entries(reads_s, private, None if ledger is None else ledger.relation,
                                  ledger_totals(ledger) if ledger is not None and private else {}, self.privacy_unit_)

    def _planned_base_entries(self, shape, unit: PrivacyUnit) -> list[LedgerEntry]:
        """:meth:`_fit_base`'s entries from the base's own plan (:meth:`FairEstimator.plan`), before any data."""
        if self.prefit:
            return []
        est = self._unfitted_base(shape.groups, shape.classes)
        reads_s, private = capabilities(est).requires_sensitive, capabilities(est).private
        if not isinstance(est, FairEstimator):
            return self._base_entries(reads_s, private, None, {}, unit)
        planned = est.plan(PublicShape(shape.n, shape.n_features, shape.groups, shape.classes))
        relation = (planned.unit if private else PrivacyUnit.RECORD).relation
        return self._base_entries(reads_s, private, relation, planned.expected_ledger(), unit)

    @staticmethod
    def _base_entries(reads_s: bool, private: bool, relation, totals, unit: PrivacyUnit) -> list[LedgerEntry]:
        """What the base spends on ``unit``: ``totals`` (``{(label, event): count}`` of its ledger, under ``relation``;
        ``relation`` None: a base with no ledger), by label. A base that is not private spends ε = ∞ wherever it
        counts."""
        if unit is PrivacyUnit.SENSITIVE:
            # under replace-one of s a base costs nothing unless it touches s: through sensitive_features, or
            # through s-encoding columns of X it declares and accounts itself (a sensitive-unit ledger)
            if not (reads_s or (relation is unit.relation and len(totals) > 0)):
                return []
        elif relation is None:
            return [LedgerEntry("base classifier (non-private)", dpa.NonPrivateDpEvent())]
        if relation is not unit.relation:
            raise ValueError(
                f"estimator protects neighbours under {relation.name} but this post-processing uses "
                f"privacy_unit={unit.value!r}: give the base the same privacy_unit"
            )
        if not private:
            return [LedgerEntry("base classifier (non-private)", dpa.NonPrivateDpEvent())]
        return [LedgerEntry(f"base: {label}", event, count)
                for (label, event), count in sorted(totals.items(), key=lambda item: item[0][0])]

    def _base_predictions(self, X) -> np.ndarray:
        codes, _ = encode_categories(self.estimator_.predict(X), "estimator predictions", X.shape[0],
                                     classes=self.classes_)
        return codes

    # ---- privacy ---------------------------------------------------------------
    def _privacy_plan(self, shape, base_entries: list[LedgerEntry] | None = None) -> PrivacyPlan:
        """The base's own releases on the same data (fixed parts: ``base_entries``, those of the base this fit
        trained, or else those its plan states), then the Laplace counts. Refuses a base that alone spends the
        whole ε."""
        unit = check_privacy_unit(self.privacy_unit)
        entries = self._planned_base_entries(shape, unit) if base_entries is None else base_entries
        self._check_base_budget(entries, self._fit_delta(shape.n), unit)
        labels = [e.label for e in entries]
        base = tuple(Part(label if labels.count(label) == 1 else f"{label} #{i}", mechanism="fixed", count=e.count,
                          fixed=e.event) for i, (label, e) in enumerate(zip(labels, entries)))
        return PrivacyPlan(base + (Part(COUNTS, mechanism="laplace", pure=self._laplace_pure(unit)),))

    def _check_base_budget(self, entries: list[LedgerEntry], delta: float, unit: PrivacyUnit) -> None:
        epsilon = check_epsilon(self.epsilon, budget=True)
        if not entries or math.isinf(epsilon):
            return
        events = dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(e.event, e.count) for e in entries])
        spent = epsilon_of(events, delta, unit, self.accountant)
        if spent >= epsilon:
            raise ValueError(
                f"the base estimator alone spends epsilon={spent:.4g} >= epsilon={epsilon:g} on "
                "the same data: give it a smaller epsilon, use a private base, or pass prefit=True with a base "
                "trained on other data"
            )

    # ---- fitting ---------------------------------------------------------------
    def _fit(self, ctx, X, y, s):
        k = len(self.groups_)
        plan = self._privacy_plan(ctx.shape, self._fit_base(X, y, s, ctx.charge))  # the base's actual releases, as planned
        self.noise_multiplier_ = ctx.calibrate(self._calibrated(plan, ctx.shape))[COUNTS]
        self.privacy_ledger_.extend(
            LedgerEntry(p.name, p.fixed, p.count) for p in plan.parts if p.mechanism == "fixed")

        counts = cell_counts(self._base_predictions(X), y, s, 2, 2, k).astype(np.float64)
        self.noisy_counts_ = ctx.release(COUNTS).noisy_sum(counts, bound=1.0)
        noisy = np.maximum(self.noisy_counts_, 0.0)
        # An empty or noise-emptied (group, label) cell gets an uninformative half count per prediction.
        noisy[:, noisy.sum(axis=0) < _SIZE_FLOOR] = 0.5 * _SIZE_FLOOR
        sizes = noisy.sum(axis=0)  # (k, 2)
        # a group's size: the sum of its 2 × 2 released cells, each of Laplace scale noise_multiplier_ (std √2 ×)
        warn_small_groups("DP post-processing", self.groups_, sizes.sum(axis=1),
                          noise_std=float(self.noise_multiplier_) * math.sqrt(2.0 * 4))
        self.slack_ = float(self.tolerance) + laplace_slack(self.noise_multiplier_, sizes, counts.size, self.beta)
        self.mixing_ = equalized_odds_lp(noisy, self.slack_)
        self._finish_privacy()

    def _positive_probability(self, X, s) -> np.ndarray:
        return self.mixing_[self._base_predictions(X), s]
