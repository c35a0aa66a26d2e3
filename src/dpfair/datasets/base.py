"""The :class:`Dataset` container and the split and preprocessing shared by every loader.

Every loader turns its raw files into a :class:`Table` (cleaned features, label codes, group codes, the text of
its definitions) and hands it to :func:`finish`, which

* splits train/test (``test_size``, seeded by ``random_state``), stratified by label × group; if some
  label × group cell has fewer than 2 rows it stratifies by label only, and if some label has fewer than 2 rows
  it does not stratify (the description says which was used).  A loader may instead fix the split (an
  official split) or give row groups that must not straddle train and test (e.g. patients);
* fits the preprocessing on the training part only: categorical columns are one-hot encoded (categories unseen
  in training are all-zero), numeric columns are standardised to mean 0 and variance 1 on the training part,
  binary 0/1 columns are passed through;
* returns a :class:`Dataset` with float features, int64 labels ``0..l-1`` and int64 groups ``0..k-1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupShuffleSplit, train_test_split
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from dpfair.validation import check_1d, check_features


@dataclass(repr=False)
class Dataset:
    """A preprocessed, split data set with a sensitive attribute.

    ``X_*`` are float64 (float32 for MNIST pixels) of shape ``(n, d)``; ``y_*`` are int64 codes in ``0..l-1``
    described by ``label_names``; ``s_*`` are int64 group codes in ``0..k-1`` described by ``group_names``.
    ``n_dropped`` counts rows dropped for missing values.  ``image_shape`` is the ``(channels, height, width)``
    of each row for image data (``X.reshape(-1, *image_shape)``), else ``None``.
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

    Either ``frame`` (a DataFrame whose columns are listed in ``categorical``, ``numeric`` and ``binary``) or
    ``X`` (a ready numeric matrix, passed through unchanged) holds the features.  ``test_mask`` fixes the split;
    ``split_groups`` asks for a group-wise random split instead of a stratified one.
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
    categorical: list[str] = field(default_factory=list)
    numeric: list[str] = field(default_factory=list)
    binary: list[str] = field(default_factory=list)
    X: np.ndarray | None = None
    feature_names: list[str] | None = None
    test_mask: np.ndarray | None = None
    split_groups: np.ndarray | None = None
    split_note: str | None = None
    image_shape: tuple[int, ...] | None = None


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


def _preprocess(table: Table, train: np.ndarray, test: np.ndarray):
    """Fit the encoders on the training rows; return ``(X_train, X_test, feature_names)``."""
    if table.X is not None:
        names = table.feature_names or [f"x{j}" for j in range(table.X.shape[1])]
        return table.X[train], table.X[test], names
    frame = table.frame
    tr, te = frame.iloc[train], frame.iloc[test]
    blocks_tr, blocks_te, names = [], [], []
    if table.numeric:
        scaler = StandardScaler().fit(tr[table.numeric].to_numpy(np.float64))
        blocks_tr.append(scaler.transform(tr[table.numeric].to_numpy(np.float64)))
        blocks_te.append(scaler.transform(te[table.numeric].to_numpy(np.float64)))
        names += list(table.numeric)
    if table.categorical:
        enc = OneHotEncoder(handle_unknown="ignore", sparse_output=False, dtype=np.float64)
        enc.fit(tr[table.categorical].astype(str))
        blocks_tr.append(enc.transform(tr[table.categorical].astype(str)))
        blocks_te.append(enc.transform(te[table.categorical].astype(str)))
        names += [f"{col}={cat}" for col, cats in zip(table.categorical, enc.categories_) for cat in cats]
    if table.binary:
        blocks_tr.append(tr[table.binary].to_numpy(np.float64))
        blocks_te.append(te[table.binary].to_numpy(np.float64))
        names += list(table.binary)
    return np.hstack(blocks_tr), np.hstack(blocks_te), names


def finish(table: Table, test_size: float, random_state: int) -> Dataset:
    """Split ``table``, fit the preprocessing on its training part and return the :class:`Dataset`."""
    test_size = check_test_size(test_size)
    y = check_1d(table.y, "y").astype(np.int64)
    s = check_1d(table.s, "s", len(y)).astype(np.int64)
    train, test, note = _split(table, test_size, random_state)
    X_train, X_test, names = _preprocess(table, train, test)
    if table.X is None:
        X_train, X_test = check_features(X_train, "X_train"), check_features(X_test, "X_test")
    description = f"{table.description} Split: {note}; {len(train):,} train / {len(test):,} test rows"
    description += "." if table.X is not None else "; preprocessing fitted on the training part only."
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
    )
