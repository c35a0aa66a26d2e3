"""Non-private empirical risk minimisation: the reference every private method is compared with.

``solver="lbfgs"`` (the default for ``model="logistic"``) minimises the mean
cross-entropy plus ``(weight_decay/2)‖θ‖²`` over the whole training set with
L-BFGS (strong-Wolfe line search) to a gradient tolerance: the exact optimum a
private method approximates, as scikit-learn's ``LogisticRegression`` finds it.
``solver="minibatch"`` (any other model) trains by shuffled minibatch SGD/Adam.
``fit(..., sample_weight=w)`` minimises the weighted mean ``Σ wᵢ ℓᵢ / Σ wᵢ`` instead
(minibatches: each batch's ``Σ wᵢ ℓᵢ`` over its size times the mean weight, an unbiased estimate of it).
It spends an infinite privacy budget: its ledger holds one non-private event and
``privacy_spent_ = (inf, 0)``.
"""

from __future__ import annotations

from typing import ClassVar

import dp_accounting as dpa
import torch
import torch.nn.functional as F

from dpfair.algorithms.base import TorchClassifier
from dpfair.utils.constraints import Interval, Options


class ERMClassifier(TorchClassifier):
    """Non-private classifier (logistic regression, MLP, CNN or any module): full-batch L-BFGS or minibatches.

    Parameters
    ----------
    model : "logistic", "mlp", "cnn" or a ``torch.nn.Module`` returning logits.
    solver : "auto" (L-BFGS for ``model="logistic"``, minibatches otherwise), "lbfgs" or "minibatch".
    max_iter, tol : L-BFGS's iteration cap and its tolerance on the gradient norm.
    batch_size, epochs, learning_rate, optimizer, momentum : the minibatch path ("sgd" with ``momentum``, or
        "adam", at ``learning_rate``).
    weight_decay : L2 regularisation λ of the loss.
    model_kwargs : keyword arguments of :func:`dpfair.nn.make_model` for a named model (e.g. ``hidden=(64, 64)``).
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``), as every dpfair
        estimator takes them; ``None`` infers them from the data (not private here: no warning).
    device : "cpu" (default), "cuda", "cuda:N" or "auto" (CUDA when available).
    random_state : seeds initialisation and minibatch order.
    verbose : a progress bar on stderr (L-BFGS's function evaluations, or the epochs; :mod:`dpfair.utils.progress`).

    ``n_iter_``: L-BFGS iterations run, or the epochs of the minibatch path (``n_steps_``: its optimizer steps).
    """

    _sample_weight_refusal = None  # a non-private loss may weight its rows: nothing to account
    parameter_constraints: ClassVar[dict] = {
        **TorchClassifier.parameter_constraints,
        "solver": [Options("auto", "lbfgs", "minibatch")],
        "max_iter": [Interval(int, 0, None, closed="neither")],
        "tol": [Interval(float, 0, None, closed="neither")],
    }

    def __init__(self, model="logistic", *, solver="auto", max_iter=500, tol=1e-6, batch_size=256, epochs=20,
                 learning_rate=0.01, optimizer="adam", momentum=0.0, weight_decay=0.0, model_kwargs=None,
                 device="cpu", groups=None, classes=None, random_state=None, verbose=False):
        self.model = model
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.batch_size = batch_size
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.optimizer = optimizer
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.model_kwargs = model_kwargs
        self.device = device
        self.groups = groups
        self.classes = classes
        self.random_state = random_state
        self.verbose = verbose

    def fit(self, X, y, sensitive_features=None, *, sample_weight=None, callback=None):
        """:meth:`FairEstimator.fit <dpfair.algorithms.FairEstimator.fit>`, with row weights ``sample_weight``
        (one finite weight ≥ 0 per row; the loss becomes their weighted mean)."""
        return super().fit(X, y, sensitive_features, sample_weight=sample_weight, callback=callback)

    def _weights(self, ctx) -> torch.Tensor | None:
        w = ctx.sample_weight
        return None if w is None else self._tensor(w / w.mean())

    def _fit(self, ctx, X, y, s):
        if self.solver not in ("auto", "lbfgs", "minibatch"):
            raise ValueError(f"solver must be 'auto', 'lbfgs' or 'minibatch', got {self.solver!r}")
        self.model_ = self._build_model(len(self.classes_), ctx.np_rng)
        full_batch = self.solver == "lbfgs" or (self.solver == "auto" and self.model == "logistic")
        if full_batch:
            self._fit_lbfgs(ctx, self._tensor(X), self._tensor(y, torch.long), self._weights(ctx))
        else:
            self._fit_minibatch(ctx, X, y)
        self.model_.eval()
        self.privacy_ledger_.record(dpa.NonPrivateDpEvent(), "non-private training")
        self._finish_privacy()

    def _fit_lbfgs(self, ctx, Xt, yt, wt=None):
        decay, tol = float(self.weight_decay), float(self.tol)
        params = [p for p in self.model_.parameters() if p.requires_grad]
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=int(self.max_iter), tolerance_grad=tol,
                                tolerance_change=1e-12, history_size=20, line_search_fn="strong_wolfe")

        bar = ctx.progress(None, "evaluation")

        def objective():
            bar.update()
            opt.zero_grad()
            loss = F.cross_entropy(self.model_(Xt), yt) if wt is None else (
                (wt * F.cross_entropy(self.model_(Xt), yt, reduction="none")).mean())
            if decay:
                loss = loss + 0.5 * decay * sum((p * p).sum() for p in params)
            loss.backward()
            return loss

        self.model_.train()
        opt.step(objective)
        self.n_iter_ = int(opt.state[opt.param_groups[0]["params"][0]].get("n_iter", 0))
        self.history_.append({"iterations": self.n_iter_, "loss": float(objective().detach())})
        ctx.end_epoch(epoch=1, step=1, steps=1)

    def _fit_minibatch(self, ctx, X, y):
        opt = self._make_optimizer(self.model_.parameters())
        Xt, yt, wt = self._tensor(X), self._tensor(y, torch.long), self._weights(ctx)
        n = X.shape[0]
        self.model_.train()
        bar = ctx.progress(int(self.epochs), "epoch")
        for epoch in range(int(self.epochs)):
            order = torch.randperm(n, generator=ctx.torch_rng, device=self.device_)
            total = 0.0
            for start in range(0, n, self.batch_size):
                idx = order[start:start + self.batch_size]
                loss = F.cross_entropy(self.model_(Xt[idx]), yt[idx]) if wt is None else (
                    (wt[idx] * F.cross_entropy(self.model_(Xt[idx]), yt[idx], reduction="none")).mean())
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
            self.history_.append({"epoch": epoch + 1, "loss": total / n})
            bar.update()
            ctx.end_epoch(epoch=epoch + 1, step=epoch + 1, steps=int(self.epochs))
        self.n_iter_ = int(self.epochs)
        self.n_steps_ = int(self.epochs) * -(-n // int(self.batch_size))  # the optimizer's steps
