"""DP-SGD (Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016, Algorithm 1), in phases.

Each step draws a secret Poisson sample with rate ``q = batch_size / N`` and runs the four phases of
:class:`DPSGDStep`, as Opacus's ``DPOptimizer`` runs ``clip_and_accumulate``, ``add_noise`` and ``scale_grad``
before its optimizer steps. The phases are methods of a clipping rule (:mod:`dpfair.algorithms.clipping`: flat,
per-layer, Opt-Q, DPSGD-F, FairDP), and each rule overrides the ones it changes:

1. **bound**: the clipping bound ``C_i`` of every sampled example (flat clipping: ``C`` for everyone; the
   group-aware rules: the bound of the example's group or class), held to ``C_max``, which bounds every
   ``C_i`` and is fixed before the step sees its batch (public, or a function of earlier releases);
2. **clip**: ``Σ_i g_i·min(1, C_i/‖g_i‖)`` (Algorithm 1's "clip gradient"; :func:`dpfair.nn.clipped_gradient_sum`,
   ghost norms where exact; per-layer clipping clips each layer). On an accelerator the batch is padded up to a
   bucketed size (:func:`dpfair.nn.padded_size`) with rows whose clip coefficient is 0, which add exactly
   nothing: a Poisson batch changes size every step, and each new size made cuDNN plan its convolutions again;
3. **noise**: one :class:`~dpfair.privacy.Release` adds ``N(0, σ_g²C_max²I)`` ("add noise"), with the rule's
   per-step statistics, if any, in the same Gaussian release;
4. **scale**: divide by the expected batch size ``q·N`` (public), then the optimizer takes the step ("descent").

Privacy: record-level, add/remove-one. Each step is a Poisson-sampled Gaussian with noise multiplier σ on
bound ``C_max`` (statistics folded in as the clipping module explains: σ_g = σ/√(1−r)); the T steps compose on
the accountant and σ is the smallest value whose composed ε is at most the target. Only released values reach
the optimizer, the rule's bounds and ``history_``.

The sensitive attribute is used only by the rules keyed on it (``by="group"``);
fairness metrics of the model are measured afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from dpfair.algorithms.base import TorchClassifier
from dpfair.algorithms.clipping import CLIPPING_RULES, ClippingRule, make_clipping_rule
from dpfair.algorithms.signal import warn_if_too_few_records
from dpfair.utils.constraints import Instances, Interval, Options
from dpfair.nn import CLIP_METHODS, assign_grads, padded_size, pads, trainable_params
from dpfair.privacy import Part, PrivacyPlan, Release

STEP = "dp-sgd step"


def cross_entropy_one(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The per-example loss of :mod:`dpfair.nn.per_sample` (a batch of one)."""
    return F.cross_entropy(logits, y, reduction="sum")


def step_name(rule: ClippingRule) -> str:
    """The ledger's name for a step: what it releases, the gradient and the rule's statistics with it."""
    return STEP if rule.statistics_name is None else f"{STEP} (gradient + {rule.statistics_name})"


@dataclass
class DPSGDStep:
    """One step of Algorithm 1 on a released Poisson sample: the rule's phases in order, then the optimizer.

    ``rule`` is a started :class:`~dpfair.algorithms.clipping.ClippingRule` (it supplies every phase);
    ``X``, ``y``, ``s`` the training tensors (``s``: ``None`` without groups); ``pad``: pad the batch to a
    bucketed size (an accelerator). Whatever bounds a rule computes, the step holds them to the rule's
    ``C_max`` — the bound it hands the noise phase — so the release's sensitivity holds by construction.
    """

    rule: ClippingRule
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    release: Release
    X: torch.Tensor
    y: torch.Tensor
    s: torch.Tensor | None = None
    clip_method: str = "auto"
    pad: bool = False

    def __call__(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """Train on the rows ``idx`` (the release's Poisson sample); returns the released, scaled gradient."""
        rule, b = self.rule, len(idx)
        y, s = self.y[idx], None if self.s is None else self.s[idx]
        keys = rule.keys(y, s)
        bound = rule.release_bound()
        bounds = rule.bounds(keys, like=self.X)  # 1. bound, held to C_max:
        bounds = bounds.clamp(max=bound) if isinstance(bounds, torch.Tensor) else min(float(bounds), bound)
        X, rows, bounds = self._padded(self.X[idx], y, bounds, bound)
        summed, norms = rule.clip(self.model, cross_entropy_one, X, rows, bounds, self.clip_method,
                                  valid=b if self.pad else None)  # 2. clip
        noisy, released = rule.add_noise(self.release, summed, rule.statistics(norms[:b], keys), bound)  # 3. noise
        grads = rule.scale(noisy)  # 4. scale
        assign_grads(self.model, grads)
        self.optimizer.step()
        rule.observe(released)
        return grads

    def _padded(self, X, y, bounds, bound):
        """Padding rows (zeros, label 0, bound ``C_max``: nobody's data) whose clipped gradients are exactly 0."""
        b = len(X)
        if not (self.pad and b):
            return X, y, bounds
        extra = padded_size(b, self.rule.expected_batch) - b
        X = torch.cat([X, X.new_zeros(extra, *X.shape[1:])])
        y = torch.cat([y, y.new_zeros(extra)])
        if isinstance(bounds, torch.Tensor):
            bounds = torch.cat([bounds, bounds.new_full((extra,), bound)])
        return X, y, bounds


class DPSGDClassifier(TorchClassifier):
    """Record-level (ε, δ)-DP classifier trained by DP-SGD with a clipping rule.

    Parameters
    ----------
    model : "logistic", "mlp", "cnn" or a ``torch.nn.Module`` returning logits.
    epsilon, delta : the target budget; ``delta=None`` means ``1/n²``; ``epsilon=inf`` trains without noise.
    max_grad_norm : the clipping bound C (the rules' starting or base bound C₀).
    clipping : "flat" (default), "per_layer", "quantile" (Opt-Q), "dpsgd_f", "fairdp", or a
        :class:`~dpfair.algorithms.clipping.ClippingRule` with its settings (e.g.
        ``FairDPClipping(statistics_share=0.1)``). The group-keyed rules need ``sensitive_features``.
    noise_multiplier : σ of each step; ``None`` calibrates it to (ε, δ) on ``accountant`` over all steps.
    batch_size : expected Poisson batch size (``q = batch_size / n``).
    epochs : passes over the data; the number of steps is ``ceil(epochs / q)``.
    learning_rate, optimizer, momentum : the step on the released gradient: "sgd" (with ``momentum``) or
        "adam" at ``learning_rate`` (post-processing of the releases).
    weight_decay : L2 regularisation λ (adds λθ to the released gradient; free).
    clip_method : "auto" (ghost norms where exact, else ``torch.func``), "vmap" or "ghost".
    accountant : "pld" (privacy loss distributions, tight; the default) or "rdp": the accountant that calibrates
        the noise and reports ``privacy_spent_``.
    model_kwargs : keyword arguments of :func:`dpfair.nn.make_model` for a named model (e.g. ``hidden=(64, 64)``).
    device : "cpu" (default), "cuda", "cuda:N" or "auto" (CUDA when available).
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` where the data are private (s; y under "record").
    sample_size : N, a public number of records that sets the sampling rate ``q = batch_size / N``, the
        number of steps and the gradient's scale (and δ = 1/N² by default). ``None``: the number of rows n,
        public in dpfair's model; under add/remove one record then changes q and the step count, which an
        audit on small data detects (``dpfair audit`` fixes N for its neighbours).
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks; slower).
    random_state : seeds public randomness only (initialisation); Poisson batches and every noise draw
        come from a secret generator made fresh for each fit.
    verbose : a progress bar on stderr over the steps, with the ε spent so far (:mod:`dpfair.utils.progress`).

    A fit calibrated to ε warns when √(p·ln(1/δ))/(N·ε) > 0.02 (p parameters): too few records for that
    privacy to expect better than a constant predictor (:func:`warn_if_too_few_records`).

    Fitted attributes besides the usual: ``noise_multiplier_`` (σ of the step),
    ``gradient_noise_multiplier_`` (σ_g, the gradient's share), ``clipping_bounds_``
    (the final bound of each group / class), ``history_`` (per epoch: the mean
    released gradient norm and, for the adaptive rules, the bounds and what
    they read, all post-processing of releases).
    """

    _private = True
    privacy_unit = "record"
    _certificate = "dpsgd"  # Mangold et al.'s Lemma 4.2 (dpfair.bounds.certify)
    parameter_constraints: ClassVar[dict] = {
        **TorchClassifier.parameter_constraints,
        "max_grad_norm": [Interval(float, 0, None, closed="neither")],
        "clipping": [Options(*CLIPPING_RULES), Instances(ClippingRule, "a ClippingRule (e.g. "
                                                                     "FairDPClipping(statistics_share=0.1))")],
        "clip_method": [Options(*CLIP_METHODS)],
        "sample_size": [None, Interval(int, 0, None, closed="neither", note="the public number of records")],
    }

    def __init__(self, model="logistic", *, epsilon=1.0, delta=None, max_grad_norm=1.0, clipping="flat",
                 noise_multiplier=None, batch_size=256, epochs=20, learning_rate=0.5, optimizer="sgd", momentum=0.0,
                 weight_decay=0.0, accountant="pld", clip_method="auto", model_kwargs=None, device="cpu", groups=None,
                 classes=None, sample_size=None, secure_mode=False, random_state=None, verbose=False):
        self.model = model
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.clipping = clipping
        self.noise_multiplier = noise_multiplier
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.accountant = accountant
        self.clip_method = clip_method
        self.model_kwargs = model_kwargs
        self.device = device
        self.groups = groups
        self.classes = classes
        self.sample_size = sample_size
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    def check_hyperparameters(self) -> DPSGDClassifier:
        """The declared constraints (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), then
        the clipping rule's own settings (:meth:`~dpfair.algorithms.clipping.ClippingRule.check`)."""
        super().check_hyperparameters()
        make_clipping_rule(self.clipping).check()
        return self

    def _check_rule(self, s) -> ClippingRule:
        rule = make_clipping_rule(self.clipping)
        rule.check()
        if rule.by == "group" and s is None:
            raise ValueError(f"clipping={rule.name!r} sets one bound per group: call fit(X, y, "
                             "sensitive_features=s), or key it on the class (by='class')")
        return rule

    def _public_size(self, n: int) -> int:
        """N: the rows, or the public ``sample_size`` (which then also sets the default δ = 1/N²)."""
        return n if self.sample_size is None else int(self.sample_size)

    def _privacy_plan(self, shape) -> PrivacyPlan:
        """``ceil(epochs / q)`` Poisson-sampled Gaussian steps at ``q = batch_size / N`` (N: :meth:`_public_size`),
        the rule's statistics riding in each step's release."""
        q = min(1.0, self.batch_size / self._public_size(shape.n))
        rule = make_clipping_rule(self.clipping)
        rule.check()
        return PrivacyPlan((Part(step_name(rule), count=math.ceil(self.epochs / q), sampling_probability=q),))

    def _key_names(self, rule: ClippingRule) -> list[str]:
        keys = {"group": self.groups_, "class": self.classes_}.get(rule.by)
        return ["all"] if keys is None else [str(k) for k in keys]

    def _by_key(self, rule: ClippingRule, values) -> dict[str, float]:
        return {k: float(v) for k, v in zip(self._key_names(rule), np.atleast_1d(values))}

    def _epoch_row(self, rule: ClippingRule, step: int, mean_norm: float) -> dict:
        """``history_``'s row for an epoch: the mean released gradient norm, the rule's bounds, then its epoch
        update (new bounds) and what that read. Post-processing of releases only: it is saved with the model."""
        row = {"step": step, "noisy_gradient_norm": mean_norm}
        if rule.by != "none":
            row["clipping_bounds"] = self._by_key(rule, rule.current_bounds)
        row.update({k: self._by_key(rule, v) if isinstance(v, np.ndarray) else v for k, v in rule.end_epoch().items()})
        return row

    def _fit(self, ctx, X, y, s):
        rule = self._check_rule(s)
        n = X.shape[0]
        N = self._public_size(n)  # public: q, T and the scale of the noisy sum
        name = step_name(rule)  # the rule's statistics ride in the steps' releases
        self.noise_multiplier_ = ctx.calibrate(self.plan(ctx.shape))[name]
        self.sampling_probability_, self.n_steps_ = self.privacy_plan_[name].sampling_probability, \
            self.privacy_plan_[name].count

        self.model_ = self._build_model(len(self.classes_), ctx.np_rng)
        n_params = sum(p.numel() for p in trainable_params(self.model_).values())
        if self.noise_multiplier is None:  # calibrated to ε (a σ given by hand is the user's choice)
            warn_if_too_few_records("DP-SGD", N, n_params, self.epsilon_target_, self.delta_)
        rule = rule.start(max_grad_norm=float(self.max_grad_norm), n_keys=len(self._key_names(rule)),
                          noise_multiplier=self.noise_multiplier_, n_params=n_params,
                          expected_batch=self.sampling_probability_ * N, learning_rate=float(self.learning_rate),
                          model=self.model_)
        self.gradient_noise_multiplier_ = rule.gradient_noise_multiplier
        step = DPSGDStep(rule, self.model_, self._make_optimizer(self.model_.parameters()), ctx.release(name),
                         self._tensor(X), self._tensor(y, torch.long),
                         None if s is None else self._tensor(s, torch.long), self.clip_method, pads(self.device_))
        steps_per_epoch = max(1, round(1 / self.sampling_probability_))
        running, seen = 0.0, 0
        self.model_.train()
        bar = ctx.progress(self.n_steps_)
        for t in range(1, self.n_steps_ + 1):
            grads = step(self._rows(step.release.sample(n)))  # a secret Poisson sample, then the four phases
            running += torch.sqrt(sum((g**2).sum() for g in grads.values())).detach()  # no sync with a device
            seen += 1
            bar.update()
            if t % steps_per_epoch == 0 or t == self.n_steps_:
                self.history_.append(self._epoch_row(rule, t, float(running) / seen))
                running, seen = 0.0, 0
                ctx.end_epoch(epoch=len(self.history_), step=t, steps=self.n_steps_)
        self.model_.eval()
        self.clipping_bounds_ = self._by_key(rule, rule.current_bounds)
        self._finish_privacy()
