"""Issue 43, item 2: the notion object carries through the measurement.

A notion states the rates it compares (``Notion.compared_rates``); the private frame measures any notion from
them (``notion_difference``, ``notion_interval``), and ``measure`` (the record of ``dpfair measure``) and
``evaluate`` report every registered notion's value, interval and flags. A notion registered here, in the test
only, is reported by both with no other edit.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dpfair.cli import main
from dpfair.exceptions import UtilityWarning
from dpfair.experiments.evaluate import evaluate, frame_metrics
from dpfair.fairness.notions import (
    NOTIONS,
    POSITIVE,
    Notion,
    get_notion,
    notion_names,
    register_notion,
    registered_notion,
    unregister_notion,
)
from dpfair.measurement import measure_rows, measurement_record
from dpfair.measurement.frame import PrivateMetricFrame
from dpfair.privacy.randomness import reproducible_noise

RATES = ["count", "selection_rate", "true_positive_rate", "false_positive_rate", "true_negative_rate", "accuracy"]


class TrueNegativeParity(Notion):
    """``P(ŷ ≠ + | Y ≠ +, S = r)`` equal for every group r: the true-negative rate (a test's own notion)."""

    name, rate, conditions_on_label, uses_positive_label = "true_negative_parity", POSITIVE, True, True
    compared_rates = ("true_negative_rate",)

    def cell_labels(self, n_classes: int, positive: int = 1) -> tuple[tuple[int, ...], ...]:
        return (tuple(c for c in range(n_classes) if c != positive),)


class Unmeasured(Notion):
    """A notion no measured rate gives (empty ``compared_rates``)."""

    name = "unmeasured_parity"


@pytest.fixture
def tnp():
    """The test's notion, registered for one test and unregistered after it, whatever happens."""
    with registered_notion(TrueNegativeParity()) as notion:
        yield notion
    assert notion.name not in notion_names()


def _rows(seed=0, n=4000, small=0):
    rng = np.random.default_rng(seed)
    s = np.where(rng.random(n) < 0.4, "a", "b")
    if small:
        s[:small] = "c"
    y = (rng.random(n) < np.where(s == "a", 0.5, 0.35)).astype(int)
    p = np.where(rng.random(n) < 0.85, y, 1 - y)
    return y, p, s


class Fixed:
    """A model fitted elsewhere: predicts the first column of X."""

    classes_ = np.array([0, 1])

    def predict(self, X):
        return np.asarray(X)[:, 0].astype(np.int64)


# ---- the notion's rates and the frame -------------------------------------------------------------------
def test_the_built_in_notions_state_the_rates_they_compare():
    assert {name: get_notion(name).compared_rates for name in NOTIONS} == {
        "demographic_parity": ("selection_rate",),
        "equalized_odds": ("true_positive_rate", "false_positive_rate"),
        "equal_opportunity": ("true_positive_rate",),
        "accuracy_parity": ("accuracy",),
        "predictive_equality": ("false_positive_rate",)}
    for name in NOTIONS:  # the rates give the violation for two labels; the built-ins claim none for more
        assert get_notion(name).measured_rates(2) == get_notion(name).compared_rates
        assert get_notion(name).measured_rates(3) == ()


@pytest.mark.filterwarnings("ignore::dpfair.exceptions.UtilityWarning")  # the third group is small
@pytest.mark.parametrize("groups", [["a", "b"], ["a", "b", "c"]])
def test_a_notions_figure_is_the_largest_difference_of_its_rates_with_the_frames_interval(groups):
    y, p, s = _rows(small=60 if len(groups) == 3 else 0)
    frame = PrivateMetricFrame(RATES, y, p, s, groups=groups, epsilon=1.0, random_state=0, n_bootstrap=200)
    difference = frame.difference()
    for name in NOTIONS:
        rates = list(get_notion(name).compared_rates)
        assert frame.notion_difference(name) == max(difference[r] for r in rates)
        assert frame.notion_interval(get_notion(name)) == frame.max_difference_interval(rates)
        if len(rates) == 1:  # one rate: its row of difference_interval
            assert frame.notion_interval(name) == tuple(frame.difference_interval().loc[rates[0]])
    # fairlearn's names are the notions'
    assert frame.demographic_parity_difference == frame.notion_difference("demographic_parity")
    assert frame.equalized_odds_difference == frame.notion_difference("equalized_odds")
    assert frame.demographic_parity_interval() == frame.notion_interval("demographic_parity")
    assert frame.equalized_odds_interval() == frame.notion_interval("equalized_odds")


def test_at_infinite_epsilon_a_notions_figure_is_its_violation_on_the_rows():
    y, p, s = _rows()
    frame = PrivateMetricFrame(RATES, y, p, s, epsilon=math.inf, n_bootstrap=1)
    for name in NOTIONS:
        assert frame.notion_difference(name) == pytest.approx(get_notion(name).violation(y, p, s), abs=1e-12)


def test_a_notion_of_no_measured_rate_is_refused_by_the_frame():
    y, p, s = _rows()
    frame = PrivateMetricFrame(["selection_rate"], y, p, s, groups=["a", "b"], epsilon=1.0, n_bootstrap=10)
    with pytest.raises(ValueError, match="compares no measured rate"):
        frame.notion_difference(Unmeasured())


# ---- the registry ---------------------------------------------------------------------------------------
def test_a_registered_notion_is_unregistered_and_built_ins_stay():
    with registered_notion(TrueNegativeParity()):
        assert "true_negative_parity" in notion_names()
        with pytest.raises(ValueError, match="already registered"):
            register_notion(TrueNegativeParity())
    assert "true_negative_parity" not in notion_names()
    with pytest.raises(ValueError, match="built-in"):
        unregister_notion("equalized_odds")
    with pytest.raises(ValueError, match="no notion named"):
        unregister_notion("true_negative_parity")
    assert notion_names() == NOTIONS
    with pytest.raises(RuntimeError), registered_notion(TrueNegativeParity()):  # undone on an error too
        raise RuntimeError
    assert notion_names() == NOTIONS


# ---- a new notion through measure and evaluate, with no other edit ---------------------------------------
def test_measure_reports_every_notion_whose_rates_it_measured(tnp):
    y, p, s = _rows(small=40)
    rows = pd.DataFrame({"y_true": y.astype(str), "y_pred": p.astype(str), "group": s})
    with pytest.warns(UtilityWarning):
        frame = measure_rows(rows, epsilon=1.0, groups=["a", "b", "c"], metrics=RATES, random_state=0,
                             n_bootstrap=200)
    record = measurement_record(frame)
    assert list(record["notions"]) == list(notion_names())  # every rate measured: every notion
    shown = record["notions"]["true_negative_parity"]
    assert shown["rates"] == ["true_negative_rate"]
    assert shown["value"] == frame.notion_difference("true_negative_parity")
    assert shown["interval"] == list(frame.notion_interval(tnp))
    assert shown["flagged_groups"] == ["c"] == record["aggregates"]["true_negative_rate"]["flagged_groups"]
    assert shown["value_unflagged"] == record["aggregates"]["true_negative_rate"]["difference_unflagged"]
    # fairlearn's two names stay, equal to their notions' entries
    for key, name in (("demographic_parity_difference", "demographic_parity"),
                      ("equalized_odds_difference", "equalized_odds")):
        assert record[key] == {k: v for k, v in record["notions"][name].items() if k != "rates"}
    # a notion whose rates were not measured is left out
    frame = measure_rows(rows, epsilon=1.0, groups=["a", "b", "c"], metrics=["selection_rate"], n_bootstrap=10)
    assert list(measurement_record(frame)["notions"]) == ["demographic_parity"]


def test_the_measure_command_prints_and_writes_a_registered_notion(tnp, tmp_path, capsys):
    y, p, s = _rows()
    pd.DataFrame({"y": y, "p": p, "g": s}).to_csv(tmp_path / "rows.csv", index=False)
    out = tmp_path / "m.json"
    code = main(["measure", "--predictions", str(tmp_path / "rows.csv"), "--label", "y", "--prediction", "p",
                 "--sensitive", "g", "--groups", "a,b", "--epsilon", "1", "--metrics",
                 "count,true_negative_rate,false_positive_rate", "--bootstrap", "100", "--seed", "0", "--quiet",
                 "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "true negative parity difference" in printed and "predictive equality difference" in printed
    assert "demographic parity difference" not in printed  # no selection rate measured
    result = json.loads(out.read_text())
    assert set(result["notions"]) == {"predictive_equality", "true_negative_parity"}
    lo, hi = result["notions"]["true_negative_parity"]["interval"]
    assert lo <= result["notions"]["true_negative_parity"]["value"] <= hi
    # TNR = 1 − FPR in every group: the two notions' differences agree
    assert result["notions"]["true_negative_parity"]["value"] == pytest.approx(
        result["notions"]["predictive_equality"]["value"], abs=1e-12)


def test_evaluate_reports_a_registered_notions_value_interval_and_flags(tnp, monkeypatch):
    import dpfair.measurement.frame as pmf

    assert frame_metrics()[-1] == "true_negative_rate"  # the frame measures the new notion's rate
    frames = []

    class Spy(pmf.PrivateMetricFrame):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            frames.append(self)

    monkeypatch.setattr(pmf, "PrivateMetricFrame", Spy)
    y, p, s = _rows(small=30)
    X = p[:, None]
    with pytest.warns(UtilityWarning):
        result = evaluate(Fixed(), X, y, s, epsilon=1.0, groups=["a", "b", "c"], random_state=0)
    (frame,) = frames
    assert "true_negative_rate" in frame.metrics
    ev = result["evaluation"]
    # the value: the notion's violation of the released table, as every notion's
    assert result["fairness"]["true_negative_parity"] == tnp.table_violation(frame.table_, frame.classes_,
                                                                             positive_label=frame.classes_[1])
    assert result["fairness"]["true_negative_parity"] == result["fairness"]["predictive_equality"]
    # the interval: the frame's interval of the notion's rate
    assert ev["intervals"]["fairness"]["true_negative_parity"] == list(frame.notion_interval(tnp))
    # the flags: the tiny group is flagged for the notion's rate, and so the notion is
    assert ev["flags"]["true_negative_rate"] == ["c"]
    assert "true_negative_parity" in ev["flags"]["notions"]


def test_evaluate_gives_a_notion_of_no_measured_rate_no_interval_and_flags_it_on_any_rate(monkeypatch):
    with registered_notion(Unmeasured()):
        assert frame_metrics() == ("accuracy", "error", "selection_rate", "true_positive_rate",
                                   "false_positive_rate")
        y, p, s = _rows(small=30)
        with pytest.warns(UtilityWarning):
            result = evaluate(Fixed(), p[:, None], y, s, epsilon=1.0, groups=["a", "b", "c"], random_state=0)
    ev = result["evaluation"]
    assert "unmeasured_parity" in result["fairness"]
    assert "unmeasured_parity" not in ev["intervals"]["fairness"]
    assert "unmeasured_parity" in ev["flags"]["notions"]


def test_registering_a_notion_leaves_the_built_in_notions_figures_unchanged():
    """Seeded noise: the built-in notions' figures are bit-identical with and without the test's notion when
    its rate adds no table (the frame's plan releases the full table either way)."""
    y, p, s = _rows()

    def run():
        with reproducible_noise(3), pytest.warns(Warning):
            return evaluate(Fixed(), p[:, None], y, s, epsilon=1.0, groups=["a", "b"], random_state=0)

    before = run()
    with registered_notion(TrueNegativeParity()):
        after = run()
    assert after["evaluation"]["noise_std"] == before["evaluation"]["noise_std"]  # the same plan and release
    assert {n: after["fairness"][n] for n in NOTIONS} == before["fairness"]
    assert {n: after["evaluation"]["intervals"]["fairness"][n] for n in NOTIONS} == \
        before["evaluation"]["intervals"]["fairness"]
    assert after["per_group_accuracy"] == before["per_group_accuracy"]
