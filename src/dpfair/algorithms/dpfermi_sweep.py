"""Fit a whole DP-FERMI grid (ε × λ × seeds × …) as one batched computation.

:func:`fit_dpfermi_grid` returns one fitted :class:`DPFERMIClassifier` per
grid point, each equal (to float rounding) to what ``fit`` of that estimator
alone returns: every estimator is prepared by its own ``fit`` preamble
(checks, its own group-count release, calibration, initialisation, its own
ledger), then the logistic models of all estimators are trained in lockstep
by :func:`dpfair.algorithms.dpfermi_engine.train`. Estimators whose random
streams coincide (same seed, same draws before training) form a seed group
and share one Poisson batch and one noise draw per step, so a step of the
whole grid is a few batched matrix products.

Privacy: each model's ledger records exactly the releases of its own fit
(``privacy_spent_`` per model). Choosing among the models by their
performance on private data is a further use of that data that these
ledgers do not cover.
"""

from __future__ import annotations

import itertools

import torch

from dpfair.algorithms import dpfermi_engine as engine
from dpfair.algorithms.dpfermi import DPFERMIClassifier, stack_hyperparameters
from dpfair.nn import LogisticRegression


def _group_key(prep) -> tuple:
    return (prep.batch_generator.get_state().numpy().tobytes(), prep.noise_generator.get_state().numpy().tobytes())


def fit_dpfermi_grid(X, y, sensitive_features, grid: dict[str, list], **params) -> list[DPFERMIClassifier]:
    """Fit ``DPFERMIClassifier(**params, **point)`` for every point of the product ``grid``.

    ``grid`` maps hyper-parameter names to lists of values (e.g. ``{"epsilon": [0.5, 1],
    "lam": [0, 1, 2], "random_state": range(5)}``). Logistic models train batched;
    any other model is fitted one at a time. Returns the estimators in the
    grid's product order.
    """
    names = list(grid)
    estimators = [DPFERMIClassifier(**{**params, **dict(zip(names, values))})
                  for values in itertools.product(*(list(grid[k]) for k in names))]
    if not estimators:
        return []
    preps = []
    for est in estimators:
        Xc, yc, sc = est._start_fit(X, y, sensitive_features)
        shared = preps[0].data if preps and est.notion == estimators[0].notion else None
        preps.append(est._prepare(Xc, yc, sc, data=shared))
    if not all(isinstance(p.model, LogisticRegression) for p in preps):
        for est, prep in zip(estimators, preps):
            est._train_prepared(prep)
        return estimators
    _train_batched(estimators, preps)
    return estimators


def _train_batched(estimators, preps) -> None:
    first = preps[0]
    for p in preps[1:]:
        if p.schedule != first.schedule or p.data is not first.data:
            raise ValueError("a batched grid needs the same data, notion, batch_size, epochs and privacy_unit for "
                             "every point; vary those in separate calls")
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(preps):
        groups.setdefault(_group_key(p), []).append(i)
    members = list(groups.values())
    width = max(len(g) for g in members)
    slots = [g + [g[-1]] * (width - len(g)) for g in members]  # pad with repeats, results ignored
    dev = first.data.X.device

    weight = torch.stack([torch.stack([preps[i].model.linear.weight.detach() for i in g]) for g in slots])
    bias = torch.stack([torch.stack([preps[i].model.linear.bias.detach() for i in g]) for g in slots])
    models = engine.LinearModels(weight.clone(), bias.clone())
    hp = stack_hyperparameters([[estimators[i]._hyperparameters(preps[i]) for i in g] for g in slots],
                               torch.stack([torch.stack([preps[i].inv_sqrt_p for i in g]) for g in slots]), dev)
    pending = [0]

    def on_step():
        pending[0] += 1

    def on_epoch(step, W):
        norms = W.flatten(2).norm(dim=-1).tolist()
        for gi, g in enumerate(members):
            for j, i in enumerate(g):
                estimators[i].privacy_ledger_.record(preps[i].event, "dp-fermi step", count=pending[0])
                estimators[i].history_.append({"step": step, "w_norm": norms[gi][j]})
        pending[0] = 0

    W = engine.train(models, first.data, first.schedule, hp, [preps[g[0]].batch_generator for g in members],
                     [preps[g[0]].noise_generator for g in members], on_step=on_step, on_epoch=on_epoch)
    for gi, g in enumerate(members):
        for j, i in enumerate(g):
            DPFERMIClassifier._set_linear(preps[i].model, models.weight[gi, j], models.bias[gi, j])
            estimators[i]._complete(preps[i].model, W[gi, j])
