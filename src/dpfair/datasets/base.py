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

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpfair.datasets.schema import (KINDS, OTHER, SCHEMA_VERSION, Column, Prepared, Schema, as_text,  # noqa: F401
                                     numeric_columns)
from dpfair.utils.validation import check_1d, check_features


@dataclass(repr=False)
class Dataset:
    """A preprocessed, split data set with a sensitive attribute.

    ``X_*`` are float64 (float32 for MNIST pixels, and for a user's table: two views of its feature store,
    :mod:`dpfair.datasets.store`) of shape ``(n, d)``; ``y_*`` are int64 codes in ``0..l-1``
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


def split_rows(table: Table, test_size: float, random_state: int) -> tuple[np.ndarray, np.ndarray, str]:
    """``(train, test, note)``: the sorted row indices of each part of ``table`` (its labels, groups and split
    fields: ``test_mask``, ``split_groups``) and how they were chosen (the rules of this module's docstring)."""
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


def sensitive_feature_columns(table: Table, schema: Schema | None, feature_names: list[str]) -> tuple[int, ...]:
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
    train, test, note = split_rows(table, test_size, random_state)
    X_train, X_test, names, schema = _preprocess(table, train, test)
    if table.X is None:
        X_train, X_test = check_features(X_train, "X_train"), check_features(X_test, "X_test")
    return assemble(table, (X_train, y[train], s[train]), (X_test, y[test], s[test]), names, schema, note)


def assemble(table: Table, train: tuple, test: tuple, feature_names: list[str], schema: Schema | None,
             note: str) -> Dataset:
    """The :class:`Dataset` of ``table``'s split parts ``(X, y, s)`` (encoded already, e.g. views of a
    :class:`~dpfair.datasets.store.FeatureStore`), described with the split's ``note``."""
    (X_train, y_train, s_train), (X_test, y_test, s_test) = train, test
    description = f"{table.description} Split: {note}; {len(y_train):,} train / {len(y_test):,} test rows"
    if schema is None:
        description += "."
    else:
        description += "; each row's features from that row and the data set's public schema alone."
    return Dataset(
        name=table.name,
        X_train=X_train,
        y_train=y_train,
        s_train=s_train,
        X_test=X_test,
        y_test=y_test,
        s_test=s_test,
        feature_names=list(feature_names),
        label_names=list(table.label_names),
        group_names=list(table.group_names),
        sensitive=table.sensitive,
        description=description,
        licence=table.licence,
        n_dropped=int(table.n_dropped),
        image_shape=table.image_shape,
        schema=schema,
        sensitive_columns=sensitive_feature_columns(table, schema, list(feature_names)),
    )
