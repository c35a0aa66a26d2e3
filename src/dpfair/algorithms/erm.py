"""Non-private empirical risk minimisation: the reference every private method is compared with.

Minibatch training of the same models with cross-entropy (shuffled epochs).
It spends an infinite privacy budget: its ledger holds one non-private
event and ``privacy_spent_ = (inf, 0)``.
"""

from __future__ import annotations

import dp_accounting as dpa
import torch
import torch.nn.functional as F
from tqdm.auto import trange

from dpfair.algorithms.base import TorchClassifier


class ERMClassifier(TorchClassifier):
    """Non-private classifier (logistic regression, MLP, CNN or any module) trained by minibatch SGD/Adam."""

    def __init__(self, model="logistic", *, batch_size=256, epochs=20, learning_rate=0.01, optimizer="adam",
                 momentum=0.0, weight_decay=0.0, model_kwargs=None, device="cpu", random_state=None,
                 verbose=False):
        self.model = model
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.model_kwargs = model_kwargs
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _fit(self, X, y, s):
        self._validate_training()
        self.model_ = self._build_model(len(self.classes_))
        opt = self._make_optimizer(self.model_.parameters())
        Xt, yt = self._tensor(X), self._tensor(y, torch.long)
        n = X.shape[0]
        self.model_.train()
        for epoch in trange(self.epochs, disable=not self.verbose, desc="ERM", unit="epoch"):
            order = torch.randperm(n, generator=self._torch_rng, device=self.device_)
            total = 0.0
            for start in range(0, n, self.batch_size):
                idx = order[start:start + self.batch_size]
                loss = F.cross_entropy(self.model_(Xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
            self.history_.append({"epoch": epoch + 1, "loss": total / n})
        self.model_.eval()
        self.privacy_ledger_.record(dpa.NonPrivateDpEvent(), "non-private training")
        self._finish_privacy()
