"""What an estimator can do, declared by its class and asked for by the code that drives it.

scikit-learn's estimators declare what input they accept as tags (``__sklearn_tags__``, read with
``sklearn.utils.get_tags``). dpfair's estimators declare, the same way, what the CLI, the sweeps, the private
search, the audits and the certificates need to know of a method: whether it is private and under which units,
the notions it targets, whether it reads s at prediction, whether a grid of it trains batched, and so on. Each
returns a frozen :class:`Capabilities` from ``__dpfair_capabilities__()``, a subclass refining its parent's
with :func:`dataclasses.replace`; callers ask :func:`capabilities`, never the estimator's class or its private
attributes, so that a new method gains a caller's special path by declaring it, in its own file.

Capabilities are read off the class and its hyper-parameters, never off data: asking costs no privacy, and
may come before any data is loaded (the CLI checks a method's notions before reading a file). This module
imports nothing of dpfair, so every layer may ask.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities", "capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """What one estimator can do. The defaults describe an estimator that declares nothing (any scikit-learn
    classifier): non-private, no fairness notion, s read nowhere.

    Attributes
    ----------
    private : its fit is differentially private: it takes ``epsilon`` and ``delta``, calibrates a privacy plan
        before its first release and records every release on ``privacy_ledger_``.
    units : the privacy units it can guarantee (``"sensitive"``, ``"record"``); empty for a non-private method.
    notions : the fairness notions it can target (the values of its ``notion``); empty: none.
    fairness_strength : the hyper-parameter setting how strictly it targets them (``None``: none).
    requires_sensitive : ``fit`` needs ``sensitive_features``.
    predict_needs_sensitive : ``predict`` and ``predict_proba`` take ``sensitive_features`` too (a group-aware
        rule).
    batched_grid : its class's ``fit_many`` (:meth:`~dpfair.algorithms.base.FairEstimator.fit_many`) trains a grid
        of its points as one batched computation (models of one seed share their secret Poisson batches, each
        draws its own noise).
    target_error : its λ can follow a public constraint "training error ≤ target" during the fit
        (``target_error``): the private search's constrained strategy.
    public_group_shares : it takes the groups' shares as a public hyper-parameter (``group_proportions``)
        instead of releasing counts for them, so a private search may hand it the shares of its own released
        counts.
    certificate : the distance bound :func:`dpfair.bounds.certify` uses for it: ``"output_perturbation"``
        (Mangold et al.'s Lemma 4.1) or ``"dpsgd"`` (Lemma 4.2); ``None``: none is known.
    """

    private: bool = False
    units: tuple[str, ...] = ()
    notions: tuple[str, ...] = ()
    fairness_strength: str | None = None
    requires_sensitive: bool = False
    predict_needs_sensitive: bool = False
    batched_grid: bool = False
    target_error: bool = False
    public_group_shares: bool = False
    certificate: str | None = None


def capabilities(estimator) -> Capabilities:
    """What ``estimator`` can do, as it declares it (``estimator.__dpfair_capabilities__()``).

    ``estimator``: an estimator, or an estimator class (asked at its default hyper-parameters). An object that
    declares nothing (a scikit-learn classifier, a pipeline) gets :class:`Capabilities`'s defaults.
    """
    declare = getattr(estimator, "__dpfair_capabilities__", None)
    if declare is None:
        return Capabilities()
    return estimator().__dpfair_capabilities__() if isinstance(estimator, type) else declare()
