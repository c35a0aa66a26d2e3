"""Plots of dpfair results: trade-off curves, per-group bars, privacy spent over training.

Each function draws on ``ax`` (a matplotlib Axes; a new figure when left out)
and returns it, so plots compose and save without a display
(``ax.figure.savefig(path)``). matplotlib is imported here only: ``import
dpfair`` does not import it.

* :func:`tradeoff`: fairness violation against error (or any two columns) from
  benchmark rows or ``dpfair train`` result JSONs, one curve per privacy level;
* :func:`group_bars`: one metric per group from
  :func:`dpfair.fairness.group_metrics`, with its bootstrap intervals;
* :func:`group_accuracy`: the accuracy of each group for several models
  (rows of a sweep's results store), with their spread over seeds;
* :func:`privacy_spent`: ε spent against the number of releases of a fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from dpfair.fairness.group_table import DIFFERENCE, OVERALL, STATISTICS, bootstrap_mean_interval
from dpfair.fairness.tradeoff import pareto_front
from dpfair.privacy.accounting import PrivacyLedger
from dpfair.utils.validation import check_delta

SPREADS = ("std", "interval", None)


def _axes(ax):
    if ax is None:
        return plt.subplots()[1]
    if not hasattr(ax, "plot"):
        raise ValueError(f"ax must be a matplotlib Axes, got {ax!r}")
    return ax


def _frame(results) -> pd.DataFrame:
    """A DataFrame of results: as given, or a list of (nested) dicts flattened to dotted columns."""
    if isinstance(results, pd.DataFrame):
        frame = results
    else:
        rows = [results] if isinstance(results, Mapping) else list(results) if results is not None else []
        if not all(isinstance(r, Mapping) for r in rows):
            raise ValueError("results must be a DataFrame or a list of dicts (rows of a results CSV, "
                             "or result JSONs of `dpfair train`)")
        frame = pd.json_normalize(rows)
    if frame.empty:
        raise ValueError("results is empty; pass at least one result")
    return frame


def _column(frame: pd.DataFrame, name: str, arg: str) -> str:
    """``name`` itself, or the one column whose last dotted part it is (``lam`` → ``hyperparameters.lam``)."""
    if name in frame.columns:
        return name
    matches = [c for c in frame.columns if isinstance(c, str) and c.rsplit(".", 1)[-1] == name]
    if len(matches) == 1:
        return matches[0]
    found = f"; it matches {matches}, name one" if matches else ""
    raise ValueError(f"{arg}={name!r} is not a column of results{found}; columns: {', '.join(map(str, frame.columns))}")


def _numbers(frame: pd.DataFrame, column: str, arg: str) -> pd.Series:
    """A numeric column (entries that are not numbers are NaN, and their rows are not drawn)."""
    values = pd.to_numeric(frame[column], errors="coerce")
    if values.isna().all():
        raise ValueError(f"{arg} column {column!r} holds no numbers; pick a numeric column")
    return values


def _hue(frame: pd.DataFrame, column: str) -> pd.Series:
    """The curve of each row: numbers when the column holds numbers (a null ε is ∞), else names."""
    raw = frame[column]
    values = pd.to_numeric(raw, errors="coerce")
    if column.rsplit(".", 1)[-1] == "epsilon":
        return values.fillna(math.inf)
    return raw.astype(str) if values[raw.notna()].isna().any() else values


def _label(name: str, value) -> str:
    if isinstance(value, (int, float, np.number)):
        value = "∞" if np.isinf(value) else f"{value:g}"
    return f"{name.rsplit('.', 1)[-1]} = {value}"


def tradeoff(results, x: str = "test_error", y: str = "violation", hue: str | None = "epsilon", *, by=None,
             spread: str | None = "std", pareto: bool = False, confidence: float = 0.95, n_bootstrap: int = 1000,
             random_state=None, ax=None, legend: bool = True, **kwargs):
    """Trade-off curves: column ``y`` against column ``x``, one curve per value of ``hue``.

    ``results`` is a DataFrame (e.g. a sweep's ``models.csv`` from ``dpfair report --tables``, with
    ``x="error", y="violation", by="lam"``) or a list of dicts (e.g. result JSONs of ``dpfair train``,
    flattened: ``y="demographic_parity"`` finds ``fairness.demographic_parity``, ``by="lam"``
    finds ``hyperparameters.lam``; a null ε is ∞). A column is named in full or by its last
    dotted part.

    ``by`` names the column(s) that identify one point of a curve (e.g. ``"lam"``): the rows
    that share them (several seeds) are drawn at their mean, with error bars in x and y of
    ``spread``: ``"std"`` (± one standard deviation of the rows), ``"interval"`` (the
    ``confidence`` bootstrap interval of the mean, as :func:`dpfair.fairness.group_metrics`
    computes over runs) or ``None``. Without ``by`` every row is a point. Points are joined in
    order of ``by`` (else of ``x``). ``pareto=True`` joins only each curve's Pareto-optimal
    points (lower ``x`` and lower ``y`` are better; no other point of the curve beats them in
    both) and draws the others as unjoined faded markers. ``legend=False`` leaves the legend to the
    caller (who draws several calls on one axes). ``kwargs`` go to ``ax.errorbar`` (``marker="o"`` and
    ``capsize=2`` unless given).
    """
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {list(SPREADS)}, got {spread!r}")
    frame = _frame(results)
    xc, yc = _column(frame, x, "x"), _column(frame, y, "y")
    by_cols = [] if by is None else [_column(frame, b, "by") for b in ([by] if isinstance(by, str) else by)]
    data = pd.DataFrame({"x": _numbers(frame, xc, "x"), "y": _numbers(frame, yc, "y")})
    data["hue"] = 0 if hue is None else _hue(frame, _column(frame, hue, "hue"))
    for i, c in enumerate(by_cols):
        data[f"by{i}"] = frame[c]
    data = data[np.isfinite(data.x) & np.isfinite(data.y)]
    if data.empty:
        raise ValueError(f"no result has finite {xc!r} and {yc!r}; nothing to plot")
    ax = _axes(ax)
    keys = [f"by{i}" for i in range(len(by_cols))]
    for value, curve in data.groupby("hue", sort=True, dropna=False):
        if keys:
            grouped = curve.groupby(keys, sort=True, dropna=False)
            points = grouped[["x", "y"]].mean()
            xerr = yerr = None
            if spread == "std":
                std = grouped[["x", "y"]].std(ddof=1).fillna(0.0)
                xerr, yerr = std.x.to_numpy(), std.y.to_numpy()
            elif spread == "interval":
                bounds = [bootstrap_mean_interval(g[["x", "y"]].to_numpy(), confidence, n_bootstrap, random_state)
                          for _, g in grouped]
                lower, upper = np.array([b[1] for b in bounds]), np.array([b[2] for b in bounds])
                mean = points.to_numpy()
                xerr = np.stack([mean[:, 0] - lower[:, 0], upper[:, 0] - mean[:, 0]]).clip(0)
                yerr = np.stack([mean[:, 1] - lower[:, 1], upper[:, 1] - mean[:, 1]]).clip(0)
        else:
            points = curve[["x", "y"]].sort_values(["x", "y"])
            xerr = yerr = None
        px, py = points.x.to_numpy(), points.y.to_numpy()
        label = None if hue is None else _label(hue, value)
        joined = pareto_front(px, py) if pareto else np.arange(len(px))
        if xerr is not None:
            xerr, yerr = xerr[..., joined], yerr[..., joined]
        style = {"marker": "o", "capsize": 2, **kwargs}
        bars = ax.errorbar(px[joined], py[joined], xerr=xerr, yerr=yerr, label=label, **style)
        rest = np.setdiff1d(np.arange(len(px)), joined)
        if rest.size:
            ax.plot(px[rest], py[rest], marker="o", linestyle="none", alpha=0.35, color=bars.lines[0].get_color())
    ax.set_xlabel(xc.rsplit(".", 1)[-1].replace("_", " "))
    ax.set_ylabel(yc.rsplit(".", 1)[-1].replace("_", " "))
    if hue is not None and legend:
        ax.legend()
    return ax


def group_bars(table: pd.DataFrame, metric: str = "accuracy", *, overall: bool = True, ax=None, **kwargs):
    """Bars of ``metric`` per group from :func:`dpfair.fairness.group_metrics`, with its intervals.

    One bar per group at the table's ``value``, error bars from ``lower`` to ``upper``; the
    ``overall`` row as a dashed horizontal line (``overall=False`` leaves it out). The title
    says what the intervals are (bootstrap over runs or over test rows). ``kwargs`` go to
    ``ax.bar``.
    """
    if not isinstance(table, pd.DataFrame) or not isinstance(table.columns, pd.MultiIndex):
        raise ValueError("table must be a table of dpfair.fairness.group_metrics (columns (metric, statistic))")
    metrics = list(dict.fromkeys(table.columns.get_level_values(0)))
    if metric not in metrics:
        raise ValueError(f"metric={metric!r} is not in the table; its metrics: {', '.join(map(str, metrics))}")
    values = table[metric]
    if list(values.columns) != list(STATISTICS):
        raise ValueError(f"table[{metric!r}] must have columns {list(STATISTICS)}, as group_metrics returns")
    groups = values.drop(index=[OVERALL, DIFFERENCE], errors="ignore")
    v = groups["value"].to_numpy(dtype=float)
    err = np.stack([v - groups["lower"].to_numpy(dtype=float), groups["upper"].to_numpy(dtype=float) - v]).clip(0)
    ax = _axes(ax)
    ax.bar([str(g) for g in groups.index], v, yerr=err, capsize=4, label=metric.replace("_", " "), **kwargs)
    if overall and OVERALL in values.index:
        level = float(values.loc[OVERALL, "value"])
        ax.axhline(level, linestyle="--", color="grey", label=f"overall ({level:.3g})")
        ax.legend()
    ax.set_ylabel(metric.replace("_", " "))
    attrs = table.attrs
    if {"confidence", "interval", "n_runs"} <= set(attrs):
        over = f"{attrs['n_runs']} runs" if attrs["interval"] == "runs" else "test rows"
        ax.set_title(f"{metric.replace('_', ' ')} by group, {attrs['confidence']:.0%} bootstrap interval over {over}")
    return ax


def _accuracies(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """One column per group: from a column of ``{group: accuracy}`` dicts, or its flattened ``column.<group>``."""
    if column in frame.columns and frame[column].map(lambda v: isinstance(v, Mapping)).all():
        return pd.DataFrame(list(frame[column]), index=frame.index)
    prefix = f"{column}."
    flat = [c for c in frame.columns if isinstance(c, str) and c.startswith(prefix)]
    if not flat:
        raise ValueError(f"results have no {column!r} column of {{group: accuracy}} (as the results store's frame and "
                         "`dpfair train` result JSONs do)")
    return frame[flat].rename(columns=lambda c: c[len(prefix):])


def group_accuracy(results, label="method", *, column: str = "per_group_accuracy", ax=None, **kwargs):
    """Bars of each sensitive group's accuracy, one colour per model, with the spread over seeds.

    ``results``: rows with a ``per_group_accuracy`` column of ``{group: accuracy}`` (the output of
    :func:`dpfair.experiments.evaluate`, as :meth:`ResultsStore.frame()
    <dpfair.experiments.store.ResultsStore.frame>` holds it, or flattened to ``per_group_accuracy.<group>``
    columns), as a DataFrame or a list of dicts. ``label`` names the column(s) whose values make one
    model (a bar colour), e.g. ``["method", "lam"]``; the rows that share them (several seeds) are drawn at
    their mean with error bars of ± one standard deviation (``ddof=1``; none for a single row). Groups
    run along x. ``kwargs`` go to ``ax.bar``.
    """
    frame = _frame(results)
    columns = [_column(frame, name, "label") for name in ([label] if isinstance(label, str) else label)]
    accuracy = _accuracies(frame, column).apply(pd.to_numeric, errors="coerce")
    names = frame[columns].apply(lambda row: ", ".join(_text(v) for v in row), axis=1)
    grouped = accuracy.groupby(names, sort=False)
    mean, std = grouped.mean(), grouped.std(ddof=1)
    groups = [str(g) for g in accuracy.columns]
    ax = _axes(ax)
    width = 0.8 / len(mean)
    for i, name in enumerate(mean.index):
        spread = std.loc[name].to_numpy(dtype=float)
        ax.bar(np.arange(len(groups)) + (i - (len(mean) - 1) / 2) * width, mean.loc[name].to_numpy(dtype=float), width,
               yerr=None if np.isnan(spread).all() else np.nan_to_num(spread), capsize=2, label=name, **kwargs)
    ax.set_xticks(np.arange(len(groups)), groups)
    ax.set_ylabel("accuracy")
    ax.legend()
    return ax


def _text(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "none"
    if isinstance(value, (float, np.floating)):
        return "∞" if np.isinf(value) else f"{value:g}"
    return str(value)


def privacy_spent(estimator_or_ledger, delta: float | None = None, *, points: int = 20, accountant: str | None = None,
                  ax=None, **kwargs):
    """ε spent against the number of releases (training steps and other noisy releases) of a fit.

    Takes a fitted dpfair estimator (its ``privacy_ledger_``, at the δ and accountant of its
    ``privacy_spent_``) or a :class:`~dpfair.privacy.PrivacyLedger` (then ``delta`` is needed).
    Each point is the ε of the ledger's first r releases, composed on the accountant
    (:meth:`~dpfair.privacy.PrivacyLedger.epsilon_curve`, ``points`` accountings); the last is
    the ε the fit reports. A curve whose accountings take longer than
    :data:`~dpfair.privacy.accounting.CURVE_DELAY` seconds shows a progress bar on stderr
    (:mod:`dpfair.utils.progress`; ``dpfair.utils.progress.quiet()`` silences it). ``kwargs`` go to ``ax.plot``.
    """
    if isinstance(estimator_or_ledger, PrivacyLedger):
        ledger = estimator_or_ledger
        if delta is None:
            raise ValueError("delta is needed with a PrivacyLedger; pass the δ the fit reports (privacy_spent_[1])")
    else:
        ledger = getattr(estimator_or_ledger, "privacy_ledger_", None)
        if not isinstance(ledger, PrivacyLedger):
            if hasattr(estimator_or_ledger, "fit"):
                from sklearn.exceptions import NotFittedError  # sklearn loads only for this error

                raise NotFittedError(f"{type(estimator_or_ledger).__name__} is not fitted; call fit first")
            raise ValueError(f"estimator_or_ledger must be a fitted dpfair estimator or a PrivacyLedger, "
                             f"got {type(estimator_or_ledger).__name__}")
        if delta is None:
            spent, delta = estimator_or_ledger.privacy_spent_
            if math.isinf(spent):
                raise ValueError(f"{type(estimator_or_ledger).__name__} is not private (ε = ∞); "
                                 "there is no privacy curve to plot")
        accountant = accountant or getattr(estimator_or_ledger, "accountant", None)
    delta = check_delta(delta)
    releases, epsilons = ledger.epsilon_curve(delta, points, accountant or "pld")
    if math.isinf(epsilons[-1]):
        raise ValueError("the ledger holds a release without noise (ε = ∞); there is no privacy curve to plot")
    ax = _axes(ax)
    ax.plot(releases, epsilons, marker="o", **kwargs)
    ax.set_xlabel("releases (training steps and other noisy releases)")
    ax.set_ylabel(f"ε spent (δ = {delta:.2g})")
    ax.set_title(f"privacy spent: ε = {epsilons[-1]:.3g} after {releases[-1]} releases")
    return ax
