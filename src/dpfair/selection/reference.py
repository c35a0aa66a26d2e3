"""The reference error of a private search's constraint "error ≤ reference + X".

It is the user's public proxy (``reference_error=``), or else under the sensitive unit the error of a
non-private, unconstrained model on unseen rows of the public (x, y), which costs nothing
(:func:`public_reference`): on the validation part when one is held out, else its :data:`REFERENCE_FOLDS`-fold
cross-validated error on the training part (its training error would be optimistic by its own overfitting,
which private models barely have); under the record unit (x and y private) a DP-SGD logistic model fitted on the
fit part (half of ``reference_share`` of ε; :func:`reference_plan`) whose validation error is released with
Gaussian noise (the other half; sensitivity 1/n_val; :func:`private_reference`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import clone

from dpfair.fairness.scorers import predict_with_groups
from dpfair.privacy import PrivacyUnit, calibrate_noise, gaussian_event
from dpfair.selection.plan import REFERENCE_ERROR, plan_of, reference_entries
from dpfair.selection.state import ReferencePlan

if TYPE_CHECKING:
    from dpfair.privacy.session import ReleaseSession
    from dpfair.selection.state import SearchState

__all__ = ["PROXY", "REFERENCE_FOLDS", "private_reference", "public_reference", "reference_plan"]

#: Folds of the public reference's cross-validated error (:func:`public_reference`).
REFERENCE_FOLDS = 5

#: Where a reference error given by the user comes from (``selection_["score"]["reference"]``).
PROXY = "public proxy (reference_error)"


def public_reference(base, X, y, fit_rows, val_rows, random_state) -> tuple[float, str]:
    """The non-private, unconstrained model's error on public ``(x, y)`` and what it is: on the validation rows
    when they are held out, else (every row fitted and scored) its K-fold cross-validated error.

    The runs are scored on the rows they were fitted on, but "error ≤ reference + X" means the non-private
    model's error on unseen rows, not on the rows it fitted: its training error is optimistic by its own
    overfitting, while a private model's noise and fairness term leave it little (figures on adult:
    docs/guide/command_line.md and docs/guide/benchmarks.md, "Measurements behind defaults").
    """
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    from dpfair.algorithms import ERMClassifier

    model = getattr(base, "model", "logistic")
    erm = ERMClassifier(model=model if isinstance(model, str) and model != "cnn" else "logistic", random_state=0)
    what = f"non-private unconstrained {erm.model} model on public (x, y)"
    if len(fit_rows) != len(val_rows) or not np.array_equal(fit_rows, val_rows):
        erm.fit(X[fit_rows], y[fit_rows])
        return float(np.mean(erm.predict(X[val_rows]) != y[val_rows])), f"{what}: its error on the validation part"
    folds = min(REFERENCE_FOLDS, int(np.unique(y, return_counts=True)[1].min()))
    if folds < 2:
        erm.fit(X, y)
        return float(np.mean(erm.predict(X) != y)), f"{what}: its training error (a class has one row)"
    seed = None if random_state is None else int(np.random.default_rng(random_state).integers(2**31 - 1))
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    return (float(np.mean(cross_val_predict(erm, X, y, cv=cv) != y)),
            f"{what}: its {folds}-fold cross-validated error on the training part")


def reference_plan(state: SearchState, reference_share: float, random_state) -> ReferencePlan:
    """The record unit's private reference, planned: a DP-SGD logistic model at half of ``reference_share`` of
    the search's ε, the σ of its error's release at the other half, and the model's planned ledger on the fit
    part."""
    from dpfair.algorithms import DPSGDClassifier

    half = reference_share * state.target / 2.0
    model = DPSGDClassifier(epsilon=half, delta=state.delta, classes=state.classes.tolist(),
                            groups=state.groups.tolist(), random_state=random_state)
    sigma = calibrate_noise(gaussian_event, half, state.delta, PrivacyUnit.RECORD.relation)
    return ReferencePlan(model, sigma, plan_of(model, state.Xf, state.yf, state.sf, checked=True))


def private_reference(state: SearchState, session: ReleaseSession) -> float:
    """The private reference's validation error, released through ``session`` (its model's ledger joins the
    session's first, labelled as the reference model's), clipped to [0, 1]."""
    model = clone(state.reference_plan.model).fit_within(session.charge, state.Xf, state.yf, state.sf)
    session.ledger.extend(reference_entries(model.privacy_ledger_))
    error = float(np.sum(predict_with_groups(model, state.Xv, state.sv) != state.yv)) / state.n_val
    noisy = session.release(REFERENCE_ERROR).noisy_sum(np.array([error]), bound=1.0 / state.n_val)
    return float(np.clip(noisy[0], 0.0, 1.0))
