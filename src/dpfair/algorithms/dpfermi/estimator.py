"""DP-FERMI (Lowy, Gupta, Razaviyayn, *Stochastic Differentially Private and Fair Learning*, ICLR 2023).

Fair ERM with the ERMI regulariser, ``min_θ L(θ) + λ ERMI(ŷ_θ; s)``, written
as ``min_θ max_W (1/n) Σ_i [ℓ_i(θ) + λ ψ̂_i(θ, W)]`` (Theorem C.1, see
:mod:`dpfair.fairness.ermi_minmax`) and solved by Algorithm 1: noisy
stochastic gradient descent in θ, noisy stochastic gradient ascent in W with
projection onto the Frobenius ball of radius ``w_radius``, two step sizes, the
last iterate returned (or, by default, the average of the last half of the θ
iterates). Algorithm 1's loop is written once, :func:`dpfair.algorithms.dpfermi.loop.train`, for one fit
and for the batched grids of :meth:`DPFERMIClassifier.fit_many` (:mod:`dpfair.algorithms.dpfermi.grid`); its
step's sums come from a backend: the fast ones of :mod:`dpfair.algorithms.dpfermi.batched` (logistic models
take a closed-form path, any other module ``torch.func``), tested step by step equal to the step as the paper
states it, :class:`dpfair.algorithms.dpfermi.reference.Reference`.

Privacy (``privacy_unit="sensitive"``, neighbours differ in one person's s):
each step draws a secret Poisson batch B (rate q) and releases, as ONE
Gaussian event, the sums over B of the parts of the θ- and W-gradients that
carry s: the per-sample gradient of ``2λ u_iᵀF_i(θ)`` (``u_i = W_{s_i}/√p_{s_i}``)
clipped to ``max_grad_norm``, and ``2 P^{-1/2} s_i F_iᵀ``, whose norm is at most
``2/√p_min`` by its closed form. Both are scaled to norm ≤ 1/√2 so that the
pair has norm ≤ 1 and one noise multiplier σ covers it (dp_accounting's
``REPLACE_ONE`` bound: each person's contribution within the bound of 0).
The parts of the gradients that depend on (x, y) only are public; they are
estimated on an independent minibatch, never on B, because adding them over
B would reveal who is in B and void the subsampling argument. The group
proportions ``p`` (per label for equalized odds) are either passed in as
public knowledge or released once as Gaussian-noised counts with a share of
the budget; everything that uses them (``p_min``, the W bound, the default
W radius) is post-processing. All releases compose on one PLD accountant and
σ is calibrated on the whole plan.

``privacy_unit="record"``: neighbours add or remove a record; the whole
per-sample θ-gradient of ``ℓ_i + λψ̂_i`` is clipped, the whole W-gradient is
bounded by ``2·w_radius + 2/√p_min``, and both are released on B.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

import dpfair.algorithms.dpfermi.loop as loop
from dpfair.algorithms.base import TorchClassifier
from dpfair.algorithms.dpfermi.data import COUNTS, STEP, FermiData, FermiHyperParameters, FermiModels, FermiSchedule
from dpfair.algorithms.dpfermi.grid import GridFit, fit_grid, grid_points
from dpfair.algorithms.dpfermi.models import LinearModels, ModuleModel
from dpfair.algorithms.dpfermi.reference import Reference
from dpfair.algorithms.fit_context import FitContext, FitPlan, PublicShape
from dpfair.algorithms.signal import count_floor, floor_counts, warn_if_too_few_records, warn_small_groups
from dpfair.utils.constraints import Interval, Listing, Options
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.fairness.notions import get_notion
from dpfair.nn import LogisticRegression
from dpfair.privacy import Part, PrivacyPlan, PrivacyUnit, SecretRandom, check_privacy_unit
from dpfair.utils.validation import check_group_proportions

#: The notions DP-FERMI targets: ERMI within each reference cell of the notion's partition.
NOTIONS = ("demographic_parity", "equalized_odds", "equal_opportunity", "predictive_equality")
CALIBRATIONS = ("accountant", "paper")

#: ``batch_size="auto"``: n / AUTO_STEPS rows (about that many steps an epoch), within these bounds.
AUTO_STEPS, AUTO_BATCH_MIN, AUTO_BATCH_MAX = 8, 64, 1024

#: ``max_grad_norm="auto"`` under the sensitive unit: n / AUTO_CLIP_ROWS, within these bounds.
AUTO_CLIP_ROWS, AUTO_CLIP_MIN, AUTO_CLIP_MAX = 3000, 0.25, 1.0


def auto_batch_size(n: int) -> int:
    """``batch_size="auto"``: n/8 rows, at least 64 and at most 1024 (the paper's batch); a function of n alone.

    A fixed batch of 1024 gives a small data set one full-batch step an epoch (german's 750 rows: 50
    steps in all, too few to converge; measured: docs/guide/benchmarks.md, "Measurements behind
    defaults"); n/8 keeps at least 8 steps an epoch, and the floor keeps enough rows a step for the noise
    on the averaged gradient to stay below its largest norm (see ``_check_signal``).
    """
    return int(min(AUTO_BATCH_MAX, max(AUTO_BATCH_MIN, n // AUTO_STEPS)))


def auto_max_grad_norm(n: int, unit: PrivacyUnit) -> float:
    """``max_grad_norm="auto"``: 1 under the record unit (the whole per-sample gradient is clipped, as DP-SGD
    does); under the sensitive unit n/3000 between 0.25 and 1, a function of n alone.

    Under the sensitive unit C clips only the s-carrying θ-gradient ``2λ u_iᵀ∇F_i``, whose noise
    (std ∝ C) lands on the averaged θ with weight ∝ 1/n while the loss gradient is exact. On small data
    C = 1 sets the noise for contributions far larger than the actual ones, which a smaller C clips
    little; from 3,000 rows on the noise is small and C = 1 clips little (the norms and parity gaps that
    set these bounds: docs/guide/benchmarks.md, "Measurements behind defaults").
    The bound does not scale with λ (a grid over λ shares one schedule): a large λ on small data clips
    more of its own fairness gradient, hence the floor; pass a larger ``max_grad_norm`` for such λ.
    """
    if unit is PrivacyUnit.RECORD:
        return 1.0
    return min(AUTO_CLIP_MAX, max(AUTO_CLIP_MIN, n / AUTO_CLIP_ROWS))


def counts_bound(unit: PrivacyUnit) -> float:
    """Bound of one person's one-hot count cell: replace-one moves it between two cells (radius √2/2)."""
    return math.sqrt(2) / 2 if unit is PrivacyUnit.SENSITIVE else 1.0


def dpfermi_plan(sampling_probability: float, n_steps: int, counts_share: float | None) -> PrivacyPlan:
    """Everything a fit releases: the group counts (``counts_share`` of ε, unless public) and the steps.

    The counts' σ is calibrated alone on its share; the steps' σ is then searched on
    the composed plan (counts + all steps), so the total is ≤ ε on the accountant.
    """
    steps = Part(STEP, count=n_steps, sampling_probability=sampling_probability)
    return PrivacyPlan((steps,) if counts_share is None else (Part(COUNTS, share=counts_share), steps))


def paper_noise(n: int, n_steps: int, epsilon: float, delta: float, p_min: float, lipschitz: float,
                max_grad_norm: float) -> tuple[float, float]:
    """Theorem 3.3's closed-form noise stds on the *averaged* θ- and W-gradients, as we read it.

    ``σ_θ² = 16 (L·C)² T log(1/δ) / (ε² n² ρ)`` and ``σ_W² = 16 T log(1/δ) / (ε² n² ρ)``
    with ρ = p_min, L the loss's assumed Lipschitz constant and C the clipping
    bound. On adult (n ≈ 33,900, T = 6,625, δ = 1/n², ρ ≈ 0.325, L = C = 5)
    this gives σ_θ ≈ 1.92 on the averaged gradient.
    """
    base = 16.0 * n_steps * math.log(1.0 / delta) / (epsilon**2 * n**2 * p_min)
    return lipschitz * max_grad_norm * math.sqrt(base), math.sqrt(base)


def noise_scales(noise_multiplier: float, max_grad_norm: float, w_bound: float) -> tuple[float, float]:
    """Noise std on the θ and W sums for one Gaussian event of multiplier σ (bound 1).

    Each part is scaled to norm ≤ 1/√2 (θ by ``√2·C``, W by ``√2·w_bound``) so a
    person's pair has norm ≤ 1: the noise stds are ``σ√2·C`` and ``σ√2·w_bound``.
    """
    return noise_multiplier * math.sqrt(2) * max_grad_norm, noise_multiplier * math.sqrt(2) * w_bound


def effective_noise_multiplier(noise_theta: float, noise_w: float, max_grad_norm: float, w_bound: float) -> float:
    """The multiplier of one Gaussian event (bound 1) that releasing θ and W sums with these stds is.

    Dividing each sum by its std gives unit noise and a per-person contribution of
    norm ``√((C/σ_θ)² + (B_W/σ_W)²)``; its inverse is the event's multiplier.
    """
    if noise_theta == 0 or noise_w == 0:
        return 0.0
    return 1.0 / math.sqrt((max_grad_norm / noise_theta) ** 2 + (w_bound / noise_w) ** 2)


@dataclass
class _Prepared:
    """One estimator's state between its preparation and the (possibly shared) training loop."""

    data: FermiData
    hp: FermiHyperParameters  #: the model's step: its schedule, λ, step sizes, W radius, noise stds
    model: torch.nn.Module
    inv_sqrt_p: torch.Tensor  #: P_s^{-1/2} per W block ``(m, k)``
    sampler: SecretRandom  #: the secret Poisson batches (shared by the models of a seed group)
    public_generator: torch.Generator  #: the public minibatch order
    ctx: FitContext  #: the model's fit (its release session, ledger, bar): passed down, never looked up


class DPFERMIClassifier(TorchClassifier):
    """Differentially private fair classifier (DP-FERMI, Lowy et al. 2023, Algorithm 1).

    Parameters
    ----------
    model : "logistic", "mlp", "cnn" or a ``torch.nn.Module`` returning logits.
    notion : "demographic_parity", "equalized_odds", "equal_opportunity" or "predictive_equality" (the last two:
        binary labels).
    lam : λ ≥ 0, weight of the ERMI regulariser (0: DP-SGD-like ERM).
    epsilon, delta : target budget (``delta=None``: 1/n²; ``epsilon=inf``: no noise).
    privacy_unit : "sensitive" (DP of s, the paper's setting) or "record" (a fit calibrated to ε there warns, as
        DP-SGD does, when √(p·ln(1/δ))/(n·ε) > 0.02: :func:`~dpfair.algorithms.signal.warn_if_too_few_records`).
    group_proportions : public group proportions (k,) — or (l, k) for equalized odds, one row per label —
        used instead of releasing them; ``None`` releases them with ``proportions_budget`` of ε.
    proportions_budget : share of ε spent on the group counts when they are released.
    batch_size : expected Poisson batch size; "auto" (default): n/8 rows, between 64 and 1024 (fitted:
        ``batch_size_``), so that a small data set still takes 8 steps an epoch.
    epochs : passes over the data (the number of steps is ``ceil(epochs · n / batch_size)``).
    learning_rate, w_learning_rate : step sizes of the θ descent and of the W ascent.
    w_radius : radius of the Frobenius ball W is projected on (``None``: √(l / p_min), which contains W*).
    max_grad_norm : clipping bound C of the per-sample θ contributions; "auto" (default): 1 under the record
        unit, n/3000 between 0.25 and 1 under the sensitive unit (fitted: ``max_grad_norm_``), so that on small
        data the noise it sets does not swamp the fairness gradient (see :func:`auto_max_grad_norm`).
    target_error : ``None`` (default: λ = ``lam`` throughout) or a training error in (0, 1) that λ follows:
        after each epoch ``λ ← λ·exp(lam_rate·(target_error − e))`` (at most a factor e an epoch, at most 1e4),
        ``e`` the current iterate's error on the training rows (dual ascent on "error ≤ target_error", λ the
        multiplier of the fairness term; ``lam`` is where it starts; fitted: ``lam_``, per epoch in
        ``history_``). Sensitive unit only: there x and y are public, so the error of a released iterate is
        post-processing and costs no privacy; under the record unit pick λ with :func:`dpfair.selection.tune`.
        ``dpfair tune`` uses it to reach "error ≤ reference + X".
    lam_rate : the dual step size of ``target_error`` (per unit of error gap and epoch).
    tail_average : the returned θ is the average of the iterates of this last fraction of the steps
        (0: the last iterate, as Algorithm 1). Averaging released iterates is post-processing (free of
        privacy cost) and cancels much of the noise (the default's effect on adult: docs/guide/benchmarks.md).
    calibration : "accountant" (σ searched on the PLD/RDP accountant, the default) or "paper"
        (Theorem 3.3's closed form with Lipschitz constant ``paper_lipschitz``; warns, and
        ``privacy_spent_`` reports what our accountant measures for that noise).
    paper_lipschitz : L, the loss's Lipschitz constant in Theorem 3.3's closed form (``calibration="paper"`` only).
    noise_multiplier : a fixed σ instead of calibration (``privacy_spent_`` reports its ε).
    accountant : "pld" (privacy loss distributions, tight; the default) or "rdp": the accountant that calibrates
        the noise and reports ``privacy_spent_``.
    model_kwargs : keyword arguments of :func:`dpfair.nn.make_model` for a named model (e.g. ``hidden=(64, 64)``).
    device : "cpu" (default), "cuda", "cuda:N" or "auto" (CUDA when available).
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` where the data are private (s; y under "record").
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks; slower).
    random_state : seeds public randomness only (initialisation, public minibatch order); Poisson batches
        and every noise draw come from a secret generator made fresh for each fit.
    verbose : a progress bar on stderr over the steps, with the ε spent so far (:mod:`dpfair.utils.progress`).
    """

    _private = True
    _requires_sensitive = True
    _notions = NOTIONS
    _fairness_strength = "lam"
    _batched_grid = True  # fit_many trains a grid batched
    _target_error = True
    _public_group_shares = True
    parameter_constraints: ClassVar[dict] = {
        **TorchClassifier.parameter_constraints,
        "notion": [Options(*NOTIONS)],
        "lam": [Interval(float, 0, None, closed="left", note="0: no fairness term")],
        "group_proportions": [None, Listing("the public group shares, shape (k,) or (l, k)")],
        "proportions_budget": [Interval(float, 0, 1, closed="neither", note="the share of ε the group counts take")],
        "batch_size": [Options("auto"), Interval(int, 0, None, closed="neither")],
        "w_learning_rate": [Interval(float, 0, None, closed="neither")],
        "w_radius": [None, Interval(float, 0, None, closed="neither")],
        "max_grad_norm": [Options("auto"), Interval(float, 0, None, closed="neither")],
        "tail_average": [Interval(float, 0, 1, closed="left", note="0: the last iterate")],
        "target_error": [None, Interval(float, 0, 1, closed="neither")],
        "lam_rate": [Interval(float, 0, None, closed="neither")],
        "calibration": [Options(*CALIBRATIONS)],
        "paper_lipschitz": [Interval(float, 0, None, closed="neither")],
    }

    def __init__(self, model="logistic", *, notion="demographic_parity", lam=1.0, epsilon=1.0, delta=None,
                 privacy_unit="sensitive", group_proportions=None, proportions_budget=0.05, batch_size="auto",
                 epochs=50, learning_rate=0.5, w_learning_rate=0.02, w_radius=None, max_grad_norm="auto",
                 tail_average=0.5, target_error=None, lam_rate=20.0, calibration="accountant", paper_lipschitz=5.0,
                 noise_multiplier=None, accountant="pld", model_kwargs=None, device="cpu", groups=None, classes=None,
                 secure_mode=False, random_state=None, verbose=False):
        self.model = model
        self.notion = notion
        self.lam = lam
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.group_proportions = group_proportions
        self.proportions_budget = proportions_budget
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.w_learning_rate = w_learning_rate
        self.w_radius = w_radius
        self.max_grad_norm = max_grad_norm
        self.tail_average = tail_average
        self.target_error = target_error
        self.lam_rate = lam_rate
        self.calibration = calibration
        self.paper_lipschitz = paper_lipschitz
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.model_kwargs = model_kwargs
        self.device = device
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    # ---- structure of the constraint -------------------------------------
    def _cells(self, y: np.ndarray) -> tuple[np.ndarray, int]:
        """Which W each sample uses (−1: none) and how many Ws: the notion's reference cells (class 1 positive),
        1 (DP, EOp, predictive equality) or l (EO)."""
        return get_notion(self.notion).cells(y, len(self.classes_))

    def fairness_target(self) -> dict:
        """The notion and λ; with a ``target_error``, that error too and the λ the fit ended at (``lam_``)."""
        target = super().fairness_target()
        if self.target_error is not None:
            target["target_error"] = self.target_error
            if hasattr(self, "lam_"):
                target["lam"] = self.lam_
        return target

    def check_hyperparameters(self) -> DPFERMIClassifier:
        """The declared constraints (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), then
        what ties ``target_error`` to the privacy unit and to ``lam``."""
        super().check_hyperparameters()
        if self.target_error is not None:
            self._check_target_error()
        return self

    def _check_target_error(self):
        if check_privacy_unit(self.privacy_unit) is not PrivacyUnit.SENSITIVE:
            raise ValueError("target_error adapts λ to the training error, which is public only under "
                             "privacy_unit='sensitive' (x and y known); under 'record' the error is private: pick λ "
                             "with dpfair.selection.tune (or dpfair tune), whose search is accounted")
        if self.lam <= 0:
            raise ValueError(f"target_error multiplies λ by the error gap, so it must start above 0, got lam="
                             f"{self.lam!r}; start from lam=1.0 (the default)")

    # ---- group proportions: public or released ---------------------------
    def _public_proportions(self, m: int, k: int) -> np.ndarray:
        return check_group_proportions(self.group_proportions, m, k, self.notion)

    def _release_proportions(self, ctx: FitContext, cells, s, m, k) -> np.ndarray:
        active = cells >= 0
        counts = np.bincount(cells[active] * k + s[active], minlength=m * k).reshape(m, k).astype(np.float64)
        bound = counts_bound(self.privacy_unit_)
        noisy = ctx.release(COUNTS).noisy_sum(counts, bound=bound)
        # floored (post-processing) so that noise cannot make a group look tiny and inflate the W bound 2/√p_min
        # (german's 750 rows at 5 % of ε = 1: count noise std ≈ 70 against equalized-odds cells of ~70 people)
        noisy = floor_counts(noisy, ctx.sigmas[COUNTS] * bound)
        self.group_counts_ = noisy  # released (cell × group), floored: post-processing
        return noisy / noisy.sum(1, keepdims=True)

    # ---- privacy plan ------------------------------------------------------
    @staticmethod
    def _step_epsilon(fit_plan: FitPlan, sigma: float) -> float:
        """ε of the whole plan with the steps' multiplier set to ``sigma``."""
        return fit_plan.plan.epsilon({**fit_plan.sigmas, STEP: sigma}, fit_plan.delta, fit_plan.unit,
                                     fit_plan.accountant)

    def _privacy_plan(self, shape: PublicShape) -> PrivacyPlan:
        """The group counts (unless public) and the steps, from ``n`` and the hyper-parameters (:func:`dpfermi_plan`)."""
        q = min(1.0, self._batch_size(shape.n) / shape.n)
        return dpfermi_plan(q, math.ceil(self.epochs / q),
                            None if self.group_proportions is not None else float(self.proportions_budget))

    def _batch_size(self, n: int) -> int:
        return auto_batch_size(n) if self.batch_size == "auto" else int(self.batch_size)

    def plan(self, n, n_features=None, **kwargs) -> FitPlan:
        """:meth:`~dpfair.algorithms.base.FairEstimator.plan`, refusing (as the fit does, before any release) a
        budget too small for the steps' signal (:meth:`_check_signal`)."""
        fit_plan = super().plan(n, n_features, **kwargs)
        if self.calibration != "paper":
            self._check_signal(fit_plan, n.n if isinstance(n, PublicShape) else int(n))
        return fit_plan

    def _noise(self, ctx: FitContext, n: int, p_min: float, w_bound: float) -> tuple[float, float, float]:
        """``(σ_event, std on the θ sum, std on the W sum)`` for the chosen calibration."""
        C = self.max_grad_norm_
        if self.calibration == "paper" and self.noise_multiplier is None and not math.isinf(self.epsilon_target_):
            expected = self.sampling_probability_ * n
            s_theta, s_w = paper_noise(n, self.n_steps_, self.epsilon_target_, self.delta_, p_min,
                                       float(self.paper_lipschitz), C)
            noise_theta, noise_w = s_theta * expected, s_w * expected
            sigma = effective_noise_multiplier(noise_theta, noise_w, C, w_bound)
            ctx.set_sigmas({STEP: sigma})
            spent = self._step_epsilon(ctx.plan, sigma)
            warnings.warn(
                f"calibration='paper' sets the noise by Theorem 3.3's closed form (loss Lipschitz constant "
                f"L={self.paper_lipschitz:g}, clipping C={C:g}, ρ={p_min:.3f}); it does not account Poisson "
                f"subsampling under replace-one nor the per-person bounds used here. Our accountant measures "
                f"ε={spent:.4g} for this noise (target {self.epsilon_target_:g}); privacy_spent_ reports that.",
                PrivacyLeakWarning, stacklevel=4)
            return sigma, noise_theta, noise_w
        sigma = ctx.sigmas[STEP]
        return (sigma, *noise_scales(sigma, C, w_bound))

    def _check_signal(self, fit_plan: FitPlan, n: int) -> None:
        """Refuse a budget whose per-coordinate noise on the averaged θ-gradient exceeds the largest gradient norm."""
        if not fit_plan.private:
            return
        q = fit_plan.plan[STEP].sampling_probability
        expected = q * n
        ratio = fit_plan.sigmas[STEP] * math.sqrt(2) / expected
        if ratio <= 1.0 or self.noise_multiplier is not None:
            return
        eps_ok = self._step_epsilon(fit_plan, expected / math.sqrt(2))
        raise ValueError(
            f"epsilon={fit_plan.epsilon:g} is too small for epochs={self.epochs} and "
            f"batch_size={self._batch_size(n)}: the noise on each coordinate of the averaged gradient would be "
            f"{ratio:.1f}× the largest possible gradient norm. Raise epsilon to at least {eps_ok:.3g} "
            f"({eps_ok / fit_plan.epsilon:.1f}× more), or use fewer epochs"
            + (" or a larger batch_size" if q < 1.0 else " (every step already sees all "
               f"{n} rows)")
        )

    # ---- training ------------------------------------------------------------
    def prepare_fit(self, ctx: FitContext, X, y, s, data: FermiData | None = None) -> _Prepared:
        """Validation, calibration, group proportions and model initialisation: everything before Algorithm 1's
        loop, on the encoded ``(X, y, s)`` that :meth:`~dpfair.algorithms.base.FairEstimator.begin_fit` returns, in
        the fit's context ``ctx`` (its :attr:`~dpfair.algorithms.base.FairEstimator.fit_context`).
        DP-FERMI's ``_fit`` is this step, then :meth:`train_prepared`; apart, so that a grid
        (:meth:`fit_many`) can prepare its models and train them in one loop.

        ``data``: the device tensors of ``(X, y, s)`` when a grid shares them.
        """
        if get_notion(self.notion).uses_positive_label and len(self.classes_) != 2:
            raise ValueError(
                f"notion={self.notion!r} needs binary labels, got {len(self.classes_)} classes; "
                "use notion='equalized_odds' for multiclass labels"
            )
        n, k, l = X.shape[0], len(self.groups_), len(self.classes_)
        cells, m = self._cells(y)
        self.batch_size_ = self._batch_size(n)
        self.max_grad_norm_ = (auto_max_grad_norm(n, self.privacy_unit_) if self.max_grad_norm == "auto"
                               else float(self.max_grad_norm))
        public = self.group_proportions is not None
        if public:
            p = self._public_proportions(m, k)
        fit_plan = self.plan(ctx.shape)  # refuses a too weak signal: before the counts are released
        ctx.calibrate(fit_plan)
        steps = fit_plan.plan[STEP]  # q and T as accounted, read from the plan rather than worked out again
        self.sampling_probability_, self.n_steps_ = steps.sampling_probability, steps.count
        if not public:
            p = self._release_proportions(ctx, cells, s, m, k)
        self.group_proportions_ = p
        counts_noise = 0.0 if public else ctx.sigmas[COUNTS] * counts_bound(self.privacy_unit_)
        if not public:  # each group's fewest members in a cell of its constraint (a released count)
            warn_small_groups("DP-FERMI", self.groups_, self.group_counts_.min(axis=0), noise_std=counts_noise,
                              floor=count_floor(counts_noise))
        elif self.privacy_unit_ is PrivacyUnit.SENSITIVE:  # public shares × the cells' sizes (y is public)
            cell_sizes = np.bincount(cells[cells >= 0], minlength=m)
            warn_small_groups("DP-FERMI", self.groups_, (p * cell_sizes[:, None]).min(axis=0), released=False)
        p_min = float(p.min())
        expected = self.sampling_probability_ * n
        if p_min * expected < 1.0:
            fixes = ["raise batch_size"] if self.sampling_probability_ < 1.0 else []
            if public:
                fixes += ["merge small groups"]
                what = f"the smallest group's public share is {p_min:.4f}"
            else:  # a released value (post-processing); the noise is public, so is its size
                what = (f"the smallest group's released share is {p_min:.4f} (the counts carry noise of std "
                        f"{counts_noise:.3g} people: proportions_budget={self.proportions_budget:g} of epsilon="
                        f"{self.epsilon_target_:g})")
                fixes += ["pass the groups' known shares with group_proportions= (then nothing is released for "
                          "them)", "raise epsilon or proportions_budget", "merge small groups"]
            raise ValueError(f"{what}: a batch of expected size {expected:.0f} sees {p_min * expected:.2f} of its "
                             f"members per step. Fixes: {'; '.join(fixes)}")
        record = self.privacy_unit_ is PrivacyUnit.RECORD
        self.w_radius_ = float(self.w_radius) if self.w_radius is not None else math.sqrt(l / p_min)
        w_bound = 2.0 / math.sqrt(p_min) + (2.0 * self.w_radius_ if record else 0.0)

        model = self._build_model(l, ctx.np_rng)
        if record and self.noise_multiplier is None and self.calibration != "paper":  # as DP-SGD says it
            warn_if_too_few_records("DP-FERMI", n, sum(q.numel() for q in model.parameters() if q.requires_grad),
                                    self.epsilon_target_, self.delta_)
        self.noise_multiplier_, noise_theta, noise_w = self._noise(ctx, n, p_min, w_bound)
        if data is None:
            data = FermiData(self._tensor(X), self._tensor(y, torch.long), self._tensor(s, torch.long),
                             self._tensor(cells, torch.long), m, k, l)
        average_from = self.n_steps_ - math.ceil(self.tail_average * self.n_steps_)
        schedule = FermiSchedule(self.sampling_probability_, self.n_steps_, min(self.batch_size_, n), record,
                                 self.max_grad_norm_, average_from if average_from < self.n_steps_ else None)
        hp = FermiHyperParameters(
            schedule, lam=float(self.lam), learning_rate=float(self.learning_rate),
            w_learning_rate=float(self.w_learning_rate), w_radius=self.w_radius_, noise_theta=noise_theta,
            noise_w=noise_w, w_bound=w_bound,
            target_error=None if self.target_error is None else float(self.target_error),
            lam_rate=float(self.lam_rate))
        return _Prepared(data, hp, model, self._tensor(1.0 / np.sqrt(p)), self._batch_sampler(), ctx.torch_rng, ctx)

    def _batch_sampler(self) -> SecretRandom:
        """The secret stream of this fit's Poisson batches (the models of a grid with its seed share it)."""
        return SecretRandom((type(self).__name__, self.random_state_, "batches"))

    def _fit(self, ctx: FitContext, X, y, s):
        self.train_prepared(self.prepare_fit(ctx, X, y, s))

    @classmethod
    def fit_many(cls, estimators, X, y, sensitive_features=None, *, budget=None) -> GridFit:
        """:meth:`~dpfair.algorithms.base.FairEstimator.fit_many` as one batched grid
        (:func:`~dpfair.algorithms.dpfermi.grid.fit_grid`): every model runs its own fit's steps, logistic models
        train in one loop (those of one ``random_state`` on shared secret batches), any other model and any grid
        with a model in ``secure_mode`` one at a time; the grid is claimed on ``budget`` as one joint release before
        its first release. Returns a :class:`~dpfair.algorithms.dpfermi.grid.GridFit` (the fitted estimators in
        order, with their joint ``privacy_spent``). ``estimators``: distinct unfitted instances, or dicts of
        parameters.
        """
        estimators = [cls(**est) if isinstance(est, dict) else est for est in estimators]
        return fit_grid(estimators, X, y, sensitive_features, budget=budget)

    def train_prepared(self, prep: _Prepared, backend=None) -> None:
        """Algorithm 1's loop for this model alone, from :meth:`prepare_fit`'s state; ends with :meth:`finish_fit`.

        ``backend``: the step backend (or its name, :data:`~dpfair.algorithms.dpfermi.loop.BACKENDS`; ``None``: the
        fastest that applies); ``"reference"`` trains the module itself, one row at a time with autograd. The fused
        kernel runs on PyTorch's thread count, read here once and passed down; PyTorch's global count is never set
        (:meth:`~dpfair.algorithms.dpfermi.batched.FusedKernel.running` limits only this thread's OpenMP team).
        """
        backend = loop.BACKENDS[backend] if isinstance(backend, str) else backend
        hp = FermiModels.stack([[prep.hp]], prep.inv_sqrt_p[None, None], self.device_)
        if isinstance(prep.model, LogisticRegression) and not isinstance(backend, Reference):
            lin = prep.model.linear
            models = LinearModels(lin.weight.detach().clone()[None, None], lin.bias.detach().clone()[None, None])
        else:
            models = ModuleModel(prep.model)
        ctx = prep.ctx
        release = ctx.release(STEP)
        steps = prep.hp.schedule.n_steps

        def on_epoch(step, W):
            self.history_.append({"step": step, "w_norm": float(W[0, 0].norm()), "lam": float(hp.lam[0, 0])})
            ctx.end_epoch(epoch=len(self.history_), step=step, steps=steps)

        W = loop.train(models, prep.data, prep.hp.schedule, hp, [prep.sampler], release, [prep.public_generator],
                       on_epoch=on_epoch, bar=ctx.progress(steps), backend=backend, threads=torch.get_num_threads())
        linear = (models.weight[0, 0], models.bias[0, 0]) if isinstance(models, LinearModels) else None
        self.finish_fit(prep, W[0, 0], hp.lam[0, 0], linear)

    def finish_fit(self, prep: _Prepared, W, lam, linear=None) -> None:
        """The fitted model from the end of Algorithm 1's loop: ``model_`` (``prep.model``, into which ``linear``, the
        ``(weight, bias)`` of a loop that trained a linear model's parameters apart from the module, is copied),
        ``W_``, ``lam_`` (λ at the end: it moves under ``target_error``) and ``privacy_spent_`` from the ledger."""
        if linear is not None:
            with torch.no_grad():
                prep.model.linear.weight.copy_(linear[0])
                prep.model.linear.bias.copy_(linear[1])
        self.lam_ = float(lam)
        self.model_ = prep.model.eval()
        self.W_ = W.cpu().numpy()
        self._finish_privacy()


def fit_dpfermi_grid(X, y, sensitive_features, grid: dict[str, list] | list[dict], *, budget=None,
                     **params) -> GridFit:
    """Fit ``DPFERMIClassifier(**params, **point)`` for every point of the product ``grid``, as one batched grid
    (:meth:`DPFERMIClassifier.fit_many`).

    ``grid`` maps hyper-parameter names to lists of values (e.g. ``{"epsilon": [0.5, 1],
    "lam": [0, 1, 2], "random_state": range(5)}``), or is a list of points (dicts of hyper-parameters),
    as scikit-learn's ``ParameterGrid`` and a list of its points. Returns a
    :class:`~dpfair.algorithms.dpfermi.grid.GridFit` (a list of the estimators in the grid's product order, with
    the joint ``privacy_spent``). ``verbose=True`` (in ``params``): one progress bar for the whole grid.
    ``budget``: a :class:`~dpfair.privacy.PrivacyBudget` the grid's joint ε (``privacy_spent``) is drawn from;
    the joint plan is checked against it before anything is released.
    """
    return DPFERMIClassifier.fit_many([{**params, **point} for point in grid_points(grid)], X, y, sensitive_features,
                                      budget=budget)
