"""What a model file may hold: the registry of dpfair's classes, which their modules fill, and the fixed
allow-lists of library classes (enums, dp_accounting events, scikit-learn / fairlearn objects, meta-estimators).

Contract: each estimator class, and each dpfair class that an estimator holds (a clipping rule, a fairlearn moment
of dpfair's), is put on the allow-list by the module that defines it, with :func:`register_estimator`,
:func:`register_dataclass` and :func:`register_moment`; this module imports none of them, so that the estimators
sit above the format. A file can only name a class registered in the process reading it.

Safety: a file names classes only through these tables (the decoder and the scikit-learn part's reader build no
class that a table does not hold), and they are filled by dpfair's own code as it is imported, never from a file.
Importing this module loads no torch.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from dpfair.model_files.errors import SaveError

__all__ = ["TENSOR_DTYPES", "Wrapper", "dataclass_classes", "dp_events", "enums", "estimator_classes", "is_moment",
           "library_sklearn", "named", "register_dataclass", "register_estimator", "register_moment", "registered",
           "skops_trusted", "sklearn_classes", "wrappers"]

#: dpfair's estimator classes a file may hold, by class name (:func:`register_estimator`).
_ESTIMATORS: dict[str, type] = {}
#: dpfair's dataclasses held by estimators (beyond the privacy ledger and plan), by name (:func:`register_dataclass`).
_DATACLASSES: dict[str, type] = {}
#: dpfair's fairlearn moments held by estimators, by ``module.qualname`` (:func:`register_moment`).
_MOMENTS: dict[str, type] = {}


def _register(table: dict, key: str, cls: type) -> type:
    """``table[key] = cls``, refusing a second class under a key (a module reloaded keeps its key)."""
    held = table.get(key)
    if held is not None and held is not cls and (held.__module__, held.__qualname__) != (cls.__module__,
                                                                                      cls.__qualname__):
        raise ValueError(f"{key!r} is registered for model files as {held.__module__}.{held.__qualname__} "
                         f"already; {cls.__module__}.{cls.__qualname__} needs another name")
    table[key] = cls
    return cls


def register_estimator(cls: type) -> type:
    """Put the dpfair estimator class ``cls`` on the model files' allow-list (usable as a class decorator).

    A file names it by class name; loading rebuilds it by its constructor from the saved ``get_params()``, then
    sets its public fitted attributes (names ending in ``_``). Only dpfair's own estimators register, when their
    classes are made (``FairEstimator.__init_subclass__``, for the classes :data:`dpfair.algorithms.METHODS`
    names): the allow-list is the method table.
    """
    return _register(_ESTIMATORS, cls.__name__, cls)


def register_dataclass(cls: type) -> type:
    """Put a dpfair dataclass that fitted estimators hold (a clipping rule) on the allow-list; returns ``cls``.

    Saved as its ``__init__`` fields, rebuilt by its constructor from them: it must be a dataclass.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"register_dataclass takes a dataclass, got {cls.__module__}.{cls.__qualname__}")
    return _register(_DATACLASSES, cls.__name__, cls)


def register_moment(cls: type) -> type:
    """Put a fairlearn moment class of dpfair's (``CorrectedParity``) on the allow-list; returns ``cls``.

    Saved as fairlearn's own moments are (in the scikit-learn part, trusted by name), only while it is not loaded
    with training data.
    """
    return _register(_MOMENTS, f"{cls.__module__}.{cls.__qualname__}", cls)


def registered() -> dict[str, dict[str, type]]:
    """What this process has registered so far: ``{"estimators": {name: class}, "dataclasses": {name: class},
    "moments": {module.qualname: class}}`` (copies)."""
    return {"estimators": dict(_ESTIMATORS), "dataclasses": dict(_DATACLASSES), "moments": dict(_MOMENTS)}


# ==================================================================================== allow-lists
@functools.cache
def enums() -> dict[str, type]:
    """The enums a file may hold, by class name."""
    from dp_accounting import NeighboringRelation

    from dpfair.privacy import PrivacyUnit

    return {"PrivacyUnit": PrivacyUnit, "NeighboringRelation": NeighboringRelation}


@functools.cache
def dp_events() -> dict[str, type]:
    """dp_accounting's event classes, by name (every concrete ``DpEvent`` of ``dp_accounting.dp_event``)."""
    from dp_accounting import dp_event

    names = ("NoOpDpEvent", "NonPrivateDpEvent", "UnsupportedDpEvent", "GaussianDpEvent", "LaplaceDpEvent",
             "DiscreteLaplaceDpEvent", "RandomizedResponseDpEvent", "SelfComposedDpEvent", "ComposedDpEvent",
             "PoissonSampledDpEvent", "SampledWithReplacementDpEvent", "SampledWithoutReplacementDpEvent",
             "SingleEpochTreeAggregationDpEvent", "RepeatAndSelectDpEvent", "MixtureOfGaussiansDpEvent",
             "ZCDpEvent", "TruncatedSubsampledGaussianDpEvent")
    return {n: getattr(dp_event, n) for n in names if hasattr(dp_event, n)}


def dataclass_classes() -> dict[str, type]:
    """dpfair's own dataclasses that fitted estimators hold: the privacy ledger and plan, and the registered ones
    (clipping rules)."""
    from dpfair.privacy.accounting import LedgerEntry, PrivacyLedger
    from dpfair.privacy.plan import Part, PrivacyPlan

    return {**{cls.__name__: cls for cls in (PrivacyLedger, LedgerEntry, PrivacyPlan, Part)}, **_DATACLASSES}


@functools.cache
def library_sklearn() -> tuple[type, ...]:
    """scikit-learn and fairlearn classes whose objects go, whole, to the file's scikit-learn part (skops): the base
    learners and transformers dpfair's estimators hold, fairlearn's moments and ThresholdOptimizer's fitted rule."""
    from fairlearn.reductions import (
        DemographicParity,
        EqualizedOdds,
        ErrorRate,
        ErrorRateParity,
        FalsePositiveRateParity,
        TruePositiveRateParity,
    )
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.dummy import DummyClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.preprocessing import (
        MaxAbsScaler,
        MinMaxScaler,
        RobustScaler,
        StandardScaler,
    )
    from sklearn.svm import LinearSVC

    from dpfair.utils.upstream import InterpolatedThresholder

    return (LogisticRegression, LinearSVC, GaussianNB, DummyClassifier, LinearDiscriminantAnalysis, StandardScaler,
            MinMaxScaler, MaxAbsScaler, RobustScaler, DemographicParity, EqualizedOdds, TruePositiveRateParity,
            FalsePositiveRateParity, ErrorRateParity, ErrorRate, InterpolatedThresholder)


def sklearn_classes() -> dict[str, type]:
    """Every class of the scikit-learn part, by the public module and name (dpfair's registered moments: by
    ``module.qualname``)."""
    return {**{f"{c.__module__.split('._')[0]}.{c.__qualname__}": c for c in library_sklearn()}, **_MOMENTS}


def skops_trusted() -> list[type]:
    """The ``trusted`` list handed to ``skops.io.loads``: explicit classes, never ``True``. skops adds its own
    defaults (scikit-learn's estimators, numpy and scipy types); this adds the fairlearn and dpfair classes of the
    part and the two objects ThresholdOptimizer's rule holds (its threshold operations, in sklearn ``Bunch``es)."""
    from sklearn.utils import Bunch

    from dpfair.utils.upstream import ThresholdOperation

    return [c for c in sklearn_classes().values() if not c.__module__.startswith("sklearn.")] + [
        ThresholdOperation, Bunch]


def is_moment(obj) -> bool:
    """Whether ``obj`` is a fairlearn moment."""
    from fairlearn.reductions import Moment

    return isinstance(obj, Moment)


@dataclasses.dataclass(frozen=True)
class Wrapper:
    """A meta-estimator saved in the JSON tree (its parts may go to the scikit-learn part): constructor parameters
    plus public fitted attributes (names ending in ``_``); private attributes are never saved.

    ``drop``: public fitted attributes not saved because they hold training data and prediction does not read them;
    ``check``: save-time check(obj, where); ``restore``: load-time rebuild of the private state that prediction
    reads, from the public attributes (fairlearn's internals, behind :mod:`dpfair.utils.upstream`).
    """

    cls: type
    drop: tuple[str, ...] = ()
    check: Any = None
    restore: Any = None


def _check_eg(obj, where):
    from dpfair.utils.upstream import exponentiated_gradient_hypotheses_are_predictors

    if not exponentiated_gradient_hypotheses_are_predictors(obj):
        raise SaveError(f"{where}: this fairlearn version's ExponentiatedGradient keeps hypotheses that are not "
                        "its predictors_, so dpfair cannot rebuild them safely; use the fairlearn version "
                        "pinned by dpfair")


def _check_pipeline(obj, where):
    if obj.memory is not None:
        raise SaveError(f"{where} caches its steps (memory={obj.memory!r}); save a Pipeline with memory=None")


def _restore_eg(obj):
    from dpfair.utils.upstream import restore_exponentiated_gradient_hypotheses

    restore_exponentiated_gradient_hypotheses(obj)


@functools.cache
def wrappers() -> dict[str, Wrapper]:
    """The meta-estimators a file may hold, by ``module.qualname``. ExponentiatedGradient's ``constraints_`` is its
    moment loaded with X, y and s (only ``fit`` reads it); ThresholdOptimizer keeps its trade-off curves, plotting
    state computed from the training rows, in private attributes (never saved)."""
    from fairlearn.postprocessing import ThresholdOptimizer
    from fairlearn.reductions import ExponentiatedGradient
    from sklearn.pipeline import Pipeline

    return {"fairlearn.reductions.ExponentiatedGradient": Wrapper(
                ExponentiatedGradient, drop=("constraints_",), check=_check_eg, restore=_restore_eg),
            "fairlearn.postprocessing.ThresholdOptimizer": Wrapper(ThresholdOptimizer),
            "sklearn.pipeline.Pipeline": Wrapper(Pipeline, check=_check_pipeline)}


def named(obj, table: dict) -> str | None:
    """The name under which ``table`` holds the class of ``obj`` itself (not a base class), or None."""
    return next((name for name, cls in table.items() if type(obj) is cls), None)


def estimator_classes() -> dict[str, type]:
    """The registered estimator classes, by class name (a copy)."""
    return dict(_ESTIMATORS)


#: numpy dtypes stored as tensors (safetensors holds each of them; complex128 as pairs of float64).
TENSOR_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                           "float16", "float32", "float64", "complex64", "complex128"})
