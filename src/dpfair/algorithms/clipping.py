"""Clipping rules for DP-SGD: flat, per-layer, Opt-Q, DPSGD-F and FairDP, each with its statistics accounted.

A rule is the phases of one DP-SGD step (Abadi et al. 2016, Algorithm 1), as methods, in the way Opacus's
``DPOptimizer`` splits its step (``clip_and_accumulate``, ``add_noise``, ``scale_grad``) and its variants
override one of them; :class:`~dpfair.algorithms.dpsgd.DPSGDStep` calls them in order:

1. **bound** (:meth:`ClippingRule.bounds`): ``C_{k(i)}`` for each sampled example's key ``k(i)`` (its group s,
   its class y, or one key for all: ``by``), held by the step to ``C_max = max_k C_k``
   (:meth:`ClippingRule.release_bound`);
2. **clip** (:meth:`ClippingRule.clip`): ``Σ_i g_i·min(1, C_i/‖g_i‖)`` and the per-example norms, from which
   :meth:`ClippingRule.statistics` makes the rule's per-step statistics (counts over the batch), if any;
3. **noise** (:meth:`ClippingRule.add_noise`): one Gaussian release of the clipped sum, noise ``σ_g·C_max``,
   with the statistics in the same release;
4. **scale** (:meth:`ClippingRule.scale`): the noisy sum over the expected batch size ``q·N`` (public).

Once per epoch the rule updates its bounds from the statistics released during the epoch
(:meth:`ClippingRule.update`; a key whose released count does not exceed three standard deviations of its noise
— a small group at a small ε — keeps its bound: its statistics would be mostly noise).

Each rule overrides only what it changes:

* :class:`FlatClipping` (Abadi et al. 2016, Algorithm 1): nothing;
* :class:`PerLayerClipping` (McMahan et al. 2018, DP-FedAvg): the clip;
* :class:`QuantileClipping` (FairDP appendix C.1, Opt-Q; Andrew et al. 2021), :class:`DPSGDFClipping` (Xu, Du
  and Wu 2021) and :class:`FairDPClipping` (FairDP, Theorem 1): the statistics each step releases and the
  update that sets the bounds from them.

Privacy (record unit, add/remove-one). A rule's bounds and ``C_max`` are
functions of statistics already released, so they are public when the step
runs; removing one example from the batch moves the clipped sum by at most
``C_max`` and the statistics vector by at most ``Δ_stats`` (a one-hot row or
two counts). The step releases both with Gaussian noise, the gradient at
``σ·C_max/√(1−r)`` and the statistics at ``σ·Δ_stats/√r``, so the joint
release has sensitivity ``√((1−r) + r) = 1`` in units of its noise: it is
exactly one Gaussian mechanism of multiplier σ on the Poisson sample (Andrew
et al. 2021, §3, where the clipped-count release is folded into the step the
same way). The plan therefore stays "T Poisson-sampled Gaussian steps of
multiplier σ", and ``statistics_share = r`` is the share of each step's
signal-to-noise budget the statistics take: the gradient's noise multiplier is
``σ_g = σ/√(1−r)``. The ledger holds each step once; nothing is released
outside it.

Under the record unit, the sample's group s (``by="group"``) is part of the
record: a neighbour data set adds or removes the whole (x, y, s), so the group
enters only through that example's own bound and its own row of the
statistics, both covered above. Its cost is the share r (e.g. r = 0.05 raises
the gradient noise by 2.6 %). The list of groups must be public (``groups=``).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch

from dpfair.utils.constraints import Interval, Options, check_parameters
from dpfair.fairness.bias_variance import bias_variance_terms
from dpfair.model_files import register_dataclass
from dpfair.nn import clipped_gradient_sum, layer_groups

__all__ = ["CLIPPING_RULES", "ClippingRule", "DPSGDFClipping", "FairDPClipping", "FlatClipping",
           "PerLayerClipping", "QuantileClipping", "make_clipping_rule"]

BY = ("group", "class", "none")


@dataclass
class ClippingRule:
    """The phases of one DP-SGD step; by itself flat clipping (Abadi et al. 2016, Algorithm 1): every example
    clipped to ``C = max_grad_norm``, no statistics.

    Phases, in the order :class:`~dpfair.algorithms.dpsgd.DPSGDStep` calls them: :meth:`bounds` (1),
    :meth:`clip` and :meth:`statistics` (2), :meth:`add_noise` (3), :meth:`scale` (4); after the step
    :meth:`observe`, and at the end of an epoch :meth:`end_epoch` (which calls :meth:`update`). A subclass
    overrides the phase it changes: :meth:`clip` (per-layer), or :meth:`statistics` (what it releases each
    step) with :meth:`update` (new bounds from the epoch's released statistics). Run-time state lives on a copy
    made by :meth:`start` for each fit; the dataclass fields are the rule's settings.
    """

    name: ClassVar[str] = "flat"
    #: the key of a sample's bound: "group" (its s), "class" (its y) or "none" (one bound)
    by: str = "none"
    #: share r of each step's noise budget spent on the statistics (0: none released)
    statistics_share: float = 0.0
    #: L2 norm of one example's row of the statistics (its sensitivity)
    statistics_sensitivity: ClassVar[float] = 0.0
    #: what the statistics are (named in the ledger's step entries); None: no statistics
    statistics_name: ClassVar[str | None] = None

    _bounds: np.ndarray = field(default=None, init=False, repr=False, compare=False)
    #: the values each setting accepts (:mod:`dpfair.utils.constraints`), checked by :meth:`check`; a subclass extends it
    parameter_constraints: ClassVar[dict] = {
        "by": [Options(*BY)],
        "statistics_share": [Interval(float, 0, 1, closed="left")],
    }

    # ---- set-up ---------------------------------------------------------------------------------
    def check(self) -> None:
        """Validate the settings (called by ``fit``): the declared constraints, then a share of the noise budget
        for a rule that releases statistics."""
        check_parameters(self, self.parameter_constraints, owner=type(self).__name__)
        share = self.statistics_share
        if self.statistics_sensitivity > 0 and not (isinstance(share, (int, float)) and 0.0 < share < 1.0):
            raise ValueError(f"{type(self).__name__}.statistics_share must lie in (0, 1) (the share of each "
                             f"step's noise budget its statistics take), got {share!r}")

    def start(self, *, max_grad_norm: float, n_keys: int, noise_multiplier: float, n_params: int,
              expected_batch: float, learning_rate: float, model) -> ClippingRule:
        """A copy of this rule, ready for one fit: bounds ``C`` for each of ``n_keys`` keys."""
        run = copy.copy(self)
        run.check()
        run.c0 = float(max_grad_norm)
        run.n_keys = n_keys
        run.sigma = float(noise_multiplier)
        run.n_params = int(n_params)
        run.expected_batch = float(expected_batch)
        run.step_size = float(learning_rate)  # the optimizer's μ (Theorem 1)
        run._bounds = np.full(n_keys, run.c0)
        run._stats = None
        run._steps = 0
        run._setup(model)
        return run

    def _setup(self, model) -> None:
        """Rule-specific set-up (per-layer: the layers)."""

    @property
    def gradient_noise_multiplier(self) -> float:
        """``σ_g = σ/√(1−r)``: the gradient's noise over ``C_max`` once the statistics take their share."""
        return self.sigma / math.sqrt(1.0 - self.statistics_share) if self.statistics_sensitivity else self.sigma

    @property
    def current_bounds(self) -> np.ndarray:
        """``C_k`` of each key now (a copy): functions of released statistics only."""
        return self._bounds.copy()

    # ---- the step's phases ------------------------------------------------------------------------
    def release_bound(self) -> float:
        """``C_max``: the largest bound, a function of released statistics only (public at this step). The step
        holds every per-example bound to it and the noise covers it."""
        return float(self._bounds.max())

    def keys(self, y: torch.Tensor, s: torch.Tensor | None) -> torch.Tensor | None:
        """Each sampled example's key (s, y or none)."""
        if self.by == "group":
            return s
        return y if self.by == "class" else None

    def bounds(self, keys: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | float:
        """Phase 1 (bound): ``C_{k(i)}`` per example (one float where every example has the same bound)."""
        if keys is None or self.n_keys == 1:
            return float(self._bounds[0])
        return torch.as_tensor(self._bounds, dtype=like.dtype, device=like.device)[keys]

    def clip(self, model, loss_fn, X, y, bounds, method, valid=None):
        """Phase 2 (clip): ``Σ_i g_i·min(1, C_i/‖g_i‖)`` and the unclipped per-example norms ``‖g_i‖``
        (``valid``: the rows after it are padding, :func:`~dpfair.nn.clipped_gradient_sum`)."""
        return clipped_gradient_sum(model, loss_fn, X, y, bounds, method, valid=valid)

    def statistics(self, norms: torch.Tensor, keys: torch.Tensor | None) -> torch.Tensor | None:
        """The step's statistics (released in phase 3 with the gradient): a sum over the batch of one row per
        example of L2 norm ≤ ``statistics_sensitivity``; ``None``: none."""
        return None

    def add_noise(self, release, summed: dict[str, torch.Tensor], statistics: torch.Tensor | None,
                  bound: float) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Phase 3 (noise): one Gaussian :class:`~dpfair.privacy.Release` of the clipped sum (bound ``C_max``)
        and, if any, the statistics: ``(noisy sum, noisy statistics or None)``.

        With statistics the blocks' bounds are ``C_max/√(1−r)`` and ``Δ_stats/√r``: one example moves the pair by
        at most ``√((1−r) + r) = 1`` noise unit, so the step is one Gaussian event of multiplier σ (module
        docstring); without, the sum alone at ``σ·C_max`` (Abadi et al. 2016, Alg. 1, line "add noise").
        """
        if statistics is None:
            return release.noisy_sum(summed, bound=bound), None
        share = self.statistics_share
        noisy, released = release.noisy_sum([summed, statistics], bound=[
            bound / math.sqrt(1.0 - share), self.statistics_sensitivity / math.sqrt(share)])
        return noisy, released

    def scale(self, noisy: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Phase 4 (scale): the noisy sum over the expected batch size ``q·N`` (public, never the realised size,
        which would depend on who was sampled)."""
        return {k: v / self.expected_batch for k, v in noisy.items()}

    def observe(self, released: torch.Tensor | None) -> None:
        """Accumulate one step's released statistics (in float64 where they were released: on an accelerator,
        no wait for the device until the epoch ends)."""
        if released is not None:
            released = released.detach().double()
            self._stats = released if self._stats is None else self._stats + released
        self._steps += 1

    def end_epoch(self) -> dict:
        """New bounds from the epoch's released statistics; returns what ``history_`` logs for the epoch."""
        if isinstance(self._stats, torch.Tensor):
            self._stats = self._stats.cpu().numpy()
        row = self.update() if self._stats is not None else {}
        self._stats, self._steps = None, 0
        return row

    def update(self) -> dict:
        """The bound phase's epoch update: new ``C_k`` from the epoch's released statistics (post-processing);
        returns what ``history_`` logs. Flat and per-layer clipping keep ``C``."""
        return {}

    # ---- shared helpers ---------------------------------------------------------------------------
    def _one_hot_rows(self, keys, norms: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """Σ_i e_{k(i)} ⊗ columns_i: per-key sums of per-example column vectors (flattened)."""
        k = torch.zeros(len(norms), dtype=torch.long, device=norms.device) if keys is None else keys
        out = norms.new_zeros((self.n_keys, columns.shape[1]))
        out.index_add_(0, k, columns.to(out.dtype))
        return out.reshape(-1)

    def _has_signal(self, totals: np.ndarray, cells: int) -> np.ndarray:
        """Which keys' released totals (each a sum of ``cells`` noisy cells over the epoch's steps) exceed
        three standard deviations of their noise: below that, a key's statistics are mostly noise (a
        small group at a small ε) and it keeps its bound. Decided from released values only."""
        if self.sigma == 0.0:
            return totals > 0
        cell_std = self.sigma * self.statistics_sensitivity / math.sqrt(self.statistics_share)
        return totals > 3.0 * cell_std * math.sqrt(self._steps * cells)


@dataclass
class FlatClipping(ClippingRule):
    """Flat clipping (Abadi et al. 2016), the default: one bound ``C = max_grad_norm`` for every example."""


@dataclass
class PerLayerClipping(ClippingRule):
    """Per-layer clipping (DP-FedAvg, McMahan et al. 2018): each of the m layers clipped to ``C_j = C/√m``.

    The layers are the modules holding trainable parameters (a ``Linear``'s weight
    and bias are one layer), so ``√(Σ_j C_j²) = C`` bounds the example's whole
    gradient, as flat clipping's C does; with one layer it is flat clipping.
    The ghost path clips each layer from its own per-example norms, as the vmap path does.
    """

    name: ClassVar[str] = "per_layer"

    def _setup(self, model) -> None:
        self._layers = layer_groups(model)

    def clip(self, model, loss_fn, X, y, bounds, method, valid=None):
        return clipped_gradient_sum(model, loss_fn, X, y, bounds, method, layers=self._layers, valid=valid)


def _fraction(numerator: np.ndarray, total: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Noisy count ratios, clipped to [0, 1]; NaN where the total is not ``usable`` (see ``_has_signal``)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(usable, np.clip(numerator / np.where(usable, total, 1.0), 0.0, 1.0), np.nan)


@dataclass
class QuantileClipping(ClippingRule):
    """Opt-Q (FairDP appendix C.1): C_k tracks the γ-quantile of the per-example norms of class k.

    FairDP derives ``γ = 1 − √(2/π)·σ/e`` from Amin et al. (2019)'s
    bias–variance argument, refined per class. The appendix does not define e;
    we read it as Euler's number (``γ ≈ 0.71`` at σ = 1) and floor γ at 0.1
    (σ ≥ 3.4 would make it negative); pass ``quantile`` to choose γ yourself.

    The quantile is estimated privately as Andrew et al. (2021, "Differentially
    private learning with adaptive clipping") do: each step releases, per key,
    the count of examples with ``‖g_i‖ ≤ C_k`` and the count of examples (a row
    ``(1[‖g_i‖ ≤ C_k], 1)`` per example: sensitivity √2), and the geometric update
    ``C_k ← C_k · exp(−η (b̃_k − γ))`` with ``b̃_k`` the released fraction runs once
    per epoch on the epoch's accumulated counts (Andrew et al. update every round;
    per epoch, a small class has enough examples for its fraction to be read
    through the noise). ``η = learning_rate``; C_k stays within
    ``[min_bound, max_bound]`` × ``max_grad_norm`` (public).
    """

    name: ClassVar[str] = "quantile"
    by: str = "class"
    statistics_share: float = 0.05
    quantile: float | None = None
    learning_rate: float = 1.0
    min_bound: float = 1.0 / 64
    max_bound: float = 16.0
    statistics_sensitivity: ClassVar[float] = math.sqrt(2.0)
    statistics_name: ClassVar[str] = "counts under the bound per key"
    parameter_constraints: ClassVar[dict] = {
        **ClippingRule.parameter_constraints,
        "quantile": [None, Interval(float, 0, 1, closed="neither")],
        "learning_rate": [Interval(float, 0, None, closed="neither")],
        "min_bound": [Interval(float, 0, 1, closed="right", note="a multiple of max_grad_norm")],
        "max_bound": [Interval(float, 1, None, closed="left", note="a multiple of max_grad_norm")],
    }

    @property
    def target(self) -> float:
        if self.quantile is not None:
            return float(self.quantile)
        return max(0.1, 1.0 - math.sqrt(2.0 / math.pi) * self.gradient_noise_multiplier / math.e)

    def statistics(self, norms, keys):
        below = (norms <= self.bounds(keys, norms)).to(norms.dtype)
        return self._one_hot_rows(keys, norms, torch.stack([below, torch.ones_like(below)], 1))

    def update(self) -> dict:
        counts = self._stats.reshape(self.n_keys, 2)
        fraction = _fraction(counts[:, 0], counts[:, 1], self._has_signal(counts[:, 1], 1))
        step = np.where(np.isnan(fraction), 0.0, fraction - self.target)
        self._bounds = np.clip(self._bounds * np.exp(-self.learning_rate * step),
                               self.min_bound * self.c0, self.max_bound * self.c0)
        return {"unclipped_fraction": fraction}


@dataclass
class DPSGDFClipping(ClippingRule):
    """DPSGD-F (Xu, Du and Wu 2021), as FairDP states it: ``C_k = C₀ (1 + p_k/q_k)``.

    ``p_k/q_k`` is the fraction of group k's examples whose norm exceeds C₀; each
    step releases, per key, the count of examples above C₀ and the count of
    examples (sensitivity √2), and the bounds follow once per epoch from the
    epoch's counts. ``C_k ∈ [C₀, 2C₀]``; the noise covers ``max_k C_k``
    (Xu et al. add noise for the largest group bound too).
    """

    name: ClassVar[str] = "dpsgd_f"
    by: str = "group"
    statistics_share: float = 0.05
    statistics_sensitivity: ClassVar[float] = math.sqrt(2.0)
    statistics_name: ClassVar[str] = "counts above C0 per key"

    def statistics(self, norms, keys):
        above = (norms > self.c0).to(norms.dtype)
        return self._one_hot_rows(keys, norms, torch.stack([above, torch.ones_like(above)], 1))

    def update(self) -> dict:
        counts = self._stats.reshape(self.n_keys, 2)
        fraction = _fraction(counts[:, 0], counts[:, 1], self._has_signal(counts[:, 1], 1))
        self._bounds = np.where(np.isnan(fraction), self._bounds, self.c0 * (1.0 + np.nan_to_num(fraction)))
        return {"clipped_fraction": fraction}


@dataclass
class FairDPClipping(ClippingRule):
    """FairDP: per-group bounds C_k minimising Theorem 1's bias + variance for each group, every epoch.

    Each step releases a histogram of the batch's per-example norms per group
    (one-hot row per example over ``groups × (bins + 1)`` cells: sensitivity 1);
    the bins' edges are the public candidate bounds
    ``max_grad_norm · geomspace(min_bound, max_bound, bins)``. At the end of an
    epoch, for each group k, with the epoch's histogram (bins' geometric
    midpoints, noisy counts clipped at 0):

    ``C_k = argmin_C 2(1 + 1/(μL))·‖∇f‖·b_k(C) + b_k(C)² + σ_g² C² d / B²``

    over the candidates (:func:`dpfair.fairness.bias_variance.bias_variance_terms`),
    where ``b_k`` is the mean excess norm over group k's examples, μ the learning
    rate, L ``smoothness`` (None: ``L = 1/μ``), d the number of parameters, B the
    expected batch size and ‖∇f‖ replaced by its upper bound ``mean_i ‖g_i‖`` read
    off the histogram of all groups (so the bias term stays an upper bound). A group whose released count does not
    exceed three standard deviations of its noise keeps its bound (its histogram
    would be mostly noise), as in the count-based rules. Everything the update
    reads is released, so the bounds and the trace in ``history_`` (bias and
    variance per group) are post-processing.
    """

    name: ClassVar[str] = "fairdp"
    by: str = "group"
    statistics_share: float = 0.05
    bins: int = 24
    min_bound: float = 1.0 / 16
    max_bound: float = 16.0
    smoothness: float | None = None
    statistics_sensitivity: ClassVar[float] = 1.0
    statistics_name: ClassVar[str] = "norm histogram per key"
    parameter_constraints: ClassVar[dict] = {
        **ClippingRule.parameter_constraints,
        "bins": [Interval(int, 2, None, closed="left")],
        "min_bound": [Interval(float, 0, 1, closed="right", note="a multiple of max_grad_norm")],
        "max_bound": [Interval(float, 1, None, closed="left", note="a multiple of max_grad_norm")],
        "smoothness": [None, Interval(float, 0, None, closed="neither")],
    }

    def _setup(self, model) -> None:
        self._edges = self.c0 * np.geomspace(self.min_bound, self.max_bound, self.bins)
        ratio = self._edges[1] / self._edges[0]
        lower = np.concatenate([[self._edges[0] / ratio], self._edges])
        self._values = lower * math.sqrt(ratio)  # each bin's geometric midpoint (the open last bin: one step up)

    def statistics(self, norms, keys):
        edges = torch.as_tensor(self._edges, dtype=norms.dtype, device=norms.device)
        cell = torch.bucketize(norms, edges, right=True)  # 0 .. bins
        rows = torch.nn.functional.one_hot(cell, self.bins + 1)
        return self._one_hot_rows(keys, norms, rows)

    def update(self) -> dict:
        raw = self._stats.reshape(self.n_keys, self.bins + 1)
        usable = self._has_signal(raw.sum(axis=1), self.bins + 1)
        hist = np.clip(raw, 0.0, None)
        # ‖∇f‖ = ‖mean_i g_i‖ ≤ mean_i ‖g_i‖ (triangle inequality), read off the released histogram:
        # Theorem 1's bias stays an upper bound (an estimate of ‖∇f‖ itself could fall below it)
        grad = float(hist.sum(axis=0) @ self._values / hist.sum()) if hist.sum() > 0 else 0.0
        bias_row, variance_row = [], []
        for k in range(self.n_keys):
            if not usable[k]:
                bias_row.append(math.nan)
                variance_row.append(math.nan)
                continue
            bias, variance = bias_variance_terms(
                self._values, self._edges, counts=hist[k], noise_multiplier=self.gradient_noise_multiplier,
                n_params=self.n_params, batch_size=self.expected_batch, learning_rate=self.step_size,
                smoothness=self.smoothness, gradient_norm=grad)
            best = int(np.argmin(bias + variance))
            self._bounds[k] = self._edges[best]
            bias_row.append(float(bias[best]))
            variance_row.append(float(variance[best]))
        return {"gradient_norm_bound": grad, "clipping_bias": np.array(bias_row),
                "noise_variance": np.array(variance_row)}


#: Every rule by name, each on the model files' allow-list (a fitted DP-SGD holds its rule).
CLIPPING_RULES = {cls.name: register_dataclass(cls) for cls in (FlatClipping, PerLayerClipping, QuantileClipping,
                                                                DPSGDFClipping, FairDPClipping)}


def make_clipping_rule(clipping) -> ClippingRule:
    """A rule from a name (``"flat"``, ``"per_layer"``, ``"quantile"``, ``"dpsgd_f"``, ``"fairdp"``) or a rule."""
    if isinstance(clipping, ClippingRule):
        return clipping
    if isinstance(clipping, str) and clipping in CLIPPING_RULES:
        return CLIPPING_RULES[clipping]()
    raise ValueError(f"clipping must be one of {', '.join(CLIPPING_RULES)} or a ClippingRule "
                     f"(e.g. FairDPClipping(statistics_share=0.1)), got {clipping!r}")
