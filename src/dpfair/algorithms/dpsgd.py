"""DP-SGD (Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016, Algorithm 1), in phases.

Each step draws a secret Poisson sample with rate ``q = batch_size / n`` and
runs four phases, as Opacus's optimizers do, each a method a variant may
override:

1. **bound** (:meth:`DPSGDClassifier._per_sample_bounds`): the clipping bound
   ``C_i`` of every sampled example (flat clipping: ``C`` for everyone);
2. **clip**: the sum of the per-example gradients, each scaled to norm at most
   its ``C_i`` (:func:`dpfair.nn.clipped_gradient_sum`, ghost norms where exact);
3. **noise**: one :class:`~dpfair.privacy.Release` adds ``N(0, σ²C_max²I)``,
   where ``C_max`` (:meth:`DPSGDClassifier._release_bound`) bounds every
   ``C_i`` whatever the data — the per-person bound of the release;
4. **scale** (:meth:`DPSGDClassifier._scale`): divide by the expected batch size
   ``q·n`` (public) and hand the gradient to the optimizer.

Privacy: record-level, add/remove-one. Each step is a Poisson-sampled Gaussian
with noise multiplier σ on bound ``C_max``; the T steps compose on the PLD
accountant and σ is the smallest value whose composed ε is at most the target.
A rule whose bounds are chosen from private statistics must release those
statistics through its own planned parts (:meth:`DPSGDClassifier._plan_parts`).

The sensitive attribute is not used by flat-clipping DP-SGD; fairness metrics
of its model are measured afterwards.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from dpfair.algorithms.base import TorchClassifier
from dpfair.nn import assign_grads, clipped_gradient_sum
from dpfair.privacy import Part, PrivacyPlan
from dpfair.validation import check_positive

STEP = "dp-sgd step"


def cross_entropy_one(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The per-example loss of :mod:`dpfair.nn.per_sample` (a batch of one)."""
    return F.cross_entropy(logits, y, reduction="sum")


class DPSGDClassifier(TorchClassifier):
    """Record-level (ε, δ)-DP classifier trained by DP-SGD with flat clipping.

    Parameters
    ----------
    model : "logistic", "mlp", "cnn" or a ``torch.nn.Module`` returning logits.
    epsilon, delta : the target budget; ``delta=None`` means ``1/n²``; ``epsilon=inf`` trains without noise.
    max_grad_norm : the clipping bound C.
    noise_multiplier : σ; ``None`` calibrates it to (ε, δ) on ``accountant`` over all steps.
    batch_size : expected Poisson batch size (``q = batch_size / n``).
    epochs : passes over the data; the number of steps is ``ceil(epochs / q)``.
    clip_method : "auto" (ghost norms where exact, else ``torch.func``), "vmap" or "ghost".
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``); ``None`` infers
        them from the data, with a ``PrivacyLeakWarning`` where the data are private (s; y under "record").
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks; slower).
    random_state : seeds public randomness only (initialisation); Poisson batches and every noise draw
        come from a secret generator made fresh for each fit.
    """

    _private = True
    privacy_unit = "record"

    def __init__(self, model="logistic", *, epsilon=1.0, delta=None, max_grad_norm=1.0, noise_multiplier=None,
                 batch_size=256, epochs=20, learning_rate=0.5, optimizer="sgd", momentum=0.0,
                 accountant="pld", clip_method="auto", model_kwargs=None, device="cpu", groups=None, classes=None,
                 secure_mode=False, random_state=None, verbose=False):
        self.model = model
        self.epsilon = epsilon
        self.delta = delta
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.accountant = accountant
        self.clip_method = clip_method
        self.model_kwargs = model_kwargs
        self.device = device
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    # ---- the phases a clipping rule overrides ------------------------------------------------
    def _plan_parts(self) -> tuple[Part, ...]:
        """The plan: T Poisson-sampled Gaussian steps (a rule adds the parts that release its statistics)."""
        return (Part(STEP, count=self.n_steps_, sampling_probability=self.sampling_probability_),)

    def _release_bound(self) -> float:
        """``C_max``: a data-independent bound on every per-example clipping bound."""
        return float(self.max_grad_norm)

    def _per_sample_bounds(self, step: int, idx: torch.Tensor, y: torch.Tensor, s) -> torch.Tensor | float:
        """Phase 1: the clipping bound of each sampled example (flat: C)."""
        return float(self.max_grad_norm)

    def _scale(self, noisy: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Phase 4: the noisy sum over the expected batch size ``q·n`` (public, never the realised size)."""
        return {k: v / self._expected_batch for k, v in noisy.items()}

    # ---- the loop ---------------------------------------------------------------------------
    def _fit(self, X, y, s):
        self._validate_training()
        check_positive(self.max_grad_norm, "max_grad_norm")
        n = X.shape[0]
        self.sampling_probability_ = min(1.0, self.batch_size / n)
        self.n_steps_ = math.ceil(self.epochs / self.sampling_probability_)
        self._calibrate(PrivacyPlan(self._plan_parts()))
        self.noise_multiplier_ = self._sigmas[STEP]
        self._expected_batch = self.sampling_probability_ * n

        self.model_ = self._build_model(len(self.classes_))
        opt = self._make_optimizer(self.model_.parameters())
        Xt, yt = self._tensor(X), self._tensor(y, torch.long)
        st = None if s is None else self._tensor(s, torch.long)
        release = self._release(STEP)
        bound = self._release_bound()
        steps_per_epoch = max(1, round(1 / self.sampling_probability_))
        running, seen = 0.0, 0
        self.model_.train()
        for step in tqdm(range(self.n_steps_), disable=not self.verbose, desc="DP-SGD", unit="step"):
            idx = torch.from_numpy(release.sample(n)).to(self.device_)
            bounds = self._per_sample_bounds(step, idx, yt[idx], None if st is None else st[idx])
            # the noise covers C_max: a rule's bounds are held to it whatever they compute
            bounds = bounds.clamp(max=bound) if isinstance(bounds, torch.Tensor) else min(float(bounds), bound)
            summed, _ = clipped_gradient_sum(self.model_, cross_entropy_one, Xt[idx], yt[idx], bounds,
                                             self.clip_method)
            grads = self._scale(release.noisy_sum(summed, bound=bound))
            assign_grads(self.model_, grads)
            opt.step()
            # Only post-processing of released values is logged: history_ is saved with the model.
            running += float(torch.sqrt(sum((g**2).sum() for g in grads.values())))
            seen += 1
            if (step + 1) % steps_per_epoch == 0 or step + 1 == self.n_steps_:
                self.history_.append({"step": step + 1, "noisy_gradient_norm": running / seen})
                running, seen = 0.0, 0
        self.model_.eval()
        self._finish_privacy()
