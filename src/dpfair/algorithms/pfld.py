"""PF-LD (Tran, Fioretto, Van Hentenryck, *Differentially Private and Fair Deep Learning: A Lagrangian
Dual Approach*, AAAI 2021).

Fair learning as the constrained problem ``min_θ L(θ)`` s.t. ``μ_g(θ) = μ_c(g)(θ)`` for every
constraint group g, where ``μ_g`` is the mean over the members of g of a per-sample value
``h_i(θ)`` and ``μ_c`` the mean over the whole reference cell c that contains g. Groups and cells are
the notion's partition (:meth:`dpfair.fairness.notions.Notion.partition`); ``h_i`` follows its rate:

- a selection rate (demographic parity: g = s, c = all rows; equalized odds: g = (y, s), c = {y}):
  the predicted probability of class 1 (of every class when there are more than two);
- a positive rate (predictive equality: g = (y ≠ 1, s), c = {y ≠ 1}, the rows labelled 1 in no
  group): the predicted probability of class 1;
- accuracy (accuracy parity: g = s, c = all rows): the cross-entropy loss of sample i.

The Lagrangian dual (the paper's Algorithm 1) alternates a primal step on a minibatch,
``θ ← θ − η ∇_θ [L(θ) + Σ_g λ_g |μ_g(θ) − μ_c(g)(θ)|]``, and, once per epoch, a dual step on the
whole data, ``λ_g ← max(0, λ_g + s_λ (|μ_g(θ) − μ_c(g)(θ)| − τ_g))``: dual ascent for the constraints
``|μ_g − μ_c| ≤ τ_g`` (``dual_tolerance``; τ = 0 targets the paper's equality, where λ only grows). The
subgradient of ``|·|`` uses the sign ``ξ_g`` of the violation released by the latest dual step. The noise is on
the released group sums, so the step uses ``|v + Z|``; the paper's Eq. (13) adds it outside, ``|v| + Z``, which
is unbiased for ``|v|`` but releases no sign and lets noise lower λ. Both spend the same budget (``|·|`` is
1-Lipschitz); with τ = 0 ours raises λ on noise alone, which is what the tolerance below is for.

Why a tolerance by default: the dual step sees each group's mean through noise (that of the dual
release, ``σ_d C_d /√2`` on the sum, and that of the released count ñ_g it is divided by; both public),
and ``|v + noise|`` grows λ by about 0.8 of that noise's std every epoch even when v = 0
(``E|Z| = √(2/π) ≈ 0.8`` for a standard normal Z), so on small data λ grows on noise alone, with random
signs ξ. ``dual_tolerance="auto"`` is three such standard deviations, so that noise alone
rarely raises a multiplier; where that tolerance is large (violations below it cannot be told from
noise at this ε) the fit warns and trains as the unconstrained model would. The price is a looser
constraint where the data are large (what either choice did on german and adult: docs/guide/benchmarks.md,
"Measurements behind defaults").

Privacy (``privacy_unit="sensitive"``: neighbours differ in one person's s, dp_accounting's
``REPLACE_ONE``; features, labels and the reference means ``μ_c`` are public). Three releases, each
a sum of per-person contributions with a bound that does not depend on private data:

1. **Group sizes** (once, unless ``group_proportions`` is public): the counts of known-s members of
   every constraint group. Replacing one s moves one unit between two counts: distance √2,
   bound (radius) √2/2. The released counts ``ñ_g`` normalise every group mean (post-processing);
   realised group sizes are never used, since they are private.
2. **Primal step** (every step, on a secret Poisson batch B of rate q): the sum over B of the
   per-sample gradients of ``ψ_i = Σ_j w_{g_i j} h_ij(θ)`` with ``w_g = λ_g ξ_g /(ñ_g W)``,
   ``W = max_g λ_g/ñ_g``, each clipped to ``C_p`` (``primal_clip``). A person's contribution has norm
   ≤ C_p whatever their s, so the bound is C_p; the step uses ``(W/q)·(sum + N(0, σ_p² C_p²))``.
   In the paper's units the gradient's sensitivity is at most ``2 C_p max λ /(q ñ_min)``: its
   ``Δ_p = 2 C_p max λ /(min_g |B_g| − 1)`` with the public ``q ñ_min`` in place of the realised
   batch group size. The loss gradient and the gradient of ``μ_c`` do not involve s: they are public
   and computed on an independent minibatch (never on B, which must stay secret for the
   subsampling argument).
3. **Dual step** (once per epoch, whole data): the per-group sums of ``h_i`` clipped to norm
   ``C_d`` (``dual_clip``; for probabilities ``min(C_d, 1)``, their norm never exceeds 1). Replacing
   one s moves one clipped value between two groups (or into or out of "unknown"): distance
   ``√2 C_d``, bound ``C_d/√2``. Dividing by ``ñ_g`` gives the group means; the paper's
   ``Δ_d = √2 C_d /(n_min − 1)`` is this with ``ñ_g`` in place of the realised size − 1, and each
   group gets noise ``σ_d C_d /(√2 ñ_g)`` instead of that of the smallest.

Why not the paper's Δs as printed: they divide by realised group sizes, which are private (and
so is the minimum that sets the noise). Under replace-one they are also too small for the primal
step: moving one person from group a to b changes ``μ_a`` by up to ``2C_p/(n_a − 1)`` *and*
``μ_b`` by up to ``2C_p/(n_b + 1)`` (gradients point anywhere), so the gradient moves by up to
``2C_p(λ_a/(n_a − 1) + λ_b/(n_b + 1))``, nearly ``2Δ_p``. (``Δ_d`` holds for one non-negative
value per sample, the paper's binary setting.) With public or released normalisers every bound
above is exact and free of private data; the tests check them by brute force.

Budget: the counts spend ``counts_budget·ε`` and the dual releases ``dual_budget·ε`` (each
calibrated alone), then the primal noise multiplier σ_p is calibrated on the whole plan, which is
exactly the ledger (grouped by kind: composition does not depend on the order), so
``privacy_spent_ ≤ epsilon``.

**Missing sensitive values.** Entries of ``sensitive_features`` that are NaN/None (or equal to
``missing_value``) are unknown: those rows belong to no constraint group but still train the loss
and the reference means. The neighbouring relation covers a change between a value and
"unknown" too, with the same bounds. Only the rows with known s enter ``ñ_g``, so the noise on a
group mean scales as ``1/(r n p_g)`` when a fraction r of rows carries s: the paper's
sensitivities divided by r. With public ``group_proportions``, ``sensitive_fraction`` is that
public r, and ``ñ_g = r · n_c · p_g``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from dpfair.algorithms.base import TorchClassifier, public_categories
from dpfair.algorithms.signal import count_floor, floor_counts, noise_tolerance, warn_small_groups
from dpfair.utils.constraints import Instances, Interval, Listing, Options
from dpfair.exceptions import SmallGroupWarning
from dpfair.fairness.notions import ACCURACY, POSITIVE, get_notion
from dpfair.nn import assign_grads, clipped_gradient_sum
from dpfair.privacy import Part, PrivacyPlan, PrivacyUnit, Release, check_privacy_unit
from dpfair.utils.validation import check_group_proportions, encode_categories

#: The notions PF-LD targets (its constraint machinery is generic over the notion's partition and rate).
NOTIONS = ("demographic_parity", "equalized_odds", "accuracy_parity", "predictive_equality")

#: The names of the plan's parts (and of the ledger's entries).
COUNTS, DUAL, PRIMAL = "pf-ld group counts", "pf-ld dual", "pf-ld primal"


# ---- per-sample values and their released sums (module level: the tests check them by brute force) ----

def rate_term(logits: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``Σ_j w_j P_θ(ŷ = j | x)`` of one sample (demographic parity, equalized odds)."""
    return (torch.softmax(logits, dim=1) * weights).sum()


def loss_term(logits: torch.Tensor, target) -> torch.Tensor:
    """``w · CE(θ; x, y)`` of one sample (accuracy parity); ``target = (y, w)``."""
    y, w = target
    return (w * F.cross_entropy(logits, y, reduction="none")).sum()


def compared_columns(notion, n_classes: int) -> list[int]:
    """Classes whose rate is compared: class 1 for binary labels or a positive rate, every class otherwise.

    An accuracy rate compares one value, the loss (``[0]``).
    """
    notion = get_notion(notion)
    if notion.rate == ACCURACY:
        return [0]
    return [1] if n_classes == 2 or notion.rate == POSITIVE else list(range(n_classes))


def constraint_cells(notion, y: np.ndarray, s: np.ndarray, k: int,
                     n_classes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Constraint group of each row (−1 where s is unknown, ``s < 0``, or the row is unconstrained) and its
    reference cell (−1: in none), from the notion's partition of the label codes ``y`` (class 1 positive)."""
    y = np.asarray(y, dtype=np.int64)
    l = n_classes if n_classes is not None else max(2, int(y.max()) + 1 if y.size else 2)
    part = get_notion(notion).partition(y, np.where(s >= 0, s, 0), n_classes=l, n_groups=k)
    return np.where(s >= 0, part.codes, -1).astype(np.int64), part.reference.astype(np.int64)


def group_counts(groups: np.ndarray, n_constraint_groups: int) -> np.ndarray:
    """Members of each constraint group (the pre-noise quantity of the counts release)."""
    return np.bincount(groups[groups >= 0], minlength=n_constraint_groups).astype(np.float64)


def per_sample_values(logits: torch.Tensor, y: torch.Tensor, notion, columns) -> torch.Tensor:
    """``h_i(θ)`` of every row, shape ``(n, m)``: compared class probabilities, or the loss (accuracy rate)."""
    if get_notion(notion).rate == ACCURACY:
        return F.cross_entropy(logits, y, reduction="none")[:, None]
    return torch.softmax(logits, dim=1)[:, columns]


def clip_rows(values: torch.Tensor, bound: float) -> torch.Tensor:
    """Each row scaled to L2 norm at most ``bound``."""
    norms = values.norm(dim=1, keepdim=True)
    return values * torch.clamp(bound / norms.clamp_min(1e-30), max=1.0)


def dual_sums(values: torch.Tensor, groups: torch.Tensor, n_constraint_groups: int, clip: float) -> torch.Tensor:
    """``S_g = Σ_{i ∈ g} clip(h_i)``: the pre-noise quantity of a dual release, shape ``(G, m)``."""
    known = groups >= 0
    out = torch.zeros(n_constraint_groups, values.shape[1], dtype=values.dtype, device=values.device)
    return out.index_add_(0, groups[known], clip_rows(values, clip)[known])


def primal_sum(model, X: torch.Tensor, y: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor,
               notion, clip: float) -> dict[str, torch.Tensor]:
    """Σ_i of the per-sample gradients of ``ψ_i = Σ_j weights[g_i, j] h_ij``, each clipped to ``clip``.

    ``weights`` has shape ``(G, n_classes)`` (one weight per class probability; zero for classes not
    compared) or ``(G, 1)`` for an accuracy rate (the weight of the loss), entries in [−1, 1]. Rows of
    unknown s or in no group (``g_i = −1``) weigh 0. This is the pre-noise quantity of a primal release.
    """
    rows = torch.where((groups >= 0)[:, None], weights[groups.clamp(min=0)], torch.zeros_like(weights[:1]))
    if get_notion(notion).rate == ACCURACY:
        summed, _ = clipped_gradient_sum(model, loss_term, X, (y, rows[:, 0]), clip)
    else:
        summed, _ = clipped_gradient_sum(model, rate_term, X, rows, clip)
    return summed


@dataclass
class _Tensors:
    """The training data on the device: rows, their constraint groups and reference cells, public sizes."""

    X: torch.Tensor
    y: torch.Tensor
    groups: torch.Tensor
    cells: torch.Tensor
    cells_n: torch.Tensor
    sizes: torch.Tensor
    cell_of_group: torch.Tensor
    columns: list


class PFLDClassifier(TorchClassifier):
    """Private and fair network trained by the Lagrangian dual (PF-LD); DP of the sensitive attribute.

    Parameters
    ----------
    model : "mlp" (two hidden ReLU layers of 64, the paper's network), "logistic", "cnn" or a module.
    notion : "demographic_parity", "equalized_odds", "accuracy_parity" or "predictive_equality" (class 1 positive).
    epsilon, delta : target budget (``delta=None``: 1/n²; ``epsilon=inf``: no noise).
    privacy_unit : "sensitive" only (neighbours differ in one person's s, as in the paper).
    primal_clip : C_p, the clipping bound of the per-sample group-term gradients.
    dual_clip : C_d, the clipping bound of the per-sample values of the dual step.
    dual_learning_rate : s_λ, the step of the dual update ``λ ← max(0, λ + s_λ (|violation| − τ))``.
    dual_tolerance : τ ≥ 0, the violation of a group's mean that the multipliers tolerate; "auto" (default):
        three standard deviations of the noise on that group's mean in the dual step (public; 0 at ε = ∞), so
        that noise alone does not drive the multipliers (fitted: ``dual_tolerance_``, one per constraint
        group); it warns when that hides violations above 0.05. 0: the paper's ``λ ← λ + s_λ |violation|``.
    lambda_init : initial multipliers (≥ 0).
    group_proportions : public group shares among the rows with known s, shape (k,), or (l, k) for
        equalized odds (row y: the shares within label y); ``None`` releases the group counts with
        ``counts_budget·ε``.
    sensitive_fraction : the public fraction r ∈ (0, 1] of rows whose s is known; used with
        ``group_proportions`` (``None``: 1).
    counts_budget, dual_budget : shares of ε spent on the counts and on the dual releases.
    missing_value : a value of ``sensitive_features`` that means "unknown" (NaN/None always do).
    noise_multiplier : σ_p of the primal releases; ``None`` calibrates it on the whole plan.
    batch_size, epochs, learning_rate, optimizer, momentum : the primal steps (Poisson batches of
        expected size ``batch_size``; one dual step at the start of each epoch).
    accountant : "pld" (privacy loss distributions, tight; the default) or "rdp": the accountant that calibrates
        the noise and reports ``privacy_spent_``.
    model_kwargs : keyword arguments of :func:`dpfair.nn.make_model` for a named model (e.g. ``hidden=(64, 64)``).
    device : "cpu" (default), "cuda", "cuda:N" or "auto" (CUDA when available).
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` where the data are private.
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks; slower).
    random_state : seeds public randomness only (initialisation, public minibatch order); Poisson batches
        and every noise draw come from a secret generator made fresh for each fit.
    verbose : a progress bar on stderr over the primal steps, with the ε spent so far (:mod:`dpfair.utils.progress`).

    Fitted attributes: ``noise_multiplier_`` (σ_p), ``dual_noise_multiplier_`` (σ_d), ``group_sizes_``
    (the normalisers ñ_g, released or public), ``constraint_keys_`` (each constraint group's ``(label, group)``
    codes), ``dual_tolerance_`` (τ_g), ``lambdas_`` and ``violations_``
    (the last dual step's, shape (G, m): G constraint groups, m compared values), ``history_``,
    ``privacy_spent_``.
    """

    _private = True
    _requires_sensitive = True
    _notions = NOTIONS
    _fairness_strength = "dual_tolerance"
    _units = ("sensitive",)
    parameter_constraints: ClassVar[dict] = {
        **TorchClassifier.parameter_constraints,
        "notion": [Options(*NOTIONS)],
        "primal_clip": [Interval(float, 0, None, closed="neither")],
        "dual_clip": [Interval(float, 0, None, closed="neither")],
        "dual_learning_rate": [Interval(float, 0, None, closed="left")],
        "dual_tolerance": [Options("auto"), Interval(float, 0, None, closed="left")],
        "lambda_init": [Interval(float, 0, None, closed="left")],
        "group_proportions": [None, Listing("the public group shares, shape (k,) or (l, k)")],
        "sensitive_fraction": [None, Interval(float, 0, 1, closed="right",
                                              note="the fraction of rows whose sensitive value is known")],
        "counts_budget": [Interval(float, 0, 1, closed="neither")],
        "dual_budget": [Interval(float, 0, 1, closed="neither")],
        "missing_value": [None, Instances((str, numbers.Number), "a value (a number or a string) meaning unknown")],
    }

    def __init__(self, model="mlp", *, notion="demographic_parity", epsilon=1.0, delta=None,
                 privacy_unit="sensitive", primal_clip=10.0, dual_clip=5.0, dual_learning_rate=1.0,
                 dual_tolerance="auto", lambda_init=0.0, group_proportions=None, sensitive_fraction=None,
                 counts_budget=0.05, dual_budget=0.2, missing_value=None, noise_multiplier=None, batch_size=256,
                 epochs=20, learning_rate=1e-3, optimizer="adam", momentum=0.0, accountant="pld", model_kwargs=None,
                 device="cpu", groups=None, classes=None, secure_mode=False, random_state=None, verbose=False):
        self.model = model
        self.notion = notion
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.primal_clip = primal_clip
        self.dual_clip = dual_clip
        self.dual_learning_rate = dual_learning_rate
        self.dual_tolerance = dual_tolerance
        self.lambda_init = lambda_init
        self.group_proportions = group_proportions
        self.sensitive_fraction = sensitive_fraction
        self.counts_budget = counts_budget
        self.dual_budget = dual_budget
        self.missing_value = missing_value
        self.noise_multiplier = noise_multiplier
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.accountant = accountant
        self.model_kwargs = model_kwargs
        self.device = device
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    # ---- inputs: sensitive values may be missing ---------------------------------------------
    def _check_fit_inputs(self, X, y, s, checked=None):
        X, y_codes = self._check_features_and_labels(X, y, checked)
        n = X.shape[0]
        if s is None:
            raise ValueError("PFLDClassifier needs sensitive_features: call fit(X, y, sensitive_features=s) "
                             "(mark unknown values with NaN/None or missing_value)")
        s = np.asarray(s)
        if s.ndim == 2 and s.shape[1] == 1:
            s = s.ravel()
        if s.ndim != 1 or len(s) != n:
            raise ValueError(f"sensitive_features must be 1-D with one entry per row of X ({n}), got shape {s.shape}")
        missing = np.asarray(pd.isna(s), dtype=bool)
        if self.missing_value is not None:
            missing |= np.array([v == self.missing_value for v in s.tolist()], dtype=bool)
        groups = public_categories(self.groups, pd.Series(s[~missing]), "groups", True,
                                   "groups=k or groups=[...] (the data set's group values)")
        known, self.groups_ = encode_categories(s[~missing], "sensitive_features", classes=groups)
        s_codes = np.full(n, -1, dtype=np.int64)
        s_codes[~missing] = known
        self.n_features_in_ = X.shape[1]
        return X, y_codes, s_codes

    def check_hyperparameters(self) -> PFLDClassifier:
        """The declared constraints (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), then
        the privacy unit PF-LD guarantees and the share of ε its counts and dual steps leave the primal ones."""
        super().check_hyperparameters()
        if check_privacy_unit(self.privacy_unit) is not PrivacyUnit.SENSITIVE:
            raise ValueError("PF-LD protects the sensitive attribute only: use privacy_unit='sensitive' "
                             "(for record-level DP use DPFERMIClassifier(privacy_unit='record'))")
        shares = float(self.counts_budget) + float(self.dual_budget)
        if shares >= 1:
            raise ValueError(f"counts_budget + dual_budget must be < 1 (the rest pays the primal steps), "
                             f"got {shares:g}")
        return self

    # ---- normalisers: public or released group sizes ------------------------------------------
    def _public_sizes(self, cells_n: np.ndarray, k: int) -> np.ndarray:
        p = check_group_proportions(self.group_proportions, len(cells_n), k, self.notion)
        r = 1.0 if self.sensitive_fraction is None else float(self.sensitive_fraction)
        return (r * cells_n[:, None] * p).reshape(-1)

    #: the sensitivity bound of one person on the released group counts (a change of s moves two counts by 1)
    _COUNT_BOUND = math.sqrt(2) / 2

    def _release_counts(self, ctx, groups: np.ndarray, n_constraint_groups: int) -> np.ndarray:
        bound = self._COUNT_BOUND
        noisy = ctx.release(COUNTS).noisy_sum(group_counts(groups, n_constraint_groups), bound=bound)
        return floor_counts(noisy, ctx.sigmas[COUNTS] * bound)  # noise cannot make a group look tiny

    def _count_noise(self, sigmas) -> tuple[float, float | None]:
        """``(std, floor)`` of the released group counts' noise and of the floor they are raised to (public, from
        σ_c alone); ``(0, None)`` for public group sizes."""
        if COUNTS not in sigmas:
            return 0.0, None
        std = sigmas[COUNTS] * self._COUNT_BOUND
        return std, count_floor(std)

    def _tolerances(self, sigmas) -> np.ndarray:
        """τ_g of every constraint group, from public quantities only (σ's, C_d, the released or public ñ_g).

        ``"auto"``: three standard deviations of the noise on the group's mean ``S̃_g/ñ_g``: the dual
        release's on the sum, ``σ_d C_d/√2``, and the released count's (std ``σ_c/√2``, none when the
        proportions are public), which moves the mean by up to ``C_d·|ñ_g − n_g|/ñ_g`` (every value is at
        most C_d): ``std = √((σ_d C_d/√2)² + (C_d σ_c/√2)²) / ñ_g`` (in units of h: a rate, or the loss for
        accuracy parity). Warns when that hides violations larger than 0.05 (:func:`~dpfair.algorithms.signal.
        noise_tolerance`).
        """
        if self.dual_tolerance != "auto":
            return np.full(len(self.group_sizes_), float(self.dual_tolerance))
        count_std, floor = self._count_noise(sigmas)
        noise = (self.dual_clip_ * math.hypot(self.dual_noise_multiplier_ / math.sqrt(2), count_std)
                 / self.group_sizes_)
        what = "mean loss" if get_notion(self.notion).rate == ACCURACY else "mean predicted rate"
        how = f"a released count, noise std {count_std:.3g}" if floor is not None else "public"
        return noise_tolerance(noise, lambda worst, tolerance, std: self._tolerance_warning(
            worst[0], what, tolerance, std, how, floor))

    def _tolerance_warning(self, g: int, what: str, tolerance: float, std: float, how: str,
                           floor: float | None = None) -> SmallGroupWarning:
        """The forecast that constraint group ``g``'s noise hides its violations: the group by its declared name
        (the command line names a coded group), the label its constraint conditions on, and its size as the fit
        knows it (``how``: released, with its noise, or public; a released count at ``floor`` as "about <floor> or
        fewer": the issue's "267 members" for a group of 27 was that floor, shown as a size)."""
        label, code = self.constraint_keys_[g]
        cell = "" if label is None else f" among label {_labels(self.classes_, label)}"
        return SmallGroupWarning(
            f"PF-LD at epsilon={self.epsilon_target_:g} cannot tell the {what} of group {{groups}} people{cell} "
            f"({how}) from the reference within {tolerance:.2f}: the dual step's noise on it is {std:.3f} (std) "
            f"over {int(self.epochs)} dual release(s). Such violations leave the multipliers at 0 and the fit "
            "trains as the unconstrained model would; raise epsilon or dual_budget, use fewer epochs (one dual "
            "release each), merge small groups or train on more rows per group.",
            [self.groups_[code]], [float(self.group_sizes_[g])], floor=floor)

    # ---- privacy plan: counts (unless public), one dual release per epoch, the primal steps ----------
    def _privacy_plan(self, shape) -> PrivacyPlan:
        """The group counts (unless ``group_proportions`` are public), one dual release per epoch, and the primal
        steps: ``round(1/q)`` Poisson-sampled steps per epoch at ``q = batch_size / n``."""
        q = min(1.0, self.batch_size / shape.n)
        parts = () if self.group_proportions is not None else (Part(COUNTS, share=float(self.counts_budget)),)
        return PrivacyPlan(parts + (Part(DUAL, count=int(self.epochs), share=float(self.dual_budget)),
                                    Part(PRIMAL, count=max(1, round(1 / q)) * int(self.epochs), sampling_probability=q)))

    # ---- training -------------------------------------------------------------------------------
    def _fit(self, ctx, X, y, s):
        n, k, l = X.shape[0], len(self.groups_), len(self.classes_)
        notion = get_notion(self.notion)
        part = notion.partition(y, np.where(s >= 0, s, 0), n_classes=l, n_groups=k)
        groups, cells = np.where(s >= 0, part.codes, -1), part.reference  # unknown s: in no constraint group
        n_groups = part.n_constraint_groups
        columns = compared_columns(notion, l)
        self.dual_clip_ = float(self.dual_clip) if notion.rate == ACCURACY else min(float(self.dual_clip), 1.0)
        cells_n = np.bincount(cells[cells >= 0], minlength=part.n_reference_cells).astype(np.float64)
        public = self.group_proportions is not None
        sizes = self._public_sizes(cells_n, k) if public else None
        sigmas = ctx.calibrate(self.plan(ctx.shape))
        self.sampling_probability_ = self.privacy_plan_[PRIMAL].sampling_probability
        self.n_steps_ = self.privacy_plan_[PRIMAL].count
        self.steps_per_epoch_ = self.n_steps_ // int(self.epochs)
        self.dual_noise_multiplier_, self.noise_multiplier_ = sigmas[DUAL], sigmas[PRIMAL]
        self.group_sizes_ = sizes if public else self._release_counts(ctx, groups, n_groups)
        self.constraint_keys_ = part.keys  # (label code or None, group code) of each constraint group: public
        fewest = [min(float(v) for (_, r), v in zip(part.keys, self.group_sizes_) if r == g) for g in range(k)]
        count_std, floor = self._count_noise(sigmas)
        warn_small_groups("PF-LD", self.groups_, fewest, released=not public, noise_std=count_std, floor=floor)
        self.dual_tolerance_ = self._tolerances(sigmas)  # its forecast warns before the training loop
        # The recurring releases record on their own ledgers, appended grouped by kind at the end:
        # composition does not depend on the order, and the grouped ledger is fast to account.
        dual, primal = ctx.release(DUAL, ctx.side_ledger()), ctx.release(PRIMAL, ctx.side_ledger())

        self.model_ = self._build_model(l, ctx.np_rng)
        opt = self._make_optimizer(self.model_.parameters())
        data = _Tensors(self._tensor(X), self._tensor(y, torch.long), self._tensor(groups, torch.long),
                        self._tensor(cells, torch.long), self._tensor(cells_n), self._tensor(self.group_sizes_),
                        self._tensor(part.reference_of, torch.long), columns)
        lam = torch.full((n_groups, len(columns)), float(self.lambda_init), device=self.device_)
        tolerance = self._tensor(self.dual_tolerance_)[:, None]
        public_order = torch.empty(0, dtype=torch.long, device=self.device_)
        self.model_.train()
        bar = ctx.progress(self.n_steps_)
        for epoch in range(int(self.epochs)):
            lam, sign, violation = self._dual_step(data, lam, tolerance, dual)
            self.history_.append({"epoch": epoch + 1, "lambda_max": float(lam.max()),
                                  "violation_max": float(violation.abs().max())})
            coef = lam * sign / data.sizes[:, None]
            scale = float(coef.abs().max())
            weights = self._expand(coef / scale if scale > 0 else torch.zeros_like(coef), columns, l)
            # Σ_{g in cell c} λ_g ξ_g: the coefficient of the reference mean μ_c in the Lagrangian
            ref_coef = torch.zeros(len(cells_n), len(columns), device=self.device_).index_add_(
                0, data.cell_of_group, lam * sign)
            for _ in range(self.steps_per_epoch_):
                idx = self._rows(primal.sample(n))
                if len(public_order) < self.batch_size:
                    public_order = torch.cat([public_order, torch.randperm(n, generator=ctx.torch_rng,
                                                                           device=self.device_)])
                pub, public_order = public_order[:self.batch_size], public_order[self.batch_size:]
                grads = self._primal_gradient(data, idx, weights, scale, primal)
                for name, g in self._public_gradient(data, pub, ref_coef).items():
                    grads[name] = grads[name] + g
                assign_grads(self.model_, grads)
                opt.step()
                bar.update()
            ctx.end_epoch(epoch=epoch + 1, step=(epoch + 1) * self.steps_per_epoch_, steps=self.n_steps_)
        self.model_.eval()
        self.lambdas_ = lam.cpu().numpy()
        self.violations_ = violation.cpu().numpy()
        ctx.close_side_ledgers()
        self._finish_privacy()

    @torch.no_grad()
    def _dual_step(self, data: _Tensors, lam: torch.Tensor, tolerance: torch.Tensor, release: Release):
        """Release the group sums on the whole data; λ ← max(0, λ + s_λ (|violation| − τ)); the sign ξ."""
        values = torch.cat([per_sample_values(self.model_(data.X[i:i + 8192]), data.y[i:i + 8192], self.notion,
                                              data.columns) for i in range(0, len(data.X), 8192)])
        noisy = release.noisy_sum(dual_sums(values, data.groups, len(data.sizes), self.dual_clip_),
                                  bound=self.dual_clip_ / math.sqrt(2))
        ref = torch.zeros(len(data.cells_n), values.shape[1], dtype=values.dtype, device=values.device)
        inside = data.cells >= 0  # rows in no reference cell (e.g. y = 1 under predictive equality) add nothing
        ref = ref.index_add_(0, data.cells[inside], clip_rows(values, self.dual_clip_)[inside]) / data.cells_n[:, None]
        violation = noisy / data.sizes[:, None] - ref[data.cell_of_group]
        lam = (lam + float(self.dual_learning_rate) * (violation.abs() - tolerance)).clamp(min=0.0)
        return lam, torch.sign(violation), violation

    def _primal_gradient(self, data: _Tensors, idx, weights, scale: float, release: Release):
        """The group terms' gradient from the secret batch: ``(W/q)·(clipped sum + noise)``."""
        summed = primal_sum(self.model_, data.X[idx], data.y[idx], data.groups[idx], weights, self.notion,
                            float(self.primal_clip))
        noisy = release.noisy_sum(summed, bound=float(self.primal_clip))
        return {name: g * scale / self.sampling_probability_ for name, g in noisy.items()}

    def _public_gradient(self, data: _Tensors, pub, ref_coef) -> dict[str, torch.Tensor]:
        """Gradient of the mean loss − Σ_c Σ_j ref_coef[c, j] μ_cj on the public batch (public sizes)."""
        logits = self.model_(data.X[pub])
        values = per_sample_values(logits, data.y[pub], self.notion, data.columns)
        cells = data.cells[pub]
        inside = cells >= 0  # rows in no reference cell weigh 0
        sizes = torch.bincount(cells[inside], minlength=ref_coef.shape[0]).clamp(min=1).to(values.dtype)
        coef = (ref_coef / sizes[:, None])[cells.clamp(min=0)] * inside[:, None].to(values.dtype)
        objective = F.cross_entropy(logits, data.y[pub]) - (values * coef).sum()
        params = {name: p for name, p in self.model_.named_parameters() if p.requires_grad}
        return dict(zip(params, torch.autograd.grad(objective, list(params.values()))))

    def _expand(self, coef: torch.Tensor, columns, n_classes: int) -> torch.Tensor:
        """Per-class weights ``(G, n_classes)`` from the compared columns' (the loss weight for an accuracy rate)."""
        if get_notion(self.notion).rate == ACCURACY:
            return coef
        full = torch.zeros(coef.shape[0], n_classes, dtype=coef.dtype, device=coef.device)
        full[:, columns] = coef
        return full


def _labels(classes, label) -> str:
    """A constraint cell's label entry (a code or a tuple of codes) as the declared class values."""
    codes = label if isinstance(label, tuple) else (label,)
    return "/".join(str(classes[c]) for c in codes)
