"""Private-demographics learning (Mozannar, Ohannessian, Srebro, *Fair Learning with Private Demographic
Data*, ICML 2020).

"Model M" of the PF-LD paper. Each person's sensitive attribute is released
once by k-ary randomized response with local DP ε:

    Z_i = s_i                                with probability π  = e^ε / (e^ε + k − 1),
    Z_i = each of the other k − 1 values     with probability π̄ = 1 / (e^ε + k − 1),

so ``P(Z = z | s = a) = T[a, z]`` with ``T = (π − π̄) I + π̄ 11ᵀ``. Then a fair
classifier is learned from (X, y, Z) by Agarwal et al.'s reductions with the
fairness constraints estimated through ``T⁻¹``: for the data at hand,
``E[1{Z_i = z}] = T[s_i, z]``, so the row ``ê_i = T⁻¹[Z_i, :]``, i.e.

    ê_i[a] = (1{Z_i = a} − π̄) / (π − π̄),

is an unbiased estimate of person i's one-hot membership ``1{s_i = a}``, and
for any public per-person quantity g_i (a prediction, a label, an error)
``Σ_i g_i ê_i[a]`` estimates ``Σ_i g_i 1{s_i = a}`` without bias. This is the
paper's correction: ``T⁻¹`` applied to the joint counts of (ŷ, y, Z) recovers
those of (ŷ, y, s) in expectation. A constraint of the reductions, e.g. for
demographic parity ``γ_a(h) = P(h = 1 | s = a) − P(h = 1)``, and for equalized
odds the same within each label, is estimated by the ratio of two such
corrected sums (numerator and denominator unbiased, the ratio consistent).
Since each ``ê_i`` sums to 1 over groups, the corrected rates still average
to the overall rate, the identity fairlearn's multiplier projection uses.

Implementation choice: the corrected constraint is a fairlearn ``Moment``
(:class:`CorrectedParity`, Agarwal et al.'s parity moment with the
indicators ``1{s_i = a}`` replaced by ``ê_i[a]``) fed to fairlearn's
``ExponentiatedGradient``, not a reductions loop of our own, so that at
ε = ∞ (``T = I``, ``ê_i`` one-hot) the method *is* fairlearn's reductions,
which :class:`~dpfair.algorithms.fairlearn_wrappers.ReductionsClassifier`
wraps. Notions: those of the reductions (the events are the notion's reference
cells, the utility its rate; the correction applies to any rate of public quantities).

Privacy (``privacy_unit="sensitive"``): k-ary randomized response is ε-LDP
(for every output the likelihood ratio of two inputs is at most π / π̄ = e^ε),
so the released vector Z is ε-DP of s under replace-one; everything after it
uses only Z and the public (X, y): post-processing. The release is recorded
as dp_accounting's ``RandomizedResponseDpEvent(p = k π̄, k)`` (keep the value
with probability 1 − p, else output a uniform value: the same channel),
whose PLD is exact except that the accountant rounds the privacy loss up to
its discretisation grid (and RDP is looser still); the local ε is calibrated
on that accountant (its plan's σ is 1/ε_local) so that the ε reported is at
most the target. The coins come from the fit's secret generator.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpfair.utils.upstream import (
    MOMENT_ALL,
    MOMENT_EVENT,
    MOMENT_GROUP_ID,
    MOMENT_LABEL,
    MOMENT_SIGN,
    Moment,
    UtilityParity,
    set_utility_parity_state,
)
from dpfair.algorithms.base import FairEstimator
from dpfair.algorithms.fairlearn_wrappers import ReductionsClassifier
from dpfair.fairness.notions import ACCURACY, Notion, get_notion
from dpfair.model_files import register_moment
from dpfair.privacy import Part, PrivacyPlan, keep_probability

RANDOMIZED_RESPONSE = "randomized response of s"


# ---- k-ary randomized response ---------------------------------------------------------------
def randomization_matrix(epsilon: float, k: int) -> np.ndarray:
    """``T[a, z] = P(Z = z | s = a)`` of k-ary randomized response with local ε."""
    pi = keep_probability(epsilon, k)
    T = np.full((k, k), (1.0 - pi) / (k - 1))
    np.fill_diagonal(T, pi)
    return T


def randomized_response_plan(k: int) -> PrivacyPlan:
    """One release: k-ary randomized response of every s (σ = 1/ε_local, see :mod:`dpfair.privacy.plan`)."""
    return PrivacyPlan((Part(RANDOMIZED_RESPONSE, mechanism="randomized_response", buckets=k),))


def corrected_membership(z: np.ndarray, k: int, epsilon: float) -> np.ndarray:
    """Rows ``T⁻¹[z_i, :]``: unbiased estimates of the one-hot memberships ``1{s_i = a}`` (shape (n, k))."""
    pi = keep_probability(epsilon, k)
    pi_bar = (1.0 - pi) / (k - 1)
    onehot = np.eye(k)[np.asarray(z, dtype=np.int64)]
    return (onehot - pi_bar) / (pi - pi_bar)


# ---- the corrected moment ----------------------------------------------------------------------
def _events(notion: Notion, y: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """0/1 matrix (n, m) of the events a notion conditions on (its reference cells; binary labels, 1 positive),
    with fairlearn's event names."""
    if not notion.conditions_on_label:
        return np.ones((len(y), 1)), [MOMENT_ALL]
    cells = notion.cell_labels(2, 1)
    reference = notion.reference_cells(y, 2, 1)
    names = [f"{MOMENT_LABEL}={'|'.join(str(v) for v in labels)}" for labels in cells]
    return np.stack([(reference == c).astype(np.float64) for c in range(len(cells))], axis=1), names


@register_moment  # a fitted estimator holds it (its reductions' constraints): model files may too
class CorrectedParity(UtilityParity):
    """Agarwal et al.'s parity moment on randomized-response attributes, memberships corrected through ``T⁻¹``.

    ``load_data(X, y, sensitive_features=z)`` takes the *released* attributes z in 0..k−1. Row i of
    fairlearn's constraint matrix becomes, for event e and group a (``E_i = 1{event of i is e}``),
    ``U_i,(+,e,a) = E_i / P(e) − E_i ê_i[a] / P̂(a, e)`` and ``U_i,(−,e,a) = −U_i,(+,e,a)``, with
    ``P̂(a, e) = (1/n) Σ_i E_i ê_i[a]``; so ``gamma`` is the corrected ``E[h | e, a] − E[h | e]``.
    With ε = ∞ it equals fairlearn's DemographicParity / EqualizedOdds / TruePositiveRateParity /
    ErrorRateParity (difference bounds only).
    """

    short_name = "CorrectedParity"

    def __init__(self, notion: str = "demographic_parity", *, n_groups: int, epsilon: float,
                 difference_bound: float = 0.01):
        super().__init__(difference_bound=difference_bound)
        self.notion = notion
        self.n_groups = n_groups
        self.epsilon = epsilon

    def load_data(self, X, y, *, sensitive_features) -> None:
        y = pd.Series(np.asarray(y, dtype=np.int64))
        z = pd.Series(np.asarray(sensitive_features, dtype=np.int64))
        Moment.load_data(self, X, y, sensitive_features=z)
        k, n = self.n_groups, len(y)
        notion = get_notion(self.notion)
        events, names = _events(notion, y.to_numpy())
        labels = y.to_numpy().astype(np.float64)
        # the utility of ŷ = 0 and ŷ = 1: the error under an accuracy rate, else the prediction (class 1)
        utilities = (np.stack([labels, 1.0 - labels], axis=1) if notion.rate == ACCURACY
                     else np.stack([np.zeros(n), np.ones(n)], axis=1))
        weights = corrected_membership(z.to_numpy(), k, self.epsilon)
        p_event = events.sum(0) / n
        p_group_event = events.T @ weights / n
        # A small group's estimated share can come out <= 0 (randomized response's noise): floor it at
        # 1/n, post-processing of the release, so that no fit fails on what the private s holds.
        p_group_event = np.maximum(p_group_event, 1.0 / n)
        cells = pd.MultiIndex.from_product([names, range(k)], names=[MOMENT_EVENT, MOMENT_GROUP_ID])
        index = pd.MultiIndex.from_product([["+", "-"], names, range(k)],
                                           names=[MOMENT_SIGN, MOMENT_EVENT, MOMENT_GROUP_ID])
        plus = (events / p_event)[:, :, None] - events[:, :, None] * weights[:, None, :] / p_group_event
        plus = plus.reshape(n, -1)
        set_utility_parity_state(self, utilities=utilities,
                                 prob_event=pd.Series(p_event, index=pd.Index(names, name=MOMENT_EVENT)),
                                 prob_group_event=pd.Series(p_group_event.ravel(), index=cells), index=index,
                                 U=pd.DataFrame(np.hstack([plus, -plus]), columns=index))


# ---- the estimator -----------------------------------------------------------------------------
class PrivateDemographicsClassifier(ReductionsClassifier):
    """Fair classifier from randomized-response sensitive attributes (Mozannar et al., 2020); ε-DP of s.

    Parameters
    ----------
    estimator : a scikit-learn classifier whose ``fit`` takes ``sample_weight`` (default: logistic regression).
    notion : "demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity" or
        "predictive_equality".
    epsilon : local DP ε of the randomized response (``inf``: s is used as is, fairlearn's reductions).
    delta : δ at which ``privacy_spent_`` is reported (``None``: 1/n²); the release is pure ε-DP.
    accountant : "pld" (exact up to its 1e-4 grid) or "rdp" (looser, so a smaller local ε).
    difference_bound, eg_eps, max_iter, nu, eta0, run_linprog_step : as in
        :class:`~dpfair.algorithms.fairlearn_wrappers.ReductionsClassifier`. The corrected constraints
        are noisier than the exact ones (the variance of ``ê_i`` grows like ``1/(π − π̄)²``), so a bound
        far below that estimation noise is met on the estimates, not certified on the true groups.
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` for the groups (s is private; y is public here).
    secure_mode : draw the coins of randomized response from the OS CSPRNG (:mod:`dpfair.privacy.samplers`).
    random_state : seeds public randomness only (the base estimator, ``predict``'s draws); the randomized
        response draws from a secret generator made fresh for each fit.
    verbose : a progress bar on stderr (:mod:`dpfair.utils.progress`).

    Fitted attributes: ``local_epsilon_`` (the ε of the randomized response actually run),
    ``randomization_matrix_`` (T), ``mitigator_`` (fairlearn's fitted ``ExponentiatedGradient``).
    """

    _private = True
    privacy_unit = "sensitive"
    _sample_weight_refusal = FairEstimator._sample_weight_refusal

    def __init__(self, estimator=None, *, notion="demographic_parity", epsilon=1.0, delta=None, accountant="pld",
                 difference_bound=0.01, eg_eps=0.01, max_iter=50, nu=None, eta0=2.0, run_linprog_step=True,
                 groups=None, classes=None, secure_mode=False, random_state=None, verbose=False):
        super().__init__(estimator, notion=notion, difference_bound=difference_bound, eg_eps=eg_eps,
                         max_iter=max_iter, nu=nu, eta0=eta0, run_linprog_step=run_linprog_step, groups=groups,
                         classes=classes, random_state=random_state, verbose=verbose)
        self.epsilon = epsilon
        self.delta = delta
        self.accountant = accountant
        self.secure_mode = secure_mode

    def _privacy_plan(self, shape) -> PrivacyPlan:
        """One randomized response of every row's s over the k public groups."""
        return randomized_response_plan(shape.need("groups", "private-demographics"))

    def _fit(self, ctx, X, y, s):
        k = len(self.groups_)
        sigma = ctx.calibrate(self.plan(ctx.shape))[RANDOMIZED_RESPONSE]
        self.local_epsilon_ = math.inf if sigma == 0 else 1.0 / sigma
        self.randomization_matrix_ = randomization_matrix(self.local_epsilon_, k)
        z = ctx.release(RANDOMIZED_RESPONSE).randomize(s, k)
        moment = CorrectedParity(self.notion, n_groups=k, epsilon=self.local_epsilon_,
                                 difference_bound=self.difference_bound)
        self._fit_reductions(X, y, z, moment, ctx.np_rng)
        self._finish_privacy()

