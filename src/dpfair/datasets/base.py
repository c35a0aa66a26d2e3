"""The :class:`Dataset` container, the public :class:`Schema` of a data set, and the split shared by every loader.

Every loader turns its raw files into a :class:`Table` (cleaned features, label codes, group codes, the text of
its definitions) and hands it to :func:`finish`, which

* splits train/test (``test_size``, seeded by ``random_state``), stratified by label × group; if some
  label × group cell has fewer than 2 rows it stratifies by label only, and if some label has fewer than 2 rows
  it does not stratify (the description says which was used).  A loader may instead fix the split (an
  official split) or give row groups that must not straddle train and test (e.g. patients);
* turns every row into features with the data set's public :class:`Schema`, declared in code with the loader
  (or by the user for their own table, :func:`dpfair.datasets.load_table`):
  numeric columns are clipped to a declared range ``[lo, hi]`` and mapped to ``(x - center) / scale`` with
  declared constants, categorical columns are one-hot encoded over a declared vocabulary in its declared order
  (a value outside it is an error, or one "other" level where declared), 0/1 columns are passed through.  No
  statistic of the rows is used, so a row's
  features depend on that row alone, whichever other rows exist and whichever split it falls in: what the
  record-level privacy unit needs (removing one training record changes no other row's features and no feature
  name).  A ready matrix ``X`` (MNIST pixels) is passed through unchanged;
* returns a :class:`Dataset` with float features, int64 labels ``0..l-1`` and int64 groups ``0..k-1``, carrying
  its schema and which of its features encode the sensitive attribute (``sensitive_columns``, from the loader's
  ``encodes_sensitive``).
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair.validation import check_1d, check_features


KINDS = ("numeric", "categorical", "binary")

#: What an error about a table's values says instead of the values: an error is published (a terminal, a log, a
#: sweep's stored failure), and a value or a row number read off private rows would leak outside every ε.
_NOT_SHOWN = "the values and their rows are not shown: they are the table's private data"
#: The level a categorical column declared with ``other=True`` maps unlisted values to (feature ``name=<other>``).
OTHER = "<other>"
#: The version of the dict/TOML form of a :class:`Schema` (``Schema.to_dict``).
SCHEMA_VERSION = 1
_COLUMN_KEYS = {"numeric": ("lo", "hi", "center", "scale"), "categorical": ("categories", "other"), "binary": ()}
_SCHEMA_KEYS = ("version", "source", "label", "classes", "sensitive", "groups", "ignore", "columns")


def as_text(values) -> np.ndarray:
    """The values of a column as the strings a schema lists them by (an object array, ``None`` where missing).

    A float that is a whole number prints as an integer (``2.0`` → ``"2"``: a CSV column of integer codes with a
    gap reads as float), anything else as ``str`` does; so a category list reads the same from CSV and Parquet.
    """
    values = pd.Series(values)
    missing = values.isna().to_numpy()
    out = np.full(len(values), None, dtype=object)
    present = values[~missing]
    if pd.api.types.is_float_dtype(present.dtype):
        x = present.to_numpy(np.float64)
        whole = (np.round(x) == x) & (np.abs(x) < 2.0**53)
        text = x.astype(str).astype(object)
        text[whole] = x[whole].astype(np.int64).astype(str)
    else:
        text = present.astype(str).to_numpy(object)
    out[~missing] = text
    return out


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    return float(value)


def _strings(value, where: str, at_least: int = 0) -> tuple[str, ...]:
    """A list of distinct strings (integers are taken as their text: TOML users write ``[1, 2]``)."""
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(v, (str, int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value)
    items = tuple(str(v) for v in value) if ok else ()
    if not ok or len(items) < at_least or len(set(items)) != len(items) or not all(items):
        need = f"at least {at_least} " if at_least else ""
        raise ValueError(f"{where} must be a list of {need}distinct non-empty strings, got {value!r}")
    return items


def _flag(value, where: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return bool(value)


@dataclass(frozen=True)
class Column:
    """One column of a public schema: how a raw value becomes features, with declared constants.

    ``kind`` is ``"numeric"`` (the value is clipped to ``[lo, hi]``, then mapped to ``(x - center) / scale``: one
    feature named after the column; ``center`` and ``scale`` default to ``(lo + hi) / 2`` and ``(hi - lo) / 2``,
    so the declared range maps onto ``[-1, 1]``), ``"categorical"`` (one-hot over ``categories`` in their
    declared order: features ``name=category``; a value outside them, or a missing one, is an error, unless
    ``other=True`` declares one more level ``name=<other>`` that takes them) or ``"binary"`` (a 0/1 value passed
    through).  ``encodes_sensitive`` declares, as a public fact, that the column encodes the sensitive attribute
    (s itself, a proxy s is a function of): see ``Dataset.sensitive_columns``.  A row's features depend on that
    row and these constants alone.  Build columns with :meth:`numeric`, :meth:`categorical` and :meth:`binary`.
    """

    name: str
    kind: str
    categories: tuple[str, ...] = ()
    lo: float = -math.inf
    hi: float = math.inf
    center: float | None = None
    scale: float | None = None
    other: bool = False
    encodes_sensitive: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a column name must be a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r}; valid: {', '.join(KINDS)}")
        where = f"column {self.name!r}:"
        object.__setattr__(self, "categories", tuple(self.categories))
        object.__setattr__(self, "other", _flag(self.other, f"{where} other"))
        object.__setattr__(self, "encodes_sensitive", _flag(self.encodes_sensitive, f"{where} encodes_sensitive"))
        if self.kind == "categorical":
            cats = self.categories
            if not cats or not all(isinstance(c, str) for c in cats) or len(set(cats)) != len(cats):
                raise ValueError(f"{where} categories must be distinct strings, got {cats!r}")
            if self.other and OTHER in cats:
                raise ValueError(f"{where} {OTHER!r} names the level of other values; rename that category")
        elif self.categories:
            raise ValueError(f"{where} only a categorical column has categories")
        elif self.other:
            raise ValueError(f"{where} only a categorical column has an other level")
        lo, hi = _number(self.lo, f"{where} lo"), _number(self.hi, f"{where} hi")
        center, scale = self.center, self.scale
        if self.kind == "numeric" and (center is None or scale is None):
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ValueError(f"{where} give its public range lo and hi (finite numbers), or center and scale")
            center = (lo + hi) / 2 if center is None else center
            scale = ((hi - lo) / 2 or 1.0) if scale is None else scale
        center = 0.0 if center is None else _number(center, f"{where} center")
        scale = 1.0 if scale is None else _number(scale, f"{where} scale")
        for key, value in (("lo", lo), ("hi", hi), ("center", center), ("scale", scale)):
            object.__setattr__(self, key, value)
        if not (lo <= hi and math.isfinite(center) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"{where} need lo <= hi, a finite center and a finite scale > 0")

    @classmethod
    def numeric(cls, name: str, lo: float, hi: float, center: float | None = None, scale: float | None = None, *,
                encodes_sensitive: bool = False) -> Column:
        """Clip to ``[lo, hi]``, then ``(x - center) / scale`` (default: the range mapped onto ``[-1, 1]``)."""
        return cls(name, "numeric", lo=lo, hi=hi, center=center, scale=scale, encodes_sensitive=encodes_sensitive)

    @classmethod
    def categorical(cls, name: str, categories, *, other: bool = False, encodes_sensitive: bool = False) -> Column:
        return cls(name, "categorical", categories=tuple(categories), other=other,
                   encodes_sensitive=encodes_sensitive)

    @classmethod
    def binary(cls, name: str, *, encodes_sensitive: bool = False) -> Column:
        return cls(name, "binary", encodes_sensitive=encodes_sensitive)

    @property
    def feature_names(self) -> list[str]:
        if self.kind == "categorical":
            return [f"{self.name}={c}" for c in self.categories + ((OTHER,) if self.other else ())]
        return [self.name]

    def encode(self, values: pd.Series, dataset: str = "data") -> np.ndarray:
        """The ``(n, len(feature_names))`` float64 features of the raw ``values``, row by row."""
        where = f"{dataset}: column {self.name!r}"
        missing = values.isna().to_numpy()
        if self.kind == "categorical":
            text = as_text(values)
            codes = pd.Index(self.categories).get_indexer(text)
            if self.other:
                codes[codes < 0] = len(self.categories)
            elif missing.any():
                raise ValueError(f"{where} has missing values; fill or drop such rows, or declare the column with "
                                 f"other = true")
            elif np.any(codes < 0):
                raise ValueError(f"{where} holds values outside its declared categories {list(self.categories)} "
                                 f"({_NOT_SHOWN}); add them, or declare other = true")
            return np.eye(len(self.feature_names))[codes]
        if missing.any():
            raise ValueError(f"{where} has missing values; fill or drop such rows")
        x = pd.to_numeric(values, errors="coerce").to_numpy(np.float64, na_value=np.nan)
        if np.isnan(x).any():
            raise ValueError(f"{where} is declared {self.kind} but holds values that are not numbers ({_NOT_SHOWN}); "
                             f"fix them or declare the column categorical")
        if self.kind == "binary":
            if not np.isin(x, (0.0, 1.0)).all():
                raise ValueError(f"{where} is declared 0/1 but holds other values ({_NOT_SHOWN}); fix them or declare "
                                 "the column numeric")
            return x[:, None]
        return ((np.clip(x, self.lo, self.hi) - self.center) / self.scale)[:, None]

    def describe(self) -> str:
        tag = " (encodes the sensitive attribute)" if self.encodes_sensitive else ""
        if self.kind == "categorical":
            other = f", other values -> {self.name}={OTHER}" if self.other else ""
            return f"{self.name}: one-hot over {{{', '.join(self.categories)}}}{other}{tag}"
        if self.kind == "binary":
            return f"{self.name}: 0/1{tag}"
        return f"{self.name}: clip to [{self.lo:g}, {self.hi:g}], (x - {self.center:g}) / {self.scale:g}{tag}"

    def to_dict(self) -> dict:
        """The column as JSON-able data (an infinite bound as ``None``); :meth:`from_dict` reads it back."""
        out = {"name": self.name, "kind": self.kind}
        if self.kind == "numeric":
            out.update({key: (v if math.isfinite(v) else None) for key, v in (("lo", self.lo), ("hi", self.hi))})
            out.update(center=self.center, scale=self.scale)
        elif self.kind == "categorical":
            out.update(categories=list(self.categories), other=self.other)
        if self.encodes_sensitive:
            out["encodes_sensitive"] = True
        return out

    @classmethod
    def from_dict(cls, data, where: str = "column") -> Column:
        """A column from :meth:`to_dict`'s form; an error names the key at fault (``where`` prefixes it)."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a table with keys name, kind, ..., got {data!r}")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name must be a non-empty string, got {name!r}")
        where = f"{where} ({name!r})"
        kind = data.get("kind")
        if kind not in KINDS:
            raise ValueError(f"{where}.kind must be one of {', '.join(KINDS)}, got {kind!r}")
        valid = ("name", "kind", *_COLUMN_KEYS[kind], "encodes_sensitive")
        unknown = [key for key in data if key not in valid]
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} for a {kind} column; valid: {', '.join(valid)}")
        options = {}
        for key in ("lo", "hi", "center", "scale"):
            if data.get(key) is not None:
                options[key] = _number(data[key], f"{where}.{key}")
        if kind == "categorical":
            options["categories"] = _strings(data.get("categories"), f"{where}.categories", 1)
        for key in ("other", "encodes_sensitive"):
            if key in data:
                options[key] = _flag(data[key], f"{where}.{key}")
        try:
            return cls(name, kind, **options)
        except ValueError as exc:
            raise ValueError(f"{where}: {str(exc).split(': ', 1)[-1]}") from None


def numeric_columns(text: str) -> tuple[Column, ...]:
    """Numeric columns from a whitespace table, one ``name lo hi center scale`` line each (blank lines skipped)."""
    columns = []
    for line in text.strip().splitlines():
        if line.strip():
            name, lo, hi, center, scale = line.split()
            columns.append(Column.numeric(name, float(lo), float(hi), float(center), float(scale)))
    return tuple(columns)


def _toml_value(value) -> str:
    """A TOML literal for a string, number, boolean or list of them (written by hand: no TOML writer needed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    return "[" + ", ".join(_toml_value(v) for v in value) + "]"


@dataclass(frozen=True)
class Schema:
    """The public description of a table: its feature :class:`Column` s in feature order, and its targets.

    ``source`` says where the constants come from (documentation, a rounded summary of a public file fixed once in
    code, or a user's declaration).  A user's table also declares, as public facts, its ``label`` column with the
    ``classes`` (codes ``0..l-1`` in that order), its ``sensitive`` column with the ``groups`` (codes ``0..k-1``),
    and the columns it ``ignore`` s; the built-in loaders compute their labels and groups in code instead.  The
    sensitive column may also be a feature; it then encodes s, as does any column declared ``encodes_sensitive``.
    Under the record-level privacy unit nothing here may be computed from the private rows: the schema is
    declared (or reviewed and declared, :func:`dpfair.datasets.infer_schema`), and travels with a model
    (:meth:`to_dict`) so that prediction applies the same preprocessing (:meth:`transform`).
    """

    columns: tuple[Column, ...]
    source: str = ""
    label: str | None = None
    classes: tuple[str, ...] = ()
    sensitive: str | None = None
    groups: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def __post_init__(self):
        for key in ("columns", "classes", "groups", "ignore"):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        if not all(isinstance(c, Column) for c in self.columns):
            raise ValueError("a schema's columns must be Column objects (Column.numeric, .categorical, .binary)")
        if not isinstance(self.source, str):
            raise ValueError(f"source must be a string, got {self.source!r}")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"a schema lists a column twice: {names}")
        for target, values in (("label", "classes"), ("sensitive", "groups")):
            column = getattr(self, target)
            if column is None:
                if getattr(self, values):
                    raise ValueError(f"{values} given without the {target} column they are the values of")
                continue
            if not isinstance(column, str) or not column:
                raise ValueError(f"{target} must be the name of a column, got {column!r}")
            object.__setattr__(self, values, _strings(getattr(self, values), f"{values} (of {target} {column!r})", 2))
        if self.label is not None and self.label in names:
            raise ValueError(f"the label column {self.label!r} may not also be a feature; remove it from the columns")
        if self.label is not None and self.label == self.sensitive:
            raise ValueError(f"the label and the sensitive column are both {self.label!r}")
        ignore = _strings(self.ignore, "ignore")
        clash = [n for n in ignore if n in names or n in (self.label, self.sensitive)]
        if clash:
            raise ValueError(f"ignore lists {clash}, which the schema also uses; remove them from one of the two")
        object.__setattr__(self, "ignore", ignore)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def feature_names(self) -> list[str]:
        return [f for c in self.columns for f in c.feature_names]

    @property
    def encodes_sensitive(self) -> list[str]:
        """The feature columns declared to encode the sensitive attribute (the sensitive column itself if kept)."""
        return [c.name for c in self.columns if c.encodes_sensitive or c.name == self.sensitive]

    def __getitem__(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    def without(self, names) -> Schema:
        """This schema less the columns ``names`` (each must be in it)."""
        unknown = [n for n in names if n not in self.names]
        if unknown:
            raise ValueError(f"no column(s) {unknown} in the schema; columns: {self.names}")
        return replace(self, columns=tuple(c for c in self.columns if c.name not in set(names)))

    def transform(self, frame: pd.DataFrame, dataset: str = "data", *, strict: bool = False) -> np.ndarray:
        """The float64 feature matrix of ``frame``: each row from that row's values and the schema alone.

        Columns are matched by name, whatever their order in ``frame``; the features come in the schema's order
        (:attr:`feature_names`).  A feature column missing from ``frame`` is an error; with ``strict=True``
        (new rows to score, a user's file) so is a column the schema does not know (neither a feature, the
        label, the sensitive column nor an ignored one), since silently dropping it would hide a mismatch.
        """
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"{dataset}: expected a pandas DataFrame with named columns, got {type(frame).__name__}")
        missing = [n for n in self.names if n not in frame.columns]
        if missing:
            raise ValueError(f"{dataset}: the schema's column(s) {missing} are not in the data; add them to the data "
                             f"or remove them from the schema")
        if strict:
            known = {*self.names, *self.ignore, self.label, self.sensitive}
            extra = [c for c in frame.columns if c not in known]
            if extra:
                raise ValueError(f"{dataset}: column(s) {extra} are not in the schema; drop them from the data or "
                                 f"list them in the schema's ignore")
        blocks = [c.encode(frame[c.name], dataset) for c in self.columns]
        return np.hstack(blocks) if blocks else np.zeros((len(frame), 0))

    def codes(self, frame: pd.DataFrame, target: str, dataset: str = "data") -> np.ndarray:
        """The int64 codes of the ``target`` (``"label"`` or ``"sensitive"``) column of ``frame``: each value's
        position in the declared ``classes`` or ``groups``; a missing or undeclared value is an error."""
        if target not in ("label", "sensitive"):
            raise ValueError(f"target must be 'label' or 'sensitive', got {target!r}")
        column, key = getattr(self, target), "classes" if target == "label" else "groups"
        if column is None:
            raise ValueError(f"{dataset}: the schema declares no {target} column; add {target} = \"...\" and "
                             f"{key} = [...] to it")
        if column not in frame.columns:
            raise ValueError(f"{dataset}: no {target} column {column!r} in the data; columns: {list(frame.columns)}")
        missing = frame[column].isna().to_numpy()
        if missing.any():
            raise ValueError(f"{dataset}: the {target} column {column!r} has missing values; drop such rows first")
        text = as_text(frame[column])
        declared = getattr(self, key)
        codes = pd.Index(declared).get_indexer(text)
        if np.any(codes < 0):
            raise ValueError(f"{dataset}: the {target} column {column!r} holds values outside the declared {key} "
                             f"{list(declared)} ({_NOT_SHOWN}); add them to the schema's {key}")
        return codes.astype(np.int64)

    def describe(self) -> str:
        """One line per column, the targets, then the source of the constants."""
        lines = [c.describe() for c in self.columns]
        if self.label is not None:
            lines.append(f"label {self.label}: classes {', '.join(f'{i} = {c}' for i, c in enumerate(self.classes))}")
        if self.sensitive is not None:
            lines.append(f"sensitive {self.sensitive}: groups "
                         f"{', '.join(f'{i} = {g}' for i, g in enumerate(self.groups))}")
        if self.ignore:
            lines.append(f"ignored: {', '.join(self.ignore)}")
        return "\n".join(lines + [f"(schema source: {self.source})"])

    def to_dict(self) -> dict:
        """The schema as JSON-able data (what a model file stores); :meth:`from_dict` reads it back."""
        out = {"version": SCHEMA_VERSION, "source": self.source}
        if self.label is not None:
            out.update(label=self.label, classes=list(self.classes))
        if self.sensitive is not None:
            out.update(sensitive=self.sensitive, groups=list(self.groups))
        if self.ignore:
            out["ignore"] = list(self.ignore)
        out["columns"] = [c.to_dict() for c in self.columns]
        return out

    @classmethod
    def from_dict(cls, data, where: str = "schema") -> Schema:
        """A schema from :meth:`to_dict`'s form (or parsed TOML); a one-line error names the key at fault."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a table of keys ({', '.join(_SCHEMA_KEYS)}), got {type(data).__name__}")
        unknown = [key for key in data if key not in _SCHEMA_KEYS]
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r}; valid: {', '.join(_SCHEMA_KEYS)}")
        if data.get("version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ValueError(f"{where}: version {data['version']!r} is not one this dpfair reads "
                             f"(version = {SCHEMA_VERSION}); upgrade dpfair")
        for key in ("source", "label", "sensitive"):
            if key in data and not isinstance(data[key], str):
                raise ValueError(f"{where}: {key} must be a string, got {data[key]!r}")
        columns = data.get("columns", [])
        if not isinstance(columns, list):
            raise ValueError(f"{where}: columns must be a list of tables ([[columns]] in TOML), got {columns!r}")
        lists = {key: _strings(data[key], f"{where}: {key}") for key in ("classes", "groups", "ignore") if key in data}
        try:
            return cls(tuple(Column.from_dict(c, f"{where}: columns[{i}]") for i, c in enumerate(columns)),
                       data.get("source", ""), data.get("label"), sensitive=data.get("sensitive"), **lists)
        except ValueError as exc:
            message = str(exc)
            raise ValueError(message if message.startswith(f"{where}:") else f"{where}: {message}") from None

    def to_toml(self) -> str:
        """The schema as TOML text, for a user to review, edit and declare (:meth:`from_toml` reads it back)."""
        data = self.to_dict()
        columns = data.pop("columns")
        lines = ["# dpfair schema: every value below is treated as a public fact, not computed from private rows.",
                 "# Numeric columns are clipped to [lo, hi] and mapped to (x - center) / scale; categorical ones are",
                 "# one-hot over categories (other = true: one more level for any other value). Once reviewed,",
                 "# say who declared it in source.", ""]
        lines += [f"{key} = {_toml_value(value)}" for key, value in data.items()]
        for column in columns:
            lines += ["", "[[columns]]"]
            lines += [f"{key} = {_toml_value(value)}" for key, value in column.items() if value is not None]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_toml(cls, source) -> Schema:
        """A schema from TOML: a :class:`~pathlib.Path`, a file name, or the text itself (a string with a newline
        or an ``=``)."""
        if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and "=" not in source):
            where = str(source)
            try:
                text = Path(source).read_text(encoding="utf-8")
            except FileNotFoundError:
                raise ValueError(f"schema file {where!r} not found") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"cannot read the schema file {where!r}: {exc}") from None
        elif isinstance(source, str):
            where, text = "schema", source
        else:
            raise ValueError(f"from_toml takes a path or TOML text, got {type(source).__name__}")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{where}: not valid TOML: {exc}") from None
        return cls.from_dict(data, where)


@dataclass(repr=False)
class Dataset:
    """A preprocessed, split data set with a sensitive attribute.

    ``X_*`` are float64 (float32 for MNIST pixels) of shape ``(n, d)``; ``y_*`` are int64 codes in ``0..l-1``
    described by ``label_names``; ``s_*`` are int64 group codes in ``0..k-1`` described by ``group_names``.
    ``n_dropped`` counts rows dropped for missing values.  ``image_shape`` is the ``(channels, height, width)``
    of each row for image data (``X.reshape(-1, *image_shape)``), else ``None``.  ``schema`` is the public
    :class:`Schema` the features were built with (``None`` when a ready matrix was passed through, e.g. MNIST
    pixels): under the record-level privacy unit it, the row counts, ``label_names`` and ``group_names`` are what
    is treated as public.  ``sensitive_columns`` lists, as public schema information, the indices of the features
    that encode the sensitive attribute (the columns that define it, kept by ``include_sensitive=True``; empty when
    the loader left them out): under ``privacy_unit="sensitive"`` X is public, so methods that read X as such refuse
    them (:func:`dpfair.privacy.check_public_features`) and output perturbation accounts for them.
    """

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    s_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    s_test: np.ndarray
    feature_names: list[str]
    label_names: list[str]
    group_names: list[str]
    sensitive: str
    description: str
    licence: str
    n_dropped: int
    image_shape: tuple[int, ...] | None = None
    schema: Schema | None = None
    sensitive_columns: tuple[int, ...] = ()

    @property
    def sensitive_feature_names(self) -> list[str]:
        """The names of the features that encode the sensitive attribute (``sensitive_columns``)."""
        return [self.feature_names[j] for j in self.sensitive_columns]

    @property
    def n_features(self) -> int:
        return int(self.X_train.shape[1])

    @property
    def n_classes(self) -> int:
        return len(self.label_names)

    @property
    def n_groups(self) -> int:
        return len(self.group_names)

    @property
    def train(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X_train, y_train, s_train)``."""
        return self.X_train, self.y_train, self.s_train

    @property
    def test(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X_test, y_test, s_test)``."""
        return self.X_test, self.y_test, self.s_test

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, sensitive={self.sensitive!r}, n_train={len(self.y_train)}, "
            f"n_test={len(self.y_test)}, n_features={self.n_features}, labels={self.label_names}, "
            f"groups={self.group_names}, n_dropped={self.n_dropped})"
        )


@dataclass
class Table:
    """A cleaned data set before splitting, as loaders build it.

    Either ``frame`` (a DataFrame) with ``schema`` (its public :class:`Schema`: which columns are features, in
    which order, and how they are encoded) or ``X`` (a ready numeric matrix, passed through unchanged) holds the
    features.  Instead of a schema, a frame may list its 0/1 columns in ``binary`` (passed through).  ``test_mask``
    fixes the split;
    ``split_groups`` asks for a group-wise random split instead of a stratified one.  ``encodes_sensitive`` names
    the columns (of the schema, or features of ``X``) that encode the sensitive attribute: s itself, its one-hot
    columns, or a column that s is a function of (``Dataset.sensitive_columns``).
    """

    name: str
    y: np.ndarray
    s: np.ndarray
    label_names: list[str]
    group_names: list[str]
    sensitive: str
    description: str
    licence: str
    n_dropped: int
    frame: pd.DataFrame | None = None
    schema: Schema | None = None
    binary: list[str] = field(default_factory=list)
    X: np.ndarray | None = None
    feature_names: list[str] | None = None
    test_mask: np.ndarray | None = None
    split_groups: np.ndarray | None = None
    split_note: str | None = None
    image_shape: tuple[int, ...] | None = None
    encodes_sensitive: list[str] = field(default_factory=list)


def check_test_size(test_size) -> float:
    if isinstance(test_size, bool) or not isinstance(test_size, (int, float)) or not 0.0 < float(test_size) < 1.0:
        raise ValueError(f"test_size must be a fraction strictly between 0 and 1, got {test_size!r}")
    return float(test_size)


def check_choice(value, name: str, valid, dataset: str):
    """``value`` must be one of ``valid``; the error lists them."""
    if value not in valid:
        raise ValueError(f"unknown {name} {value!r} for data set {dataset!r}; valid: {', '.join(map(str, valid))}")
    return value


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _split(table: Table, test_size: float, random_state: int) -> tuple[np.ndarray, np.ndarray, str]:
    # imported here, so that `dpfair datasets` (reading cached summaries) imports no scikit-learn
    from sklearn.model_selection import GroupShuffleSplit, train_test_split

    n = len(table.y)
    index = np.arange(n)
    if table.test_mask is not None:
        note = table.split_note or "fixed train/test split"
        return index[~table.test_mask], index[table.test_mask], note
    if table.split_groups is not None:
        splitter = GroupShuffleSplit(n_splits=1, test_size=test_size, random_state=random_state)
        train, test = next(splitter.split(index, groups=table.split_groups))
        note = table.split_note or "group-wise random split"
        return np.sort(train), np.sort(test), f"{note} ({test_size:g} of the groups in test, seed {random_state})"
    k = len(table.group_names)
    strata = [
        (table.y * k + table.s, "stratified by label × group"),
        (table.y, "stratified by label only (some label × group cell has fewer than 2 rows)"),
        (None, "not stratified (some label has fewer than 2 rows)"),
    ]
    for stratify, note in strata:
        if stratify is not None and np.any(np.bincount(stratify) == 1):
            continue
        try:
            train, test = train_test_split(index, test_size=test_size, random_state=random_state, stratify=stratify)
        except ValueError:  # too few rows for the number of strata
            continue
        note = f"random {1 - test_size:g}/{test_size:g} split {note}, seed {random_state}"
        return np.sort(train), np.sort(test), note
    raise ValueError(f"cannot split {n} rows of {table.name!r} with test_size={test_size}")


def table_schema(table: Table) -> Schema:
    """The schema of a frame table: its declared one, else its ``binary`` 0/1 columns passed through."""
    if table.schema is not None:
        if table.binary:
            raise ValueError(f"{table.name}: give either a schema or binary column lists, not both")
        return table.schema
    return Schema(tuple(Column.binary(c) for c in table.binary), "0/1 columns passed through")


def _preprocess(table: Table, train: np.ndarray, test: np.ndarray):
    """``(X_train, X_test, feature_names, schema)``: every row encoded by the schema alone (or passed through)."""
    if table.X is not None:
        names = table.feature_names or [f"x{j}" for j in range(table.X.shape[1])]
        return table.X[train], table.X[test], names, None
    schema = table_schema(table)
    X = schema.transform(table.frame, table.name)
    return X[train], X[test], schema.feature_names, schema


def _sensitive_columns(table: Table, schema: Schema | None, feature_names: list[str]) -> tuple[int, ...]:
    """The indices of the features built from ``table.encodes_sensitive`` and the schema's own declaration
    (``Schema.encodes_sensitive``): every feature of each named schema column (its one-hot columns), or the named
    features of a ready matrix."""
    if schema is None:
        where = {name: [j] for j, name in enumerate(feature_names)}
    else:
        where, start = {}, 0
        for column in schema.columns:
            width = len(column.feature_names)
            where[column.name] = list(range(start, start + width))
            start += width
    declared = list(table.encodes_sensitive) + ([] if schema is None else schema.encodes_sensitive)
    unknown = [name for name in declared if name not in where]
    if unknown:
        raise ValueError(f"{table.name}: the column(s) {unknown} said to encode {table.sensitive!r} are not features")
    return tuple(sorted({j for name in declared for j in where[name]}))


def finish(table: Table, test_size: float, random_state: int) -> Dataset:
    """Split ``table``, encode its rows with its schema and return the :class:`Dataset`."""
    test_size = check_test_size(test_size)
    y = check_1d(table.y, "y").astype(np.int64)
    s = check_1d(table.s, "s", len(y)).astype(np.int64)
    train, test, note = _split(table, test_size, random_state)
    X_train, X_test, names, schema = _preprocess(table, train, test)
    if table.X is None:
        X_train, X_test = check_features(X_train, "X_train"), check_features(X_test, "X_test")
    description = f"{table.description} Split: {note}; {len(train):,} train / {len(test):,} test rows"
    if schema is None:
        description += "."
    else:
        description += "; each row's features from that row and the data set's public schema alone."
    return Dataset(
        name=table.name,
        X_train=X_train,
        y_train=y[train],
        s_train=s[train],
        X_test=X_test,
        y_test=y[test],
        s_test=s[test],
        feature_names=names,
        label_names=list(table.label_names),
        group_names=list(table.group_names),
        sensitive=table.sensitive,
        description=description,
        licence=table.licence,
        n_dropped=int(table.n_dropped),
        image_shape=table.image_shape,
        schema=schema,
        sensitive_columns=_sensitive_columns(table, schema, names),
    )
