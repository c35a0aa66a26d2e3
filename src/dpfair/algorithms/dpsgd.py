"""DP-SGD (Abadi et al., *Deep Learning with Differential Privacy*, CCS 2016, Algorithm 1).

Each step draws a Poisson sample with rate ``q = batch_size / n``, clips every
per-example gradient to L2 norm ``C = max_grad_norm``, and releases the sum
plus ``N(0, σ²C²I)`` (one :func:`~dpfair.privacy.release_gaussian`); the
model steps on that sum divided by the expected batch size ``q·n`` (public).
Privacy: record-level, add/remove-one. Each step is a Poisson-sampled
Gaussian with noise multiplier σ; the T steps compose on the PLD accountant
and σ is the smallest value whose composed ε is at most the target.

The sensitive attribute is not used by DP-SGD; fairness metrics of its model
are measured afterwards. Passing ``sensitive_features`` to ``fit`` only
checks it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from dpfair.algorithms.base import TorchClassifier, poisson_batches
from dpfair.nn import assign_grads, clipped_gradient_sum
from dpfair.privacy import dpsgd_event, release_gaussian
from dpfair.validation import check_positive


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
    """

    _private = True

    def __init__(self, model="logistic", *, epsilon=1.0, delta=None, max_grad_norm=1.0, noise_multiplier=None,
                 batch_size=256, epochs=20, learning_rate=0.5, optimizer="sgd", momentum=0.0,
                 accountant="pld", clip_method="auto", model_kwargs=None, device="cpu", random_state=None,
                 verbose=False):
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
        self.random_state = random_state
        self.verbose = verbose

    privacy_unit = "record"

    def _plan(self, noise_multiplier):
        return dpsgd_event(noise_multiplier, self.sampling_probability_, self.n_steps_)

    def _fit(self, X, y, s):
        self._validate_training()
        C = check_positive(self.max_grad_norm, "max_grad_norm")
        n = X.shape[0]
        self.sampling_probability_ = min(1.0, self.batch_size / n)
        self.n_steps_ = math.ceil(self.epochs / self.sampling_probability_)
        self.noise_multiplier_ = self._calibrated_noise()

        self.model_ = self._build_model(len(self.classes_))
        opt = self._make_optimizer(self.model_.parameters())
        Xt, yt = self._tensor(X), self._tensor(y, torch.long)
        expected_batch = self.sampling_probability_ * n
        steps_per_epoch = max(1, round(1 / self.sampling_probability_))
        batches = poisson_batches(n, self.sampling_probability_, self.n_steps_, self._torch_rng)
        running, seen = 0.0, 0
        self.model_.train()
        for step, idx in enumerate(tqdm(batches, total=self.n_steps_, disable=not self.verbose,
                                        desc="DP-SGD", unit="step")):
            summed, _ = clipped_gradient_sum(self.model_, cross_entropy_one, Xt[idx], yt[idx], C,
                                             self.clip_method)
            noisy = release_gaussian(summed, bound=C, noise_multiplier=self.noise_multiplier_,
                                     generator=self._torch_rng, ledger=self.privacy_ledger_,
                                     sampling_probability=self.sampling_probability_, label="dp-sgd step")
            grads = {k: v / expected_batch for k, v in noisy.items()}
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
