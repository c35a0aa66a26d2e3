"""The evaluation of a model on the command's test rows (:func:`dpfair.experiments.evaluate`): released privately at
``--eval-epsilon``, else exact and labelled non-private; its printed lines and its result key."""

from __future__ import annotations

INDEX_LABELS = {"atkinson": "Atkinson index (aversion 1)", "gini": "Gini coefficient",
                "mean_log_deviation": "mean log deviation", "theil": "Theil index (T)"}

#: The label of the figures by group of an evaluation without ``--eval-epsilon``.
DIAGNOSTIC_LABEL = "non-private diagnostics of the test people (exact; not covered by ε; --eval-epsilon releases them)"


def evaluate(est, X, y, s, group_names, args) -> dict:
    """:func:`dpfair.experiments.evaluate` of the command's test rows: released privately at ``--eval-epsilon``
    under the model's privacy unit (the declared groups: ``group_names``), else exact and labelled."""
    from dpfair import experiments

    eps = getattr(args, "eval_epsilon", None)
    if eps is None:
        return experiments.evaluate(est, X, y, s, group_names)
    unit = getattr(est, "privacy_unit_", None)
    return experiments.evaluate(est, X, y, s, group_names, epsilon=eps, delta=getattr(args, "eval_delta", None),
                                privacy_unit="sensitive" if unit is None else unit.value)


def evaluate_predicted(est, y, y_pred, s, group_names, args) -> dict:
    """:func:`evaluate` of predictions already made (a file scored a batch at a time)."""
    from dpfair.experiments.evaluate import evaluate_predictions

    eps = getattr(args, "eval_epsilon", None)
    if eps is None:
        return evaluate_predictions(est, y, y_pred, s, group_names)
    unit = getattr(est, "privacy_unit_", None)
    return evaluate_predictions(est, y, y_pred, s, group_names, epsilon=eps, delta=getattr(args, "eval_delta", None),
                                privacy_unit="sensitive" if unit is None else unit.value)


def evaluation_rows(evaluation: dict) -> list[tuple[str, str]]:
    """The printed lines of :func:`dpfair.experiments.evaluate`'s result: the figures, then what they are (released
    privately: each with its interval, a flagged group marked; else labelled non-private diagnostics)."""
    ev = evaluation.get("evaluation", {})
    private = ev.get("private", False)
    intervals = ev.get("intervals", {}) if private else {}
    flagged = set(ev.get("flags", {}).get("accuracy", [])) if private else set()

    from dpfair.experiments.evaluate import SMALL_TEST_GROUP

    sizes = {} if private else ev.get("group_sizes", {})

    def figure(value, interval=None, flag=False, size=None) -> str:
        text = f"{value:.4f}"
        if interval is not None:
            text += f"  [{interval[0]:.4f}, {interval[1]:.4f}]"
        if size is not None and size < SMALL_TEST_GROUP:
            text += f"  ! {size} test people: too few for a reliable figure"
        return text + ("  (too few people: not confident)" if flag else "")

    rows = [("test error", figure(evaluation["error"], intervals.get("error")))]
    notions = set(ev.get("flags", {}).get("notions", [])) if private else set()
    rows += [(f"{k.replace('_', ' ')} violation", figure(v, intervals.get("fairness", {}).get(k), k in notions))
             for k, v in evaluation["fairness"].items()]
    rows += [(f"accuracy, {g}", figure(a, intervals.get("per_group_accuracy", {}).get(g), g in flagged, sizes.get(g)))
             for g, a in evaluation["per_group_accuracy"].items()]
    rows += [(label, f"{evaluation['accuracy_inequality'][k]:.4f}") for k, label in INDEX_LABELS.items()]
    if private:
        rows += [("figures by group", "released once at the evaluation ε below (PrivateMetricFrame); [95 % interval]")]
    else:
        rows += [("figures by group", DIAGNOSTIC_LABEL)]
    return rows


def evaluation_privacy_rows(evaluation: dict, attribute: str | None) -> list[tuple[str, str]]:
    """The evaluation's own privacy line (``--eval-epsilon``), printed apart from the fit's ε: the test people are
    not the training people, so each person is covered by one of the two (their ε is the larger, not the sum)."""
    ev = evaluation.get("evaluation", {})
    if not ev.get("private", False):
        return []
    from dpfair.privacy.record import PrivacyRecord

    protects = PrivacyRecord.of(ev["epsilon"], ev["delta"], ev["unit"], attribute, rest="label and prediction").protects
    return [("evaluation", f"ε = {ev['epsilon']:.6g}, δ = {ev['delta']:.3g} for {protects} (the test people, "
                           "disjoint from the training people: each person is covered by one ε, not their sum)")]


def evaluation_record(evaluation: dict) -> dict:
    """The result JSON's ``evaluation`` key: what the test figures are (and, released privately, their ε, δ,
    unit, ledger, intervals and flags)."""
    ev = dict(evaluation.get("evaluation", {"private": False}))
    if ev.get("private"):
        ev["composition"] = ("the evaluation's ledger covers the test people, the fit's ledger the training people: "
                             "disjoint parts, so each person's ε is that of the one ledger covering them (not the sum)")
    return ev
