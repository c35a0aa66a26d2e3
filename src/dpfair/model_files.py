"""The model-file format behind :mod:`dpfair.persistence`: encoding, decoding, the allow-lists, and the registry of
dpfair's classes that a file may hold.

:mod:`dpfair.persistence` describes the format and is the public API. This module sits below the estimators so that
they can save themselves (``FairEstimator.save``) while it imports none of them: each estimator class, and each
dpfair class that an estimator holds (a clipping rule, a fairlearn moment of dpfair's), is put on the allow-list by
the module that defines it, with :func:`register_estimator`, :func:`register_dataclass` and :func:`register_moment`.
A file can only name a class that is registered in the process reading it; :func:`dpfair.persistence.load_estimator`
and :func:`dpfair.algorithms.load_estimator` load every dpfair estimator first.

Why loading runs no code from the file: the file is parsed by safetensors (a JSON header and raw little-endian
buffers, no pickle); the JSON tree is rebuilt by :func:`_decode`, which calls only the constructors of the classes
on the allow-lists below; the scikit-learn part is read by ``skops.io.loads`` with an explicit ``trusted`` list
(skops audits every type the part names before it constructs any, and builds objects without unpickling), and what
it returns is checked against the same allow-list.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import functools
import io
import json
import math
import os
import random
import re
import tempfile
import zipfile
from typing import Any

import numpy as np
import torch

FORMAT = "dpfair-estimator"
VERSION = 2

__all__ = ["FORMAT", "VERSION", "library_versions", "load_estimator", "load_provenance", "register_dataclass",
           "register_estimator", "register_moment", "registered", "save_estimator"]

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
#: The safetensors entry holding the scikit-learn part (a skops archive, as bytes).
_SKOPS_KEY = "sklearn"


# ==================================================================================== the registry
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
def _enums() -> dict[str, type]:
    from dp_accounting import NeighboringRelation

    from dpfair.privacy import PrivacyUnit

    return {"PrivacyUnit": PrivacyUnit, "NeighboringRelation": NeighboringRelation}


@functools.cache
def _dp_events() -> dict[str, type]:
    """dp_accounting's event classes, by name (every concrete ``DpEvent`` of ``dp_accounting.dp_event``)."""
    from dp_accounting import dp_event

    names = ("NoOpDpEvent", "NonPrivateDpEvent", "UnsupportedDpEvent", "GaussianDpEvent", "LaplaceDpEvent",
             "DiscreteLaplaceDpEvent", "RandomizedResponseDpEvent", "SelfComposedDpEvent", "ComposedDpEvent",
             "PoissonSampledDpEvent", "SampledWithReplacementDpEvent", "SampledWithoutReplacementDpEvent",
             "SingleEpochTreeAggregationDpEvent", "RepeatAndSelectDpEvent", "MixtureOfGaussiansDpEvent",
             "ZCDpEvent", "TruncatedSubsampledGaussianDpEvent")
    return {n: getattr(dp_event, n) for n in names if hasattr(dp_event, n)}


def _dataclasses() -> dict[str, type]:
    """dpfair's own dataclasses that fitted estimators hold: the privacy ledger and plan, and the registered ones
    (clipping rules)."""
    from dpfair.privacy.accounting import LedgerEntry, PrivacyLedger
    from dpfair.privacy.plan import Part, PrivacyPlan

    return {**{cls.__name__: cls for cls in (PrivacyLedger, LedgerEntry, PrivacyPlan, Part)}, **_DATACLASSES}


@functools.cache
def _library_sklearn() -> tuple[type, ...]:
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


def _sklearn_classes() -> dict[str, type]:
    """Every class of the scikit-learn part, by the public module and name (dpfair's registered moments: by
    ``module.qualname``)."""
    return {**{f"{c.__module__.split('._')[0]}.{c.__qualname__}": c for c in _library_sklearn()}, **_MOMENTS}


def _skops_trusted() -> list[type]:
    """The ``trusted`` list handed to ``skops.io.loads``: explicit classes, never ``True``. skops adds its own
    defaults (scikit-learn's estimators, numpy and scipy types); this adds the fairlearn and dpfair classes of the
    part and the two objects ThresholdOptimizer's rule holds (its threshold operations, in sklearn ``Bunch``es)."""
    from sklearn.utils import Bunch

    from dpfair.utils.upstream import ThresholdOperation

    return [c for c in _sklearn_classes().values() if not c.__module__.startswith("sklearn.")] + [
        ThresholdOperation, Bunch]


def _is_moment(obj) -> bool:
    from fairlearn.reductions import Moment

    return isinstance(obj, Moment)


@dataclasses.dataclass(frozen=True)
class _Wrapper:
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
        raise _SaveError(f"{where}: this fairlearn version's ExponentiatedGradient keeps hypotheses that are not "
                         "its predictors_, so dpfair cannot rebuild them safely; use the fairlearn version "
                         "pinned by dpfair")


def _check_pipeline(obj, where):
    if obj.memory is not None:
        raise _SaveError(f"{where} caches its steps (memory={obj.memory!r}); save a Pipeline with memory=None")


def _restore_eg(obj):
    from dpfair.utils.upstream import restore_exponentiated_gradient_hypotheses

    restore_exponentiated_gradient_hypotheses(obj)


@functools.cache
def _wrappers() -> dict[str, _Wrapper]:
    """The meta-estimators a file may hold, by ``module.qualname``. ExponentiatedGradient's ``constraints_`` is its
    moment loaded with X, y and s (only ``fit`` reads it); ThresholdOptimizer keeps its trade-off curves, plotting
    state computed from the training rows, in private attributes (never saved)."""
    from fairlearn.postprocessing import ThresholdOptimizer
    from fairlearn.reductions import ExponentiatedGradient
    from sklearn.pipeline import Pipeline

    return {"fairlearn.reductions.ExponentiatedGradient": _Wrapper(
                ExponentiatedGradient, drop=("constraints_",), check=_check_eg, restore=_restore_eg),
            "fairlearn.postprocessing.ThresholdOptimizer": _Wrapper(ThresholdOptimizer),
            "sklearn.pipeline.Pipeline": _Wrapper(Pipeline, check=_check_pipeline)}


def _named(obj, table: dict) -> str | None:
    return next((name for name, cls in table.items() if type(obj) is cls), None)


def _estimators() -> dict[str, type]:
    return dict(_ESTIMATORS)


def _is_generator(value) -> bool:
    """Random generators and seeds: numpy, torch, stdlib, dpfair's secret generator."""
    if isinstance(value, (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
                          np.random.SeedSequence, torch.Generator, random.Random)):
        return True
    return any(cls.__name__ == "SecretRandom" and cls.__module__.startswith("dpfair.")
               for cls in type(value).__mro__)


def _generator_refused(where: str, value) -> _SaveError:
    return _SaveError(f"{where} is a random generator ({type(value).__name__}); secret randomness must never "
                      "be saved — keep generators in attributes starting with '_' (this is a bug in dpfair)")


#: numpy dtypes stored as tensors (safetensors holds each of them; complex128 as pairs of float64).
_TENSOR_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                            "float16", "float32", "float64", "complex64", "complex128"})


# ==================================================================================== saving
class _SaveError(ValueError):
    pass


class _Saver:
    def __init__(self):
        self.tensors: dict[str, torch.Tensor] = {}
        self.complex: list[str] = []  # keys of complex128 tensors, stored as (..., 2) float64
        self.sklearn: list = []  # the objects of the scikit-learn part, in order
        self._sklearn_ids: dict[int, int] = {}

    def tensor(self, t: torch.Tensor) -> str:
        key = f"t{len(self.tensors)}"
        # A copy: a view would save its whole storage (e.g. the training data it was sliced from).
        t = t.detach().to("cpu", copy=True).contiguous()
        if t.dtype == torch.complex128:
            t, _ = torch.view_as_real(t).contiguous(), self.complex.append(key)
        self.tensors[key] = t
        return key

    def sklearn_object(self, obj) -> int:
        """The index of ``obj`` in the scikit-learn part (one object saved once, however often it is held)."""
        index = self._sklearn_ids.get(id(obj))
        if index is None:
            index = self._sklearn_ids[id(obj)] = len(self.sklearn)
            self.sklearn.append(obj)
        return index


def _float(v: float):
    v = float(v)
    if math.isfinite(v):
        return v
    return {"__float__": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}


def _encode(value, where: str, saver: _Saver, est) -> Any:
    """``value`` as a JSON-able tree (arrays and weights go to ``saver``); ``est``: the dpfair estimator it is in."""
    if value is None or isinstance(value, bool):
        return value
    if _is_generator(value):
        raise _generator_refused(where, value)
    if isinstance(value, enum.Enum):
        name = type(value).__name__
        if _enums().get(name) is not type(value):
            raise _SaveError(f"{where} is an enum {type(value).__module__}.{name} that dpfair cannot save")
        return {"__enum__": [name, value.name]}
    if isinstance(value, np.generic):
        dtype = value.dtype
        if dtype.kind != "U" and dtype.name not in _TENSOR_DTYPES or dtype.kind == "c":
            raise _SaveError(f"{where} is a numpy scalar of dtype {dtype} that dpfair cannot save")
        item = value.item()
        return {"__npscalar__": [dtype.newbyteorder("=").str if dtype.kind == "U" else dtype.name,
                                 _float(item) if isinstance(item, float) else item]}
    if type(value) is int or type(value) is str:
        return value
    if type(value) is float:
        return _float(value)
    if type(value) is list:
        return [_encode(v, f"{where}[{i}]", saver, est) for i, v in enumerate(value)]
    if type(value) is tuple:
        return {"__tuple__": [_encode(v, f"{where}[{i}]", saver, est) for i, v in enumerate(value)]}
    if type(value) is dict:
        if all(type(k) is str for k in value):
            return {"__dict__": {k: _encode(v, f"{where}[{k!r}]", saver, est) for k, v in value.items()}}
        return {"__items__": [[_encode(k, f"{where} key {k!r}", saver, est),
                               _encode(v, f"{where}[{k!r}]", saver, est)] for k, v in value.items()]}
    if type(value) is np.ndarray:
        return _encode_array(value, where, saver, est)
    if isinstance(value, torch.Tensor):
        if type(value) not in (torch.Tensor, torch.nn.Parameter):
            raise _SaveError(f"{where} is a tensor subclass {type(value).__name__} that dpfair cannot save")
        return {"__tensor__": saver.tensor(value)}
    if isinstance(value, torch.device):
        return {"__device__": str(value)}
    if isinstance(value, torch.dtype):
        return {"__torch_dtype__": str(value).removeprefix("torch.")}
    if isinstance(value, torch.nn.Module):
        return _encode_module(value, where, saver, est)
    if type(value) in _estimators().values():
        return {"__estimator__": _encode_estimator(value, where, saver)}
    name = type(value).__name__
    if _dataclasses().get(name) is type(value):
        return {"__dataclass__": [name, {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}", saver, est)
                                         for f in dataclasses.fields(value) if f.init}]}
    if _dp_events().get(name) is type(value):
        import attr

        return {"__dp_event__": [name, {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}", saver, est)
                                        for f in attr.fields(type(value))}]}
    encoded = _encode_library_value(value, where, saver, est)
    if encoded is not None:
        return encoded
    raise _SaveError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which dpfair cannot save safely. "
        "Model files hold JSON values, numpy arrays, torch tensors, dpfair estimators and models, the privacy "
        f"ledger, and these scikit-learn / fairlearn classes: {', '.join(sorted({*_sklearn_classes(), *_wrappers()}))}"
        ". Use one of them (e.g. sklearn's LogisticRegression as the base estimator)")


def _encode_array(a: np.ndarray, where: str, saver: _Saver, est):
    dtype = a.dtype
    if dtype.kind in "biufc":
        native = a.astype(dtype.newbyteorder("="), copy=False)
        if native.dtype.name not in _TENSOR_DTYPES:
            raise _SaveError(f"{where} is an array of dtype {dtype} that dpfair cannot save")
        return {"__ndarray__": [saver.tensor(torch.from_numpy(np.array(native, copy=True))), native.dtype.name]}
    if dtype.kind in "UO":
        items = [_encode(v.item() if isinstance(v, np.generic) and dtype.kind == "U" else v,
                         f"{where}[{i}]", saver, est) for i, v in enumerate(a.reshape(-1))]
        return {"__ndarray_items__": [dtype.newbyteorder("=").str if dtype.kind == "U" else "object",
                                      list(a.shape), items]}
    raise _SaveError(f"{where} is an array of dtype {dtype} that dpfair cannot save")


def _encode_library_value(value, where, saver, est):
    """pandas containers, the scikit-learn part's objects and the meta-estimators."""
    import pandas as pd

    enc = functools.partial(_encode, saver=saver, est=est)
    if type(value) is pd.RangeIndex:
        return {"__range_index__": [value.start, value.stop, value.step, enc(value.name, f"{where}.name")]}
    if type(value) is pd.MultiIndex:
        return {"__multi_index__": [
            [enc(np.asarray(value.get_level_values(i)), f"{where}.levels[{i}]") for i in range(value.nlevels)],
            enc(list(value.names), f"{where}.names")]}
    if type(value) is pd.Index:
        return {"__index__": [enc(np.asarray(value), f"{where}.values"), enc(value.name, f"{where}.name")]}
    if type(value) is pd.Series:
        return {"__series__": [_encode_column(value, where, saver, est), enc(value.index, f"{where}.index"),
                               enc(value.name, f"{where}.name")]}
    if type(value) is pd.DataFrame:
        columns = [_encode_column(value.iloc[:, j], f"{where}.iloc[:, {j}]", saver, est)
                   for j in range(value.shape[1])]
        return {"__dataframe__": [columns, enc(value.index, f"{where}.index"),
                                  enc(value.columns, f"{where}.columns")]}
    if _named(value, _sklearn_classes()) is not None:
        _check_sklearn_object(value, where)
        return {"__sklearn__": saver.sklearn_object(value)}
    name = _named(value, {n: w.cls for n, w in _wrappers().items()})
    if name is None:
        return None
    spec = _wrappers()[name]
    if spec.check is not None:
        spec.check(value, where)
    params = value.get_params(deep=False)
    fitted = {k: enc(v, f"{where}.{k}") for k, v in vars(value).items()
              if k.endswith("_") and not k.startswith("_") and k not in params and k not in spec.drop}
    return {"__object__": [name, {k: enc(v, f"{where}.{k}") for k, v in params.items()}, fitted]}


def _check_sklearn_object(obj, where: str) -> None:
    """Refuse what the scikit-learn part must not hold: a moment loaded with training data, a random generator."""
    if _is_moment(obj) and getattr(obj, "data_loaded", False):
        raise _SaveError(f"{where} is a fairlearn moment loaded with training data; only an unloaded moment "
                         "(a fit's constraints parameter) can be saved")

    def visit(value, at, depth=0):
        if _is_generator(value):
            raise _generator_refused(at, value)
        if depth < 3 and type(value) in (list, tuple, dict):
            for k, v in (value.items() if type(value) is dict else enumerate(value)):
                visit(v, f"{at}[{k!r}]", depth + 1)
        elif depth < 3 and _named(value, _sklearn_classes()) is not None:
            for k, v in vars(value).items():
                visit(v, f"{at}.{k}", depth + 1)

    visit(obj, where)


def _encode_column(series, where, saver, est):
    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufc":
        return _encode(series.to_numpy(copy=True), f"{where}.values", saver, est)
    return {"__column__": [str(dtype) if str(dtype) in ("object", "str", "string") else "object",
                           [_encode(v, f"{where}[{i}]", saver, est) for i, v in enumerate(series.tolist())]]}


def _encode_module(module: torch.nn.Module, where: str, saver: _Saver, est) -> dict:
    state = {k: saver.tensor(v) for k, v in module.state_dict().items()}
    model_param = getattr(est, "model", None)
    if isinstance(model_param, str):
        spec = _model_spec(module, est, where)
        enc_kwargs = _encode(spec["kwargs"], f"{where} (model_kwargs)", saver, est)
        return {"__torch_module__": {"kind": "dpfair", "name": spec["name"], "n_features": spec["n_features"],
                                     "n_classes": spec["n_classes"], "kwargs": enc_kwargs,
                                     "training": module.training, "state": state}}
    cls = type(module)
    return {"__torch_module__": {"kind": "user", "class": f"{cls.__module__}.{cls.__qualname__}",
                                 "training": module.training, "state": state}}


def _model_spec(module, est, where) -> dict:
    """The :func:`dpfair.nn.make_model` call that rebuilds ``module`` — checked by rebuilding it."""
    from dpfair.nn import make_model

    kwargs = {k: v for k, v in dict(est.model_kwargs or {}).items() if k != "seed"}
    n_classes = getattr(module, "n_classes", None)
    if n_classes is None and getattr(est, "classes_", None) is not None:
        n_classes = len(est.classes_)
    spec = {"name": est.model, "n_features": int(getattr(est, "n_features_in_", -1)),
            "n_classes": None if n_classes is None else int(n_classes), "kwargs": kwargs}
    try:
        rebuilt = make_model(spec["name"], spec["n_features"], spec["n_classes"], **kwargs, seed=0)
    except Exception as exc:  # noqa: BLE001 - any failure means the spec does not describe the module
        rebuilt, reason = None, str(exc)
    if rebuilt is not None:
        mine = {k: tuple(v.shape) for k, v in rebuilt.state_dict().items()}
        theirs = {k: tuple(v.shape) for k, v in module.state_dict().items()}
        reason = None if type(rebuilt) is type(module) and mine == theirs else (
            f"it builds a {type(rebuilt).__name__} with other weights")
    if reason is not None:
        raise _SaveError(f"{where} is a {type(module).__name__} that make_model({spec['name']!r}, "
                         f"n_features={spec['n_features']}, n_classes={spec['n_classes']}, **model_kwargs) "
                         f"does not rebuild ({reason}); dpfair cannot describe it safely")
    return spec


def _encode_estimator(est, where: str, saver: _Saver) -> dict:
    name = type(est).__name__
    params = est.get_params(deep=False)
    fitted = {}
    for k, v in vars(est).items():
        if k.startswith("_") or k in params:
            continue  # private: never saved
        if not k.endswith("_"):
            raise _SaveError(f"{where}.{k} is neither a constructor parameter nor a fitted attribute; fitted "
                             "attributes end in '_' (saved), private ones start with '_' (never saved)")
        fitted[k] = _encode(v, f"{where}.{k}", saver, est)
    return {"class": name, "params": {k: _encode(v, f"{where}.{k}", saver, est) for k, v in params.items()},
            "fitted": fitted}


def library_versions() -> dict:
    """Versions of dpfair and of the libraries whose objects a model file describes (written in the file, for error
    reports, and not checked; a sweep's provenance records them too)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("dpfair", "torch", "numpy", "scikit-learn", "fairlearn", "dp-accounting", "pandas", "safetensors",
                 "skops"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "unknown"
    return out


def save_estimator(est, path, *, provenance: dict | None = None) -> None:
    """Write ``est``, a fitted estimator of a registered class (or a Pipeline ending in one), to ``path``: what
    :func:`dpfair.persistence.save_estimator` (the public function, which documents it) does, without first
    loading every dpfair estimator (``FairEstimator.save`` calls this)."""
    import safetensors.torch
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import check_is_fitted

    pipeline = type(est) is Pipeline
    final = _pipeline_estimator(est) if pipeline else est
    if type(final) not in _estimators().values():
        raise ValueError(f"save_estimator saves dpfair's estimators ({', '.join(sorted(_estimators()))}) and "
                         "scikit-learn Pipelines ending in one, "
                         f"got {type(est).__module__}.{type(est).__qualname__}")
    check_is_fitted(final, "classes_")
    saver = _Saver()
    try:
        node = ({"pipeline": _encode(est, "Pipeline", saver, final)} if pipeline
                else _encode_estimator(est, type(est).__name__, saver))
    except _SaveError as exc:
        where = os.fspath(path) if _is_path(path) else repr(path)
        raise ValueError(f"cannot save {type(est).__name__} to {where}: {exc}") from None
    try:
        provenance_json = json.loads(json.dumps(provenance or {}, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"provenance must hold JSON values only (str, numbers, lists, dicts): {exc}") from None
    if type(provenance_json) is not dict:
        raise ValueError(f"provenance must be a dict, got {type(provenance).__name__}")
    tensors = dict(saver.tensors)
    if saver.sklearn:  # skops is imported only for a model that holds scikit-learn objects
        import skops.io

        part = skops.io.dumps(saver.sklearn, compression=zipfile.ZIP_DEFLATED, compresslevel=1)
        tensors[_SKOPS_KEY] = torch.frombuffer(bytearray(part), dtype=torch.uint8)
    meta = {"format": FORMAT, "version": VERSION, "versions": library_versions(), "estimator": node,
            "complex": saver.complex, "provenance": provenance_json}
    data = safetensors.torch.save(tensors, metadata={"format": FORMAT, "version": str(VERSION),
                                                     "meta": json.dumps(meta, allow_nan=False)})
    if _is_path(path):
        _write_file(os.fspath(path), data)
    else:
        path.write(data)


def _write_file(path: str, data: bytes) -> None:
    """``data`` to ``path`` whole or not at all: a temporary file beside it, renamed over it once written."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".dpfair-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _pipeline_estimator(pipe):
    """The dpfair estimator ending the Pipeline ``pipe``, after refusing (one line, naming it) a step that a model
    file cannot hold and warning about transformers whose fitted statistics the estimator's ε does not cover."""
    import warnings

    from sklearn.base import TransformerMixin

    from dpfair.exceptions import PrivacyLeakWarning

    steps = list(pipe.steps)
    final = steps[-1][1] if steps else None
    if type(final) not in _estimators().values():
        raise ValueError(f"cannot save this Pipeline: its last step must be a dpfair estimator, got "
                         f"{type(final).__name__}")
    transformers = [c for c in _library_sklearn() if c.__module__.startswith("sklearn.preprocessing")
                    and issubclass(c, TransformerMixin)]
    fitted = []
    for name, step in steps[:-1]:
        if step is None or step == "passthrough":
            continue
        if type(step) not in transformers:
            raise ValueError(f"cannot save this Pipeline: its step {name!r} is a {type(step).__module__}."
                             f"{type(step).__qualname__}, which a safe model file cannot hold (it stores no code); "
                             f"use one of {', '.join(c.__name__ for c in transformers)} or 'passthrough', "
                             "or transform X before the Pipeline")
        stats = [k for k in vars(step) if k.endswith("_") and not k.startswith("_")
                 and k not in ("n_features_in_", "feature_names_in_")]
        if stats:
            fitted.append(f"{name!r} ({type(step).__name__}: {', '.join(stats)})")
    unit = getattr(final, "privacy_unit_", None)
    if fitted and unit is not None and getattr(unit, "value", unit) == "record":
        warnings.warn(f"the Pipeline's step(s) {'; '.join(fitted)} hold statistics of the rows they were fitted on, "
                      f"which the model file publishes and the ε of {type(final).__name__} does not cover; fit them "
                      "on public data, or scale from publicly declared ranges instead", PrivacyLeakWarning,
                      stacklevel=4)  # the user's call of dpfair.persistence.save_estimator
    return final


def _is_path(path) -> bool:
    return isinstance(path, (str, os.PathLike))


# ==================================================================================== loading
class _LoadError(ValueError):
    pass


#: What to do with a file this dpfair cannot read.
_FIX = ("Only model files written by this dpfair's save_estimator / FairEstimator.save can be loaded; refit the "
        "model with this dpfair and save it again")


def _read_file(path, where: str) -> tuple[dict, dict]:
    """The tensors of a model file and its JSON metadata, both checked; nothing in the file is run."""
    import safetensors.torch

    if _is_path(path):
        with open(path, "rb") as f:
            raw = f.read()
    else:
        raw = path.read()
    if not isinstance(raw, bytes):
        raise _LoadError(f"{where} must be a path or a binary file object")
    if raw[:4] == b"PK\x03\x04":
        raise _LoadError(f"{where} is a zip archive, not a dpfair model file of format version {VERSION} "
                         "(safetensors + JSON): a model saved by an older dpfair (format version 1, a torch "
                         f"archive) or another tool's file. {_FIX}")
    try:
        tensors = safetensors.torch.load(raw)
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    except Exception as exc:  # noqa: BLE001 - safetensors' refusals: bad header, bad offsets, truncated buffers
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise _LoadError(f"{where} is not a dpfair model file (not a valid safetensors file: {detail}; a pickle is "
                         f"never unpickled, since that can run code). {_FIX}") from None
    info = header.get("__metadata__") if type(header) is dict else None
    if type(info) is not dict or info.get("format") != FORMAT:
        raise _LoadError(f"{where} is not a dpfair model file (no 'format': {FORMAT!r} entry in its metadata)")
    version = info.get("version")
    if type(version) is not str or not version.isdigit():
        raise _LoadError(f"{where} has no valid format version")
    if int(version) != VERSION:
        newer = int(version) > VERSION
        raise _LoadError(f"{where} uses dpfair model format version {version}; this dpfair reads version "
                         f"{VERSION}. " + ("Upgrade dpfair to load it." if newer else _FIX))
    try:
        meta = json.loads(info.get("meta", ""))
    except (ValueError, RecursionError):
        raise _LoadError(f"{where} is malformed: its metadata is not valid JSON") from None
    _expect(type(meta) is dict and meta.get("format") == FORMAT and meta.get("version") == VERSION
            and "estimator" in meta, f"{where} is malformed: its metadata has no estimator")
    complex_keys = meta.get("complex", [])
    _expect(type(complex_keys) is list and all(type(k) is str and k in tensors and k != _SKOPS_KEY
                                               and tensors[k].dtype == torch.float64 and tensors[k].dim()
                                               and tensors[k].shape[-1] == 2 for k in complex_keys),
            f"{where} is malformed: its complex tensors are not pairs of float64")
    for k in complex_keys:
        tensors[k] = torch.view_as_complex(tensors[k])
    return tensors, meta


class _Loader:
    def __init__(self, tensors: dict, model, where: str):
        self.tensors = tensors
        self.model = model
        self.where = where
        self._sklearn = None

    def tensor(self, key) -> torch.Tensor:
        if type(key) is not str or key not in self.tensors or key == _SKOPS_KEY:
            raise _LoadError(f"refers to a missing tensor {key!r}")
        return self.tensors[key]

    def sklearn(self, index, at: str):
        """Object ``index`` of the scikit-learn part, read (once) by skops with the explicit trusted list."""
        if self._sklearn is None:
            self._sklearn = _read_sklearn_part(self.tensors.get(_SKOPS_KEY), self.where)
        _expect(type(index) is int and 0 <= index < len(self._sklearn), f"{at}: missing scikit-learn object {index!r}")
        return self._sklearn[index]


#: The most a file's scikit-learn part may inflate to: its members' declared sizes, summed, at most this many times
#: its compressed bytes plus :data:`INFLATE_SLACK` (a saved part deflates about five-fold).
INFLATE_RATIO, INFLATE_SLACK = 100, 16 << 20


def _check_inflated_size(data: bytes, where: str) -> None:
    """Refuse a scikit-learn part whose zip members declare more bytes than :data:`INFLATE_RATIO` allows, before
    anything is inflated: memory stays bounded (Python's zip reader stops every member at its declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise _LoadError(f"{where}: its scikit-learn part is malformed ({type(exc).__name__})") from None
    if declared > INFLATE_RATIO * len(data) + INFLATE_SLACK:
        raise _LoadError(f"{where}: its scikit-learn part would inflate {len(data):,} bytes to {declared:,}, more "
                         f"than {INFLATE_RATIO}x; it is refused unread (a damaged or crafted file): save the model "
                         "again with dpfair")


def _read_sklearn_part(blob, where: str) -> list:
    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    _expect(isinstance(blob, torch.Tensor) and blob.dtype == torch.uint8 and blob.dim() == 1,
            f"{where} is malformed: it refers to a scikit-learn part it does not hold")
    data, trusted = blob.numpy().tobytes(), _skops_trusted()
    _check_inflated_size(data, where)
    try:
        objects = skops.io.loads(data, trusted=trusted)
    except UntrustedTypesFoundException:
        names = {f"{c.__module__}.{c.__qualname__}" for c in trusted}
        untrusted = [t for t in skops.io.get_untrusted_types(data=data) if t not in names]  # reads the schema only
        raise _LoadError(f"{where}: its scikit-learn part names types dpfair does not trust ({', '.join(untrusted)}"
                         "); it is refused, and none of them was built") from None
    except Exception as exc:  # noqa: BLE001 - a malformed skops archive
        raise _LoadError(f"{where}: its scikit-learn part is malformed ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    _expect(type(objects) is list, f"{where}: its scikit-learn part is malformed")
    allowed = _sklearn_classes()
    for i, obj in enumerate(objects):
        _expect(_named(obj, allowed) is not None, f"{where}: its scikit-learn part holds a "
                f"{type(obj).__module__}.{type(obj).__qualname__}, which is not on dpfair's allow-list")
        _expect(not (_is_moment(obj) and getattr(obj, "data_loaded", False)),
                f"{where}: a moment loaded with data is not allowed")
    return objects


def _expect(cond: bool, what: str):
    if not cond:
        raise _LoadError(what)


def _decode_float(v):
    if type(v) in (int, float):
        return float(v)
    if type(v) is dict and set(v) == {"__float__"} and v["__float__"] in ("inf", "-inf", "nan"):
        return float(v["__float__"])
    raise _LoadError(f"invalid float {v!r}")


def _decode(node, at: str, ld: _Loader):
    """Rebuild a value; only allow-listed classes are ever called."""
    if node is None or type(node) in (bool, int, str):
        return node
    if type(node) is float:
        return node
    if type(node) is list:
        return [_decode(v, f"{at}[{i}]", ld) for i, v in enumerate(node)]
    _expect(type(node) is dict and len(node) == 1, f"{at}: invalid value {str(node)[:80]}")
    (tag, body), = node.items()
    handler = _DECODERS.get(tag)
    _expect(handler is not None, f"{at}: unknown tag {tag!r}")
    return handler(body, at, ld)


def _pair(body, n, at):
    _expect(type(body) is list and len(body) == n, f"{at}: malformed entry")
    return body


def _d_float(body, at, ld):
    return _decode_float({"__float__": body})


def _d_tuple(body, at, ld):
    _expect(type(body) is list, f"{at}: malformed tuple")
    return tuple(_decode(v, f"{at}[{i}]", ld) for i, v in enumerate(body))


def _d_dict(body, at, ld):
    _expect(type(body) is dict, f"{at}: malformed dict")
    return {k: _decode(v, f"{at}[{k!r}]", ld) for k, v in body.items()}


def _d_items(body, at, ld):
    _expect(type(body) is list, f"{at}: malformed dict")
    out = {}
    for i, kv in enumerate(body):
        k, v = _pair(kv, 2, at)
        key = _decode(k, f"{at} key {i}", ld)
        try:
            hash(key)
        except TypeError:
            raise _LoadError(f"{at}: unhashable key") from None
        out[key] = _decode(v, f"{at}[{key!r}]", ld)
    return out


def _d_enum(body, at, ld):
    name, member = _pair(body, 2, at)
    cls = _enums().get(name) if type(name) is str else None
    _expect(cls is not None and type(member) is str and member in cls.__members__,
            f"{at}: enum {name!r}.{member!r} is not allowed")
    return cls[member]


def _numeric_dtype(name, at, kinds="biufc") -> np.dtype:
    _expect(type(name) is str, f"{at}: invalid dtype")
    if kinds == "biufc":
        _expect(name in _TENSOR_DTYPES, f"{at}: dtype {name!r} is not allowed")
        return np.dtype(name)
    _expect(re.fullmatch(r"<U\d{1,6}|=U\d{1,6}|\|U\d{1,6}", name) is not None, f"{at}: dtype {name!r} is not allowed")
    return np.dtype(name)


def _d_npscalar(body, at, ld):
    dtype_name, value = _pair(body, 2, at)
    if type(dtype_name) is str and dtype_name in _TENSOR_DTYPES:
        dtype = np.dtype(dtype_name)
        value = _decode_float(value) if dtype.kind == "f" else value
        _expect(type(value) in (bool, int, float), f"{at}: invalid numpy scalar")
    else:
        dtype = _numeric_dtype(dtype_name, at, kinds="U")
        _expect(type(value) is str, f"{at}: invalid numpy string")
    return np.array(value, dtype=dtype)[()]


def _d_ndarray(body, at, ld):
    key, dtype_name = _pair(body, 2, at)
    dtype = _numeric_dtype(dtype_name, at)
    t = ld.tensor(key)
    try:
        a = np.array(t.numpy(), copy=True)
    except (TypeError, RuntimeError) as exc:
        raise _LoadError(f"{at}: tensor {key!r} cannot be an array ({exc})") from None
    _expect(a.dtype == dtype, f"{at}: tensor {key!r} has dtype {a.dtype}, expected {dtype}")
    return a


def _d_ndarray_items(body, at, ld):
    dtype_name, shape, items = _pair(body, 3, at)
    _expect(type(shape) is list and all(type(s) is int and s >= 0 for s in shape) and type(items) is list
            and math.prod(shape) == len(items), f"{at}: malformed array")
    values = [_decode(v, f"{at}[{i}]", ld) for i, v in enumerate(items)]
    if dtype_name == "object":
        return _object_array(values).reshape(shape)
    dtype = _numeric_dtype(dtype_name, at, kinds="U")
    _expect(all(type(v) is str for v in values), f"{at}: malformed string array")
    return np.array(values, dtype=dtype).reshape(shape)


def _object_array(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _d_tensor(body, at, ld):
    return ld.tensor(body).clone()


def _d_device(body, at, ld):
    _expect(type(body) is str, f"{at}: invalid device")
    return torch.device("cpu")  # every tensor of a model file is loaded on the CPU


def _d_torch_dtype(body, at, ld):
    dtype = getattr(torch, body, None) if type(body) is str and _IDENT.match(body) else None
    _expect(isinstance(dtype, torch.dtype), f"{at}: invalid torch dtype {body!r}")
    return dtype


def _d_allowed(classes, what: str):
    """A decoder of ``[name, fields]`` that rebuilds only a class of the allow-list ``classes()``."""
    def decode(body, at, ld):
        name, fields = _pair(body, 2, at)
        cls = classes().get(name) if type(name) is str else None
        _expect(cls is not None, f"{at}: {what} {name!r} is not on dpfair's allow-list")
        _expect(type(fields) is dict, f"{at}: malformed {name}")
        return _construct(cls, {k: _decode(v, f"{at}.{k}", ld) for k, v in fields.items()}, at)
    return decode


def _construct(cls, kwargs: dict, at: str):
    _expect(all(type(k) is str and _IDENT.match(k) for k in kwargs), f"{at}: invalid field names")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise _LoadError(f"{at}: cannot rebuild {cls.__name__} ({exc})") from None


def _d_sklearn(body, at, ld):
    return ld.sklearn(body, at)


def _d_range_index(body, at, ld):
    import pandas as pd

    start, stop, step, name = _pair(body, 4, at)
    _expect(all(type(v) is int for v in (start, stop, step)) and step != 0, f"{at}: malformed RangeIndex")
    return pd.RangeIndex(start, stop, step, name=_hashable_name(_decode(name, at, ld), at))


def _hashable_name(name, at):
    _expect(name is None or type(name) in (str, int, float, bool, tuple) or isinstance(name, np.generic),
            f"{at}: invalid index name")
    return name


def _d_multi_index(body, at, ld):
    import pandas as pd

    levels, names = _pair(body, 2, at)
    _expect(type(levels) is list and levels, f"{at}: malformed MultiIndex")
    arrays = [_decode(v, f"{at}.levels[{i}]", ld) for i, v in enumerate(levels)]
    names = _decode(names, f"{at}.names", ld)
    _expect(all(type(a) is np.ndarray and a.ndim == 1 for a in arrays) and len({len(a) for a in arrays}) == 1
            and type(names) is list and len(names) == len(arrays), f"{at}: malformed MultiIndex")
    return pd.MultiIndex.from_arrays(arrays, names=[_hashable_name(n, at) for n in names])


def _d_index(body, at, ld):
    import pandas as pd

    values, name = _pair(body, 2, at)
    values = _decode(values, f"{at}.values", ld)
    _expect(type(values) is np.ndarray and values.ndim == 1, f"{at}: malformed Index")
    return pd.Index(values, name=_hashable_name(_decode(name, at, ld), at))


def _column(node, at, ld):
    if type(node) is dict and set(node) == {"__column__"}:
        dtype, items = _pair(node["__column__"], 2, at)
        _expect(dtype in ("object", "str", "string") and type(items) is list, f"{at}: malformed column")
        return _object_array([_decode(v, f"{at}[{i}]", ld) for i, v in enumerate(items)]), dtype
    values = _decode(node, at, ld)
    _expect(type(values) is np.ndarray and values.ndim == 1, f"{at}: malformed column")
    return values, None


def _d_series(body, at, ld):
    import pandas as pd

    column, index, name = _pair(body, 3, at)
    values, dtype = _column(column, f"{at}.values", ld)
    index = _decode(index, f"{at}.index", ld)
    _expect(isinstance(index, pd.Index) and len(index) == len(values), f"{at}: malformed Series")
    return pd.Series(values, index=index, name=_hashable_name(_decode(name, at, ld), at), dtype=dtype)


def _d_dataframe(body, at, ld):
    import pandas as pd

    columns, index, names = _pair(body, 3, at)
    _expect(type(columns) is list, f"{at}: malformed DataFrame")
    index = _decode(index, f"{at}.index", ld)
    names = _decode(names, f"{at}.columns", ld)
    _expect(isinstance(index, pd.Index) and isinstance(names, pd.Index) and len(names) == len(columns),
            f"{at}: malformed DataFrame")
    cols = [_column(c, f"{at}.iloc[:, {j}]", ld) for j, c in enumerate(columns)]
    _expect(all(len(v) == len(index) for v, _ in cols), f"{at}: malformed DataFrame")
    frame = pd.DataFrame({j: pd.Series(v, dtype=d) for j, (v, d) in enumerate(cols)}, index=range(len(index)))
    frame.index, frame.columns = index, names
    return frame


def _d_object(body, at, ld):
    name, params, fitted = _pair(body, 3, at)
    spec = _wrappers().get(name) if type(name) is str else None
    _expect(spec is not None, f"{at}: class {name!r} is not on dpfair's allow-list")
    _expect(type(params) is dict and type(fitted) is dict, f"{at}: malformed {name}")
    _expect(all(type(k) is str and _IDENT.match(k) for k in params)
            and all(type(k) is str and _IDENT.match(k) and k.endswith("_") and k not in spec.drop for k in fitted),
            f"{at}: invalid attribute names")
    obj = _construct(spec.cls, {k: _decode(v, f"{at}.{k}", ld) for k, v in params.items()}, at)
    vars(obj).update({k: _decode(v, f"{at}.{k}", ld) for k, v in fitted.items()})
    if spec.restore is not None:
        spec.restore(obj)
    return obj


def _d_torch_module(body, at, ld):
    _expect(type(body) is dict and body.get("kind") in ("dpfair", "user"), f"{at}: malformed module")
    state = body.get("state")
    _expect(type(state) is dict, f"{at}: malformed module state")
    state = {k: ld.tensor(v) for k, v in state.items()}
    if body["kind"] == "dpfair":
        from dpfair.nn import MODEL_NAMES, make_model

        name, n_features, n_classes = body.get("name"), body.get("n_features"), body.get("n_classes")
        _expect(type(name) is str and name.strip().lower() in MODEL_NAMES and type(n_features) is int
                and type(n_classes) is int, f"{at}: malformed model description")
        kwargs = _decode(body.get("kwargs"), f"{at}.kwargs", ld)
        _expect(type(kwargs) is dict and all(type(k) is str and _IDENT.match(k) and k != "seed" for k in kwargs),
                f"{at}: malformed model_kwargs")
        try:
            module = make_model(name, n_features, n_classes, **kwargs, seed=0)
        except (TypeError, ValueError) as exc:
            raise _LoadError(f"{at}: cannot rebuild the {name!r} model ({exc})") from None
        what = f"the saved {name!r} model"
    else:
        template = ld.model
        saved_class = body.get("class")
        if template is None:
            raise _LoadError(
                f"{at} is a user-defined torch module ({saved_class}), which a safe model file cannot store as "
                f"code. Pass a module of the same architecture: load_estimator({ld.where!r}, model=<a new "
                f"{str(saved_class).rsplit('.', 1)[-1]}(...)>)")
        if not isinstance(template, torch.nn.Module):
            raise _LoadError(f"model= must be a torch.nn.Module, got {type(template).__name__}")
        module = copy.deepcopy(template)
        what = f"the saved {saved_class}"
    floating = {t.dtype for t in state.values() if t.is_floating_point()}
    if len(floating) == 1:
        module = module.to(dtype=floating.pop())
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())[:400]
        raise _LoadError(f"{at}: the module does not match {what} ({detail}); pass model= a module of the same "
                         "architecture") from None
    module.train(bool(body.get("training", False)))
    return module


def _d_estimator(body, at, ld):
    return _decode_estimator(body, at, ld)


def _decode_estimator(node, at: str, ld: _Loader):
    _expect(type(node) is dict and set(node) == {"class", "params", "fitted"}, f"{at}: malformed estimator")
    name = node["class"]
    estimators = _estimators()
    _expect(type(name) is str and name in estimators,
            f"{at}: estimator class {name!r} is not one of dpfair's ({', '.join(sorted(estimators))})")
    cls = estimators[name]
    params, fitted = node["params"], node["fitted"]
    _expect(type(params) is dict and type(fitted) is dict, f"{at}: malformed estimator")
    _expect(all(type(k) is str and _IDENT.match(k) for k in params), f"{at}: invalid parameter names")
    _expect(all(type(k) is str and _IDENT.match(k) and k.endswith("_") for k in fitted),
            f"{at}: only public fitted attributes (name_) may be loaded")
    params = {k: _decode(v, f"{at}.{k}", ld) for k, v in params.items()}
    try:
        est = cls(**params)
    except TypeError as exc:
        raise _LoadError(f"{at}: {name} does not take the saved parameters ({exc}); load the file with the dpfair "
                         "version that wrote it") from None
    for k, v in fitted.items():
        vars(est)[k] = _decode(v, f"{at}.{k}", ld)
    return est


_DECODERS = {
    "__float__": _d_float, "__tuple__": _d_tuple, "__dict__": _d_dict, "__items__": _d_items,
    "__enum__": _d_enum, "__npscalar__": _d_npscalar, "__ndarray__": _d_ndarray,
    "__ndarray_items__": _d_ndarray_items, "__tensor__": _d_tensor, "__device__": _d_device,
    "__torch_dtype__": _d_torch_dtype, "__torch_module__": _d_torch_module, "__estimator__": _d_estimator,
    "__dataclass__": _d_allowed(_dataclasses, "class"), "__dp_event__": _d_allowed(_dp_events, "dp_accounting event"),
    "__sklearn__": _d_sklearn, "__range_index__": _d_range_index, "__multi_index__": _d_multi_index,
    "__index__": _d_index, "__series__": _d_series, "__dataframe__": _d_dataframe, "__object__": _d_object,
}


def load_estimator(path, *, model=None):
    """Read a model file whose classes are registered in this process: what :func:`dpfair.persistence.load_estimator`
    (the public function, which documents it and loads every dpfair estimator first) does."""
    where = os.fspath(path) if _is_path(path) else repr(path)
    with _load_errors(where):
        tensors, meta = _read_file(path, where)
        loader = _Loader(tensors, model, where)
        node = meta["estimator"]
        if type(node) is dict and set(node) == {"pipeline"}:
            return _decode_pipeline(node["pipeline"], loader)
        return _decode_estimator(node, "estimator", loader)


def _decode_pipeline(node, ld: _Loader):
    """A saved Pipeline: only an allow-listed ``Pipeline`` whose last step is a dpfair estimator."""
    from sklearn.pipeline import Pipeline

    _expect(type(node) is dict and set(node) == {"__object__"} and type(node["__object__"]) is list
            and node["__object__"][:1] == ["sklearn.pipeline.Pipeline"], "Pipeline: malformed pipeline")
    pipe = _decode(node, "Pipeline", ld)
    _expect(type(pipe) is Pipeline and bool(pipe.steps) and type(pipe.steps[-1][1]) in _estimators().values(),
            "Pipeline: its last step is not a dpfair estimator")
    return pipe


def load_provenance(path) -> dict:
    """What a model file says it was trained on (``save_estimator``'s ``provenance``; ``{}`` if none).

    The file is checked as :func:`load_estimator` checks it; nothing in it is run.
    """
    where = os.fspath(path) if _is_path(path) else repr(path)
    with _load_errors(where):
        provenance = _read_file(path, where)[1].get("provenance", {})
        _expect(type(provenance) is dict, f"{where} is malformed: its provenance is not a JSON object")
        return provenance


@contextlib.contextmanager
def _load_errors(where: str):
    """Every failure to read a model file becomes one ``ValueError`` naming the file (missing files stay OSError)."""
    try:
        yield
    except _LoadError as exc:
        msg = str(exc)
        raise ValueError(msg if where in msg else f"{where}: {msg}") from None
    except RecursionError:
        raise ValueError(f"{where} is malformed: its metadata is nested too deeply") from None
    except OSError:  # missing or unreadable file: not a question of format
        raise
    except Exception as exc:  # noqa: BLE001 - anything else a crafted file provokes while being rebuilt
        raise ValueError(f"{where} is malformed and was refused ({type(exc).__name__}: {exc})") from None
