"""Every use of a private API of dp_accounting and fairlearn, in one place.

dpfair subclasses dp_accounting's accountants and fairlearn's parity moment and
reads a few fitted estimators' internals. None of that is public API, so it
lives here, behind small named functions, each saying which upstream version
it was written against and what breaks if upstream changes. The rest of the
package reaches upstream internals only through this module.

Supported upstream releases (kept in step with ``pyproject.toml``; pinned by
``tests/test_upstream.py``):

- dp-accounting ``>=0.5.0,<=0.6.0`` (written against 0.6.0, checked on 0.5.0 and
  0.5.1). 0.4.x has no ``RandomizedResponseDpEvent``, which dpfair releases.
- fairlearn ``>=0.13,<=0.15.0`` (written against 0.15.0, checked on 0.13.0 and
  0.14.0). Up to 0.12 ``UtilityParity.index`` is a plain attribute rather
  than a property over ``_index``; 0.11 also calls scikit-learn with the
  ``force_all_finite`` keyword that current scikit-learn no longer has.

On import this module checks that dp_accounting's internals are still there
(fairlearn's are checked on first use, since importing fairlearn costs about a
second that :mod:`dpfair.privacy` does not need) and raises
:class:`UnsupportedUpstreamError`, an ``ImportError`` naming the supported
range, if they are not.
"""

from __future__ import annotations

from importlib import metadata

import dp_accounting as dpa

#: Release ranges whose internals this module was checked against (same as pyproject.toml).
SUPPORTED_DP_ACCOUNTING = ">=0.5.0,<=0.6.0"
SUPPORTED_FAIRLEARN = ">=0.13,<=0.15.0"

__all__ = [
    "SUPPORTED_DP_ACCOUNTING",
    "SUPPORTED_FAIRLEARN",
    "UnsupportedUpstreamError",
    "AccountantHook",
    "PLDAccountantBase",
    "RdpAccountantBase",
    "pld_discretization",
    "absorb_pld",
    "absorb_rdp",
    "pmf_predict",
    "set_utility_parity_state",
    "exponentiated_gradient_hypotheses_are_predictors",
    "restore_exponentiated_gradient_hypotheses",
    # fairlearn names, loaded on first access (see __getattr__ and FAIRLEARN_INTERNALS).
    "MOMENT_ALL",
    "MOMENT_EVENT",
    "MOMENT_GROUP_ID",
    "MOMENT_LABEL",
    "MOMENT_SIGN",
    "PredictorAsCallable",
    "InterpolatedThresholder",
    "ThresholdOperation",
    "Moment",
    "UtilityParity",
]


class UnsupportedUpstreamError(ImportError):
    """An upstream release whose internals dpfair.utils.upstream does not know."""


def _installed(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # pragma: no cover - imported, so installed
        return "unknown"


def _unsupported(dist: str, supported: str, what: str) -> UnsupportedUpstreamError:
    return UnsupportedUpstreamError(
        f"dpfair supports {dist}{supported}, found {dist} {_installed(dist)}: {what}. "
        f"Install a supported release (pip install '{dist}{supported}') or update dpfair.utils.upstream."
    )


# ---- dp_accounting ----------------------------------------------------------------------------
try:
    from dp_accounting.pld import pld_privacy_accountant as _pld_module
    from dp_accounting.rdp import rdp_privacy_accountant as _rdp_module
except ImportError as exc:  # pragma: no cover - depends on the installed release
    raise _unsupported("dp-accounting", SUPPORTED_DP_ACCOUNTING,
                       f"cannot import its pld/rdp accountant modules ({exc})") from exc

#: dp_accounting's PLD accountant class (``dp_accounting.pld.pld_privacy_accountant.PLDAccountant``).
PLDAccountantBase = _pld_module.PLDAccountant
#: dp_accounting's RDP accountant class (``dp_accounting.rdp.rdp_privacy_accountant.RdpAccountant``).
RdpAccountantBase = _rdp_module.RdpAccountant


class AccountantHook:
    """Mixin that lets a subclass of a dp_accounting accountant intercept every event it composes.

    Written against dp-accounting 0.6.0 (same in 0.5.x): ``PrivacyAccountant.supports`` and
    ``compose`` call the private hook ``_maybe_compose(event, count, do_compose)``; the upstream
    accountants implement it and recurse through it for ``SelfComposedDpEvent`` (count multiplied)
    and ``ComposedDpEvent``. This mixin routes that hook to :meth:`compose_event`, which subclasses
    override, and exposes upstream's own handling as :meth:`upstream_compose`. Put it just before
    the upstream class in the bases. If upstream renames the hook or stops routing ``supports``/
    ``compose`` through it, the overrides are silently skipped and unsampled REPLACE_ONE events are
    accounted by upstream's rules; the import-time check below then raises instead.
    """

    def _maybe_compose(self, event, count, do_compose):
        return self.compose_event(event, count, do_compose)

    def compose_event(self, event: dpa.DpEvent, count: int, do_compose: bool):
        """Compose (or, with ``do_compose=False``, check) ``count`` runs of ``event``; None or an error."""
        return self.upstream_compose(event, count, do_compose)

    def upstream_compose(self, event: dpa.DpEvent, count: int, do_compose: bool):
        """dp_accounting's own composition of the event (its recursion comes back to compose_event)."""
        return super()._maybe_compose(event, count, do_compose)


def pld_discretization(accountant) -> float:
    """The ``value_discretization_interval`` a PLD accountant was built with.

    Written against dp-accounting 0.6.0: stored as ``_value_discretization_interval`` (no public
    getter). If renamed, helper accountants could no longer be built on the caller's grid.
    """
    return accountant._value_discretization_interval


def absorb_pld(accountant, helper, count: int = 1) -> None:
    """Compose ``count`` copies of ``helper``'s privacy loss (and its non-private flag) into ``accountant``.

    Both are dp_accounting PLD accountants. Written against dp-accounting 0.6.0: the composed
    privacy loss distribution is ``_pld`` (a ``PrivacyLossDistribution`` with ``compose`` and
    ``self_compose``) and ``_contains_non_dp_event`` flags a noiseless release. If either field
    is renamed this raises ``AttributeError``; if their meaning changes, ε of unsampled
    REPLACE_ONE mechanisms and of repeated randomized response would be wrong.
    """
    pld = helper._pld if count == 1 else helper._pld.self_compose(count)
    accountant._contains_non_dp_event |= helper._contains_non_dp_event
    accountant._pld = accountant._pld.compose(pld)


def absorb_rdp(accountant, helper) -> None:
    """Add ``helper``'s Rényi divergences to ``accountant``'s (same orders: build ``helper`` with ``accountant.orders``).

    Written against dp-accounting 0.6.0: the running RDP vector is ``_rdp`` (aligned with the
    public ``orders``; the public ``rdp`` property is a read-only copy). If it is renamed this
    raises ``AttributeError``; if it stops being the additive per-order vector, ε of unsampled
    REPLACE_ONE mechanisms on the RDP accountant would be wrong.
    """
    accountant._rdp = accountant._rdp + helper.rdp


def _check_dp_accounting(pld_cls=PLDAccountantBase, rdp_cls=RdpAccountantBase) -> None:
    """Raise UnsupportedUpstreamError unless the accountant internals used above are there."""
    dist, supported = "dp-accounting", SUPPORTED_DP_ACCOUNTING
    for name in ("RandomizedResponseDpEvent", "GaussianDpEvent", "LaplaceDpEvent", "SelfComposedDpEvent"):
        if not hasattr(dpa, name):
            raise _unsupported(dist, supported, f"dp_accounting has no {name}")
    for cls in (pld_cls, rdp_cls):
        if not callable(getattr(cls, "_maybe_compose", None)):
            raise _unsupported(dist, supported, f"{cls.__name__} has no _maybe_compose hook")

        class _Probe(AccountantHook, cls):
            seen = False

            def compose_event(self, event, count, do_compose):
                type(self).seen = True
                return super().compose_event(event, count, do_compose)

        probe = _Probe()
        probe.compose(dpa.NoOpDpEvent())
        if not _Probe.seen:
            raise _unsupported(dist, supported, f"{cls.__name__}.compose no longer goes through _maybe_compose")
    pld = pld_cls()
    for field in ("_pld", "_contains_non_dp_event", "_value_discretization_interval"):
        if not hasattr(pld, field):
            raise _unsupported(dist, supported, f"{pld_cls.__name__} has no {field}")
    if not (hasattr(pld._pld, "compose") and hasattr(pld._pld, "self_compose")):
        raise _unsupported(dist, supported, f"{pld_cls.__name__}._pld is not a PrivacyLossDistribution")
    rdp = rdp_cls()
    for field in ("_rdp", "rdp", "orders"):
        if not hasattr(rdp, field):
            raise _unsupported(dist, supported, f"{rdp_cls.__name__} has no {field}")


_check_dp_accounting()


# ---- fairlearn ----------------------------------------------------------------------------------
def pmf_predict(fitted, X, **kwargs):
    """Class probabilities of a fitted fairlearn randomized classifier, shape (n, 2).

    For ``ExponentiatedGradient`` (``pmf_predict(eg, X)``) and ``ThresholdOptimizer``
    (``pmf_predict(to, X, sensitive_features=s)``). Written against fairlearn 0.15.0: both keep
    the probabilities behind ``_pmf_predict`` and expose only their seeded draw ``predict``. If
    the method is renamed this raises :class:`UnsupportedUpstreamError`.
    """
    method = getattr(fitted, "_pmf_predict", None)
    if method is None:
        raise _unsupported("fairlearn", SUPPORTED_FAIRLEARN, f"{type(fitted).__name__} has no _pmf_predict")
    return method(X, **kwargs)


def exponentiated_gradient_hypotheses_are_predictors(eg) -> bool:
    """Whether a fairlearn ``ExponentiatedGradient``'s hypotheses are exactly its ``predictors_``, each wrapped.

    Written against fairlearn 0.15.0 (same in 0.13/0.14): prediction (``_pmf_predict``) calls the hypotheses in
    the private Series ``_hs``, one ``_PredictorAsCallable(predictor)`` per entry of the public ``predictors_``,
    same index. A model file saves ``predictors_`` only and rebuilds ``_hs`` with
    :func:`restore_exponentiated_gradient_hypotheses`; this is its save-time check (an unfitted one: True). If
    upstream's hypotheses stop being the wrapped predictors, it returns False and the save is refused.
    """
    hs, predictors = getattr(eg, "_hs", None), getattr(eg, "predictors_", None)
    if hs is None and predictors is None:
        return True
    wrap = _load_fairlearn()["PredictorAsCallable"]
    return (hs is not None and predictors is not None and len(hs) == len(predictors)
            and list(hs.index) == list(predictors.index)
            and all(type(h) is wrap and vars(h).get("_classifier") is p
                    for h, p in zip(hs.values, predictors.values)))


def restore_exponentiated_gradient_hypotheses(eg) -> None:
    """Rebuild a loaded ``ExponentiatedGradient``'s private hypotheses ``_hs`` from its public ``predictors_``.

    Written against fairlearn 0.15.0 (same in 0.13/0.14): see
    :func:`exponentiated_gradient_hypotheses_are_predictors`. Does nothing to an unfitted one.
    """
    import pandas as pd

    predictors = vars(eg).get("predictors_")
    if predictors is None:
        return
    wrap = _load_fairlearn()["PredictorAsCallable"]
    eg._hs = pd.Series([wrap(p) for p in predictors.values], index=predictors.index, dtype=object)


def set_utility_parity_state(moment, *, utilities, prob_event, prob_group_event, index, U) -> None:
    """Fill the fields that ``UtilityParity``'s ``gamma``/``bound``/``project_lambda``/``signed_weights`` read.

    For a ``UtilityParity`` subclass that builds its own constraint matrix in ``load_data`` (after
    ``Moment.load_data``). Written against fairlearn 0.15.0 (same in 0.13/0.14): those methods read
    ``utilities`` (n×2), ``utility_diff``, ``prob_event`` (by event), ``prob_group_event`` (by
    (event, group)), ``U`` (n × constraints) and the ``index`` property, which returns ``_index``;
    ``default_objective_lambda_vec`` must exist. If upstream renames any of these, the inherited
    methods raise ``AttributeError`` or use upstream's own values instead of the subclass's.
    """
    _load_fairlearn()
    moment.utilities = utilities
    moment.utility_diff = utilities[:, 1] - utilities[:, 0]
    moment.prob_event = prob_event
    moment.prob_group_event = prob_group_event
    moment._index = index
    moment.U = U
    moment.default_objective_lambda_vec = None


#: fairlearn names this module re-exports, loaded on first access: dpfair's public name → (the module holding it,
#: upstream's name there). Written against fairlearn 0.15.0 (same in 0.13/0.14). ``MOMENT_ALL``, ``MOMENT_EVENT``,
#: ``MOMENT_GROUP_ID``, ``MOMENT_LABEL`` and ``MOMENT_SIGN`` are fairlearn's ``_ALL``, ``_EVENT``, ``_GROUP_ID``,
#: ``_LABEL`` and ``_SIGN``: the columns of ``Moment.tags`` and the levels of a moment's constraint index;
#: ``PredictorAsCallable`` (``_PredictorAsCallable``) wraps ExponentiatedGradient's fitted predictors in its ``_hs``;
#: ``InterpolatedThresholder`` and ``ThresholdOperation`` are ThresholdOptimizer's fitted rule.
#: If upstream moves or renames one, accessing it raises :class:`UnsupportedUpstreamError`.
_MOMENT = "fairlearn.reductions._moments.moment"
FAIRLEARN_INTERNALS = {
    "MOMENT_ALL": (_MOMENT, "_ALL"),
    "MOMENT_EVENT": (_MOMENT, "_EVENT"),
    "MOMENT_GROUP_ID": (_MOMENT, "_GROUP_ID"),
    "MOMENT_LABEL": (_MOMENT, "_LABEL"),
    "MOMENT_SIGN": (_MOMENT, "_SIGN"),
    "PredictorAsCallable": ("fairlearn.reductions._exponentiated_gradient._lagrangian", "_PredictorAsCallable"),
    "InterpolatedThresholder": ("fairlearn.postprocessing._interpolated_thresholder", "InterpolatedThresholder"),
    "ThresholdOperation": ("fairlearn.postprocessing._threshold_operation", "ThresholdOperation"),
}
#: Public fairlearn classes re-exported beside them (the base classes of dpfair's moments).
FAIRLEARN_PUBLIC = {"Moment": ("fairlearn.reductions", "Moment"), "UtilityParity": ("fairlearn.reductions", "UtilityParity")}
_FAIRLEARN_NAMES = tuple(FAIRLEARN_INTERNALS) + tuple(FAIRLEARN_PUBLIC)


def _load_fairlearn() -> dict:
    """Import fairlearn's names above once, checking the internals dpfair relies on.

    Besides the names, checks that ``UtilityParity.index`` is a property returning ``_index``
    (fairlearn 0.13 on; a plain attribute before) and that ``UtilityParity`` still defines the
    methods that read the fields :func:`set_utility_parity_state` fills.
    """
    loaded = globals().get("_FAIRLEARN_LOADED")
    if loaded is not None:
        return loaded
    import importlib

    dist, supported = "fairlearn", SUPPORTED_FAIRLEARN
    names = {}
    for name, (module_name, upstream) in {**FAIRLEARN_INTERNALS, **FAIRLEARN_PUBLIC}.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise _unsupported(dist, supported, f"cannot import {module_name} ({exc})") from exc
        if not hasattr(module, upstream):
            raise _unsupported(dist, supported, f"{module_name} has no {upstream}")
        names[name] = getattr(module, upstream)
    parity = names["UtilityParity"]
    if not isinstance(parity.__dict__.get("index"), property):
        raise _unsupported(dist, supported, "UtilityParity.index is not a property over _index")
    for method in ("gamma", "bound", "project_lambda", "signed_weights"):
        if method not in parity.__dict__:
            raise _unsupported(dist, supported, f"UtilityParity no longer defines {method}")
    globals().update(names)
    globals()["_FAIRLEARN_LOADED"] = names
    return names


def __getattr__(name: str):
    if name in _FAIRLEARN_NAMES:
        return _load_fairlearn()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
