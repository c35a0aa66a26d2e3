"""Per-group metric tables with bootstrap intervals (fairlearn's ``MetricFrame``, one or several runs).

:func:`group_metrics` evaluates a classifier's predictions group by group, as
fairlearn's :class:`~fairlearn.metrics.MetricFrame` does (it computes the
values), and adds to every value a bootstrap interval:

* **several runs** (a list of prediction vectors, e.g. one fit per seed): the
  value is the mean over runs and the interval is a percentile bootstrap of
  that mean, resampling the runs. The question a table answers is "what does
  this method achieve", i.e. the expected metric over the training randomness
  (initialisation, minibatches, privacy noise); the mean over runs estimates
  it and its bootstrap interval narrows as ``1/√runs``. On one shared test set
  it leaves out the test rows' sampling error (the one-run interval below,
  often the wider of the two); runs with their own test sets include it. The
  percentile of the per-run values would describe something else, the spread
  of one run, which does not narrow with more runs (with 5 runs its 2.5 % and
  97.5 % points are the minimum and the maximum). With few runs (fewer than
  about 10) a bootstrap interval of a mean is too narrow (at 5 runs about 0.6×
  Student's t interval: it reads the runs' spread as known), so read it as
  indicative;
* **one run**: a percentile bootstrap over the test rows, stratified by group
  (each group keeps its size, so a small group is never resampled away and
  ``count`` is fixed). fairlearn's own ``MetricFrame(n_boot=...)`` resamples
  rows without stratification and rebuilds a frame per resample (its cost:
  docs/guide/benchmarks.md), so the resampling is done here, on the same
  metric functions.

Evaluating on test data is a use of that data that no privacy ledger counts
(see the guide's privacy model, "Not covered"): the guarantee printed by training covers the
training set only, and test rows are treated as public here.
"""

from __future__ import annotations

import functools
import numbers
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from dpfair.fairness._inputs import check_same_length, encode_groups, encode_label_pair, label_index
from dpfair.fairness.metrics import group_name_list
from dpfair.utils.validation import check_1d, check_positive

#: Row labels of the table besides the groups.
OVERALL, DIFFERENCE = "overall", "difference"

#: Columns of each metric in the table.
STATISTICS = ("value", "lower", "upper")


def _rate(hits: np.ndarray) -> float:
    """Mean of a boolean vector; NaN when empty (a rate of no rows is undefined)."""
    return float(hits.mean()) if hits.size else float("nan")


def accuracy(y_true, y_pred) -> float:
    """``P(ŷ = y)``."""
    return _rate(np.asarray(y_true) == np.asarray(y_pred))


def error(y_true, y_pred) -> float:
    """``P(ŷ ≠ y)``."""
    return _rate(np.asarray(y_true) != np.asarray(y_pred))


def count(y_true, y_pred) -> float:
    """The number of rows."""
    return float(len(y_true))


def selection_rate(y_true, y_pred, positive_label=1) -> float:
    """``P(ŷ = +)``."""
    return _rate(np.asarray(y_pred) == positive_label)


def true_positive_rate(y_true, y_pred, positive_label=1) -> float:
    """``P(ŷ = + | y = +)``; NaN without positive rows."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return _rate(p[t == positive_label] == positive_label)


def false_positive_rate(y_true, y_pred, positive_label=1) -> float:
    """``P(ŷ = + | y ≠ +)``; NaN without negative rows."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return _rate(p[t != positive_label] == positive_label)


def true_negative_rate(y_true, y_pred, positive_label=1) -> float:
    """``P(ŷ ≠ + | y ≠ +)``; NaN without negative rows."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return _rate(p[t != positive_label] != positive_label)


def false_negative_rate(y_true, y_pred, positive_label=1) -> float:
    """``P(ŷ ≠ + | y = +)``; NaN without positive rows."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return _rate(p[t == positive_label] != positive_label)


#: Named metrics: ``(function, uses positive_label)``; the same functions give the values and the resamples.
METRICS: dict[str, tuple[Callable, bool]] = {
    "accuracy": (accuracy, False),
    "error": (error, False),
    "selection_rate": (selection_rate, True),
    "true_positive_rate": (true_positive_rate, True),
    "false_positive_rate": (false_positive_rate, True),
    "true_negative_rate": (true_negative_rate, True),
    "false_negative_rate": (false_negative_rate, True),
    "count": (count, False),
}
ALIASES = {"tpr": "true_positive_rate", "fpr": "false_positive_rate", "tnr": "true_negative_rate",
           "fnr": "false_negative_rate"}
DEFAULT_METRICS = ("accuracy", "selection_rate", "true_positive_rate", "false_positive_rate", "count")


def _resolve_metrics(metrics, classes: np.ndarray, positive_label) -> dict[str, Callable]:
    """``{column name: f(y_true, y_pred) -> float}`` from names, callables, or a dict of either."""
    if isinstance(metrics, (str, bytes)) or callable(metrics):
        metrics = [metrics]
    items = list(metrics.items()) if isinstance(metrics, Mapping) else [(None, m) for m in metrics]
    if not items:
        raise ValueError("metrics is empty; pass metric names (e.g. 'accuracy') or callables f(y_true, y_pred)")
    resolved: dict[str, Callable] = {}
    for key, metric in items:
        if isinstance(metric, str):
            name = ALIASES.get(metric, metric)
            if name not in METRICS:
                raise ValueError(f"metrics has an unknown name {metric!r}; known: {', '.join(METRICS)} "
                                 f"(or {', '.join(ALIASES)}), or pass a callable f(y_true, y_pred)")
            func, positive = METRICS[name]
            if positive:
                label_index(classes, positive_label)
                func = functools.partial(func, positive_label=positive_label)
            column = name if key is None else key
        elif callable(metric):
            func = metric
            column = key if key is not None else getattr(metric, "__name__", None) or getattr(
                getattr(metric, "func", None), "__name__", None)
            if column is None:
                raise ValueError(f"metrics has a callable without a name ({metric!r}); pass a dict {{name: callable}}")
        else:
            raise ValueError(f"metrics must hold names or callables f(y_true, y_pred), got {metric!r}")
        if column in resolved:
            raise ValueError(f"metrics names {column!r} twice; give each metric its own name (a dict)")
        resolved[str(column)] = func
    return resolved


def _runs(a, name: str) -> list[np.ndarray]:
    """One vector, or several (a list of vectors, or a 2-D array with one run per row)."""
    if isinstance(a, (list, tuple)) and a and all(np.ndim(v) >= 1 for v in a):
        return [check_1d(v, f"{name}[{i}]") for i, v in enumerate(a)]
    arr = np.asarray(a)
    if arr.ndim == 2 and arr.shape[1] != 1:
        return [check_1d(row, f"{name}[{i}]") for i, row in enumerate(arr)]
    return [check_1d(a, name)]


def _per_run(a, name: str, n_runs: int) -> list[np.ndarray]:
    vectors = _runs(a, name)
    if len(vectors) == 1:
        return vectors * n_runs
    if len(vectors) != n_runs:
        raise ValueError(f"{name} has {len(vectors)} vectors but y_pred has {n_runs} runs; "
                         f"pass one {name} for every run, or one per run")
    return vectors


def _check_confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number in (0, 1), e.g. 0.95, got {confidence!r}")
    return float(confidence)


def _generator(random_state) -> np.random.Generator:
    if random_state is not None and not isinstance(random_state, (numbers.Integral, np.random.Generator)):
        raise ValueError(f"random_state must be None, an integer or a numpy Generator, got {random_state!r}")
    if isinstance(random_state, bool) or (isinstance(random_state, numbers.Integral) and random_state < 0):
        raise ValueError(f"random_state must be a non-negative integer, got {random_state!r}")
    return np.random.default_rng(random_state)


def _percentiles(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0, ignoring undefined (NaN) replicates."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells stay NaN
        lower, upper = np.nanquantile(replicates, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
    return lower, upper


def bootstrap_mean_interval(values, confidence: float = 0.95, n_bootstrap: int = 1000, random_state=None):
    """Mean over axis 0 of ``values`` (one entry per run) and its percentile bootstrap interval.

    Resamples the runs with replacement ``n_bootstrap`` times; NaN entries (undefined in a run)
    are left out of each mean. Returns ``(mean, lower, upper)``, each of the shape of ``values[0]``.
    """
    confidence = _check_confidence(confidence)
    n_bootstrap = check_positive(n_bootstrap, "n_bootstrap", integer=True)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 0 or values.shape[0] == 0:
        raise ValueError("values must hold at least one run (one entry along axis 0)")
    picks = _generator(random_state).integers(values.shape[0], size=(n_bootstrap, values.shape[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=0)
        replicates = np.nanmean(values[picks], axis=1)
    return (mean, *_percentiles(replicates, confidence))


def _spread(values: np.ndarray) -> np.ndarray:
    """Between-group difference (max − min over axis −2, skipping undefined groups)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(values, axis=-2) - np.nanmin(values, axis=-2)


def _metric_frame(funcs: dict, y_true, y_pred, s_codes, run, k: int, n_runs: int) -> np.ndarray:
    """Per run: values of every metric per group, overall and the difference, shape ``(runs, k + 2, metrics)``."""
    from fairlearn.metrics import MetricFrame  # importing fairlearn costs about a second; only here

    frame = MetricFrame(metrics=funcs, y_true=y_true, y_pred=y_pred,
                        sensitive_features=pd.Series(s_codes, name="group"),
                        control_features=pd.Series(run, name="run"))
    names = list(funcs)
    full = pd.MultiIndex.from_product([range(n_runs), range(k)], names=["run", "group"])
    try:
        by_group = frame.by_group.reindex(full)[names].to_numpy(dtype=np.float64).reshape(n_runs, k, -1)
        overall = frame.overall.reindex(range(n_runs))[names].to_numpy(dtype=np.float64)
        difference = frame.difference(method="between_groups").reindex(range(n_runs))[names]
        difference = difference.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("every metric must return one number per group; "
                         f"check the callables among {names}") from None
    return np.concatenate([by_group, overall[:, None], difference[:, None]], axis=1)


def _row_replicates(funcs: list, t: np.ndarray, p: np.ndarray, s_codes: np.ndarray, k: int, n_bootstrap: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Stratified bootstrap of one run's test rows: ``(n_bootstrap, k + 2, metrics)``, as :func:`_metric_frame`."""
    rows = [np.flatnonzero(s_codes == g) for g in range(k)]
    out = np.empty((n_bootstrap, k + 2, len(funcs)))
    for b in range(n_bootstrap):
        picks = [r[rng.integers(r.size, size=r.size)] for r in rows]
        for g, idx in enumerate([*picks, np.concatenate(picks)]):
            out[b, g] = [f(t[idx], p[idx]) for f in funcs]
    out[:, k + 1] = _spread(out[:, :k])
    return out


def group_metrics(y_true, y_pred, s, metrics=DEFAULT_METRICS, *, group_names=None, positive_label=1,
                  confidence: float = 0.95, n_bootstrap: int = 1000, random_state=None) -> pd.DataFrame:
    """Metrics per group, overall and their between-group difference, each with a bootstrap interval.

    Parameters
    ----------
    y_true, s : array-like
        True labels and sensitive groups of the test rows; or, with several runs evaluated on
        different test sets (``dpfair train --seed`` changes the split), one vector per run.
    y_pred : array-like, or a list of them
        Predictions of one run, or of several runs (a list of vectors, or a 2-D array with one
        run per row), e.g. one fit per seed.
    metrics : names, callables, or a dict ``{column: name or callable}``
        Names: ``accuracy``, ``error``, ``selection_rate``, ``true_positive_rate`` (``tpr``),
        ``false_positive_rate`` (``fpr``), ``true_negative_rate`` (``tnr``),
        ``false_negative_rate`` (``fnr``), ``count``; rates are of ``positive_label`` against every
        other label, and NaN for a group without the rows they condition on. A callable
        ``f(y_true, y_pred) -> float`` gets the rows of one group (e.g. scikit-learn's metrics).
    group_names : sequence in sorted group order, or dict ``{group: name}``, optional
    positive_label : the label that counts as positive (must be one of the labels)
    confidence : coverage of the intervals
    n_bootstrap : resamples per interval
    random_state : seeds the resampling (evaluation randomness, not the privacy noise)

    Returns
    -------
    pandas.DataFrame
        One row per group, then ``"overall"`` and ``"difference"`` (max − min over the groups);
        columns ``(metric, statistic)`` with statistics ``value``, ``lower``, ``upper``. With
        several runs the value is the mean over runs (the difference row: the mean of each run's
        difference, the gap one model shows) and the interval bootstraps the runs; with one run
        it bootstraps the test rows within each group (see the module docstring for why).
        ``table.attrs`` records ``interval`` (``"runs"`` or ``"rows"``), ``n_runs``,
        ``confidence`` and ``n_bootstrap``.

    The per-run values are fairlearn ``MetricFrame`` values (``by_group``, ``overall``,
    ``difference()``). Max − min is biased upwards under resampling when the groups are
    close, so the difference's row-bootstrap interval may then lie above its value.

    **Privacy.** These are metrics of test data: no privacy ledger counts them, and the
    (ε, δ) of training does not cover them (the guide's privacy model, "Not covered"). Do not compute them on
    private data you mean to protect.
    """
    confidence = _check_confidence(confidence)
    n_bootstrap = check_positive(n_bootstrap, "n_bootstrap", integer=True)
    rng = _generator(random_state)
    preds = _runs(y_pred, "y_pred")
    n_runs = len(preds)
    trues, groups_ = _per_run(y_true, "y_true", n_runs), _per_run(s, "s", n_runs)
    for i, (t, p, g) in enumerate(zip(trues, preds, groups_)):
        suffix = f"[{i}]" if n_runs > 1 else ""
        check_same_length(p, f"y_pred{suffix}", t, f"y_true{suffix}")
        check_same_length(g, f"s{suffix}", t, f"y_true{suffix}")
    t_all, p_all = np.concatenate(trues), np.concatenate(preds)
    _, _, classes = encode_label_pair(t_all, p_all)
    s_codes, groups = encode_groups(np.concatenate(groups_), "s")
    names = [str(g) for g in group_name_list(groups, group_names)]
    clash = {OVERALL, DIFFERENCE} & set(names)
    if clash or len(set(names)) < len(names):
        raise ValueError(f"group_names must be distinct and not {OVERALL!r} or {DIFFERENCE!r}, got {names}; "
                         "rename the groups (group_names=)")
    funcs = _resolve_metrics(metrics, classes, positive_label)
    run = np.repeat(np.arange(n_runs), [len(t) for t in trues])
    k = len(groups)
    per_run = _metric_frame(funcs, t_all, p_all, s_codes, run, k, n_runs)
    if n_runs > 1:
        value, lower, upper = bootstrap_mean_interval(per_run, confidence, n_bootstrap, rng)
        interval = "runs"
    else:
        value = per_run[0]
        lower, upper = _percentiles(_row_replicates(list(funcs.values()), t_all, p_all, s_codes, k,
                                                    n_bootstrap, rng), confidence)
        interval = "rows"
    columns = pd.MultiIndex.from_product([list(funcs), STATISTICS], names=["metric", "statistic"])
    data = np.stack([value, lower, upper], axis=-1).reshape(k + 2, -1)
    table = pd.DataFrame(data, index=pd.Index([*names, OVERALL, DIFFERENCE], name="group"), columns=columns)
    table.attrs.update(interval=interval, n_runs=n_runs, confidence=confidence, n_bootstrap=n_bootstrap)
    return table
