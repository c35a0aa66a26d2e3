"""One evaluation of a fitted estimator on labelled rows: error, every fairness notion, per-group accuracy.

:func:`evaluate` is what ``dpfair train``, ``tune`` and ``predict`` print and save, and what a sweep stores. Every
figure by group reads the rows' sensitive attribute, so it is published one of two ways:

- ``epsilon=`` finite: through one :class:`~dpfair.measurement.frame.PrivateMetricFrame` (the table
  ``counts[group, y, ŷ]`` of the rows, released once with Laplace or Gaussian noise (the plan's choice) and recorded on its own ledger); every
  violation, per-group accuracy and inequality index is post-processing of that released table, by the same code
  that computes the exact figures from the exact table
  (:meth:`~dpfair.fairness.notions.Notion.table_violation`,
  :func:`~dpfair.fairness.inequality.accuracy_inequality_indices`);
- otherwise exactly, labelled in the result as a non-private diagnostic of these rows' people, which no ε covers
  (the guide's privacy model: the test part).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pandas as pd

from dpfair.fairness import accuracy_inequality, fairness_summary, get_notion, notion_names
from dpfair.fairness.inequality import accuracy_inequality_indices

#: FairDP's inequality indices of the per-group accuracies, by key in :func:`evaluate`'s result.
INEQUALITY_INDICES = ("atkinson", "gini", "mean_log_deviation", "theil")

#: What an evaluation without an evaluation budget says of its figures by group.
NON_PRIVATE_NOTE = ("non-private diagnostics of the test people: computed from their sensitive attribute without "
                    "noise, not covered by the printed ε")

#: The ledger label of a private evaluation's release, and the key of its part of a result.
EVALUATION = "evaluation"

#: A non-private test figure of fewer people than this is printed with its count and flagged: its binomial
#: standard error can reach 0.5/√30 ≈ 0.09, so its fourth decimal (and often its first) is noise of the split.
SMALL_TEST_GROUP = 30

#: The metrics the private evaluation's frame computes besides the rates the registered notions compare.
BASE_METRICS = ("accuracy", "error")


def frame_metrics() -> tuple[str, ...]:
    """The metrics of the private evaluation's frame (its figures, intervals and flags): :data:`BASE_METRICS`,
    then every registered notion's :attr:`~dpfair.fairness.notions.Notion.compared_rates`, each once, in
    registration order (the built-in notions: accuracy, error, selection, true and false positive rates). Public
    inputs only: the plan that splits ε is chosen from them."""
    return tuple(dict.fromkeys(BASE_METRICS + tuple(r for name in notion_names()
                                                    for r in get_notion(name).compared_rates)))


def _groups(estimator, X, s):
    """``(X, s)``: s as ``fit`` takes it, one group value per row or the name of a column of the DataFrame X (then
    taken out of X); ``None``: the column the estimator took s from in ``fit`` (``sensitive_column_``)."""
    column = s if isinstance(s, str) else (getattr(estimator, "sensitive_column_", None) if s is None else None)
    if column is not None and isinstance(X, pd.DataFrame) and column in X.columns:
        return X.drop(columns=[column]), X[column]
    if isinstance(s, str):
        raise ValueError(f"sensitive_features={s!r} is not a column of X; pass a DataFrame holding that column, or "
                         "the groups themselves (one value per row)")
    if s is None:
        raise ValueError("evaluate needs the groups of the rows: pass sensitive_features (one value per row, or the "
                         "name of a column of X)")
    return X, s


def _name(g, group_names):
    """A JSON key for group ``g``: ``group_names[g]`` for an integer code when names are given, else the value."""
    if isinstance(g, np.generic):
        g = g.item()
    if group_names is not None and isinstance(g, numbers.Integral) and not isinstance(g, bool):
        return group_names[g]
    return g


def _public_groups(groups, group_names):
    """The public list of group values: ``groups``, else the codes ``0..k-1`` of a list of ``group_names`` (the
    keys of a dict); never read off the rows."""
    if groups is not None:
        return list(groups)
    if isinstance(group_names, dict):
        return list(group_names)
    if group_names is not None:
        return list(range(len(group_names)))
    raise ValueError("a private evaluation needs the public list of groups (never read off the rows): pass "
                     "groups=[...] or group_names=[...] (the data set's declared groups)")


def _public_classes(classes, estimator):
    """The public list of labels: ``classes``, else the estimator's ``classes_`` (fixed at fit)."""
    if classes is not None:
        return list(classes)
    fitted = getattr(estimator, "classes_", None)
    if fitted is None:
        raise ValueError("a private evaluation needs the public list of labels: pass classes=[...]")
    return np.asarray(fitted).tolist()


def evaluate(estimator, X, y, s=None, group_names=None, *, sensitive_features=None, epsilon=None, delta=None,
             privacy_unit="sensitive", random_state=None, groups=None, classes=None, accountant="pld") -> dict:
    """Error, the fairness violations and the per-group accuracies of ``estimator`` on ``(X, y, s)``.

    Takes what ``fit`` takes: ``s`` (or ``sensitive_features=``) holds one group value per row (codes, strings,
    a Series) or names a column of the DataFrame ``X``; left out, the column ``fit`` took s from is used.
    Returns ``{"n": rows, "error": P(ŷ ≠ y), "fairness": {notion: pairwise violation},
    "per_group_accuracy": {group: accuracy}, "accuracy_inequality": {index: value}, "evaluation": {...}}``
    (:func:`~dpfair.fairness.fairness_summary`, :func:`~dpfair.fairness.accuracy_inequality`);
    ``group_names[g]`` names an integer group code ``g`` (other group values name themselves).

    ``epsilon=None`` (the default): the figures by group are exact, and ``evaluation`` is ``{"private": False,
    "note": ...}``: a non-private diagnostic of these rows' people, covered by no ε. ``epsilon`` given: the table
    ``counts[group, y, ŷ]`` is released once through a
    :class:`~dpfair.measurement.frame.PrivateMetricFrame` at ``(epsilon, delta)`` (``delta=None``:
    1/n²) under ``privacy_unit`` (``"sensitive"``: y and ŷ public, one person's group replaced; ``"record"``: one
    person added or removed), and every figure by group is computed from the released table (post-processing).
    The error needs no group: it stays exact under the sensitive unit, where y and ŷ are public, and comes from
    the released table under the record unit. The groups are the public list ``groups`` (default: the codes of
    ``group_names``), the labels ``classes`` (default: the estimator's ``classes_``); a group's absence is never
    read off the rows. ``evaluation`` is then ``{"private": True, "epsilon", "delta", "unit", "accountant",
    "noise_std", "privacy_ledger": its records, "event": its dp_accounting event (JSON), "intervals", "flags"}``:
    ``intervals`` holds the frame's intervals (rows and noise) of the per-group accuracies and of each notion's
    violation whose measured rates give it (:meth:`~dpfair.fairness.notions.Notion.measured_rates`: for two
    labels, every built-in notion), the frame's interval of the largest between-groups difference of the rates
    the notion compares (``frame.notion_interval(notion)``); ``flags`` the
    groups whose figures rest on too few people (the frame's flags), by metric, and under ``"notions"`` the
    notions whose violation compares such a figure (a notion of no measured rate: any group flagged for any
    rate). The frame measures :func:`frame_metrics`, so a notion registered later gets its interval and flags
    with no change here. ``epsilon=inf`` computes the
    same figures from the exact table (no noise; labelled non-private).
    """
    if s is not None and sensitive_features is not None:
        raise ValueError("pass the groups once: as s or as sensitive_features=, not both")
    X, s = _groups(estimator, X, s if s is not None else sensitive_features)
    y = np.asarray(y)
    s = np.asarray(s)
    from dpfair.fairness.scorers import predict_with_groups  # sklearn, loaded on first evaluation

    return evaluate_predictions(estimator, y, predict_with_groups(estimator, X, s), s, group_names, epsilon=epsilon,
                                delta=delta, privacy_unit=privacy_unit, random_state=random_state, groups=groups,
                                classes=classes, accountant=accountant)


def evaluate_predictions(estimator, y, y_pred, s, group_names=None, *, epsilon=None, delta=None,
                         privacy_unit="sensitive", random_state=None, groups=None, classes=None,
                         accountant="pld") -> dict:
    """:func:`evaluate` of the predictions ``y_pred`` that ``estimator`` made of rows already scored (a file
    streamed a batch at a time: ``dpfair predict --input``), with their labels ``y`` and group values ``s``; the
    estimator gives only its ``classes_``. The same figures, released the same way at ``epsilon``."""
    y, y_pred, s = np.asarray(y), np.asarray(y_pred), np.asarray(s)
    if epsilon is None:
        inequality = accuracy_inequality(y, y_pred, s)
        return {
            "n": int(len(y)),
            "error": float(np.mean(y_pred != y)),
            "fairness": fairness_summary(y, y_pred, s),
            "per_group_accuracy": {_name(g, group_names): a for g, a in inequality["per_group_accuracy"].items()},
            "accuracy_inequality": {k: inequality[k] for k in INEQUALITY_INDICES},
            EVALUATION: {"private": False, "note": NON_PRIVATE_NOTE,
                         "group_sizes": {_name(g, group_names): int(np.sum(s == g))
                                         for g in inequality["per_group_accuracy"]}},
        }
    return _private_evaluation(y, y_pred, s, group_names, epsilon=epsilon, delta=delta, privacy_unit=privacy_unit,
                               random_state=random_state, groups=_public_groups(groups, group_names),
                               classes=_public_classes(classes, estimator), accountant=accountant)


def _private_evaluation(y, y_pred, s, group_names, *, epsilon, delta, privacy_unit, random_state, groups, classes,
                        accountant) -> dict:
    """:func:`evaluate`'s figures from one released table (its docstring)."""
    from dpfair.measurement.frame import PrivateMetricFrame
    from dpfair.privacy import check_privacy_unit
    from dpfair.privacy.accounting import event_to_json

    # integer group codes with names: the frame reads the names (its warnings then name the groups)
    if isinstance(group_names, (list, tuple)) and all(isinstance(g, numbers.Integral) and 0 <= g < len(group_names)
                                                      for g in groups):
        named = [group_names[g] for g in groups]
        if len(set(named)) == len(named):
            lookup = dict(zip(groups, named))
            s = pd.Series(s).map(lambda v: lookup.get(v, v)).to_numpy(dtype=object)
            groups = named
    # a group too small for a confident figure warns here (UtilityWarning) and is listed in the result's flags
    metrics = frame_metrics()
    frame = PrivateMetricFrame(list(metrics), y, y_pred, s, groups=groups, classes=classes, epsilon=epsilon,
                               delta=delta, privacy_unit=privacy_unit, accountant=accountant,
                               random_state=random_state)
    table = frame.table_  # the released table, negative counts clipped to 0: everything below post-processes it
    frame_classes = np.asarray(frame.classes_)
    names = [_name(g, group_names) for g in frame.groups_]
    positive = frame_classes[1]
    fairness = {name: get_notion(name).table_violation(table, frame_classes, "pairwise", positive)
                for name in notion_names()}
    accuracy = frame.by_group["accuracy"].to_numpy()
    sizes = table.sum(axis=(1, 2))
    unit = check_privacy_unit(privacy_unit).value
    error = float(np.mean(y_pred != y)) if unit == "sensitive" else float(frame.overall["error"])
    private = math.isfinite(frame.privacy_spent_[0])

    intervals = frame.intervals
    found = {"per_group_accuracy": {n: [float(intervals.loc[g, ("accuracy", "low")]),
                                        float(intervals.loc[g, ("accuracy", "high")])]
                                    for n, g in zip(names, frame.groups_)}}
    measured = {name: get_notion(name).measured_rates(len(frame_classes)) for name in fairness}
    if any(measured.values()):  # the interval of the largest difference of the notion's rates
        found["fairness"] = {name: list(frame.notion_interval(name)) for name, rates in measured.items() if rates}
    if unit != "sensitive":
        overall = frame.overall_interval()
        found["error"] = [float(overall.loc["error", "low"]), float(overall.loc["error", "high"])]
    flags = {m: [n for n, g in zip(names, frame.groups_) if bool(frame.flags.loc[g, m])] for m in frame.flags.columns}
    # the notions whose compared rates rest on a flagged group (a notion whose measured rates do not give it, as
    # for more than two labels: any group flagged for any rate)
    rates = [m for m in metrics if m != "error"]
    flags["notions"] = [name for name in fairness if any(flags[m] for m in (measured[name] or rates))]
    eps, spent_delta = frame.privacy_spent_
    evaluation = {"private": private, "epsilon": eps, "delta": spent_delta, "unit": unit, "accountant": accountant,
                  "noise_std": frame.noise_std_, "privacy_ledger": frame.privacy_ledger_.to_records(),
                  "event": event_to_json(frame.privacy_ledger_.dp_event), "intervals": found, "flags": flags}
    if not private:
        evaluation["note"] = NON_PRIVATE_NOTE
    return {
        "n": int(len(y)),
        "error": error,
        "fairness": fairness,
        "per_group_accuracy": {n: float(a) for n, a in zip(names, accuracy)},
        "accuracy_inequality": accuracy_inequality_indices(accuracy, sizes),
        EVALUATION: evaluation,
    }
