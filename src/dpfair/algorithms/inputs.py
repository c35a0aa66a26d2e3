"""What a dpfair fit checks and encodes before its method runs (:class:`~dpfair.algorithms.base.FairEstimator`'s
first step, :meth:`~dpfair.algorithms.base.FairEstimator.begin_fit`).

- the fit's device and its public generators (:func:`resolve_device`, :func:`make_generators`);
- the public list of a categorical input, classes or groups (:func:`public_categories`: inferring it from private
  values warns), and row weights (:func:`check_sample_weight`);
- the columns of a DataFrame named as encoding the sensitive attribute (:func:`named_sensitive_columns`: names
  only, never values);
- :class:`FitInputs`, the estimator's own checks of ``fit``'s arguments (finite features, aligned lengths, labels
  and groups encoded against their public lists, a sensitive column named by ``sensitive_features``) and of the
  features that encode s (:meth:`FitInputs.check_sensitive_columns`). :class:`~dpfair.algorithms.base.FairEstimator`
  inherits it; the class attributes its methods read (``_private``, ``_min_per_class``, ...) are the estimator's.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import pandas as pd
import torch

from dpfair.exceptions import PrivacyLeakWarning
from dpfair.privacy import PrivacyUnit, check_public_features
from dpfair.utils.validation import (CheckedFeatures, check_1d, check_feature_scale, check_features, check_min_count,
                                     encode_categories)


def resolve_device(device) -> torch.device:
    """``"auto"`` → CUDA if available else CPU; anything else is passed to ``torch.device``."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} asked for CUDA but none is available; use device='cpu'")
    return dev


def make_generators(random_state, device: torch.device) -> tuple[np.random.Generator, torch.Generator, int]:
    """PUBLIC numpy and torch generators seeded from ``random_state`` (an int, or None for a fresh seed).

    These seed initialisation, public minibatch orders and prediction coins: nothing a
    privacy guarantee rests on (that is :class:`~dpfair.privacy.SecretRandom`'s).
    """
    if random_state is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0])
    elif isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        seed = int(random_state)
    else:
        raise ValueError(f"random_state must be an int or None, got {random_state!r}")
    ss = np.random.SeedSequence(seed)
    np_seed, torch_seed = ss.spawn(2)
    np_rng = np.random.default_rng(np_seed)
    torch_rng = torch.Generator(device=device)
    torch_rng.manual_seed(int(torch_seed.generate_state(1, dtype=np.uint64)[0] >> 1))
    return np_rng, torch_rng, seed


def public_categories(declared, values, name: str, private: bool, fix: str, stacklevel: int = 5):
    """The public list of a categorical input: ``declared`` (an int k → ``0..k-1``, or the values), else inferred.

    Inferring the list from ``values`` when they are private warns: which values
    occur is itself a fact about the private data (a group of one person
    disappears when that person's value changes). ``stacklevel``: the frames from here to
    the user's call of ``fit``, so that the warning names the user's line.
    """
    if declared is not None:
        if isinstance(declared, numbers.Integral) and not isinstance(declared, bool):
            if declared < 2:
                raise ValueError(f"{name} must list at least two values (or give their number k >= 2), "
                                 f"got {declared!r}")
            return np.arange(int(declared))
        out = np.asarray(list(declared))
        if out.ndim != 1 or len(out) < 2 or len(np.unique(out)) != len(out):
            raise ValueError(f"{name} must list at least two distinct values (or give their number k), "
                             f"got {declared!r}")
        return out
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        return np.asarray(values.cat.categories)
    if isinstance(values, pd.Categorical):
        return np.asarray(values.categories)
    if private:
        warnings.warn(f"the list of {name} was inferred from the private data; which values occur is private "
                      f"(ε = ∞ for a value held by one person). Pass {fix} to keep the guarantee",
                      PrivacyLeakWarning, stacklevel=stacklevel)
    data, what = ("y", "class") if name == "classes" else ("sensitive_features", "group")
    found = np.unique(check_1d(values, data))
    if len(found) < 2:
        raise ValueError(f"{data} has a single {what}: found 1 {what} where fairness and classification need at "
                         f"least two (if others exist but are absent from these rows, pass {fix})")
    return found


def check_sample_weight(weight, n: int) -> np.ndarray:
    """``fit``'s ``sample_weight``: one finite weight ≥ 0 per row, not all zero, as float64."""
    w = check_1d(weight, "sample_weight", n)
    try:
        w = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("sample_weight must hold numbers (one weight >= 0 per row)") from None
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("sample_weight must be finite and >= 0 (one weight per row of X); give the rows you mean "
                         "to ignore weight 0")
    if not np.any(w > 0):
        raise ValueError("sample_weight is zero for every row, so nothing would be fitted: give some rows a "
                         "weight > 0")
    return w


def named_sensitive_columns(columns, sensitive, groups=()) -> list[int]:
    """The positions in ``columns`` (a DataFrame's column names) of those named as encoding the attribute named
    ``sensitive`` (a Series' name): the column itself (``fit(X, y, sensitive_features=X["sex"])``) and its
    one-hot columns, ``sex=<value>`` (dpfair's feature names) or ``sex_<group>`` (``pandas.get_dummies``'s, for a
    group of ``groups``, the public group list).

    Names only, never values: whether some column equals s is a fact about s, and a refusal that depended on it
    would itself be a release. ``[]`` when ``sensitive`` is ``None`` (an unnamed array says nothing).
    """
    if sensitive is None or columns is None:
        return []
    name = str(sensitive)
    one_hot = {f"{name}_{g}" for g in groups}
    return [j for j, c in enumerate(map(str, columns)) if c == name or c.startswith(f"{name}=") or c in one_hot]


class FitInputs:
    """The checks of ``fit``'s arguments that :class:`~dpfair.algorithms.base.FairEstimator` runs in
    :meth:`~dpfair.algorithms.base.FairEstimator.begin_fit`, and of the features that encode s.

    A mixin of :class:`~dpfair.algorithms.base.FairEstimator`: its methods read the estimator's class attributes and
    hyper-parameters (``_private``, ``_requires_sensitive``, ``groups``, ``classes``, ``privacy_unit_``, ...).
    """

    #: why ``fit`` refuses ``sample_weight`` (``None``: the method weights its loss, reading ``ctx.sample_weight``)
    _sample_weight_refusal: str | None = (
        "a row of weight w moves what the method releases w times as far as an unweighted row, a sensitivity "
        "its privacy accounting does not cover; fit without sample_weight")

    def _check_fit_params(self, fit_params: dict):
        """``fit``'s keyword arguments beyond s and ``callback``: ``sample_weight`` where the method takes it
        (returned; ``None`` when not given)."""
        unknown = sorted(set(fit_params) - {"sample_weight"})
        if unknown:
            raise TypeError(f"{type(self).__name__}.fit() got an unexpected keyword argument {unknown[0]!r}")
        weight = fit_params.get("sample_weight")
        if weight is not None and self._sample_weight_refusal is not None:
            raise ValueError(f"{type(self).__name__} does not take sample_weight: {self._sample_weight_refusal}")
        return weight

    def _sensitive_column(self, X, sensitive_features):
        """``(X, s)`` with ``sensitive_features`` naming a column of the DataFrame ``X``: that column taken out of
        X as s (``sensitive_column_`` remembers its name, a public fact like X's column names); else unchanged."""
        if not isinstance(sensitive_features, str):
            return X, sensitive_features
        name = sensitive_features
        if not isinstance(X, pd.DataFrame):
            raise ValueError(f"sensitive_features={name!r} names a column, but X is a {type(X).__name__}, which has "
                             "no named columns: pass X as a pandas DataFrame holding that column, or pass the "
                             "groups themselves (one value per row)")
        if name not in X.columns:
            raise ValueError(f"sensitive_features={name!r} is not a column of X (it has {list(map(str, X.columns))[:8]}"
                             f"{' …' if X.shape[1] > 8 else ''}); name one of X's columns, or pass the groups "
                             "themselves (one value per row)")
        self.sensitive_column_ = name
        return X.drop(columns=[name]), X[name]

    @property
    def _labels_private(self) -> bool:
        return self._private and self.privacy_unit_ is PrivacyUnit.RECORD

    def _check_features_and_labels(self, X, y, checked: CheckedFeatures | None = None):
        """Finite features and labels encoded against the public class list ``classes_`` (``checked``: the
        checks already made on these inputs by a caller fitting many models on them, :class:`CheckedFeatures`).

        A DataFrame with string column names sets ``feature_names_in_`` (as scikit-learn does): prediction
        then matches columns by name, so a reordered frame cannot silently change the predictions.
        """
        if isinstance(X, pd.DataFrame) and len(X.columns) and all(isinstance(c, str) for c in X.columns):
            self.feature_names_in_ = np.asarray(X.columns, dtype=object)
        X = check_features(X, "X") if checked is None else checked.features(X, "X")
        if self._float32_training:
            check_feature_scale(X, "X")
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None: "
                             "call fit(X, y) with one label per row")
        if not isinstance(getattr(y, "dtype", None), pd.CategoricalDtype):  # a categorical keeps its categories
            y = check_1d(y, "y", X.shape[0])  # once: a column vector warns here
        values = np.asarray(y)
        if values.dtype.kind == "f" and getattr(self, "classes", None) is None and np.any(values != np.round(values)):
            raise ValueError("y holds non-integer numbers (a continuous target?); dpfair estimators classify: "
                             "binarise or bin y first (e.g. y > median), or pass classes= if these are labels")
        classes = public_categories(getattr(self, "classes", None), y, "classes", self._labels_private,
                                    "classes=[...] (the data set's label values)", stacklevel=6)
        y_codes, self.classes_ = encode_categories(y, "y", X.shape[0], classes=classes)
        if self._binary_only and len(self.classes_) != 2:
            raise ValueError(f"y must be binary: {type(self).__name__} needs binary labels, got {len(self.classes_)} "
                             "classes (Only binary classification is supported.); binarise y (one class against "
                             "the rest) before fitting")
        if not self._labels_private:
            check_min_count(y_codes, len(self.classes_), "y", self._min_per_class, what="class")
        return X, y_codes

    # ---- features that encode s -----------------------------------------
    def check_sensitive_columns(self, columns, feature_names, sensitive: str) -> list[int]:
        """Apply :func:`dpfair.privacy.check_public_features` to this estimator: ``columns`` (indices into
        ``feature_names``) are the features that a public schema says encode the attribute ``sensitive``.

        Asks the estimator what it does: a private one under ``privacy_unit="sensitive"`` treats X as public and
        refuses them (``ValueError``) unless its accounting covers such columns (a ``sensitive_feature_columns``
        hyper-parameter: output perturbation); under ``"record"`` or without privacy nothing is refused. Returns
        the columns the estimator must account for itself (``[]`` unless it takes ``sensitive_feature_columns``).
        """
        columns = sorted({int(j) for j in columns})
        params = self.get_params(deep=False)
        accounts = "sensitive_feature_columns" in params
        unit = getattr(self, "privacy_unit", PrivacyUnit.RECORD) if self._private else None
        check_public_features(unit, [feature_names[j] for j in columns], sensitive, accounted=accounts)
        return columns if accounts else []

    def declare_sensitive_columns(self, columns, feature_names, sensitive: str) -> FitInputs:
        """:meth:`check_sensitive_columns`, then the columns this estimator accounts for itself added to its
        ``sensitive_feature_columns``; returns ``self``. For an estimator built for a data set whose public schema
        names them (the CLI, the sweeps, a search given a DataFrame); ``fit`` never changes a hyper-parameter."""
        handed = self.check_sensitive_columns(columns, feature_names, sensitive)
        if handed:
            given = list(self.get_params()["sensitive_feature_columns"] or [])  # fit checks them
            self.set_params(sensitive_feature_columns=given + [j for j in handed if j not in given])
        return self

    def check_sensitive_frame(self, X, sensitive_features, groups=()) -> list[int]:
        """:meth:`check_sensitive_columns` for the columns of a DataFrame ``X`` named after the sensitive Series
        (:func:`named_sensitive_columns`; ``groups``: the public group list): refused where X is public, else
        returned for the method's own accounting. ``[]`` for an array or an unnamed ``sensitive_features``."""
        names = [str(c) for c in X.columns] if isinstance(X, pd.DataFrame) else None
        sensitive = getattr(sensitive_features, "name", None)  # a Series' name: public, like X's column names
        named = named_sensitive_columns(names, sensitive, [str(g) for g in groups])
        return self.check_sensitive_columns(named, names, sensitive) if named else []

    def _check_fit_inputs(self, X, y, s, checked: CheckedFeatures | None = None):
        X, y_codes = self._check_features_and_labels(X, y, checked)
        n = X.shape[0]
        if s is None:
            if self._requires_sensitive:
                raise ValueError(
                    f"{type(self).__name__} needs sensitive_features: call fit(X, y, sensitive_features=s)"
                )
            self.groups_ = None
            s_codes = None
        else:
            if not isinstance(getattr(s, "dtype", None), pd.CategoricalDtype):
                s = check_1d(s, "sensitive_features", n)
            groups = public_categories(getattr(self, "groups", None), s, "groups", self._private,
                                       "groups=k or groups=[...] (the data set's group values)")
            s_codes, self.groups_ = encode_categories(s, "sensitive_features", n, classes=groups)
            if not self._private:  # a non-private method may look at the counts of s
                check_min_count(s_codes, len(self.groups_), "sensitive_features", self._min_per_group,
                                what="group")
        self.n_features_in_ = X.shape[1]
        return X, y_codes, s_codes
