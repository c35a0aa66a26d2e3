"""A private search's settings: the values each hyper-parameter accepts, declared, and the rules that tie them
together, all checked before any data is read.

:data:`PARAMETER_CONSTRAINTS` is :class:`~dpfair.selection.PrivateSearch`'s ``parameter_constraints``, in the
vocabulary of :mod:`dpfair.utils.constraints` (one :func:`~dpfair.utils.constraints.check_parameters` call, as
the estimators' :meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), with two constraints of
its own that keep the search's wording: :class:`Stated` ("must lie in (0, 1)") and :class:`Finite` ("must be
finite"). The rules (:func:`check_settings`) then read the estimator, the notion, the grid and the strategy:
every candidate is checked by the estimator's own ``check_hyperparameters`` (a clone with the candidate set), and
a held-out share is refused where the strategy (the constrained one fits and scores every row) would ignore it.
Everything here is public, so a refusal costs no privacy and the CLI refuses before loading any data.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import NamedTuple

from sklearn.base import clone
from sklearn.model_selection import ParameterGrid

from dpfair.fairness.notions import Notion, get_notion
from dpfair.privacy import PrivacyBudget, PrivacyUnit, check_privacy_unit
from dpfair.selection.repetitions import REPETITIONS
from dpfair.utils.capabilities import capabilities
from dpfair.utils.constraints import (
    Constraint,
    HasMethods,
    Instances,
    Interval,
    Listing,
    Options,
    check_parameters,
)

__all__ = ["PARAMETER_CONSTRAINTS", "RESERVED", "STRATEGIES", "Finite", "Settings", "Stated", "check_settings",
           "resolve_strategy", "takes_released_shares", "validation_share"]

#: The search's strategies (:class:`~dpfair.selection.PrivateSearch`).
STRATEGIES = ("auto", "random_stopping", "constrained")

#: Hyper-parameters the search sets itself on every run, which a grid may not vary.
RESERVED = ("epsilon", "delta", "random_state", "noise_multiplier", "privacy_unit", "accountant", "verbose",
            "notion", "groups", "classes")


class Stated(Constraint):
    """The values ``inner`` accepts; any other refused as "<name> must <requirement>, got <value>" (the search's
    wording of a share: ``"lie in (0, 1)"``, which :class:`~dpfair.utils.constraints.Interval` writes "lie
    strictly between 0 and 1"). ``what``: what the set holds (default: ``inner``'s description)."""

    def __init__(self, inner: Constraint, requirement: str, *, what: str | None = None, note: str | None = None):
        self.inner, self.requirement, self.what, self.note = inner, requirement, what, note

    def accepts(self, value) -> bool:
        return self.inner.accepts(value)

    def describe(self) -> str:
        return self.what or self.inner.describe()

    def missed(self, value) -> str | None:
        return self.requirement

    def __repr__(self) -> str:
        return f"Stated({self.inner!r}, {self.requirement!r})"


class Finite(Constraint):
    """The values ``inner`` accepts; a number that is not finite is refused as "<name> must be finite" (``inner``
    says the rest)."""

    def __init__(self, inner: Constraint, *, note: str | None = None):
        self.inner, self.note = inner, note

    def accepts(self, value) -> bool:
        return self.inner.accepts(value)

    def describe(self) -> str:
        return self.inner.describe()

    def missed(self, value) -> str | None:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            try:
                if not math.isfinite(value):
                    return "be finite"
            except OverflowError:  # an integer past the float range
                return "be finite"
        return self.inner.missed(value)

    def __repr__(self) -> str:
        return f"Finite({self.inner!r})"


_SHARE = Stated(Interval(float, 0, 1, closed="neither"), "lie in (0, 1)", what="a share of epsilon in (0, 1)")

#: The values each of :class:`~dpfair.selection.PrivateSearch`'s hyper-parameters accepts.
PARAMETER_CONSTRAINTS = {
    "estimator": [HasMethods("fit", "get_params", "set_params", what="a private dpfair estimator")],
    "param_grid": [Instances(Mapping, "a dict of value lists"), Listing("a list of such dicts")],
    "epsilon": [Finite(Interval(float, 0, None, closed="neither"), note="smaller ε means more privacy")],
    "delta": [None, Interval(float, 0, 1, closed="neither", note="None: 1/n²")],
    "notion": [None, Instances((str, Notion), "a fairness notion's name")],
    "max_error_increase": [Interval(float, 0, math.inf, closed="both")],
    "reference_error": [None, Interval(float, 0, 1, closed="both")],
    "penalty": [Finite(Interval(float, 0, None, closed="left"),
                       note="the score's sensitivity grows with it, and an infinite one would need infinite noise")],
    "repetitions": [Options(*REPETITIONS), Interval(float, 0, math.inf, closed="both", note="a number: the shape η of the law; inf is poisson")],
    "mean_runs": [None, Interval(float, 1, None, closed="left", note="the mean number of runs")],
    "strategy": [Options(*STRATEGIES)],
    "validation_size": [Options("auto"), Stated(Interval(float, 0, 1, closed="left"), "lie in [0, 1)",
                                                note="the share of rows held out to score the runs")],
    "counts_share": [_SHARE],
    "score_share": [_SHARE],
    "reference_share": [_SHARE],
    "budget": [None, Instances(PrivacyBudget, "a PrivacyBudget")],
    "random_state": [None, Interval(int, 0, None, closed="left")],
}


class Settings(NamedTuple):
    """The checked settings of a search: the estimator, ε of the whole search, the notion scored, the candidates."""

    base: object
    target: float
    notion: object
    candidates: list[dict]


def check_settings(search) -> Settings:
    """Refuse settings and candidates of ``search`` that no data could make valid (module docstring)."""
    check_parameters(search, search.parameter_constraints)
    base = search.estimator
    declared = capabilities(base)
    if not declared.private:
        raise ValueError(f"a private search needs a private dpfair estimator, got {type(base).__name__}: a "
                         "non-private one spends ε = ∞ in every run")
    notion = search.notion if search.notion is not None else base.get_params().get("notion")
    get_notion(notion)
    if declared.notions and notion not in declared.notions:
        raise ValueError(f"{type(base).__name__} targets {', '.join(declared.notions)}; notion={notion!r} is not "
                         "one of them")
    try:
        candidates = list(ParameterGrid(search.param_grid))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"param_grid must be a dict of value lists or a list of such dicts: {exc}") from None
    if not candidates:
        raise ValueError("param_grid holds no candidate; give at least one value per hyper-parameter")
    valid = base.get_params()
    for point in candidates:
        reserved = sorted(set(point) & set(RESERVED))
        unknown = sorted(set(point) - set(valid))
        if reserved:
            raise ValueError(f"param_grid may not set {reserved[0]!r}: the search sets it on every run (pass "
                             "epsilon, delta, notion, random_state to the search itself)")
        if unknown:
            raise ValueError(f"{type(base).__name__} has no hyper-parameter {unknown[0]!r}; valid: "
                             f"{', '.join(valid)}")
        try:
            clone(base).set_params(**point).check_hyperparameters()
        except ValueError as exc:
            raise ValueError(f"the grid's candidate {point}: {exc}") from None
    size = search.validation_size
    unit = check_privacy_unit(getattr(base, "privacy_unit", "record"))
    if resolve_strategy(search.strategy, base, candidates, unit) == "constrained" and \
            not isinstance(size, str) and size > 0:
        raise ValueError(f"validation_size={size!r} holds rows out to score random stopping's runs, but the "
                         "constrained strategy scores none (its one fit trains on every row): drop validation_size "
                         "(or pass 0), or pass strategy='random_stopping'")
    return Settings(base, float(search.epsilon), notion, candidates)


def resolve_strategy(strategy: str, base, candidates: list[dict], unit: PrivacyUnit) -> str:
    """``strategy`` resolved; refuses "constrained" where the error is private or the grid is not λ's."""
    why = None
    if not capabilities(base).target_error:
        why = f"it is DP-FERMI's (target_error); {type(base).__name__} has none"
    elif unit is not PrivacyUnit.SENSITIVE:
        why = "the training error it follows is public only under privacy_unit='sensitive'"
    elif any(set(point) - {"lam"} for point in candidates):
        others = sorted({k for point in candidates for k in point} - {"lam"})
        why = "it tunes λ alone; the grid varies " + ", ".join(others)
    if strategy == "constrained" and why is not None:
        raise ValueError(f"strategy='constrained' does not apply: {why}; use strategy='random_stopping'")
    return "random_stopping" if strategy == "random_stopping" or why is not None else "constrained"


def validation_share(size, base) -> float:
    """``validation_size``, with ``"auto"`` resolved: 0 for a logistic model, 0.2 for any other."""
    if isinstance(size, str) and size == "auto":
        return 0.0 if base.get_params().get("model") == "logistic" else 0.2
    return size


def takes_released_shares(base) -> bool:
    """Whether the runs take their group proportions from the search's released counts: DP-FERMI's, unless the
    user gave public ones (its per-cell shares are the counts' rows, normalised; each run then releases none)."""
    return capabilities(base).public_group_shares and base.group_proportions is None
