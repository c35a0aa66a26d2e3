"""DP oracle learner (Jagielski et al., *Differentially Private Fair Learning*, ICML 2019, Algorithm 2).

Agarwal et al.'s reductions game (*A Reductions Approach to Fair Classification*, ICML 2018) for
equalized odds, played privately. With ``γ[y, r](h) = P(h = 1 | Y = y, S = r) − P(h = 1 | Y = y)`` the
Lagrangian is ``L(h, λ) = err(h) + Σ_{y, r} (λ⁺[y, r] − λ⁻[y, r]) γ[y, r](h) − tolerance · Σ λ``, with
``λ = (λ⁺, λ⁻) ≥ 0`` and ``‖λ‖₁ ≤ B``. For T rounds:

* the **auditor** plays ``λ_t = B exp(θ_t) / (1 + Σ exp(θ_t))`` (exponentiated gradient) and, after the
  learner's move, raises ``θ`` by ``η (±γ̃(h_t) − tolerance)``, where ``γ̃`` comes from the Laplace-noised
  counts of positive predictions of ``h_t`` in every (label, group) cell;
* the **learner** best-responds to ``λ_t`` through a private cost-sensitive classification oracle: the
  exponential mechanism over a finite class H with score ``−n·L(h, λ_t)``.

The output is the uniform mixture of ``h_1..h_T``. H is built from public data only (under the
sensitive-attribute unit X and y are public): the directions of a logistic regression fitted on
(X, y) and of the top principal components of X (both signs), each with thresholds at quantiles of
its scores plus the two constant classifiers. ``sensitive_aware=False``: ``h(x) = 1[f_j(x) ≥ t]``, s is
not used at prediction. ``sensitive_aware=True`` (the paper's A-aware variant): ``h(x, s) = 1[f_j(x) ≥ t_s]``,
one threshold per group; the exponential mechanism over this product class is sampled exactly.

Privacy (``privacy_unit="sensitive"``, the paper's setting; ``"record"`` is refused because H and the
error term use X and y as public). The cell sizes ``n[y, r]`` are released once with Laplace noise
(``counts_budget`` of ε; one person moves between two cells, bound 1 under replace-one) and every
normaliser below is that release. Each round then spends:

* the exponential mechanism with ``ε₀``: the score is a sum of per-person costs
  ``1[h ≠ y]/n + h·w[y, r]`` (``w`` from ``λ_t`` and the released sizes, so public given the past), and
  changing one person's s changes it by at most ``Δ_t``, the range of that cost over the groups (and,
  A-aware, over both predictions) — computed from public quantities before the draw;
* the Laplace release of the positive counts of ``h_t`` per cell (bound 1, noise multiplier σ, ε₀ = 2/σ).

A pure ε₀-DP mechanism is dominated by binary randomized response, so the ledger records it as such;
the paper composes the 2T rounds by advanced composition, here they compose on the PLD accountant and
σ is calibrated so that the whole ledger spends at most ``epsilon``.

**Tolerance.** The auditor sees ``γ`` through the Laplace noise of the positive counts and of the cell
sizes it divides by (both public). On small cells that noise is large on a cell's rate: with
``tolerance=0`` the multipliers follow it, the learner's sensitivity ``Δ_t`` (∝ λ·n/size) grows, and the
exponential mechanism draws near-random hypotheses (what this did on german: docs/guide/benchmarks.md,
"Measurements behind defaults").
``tolerance="auto"`` is three standard deviations of that noise per cell, so that noise alone lowers the
multipliers instead; where it hides violations above 0.05 the fit warns.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from sklearn.linear_model import LogisticRegression

from dpfair.algorithms._jagielski import RandomizedGroupClassifierMixin, cell_counts
from dpfair.algorithms.base import FairEstimator
from dpfair.algorithms.signal import noise_tolerance
from dpfair.utils.constraints import Bools, Interval, Options
from dpfair.privacy import Part, PrivacyPlan, PrivacyUnit, check_privacy_unit

#: The names of the plan's parts (and of the ledger's entries).
SIZES, LEARNER, AUDITOR = "cell sizes (y, s)", "learner: exponential mechanism", "auditor: positive counts (y, s)"

#: Released cell sizes below this are raised to it before dividing by them (post-processing).
_SIZE_FLOOR = 1.0


def public_directions(X: np.ndarray, y: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Weights ``(d, J)`` and offsets ``(J,)`` of the score functions of H: logistic regression, ± principal axes."""
    lr = LogisticRegression(max_iter=1000).fit(X, y)
    mean = X.mean(axis=0)
    _, _, vt = np.linalg.svd(X - mean, full_matrices=False)
    axes = vt[:n_components].T
    W = np.column_stack([lr.coef_[0], axes, -axes])
    b = np.concatenate([lr.intercept_, -(mean @ axes), mean @ axes])
    return W, b


def score_thresholds(F: np.ndarray, n_thresholds: int) -> np.ndarray:
    """``(J, n_thresholds + 2)`` thresholds: interior quantiles of each score, and ±inf (the constants)."""
    levels = np.arange(1, n_thresholds + 1) / (n_thresholds + 1)
    inner = np.quantile(F, levels, axis=0).T
    inf = np.full((F.shape[1], 1), np.inf)
    return np.hstack([-inf, inner, inf])


def hypothesis_positives(F: np.ndarray, thresholds: np.ndarray, y, s, k: int) -> np.ndarray:
    """``positives[j, g, c, r]``: rows of label c and group r that ``1[F[:, j] ≥ thresholds[j, g]]`` labels 1."""
    cells = np.eye(2 * k)[np.asarray(y) * k + np.asarray(s)]
    return np.stack([(F[:, j, None] >= thresholds[j]).T.astype(np.float64) @ cells
                     for j in range(F.shape[1])]).reshape(F.shape[1], -1, 2, k)


def oracle_plan(n_rounds: int, counts_budget: float, pure: float | None = None) -> PrivacyPlan:
    """Everything the learner spends: the cell sizes (their share of ε), then T rounds of an exponential
    mechanism (ε₀ = 2/σ) and a Laplace release (multiplier σ), one σ for both (``pure``: see
    :class:`~dpfair.privacy.Part`)."""
    return PrivacyPlan((Part(SIZES, mechanism="laplace", share=counts_budget, pure=pure),
                        Part(LEARNER, mechanism="exponential", count=n_rounds),
                        Part(AUDITOR, mechanism="laplace", count=n_rounds, pure=pure)))


class DPOracleClassifier(RandomizedGroupClassifierMixin, FairEstimator):
    """Differentially private reductions learner for equalized odds (Jagielski et al., Alg. 2).

    Parameters
    ----------
    sensitive_aware : whether the hypotheses read s (one threshold per group; s needed at prediction).
    epsilon, delta : target budget (``delta=None``: 1/n²; ``epsilon=inf``: exact best responses, no noise).
    privacy_unit : "sensitive" only (see the module docstring).
    n_rounds : T, rounds of the game (hypotheses in the output mixture).
    bound : B, the ℓ1 bound of the multipliers λ.
    learning_rate : η, the auditor's exponentiated-gradient step.
    tolerance : allowed violation of each constraint ``|γ[y, r]| ≤ tolerance``; "auto" (default): three standard
        deviations of the noise on the auditor's estimate of each ``γ[y, r]`` (public; 0 at ε = ∞), so that
        noise alone does not drive the multipliers (fitted: ``tolerance_``, shape (2, k)); it warns when that
        hides violations above 0.05.
    counts_budget : share of ε spent on the cell sizes.
    n_components : principal axes of X whose scores (both signs) join logistic regression's in H.
    n_thresholds : thresholds per score function (plus the two constant classifiers).
    noise_multiplier : σ of the per-round Laplace release (ε₀ = 2/σ per mechanism); ``None`` calibrates it.
    accountant : "pld" (privacy loss distributions, tight; the default) or "rdp": the accountant that calibrates
        the noise and reports ``privacy_spent_``.
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` where the data are private (s; y under "record").
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks; slower).
    random_state : seeds public randomness only (``predict``'s coins); every noise draw comes from a secret
        generator made fresh for each fit.
    verbose : a progress bar on stderr over the rounds, with the ε spent so far (:mod:`dpfair.utils.progress`).
    """

    _private = True
    _requires_sensitive = True
    _notions = ("equalized_odds",)
    _fairness_strength = "tolerance"
    _units = ("sensitive",)
    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "sensitive_aware": [Bools()],
        "n_rounds": [Interval(int, 0, None, closed="neither")],
        "bound": [Interval(float, 0, None, closed="neither")],
        "learning_rate": [Interval(float, 0, None, closed="neither")],
        "tolerance": [Options("auto"), Interval(float, 0, None, closed="left")],
        "counts_budget": [Interval(float, 0, 1, closed="neither", note="the share of ε the cell sizes take")],
        "n_components": [Interval(int, 0, None, closed="left")],
        "n_thresholds": [Interval(int, 0, None, closed="neither")],
    }

    def __init__(self, sensitive_aware=False, *, epsilon=1.0, delta=None, privacy_unit="sensitive", n_rounds=10,
                 bound=1.0, learning_rate=2.0, tolerance="auto", counts_budget=0.1, n_components=4, n_thresholds=30,
                 noise_multiplier=None, accountant="pld", groups=None, classes=None, secure_mode=False,
                 random_state=None, verbose=False):
        self.sensitive_aware = sensitive_aware
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.n_rounds = n_rounds
        self.bound = bound
        self.learning_rate = learning_rate
        self.tolerance = tolerance
        self.counts_budget = counts_budget
        self.n_components = n_components
        self.n_thresholds = n_thresholds
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    def _uses_sensitive_at_prediction(self) -> bool:
        return bool(self.sensitive_aware)

    def check_hyperparameters(self) -> DPOracleClassifier:
        """The declared constraints (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), then
        the privacy unit the method guarantees."""
        super().check_hyperparameters()
        if check_privacy_unit(self.privacy_unit) is not PrivacyUnit.SENSITIVE:
            raise ValueError("DPOracleClassifier protects the sensitive attribute only (its hypothesis class and "
                             "error term use X and y as public): use privacy_unit='sensitive', or "
                             "DPPostProcessingClassifier with a record-private base for privacy_unit='record'")
        return self

    def _privacy_plan(self, shape) -> PrivacyPlan:
        """The cell sizes once, then per round the exponential mechanism and the Laplace counts (:func:`oracle_plan`)."""
        return oracle_plan(int(self.n_rounds), float(self.counts_budget),
                           self._laplace_pure(check_privacy_unit(self.privacy_unit)))

    # ---- the game ----------------------------------------------------------------
    def _fit(self, ctx, X, y, s):
        k, T = len(self.groups_), int(self.n_rounds)
        sizes = cell_counts(np.zeros_like(y), y, s, 1, 2, k)[0].T.astype(np.float64)  # (2 labels, k)
        n_components = min(int(self.n_components), X.shape[1])
        self.directions_, self.offsets_ = public_directions(X, y, n_components)
        F = X @ self.directions_ + self.offsets_
        self.thresholds_ = score_thresholds(F, int(self.n_thresholds))
        positives = hypothesis_positives(F, self.thresholds_, y, s, k)

        sigmas = ctx.calibrate(self.plan(ctx.shape))
        self.noise_multiplier_ = sigmas[AUDITOR]
        self.cell_sizes_ = np.maximum(ctx.release(SIZES).noisy_sum(sizes, bound=1.0), _SIZE_FLOOR)
        self.tolerance_ = self._tolerances(T, sigmas)
        learner, auditor = ctx.release(LEARNER), ctx.release(AUDITOR)

        theta = np.zeros((2, 2, k))
        chosen = []
        bar = ctx.progress(T, "round")
        for t in range(T):
            lam = float(self.bound) * np.exp(theta) / (1.0 + np.exp(theta).sum())
            costs = self._per_person_costs(lam[0] - lam[1], X.shape[0])  # (2 labels, k, 2 predictions)
            sensitivity = self._sensitivity(costs)
            j, g = learner.select(self._scores(positives, sizes, costs), sensitivity)
            g = np.repeat(g, k) if not self.sensitive_aware else g
            chosen.append(np.concatenate([[j], g]))
            hits = positives[j, g, :, np.arange(k)].T  # (2 labels, k)
            noisy = auditor.noisy_sum(hits, bound=1.0)
            gamma = self._violations(noisy)
            theta += float(self.learning_rate) * np.stack([gamma - self.tolerance_, -gamma - self.tolerance_])
            self.history_.append({"round": t + 1, "noisy_violation": float(np.abs(gamma).max()),
                                  "lambda_l1": float(lam.sum()), "sensitivity": sensitivity})
            bar.update()
            ctx.end_epoch(epoch=t + 1, step=t + 1, steps=T)
        self.hypotheses_ = np.array(chosen, dtype=np.int64)
        self._finish_privacy()

    def _tolerances(self, n_rounds: int, sigmas) -> np.ndarray:
        """The tolerance of every cell ``(2 labels, k)``, from public quantities only (σ's, released sizes).

        ``"auto"``: three standard deviations of the noise on the cell's rate ``ñ₁/Ñ``: Laplace noise of std
        ``√2·σ`` on the positive count and ``√2·σ_sizes`` on the size, which moves a rate (at most 1) by up to
        ``|Ñ − N|/Ñ``: ``std = √2·√(σ² + σ_sizes²)/Ñ``.
        """
        if self.tolerance != "auto":
            return np.full(self.cell_sizes_.shape, float(self.tolerance))
        noise = math.sqrt(2) * math.hypot(self.noise_multiplier_, sigmas[SIZES]) / self.cell_sizes_
        return noise_tolerance(noise, lambda worst, tolerance, std: (
            f"the DP oracle's auditor at epsilon={self.epsilon_target_:g} cannot tell a (label, group) cell's "
            f"positive rate from its label's within {tolerance:.2f}: the noise on it is {std:.3f} (std) for "
            f"{self.cell_sizes_[worst]:.0f} members over {n_rounds} rounds. Such violations lower the multipliers "
            "and the learner picks the most accurate hypotheses it can privately, as without the constraint; "
            "raise epsilon, use fewer n_rounds, or train on more rows per group"))

    def _per_person_costs(self, lam_signed: np.ndarray, n: int) -> np.ndarray:
        """``cost[c, r, b]``: one person's share of ``n·L(h, λ)`` with label c, group r, prediction b."""
        size = self.cell_sizes_
        w = lam_signed / size - (lam_signed.sum(axis=1) / size.sum(axis=1))[:, None]
        err = np.array([[0.0, 1.0], [1.0, 0.0]])  # err[c, b] = 1[b != c]
        return err[:, None, :] + n * w[:, :, None] * np.array([0.0, 1.0])

    def _sensitivity(self, costs: np.ndarray) -> float:
        """Largest change of the total score when one person (label c fixed) changes group."""
        if self.sensitive_aware:
            spread = costs.max(axis=(1, 2)) - costs.min(axis=(1, 2))
        else:
            spread = (costs.max(axis=1) - costs.min(axis=1)).max(axis=1)
        return float(spread.max())

    def _scores(self, positives: np.ndarray, sizes: np.ndarray, costs: np.ndarray) -> np.ndarray:
        """``−n·L`` of every hypothesis, per group: shape (J, k, G) (A-aware) or (J, 1, G) (summed over groups)."""
        per_group = -(positives * costs[None, None, :, :, 1]
                      + (sizes - positives) * costs[None, None, :, :, 0]).sum(axis=2)  # (J, G, k)
        per_group = per_group.transpose(0, 2, 1)
        return per_group if self.sensitive_aware else per_group.sum(axis=1, keepdims=True)

    def _violations(self, noisy_hits: np.ndarray) -> np.ndarray:
        """``γ̃[c, r] = P̃(h=1 | c, r) − P̃(h=1 | c)`` from released counts only."""
        size = self.cell_sizes_
        rate = np.clip(noisy_hits / size, 0.0, 1.0)
        overall = np.clip(noisy_hits.sum(axis=1) / size.sum(axis=1), 0.0, 1.0)
        return rate - overall[:, None]

    def _positive_probability(self, X, s) -> np.ndarray:
        F = X @ self.directions_ + self.offsets_
        votes = np.zeros(X.shape[0])
        for j, *g in self.hypotheses_:
            thr = self.thresholds_[j, np.asarray(g)[s]] if s is not None else self.thresholds_[j, g[0]]
            votes += F[:, j] >= thr
        return votes / len(self.hypotheses_)
