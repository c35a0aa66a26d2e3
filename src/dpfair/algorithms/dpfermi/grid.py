"""Fit a whole DP-FERMI grid (ε × λ × seeds × …) as one batched computation.

:func:`fit_grid` fits given :class:`~dpfair.algorithms.dpfermi.estimator.DPFERMIClassifier` instances together: it is
``DPFERMIClassifier.fit_many`` (:meth:`~dpfair.algorithms.base.FairEstimator.fit_many`, the fit contract's
grid), and :func:`~dpfair.algorithms.fit_dpfermi_grid` builds the instances from a grid's points for it. It
asks the estimators only through their public steps, so it imports no estimator class. Every estimator is
prepared by its own ``fit`` preamble (checks, its own group-count release, calibration, initialisation, its
own ledger); then the logistic models of all estimators are trained in lockstep by
:func:`dpfair.algorithms.dpfermi.loop.train` (the loop of a single fit too). Estimators with the same
``random_state`` form a seed group: they share one secret Poisson batch per
step (and one public minibatch order), so a step of the whole grid is a few
batched matrix products; every model draws its own noise.

Privacy. Each model's ledger records exactly the releases of its own fit
(``privacy_spent_`` per model): marginally, a model sees a Poisson sample and
its own noise, exactly as a fit of its own. Releasing *all* the models
together is a further question, which :attr:`GridFit.privacy_spent` answers
on the accountant: the models of a seed group release, at each step, one
Gaussian sum per model on the same batch — jointly a single Poisson-sampled
Gaussian whose multiplier is ``(Σ_j σ_j⁻²)^{-1/2}`` (each model's normalised
contribution has norm ≤ 1/σ_j, their concatenation ≤ √Σ σ_j⁻²); seed groups
use independent batches and every count release has independent noise, so
all of these compose. Choosing among the models by their performance on
private data is a further use of that data that none of these ε cover.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections import Counter
from functools import cached_property
from types import SimpleNamespace

import dp_accounting as dpa
import torch

import dpfair.algorithms.dpfermi.loop as loop
from dpfair.algorithms.dpfermi.data import COUNTS, STEP, FermiModels
from dpfair.algorithms.dpfermi.models import LinearModels
from dpfair.nn import LogisticRegression
from dpfair.privacy import PrivacyLedger, epsilon_of, gaussian_event
from dpfair.privacy.budget import charging_grid
from dpfair.privacy.session import ReleaseSession
from dpfair.utils.progress import progress
from dpfair.utils.validation import CheckedFeatures


class GridFit(list):
    """The fitted estimators of a grid (a list, in the order given: a grid's product order) and the ε of releasing
    them all.

    ``privacy_spent``: ``(ε, δ)`` of releasing every model of the grid together (δ: the
    smallest of the models' δ), computed on first access; ``privacy_event``: the composed event.
    ``shared_batches``: whether the models of a seed group were trained on the same secret
    Poisson batches (the batched logistic path) or each on its own (one fit at a time).
    """

    shared_batches = True

    @cached_property
    def privacy_event(self) -> dpa.DpEvent:
        return joint_event(self, self.shared_batches)

    @cached_property
    def privacy_spent(self) -> tuple[float, float]:
        if not self:
            return 0.0, 0.0
        first = self[0]
        delta = min(est.delta_ for est in self)
        return epsilon_of(self.privacy_event, delta, first.privacy_unit_, first.accountant), delta


def fit_grid(estimators, X, y, sensitive_features, *, budget=None) -> GridFit:
    """Fit the unfitted DP-FERMI ``estimators`` on the same data together; returns them fitted, in order, as a
    :class:`GridFit` (with the joint ``privacy_spent``). ``DPFERMIClassifier.fit_many`` is this.

    Each model runs the steps of its own ``fit``
    (:meth:`~dpfair.algorithms.base.FairEstimator.begin_fit`,
    :meth:`~dpfair.algorithms.dpfermi.estimator.DPFERMIClassifier.prepare_fit`, the loop, ``end_fit``; ``unfit`` of
    every model when anything fails). Logistic models train batched, models of one ``random_state`` on shared
    secret batches (they need the same data, notion, batch size, epochs and privacy unit); any other model, and
    every model of a grid where one is in ``secure_mode`` (whose exact noise is drawn for one model at a time),
    is trained one at a time (``shared_batches`` False). ``verbose=True`` on any model: one progress bar for the
    whole grid (:mod:`dpfair.utils.progress`). ``budget``: a :class:`~dpfair.privacy.PrivacyBudget` the grid's joint ε
    (``privacy_spent``) is drawn from; the joint plan is checked against it before anything is released.
    """
    estimators = GridFit(estimators)
    if len({id(est) for est in estimators}) < len(estimators):
        raise ValueError("a grid fits each of its estimators once, so it needs distinct instances; pass "
                         "sklearn.base.clone(est) for each repeated one")
    if estimators:
        preps = []
        verbose = any(est.verbose for est in estimators)
        with progress(desc=f"DP-FERMI grid ({len(estimators)} models)", unit="step", enabled=verbose) as bar, \
                charging_grid(budget, estimators, f"a DP-FERMI grid of {len(estimators)} models") as charge:
            try:
                checked = CheckedFeatures()  # one pass over the inputs for all the models
                if charge is not None:  # the joint plan, before anything is released
                    _claim_joint(charge, _planned(estimators, X, y, sensitive_features, checked))
                with progress(len(estimators), "preparing", "model") as preparing:
                    for est in estimators:
                        Xc, yc, sc = est.begin_fit(X, y, sensitive_features, checked=checked)
                        shared = preps[0].data if preps and est.notion == estimators[0].notion else None
                        preps.append(est.prepare_fit(est.fit_context, Xc, yc, sc, data=shared))
                        preparing.update()
                estimators.shared_batches = (all(isinstance(p.model, LogisticRegression) for p in preps)
                                             and not any(est.secure_mode for est in estimators))
                if charge is not None:  # as prepared (a σ set after calibration, batches shared or not)
                    _claim_joint(charge, estimators, estimators.shared_batches)
                if estimators.shared_batches:
                    bar.set_total(preps[0].hp.schedule.n_steps)
                    _train_batched(estimators, preps, bar)
                else:
                    bar.set_total(len(estimators), "model")
                    for est, prep in zip(estimators, preps):
                        est.train_prepared(prep)
                        bar.update()
            except BaseException:
                for est in estimators:
                    est.unfit()
                raise
            for est in estimators:
                est.end_fit()
    return estimators


def grid_points(grid: dict[str, list] | list[dict]) -> list[dict]:
    """The points of a grid: the product of a dict of value lists (in its order), or a list of points as is."""
    if isinstance(grid, list):
        return [dict(point) for point in grid]
    return [dict(zip(grid, values)) for values in itertools.product(*(list(v) for v in grid.values()))]


def _planned(estimators, X, y, sensitive_features, checked: CheckedFeatures) -> list[SimpleNamespace]:
    """What :func:`joint_event` reads of each model, from its calibrated plan, before anything is released: each
    model's inputs are checked and encoded (:meth:`~dpfair.algorithms.base.FairEstimator.begin_fit`; ``checked``
    holds the checks of the grid's inputs, made once for all its models), its
    :meth:`~dpfair.algorithms.dpfermi.estimator.DPFERMIClassifier.plan` read on their public shape, and the fit undone."""
    planned = []
    for est in estimators:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fit repeats the checks and their warnings
            est.begin_fit(X, y, sensitive_features, checked=checked)
            try:
                fit_plan = est.plan(est.fit_context.shape)
            finally:
                random_state = est.random_state_
                est.unfit()
        step = fit_plan.plan[STEP]
        planned.append(SimpleNamespace(random_state_=random_state, delta_=fit_plan.delta,
                                       noise_multiplier_=fit_plan.sigmas[STEP],
                                       sampling_probability_=step.sampling_probability, n_steps_=step.count,
                                       privacy_ledger_=fit_plan.ledger()))
    return planned


def _claim_joint(charge, estimators, shared_batches: bool = True) -> None:
    charge.claim_event(joint_event(estimators, shared_batches), min(est.delta_ for est in estimators),
                       estimators[0].privacy_ledger_.relation, "joint release of the grid's models")


def _seed_groups(estimators) -> list[list[int]]:
    """Indices of the estimators that share a secret batch stream (one ``random_state``), in first-seen order."""
    groups: dict[int, list[int]] = {}
    for i, est in enumerate(estimators):
        groups.setdefault(est.random_state_, []).append(i)
    return list(groups.values())


def joint_event(estimators, shared_batches: bool = True) -> dpa.DpEvent:
    """The event of releasing every fitted model of a grid together (see the module docstring).

    ``shared_batches``: the models of a seed group shared their Poisson batches (one sampled
    Gaussian per group and step); otherwise every model sampled its own and they compose.

    Identical events are merged into self-compositions, and the unsampled Gaussian count
    releases, which compose exactly into one Gaussian of multiplier ``(Σ σ_i⁻²)^{-1/2}``,
    into one event, so the accounting costs a few PLD compositions whatever the grid's size.
    """
    repeated: Counter = Counter()
    counts_precision = 0.0
    groups = _seed_groups(estimators) if shared_batches else [[i] for i in range(len(estimators))]
    for group in groups:
        precision = sum(_precision(estimators[i].noise_multiplier_) for i in group)
        first = estimators[group[0]]
        repeated[gaussian_event(_multiplier(precision), first.sampling_probability_)] += first.n_steps_
        for i in group:
            for entry in estimators[i].privacy_ledger_.entries:
                if entry.label == COUNTS:
                    counts_precision += entry.count * _precision(entry.event.noise_multiplier)
    events = [dpa.SelfComposedDpEvent(event, count) for event, count in repeated.items()]
    if counts_precision:
        events.append(gaussian_event(_multiplier(counts_precision)))
    return dpa.ComposedDpEvent(events)


def _precision(sigma: float) -> float:
    return math.inf if sigma == 0 else sigma ** -2


def _multiplier(precision: float) -> float:
    return 0.0 if math.isinf(precision) else precision ** -0.5


def _train_batched(estimators, preps, bar) -> None:
    first = preps[0]
    for p in preps[1:]:
        if p.hp.schedule != first.hp.schedule or p.data is not first.data:
            raise ValueError("a batched grid needs the same data, notion, batch_size, epochs and privacy_unit for "
                             "every point; vary those in separate calls")
    members = _seed_groups(estimators)
    width = max(len(g) for g in members)
    filled = [g + [g[-1]] * (width - len(g)) for g in members]  # padding slots repeat the group's last model
    dev = first.data.X.device

    weight = torch.stack([torch.stack([preps[i].model.linear.weight.detach() for i in g]) for g in filled])
    bias = torch.stack([torch.stack([preps[i].model.linear.bias.detach() for i in g]) for g in filled])
    models = LinearModels(weight.clone(), bias.clone())
    hp = FermiModels.stack([[preps[i].hp for i in g] for g in filled],
                                  torch.stack([torch.stack([preps[i].inv_sqrt_p for i in g]) for g in filled]), dev)
    # One batched release (the equal schedules above give every model the same step part): every slot
    # draws its own noise from one secret stream; padding slots record on a scratch ledger (their models
    # are discarded).
    unit = estimators[0].privacy_unit_
    ledgers = [estimators[i].privacy_ledger_ if j < len(g) else PrivacyLedger(unit)
               for g, row in zip(members, filled) for j, i in enumerate(row)]
    sigmas = [estimators[i].noise_multiplier_ for g in filled for i in g]
    session = ReleaseSession(ledgers, plan=estimators[0].privacy_plan_, sigmas={STEP: sigmas},
                             key=("dpfermi grid", "noise"))
    release = session.release(STEP)

    def on_epoch(step, W):
        norms, lams = W.flatten(2).norm(dim=-1).tolist(), hp.lam.tolist()
        for gi, g in enumerate(members):
            for j, i in enumerate(g):
                estimators[i].history_.append({"step": step, "w_norm": norms[gi][j], "lam": lams[gi][j]})

    with session:
        W = loop.train(models, first.data, first.hp.schedule, hp, [preps[g[0]].sampler for g in members], release,
                       [preps[g[0]].public_generator for g in members], on_epoch=on_epoch, bar=bar,
                       threads=torch.get_num_threads())
    for gi, g in enumerate(members):
        for j, i in enumerate(g):
            estimators[i].finish_fit(preps[i], W[gi, j], hp.lam[gi, j], (models.weight[gi, j], models.bias[gi, j]))

