"""A closed-form private estimator for the private search's tests: :class:`StubClassifier`.

The search's contract (its settings, its runs, its accounting, its budget, its choice) does not depend on how
an estimator trains, so its tests run on this stub, whose fit takes milliseconds; one end-to-end search per real
method checks the rest (``tests/selection/test_search_end_to_end.py``, ``slow``).

**The model.** Rows are bounded to norm ≤ 1 (``x̃ = x · min(1, 1/‖x‖)``, a per-row public map, applied in
``predict`` too). Each row contributes ``φ(x, y, s) = e_(s, y) ⊗ (x̃, 1)/√2``: its (group, class) cell holds the
row and a one, so ``‖φ‖ ≤ 1``. The fit releases ``T = Σ φ + N(0, σ²·b²·I)`` (``rounds`` independent releases,
averaged), the cells' counts ``m = √2·T[..., -1]`` (floored at 1) and sums ``√2·T[..., :-1]``. The classes'
centroids pool the groups' with the group shares ``p`` (``group_proportions`` if given, else the released group
counts' shares): ``μ_c = Σ_g p_g · sum_gc / m_gc``; the score is the nearest-centroid rule ``w·x̃ + b``,
``w = μ_1 − μ_0``, ``b = −w·(μ_1 + μ_0)/2``, with the fairness projection: ``P`` projects on the span of the
groups' centroid differences (demographic parity: of all their rows; equalized odds: averaged over the classes),
and ``w_λ = w − λ/(1 + λ) · P w``. λ = 0 is the accurate rule; as λ grows the score stops reading the
directions that tell the groups apart, so its parity gap shrinks while its error grows.

**Privacy.** One row moves ``Σ φ`` by ``‖φ‖ ≤ 1`` under add/remove (``privacy_unit="record"``); under
replace-one of s (``"sensitive"``) φ moves between two cells of one class, a distance ≤ √2, radius √2/2: the
bound convention of :mod:`dpfair.privacy.units` (bound ``b`` = 1, resp. √2/2). The group counts (released only
when ``group_proportions`` is None) are a one-hot vector per row: the same bounds. Every release goes through
the fit context (``ctx.release``) on the plan ``ctx.calibrate`` adopted; the rest is post-processing. With
``target_error`` (sensitive unit only: x and y public), λ follows "training error ≤ target" after the release by
multiplicative dual steps on the public rows (post-processing, no privacy cost), as DP-FERMI's λ does.

The test-only knob ``min_epsilon`` makes the plan refuse a smaller ε, as a method whose calibration cannot reach
a small ε does.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from scipy.special import expit

from dpfair.algorithms.base import FairEstimator
from dpfair.privacy import Part, PrivacyPlan, PrivacyUnit, check_privacy_unit
from dpfair.utils.constraints import Interval, Listing, Options

#: The plan's parts (and the ledger's labels).
SUMS, COUNTS = "stub cell sums", "stub group counts"

#: The share of ε the group counts take when the stub releases them; dual steps of λ under ``target_error``.
COUNTS_SHARE, LAM_STEPS, LAM_RATE, LAM_MAX = 0.1, 8, 4.0, 1e3


def bound_rows(X) -> np.ndarray:
    """Rows scaled to norm ≤ 1: a per-row map, public."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.minimum(1.0, 1.0 / np.maximum(norms, np.finfo(np.float64).tiny))


def _projection(directions: np.ndarray) -> np.ndarray:
    """The orthogonal projection on the span of the rows of ``directions``."""
    q, r = np.linalg.qr(directions.T)
    keep = np.abs(np.diag(r)) > 1e-12 if r.size else np.zeros(0, dtype=bool)
    q = q[:, keep]
    return q @ q.T


class StubClassifier(FairEstimator):
    """A noisy nearest-centroid rule with a fairness projection, one Gaussian release (module docstring).

    Parameters
    ----------
    epsilon, delta, privacy_unit, accountant, noise_multiplier, secure_mode, groups, classes, random_state,
    verbose : as every private dpfair estimator's.
    notion : "demographic_parity" or "equalized_odds": which groups' centroid differences λ projects out.
    lam : λ ≥ 0, the projection's strength λ/(1 + λ).
    rounds : how many times the cell sums are released (and averaged): it changes the plan.
    group_proportions : public group shares (per cell and group: their mean over the cells); ``None``: the stub
        releases the group counts (a tenth of ε).
    target_error : λ follows "training error ≤ target_error" (sensitive unit only); ``None``: λ fixed.
    model : the name a private search reads to choose its held-out share and its public reference's model
        ("logistic": a linear rule, which this stub is; "mlp": declared large, the stub stays linear).
    min_epsilon : the plan refuses a smaller ε (a test's stand-in for a method that cannot reach it).
    """

    _private = True
    _requires_sensitive = True
    _binary_only = True
    _notions = ("demographic_parity", "equalized_odds")
    _fairness_strength = "lam"
    _target_error = True
    _public_group_shares = True

    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "notion": [Options(*_notions)],
        "lam": [Interval(float, 0, None, closed="left")],
        "rounds": [Interval(int, 1, None, closed="left")],
        "group_proportions": [None, Listing("a list of group shares")],
        "target_error": [None, Interval(float, 0, 1, closed="neither")],
        "model": [Options("logistic", "mlp")],
        "min_epsilon": [Interval(float, 0, None, closed="left")],
    }

    def __init__(self, *, epsilon=1.0, delta=None, privacy_unit="sensitive", notion="demographic_parity", lam=0.0,
                 rounds=1, group_proportions=None, target_error=None, model="logistic", min_epsilon=0.0,
                 noise_multiplier=None, accountant="pld", groups=None, classes=None, secure_mode=False,
                 random_state=None, verbose=False):
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.notion = notion
        self.lam = lam
        self.rounds = rounds
        self.group_proportions = group_proportions
        self.target_error = target_error
        self.model = model
        self.min_epsilon = min_epsilon
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    def check_hyperparameters(self) -> StubClassifier:
        """The declared constraints, then: a target error needs public x and y (the sensitive unit)."""
        super().check_hyperparameters()
        if self.target_error is not None and check_privacy_unit(self.privacy_unit) is not PrivacyUnit.SENSITIVE:
            raise ValueError("target_error reads the training error, public only under privacy_unit='sensitive'")
        return self

    # ---- privacy -------------------------------------------------------------------------------
    def _privacy_plan(self, shape) -> PrivacyPlan:
        """The group counts (unless ``group_proportions`` is given, at a tenth of ε) and ``rounds`` cell sums."""
        if float(self.epsilon) < float(self.min_epsilon):
            raise ValueError(f"epsilon={float(self.epsilon):.3g} is too small for the stub (min_epsilon="
                             f"{self.min_epsilon})")
        parts = () if self.group_proportions is not None else (Part(COUNTS, share=COUNTS_SHARE),)
        return PrivacyPlan((*parts, Part(SUMS, count=int(self.rounds))))

    def _bound(self) -> float:
        return 1.0 if self.privacy_unit_ is PrivacyUnit.RECORD else math.sqrt(2.0) / 2.0

    # ---- fitting -------------------------------------------------------------------------------
    def _fit(self, ctx, X, y, s):
        ctx.calibrate(self.plan(ctx.shape))
        k, d, bound = len(self.groups_), X.shape[1], self._bound()
        Xb = bound_rows(X)
        if self.group_proportions is None:
            noisy = ctx.release(COUNTS).noisy_sum(np.bincount(s, minlength=k).astype(np.float64), bound=bound)
            shares = np.maximum(noisy, 1.0)
        else:
            shares = np.asarray(self.group_proportions, dtype=np.float64)  # per group, or per cell and group
            shares = shares.mean(axis=0) if shares.ndim == 2 else shares
        shares = shares / shares.sum()
        phi = np.zeros((k, 2, d + 1))
        np.add.at(phi, (s, y), np.hstack([Xb, np.ones((len(y), 1))]) / math.sqrt(2.0))
        release = ctx.release(SUMS)
        T = np.mean([release.noisy_sum(phi, bound=bound) for _ in range(int(self.rounds))], axis=0) * math.sqrt(2.0)
        counts, sums = np.maximum(T[..., -1], 1.0), T[..., :-1]
        cell_means = sums / counts[..., None]  # (groups, classes, d)
        centroids = np.einsum("g,gcd->cd", shares, cell_means)
        if self.notion == "demographic_parity":
            group_means = sums.sum(axis=1) / counts.sum(axis=1)[:, None]
        else:
            group_means = cell_means.mean(axis=1)
        self.centroids_ = centroids
        self.fairness_projection_ = _projection(group_means[1:] - group_means[0])
        lam = float(self.lam)
        if self.target_error is None:
            self.history_.append({"epoch": 1, "lam": lam})
        else:  # dual steps on the public training error (post-processing under the sensitive unit)
            for step in range(LAM_STEPS):
                self.lam_ = lam
                error = float(np.mean(self._decide(Xb) != y))
                lam = min(lam * math.exp(max(-1.0, min(1.0, LAM_RATE * (float(self.target_error) - error)))), LAM_MAX)
                self.history_.append({"epoch": step + 1, "lam": lam, "error": error})
        self.lam_ = lam
        self._finish_privacy()

    # ---- prediction ----------------------------------------------------------------------------
    def _weights(self) -> tuple[np.ndarray, float]:
        mu0, mu1 = self.centroids_
        w = mu1 - mu0
        w = w - self.lam_ / (1.0 + self.lam_) * (self.fairness_projection_ @ w)
        return w, -float(w @ (mu1 + mu0)) / 2.0

    def _decide(self, Xb) -> np.ndarray:
        w, b = self._weights()
        return (Xb @ w + b > 0).astype(np.int64)

    def _predict_proba(self, X) -> np.ndarray:
        w, b = self._weights()
        p1 = expit(8.0 * (bound_rows(X) @ w + b))
        return np.column_stack([1.0 - p1, p1])
