"""The public :class:`Schema` of a table and its :class:`Column` s: how each row becomes features, declared.

A schema says, as public facts, which columns are features and how each raw cell becomes features: the cleaning
rules of :mod:`dpfair.datasets.cleaning` (what is missing and what it becomes, how numbers are written, how
categories are matched, a transform for heavy tails), then numeric columns clipped to a declared range
``[lo, hi]`` and mapped to ``(x - center) / scale``, categorical ones one-hot over a declared vocabulary (a value
outside it an error, or one "other" level where declared), 0/1 columns passed through and dates split into
declared parts.  It names the label column with its classes and the sensitive column(s) with their groups (several
sensitive columns form the intersectional groups of their declared lists).  No statistic of the rows is used, so a
row's features depend on that row alone: what the record-level privacy unit needs (removing one training record
changes no other row's features and no feature name).  The schema travels inside a model file (:meth:`Schema.to_dict`)
and :meth:`Schema.prepare` applies it again to the rows a model scores.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from dpfair.datasets.cleaning import DEFAULT_MISSING_VALUES, CleaningCounts, text_cells
# Column and its names live in dpfair.datasets.columns; they are re-exported here, where they were first imported from
from dpfair.datasets.columns import (KINDS, NOT_SHOWN, OTHER, Column, as_text, distinct_strings,  # noqa: F401
                                     numeric_columns)
from dpfair.datasets.schema_toml import read_toml, toml_text

#: What joins the group names of several sensitive columns into one intersectional group (``"Black & Female"``).
GROUP_JOIN = " & "
#: The version of the dict/TOML form of a :class:`Schema` (``Schema.to_dict``); version 1 (no cleaning rules)
#: still reads.
SCHEMA_VERSION = 2
_READS = (1, 2)
_SCHEMA_KEYS = ("version", "source", "label", "classes", "label_missing", "sensitive", "groups", "sensitive_missing",
                "missing_values", "ignore", "columns")
TARGET_MISSING = ("error", "drop")


@dataclass
class Prepared:
    """What :meth:`Schema.prepare` made of a frame: the features ``X`` of the rows it ``kept`` (a mask over the
    frame's rows: a row is left out when a cell declared ``missing = "drop"`` is missing), and the
    :class:`~dpfair.datasets.cleaning.CleaningCounts` of what the rules did."""

    X: np.ndarray
    kept: np.ndarray
    counts: CleaningCounts = field(default_factory=CleaningCounts)

    @property
    def n_left_out(self) -> int:
        return int((~self.kept).sum())


@dataclass(frozen=True)
class Schema:
    """The public description of a table: its feature :class:`Column` s in feature order, and its targets.

    ``source`` says where the constants come from (documentation, a rounded summary of a public file fixed once in
    code, or a user's declaration).  A user's table also declares, as public facts, its ``label`` column with the
    ``classes`` (codes ``0..l-1`` in that order), its ``sensitive`` column with the ``groups`` (codes ``0..k-1``),
    and the columns it ``ignore`` s; the built-in loaders compute their labels and groups in code instead.
    ``sensitive`` may name several columns (a list): ``groups`` is then a table of each column's group list, and
    the groups are their intersections (``"Black & Female"``, codes in the order of the product, the first
    column's group slowest).  ``missing_values`` lists the cells read as missing (default
    :data:`~dpfair.datasets.cleaning.DEFAULT_MISSING_VALUES`); ``label_missing`` and ``sensitive_missing`` say
    what a row with a missing label or group becomes (``"error"`` or ``"drop"``).  The sensitive column may also
    be a feature; it then encodes s, as does any column declared ``encodes_sensitive``.  Under the record-level
    privacy unit nothing here may be computed from the private rows: the schema is declared (or reviewed and
    declared, :func:`dpfair.datasets.infer_schema`), and travels with a model (:meth:`to_dict`) so that
    prediction applies the same preprocessing (:meth:`prepare`).
    """

    columns: tuple[Column, ...]
    source: str = ""
    label: str | None = None
    classes: tuple[str, ...] = ()
    sensitive: str | tuple[str, ...] | None = None
    groups: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    missing_values: tuple[str, ...] | None = None
    label_missing: str = "error"
    sensitive_missing: str = "error"
    group_lists: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self):
        for key in ("columns", "classes", "ignore"):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        if not all(isinstance(c, Column) for c in self.columns):
            raise ValueError("a schema's columns must be Column objects (Column.numeric, .categorical, .binary)")
        if not isinstance(self.source, str):
            raise ValueError(f"source must be a string, got {self.source!r}")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"a schema lists a column twice: {names}")
        self._set_sensitive()
        if self.label is None:
            if self.classes:
                raise ValueError("classes given without the label column they are the values of")
        else:
            if not isinstance(self.label, str) or not self.label:
                raise ValueError(f"label must be the name of a column, got {self.label!r}")
            object.__setattr__(self, "classes", distinct_strings(self.classes, f"classes (of label {self.label!r})", 2))
        if self.label is not None and self.label in names:
            raise ValueError(f"the label column {self.label!r} may not also be a feature; remove it from the columns")
        if self.label is not None and self.label in self.sensitive_columns:
            raise ValueError(f"the label and the sensitive column are both {self.label!r}")
        ignore = distinct_strings(self.ignore, "ignore")
        clash = [n for n in ignore if n in names or n == self.label or n in self.sensitive_columns]
        if clash:
            raise ValueError(f"ignore lists {clash}, which the schema also uses; remove them from one of the two")
        object.__setattr__(self, "ignore", ignore)
        if self.missing_values is not None:
            tokens = self.missing_values
            if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
                raise ValueError(f"missing_values must be a list of strings (the cells read as missing), got "
                                 f"{tokens!r}")
            object.__setattr__(self, "missing_values", tuple(t.strip() for t in tokens))
        for key in ("label_missing", "sensitive_missing"):
            if getattr(self, key) not in TARGET_MISSING:
                raise ValueError(f"{key} must be \"error\" or \"drop\", got {getattr(self, key)!r}")

    def _set_sensitive(self) -> None:
        """One sensitive column (a string, its groups a list) or several (their group lists, groups = the product)."""
        sensitive, groups = self.sensitive, self.groups
        if isinstance(sensitive, (list, tuple)):
            columns = distinct_strings(sensitive, "sensitive", 1)
            sensitive = columns[0] if len(columns) == 1 else columns
        if sensitive is None:
            if groups or self.group_lists:
                raise ValueError("groups given without the sensitive column they are the values of")
            return
        if isinstance(sensitive, str):
            if not sensitive:
                raise ValueError(f"sensitive must be the name of a column, got {sensitive!r}")
            if isinstance(groups, dict):
                if list(groups) != [sensitive]:
                    raise ValueError(f"groups names the columns {list(groups)}, sensitive is {sensitive!r}")
                groups = groups[sensitive]
            object.__setattr__(self, "sensitive", sensitive)
            object.__setattr__(self, "groups", distinct_strings(groups, f"groups (of sensitive {sensitive!r})", 2))
            object.__setattr__(self, "group_lists", (self.groups,))
            return
        if isinstance(groups, dict):
            if sorted(groups) != sorted(sensitive):
                raise ValueError(f"groups must give the group list of each sensitive column {list(sensitive)}, got "
                                 f"the columns {list(groups)}")
            lists = tuple(distinct_strings(groups[c], f"groups.{c}", 1) for c in sensitive)
        elif self.group_lists:
            lists = tuple(tuple(g) for g in self.group_lists)
        else:
            raise ValueError(f"with several sensitive columns {list(sensitive)}, groups is a table of each one's list "
                             "(groups = {" + ", ".join(f'{c} = [...]' for c in sensitive) + "})")
        for column, values in zip(sensitive, lists):
            if any(GROUP_JOIN.strip() in v for v in values):
                raise ValueError(f"groups.{column}: a group name may not hold {GROUP_JOIN.strip()!r}, which joins "
                                 "intersectional group names")
        product = tuple(GROUP_JOIN.join(combo) for combo in itertools.product(*lists))
        if len(product) < 2:
            raise ValueError(f"the sensitive columns {list(sensitive)} form {len(product)} group; they need at least 2")
        object.__setattr__(self, "sensitive", tuple(sensitive))
        object.__setattr__(self, "group_lists", lists)
        object.__setattr__(self, "groups", product)

    @property
    def sensitive_columns(self) -> tuple[str, ...]:
        """The sensitive column(s) (empty when none is declared)."""
        if self.sensitive is None:
            return ()
        return (self.sensitive,) if isinstance(self.sensitive, str) else tuple(self.sensitive)

    @property
    def attribute(self) -> str | None:
        """The sensitive attribute's name, as an ε names whom it protects: the column, or the intersection of
        several (``"ethnicity × sex"``)."""
        return " × ".join(self.sensitive_columns) or None

    @property
    def tokens(self) -> tuple[str, ...]:
        return DEFAULT_MISSING_VALUES if self.missing_values is None else self.missing_values

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def feature_names(self) -> list[str]:
        return [f for c in self.columns for f in c.feature_names]

    @property
    def encodes_sensitive(self) -> list[str]:
        """The feature columns declared to encode the sensitive attribute (a sensitive column itself if kept)."""
        return [c.name for c in self.columns if c.encodes_sensitive or c.name in self.sensitive_columns]

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

    def _check_frame(self, frame, dataset: str, strict: bool, keep=()) -> None:
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"{dataset}: expected a pandas DataFrame with named columns, got {type(frame).__name__}")
        missing = [n for n in self.names if n not in frame.columns]
        if missing:
            raise ValueError(f"{dataset}: the schema's column(s) {missing} are not in the data; add them to the data "
                             f"or remove them from the schema")
        if strict:
            known = {*self.names, *self.ignore, self.label, *self.sensitive_columns, *keep}
            extra = [c for c in frame.columns if c not in known]
            if extra:
                raise ValueError(f"{dataset}: column(s) {extra} are not in the schema; drop them from the data or "
                                 f"list them in the schema's ignore")

    def prepare(self, frame: pd.DataFrame, dataset: str = "data", *, strict: bool = False, targets: bool = False,
                keep=()) -> Prepared:
        """The features of ``frame``'s rows, each from that row's cells and the schema alone, and which rows are
        kept (:class:`Prepared`).

        Columns are matched by name, whatever their order in ``frame``; the features come in the schema's order
        (:attr:`feature_names`).  A feature column missing from ``frame`` is an error; with ``strict=True``
        (new rows to score, a user's file) so is a column the schema does not know (neither a feature, the
        label, a sensitive column, an ignored one nor one of ``keep``), since silently dropping it would hide a
        mismatch.  With ``targets=True`` a row whose label or group is missing under ``label_missing`` /
        ``sensitive_missing = "drop"`` is left out too (a training table; scoring needs neither).
        """
        self._check_frame(frame, dataset, strict, keep)
        counts = CleaningCounts()
        blocks, kept = [], self._targets_kept(frame, dataset) if targets else np.ones(len(frame), bool)
        for c in self.columns:
            block, dropped = c.features(frame[c.name], dataset, missing_values=self.tokens, counts=counts)
            blocks.append(block)
            kept &= ~dropped
        X = np.hstack(blocks)[kept] if blocks else np.zeros((int(kept.sum()), 0))
        return Prepared(X, kept, counts)

    def _targets_kept(self, frame: pd.DataFrame, dataset: str) -> np.ndarray:
        kept = np.ones(len(frame), bool)
        for target in ("label", "sensitive"):
            if getattr(self, f"{target}_missing") == "drop" and getattr(self, target) is not None:
                kept &= self.codes(frame, target, dataset, allow_missing=True) >= 0
        return kept

    def kept_rows(self, frame: pd.DataFrame, dataset: str = "data") -> np.ndarray:
        """The mask of the training rows :meth:`prepare` keeps (``targets=True``), reading only the columns that
        declare ``missing = "drop"`` (and the targets)."""
        kept = self._targets_kept(frame, dataset)
        for c in self.columns:
            if c.missing is not None and c.missing.action == "drop":
                kept &= ~c.features(frame[c.name], dataset, missing_values=self.tokens)[1]
        return kept

    def transform(self, frame: pd.DataFrame, dataset: str = "data", *, strict: bool = False) -> np.ndarray:
        """The float64 feature matrix of every row of ``frame`` (:meth:`prepare`); a row that a declared
        ``missing = "drop"`` would leave out is an error here (``prepare`` says which rows it keeps)."""
        prepared = self.prepare(frame, dataset, strict=strict)
        if prepared.n_left_out:
            dropped = [c for c, n in prepared.counts.counts.items() if n.get("not_scored")]
            raise ValueError(f"{dataset}: rows with a missing {', '.join(map(repr, dropped))} are declared dropped; "
                             "read the rows with Schema.prepare, which says which rows it kept")
        return prepared.X

    def codes(self, frame: pd.DataFrame, target: str, dataset: str = "data", *,
              allow_missing: bool = False) -> np.ndarray:
        """The int64 codes of the ``target`` (``"label"`` or ``"sensitive"``) column(s) of ``frame``: each value's
        position in the declared ``classes`` or ``groups`` (of several sensitive columns: its intersectional
        group's); a missing (``-1`` with ``allow_missing``) or undeclared value is an error."""
        if target not in ("label", "sensitive"):
            raise ValueError(f"target must be 'label' or 'sensitive', got {target!r}")
        key = "classes" if target == "label" else "groups"
        columns = (self.label,) if target == "label" and self.label else self.sensitive_columns if (
            target == "sensitive") else ()
        if not columns:
            raise ValueError(f"{dataset}: the schema declares no {target} column; add {target} = \"...\" and "
                             f"{key} = [...] to it")
        lists = (self.classes,) if target == "label" else self.group_lists
        parts, absent = [], np.zeros(len(frame), bool)
        for column, declared in zip(columns, lists):
            if column not in frame.columns:
                raise ValueError(f"{dataset}: no {target} column {column!r} in the data; columns: "
                                 f"{list(frame.columns)}")
            text, missing = text_cells(frame[column], self.tokens)
            if missing.any() and not allow_missing:
                rule = f"{target}_missing"
                raise ValueError(f"{dataset}: the {target} column {column!r} has missing values; drop such rows "
                                 f"first, or declare {rule} = \"drop\" in the schema")
            text[missing] = ""
            codes = pd.Index(declared).get_indexer(text)
            if np.any((codes < 0) & ~missing):
                raise ValueError(f"{dataset}: the {target} column {column!r} holds values outside the declared "
                                 f"{key} {list(declared)} ({NOT_SHOWN}); add them to the schema's {key}")
            parts.append(codes)
            absent |= missing
        sizes = [len(d) for d in lists]
        combined = np.ravel_multi_index([np.maximum(p, 0) for p in parts], sizes) if len(parts) > 1 else parts[0]
        return np.where(absent, -1, combined).astype(np.int64)

    def describe(self) -> str:
        """One line per column, the targets, then the source of the constants."""
        lines = [c.describe() for c in self.columns]
        if self.label is not None:
            lines.append(f"label {self.label}: classes {', '.join(f'{i} = {c}' for i, c in enumerate(self.classes))}"
                         + ("; a row without a label is dropped" if self.label_missing == "drop" else ""))
        if self.sensitive is not None:
            lines.append(f"sensitive {self.attribute}: groups "
                         f"{', '.join(f'{i} = {g}' for i, g in enumerate(self.groups))}"
                         + ("; a row without a group is dropped" if self.sensitive_missing == "drop" else ""))
        if self.missing_values is not None:
            lines.append(f"missing cells: {', '.join(map(repr, self.missing_values))}")
        if self.ignore:
            lines.append(f"ignored: {', '.join(self.ignore)}")
        return "\n".join(lines + [f"(schema source: {self.source})"])

    def to_dict(self) -> dict:
        """The schema as JSON-able data (what a model file stores); :meth:`from_dict` reads it back."""
        out = {"version": SCHEMA_VERSION, "source": self.source}
        if self.label is not None:
            out.update(label=self.label, classes=list(self.classes))
            if self.label_missing != "error":
                out["label_missing"] = self.label_missing
        if self.sensitive is not None:
            if isinstance(self.sensitive, str):
                out.update(sensitive=self.sensitive, groups=list(self.groups))
            else:
                out.update(sensitive=list(self.sensitive),
                           groups={c: list(g) for c, g in zip(self.sensitive, self.group_lists)})
            if self.sensitive_missing != "error":
                out["sensitive_missing"] = self.sensitive_missing
        if self.missing_values is not None:
            out["missing_values"] = list(self.missing_values)
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
        if data.get("version", SCHEMA_VERSION) not in _READS:
            raise ValueError(f"{where}: version {data['version']!r} is not one this dpfair reads "
                             f"(version = {SCHEMA_VERSION}); upgrade dpfair")
        for key in ("source", "label", "label_missing", "sensitive_missing"):
            if key in data and not isinstance(data[key], str):
                raise ValueError(f"{where}: {key} must be a string, got {data[key]!r}")
        columns = data.get("columns", [])
        if not isinstance(columns, list):
            raise ValueError(f"{where}: columns must be a list of tables ([[columns]] in TOML), got {columns!r}")
        lists = {key: distinct_strings(data[key], f"{where}: {key}") for key in ("classes", "ignore") if key in data}
        options = {key: data[key] for key in ("label_missing", "sensitive_missing") if key in data}
        sensitive = data.get("sensitive")
        if sensitive is not None and not isinstance(sensitive, (str, list)):
            raise ValueError(f"{where}: sensitive must be a column name or a list of them, got {sensitive!r}")
        groups = data.get("groups", ())
        if isinstance(groups, dict):
            groups = {str(k): distinct_strings(v, f"{where}: groups.{k}") for k, v in groups.items()}
        elif "groups" in data:
            groups = distinct_strings(groups, f"{where}: groups")
        if "missing_values" in data:
            tokens = data["missing_values"]
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise ValueError(f"{where}: missing_values must be a list of strings, got {tokens!r}")
            options["missing_values"] = tuple(tokens)
        try:
            return cls(tuple(Column.from_dict(c, f"{where}: columns[{i}]") for i, c in enumerate(columns)),
                       data.get("source", ""), data.get("label"), sensitive=sensitive, groups=groups,
                       **lists, **options)
        except ValueError as exc:
            message = str(exc)
            raise ValueError(message if message.startswith(f"{where}:") else f"{where}: {message}") from None

    def to_toml(self, notes: dict[str, str] | None = None) -> str:
        """The schema as TOML text, for a user to review, edit and declare (:meth:`from_toml` reads it back).
        ``notes`` (column → text) become comments above each column's table and the ignore list (why a proposer
        chose what it did)."""
        return toml_text(self.to_dict(), notes)

    @classmethod
    def from_toml(cls, source) -> Schema:
        """A schema from TOML: a :class:`~pathlib.Path`, a file name, or the text itself (a string with a newline
        or an ``=``)."""
        data, where = read_toml(source)
        return cls.from_dict(data, where)
