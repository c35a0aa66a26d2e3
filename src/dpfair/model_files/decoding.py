"""Loading's core: the JSON tree of a model file rebuilt into values, one decoder per tag (:data:`DECODERS`).

Contract: :func:`decode_node` rebuilds a value and :func:`decode_estimator` an estimator node (its class by the
registry's name, its parameters, then its public fitted attributes); both read the file's tensors and its
scikit-learn part through a :class:`Source` (:mod:`dpfair.model_files.loading` gives one). Anything malformed, an
unknown tag or a name off the allow-lists raises :class:`~dpfair.model_files.errors.LoadError`.

Safety: a decoder builds only JSON values, numpy arrays and torch tensors from checked dtypes and shapes, pandas
containers of them, and instances of the classes on the allow-lists of :mod:`dpfair.model_files.registry`, by
their constructors with checked identifier keywords; a torch module is dpfair's ``make_model`` of a checked name,
or a copy of the caller's ``model=``, given only the saved weights. No name from the file is imported or called.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any, Protocol

import numpy as np
import torch

from dpfair.model_files.errors import LoadError, expect
from dpfair.model_files.registry import (
    TENSOR_DTYPES,
    dataclass_classes,
    dp_events,
    enums,
    estimator_classes,
    wrappers,
)

__all__ = ["DECODERS", "Source", "decode_estimator", "decode_node"]

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")


class Source(Protocol):
    """What the decoders read a file through."""

    #: The torch module the caller passed (``load_estimator(..., model=)``), or None.
    model: Any
    #: The file, as messages name it.
    where: str

    def tensor(self, key) -> torch.Tensor:
        """The file's tensor ``key`` (refusing a missing one)."""

    def sklearn(self, index, at: str):
        """Object ``index`` of the file's scikit-learn part (refusing a missing one)."""


def _decode_float(v):
    if type(v) in (int, float):
        return float(v)
    if type(v) is dict and set(v) == {"__float__"} and v["__float__"] in ("inf", "-inf", "nan"):
        return float(v["__float__"])
    raise LoadError(f"invalid float {v!r}")


def decode_node(node, at: str, ld: Source):
    """Rebuild a value; only allow-listed classes are ever called."""
    if node is None or type(node) in (bool, int, str):
        return node
    if type(node) is float:
        return node
    if type(node) is list:
        return [decode_node(v, f"{at}[{i}]", ld) for i, v in enumerate(node)]
    expect(type(node) is dict and len(node) == 1, f"{at}: invalid value {str(node)[:80]}")
    (tag, body), = node.items()
    handler = DECODERS.get(tag)
    expect(handler is not None, f"{at}: unknown tag {tag!r}")
    return handler(body, at, ld)


def _pair(body, n, at):
    expect(type(body) is list and len(body) == n, f"{at}: malformed entry")
    return body


def _d_float(body, at, ld):
    return _decode_float({"__float__": body})


def _d_tuple(body, at, ld):
    expect(type(body) is list, f"{at}: malformed tuple")
    return tuple(decode_node(v, f"{at}[{i}]", ld) for i, v in enumerate(body))


def _d_dict(body, at, ld):
    expect(type(body) is dict, f"{at}: malformed dict")
    return {k: decode_node(v, f"{at}[{k!r}]", ld) for k, v in body.items()}


def _d_items(body, at, ld):
    expect(type(body) is list, f"{at}: malformed dict")
    out = {}
    for i, kv in enumerate(body):
        k, v = _pair(kv, 2, at)
        key = decode_node(k, f"{at} key {i}", ld)
        try:
            hash(key)
        except TypeError:
            raise LoadError(f"{at}: unhashable key") from None
        out[key] = decode_node(v, f"{at}[{key!r}]", ld)
    return out


def _d_enum(body, at, ld):
    name, member = _pair(body, 2, at)
    cls = enums().get(name) if type(name) is str else None
    expect(cls is not None and type(member) is str and member in cls.__members__,
           f"{at}: enum {name!r}.{member!r} is not allowed")
    return cls[member]


def _numeric_dtype(name, at, kinds="biufc") -> np.dtype:
    expect(type(name) is str, f"{at}: invalid dtype")
    if kinds == "biufc":
        expect(name in TENSOR_DTYPES, f"{at}: dtype {name!r} is not allowed")
        return np.dtype(name)
    expect(re.fullmatch(r"<U\d{1,6}|=U\d{1,6}|\|U\d{1,6}", name) is not None, f"{at}: dtype {name!r} is not allowed")
    return np.dtype(name)


def _d_npscalar(body, at, ld):
    dtype_name, value = _pair(body, 2, at)
    if type(dtype_name) is str and dtype_name in TENSOR_DTYPES:
        dtype = np.dtype(dtype_name)
        value = _decode_float(value) if dtype.kind == "f" else value
        expect(type(value) in (bool, int, float), f"{at}: invalid numpy scalar")
    else:
        dtype = _numeric_dtype(dtype_name, at, kinds="U")
        expect(type(value) is str, f"{at}: invalid numpy string")
    return np.array(value, dtype=dtype)[()]


def _d_ndarray(body, at, ld):
    key, dtype_name = _pair(body, 2, at)
    dtype = _numeric_dtype(dtype_name, at)
    t = ld.tensor(key)
    try:
        a = np.array(t.numpy(), copy=True)
    except (TypeError, RuntimeError) as exc:
        raise LoadError(f"{at}: tensor {key!r} cannot be an array ({exc})") from None
    expect(a.dtype == dtype, f"{at}: tensor {key!r} has dtype {a.dtype}, expected {dtype}")
    return a


def _d_ndarray_items(body, at, ld):
    dtype_name, shape, items = _pair(body, 3, at)
    expect(type(shape) is list and all(type(s) is int and s >= 0 for s in shape) and type(items) is list
           and math.prod(shape) == len(items), f"{at}: malformed array")
    values = [decode_node(v, f"{at}[{i}]", ld) for i, v in enumerate(items)]
    if dtype_name == "object":
        return _object_array(values).reshape(shape)
    dtype = _numeric_dtype(dtype_name, at, kinds="U")
    expect(all(type(v) is str for v in values), f"{at}: malformed string array")
    return np.array(values, dtype=dtype).reshape(shape)


def _object_array(values: list) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _d_tensor(body, at, ld):
    return ld.tensor(body).clone()


def _d_device(body, at, ld):
    expect(type(body) is str, f"{at}: invalid device")
    return torch.device("cpu")  # every tensor of a model file is loaded on the CPU


def _d_torch_dtype(body, at, ld):
    dtype = getattr(torch, body, None) if type(body) is str and _IDENT.match(body) else None
    expect(isinstance(dtype, torch.dtype), f"{at}: invalid torch dtype {body!r}")
    return dtype


def _d_allowed(classes, what: str):
    """A decoder of ``[name, fields]`` that rebuilds only a class of the allow-list ``classes()``."""
    def decode(body, at, ld):
        name, fields = _pair(body, 2, at)
        cls = classes().get(name) if type(name) is str else None
        expect(cls is not None, f"{at}: {what} {name!r} is not on dpfair's allow-list")
        expect(type(fields) is dict, f"{at}: malformed {name}")
        return _construct(cls, {k: decode_node(v, f"{at}.{k}", ld) for k, v in fields.items()}, at)
    return decode


def _construct(cls, kwargs: dict, at: str):
    expect(all(type(k) is str and _IDENT.match(k) for k in kwargs), f"{at}: invalid field names")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise LoadError(f"{at}: cannot rebuild {cls.__name__} ({exc})") from None


def _d_sklearn(body, at, ld):
    return ld.sklearn(body, at)


def _d_range_index(body, at, ld):
    import pandas as pd

    start, stop, step, name = _pair(body, 4, at)
    expect(all(type(v) is int for v in (start, stop, step)) and step != 0, f"{at}: malformed RangeIndex")
    return pd.RangeIndex(start, stop, step, name=_hashable_name(decode_node(name, at, ld), at))


def _hashable_name(name, at):
    expect(name is None or type(name) in (str, int, float, bool, tuple) or isinstance(name, np.generic),
           f"{at}: invalid index name")
    return name


def _d_multi_index(body, at, ld):
    import pandas as pd

    levels, names = _pair(body, 2, at)
    expect(type(levels) is list and levels, f"{at}: malformed MultiIndex")
    arrays = [decode_node(v, f"{at}.levels[{i}]", ld) for i, v in enumerate(levels)]
    names = decode_node(names, f"{at}.names", ld)
    expect(all(type(a) is np.ndarray and a.ndim == 1 for a in arrays) and len({len(a) for a in arrays}) == 1
           and type(names) is list and len(names) == len(arrays), f"{at}: malformed MultiIndex")
    return pd.MultiIndex.from_arrays(arrays, names=[_hashable_name(n, at) for n in names])


def _d_index(body, at, ld):
    import pandas as pd

    values, name = _pair(body, 2, at)
    values = decode_node(values, f"{at}.values", ld)
    expect(type(values) is np.ndarray and values.ndim == 1, f"{at}: malformed Index")
    return pd.Index(values, name=_hashable_name(decode_node(name, at, ld), at))


def _column(node, at, ld):
    if type(node) is dict and set(node) == {"__column__"}:
        dtype, items = _pair(node["__column__"], 2, at)
        expect(dtype in ("object", "str", "string") and type(items) is list, f"{at}: malformed column")
        return _object_array([decode_node(v, f"{at}[{i}]", ld) for i, v in enumerate(items)]), dtype
    values = decode_node(node, at, ld)
    expect(type(values) is np.ndarray and values.ndim == 1, f"{at}: malformed column")
    return values, None


def _d_series(body, at, ld):
    import pandas as pd

    column, index, name = _pair(body, 3, at)
    values, dtype = _column(column, f"{at}.values", ld)
    index = decode_node(index, f"{at}.index", ld)
    expect(isinstance(index, pd.Index) and len(index) == len(values), f"{at}: malformed Series")
    return pd.Series(values, index=index, name=_hashable_name(decode_node(name, at, ld), at), dtype=dtype)


def _d_dataframe(body, at, ld):
    import pandas as pd

    columns, index, names = _pair(body, 3, at)
    expect(type(columns) is list, f"{at}: malformed DataFrame")
    index = decode_node(index, f"{at}.index", ld)
    names = decode_node(names, f"{at}.columns", ld)
    expect(isinstance(index, pd.Index) and isinstance(names, pd.Index) and len(names) == len(columns),
           f"{at}: malformed DataFrame")
    cols = [_column(c, f"{at}.iloc[:, {j}]", ld) for j, c in enumerate(columns)]
    expect(all(len(v) == len(index) for v, _ in cols), f"{at}: malformed DataFrame")
    frame = pd.DataFrame({j: pd.Series(v, dtype=d) for j, (v, d) in enumerate(cols)}, index=range(len(index)))
    frame.index, frame.columns = index, names
    return frame


def _d_object(body, at, ld):
    name, params, fitted = _pair(body, 3, at)
    spec = wrappers().get(name) if type(name) is str else None
    expect(spec is not None, f"{at}: class {name!r} is not on dpfair's allow-list")
    expect(type(params) is dict and type(fitted) is dict, f"{at}: malformed {name}")
    expect(all(type(k) is str and _IDENT.match(k) for k in params)
           and all(type(k) is str and _IDENT.match(k) and k.endswith("_") and k not in spec.drop for k in fitted),
           f"{at}: invalid attribute names")
    obj = _construct(spec.cls, {k: decode_node(v, f"{at}.{k}", ld) for k, v in params.items()}, at)
    vars(obj).update({k: decode_node(v, f"{at}.{k}", ld) for k, v in fitted.items()})
    if spec.restore is not None:
        spec.restore(obj)
    return obj


def _d_torch_module(body, at, ld):
    expect(type(body) is dict and body.get("kind") in ("dpfair", "user"), f"{at}: malformed module")
    state = body.get("state")
    expect(type(state) is dict, f"{at}: malformed module state")
    state = {k: ld.tensor(v) for k, v in state.items()}
    if body["kind"] == "dpfair":
        from dpfair.nn import MODEL_NAMES, make_model

        name, n_features, n_classes = body.get("name"), body.get("n_features"), body.get("n_classes")
        expect(type(name) is str and name.strip().lower() in MODEL_NAMES and type(n_features) is int
               and type(n_classes) is int, f"{at}: malformed model description")
        kwargs = decode_node(body.get("kwargs"), f"{at}.kwargs", ld)
        expect(type(kwargs) is dict and all(type(k) is str and _IDENT.match(k) and k != "seed" for k in kwargs),
               f"{at}: malformed model_kwargs")
        try:
            module = make_model(name, n_features, n_classes, **kwargs, seed=0)
        except (TypeError, ValueError) as exc:
            raise LoadError(f"{at}: cannot rebuild the {name!r} model ({exc})") from None
        what = f"the saved {name!r} model"
    else:
        template = ld.model
        saved_class = body.get("class")
        if template is None:
            raise LoadError(
                f"{at} is a user-defined torch module ({saved_class}), which a safe model file cannot store as "
                f"code. Pass a module of the same architecture: load_estimator({ld.where!r}, model=<a new "
                f"{str(saved_class).rsplit('.', 1)[-1]}(...)>)")
        if not isinstance(template, torch.nn.Module):
            raise LoadError(f"model= must be a torch.nn.Module, got {type(template).__name__}")
        module = copy.deepcopy(template)
        what = f"the saved {saved_class}"
    floating = {t.dtype for t in state.values() if t.is_floating_point()}
    if len(floating) == 1:
        module = module.to(dtype=floating.pop())
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        detail = " ".join(str(exc).split())[:400]
        raise LoadError(f"{at}: the module does not match {what} ({detail}); pass model= a module of the same "
                        "architecture") from None
    module.train(bool(body.get("training", False)))
    return module


def _d_estimator(body, at, ld):
    return decode_estimator(body, at, ld)


def decode_estimator(node, at: str, ld: Source):
    expect(type(node) is dict and set(node) == {"class", "params", "fitted"}, f"{at}: malformed estimator")
    name = node["class"]
    estimators = estimator_classes()
    expect(type(name) is str and name in estimators,
           f"{at}: estimator class {name!r} is not one of dpfair's ({', '.join(sorted(estimators))})")
    cls = estimators[name]
    params, fitted = node["params"], node["fitted"]
    expect(type(params) is dict and type(fitted) is dict, f"{at}: malformed estimator")
    expect(all(type(k) is str and _IDENT.match(k) for k in params), f"{at}: invalid parameter names")
    expect(all(type(k) is str and _IDENT.match(k) and k.endswith("_") for k in fitted),
           f"{at}: only public fitted attributes (name_) may be loaded")
    params = {k: decode_node(v, f"{at}.{k}", ld) for k, v in params.items()}
    try:
        est = cls(**params)
    except TypeError as exc:
        raise LoadError(f"{at}: {name} does not take the saved parameters ({exc}); load the file with the dpfair "
                        "version that wrote it") from None
    for k, v in fitted.items():
        vars(est)[k] = decode_node(v, f"{at}.{k}", ld)
    return est


DECODERS = {
    "__float__": _d_float, "__tuple__": _d_tuple, "__dict__": _d_dict, "__items__": _d_items,
    "__enum__": _d_enum, "__npscalar__": _d_npscalar, "__ndarray__": _d_ndarray,
    "__ndarray_items__": _d_ndarray_items, "__tensor__": _d_tensor, "__device__": _d_device,
    "__torch_dtype__": _d_torch_dtype, "__torch_module__": _d_torch_module, "__estimator__": _d_estimator,
    "__dataclass__": _d_allowed(dataclass_classes, "class"),
    "__dp_event__": _d_allowed(dp_events, "dp_accounting event"),
    "__sklearn__": _d_sklearn, "__range_index__": _d_range_index, "__multi_index__": _d_multi_index,
    "__index__": _d_index, "__series__": _d_series, "__dataframe__": _d_dataframe, "__object__": _d_object,
}
