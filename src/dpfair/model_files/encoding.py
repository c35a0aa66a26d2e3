"""Saving: an estimator (or a Pipeline ending in one) as a JSON tree whose arrays and weights go to tensors and
whose scikit-learn objects go to the file's scikit-learn part; :func:`save_estimator` writes it.

Contract: only what loading can rebuild is written, each value tagged by its kind (``{"__tuple__": ...}``,
``{"__ndarray__": [tensor key, dtype]}``, ...); constructor parameters and public fitted attributes (names ending
in ``_``) are saved, private attributes (``_``) never. A value of any other class, a random generator, a fairlearn
moment loaded with training data or a module that ``make_model`` does not rebuild is refused at save time, naming
the attribute.

Safety: nothing here is read back; what the file can make a loader build is bounded by the decoder
(:mod:`dpfair.model_files.decoding`), not by this encoder.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import os
import random
from typing import Any

import numpy as np
import torch

from dpfair.model_files.container import is_path, write
from dpfair.model_files.errors import SaveError
from dpfair.model_files.registry import (
    TENSOR_DTYPES,
    dataclass_classes,
    dp_events,
    enums,
    estimator_classes,
    is_moment,
    library_sklearn,
    named,
    sklearn_classes,
    wrappers,
)

__all__ = ["library_versions", "save_estimator"]


def _is_generator(value) -> bool:
    """Random generators and seeds: numpy, torch, stdlib, dpfair's secret generator."""
    if isinstance(value, (np.random.Generator, np.random.RandomState, np.random.BitGenerator,
                          np.random.SeedSequence, torch.Generator, random.Random)):
        return True
    return any(cls.__name__ == "SecretRandom" and cls.__module__.startswith("dpfair.")
               for cls in type(value).__mro__)


def _generator_refused(where: str, value) -> SaveError:
    return SaveError(f"{where} is a random generator ({type(value).__name__}); secret randomness must never "
                     "be saved — keep generators in attributes starting with '_' (this is a bug in dpfair)")


class _Saver:
    """What one save collects: the tensors, the complex ones' keys and the scikit-learn part's objects."""

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
        if enums().get(name) is not type(value):
            raise SaveError(f"{where} is an enum {type(value).__module__}.{name} that dpfair cannot save")
        return {"__enum__": [name, value.name]}
    if isinstance(value, np.generic):
        dtype = value.dtype
        if dtype.kind != "U" and dtype.name not in TENSOR_DTYPES or dtype.kind == "c":
            raise SaveError(f"{where} is a numpy scalar of dtype {dtype} that dpfair cannot save")
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
            raise SaveError(f"{where} is a tensor subclass {type(value).__name__} that dpfair cannot save")
        return {"__tensor__": saver.tensor(value)}
    if isinstance(value, torch.device):
        return {"__device__": str(value)}
    if isinstance(value, torch.dtype):
        return {"__torch_dtype__": str(value).removeprefix("torch.")}
    if isinstance(value, torch.nn.Module):
        return _encode_module(value, where, saver, est)
    if type(value) in estimator_classes().values():
        return {"__estimator__": _encode_estimator(value, where, saver)}
    name = type(value).__name__
    if dataclass_classes().get(name) is type(value):
        return {"__dataclass__": [name, {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}", saver, est)
                                         for f in dataclasses.fields(value) if f.init}]}
    if dp_events().get(name) is type(value):
        import attr

        return {"__dp_event__": [name, {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}", saver, est)
                                        for f in attr.fields(type(value))}]}
    encoded = _encode_library_value(value, where, saver, est)
    if encoded is not None:
        return encoded
    raise SaveError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which dpfair cannot save safely. "
        "Model files hold JSON values, numpy arrays, torch tensors, dpfair estimators and models, the privacy "
        f"ledger, and these scikit-learn / fairlearn classes: {', '.join(sorted({*sklearn_classes(), *wrappers()}))}"
        ". Use one of them (e.g. sklearn's LogisticRegression as the base estimator)")


def _encode_array(a: np.ndarray, where: str, saver: _Saver, est):
    dtype = a.dtype
    if dtype.kind in "biufc":
        native = a.astype(dtype.newbyteorder("="), copy=False)
        if native.dtype.name not in TENSOR_DTYPES:
            raise SaveError(f"{where} is an array of dtype {dtype} that dpfair cannot save")
        return {"__ndarray__": [saver.tensor(torch.from_numpy(np.array(native, copy=True))), native.dtype.name]}
    if dtype.kind in "UO":
        items = [_encode(v.item() if isinstance(v, np.generic) and dtype.kind == "U" else v,
                         f"{where}[{i}]", saver, est) for i, v in enumerate(a.reshape(-1))]
        return {"__ndarray_items__": [dtype.newbyteorder("=").str if dtype.kind == "U" else "object",
                                      list(a.shape), items]}
    raise SaveError(f"{where} is an array of dtype {dtype} that dpfair cannot save")


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
    if named(value, sklearn_classes()) is not None:
        _check_sklearn_object(value, where)
        return {"__sklearn__": saver.sklearn_object(value)}
    name = named(value, {n: w.cls for n, w in wrappers().items()})
    if name is None:
        return None
    spec = wrappers()[name]
    if spec.check is not None:
        spec.check(value, where)
    params = value.get_params(deep=False)
    fitted = {k: enc(v, f"{where}.{k}") for k, v in vars(value).items()
              if k.endswith("_") and not k.startswith("_") and k not in params and k not in spec.drop}
    return {"__object__": [name, {k: enc(v, f"{where}.{k}") for k, v in params.items()}, fitted]}


def _check_sklearn_object(obj, where: str) -> None:
    """Refuse what the scikit-learn part must not hold: a moment loaded with training data, a random generator."""
    if is_moment(obj) and getattr(obj, "data_loaded", False):
        raise SaveError(f"{where} is a fairlearn moment loaded with training data; only an unloaded moment "
                        "(a fit's constraints parameter) can be saved")

    def visit(value, at, depth=0):
        if _is_generator(value):
            raise _generator_refused(at, value)
        if depth < 3 and type(value) in (list, tuple, dict):
            for k, v in (value.items() if type(value) is dict else enumerate(value)):
                visit(v, f"{at}[{k!r}]", depth + 1)
        elif depth < 3 and named(value, sklearn_classes()) is not None:
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
        raise SaveError(f"{where} is a {type(module).__name__} that make_model({spec['name']!r}, "
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
            raise SaveError(f"{where}.{k} is neither a constructor parameter nor a fitted attribute; fitted "
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
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import check_is_fitted

    pipeline = type(est) is Pipeline
    final = _pipeline_estimator(est) if pipeline else est
    if type(final) not in estimator_classes().values():
        raise ValueError(f"save_estimator saves dpfair's estimators ({', '.join(sorted(estimator_classes()))}) and "
                         "scikit-learn Pipelines ending in one, "
                         f"got {type(est).__module__}.{type(est).__qualname__}")
    check_is_fitted(final, "classes_")
    saver = _Saver()
    try:
        node = ({"pipeline": _encode(est, "Pipeline", saver, final)} if pipeline
                else _encode_estimator(est, type(est).__name__, saver))
    except SaveError as exc:
        where = os.fspath(path) if is_path(path) else repr(path)
        raise ValueError(f"cannot save {type(est).__name__} to {where}: {exc}") from None
    try:
        provenance_json = json.loads(json.dumps(provenance or {}, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"provenance must hold JSON values only (str, numbers, lists, dicts): {exc}") from None
    if type(provenance_json) is not dict:
        raise ValueError(f"provenance must be a dict, got {type(provenance).__name__}")
    content = {"versions": library_versions(), "estimator": node, "complex": saver.complex,
               "provenance": provenance_json}
    write(path, saver.tensors, saver.sklearn, content)


def _pipeline_estimator(pipe):
    """The dpfair estimator ending the Pipeline ``pipe``, after refusing (one line, naming it) a step that a model
    file cannot hold and warning about transformers whose fitted statistics the estimator's ε does not cover."""
    import warnings

    from sklearn.base import TransformerMixin

    from dpfair.exceptions import PrivacyLeakWarning

    steps = list(pipe.steps)
    final = steps[-1][1] if steps else None
    if type(final) not in estimator_classes().values():
        raise ValueError(f"cannot save this Pipeline: its last step must be a dpfair estimator, got "
                         f"{type(final).__name__}")
    transformers = [c for c in library_sklearn() if c.__module__.startswith("sklearn.preprocessing")
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
