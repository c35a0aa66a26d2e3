"""Measuring any model's fairness privately, from a file of predictions (what ``dpfair measure`` runs).

A lender or a regulator holds a table with one row per person: the true label, the model's prediction (from any
system: a CSV another tool wrote) and the person's group. :func:`measure_file` reads those three columns and
releases every figure through one :class:`~dpfair.measurement.frame.PrivateMetricFrame`: the table
of counts group × label × prediction is released once with Laplace or Gaussian noise, on a ledger, and each rate, difference,
ratio and interval is post-processing of it. :func:`model_counts` counts a dpfair model's predictions on a table
in the model's own schema (``dpfair measure --model M --data FILE``). Both read a record batch at a time, so a
table of any size is measured in bounded memory.

What is public, as everywhere in dpfair (the guide's privacy model): the group list and the class list (given,
never read off the rows at a finite ε), the number of rows, the column names, the budget and the public seed of the
intervals' bootstrap. A file whose values fall outside the declared lists is refused (its neighbours are defined on
the declared lists) without naming a row or a count.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from dpfair.datasets import Schema, read_table
from dpfair.datasets.columnar import DEFAULT_BATCH_ROWS, open_table
from dpfair.datasets.schema import GROUP_JOIN
from dpfair.datasets.store import CELLS_PER_BATCH
from dpfair.measurement.counts import CountTable, count_predictions
from dpfair.measurement.frame import PrivateMetricFrame
from dpfair.fairness.notions import get_notion, notion_names
from dpfair.utils.progress import progress

__all__ = ["DEFAULT_METRICS", "FAIRLEARN_DIFFERENCES", "INTERVAL_TARGETS", "measure_file", "measure_rows",
           "measure_counts", "measurement_record", "model_counts", "read_predictions"]

#: The figures ``dpfair measure`` reports when ``--metrics`` is not given (the noisy group size, and the rates
#: behind demographic parity, equalized odds and accuracy parity).
DEFAULT_METRICS = ("count", "selection_rate", "true_positive_rate", "false_positive_rate", "accuracy")

#: fairlearn's names of two notions' differences, kept as keys of a measurement's record (beside ``"notions"``).
FAIRLEARN_DIFFERENCES = {"demographic_parity_difference": "demographic_parity",
                         "equalized_odds_difference": "equalized_odds"}

#: What the intervals cover: ``"population"`` (the privacy noise and the sampling of the rows: the value in the
#: population the rows were drawn from) or ``"rows"`` (the privacy noise only: the exact value on these rows).
INTERVAL_TARGETS = ("population", "rows")


def _as_text(column: pd.Series) -> pd.Series:
    """A column's values as text, whole floats written as integers (``1.0`` → ``"1"``, as a CSV reader may
    have read them), so that they match labels and groups given on the command line."""
    if pd.api.types.is_float_dtype(column):
        values = column.to_numpy()
        finite = np.isfinite(values)
        if finite.all() and np.all(values == np.round(values)):
            return column.astype(np.int64).astype(str)
    if pd.api.types.is_bool_dtype(column):
        return column.map({True: "1", False: "0"})
    return column.astype(str)


def read_predictions(path, *, label: str, prediction: str, sensitive) -> pd.DataFrame:
    """The columns ``label``, ``prediction`` and ``sensitive`` of a CSV or Parquet file, as text (columns
    ``y_true``, ``y_pred``, ``group``). ``sensitive`` may list several columns: each person's group is then the
    intersection of theirs (``"Black & Female"``). A missing column or an empty cell is one ``ValueError`` naming
    the column (never a row or a count: the check reads private values)."""
    columns = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    roles = {"y_true": [label], "y_pred": [prediction], "group": columns}
    frame = read_table(path, text_columns=(label, prediction, *columns))
    flags = {"y_true": "--label", "y_pred": "--prediction", "group": "--sensitive"}
    for role, names in roles.items():
        for name in names:
            if name not in frame.columns:
                raise ValueError(f"{path}: no column {name!r} ({flags[role]}); its columns: {list(frame.columns)[:20]}")
    if len(frame) == 0:
        raise ValueError(f"{path} has no rows; measure a file with one row per person")
    out = {}
    for role, names in roles.items():
        parts = []
        for name in names:
            column = frame[name]
            if column.isna().any():
                raise ValueError(f"{path}: column {name!r} has empty cells; fill or drop those rows first (a "
                                 "measurement needs every person's label, prediction and group)")
            parts.append(_as_text(column).to_numpy(dtype=object))
        joined = pd.Series(parts[0]).str.cat([pd.Series(p) for p in parts[1:]], sep=GROUP_JOIN) if len(parts) > 1 \
            else pd.Series(parts[0])
        out[role] = joined.to_numpy(dtype=object)
    return pd.DataFrame(out)


def _public_list(values, name: str, flag: str) -> list[str]:
    items = [str(v).strip() for v in values]
    if not items or any(not v for v in items):
        raise ValueError(f"{flag} must list at least one value, comma-separated, got {name}={values!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"{flag} lists a value twice ({', '.join(items)}); list each once")
    return items


def _class_order(classes, positive) -> list[str]:
    """The public class list (``None``: ``0, 1``) with the positive class last."""
    classes = _public_list(["0", "1"] if classes is None else classes, "classes", "--classes")
    if len(classes) < 2:
        raise ValueError(f"--classes needs at least two labels, got {', '.join(classes)}")
    if positive is not None:
        positive = str(positive)
        if positive not in classes:
            raise ValueError(f"--positive {positive!r} is not one of --classes {', '.join(classes)}")
        classes = [c for c in classes if c != positive] + [positive]
    return classes


def _classes(classes, positive, rows: pd.DataFrame) -> list[str]:
    """The public class list with the positive class last. Left out: ``0, 1`` when every label and prediction is 0
    or 1 (a check of the rows against a public default, not a list read off them)."""
    if classes is None:
        if not set(rows["y_true"]) <= {"0", "1"}:
            raise ValueError("the labels are not 0/1: declare them with --classes NEG,POS (the public list of labels; "
                             "the positive class last, or name it with --positive)")
        if not set(rows["y_pred"]) <= {"0", "1"}:
            raise ValueError("the predictions are not 0/1 labels: give predicted labels (scores or probabilities "
                             "thresholded at your decision cut-off first), or declare the labels with --classes "
                             "NEG,POS")
    return _class_order(classes, positive)


def _group_lists(groups, epsilon, columns: int):
    """The public group list (one per sensitive column for several), checked; ``None`` only at ``epsilon=inf``."""
    if groups is None:
        if math.isfinite(float(epsilon)):
            raise ValueError("declare the groups with --groups A,B,... (the list of groups is public, not read off "
                             "the rows; every group the column may hold)")
        return None
    if groups and all(isinstance(g, (list, tuple)) for g in groups):  # one public list per sensitive column
        if len(groups) != columns:
            raise ValueError(f"--groups gives {len(groups)} lists for {columns} sensitive columns; give one list "
                             "per column, separated by ';'")
        return [_public_list(g, "groups", "--groups") for g in groups]
    if columns > 1:
        raise ValueError(f"{columns} sensitive columns need one group list each (--groups A,B;C,D)")
    return _public_list(groups, "groups", "--groups")


def measure_rows(rows: pd.DataFrame, *, epsilon: float, groups=None, classes=None, positive=None,
                 metrics=DEFAULT_METRICS, intervals: str = "population", **frame_options) -> PrivateMetricFrame:
    """The private metric frame of ``rows`` (columns ``y_true``, ``y_pred``, ``group``, as text:
    :func:`read_predictions`).

    ``groups``: the public group list (required at a finite ``epsilon``; for several sensitive columns, one list per
    column, whose intersections are the groups); ``classes``: the public label list
    (default ``0, 1`` when the labels are 0/1), ``positive`` names the positive class (default: the last).
    ``intervals``: one of :data:`INTERVAL_TARGETS`. ``frame_options``: the frame's other arguments (``delta``,
    ``privacy_unit``, ``accountant``, ``confidence``, ``n_bootstrap``, ``random_state``, ``secure_mode``).
    """
    if intervals not in INTERVAL_TARGETS:
        raise ValueError(f"intervals must be one of {', '.join(INTERVAL_TARGETS)}, got {intervals!r}")
    if groups is None:
        if math.isfinite(float(epsilon)):
            raise ValueError("declare the groups with --groups A,B,... (the list of groups is public, not read off "
                             "the rows; every group the column may hold)")
        groups = sorted(set(rows["group"]))
    if groups and all(isinstance(g, (list, tuple)) for g in groups):  # one public list per sensitive column
        groups = [GROUP_JOIN.join(combo) for combo in itertools.product(
            *(_public_list(g, "groups", "--groups") for g in groups))]
    groups = _public_list(groups, "groups", "--groups")
    classes = _classes(classes, positive, rows)
    return PrivateMetricFrame(list(metrics), rows["y_true"].to_numpy(), rows["y_pred"].to_numpy(),
                              rows["group"].to_numpy(), groups=groups, classes=classes, epsilon=epsilon,
                              sampling=intervals == "population", **frame_options)


def measure_file(path, *, label: str, prediction: str, sensitive, epsilon: float, groups=None, classes=None,
                 positive=None, metrics=DEFAULT_METRICS, intervals: str = "population", client=None,
                 batch_rows: int = DEFAULT_BATCH_ROWS, show_progress: bool = True,
                 **frame_options) -> PrivateMetricFrame:
    """The private metric frame of the predictions in ``path`` — a CSV, TSV or Parquet file, a folder of them (a
    partitioned data set) or a glob: its columns ``label``, ``prediction`` and ``sensitive`` (one or several)
    counted a batch at a time (:func:`~dpfair.measurement.counts.count_predictions`; on ``client``'s Dask workers
    when given), then released once (:meth:`PrivateMetricFrame.from_counts`). Memory is bounded by one batch of
    ``batch_rows`` rows, whatever the table's size. ``groups``, ``classes``, ``positive``, ``metrics`` and
    ``intervals`` as for :func:`measure_rows`; ``frame_options``: the frame's other arguments."""
    if intervals not in INTERVAL_TARGETS:
        raise ValueError(f"intervals must be one of {', '.join(INTERVAL_TARGETS)}, got {intervals!r}")
    columns = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    group_lists = _group_lists(groups, epsilon, len(columns))
    _class_order(classes, positive)  # the public lists checked before any row is read
    table = count_predictions(path, label=label, prediction=prediction, sensitive=columns, groups=group_lists,
                              classes=classes, batch_rows=batch_rows, client=client, show_progress=show_progress)
    return measure_counts(table, epsilon=epsilon, positive=positive, metrics=metrics, intervals=intervals,
                          **frame_options)


def measure_counts(table: CountTable, *, epsilon: float, positive=None, metrics=DEFAULT_METRICS,
                   intervals: str = "population", **frame_options) -> PrivateMetricFrame:
    """The private metric frame of an exact :class:`~dpfair.measurement.counts.CountTable` (its one release:
    :meth:`PrivateMetricFrame.from_counts`), the ``positive`` class last; the other arguments as for
    :func:`measure_rows`."""
    if intervals not in INTERVAL_TARGETS:
        raise ValueError(f"intervals must be one of {', '.join(INTERVAL_TARGETS)}, got {intervals!r}")
    order = _class_order(list(table.classes), positive)
    position = [table.classes.index(c) for c in order]
    counts = table.counts[:, position][:, :, position]
    return PrivateMetricFrame.from_counts(list(metrics), counts, groups=list(table.groups), classes=order,
                                          epsilon=epsilon, sampling=intervals == "population", **frame_options)


def model_counts(estimator, schema, data_path, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                 show_progress: bool = True) -> CountTable:
    """The exact :class:`~dpfair.measurement.counts.CountTable` of a fitted dpfair estimator's predictions on the
    rows of ``data_path`` (a file, a folder or a glob) read through ``schema`` (the model's, a
    :class:`~dpfair.datasets.Schema` or its dict), a record batch at a time (at most ``batch_rows`` rows and
    :data:`~dpfair.datasets.store.CELLS_PER_BATCH` cells): each batch's cells prepared by the
    schema (row-local), predicted and counted by the schema's declared (public) group and class lists. A row the
    schema declares dropped (``missing = "drop"``) is not measured: a row-local filter, so the release's ε covers
    the rows measured (and their number is not printed)."""
    schema = schema if isinstance(schema, Schema) else Schema.from_dict(schema, where="the model's schema")
    table = open_table(data_path, raw=True)
    for role, column in (("label", schema.label), *(("sensitive", c) for c in schema.sensitive_columns)):
        if column not in table.columns:
            raise ValueError(f"{data_path}: no {role} column {column!r}; measuring needs each person's label and "
                             "group")
    table.require(table.columns)
    k, l = len(schema.groups), len(schema.classes)
    from dpfair.fairness.scorers import predict_with_groups  # scikit-learn: a model's predictions only

    flat = np.zeros(k * l * l, dtype=np.int64)
    with progress(table.row_count(), desc=f"predicting {table.files[0].name if len(table.files) == 1 else data_path}",
                  unit="row", enabled=show_progress) as bar:
        for frame in table.frames(table.columns, CELLS_PER_BATCH, batch_rows):
            read = len(frame)
            prepared = schema.prepare(frame, str(data_path), strict=True, targets=True)
            frame, X = frame.loc[prepared.kept].reset_index(drop=True), prepared.X
            if estimator.n_features_in_ != X.shape[1]:
                raise ValueError(f"the model was fitted on {estimator.n_features_in_} features but its schema gives "
                                 f"{X.shape[1]} for {data_path}; the model file is damaged: train it again")
            if len(frame):
                s = schema.codes(frame, "sensitive", str(data_path))
                y = schema.codes(frame, "label", str(data_path))
                predicted = np.asarray(predict_with_groups(estimator, X, s)).astype(np.int64)
                flat += np.bincount((s * l + y) * l + predicted, minlength=k * l * l)
            bar.update(read)
    if not flat.any():
        raise ValueError(f"{data_path} has no rows; measure a file with one row per person")
    return CountTable(flat.reshape(k, l, l), tuple(schema.groups), tuple(schema.classes))


def _interval(low, high) -> list[float | None]:
    return [None if not np.isfinite(v) else float(v) for v in (low, high)]


def measurement_record(frame: PrivateMetricFrame, attribute: str | None = None) -> dict:
    """Everything a measurement publishes, as JSON-ready values: the released figures with their intervals and
    flags, the budget spent with whom it protects (``attribute``: the name of the group column) and the ledger.
    Under ``"notions"``, every registered notion whose :attr:`~dpfair.fairness.notions.Notion.compared_rates`
    were measured: its rates, its difference and interval (``frame.notion_difference``, ``.notion_interval``:
    the positive class against the rest; for two labels, the notion's violation), the groups flagged for any of
    its rates and its difference over the others; two of them also under fairlearn's names
    (:data:`FAIRLEARN_DIFFERENCES`). All of it is post-processing of the one release (or public)."""
    from dpfair.privacy.record import PrivacyRecord

    by_group, bounds, flags = frame.by_group, frame.intervals, frame.flags
    groups = {}
    for g in by_group.index:
        groups[str(g)] = {m: {"value": _float(by_group.loc[g, m]),
                              "interval": _interval(bounds.loc[g, (m, "low")], bounds.loc[g, (m, "high")]),
                              "flagged": bool(flags.loc[g, m])} for m in frame.metrics}
    overall, overall_iv = frame.overall, frame.overall_interval()
    difference, difference_iv, ratio = frame.difference(), frame.difference_interval(), frame.ratio()
    between = {m: {"overall": _float(overall[m]), "overall_interval": _interval(*overall_iv.loc[m]),
                   "difference": _float(difference[m]), "difference_interval": _interval(*difference_iv.loc[m]),
                   "ratio": _float(ratio[m]),
                   # the flagged groups whose figure enters the difference (an undefined one does not)
                   "flagged_groups": [str(g) for g in flags.index[flags[m] & np.isfinite(by_group[m].to_numpy(
                       dtype=float))]],
                   "difference_unflagged": _spread(by_group[m][~flags[m]])} for m in frame.metrics}
    eps, delta = frame.privacy_spent_
    record = {"metrics": list(frame.metrics), "groups": [str(g) for g in frame.groups_],
              "classes": [str(c) for c in frame.classes_], "positive_class": str(frame.classes_[-1]),
              "by_group": groups, "aggregates": between,
              "interval": {"confidence": frame.confidence,
                           "target": "population" if frame.sampling else "rows",
                           "method": f"each group's figure: its released cells' {frame.mechanism_} noise law "
                                     "inverted (counts: the noise's quantiles; rates: Fieller's test inversion"
                                     + (", with the binomial of the rows" if frame.sampling else "") + "); "
                                     "differences: a parametric bootstrap of the released tables, or the "
                                     "per-group intervals at Bonferroni level when a group is flagged",
                           "replicates": frame.n_bootstrap},
              **PrivacyRecord.of(eps, delta, frame.privacy_unit, attribute, rest="label and prediction").to_json(),
              "mechanism": frame.mechanism_,
              "secure_mode": frame.secure_mode,
              "noise_multiplier": frame.noise_multiplier_, "noise_std": frame.noise_std_,
              "privacy_ledger": frame.privacy_ledger_.to_records()}
    # every registered notion whose compared rates were measured: its difference, interval and flagged groups
    notions = {}
    for name in notion_names():
        notion = get_notion(name)
        rates = tuple(notion.compared_rates)
        if rates and set(rates) <= set(frame.metrics):
            notions[name] = {"rates": list(rates), "value": _float(frame.notion_difference(notion)),
                             "interval": _interval(*frame.notion_interval(notion)), **_unflagged(between, rates)}
    for key, name in FAIRLEARN_DIFFERENCES.items():
        if name in notions:
            record[key] = {k: v for k, v in notions[name].items() if k != "rates"}
    record["notions"] = notions
    return record


def _spread(values: pd.Series) -> float | None:
    """max − min of the finite values (None with fewer than two): a difference over the groups given."""
    finite = values[np.isfinite(values.to_numpy(dtype=float))]
    return float(finite.max() - finite.min()) if len(finite) >= 2 else None


def _unflagged(between: dict, metrics: tuple) -> dict:
    """The groups flagged for any of ``metrics`` and the largest of their differences over the unflagged groups
    (post-processing of released figures: what a reader who drops the flagged ones computes)."""
    flagged = sorted({g for m in metrics for g in between[m]["flagged_groups"]})
    spreads = [between[m]["difference_unflagged"] for m in metrics]
    return {"flagged_groups": flagged,
            "value_unflagged": None if None in spreads else max(spreads)}


def _float(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
