"""Pareto fronts of a sweep's error–violation trade-off, with their seed spread.

A sweep trains each hyper-parameter point (a λ, a clipping bound, ...) once per seed. :func:`frontier`
averages the seeds of each point and, per group of points (by default one data set, preset, notion,
method and ε), returns

- the Pareto front: the points no other point of the group beats in both error and violation
  (:func:`~dpfair.fairness.tradeoff.pareto_front`; lower is better in both), with the seeds' standard
  deviation, minimum and maximum of each;
- the lowest violation at error ≤ base + slack: the point of least mean violation among those whose
  mean error is within ``slack`` of the non-private reference (DP-FERMI's "fairness violation at a fixed
  accuracy level", Lowy et al. 2023, Sec. 4).

Privacy: everything here reads test scores of models that were all released (stored) and are all counted
in the store's privacy totals. Choosing one of them *by* these scores is a further use of the data that
no ledger counts, so a point picked here shows what a method can reach, not a model selected with
privacy: private selection is the model-selection issue's (:mod:`dpfair.model_selection`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from numbers import Real
from typing import NamedTuple

import numpy as np
import pandas as pd

from dpfair.fairness.tradeoff import pareto_front

#: The default groups of :func:`frontier`: one curve per data set, preset, notion, method and ε.
DEFAULT_BY = ("dataset", "preset", "notion", "method", "epsilon")

#: Columns that identify a model's configuration in a frame without a ``config`` column (seeds aside).
_POINT_COLUMNS = ("dataset", "preset", "sensitive", "options", "method", "notion", "epsilon", "delta", "params")

#: Entries of a stored ``config`` that differ between the seeds of one point (the model's key hashes the seed).
_PER_SEED = ("seed", "key")

#: The non-private reference method whose mean error is the default base.
BASE_METHOD = "erm"


class Frontier(NamedTuple):
    """What :func:`frontier` returns: three DataFrames.

    ``points``: every hyper-parameter point, averaged over its seeds, with ``pareto`` marking the front;
    ``front``: the Pareto-optimal points alone, by group and error;
    ``best``: per group and slack, the lowest violation at error ≤ base + slack.
    """

    points: pd.DataFrame
    front: pd.DataFrame
    best: pd.DataFrame


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def point_ids(frame: pd.DataFrame) -> pd.Series:
    """One string per row naming its hyper-parameter point: the configuration without the seed.

    From the ``config`` column of a :meth:`~dpfair.experiments.store.ResultsStore.frame`, else from the
    configuration columns the frame has (data set, preset, sensitive, options, method, notion, ε, δ,
    params). Rows that differ only in their seed share an id.
    """
    if "config" in frame.columns:
        return frame["config"].map(lambda c: _canonical({k: v for k, v in c.items() if k not in _PER_SEED}))
    columns = [c for c in _POINT_COLUMNS if c in frame.columns]
    return frame[columns].apply(
        lambda row: _canonical({c: (None if _missing(v) else v) for c, v in row.items()}), axis=1)


def _names(value, arg: str) -> list[str]:
    names = [value] if isinstance(value, str) else list(value)
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{arg} must be a column name or a list of column names, got {value!r}")
    return names


def _slacks(slack) -> list[float]:
    values = [slack] if isinstance(slack, Real) else list(slack) if isinstance(slack, Iterable) else [slack]
    if not values or not all(isinstance(s, Real) and not isinstance(s, bool) and math.isfinite(s) and s >= 0
                             for s in values):
        raise ValueError(f"slack must be a non-negative number or a list of them (e.g. (0.01, 0.03)), got {slack!r}")
    return [float(s) for s in values]


def reference_errors(frame: pd.DataFrame, x: str = "error") -> dict:
    """The mean ``x`` of the ``erm`` rows of ``frame`` per ``(data set, preset)`` (preset ``None`` if unset)."""
    if "method" not in frame.columns or "dataset" not in frame.columns:
        raise ValueError("the non-private reference is the mean error of the 'erm' rows of each data set, but the "
                         "frame has no 'method' or 'dataset' column; pass base as a number")
    rows = frame[frame["method"] == BASE_METHOD]
    values = pd.to_numeric(rows[x], errors="coerce")
    presets = rows["preset"] if "preset" in rows.columns else pd.Series(None, index=rows.index, dtype=object)
    table: dict = {}
    for d, p, v in zip(rows["dataset"], presets, values):
        if math.isfinite(v):
            table.setdefault((d, None if _missing(p) else p), []).append(v)
    return {k: float(np.mean(v)) for k, v in table.items()}


def _base_lookup(frame: pd.DataFrame, x: str, base):
    """A function of (data set, preset) giving the base ``x``, per ``base`` (see :func:`frontier`)."""
    if base is None:
        means = reference_errors(frame, x)
        return lambda dataset, preset: means.get((dataset, preset), math.nan)
    if isinstance(base, Real) and not isinstance(base, bool):
        if not math.isfinite(base):
            raise ValueError(f"base must be a finite number, got {base!r}")
        return lambda dataset, preset: float(base)
    if isinstance(base, Mapping):
        for key, value in base.items():
            if not (isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)):
                raise ValueError(f"base[{key!r}] must be a finite number, got {value!r}")

        def lookup(dataset, preset):
            for key in ((dataset, preset), dataset):
                if key in base:
                    return float(base[key])
            raise ValueError(f"base has no entry for data set {dataset!r} (preset {preset!r}); add "
                             f"{dataset!r} or ({dataset!r}, {preset!r}) to it")
        return lookup
    raise ValueError(f"base must be None (the mean error of the '{BASE_METHOD}' rows of each data set and preset), "
                     f"a number, or a mapping from data set (or (data set, preset)) to a number; got {base!r}")


def frontier(frame: pd.DataFrame, *, by=DEFAULT_BY, x: str = "error", y: str = "violation", slack=(0.01, 0.03),
             base=None) -> Frontier:
    """Pareto fronts of ``y`` against ``x`` per group ``by``, and the lowest ``y`` at ``x`` ≤ base + slack.

    ``frame``: one row per model, e.g. :meth:`ResultsStore.frame() <dpfair.experiments.store.ResultsStore.frame>`
    (or any DataFrame with the ``by``, ``x`` and ``y`` columns). Rows whose configuration differs only in
    the seed (:func:`point_ids`) form one point, drawn at the mean of its seeds; rows without a finite
    ``x`` and ``y`` are left out (e.g. ``erm``, which targets no notion, has no ``violation``: pass
    ``y="fairness.demographic_parity"`` to place it).

    Returns a :class:`Frontier` of three DataFrames, each with the ``by`` columns, ``point`` (the id),
    ``params`` (where the frame has them), ``x`` and ``y`` (the seeds' means) and their spread over the
    seeds ``<x>_std`` (``ddof=1``; NaN for one seed), ``<x>_min``, ``<x>_max`` (same for ``y``),
    ``n_seeds`` and ``seeds``:

    - ``points``: every point, ``pareto`` marking the front of its group, and ``base`` (that of its data set);
    - ``front``: the Pareto-optimal points (:func:`~dpfair.fairness.tradeoff.pareto_front`), by group
      and ``x``;
    - ``best``: one row per group and slack s: ``slack``, ``base``, ``threshold`` (base + s), ``feasible``
      and the point of least mean ``y`` among those with mean ``x`` ≤ threshold (NaN where none is).

    ``base``: None (default) is the mean ``x`` of the ``erm`` rows of the same data set and preset (NaN,
    hence nothing feasible, where there are none); a number is one base for all; a mapping gives one per
    data set name or ``(data set, preset)`` tuple.

    Choosing a model by these test scores is not private: all the models were released (and are counted
    in the store's privacy totals), but the choice among them reads their scores without accounting, so
    use it to compare methods, not to publish the chosen model as ε-DP (private selection is the
    model-selection issue's).
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame (e.g. ResultsStore(path).frame()), got {type(frame).__name__}")
    by = _names(by, "by")
    x, y = _names(x, "x"), _names(y, "y")
    if len(x) != 1 or len(y) != 1:
        raise ValueError("x and y must each name one column")
    x, y = x[0], y[0]
    missing = [c for c in dict.fromkeys([*by, x, y]) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame has no column {', '.join(map(repr, missing))}; its columns: "
                         f"{', '.join(map(str, frame.columns))}")
    slacks = _slacks(slack)
    base_of = _base_lookup(frame, x, base)

    data = pd.DataFrame({c: frame[c] for c in by})
    data["_x"] = pd.to_numeric(frame[x], errors="coerce")
    data["_y"] = pd.to_numeric(frame[y], errors="coerce")
    data["point"] = point_ids(frame) if len(frame) else pd.Series(dtype=object)
    datasets = frame["dataset"] if "dataset" in frame.columns else pd.Series(None, index=frame.index)
    presets = frame["preset"] if "preset" in frame.columns else pd.Series(None, index=frame.index)
    data["base"] = [base_of(d, None if _missing(p) else p) for d, p in zip(datasets, presets)]
    data["_seed"] = frame["seed"] if "seed" in frame.columns else np.arange(len(frame))
    if "params" in frame.columns:
        data["params"] = frame["params"]
    data = data[np.isfinite(data["_x"]) & np.isfinite(data["_y"])]

    points = _average(data, by, x, y)
    front = points[points["pareto"].astype(bool)].reset_index(drop=True)  # (an empty object mask selects columns)
    best = _best(points, by, x, y, slacks)
    return Frontier(points, front, best)


def _average(data: pd.DataFrame, by: list[str], x: str, y: str) -> pd.DataFrame:
    """One row per (group, point): the seeds' mean, std, min and max of x and y, and the Pareto flag."""
    stats = [x, f"{x}_std", f"{x}_min", f"{x}_max", y, f"{y}_std", f"{y}_min", f"{y}_max"]
    columns = [*by, "point", *(["params"] if "params" in data.columns else []), *stats, "n_seeds", "seeds",
               "base", "pareto"]
    if data.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for key, g in data.groupby([*by, "point"], dropna=False, sort=False):
        row = dict(zip([*by, "point"], key))
        if "params" in g.columns:
            row["params"] = g["params"].iloc[0]
        for name, v in ((x, g["_x"]), (y, g["_y"])):
            row.update({name: v.mean(), f"{name}_std": v.std(ddof=1), f"{name}_min": v.min(), f"{name}_max": v.max()})
        row.update(n_seeds=len(g), seeds=sorted(g["_seed"].tolist()), base=g["base"].iloc[0], pareto=False)
        rows.append(row)
    points = pd.DataFrame(rows, columns=columns)
    for _, g in points.groupby(by, dropna=False, sort=False):
        on_front = g.index[pareto_front(g[x], g[y])]
        points.loc[on_front, "pareto"] = True
    return _sorted(points, by, x)


def _sorted(frame: pd.DataFrame, by: list[str], x: str) -> pd.DataFrame:
    """Rows by group (in order of appearance, NaN keys kept) and then by ``x``."""
    order = frame.groupby(by, dropna=False, sort=False).ngroup()
    return frame.assign(_g=order).sort_values(["_g", x], kind="stable").drop(columns="_g").reset_index(drop=True)


def _best(points: pd.DataFrame, by: list[str], x: str, y: str, slacks: list[float]) -> pd.DataFrame:
    """Per group and slack: the point of least mean y among those with mean x ≤ base + slack."""
    point_columns = [c for c in points.columns if c not in (*by, "base", "pareto")]
    columns = [*by, "slack", "base", "threshold", "feasible", *point_columns]
    rows = []
    for key, g in points.groupby(by, dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        base = g["base"].iloc[0] if g["base"].nunique(dropna=False) == 1 else math.nan
        for s in slacks:
            feasible = g[g[x] <= g["base"] + s]
            row = {**dict(zip(by, key)), "slack": s, "base": base, "threshold": base + s,
                   "feasible": not feasible.empty}
            if not feasible.empty:
                chosen = feasible.loc[feasible[y].idxmin()]
                row.update({c: chosen[c] for c in point_columns})
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)
