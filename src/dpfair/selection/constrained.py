"""The constrained strategy of a private search: one DP-FERMI fit whose λ follows "error ≤ reference + X".

``strategy="constrained"``, and ``"auto"``'s choice for DP-FERMI under the sensitive unit when the grid varies λ
alone (:func:`~dpfair.selection.settings.resolve_strategy`). There x and y are public, so the error of a
released model on the training rows is post-processing: no search is needed to find the λ that meets "error ≤
reference + X". One DP-FERMI fit spends the whole ε, its λ following the constraint by dual ascent after each
epoch (``DPFERMIClassifier(target_error=reference + X)``,
:func:`~dpfair.algorithms.dpfermi.loop.adapt_lambda`), from the estimator's ``lam``; the grid's λ values are
not tried one by one. Its ledger is the model's own (nothing else is released), and the model is trained at the
total ε rather than the fraction random stopping leaves each run. How both strategies compare with the
non-privately selected curve is measured in ``results/selection/summary.md`` (constrained) and
``results/selection/random_stopping/summary.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import clone

from dpfair.privacy import PrivacyBudget
from dpfair.privacy.budget import charging_grid
from dpfair.selection.plan import plan_of
from dpfair.selection.reference import PROXY, public_reference

if TYPE_CHECKING:
    from dpfair.selection.state import SearchState

__all__ = ["fit_constrained"]


def fit_constrained(state: SearchState, *, reference_error, max_error_increase, random_state,
                    budget: PrivacyBudget | None, owner) -> tuple[object, dict]:
    """``(model, selection)``: the one fit at the whole ε (module docstring), charged to ``budget`` (if any) as
    ``owner``'s before its first release, and what it chose, all public."""
    base, X, y, s = state.base, state.X, state.y, state.s
    reference, source = reference_error, PROXY
    if reference is None:
        rows = np.arange(len(y))
        reference, source = public_reference(base, X, y, rows, rows, random_state)
    threshold = min(float(reference) + float(max_error_increase), 1.0 - 1e-9)
    start = float(base.lam) if float(base.lam) > 0 else 1.0
    model = PrivacyBudget.detach(clone(base)).set_params(
        notion=state.notion, epsilon=state.target, delta=state.delta, lam=start, target_error=threshold,
        verbose=False, random_state=random_state)
    with charging_grid(budget, owner, "a private search") as charge:
        if charge is not None:  # the whole fit, before its first release
            charge.claim_ledger(plan_of(model, X, y, s, checked=True), state.delta)
        model.fit_within(charge, X, y, sensitive_features=s)  # part of the claim just made
    selection = {
        "strategy": "constrained", "chosen": {"lam": model.lam_}, "released_score": None,
        "candidates": [dict(c) for c in state.candidates], "per_model_epsilon": model.privacy_spent_[0],
        "privacy_unit": state.unit.value, "lam_start": start, "lam_path": [h["lam"] for h in model.history_],
        "score": {"notion": state.notion, "rule": "training error <= threshold, lambda by dual ascent (no score "
                  "released)", "threshold": threshold, "reference_error": float(reference),
                  "reference": source, "max_error_increase": float(max_error_increase)},
    }
    return model, selection
