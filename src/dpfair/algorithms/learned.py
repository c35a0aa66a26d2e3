"""Did the fit learn anything? The check every ``fit`` runs last, so that training never fails in silence.

A fit *learned nothing* when it ends no better than the constant model that predicts the class shares
``f_c`` of its training rows: it predicts one class for every row, or its training loss
``L = −(1/n) Σ_i log p̂_{y_i}(x_i)`` is not below that model's ``L₀ = −Σ_c f_c log f_c`` (for a method
that is not a torch model, whose probabilities are votes rather than a softmax: its training error is not
below the majority class's share of the others, ``1 − max_c f_c``). Then
:func:`check_learned` warns (:class:`~dpfair.exceptions.LearnedNothingWarning`, a ``UtilityWarning``) with the
likely causes it can measure and what to try:

- **unscaled features**: a column whose root mean square ``√((1/n) Σ_i x_ij²)`` exceeds :data:`SCALE_LIMIT`
  (one-hot and standardised columns have it at most about 1): its gradient swamps the others' and a step
  long enough for them overshoots it;
- **too few steps**: ``steps · learning_rate / (1 − momentum)`` below :data:`MIN_TRAVEL`. The cross-entropy's
  gradient in a logit's bias is at most 1, and Adam moves a coordinate by at most about the learning rate
  a step, so this bounds how far the bias can move: under 1 it cannot reach even the class shares'
  log-odds;
- **too much noise for n** (record unit only): ``√(p·ln(1/δ))/(n·ε)`` above
  :data:`~dpfair.algorithms.signal.RECORD_LEVEL_LIMIT`, ε the one spent
  (:func:`~dpfair.algorithms.signal.record_level_ratio`);
- **λ too large**: a method that weighs a fairness term (its ``fairness strength`` hyper-parameter above 0);
  the constant model is perfectly fair, and under noise the fairness term's gradient is mostly noise.

Privacy: the check is post-processing of what the fit publishes, and of what the threat model already
gives the attacker, in two cases:

- **X and y public** (a non-private method, or ``privacy_unit="sensitive"``, under which the attacker knows
  every x and y): the published model's predictions on the training rows, its training loss and the
  columns' scales are functions of the published model and of public rows. s is never read, except by a
  non-private method that predicts with it. So all of the above is checked;
- **``privacy_unit="record"``**: the rows are private, and so are the model's predictions on them, its loss
  and the columns' scales. The check then reads only public quantities (hyper-parameters, the public
  sizes, the ε spent, the parameter count) and warns only when they say the fit *could not* learn: too few
  steps, with a travel under :data:`PRIVATE_MIN_TRAVEL` (a tenth of the bound above: a wide model's logits
  move far while each parameter moves little), or too much noise for n from a noise multiplier set by hand
  (one calibrated to ε has had :func:`~dpfair.algorithms.signal.warn_if_too_few_records` before training).
  Unscaled features are invisible there: scale them from a public schema's declared ranges before the fit.
"""

from __future__ import annotations

import inspect
import math
import warnings

import numpy as np
import pandas as pd
import torch

from dpfair.algorithms.signal import (
    RECORD_LEVEL_LIMIT,
    record_level_ratio,
    user_stacklevel,
)
from dpfair.exceptions import LearnedNothingWarning

#: A column whose root mean square exceeds this counts as unscaled.
SCALE_LIMIT = 10.0

#: ``steps · learning_rate / (1 − momentum)`` below this: too few steps to move a logit's bias by one unit.
MIN_TRAVEL = 1.0

#: Under the record unit (predictions unseen) the schedule alone warns below this travel.
PRIVATE_MIN_TRAVEL = 0.1

#: The check reads at most this many training rows (evenly spaced, no randomness) for the predictions and loss.
MAX_ROWS = 10_000

#: Probabilities are floored here in the training loss (a model sure of the wrong class costs −log of it).
PROBABILITY_FLOOR = 1e-12


def check_learned(estimator, X: np.ndarray, y: np.ndarray, s=None, *, rows_public: bool) -> None:
    """Warn (:class:`~dpfair.exceptions.LearnedNothingWarning`) when the fitted ``estimator`` learned nothing.

    ``X``: the validated training features, ``y``: the class codes (into ``classes_``), ``s``: the group codes
    or ``None``; ``rows_public``: whether X and y are public (no privacy, or ``privacy_unit="sensitive"``),
    which decides what the check may read (see the module docstring).
    """
    name = type(estimator).__name__
    if not rows_public:
        travel, noise = _travel(estimator, PRIVATE_MIN_TRAVEL), _noise(estimator, len(X))
        hand_noise = estimator.get_params(deep=False).get("noise_multiplier") is not None
        if travel or (noise and hand_noise):  # a σ calibrated to ε has had its warning before training
            causes = "; ".join(c for c in (travel, noise) if c)
            warnings.warn(f"{name} could not learn: {causes}. (Its training rows are private under "
                          "privacy_unit='record', so the check read only public settings, never its predictions.)",
                          LearnedNothingWarning, stacklevel=user_stacklevel())
        return
    verdict = _verdict(estimator, X, y, s)
    if verdict is None:
        return
    scale = _scale(estimator, X)
    causes = [c for c in (scale, _travel(estimator), None if scale else _fairness(estimator)) if c]
    if not causes:
        causes = ["none seen in the settings: try standardising X, more epochs or a larger learning_rate"]
    warnings.warn(f"{name} learned nothing: {verdict}. Likely causes: {'; '.join(causes)}",
                  LearnedNothingWarning, stacklevel=user_stacklevel())


def _verdict(estimator, X, y, s) -> str | None:
    """What shows that the fit learned nothing, read from its predictions on (at most MAX_ROWS of) its rows."""
    rows = np.unique(np.linspace(0, len(X) - 1, min(len(X), MAX_ROWS)).astype(int))
    features = X[rows]
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:  # predict as fit saw them, by name
        features = pd.DataFrame(features, columns=list(names))
    predict = estimator.predict_proba
    if "sensitive_features" in inspect.signature(predict).parameters:  # it reads the group at prediction
        if getattr(estimator, "privacy_spent_", (math.inf,))[0] != math.inf or s is None:
            return None  # s is private (or absent): its predictions are not the check's to compute
        proba = predict(features, sensitive_features=np.asarray(estimator.groups_)[s[rows]])
    else:
        proba = predict(features)
    codes = y[rows]
    predicted = np.argmax(proba, axis=1)
    shares = np.bincount(codes, minlength=proba.shape[1]) / len(codes)
    prior = -float(sum(f * math.log(f) for f in shares if f > 0))
    loss = -float(np.mean(np.log(np.maximum(proba[np.arange(len(codes)), codes], PROBABILITY_FLOOR))))
    classes = estimator.classes_
    if len(np.unique(predicted)) == 1:
        return (f"it predicts '{classes[predicted[0]]}' for every training row (training loss {loss:.3g}; the "
                f"constant model's, predicting the class shares: {prior:.3g})")
    if not isinstance(getattr(estimator, "model_", None), torch.nn.Module):  # hard or mixed votes: 0-1 loss
        error, majority = float(np.mean(predicted != codes)), 1.0 - float(shares.max())
        if not error < majority:
            return (f"its training error {error:.3g} is not below the constant model's {majority:.3g} (predicting "
                    "the majority class)")
        return None
    if not loss < prior:
        return (f"its training loss {loss:.3g} is not below the constant model's {prior:.3g} (predicting the "
                f"class shares)")
    return None


def _scale(estimator, X) -> str | None:
    """Columns whose root mean square exceeds SCALE_LIMIT, largest first (rows public only)."""
    block = max(1, (1 << 20) // max(1, X.shape[1]))  # a block of rows at a time: no float64 copy of X
    squares = sum(np.square(X[i:i + block], dtype=np.float64).sum(axis=0) for i in range(0, len(X), block))
    rms = np.sqrt(squares / len(X))
    big = np.argsort(-rms)[: int(np.sum(rms > SCALE_LIMIT))]
    if not len(big):
        return None
    names = getattr(estimator, "feature_names_in_", None)
    label = (lambda j: repr(str(names[j]))) if names is not None else (lambda j: f"column {j}")
    shown = ", ".join(f"{label(j)} (scale {rms[j]:.3g})" for j in big[:3])
    more = f" and {len(big) - 3} more" if len(big) > 3 else ""
    return (f"unscaled features: {shown}{more} far from 1: standardise X, e.g. sklearn's StandardScaler, or "
            "declare a schema that scales them")


def _travel(estimator, limit: float = MIN_TRAVEL) -> str | None:
    """Too few steps or too small a learning rate for the parameters to move (hyper-parameters only)."""
    params = estimator.get_params(deep=False)
    steps, rate = getattr(estimator, "n_steps_", None), params.get("learning_rate")
    if steps is None or not isinstance(rate, (int, float)):
        return None
    momentum = float(params.get("momentum") or 0.0) if params.get("optimizer", "sgd") == "sgd" else 0.0
    travel = steps * float(rate) / max(1.0 - momentum, 1e-12)
    if travel >= limit:
        return None
    return (f"too few steps: {steps} steps at learning_rate={float(rate):g} move a parameter by at most about "
            f"{travel:.3g} < {limit:g}: raise epochs or learning_rate")


def _noise(estimator, n: int) -> str | None:
    """Record-level noise too large for n (public: ε spent, δ, the public size, the parameter count)."""
    unit = getattr(estimator, "privacy_unit_", None)
    spent = getattr(estimator, "privacy_spent_", None)
    if spent is None or getattr(unit, "value", unit) != "record" or math.isinf(spent[0]):
        return None
    size = estimator.get_params(deep=False).get("sample_size") or n
    model = getattr(estimator, "model_", None)
    p = (sum(int(q.numel()) for q in model.parameters()) if hasattr(model, "parameters")
         else (estimator.n_features_in_ + 1) * len(estimator.classes_))
    ratio = record_level_ratio(int(size), p, float(spent[0]), float(spent[1]))
    if ratio <= RECORD_LEVEL_LIMIT:
        return None
    return (f"too much noise for n: epsilon={spent[0]:.3g} on {size} rows with {p} parameters gives "
            f"sqrt(p·ln(1/δ))/(n·ε) = {ratio:.3f} > {RECORD_LEVEL_LIMIT:g}: raise epsilon, train on more rows or "
            "use fewer features")


def _fairness(estimator) -> str | None:
    """A fairness strength above 0: the constant model is perfectly fair, so too large a one ends there."""
    target = estimator.fairness_target() if hasattr(estimator, "fairness_target") else {}
    strength = [(k, v) for k, v in target.items() if k != "notion" and isinstance(v, (int, float)) and v > 0]
    if not strength:
        return None
    key, value = strength[0]
    spent = getattr(estimator, "privacy_spent_", (math.inf,))[0]
    noisy = f", noised at epsilon={spent:.3g}," if math.isfinite(spent) else ""
    return (f"{key}={value:g} too large: the fairness term{noisy} is met by a constant model and outweighs the "
            f"loss: lower {key}")
