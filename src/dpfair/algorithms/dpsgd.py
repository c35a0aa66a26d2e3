"""DP-SGD (Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016, Algorithm 1), in phases.

Each step draws a secret Poisson sample with rate ``q = batch_size / n`` and
runs four phases, as Opacus's optimizers do; a clipping rule
(:mod:`dpfair.algorithms.clipping`: flat, per-layer, Opt-Q, DPSGD-F, FairDP)
overrides the ones it changes:

1. **bound** (:meth:`DPSGDClassifier._per_sample_bounds`): the clipping bound
   ``C_i`` of every sampled example (flat clipping: ``C`` for everyone; the
   group-aware rules: the bound of the example's group or class);
2. **clip**: the sum of the per-example gradients, each scaled to norm at most
   its ``C_i`` (:func:`dpfair.nn.clipped_gradient_sum`, ghost norms where exact;
   per-layer clipping clips each layer). On an accelerator the batch is padded up
   to a bucketed size (:func:`dpfair.nn.padded_size`) with rows whose clip coefficient is 0,
   which add exactly nothing: a Poisson batch changes size every step, and each new
   size made cuDNN plan its convolutions again;
3. **noise**: one :class:`~dpfair.privacy.Release` adds ``N(0, σ_g²C_max²I)``,
   where ``C_max`` (:meth:`DPSGDClassifier._release_bound`) bounds every
   ``C_i`` and is fixed before the step sees its batch (public, or a function of
   earlier releases) — together with the rule's per-step statistics, if any,
   in the same Gaussian release;
4. **scale** (:meth:`DPSGDClassifier._scale`): divide by the expected batch size
   ``q·n`` (public) and hand the gradient to the optimizer.

Privacy: record-level, add/remove-one. Each step is a Poisson-sampled Gaussian
with noise multiplier σ on bound ``C_max`` (statistics folded in as the
clipping module explains: σ_g = σ/√(1−r)); the T steps compose on the PLD
accountant and σ is the smallest value whose composed ε is at most the target.

The sensitive attribute is used only by the rules keyed on it (``by="group"``);
fairness metrics of the model are measured afterwards.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from dpfair.algorithms.base import TorchClassifier
from dpfair.algorithms.clipping import make_clipping_rule
from dpfair.algorithms.signal import warn_if_too_few_records
from dpfair.nn import assign_grads, padded_size, pads, trainable_params
from dpfair.privacy import Part, PrivacyPlan
from dpfair.validation import check_delta, check_positive

STEP = "dp-sgd step"

def cross_entropy_one(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The per-example loss of :mod:`dpfair.nn.per_sample` (a batch of one)."""
    return F.cross_entropy(logits, y, reduction="sum")


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
    verbose : a progress bar on stderr over the steps, with the ε spent so far (:mod:`dpfair.progress`).

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

    # ---- the phases a clipping rule overrides ------------------------------------------------
    def _plan_parts(self) -> tuple[Part, ...]:
        """The plan: T Poisson-sampled Gaussian steps (a rule's statistics ride in the same releases)."""
        return (Part(self._step_name, count=self.n_steps_, sampling_probability=self.sampling_probability_),)

    def _release_bound(self) -> float:
        """``C_max``: a bound on every per-example clipping bound, fixed before the step sees its batch."""
        return self._rule.release_bound()

    def _per_sample_bounds(self, step: int, idx: torch.Tensor, y: torch.Tensor, s) -> torch.Tensor | float:
        """Phase 1: the clipping bound of each sampled example (flat: C)."""
        return self._rule.bounds(self._rule.keys(y, s), like=self._Xt)

    def _scale(self, noisy: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Phase 4: the noisy sum over the expected batch size ``q·n`` (public, never the realised size)."""
        return {k: v / self._expected_batch for k, v in noisy.items()}

    def _check_rule(self, s):
        rule = make_clipping_rule(self.clipping)
        rule.check()
        if rule.by == "group" and s is None:
            raise ValueError(f"clipping={rule.name!r} sets one bound per group: call fit(X, y, "
                             "sensitive_features=s), or key it on the class (by='class')")
        # the ledger names what each step releases: the gradient, and the rule's statistics with it
        self._step_name = STEP if rule.statistics_name is None else f"{STEP} (gradient + {rule.statistics_name})"
        return rule

    def _start_rule(self, rule) -> None:
        keys = {"group": self.groups_, "class": self.classes_}.get(rule.by)
        self._rule = rule.start(
            max_grad_norm=float(self.max_grad_norm), n_keys=1 if keys is None else len(keys),
            noise_multiplier=self.noise_multiplier_, n_params=sum(p.numel() for p in trainable_params(self.model_)
                                                                  .values()),
            expected_batch=self._expected_batch, learning_rate=float(self.learning_rate), model=self.model_)
        self._key_names = ["all"] if keys is None else [str(k) for k in keys]
        self.gradient_noise_multiplier_ = self._rule.gradient_noise_multiplier

    def _by_key(self, values) -> dict[str, float]:
        return {k: float(v) for k, v in zip(self._key_names, np.atleast_1d(values))}

    # ---- the loop ---------------------------------------------------------------------------
    def check_hyperparameters(self) -> DPSGDClassifier:
        """The hyper-parameters alone (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`)."""
        super().check_hyperparameters()
        check_positive(self.max_grad_norm, "max_grad_norm")
        return self

    def _fit(self, X, y, s):
        rule = self._check_rule(s)
        n = X.shape[0]
        N = n  # public size: q, T and the scale of the noisy sum
        if self.sample_size is not None:  # a public N fixes them: no neighbour changes them
            N = check_positive(self.sample_size, "sample_size", integer=True)
            if self.delta is None:
                self.delta_ = check_delta(1.0 / float(N) ** 2)
        self.sampling_probability_ = min(1.0, self.batch_size / N)
        self.n_steps_ = math.ceil(self.epochs / self.sampling_probability_)
        self._calibrate(PrivacyPlan(self._plan_parts()))
        self.noise_multiplier_ = self._sigmas[self._step_name]
        self._expected_batch = self.sampling_probability_ * N

        self.model_ = self._build_model(len(self.classes_))
        if self.noise_multiplier is None:  # calibrated to ε (a σ given by hand is the user's choice)
            warn_if_too_few_records("DP-SGD", N, sum(p.numel() for p in trainable_params(self.model_).values()),
                                    self.epsilon_target_, self.delta_)
        self._start_rule(rule)
        rule = self._rule
        opt = self._make_optimizer(self.model_.parameters())
        self._Xt, yt = self._tensor(X), self._tensor(y, torch.long)
        st = None if s is None else self._tensor(s, torch.long)
        release = self._release(self._step_name)
        share = rule.statistics_share if rule.statistics_sensitivity else 0.0
        steps_per_epoch = max(1, round(1 / self.sampling_probability_))
        pad = pads(self.device_)
        running, seen = 0.0, 0
        self.model_.train()
        bar = self._progress(self.n_steps_)
        for step in range(self.n_steps_):
            idx = self._rows(release.sample(n))
            yb, sb = yt[idx], None if st is None else st[idx]
            bound = self._release_bound()
            bounds = self._per_sample_bounds(step, idx, yb, sb)
            # the noise covers C_max: a rule's bounds are held to it whatever they compute
            bounds = bounds.clamp(max=bound) if isinstance(bounds, torch.Tensor) else min(float(bounds), bound)
            Xb, yrows, b = self._Xt[idx], yb, len(idx)
            if pad and b:  # padding rows (zeros, label 0: nobody's data) whose clipped gradients are exactly 0
                extra = padded_size(b, self._expected_batch) - b
                Xb = torch.cat([Xb, Xb.new_zeros(extra, *Xb.shape[1:])])
                yrows = torch.cat([yb, yb.new_zeros(extra)])
                if isinstance(bounds, torch.Tensor):
                    bounds = torch.cat([bounds, bounds.new_full((extra,), bound)])
            summed, norms = rule.clip(self.model_, cross_entropy_one, Xb, yrows, bounds, self.clip_method,
                                      valid=b if pad else None)
            norms = norms[:b]
            stats = rule.statistics(norms, rule.keys(yb, sb))
            if stats is None:
                noisy, noisy_stats = release.noisy_sum(summed, bound=bound), None
            else:  # one Gaussian release of (gradient, statistics): sensitivity √((1−r) + r) = 1 in noise units
                noisy, noisy_stats = release.noisy_sum(
                    [summed, stats], bound=[bound / math.sqrt(1.0 - share),
                                            rule.statistics_sensitivity / math.sqrt(share)])
            grads = self._scale(noisy)
            assign_grads(self.model_, grads)
            opt.step()
            # Only post-processing of released values is logged: history_ is saved with the model.
            rule.observe(noisy_stats)
            running += torch.sqrt(sum((g**2).sum() for g in grads.values())).detach()  # no sync with a device
            seen += 1
            bar.update()
            if (step + 1) % steps_per_epoch == 0 or step + 1 == self.n_steps_:
                row = {"step": step + 1, "noisy_gradient_norm": float(running) / seen}
                if rule.by != "none":
                    row["clipping_bounds"] = self._by_key(rule._bounds)
                row.update({k: self._by_key(v) if isinstance(v, np.ndarray) else v
                            for k, v in rule.end_epoch().items()})
                self.history_.append(row)
                running, seen = 0.0, 0
                self._end_epoch(epoch=len(self.history_), step=step + 1, steps=self.n_steps_)
        self.model_.eval()
        self.clipping_bounds_ = self._by_key(rule._bounds)
        self._finish_privacy()
