"""evaluate(..., epsilon=): the test part's figures by group released once through a PrivateMetricFrame (issue 30).

Without an evaluation budget the figures are exact and labelled a non-private diagnostic; with one, every figure that
reads the sensitive attribute is post-processing of one accounted release, computed by the same code (the notions'
table violation, the inequality indices of a table) as the exact figures.
"""

import math

import numpy as np
import pytest

from dpfair.algorithms import ERMClassifier
from dpfair.datasets import load_dataset
from dpfair.exceptions import UtilityWarning
from dpfair.experiments.evaluate import NON_PRIVATE_NOTE, evaluate
from dpfair.fairness import fairness_summary, get_notion, notion_names
from dpfair.fairness.notions import contingency_table


@pytest.fixture(scope="module")
def fitted():
    data = load_dataset("adult", random_state=0)
    est = ERMClassifier(groups=data.n_groups, classes=data.n_classes)
    est.fit(data.X_train, data.y_train, sensitive_features=data.s_train)
    return est, data


def _figures(result):
    return {k: v for k, v in result.items() if k != "evaluation"}


def test_without_a_budget_the_figures_are_exact_and_labelled(fitted):
    est, data = fitted
    result = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names)
    sizes = {g: int(np.sum(data.s_test == i)) for i, g in enumerate(data.group_names)}
    assert result["evaluation"] == {"private": False, "note": NON_PRIVATE_NOTE, "group_sizes": sizes}
    y_pred = est.predict(data.X_test)
    assert result["fairness"] == fairness_summary(data.y_test, y_pred, data.s_test)
    assert result["error"] == float(np.mean(y_pred != data.y_test))
    assert list(result["per_group_accuracy"]) == ["Female", "Male"]


def test_at_infinite_epsilon_the_table_path_gives_the_exact_figures(fitted):
    est, data = fitted
    exact = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names)
    through_table = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, epsilon=math.inf)
    assert through_table["evaluation"]["private"] is False and "note" in through_table["evaluation"]
    for key in ("n", "error", "fairness"):
        assert through_table[key] == exact[key]
    for key in ("per_group_accuracy", "accuracy_inequality"):
        assert through_table[key] == pytest.approx(exact[key], rel=1e-12, abs=1e-15)


def test_a_finite_budget_is_one_accounted_release_of_every_figure_by_group(fitted):
    est, data = fitted
    exact = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names)
    result = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, epsilon=1.0, random_state=0)
    ev = result["evaluation"]
    assert ev["private"] is True and ev["unit"] == "sensitive"
    assert 0 < ev["epsilon"] <= 1.0 and ev["delta"] == 0.0  # the Laplace release below is pure ε-DP
    assert len(ev["privacy_ledger"]) == 1 and ev["privacy_ledger"][0]["count"] == 1  # one release
    # the frame's mechanism="auto": two groups at ε = 1, δ = 1/n² pick Laplace (smaller noise; public inputs only)
    assert ev["privacy_ledger"][0]["mechanism"] == "laplace"
    # the error reads no group: exact under the sensitive unit (y and ŷ public)
    assert result["error"] == exact["error"]
    # the figures by group are noisy, within a few noise stds of the exact ones: adult's test part has ~3,700 women
    # and ~7,600 men; a cell's noise std ~7 moves a rate by < 0.01 at 5 stds
    assert result["fairness"] != exact["fairness"]
    for notion in notion_names():
        assert result["fairness"][notion] == pytest.approx(exact["fairness"][notion], abs=0.03)
    assert result["per_group_accuracy"] == pytest.approx(exact["per_group_accuracy"], abs=0.01)
    # intervals for every notion (two labels) and every group, flags by metric
    assert set(ev["intervals"]["fairness"]) == set(notion_names())
    for notion, (lo, hi) in ev["intervals"]["fairness"].items():
        assert lo <= hi
    assert set(ev["intervals"]["per_group_accuracy"]) == {"Female", "Male"}
    assert ev["flags"]["accuracy"] == [] and ev["flags"]["notions"] == []


def test_the_private_figures_are_the_notions_table_violations_of_one_released_table(fitted, monkeypatch):
    """The figures are post-processing of the released table: recomputed from the frame's table_ they agree."""
    import dpfair.measurement.frame as pmf

    est, data = fitted
    frames = []
    original = pmf.PrivateMetricFrame

    class Spy(original):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            frames.append(self)

    monkeypatch.setattr(pmf, "PrivateMetricFrame", Spy)
    result = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, epsilon=0.5)
    (frame,) = frames
    classes = np.asarray(frame.classes_)
    for notion in notion_names():
        assert result["fairness"][notion] == get_notion(notion).table_violation(frame.table_, classes,
                                                                               positive_label=classes[1])


def test_the_record_unit_releases_the_error_too(fitted):
    est, data = fitted
    exact = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names)
    result = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, epsilon=1.0,
                      privacy_unit="record")
    ev = result["evaluation"]
    assert ev["unit"] == "record" and ev["epsilon"] <= 1.0
    assert result["error"] != exact["error"]
    assert result["error"] == pytest.approx(exact["error"], abs=0.01)
    lo, hi = ev["intervals"]["error"]
    assert lo <= result["error"] <= hi


def test_the_groups_are_the_public_list_never_read_off_the_rows(fitted):
    est, data = fitted
    with pytest.raises(ValueError, match="public list of groups"):
        evaluate(est, data.X_test, data.y_test, data.s_test, epsilon=1.0)
    # a declared group with no test row is still a row of the released table (its figures flagged, not dropped)
    keep = data.s_test == 0
    with pytest.warns(UtilityWarning):
        result = evaluate(est, data.X_test[keep], data.y_test[keep], data.s_test[keep], data.group_names,
                          epsilon=1.0)
    assert set(result["per_group_accuracy"]) == {"Female", "Male"}
    assert "Male" in result["evaluation"]["flags"]["accuracy"]
    assert set(result["evaluation"]["flags"]["notions"]) == set(notion_names())  # each compares the empty group


@pytest.mark.parametrize("notion", notion_names())
def test_a_notions_table_violation_is_its_violation_on_rows(notion):
    rng = np.random.default_rng(0)
    y, y_pred, s = rng.integers(0, 3, 500), rng.integers(0, 3, 500), rng.integers(0, 4, 500)
    table = contingency_table(y, y_pred, s, 3, 4)
    for convention in ("pairwise", "marginal"):
        assert get_notion(notion).table_violation(table, np.arange(3), convention, 1) == \
            get_notion(notion).violation(y, y_pred, s, convention, 1)
