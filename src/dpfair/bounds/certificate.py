"""Fairness certificates: Theorem 4.4 of Mangold et al. (ICML 2023) for a fitted dpfair estimator.

With probability at least 1 − ζ over the privacy noise, the private model lies
within ``d`` of the non-private optimum h* (:mod:`dpfair.bounds.distance`:
Lemma 4.1 for output perturbation, Lemma 4.2 for DP-SGD), and then, for every
notion and measure k (Theorem 3.2 with the reference model ``h_ref ∈ {h_priv, h*}``), ::

    |F_k(h_priv) − F_k(h*)| ≤ Σ_{k'} |C^{k'}_k| · P(|ρ(h_ref, X, Y)|/L_{X,Y} ≤ d | D_{k'})     (Theorem 4.4)

on the evaluation rows, bounded by Markov (the theorem as printed: ``χ_k d``),
Chernoff (Remark B.1) or computed exactly after truncation (Remark B.2: the
certified value). :func:`certify` takes ``h_ref = h_priv``: the certificate then
needs nothing but the released model, public constants and the evaluation rows,
so a model's user can recompute it. The evaluation rows should not be the
training rows: the certificate is a statistic of them (held-out data; for the
population, add :func:`dpfair.bounds.finite_sample_term`).

Assumptions, checked where they can be and listed in the certificate:
output perturbation — ℓ2-regularised logistic regression (strongly convex,
Lipschitz on norm-bounded rows): Theorem 4.4 holds. DP-SGD — a linear model
with weight decay, plain SGD, and a clipping bound at least the loss's
Lipschitz constant (else ``ValueError``); a non-linear module gets the local
Lipschitz constant, and its optimum is not unique, so the certificate is
reported as not holding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from dpfair.algorithms.clipping import FlatClipping, make_clipping_rule
from dpfair.bounds.distance import dpsgd_radius, output_perturbation_radius
from dpfair.bounds.fairness_lipschitz import CERTIFIED_NOTIONS, FairnessGapBound, fairness_gap_bound, fairness_levels
from dpfair.bounds.margins import confidence_margins, module_lipschitz, module_scores, normalized_margins
from dpfair.utils.capabilities import capabilities
from dpfair.nn.models import LogisticRegression
from dpfair.utils.progress import progress
from dpfair.utils.validation import check_1d, check_features, encode_on

__all__ = ["Certificate", "certify", "certify_margins", "empirical_gaps"]


@dataclass
class Certificate:
    """Per-notion bounds on ``|Fair(h_priv) − Fair(h*)|`` at probability ``probability``, and what they rest on."""

    probability: float
    distance: float
    distance_method: str
    gaps: dict[str, FairnessGapBound]
    levels: dict[str, float] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()
    holds: bool = True

    def to_dict(self) -> dict:
        out = {"probability": self.probability, "distance": self.distance, "distance_method": self.distance_method,
               "holds": self.holds, "assumptions": list(self.assumptions)}
        for notion, gap in self.gaps.items():
            out[f"bound.{notion}"] = gap.bound_fair
            out[f"chernoff.{notion}"] = gap.chernoff_fair
            out[f"markov.{notion}"] = gap.markov_fair
            out[f"lipschitz.{notion}"] = float(np.mean(gap.lipschitz))
            if notion in self.levels:
                out[f"fairness.{notion}"] = self.levels[notion]
        return out


def certify_margins(margins, lipschitz, y, s, distance, *, probability=0.99, notions=CERTIFIED_NOTIONS,
                    predictions=None, positive_label=None, distance_method="given", assumptions=(),
                    holds=True) -> Certificate:
    """The certificate from the reference model's margins and Lipschitz constants on evaluation rows."""
    ratios = normalized_margins(margins, lipschitz)
    gaps = {n: fairness_gap_bound(ratios, y, s, distance, n, positive_label=positive_label) for n in notions}
    levels = {}
    if predictions is not None:
        levels = {n: float(np.mean(np.abs(fairness_levels(n, y, predictions, s, positive_label=positive_label))))
                  for n in notions}
    return Certificate(float(probability), float(distance), distance_method, gaps, levels, tuple(assumptions), holds)


def _linear_module(module: torch.nn.Module) -> bool:
    return isinstance(module, (torch.nn.Linear, LogisticRegression))


def _dpsgd_distance(est, probability, feature_norm_bound) -> tuple[float, str, list[str], bool]:
    notes = ["DP-SGD: Lemma 4.2 re-derived for Poisson-sampled, unclipped DP-SGD (see dpfair.bounds.distance)"]
    if feature_norm_bound is None:
        raise ValueError("a DP-SGD certificate needs feature_norm_bound, a public bound R on every row's norm "
                         "(the loss's Lipschitz constant follows from it); pass it (CLI: --option "
                         "feature_norm_bound=R)")
    if not _linear_module(est.model_):
        raise ValueError("the DP-SGD certificate needs a linear model (model='logistic'): a non-linear module has "
                         "no unique optimum h* and its margins are only locally Lipschitz")
    if not isinstance(make_clipping_rule(est.clipping), FlatClipping):
        raise ValueError("the DP-SGD certificate needs flat clipping (clipping='flat'): adaptive bounds may fall "
                         "below the loss's Lipschitz constant and move the optimum")
    if est.optimizer != "sgd" or est.momentum:
        raise ValueError("the DP-SGD certificate assumes plain SGD steps; fit with optimizer='sgd', momentum=0")
    if not est.weight_decay:
        raise ValueError("the DP-SGD certificate needs a strongly convex objective; fit with weight_decay > 0")
    row = math.sqrt(float(feature_norm_bound) ** 2 + 1.0)  # the bias is a constant feature
    n_params = sum(p.numel() for p in est.model_.parameters())
    outputs = n_params // (est.n_features_in_ + 1)
    if outputs == 1:  # one logit: logistic loss, gradient (σ − y)(x, 1), Hessian ≤ ‖(x, 1)‖²/4
        lipschitz, curvature = row, row**2 / 4.0
    else:  # softmax: ‖(p − e_y) ⊗ (x, 1)‖ ≤ √2 ‖(x, 1)‖, Hessian ≤ ‖(x, 1)‖²/2
        lipschitz, curvature = math.sqrt(2.0) * row, row**2 / 2.0
    # ‖h_0 − h*‖ ≤ ‖h_0‖ + Λ/μ (μ‖h*‖ ≤ Λ); h_0 is bounded by the uniform initialisation's support ±1/√d
    init = math.sqrt(outputs * (est.n_features_in_ + 1) / est.n_features_in_)
    d = dpsgd_radius(noise_multiplier=est.gradient_noise_multiplier_, clip=est.max_grad_norm, lipschitz=lipschitz,
                     batch_size=est.batch_size, n_params=n_params,
                     steps=est.n_steps_, learning_rate=est.learning_rate, strong_convexity=est.weight_decay,
                     smoothness=curvature + est.weight_decay, initial_distance=init + lipschitz / est.weight_decay,
                     probability=probability)
    return d, "lemma_4_2", notes, True


def _reference(est, X, y_codes):
    """Scores, margins and per-row Lipschitz constants of the released model."""
    if hasattr(est, "model_") and isinstance(est.model_, torch.nn.Module):
        module = est.model_
        scores = module_scores(module, X)
        return scores, confidence_margins(scores, y_codes), module_lipschitz(module, X, y_codes), _linear_module(
            module)
    if hasattr(est, "certificate_inputs"):
        scores, lipschitz = est.certificate_inputs(X)
        return scores, confidence_margins(scores, y_codes), lipschitz, True
    raise ValueError(f"{type(est).__name__} has no certificate: use OutputPerturbationClassifier, or "
                     "DPSGDClassifier with model='logistic'")


def certify(estimator, X, y, sensitive_features, *, probability=0.99, notions=CERTIFIED_NOTIONS, distance=None,
            feature_norm_bound=None, positive_label=None) -> Certificate:
    """Theorem 4.4's certificate for a fitted private estimator, evaluated on ``(X, y, s)`` (held-out rows).

    ``distance``: a bound on ``‖h_priv − h*‖`` holding with ``probability`` (default: from the
    estimator — the chi-square quantile of its output-perturbation noise, or Lemma 4.2 for
    DP-SGD, which needs ``feature_norm_bound``).
    """
    X = check_features(X, "X")
    y_arr = check_1d(y, "y", X.shape[0])
    s_arr = check_1d(sensitive_features, "sensitive_features", X.shape[0])
    y_codes = encode_on(y_arr, "y", np.asarray(estimator.classes_), "the model")
    if positive_label is not None:
        positive_label = int(encode_on(np.asarray([positive_label]), "positive_label", np.asarray(estimator.classes_),
                                       "the model")[0])
    scores, margins, lipschitz, linear = _reference(estimator, X, y_codes)
    notes = [] if linear else ["non-linear module: local Lipschitz constants (first order in ‖h − h'‖)"]
    holds = linear
    bound = capabilities(estimator).certificate  # the distance bound the method declares
    if distance is not None:
        method = "given"
    elif bound == "output_perturbation":
        distance = output_perturbation_radius(estimator.noise_std_, estimator.n_params_, probability)
        method = "chi2 quantile of the output-perturbation noise (Lemma 4.1, exact form)"
    elif bound == "dpsgd":
        distance, method, more, ok = _dpsgd_distance(estimator, probability, feature_norm_bound)
        notes += more
        holds = holds and ok
    else:
        raise ValueError(f"no distance bound is known for {type(estimator).__name__}: Lemmas 4.1 and 4.2 need the "
                         "strongly convex ERM of Mangold et al.'s eq. (3) (OutputPerturbationClassifier, or "
                         "DPSGDClassifier with a logistic model and weight decay); pass distance= if you have one")
    predictions = np.argmax(scores, axis=1) if scores.ndim == 2 else (scores > 0).astype(np.int64)
    return certify_margins(margins, lipschitz, y_codes, s_arr, distance, probability=probability, notions=notions,
                           predictions=predictions, positive_label=positive_label, distance_method=method,
                           assumptions=notes, holds=holds)


def empirical_gaps(estimator, X_train, y_train, s_train, X_eval, y_eval, s_eval, *, n_draws=100,
                   notions=CERTIFIED_NOTIONS, positive_label=None, verbose=False) -> dict[str, np.ndarray]:
    """``|Fair(h_j) − Fair(h*)|`` on the evaluation rows for ``n_draws`` fresh private models h_j.

    h* is the estimator refitted at ``epsilon=inf``; each h_j is a private fit with fresh
    noise (an estimator with ``private_draws`` reuses one optimum and redraws only the noise).
    A research diagnostic: it uses the non-private model, so the printed ε does not cover it.
    ``verbose``: a progress bar on stderr over the draws (:mod:`dpfair.utils.progress`).
    """
    from sklearn.base import clone

    with progress(n_draws, "certificate draws", "draw", enabled=verbose) as bar:
        reference = clone(estimator).set_params(epsilon=math.inf)
        reference.fit(X_train, y_train, sensitive_features=s_train)
        if hasattr(reference, "private_draws"):
            predictions = reference.private_draws(estimator, X_eval, n_draws)
            bar.update(n_draws)
        else:
            predictions = []
            for _ in range(n_draws):
                model = clone(estimator).fit(X_train, y_train, sensitive_features=s_train)
                predictions.append(model.predict(X_eval))
                bar.update()
    base = {n: np.abs(fairness_levels(n, y_eval, reference.predict(X_eval), s_eval, positive_label=positive_label))
            for n in notions}
    return {n: np.array([abs(np.mean(np.abs(fairness_levels(n, y_eval, p, s_eval, positive_label=positive_label)))
                             - np.mean(base[n])) for p in predictions]) for n in notions}
