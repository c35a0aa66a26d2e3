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
from dpfair.algorithms.base import FairEstimator
from dpfair.capabilities import capabilities
from dpfair.privacy import LedgerEntry, Part, PrivacyPlan, PrivacyUnit, epsilon_of
from dpfair.validation import check_positive, encode_categories

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
    verbose : a progress bar on stderr (the base classifier's fit shows on it; :mod:`dpfair.progress`).

    Fitted attributes: ``estimator_``, ``mixing_`` (``p[ŷ, r]``), ``noisy_counts_`` (``[ŷ, r, y]``, as released),
    ``slack_`` (per label), ``noise_multiplier_``, ``privacy_spent_``, ``privacy_ledger_``.
    """

    _private = True
    _requires_sensitive = True
    _notions = ("equalized_odds",)
    _fairness_strength = "tolerance"
    _min_per_class = 1

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

    def _fit_base(self, X, y, s) -> list[LedgerEntry]:
        """Fit (or take) the base classifier; return the ledger entries it spends on this privacy unit."""
        est = self._base()
        if self.prefit:
            try:
                check_is_fitted(est)
            except NotFittedError:
                raise ValueError("estimator is not fitted but prefit=True: fit it first, or pass "
                                 "prefit=False to train it here") from None
            self.estimator_ = est
            return []
        est = clone(est)
        reads_s = capabilities(est).requires_sensitive
        if isinstance(est, FairEstimator):  # the base shares this estimator's public lists
            est.set_params(**{k: list(v) for k, v in (("groups", self.groups_), ("classes", self.classes_))
                              if k in est.get_params() and est.get_params()[k] is None})
        if reads_s:
            est.fit(X, self.classes_[y], sensitive_features=self.groups_[s])
        else:
            est.fit(X, self.classes_[y])
        self.estimator_ = est
        ledger = getattr(est, "privacy_ledger_", None)
        if self.privacy_unit_ is PrivacyUnit.SENSITIVE:
            # under replace-one of s a base costs nothing unless it touches s: through sensitive_features, or
            # through s-encoding columns of X it declares and accounts itself (a sensitive-unit ledger)
            declared = ledger is not None and len(ledger) > 0 and ledger.relation is self.privacy_unit_.relation
            if not (reads_s or declared):
                return []
        elif ledger is None:
            return [LedgerEntry("base classifier (non-private)", dpa.NonPrivateDpEvent())]
        if ledger.relation is not self.privacy_unit_.relation:
            raise ValueError(
                f"estimator protects neighbours under {ledger.relation.name} but this post-processing uses "
                f"privacy_unit={self.privacy_unit_.value!r}: give the base the same privacy_unit"
            )
        return [LedgerEntry(f"base: {e.label}", e.event, e.count) for e in ledger.entries]

    def _base_predictions(self, X) -> np.ndarray:
        codes, _ = encode_categories(self.estimator_.predict(X), "estimator predictions", X.shape[0],
                                     classes=self.classes_)
        return codes

    # ---- privacy ---------------------------------------------------------------
    def _postprocess_plan(self) -> PrivacyPlan:
        """The base's own releases on the same data (fixed), then the Laplace counts."""
        labels = [e.label for e in self._base_entries]
        base = tuple(Part(label if labels.count(label) == 1 else f"{label} #{i}", mechanism="fixed", count=e.count,
                          fixed=e.event) for i, (label, e) in enumerate(zip(labels, self._base_entries)))
        return PrivacyPlan(base + (Part(COUNTS, mechanism="laplace", pure=self._laplace_pure()),))

    def _check_base_budget(self) -> None:
        if not self._base_entries or math.isinf(self.epsilon_target_):
            return
        events = dpa.ComposedDpEvent([dpa.SelfComposedDpEvent(e.event, e.count) for e in self._base_entries])
        spent = epsilon_of(events, self.delta_, self.privacy_unit_, self.accountant)
        if spent >= self.epsilon_target_:
            raise ValueError(
                f"the base estimator alone spends epsilon={spent:.4g} >= epsilon={self.epsilon_target_:g} on "
                "the same data: give it a smaller epsilon, use a private base, or pass prefit=True with a base "
                "trained on other data"
            )

    # ---- fitting ---------------------------------------------------------------
    def _fit(self, X, y, s):
        k = len(self.groups_)
        check_positive(self.tolerance, "tolerance", allow_zero=True)
        if self.beta is not None and not (isinstance(self.beta, (int, float)) and 0.0 < self.beta < 1.0):
            raise ValueError(f"beta must lie in (0, 1) or be None (no slack), got {self.beta!r}")

        self._base_entries = self._fit_base(X, y, s)
        self._check_base_budget()
        plan = self._postprocess_plan()
        self.noise_multiplier_ = self._calibrate(plan)[COUNTS]
        self.privacy_ledger_.extend(
            LedgerEntry(p.name, p.fixed, p.count) for p in plan.parts if p.mechanism == "fixed")

        counts = cell_counts(self._base_predictions(X), y, s, 2, 2, k).astype(np.float64)
        self.noisy_counts_ = self._release(COUNTS).noisy_sum(counts, bound=1.0)
        noisy = np.maximum(self.noisy_counts_, 0.0)
        # An empty or noise-emptied (group, label) cell gets an uninformative half count per prediction.
        noisy[:, noisy.sum(axis=0) < _SIZE_FLOOR] = 0.5 * _SIZE_FLOOR
        sizes = noisy.sum(axis=0)  # (k, 2)
        self.slack_ = float(self.tolerance) + laplace_slack(self.noise_multiplier_, sizes, counts.size, self.beta)
        self.mixing_ = equalized_odds_lp(noisy, self.slack_)
        self._finish_privacy()

    def _positive_probability(self, X, s) -> np.ndarray:
        return self.mixing_[self._base_predictions(X), s]
