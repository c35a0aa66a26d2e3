"""A fast synthetic data set with controllable group imbalance, label bias and feature bias."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfair.datasets.base import Column, Dataset, Schema, Table, finish
from dpfair.utils.validation import check_positive


def make_synthetic(n_samples: int = 2000, n_features: int = 10, n_groups: int = 2, n_classes: int = 2,
                   group_proportions=None, label_bias: float = 0.2, feature_bias: float = 0.5,
                   class_sep: float = 1.0, random_state: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw ``(X, y, s)``: float64 features ``(n_samples, n_features)``, int64 labels and int64 groups.

    * Groups: ``s ~ Categorical(group_proportions)`` (default uniform); e.g. ``[0.8, 0.2]`` makes group 1 a
      minority.
    * Label bias: ``P(y = c | s = r) = (1 - label_bias) / n_classes + label_bias · [c == r mod n_classes]``, so
      ``label_bias = 0`` gives the same base rates in every group and ``1`` makes the label a function of the
      group.  With two groups and two classes ``P(y=1|s=1) - P(y=1|s=0) = label_bias``.
    * Feature bias: ``X = class_sep · μ_y + feature_bias · ν_s + N(0, I)``, where the class means ``μ_c`` and
      group shifts ``ν_r`` are random unit vectors, so groups differ in their feature distribution even at equal
      label.
    """
    n_samples = check_positive(n_samples, "n_samples", integer=True)
    n_features = check_positive(n_features, "n_features", integer=True)
    n_groups = check_positive(n_groups, "n_groups", integer=True)
    n_classes = check_positive(n_classes, "n_classes", integer=True)
    if n_groups < 2 or n_classes < 2:
        raise ValueError(f"n_groups and n_classes must be at least 2, got {n_groups} and {n_classes}")
    check_positive(feature_bias, "feature_bias", allow_zero=True)
    check_positive(class_sep, "class_sep", allow_zero=True)
    if isinstance(label_bias, bool) or not isinstance(label_bias, (int, float)) or not 0.0 <= label_bias <= 1.0:
        raise ValueError(f"label_bias must be a number in [0, 1], got {label_bias!r}")
    if group_proportions is None:
        proportions = np.full(n_groups, 1.0 / n_groups)
    else:
        proportions = np.asarray(group_proportions, dtype=np.float64)
        if proportions.shape != (n_groups,) or np.any(proportions < 0) or not np.isclose(proportions.sum(), 1.0):
            raise ValueError(
                f"group_proportions must be {n_groups} non-negative numbers summing to 1, got {group_proportions!r}"
            )
    rng = np.random.default_rng(random_state)
    s = rng.choice(n_groups, size=n_samples, p=proportions)
    label_probs = np.full((n_groups, n_classes), (1.0 - label_bias) / n_classes)
    label_probs[np.arange(n_groups), np.arange(n_groups) % n_classes] += label_bias
    y = (rng.random(n_samples)[:, None] > np.cumsum(label_probs[s], axis=1)).sum(axis=1)
    y = np.minimum(y, n_classes - 1)

    def unit(k: int) -> np.ndarray:
        v = rng.standard_normal((k, n_features))
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    class_means, group_shifts = unit(n_classes), unit(n_groups)
    X = class_sep * class_means[y] + feature_bias * group_shifts[s] + rng.standard_normal((n_samples, n_features))
    return X, y.astype(np.int64), s.astype(np.int64)


def load_synthetic(*, test_size: float = 0.25, random_state: int = 0, n_samples: int = 2000, n_features: int = 10,
                   n_groups: int = 2, n_classes: int = 2, group_proportions=None, label_bias: float = 0.2,
                   feature_bias: float = 0.5, class_sep: float = 1.0) -> Dataset:
    """:func:`make_synthetic` split like the real data sets (``random_state`` seeds both).

    Its public schema comes from the generating process, not from the rows: each feature is
    ``class_sep·μ + feature_bias·ν + N(0, 1)`` with unit vectors μ, ν, so it is used as is (center 0,
    scale 1), clipped to ±(8 + class_sep + feature_bias), beyond which no draw falls in practice.
    """
    X, y, s = make_synthetic(n_samples, n_features, n_groups, n_classes, group_proportions, label_bias,
                             feature_bias, class_sep, random_state)
    names = [f"x{j}" for j in range(n_features)]
    bound = 8.0 + class_sep + feature_bias
    table = Table(
        name="synthetic", y=y, s=s, label_names=[str(c) for c in range(n_classes)],
        group_names=[f"group {r}" for r in range(n_groups)], sensitive="group",
        description=(
            f"Synthetic data from make_synthetic ({n_samples:,} rows, {n_features} Gaussian features, {n_groups} "
            f"groups with proportions {group_proportions or 'uniform'}, {n_classes} classes, label_bias "
            f"{label_bias}, feature_bias {feature_bias}, class_sep {class_sep}, seed {random_state}). Features "
            "as generated (public schema: center 0, scale 1)."
        ),
        licence="generated data (no licence needed)", n_dropped=0,
        frame=pd.DataFrame(X, columns=names),
        schema=Schema(tuple(Column.numeric(c, -bound, bound, 0.0, 1.0) for c in names),
                      "the generating process of make_synthetic (features are N(0, 1) plus shifts of norm "
                      "class_sep and feature_bias)"),
    )
    return finish(table, test_size, random_state)
