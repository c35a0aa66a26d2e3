"""group_metrics: values by hand and against fairlearn, bootstrap intervals over rows and runs, bad inputs."""

import numpy as np
import pandas as pd
import pytest
from fairlearn.metrics import MetricFrame, count, false_positive_rate, selection_rate, true_positive_rate
from sklearn.metrics import accuracy_score, precision_score

from dpfair.fairness import group_metrics
from dpfair.fairness.group_table import bootstrap_mean_interval

Z975 = 1.959964  # standard normal 97.5 % point


def predictions(seed, y, s, flip=0.2):
    """Predictions that flip y more often in higher groups (so groups differ), one draw per seed."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(len(y)) < flip + 0.1 * s, 1 - y, y)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 2000
    return rng.integers(0, 2, n), rng.integers(0, 3, n)


def test_values_by_hand():
    y = np.array([1, 1, 0, 0, 1, 0, 0, 0])
    p = np.array([1, 0, 0, 1, 1, 1, 0, 0])
    s = np.array(["a"] * 4 + ["b"] * 4)
    table = group_metrics(y, p, s, n_bootstrap=50, random_state=0)
    assert list(table.index) == ["a", "b", "overall", "difference"]
    assert list(table.columns.get_level_values(0).unique()) == [
        "accuracy", "selection_rate", "true_positive_rate", "false_positive_rate", "count"]
    values = table.xs("value", axis=1, level="statistic")
    expected = pd.DataFrame(
        [[2 / 4, 2 / 4, 1 / 2, 1 / 2, 4], [3 / 4, 2 / 4, 1, 1 / 3, 4], [5 / 8, 4 / 8, 2 / 3, 2 / 5, 8],
         [1 / 4, 0, 1 / 2, 1 / 2 - 1 / 3, 0]],
        index=values.index, columns=values.columns, dtype=float)
    pd.testing.assert_frame_equal(values, expected, check_exact=False, rtol=1e-12)


def test_values_match_fairlearn_and_callables_are_used(data):
    y, s = data
    p = predictions(1, y, s)
    table = group_metrics(y, p, s, metrics=["accuracy", "selection_rate", "tpr", "fpr", "count", precision_score],
                          n_bootstrap=20, random_state=0)
    frame = MetricFrame(metrics={"accuracy": accuracy_score, "selection_rate": selection_rate,
                                 "true_positive_rate": true_positive_rate,
                                 "false_positive_rate": false_positive_rate, "count": count,
                                 "precision_score": precision_score},
                        y_true=y, y_pred=p, sensitive_features=s)
    values = table.xs("value", axis=1, level="statistic")
    np.testing.assert_allclose(values.iloc[:3].to_numpy(), frame.by_group.to_numpy(dtype=float), rtol=1e-12)
    np.testing.assert_allclose(values.loc["overall"].to_numpy(), frame.overall.to_numpy(dtype=float), rtol=1e-12)
    np.testing.assert_allclose(values.loc["difference"].to_numpy(), frame.difference().to_numpy(dtype=float),
                               rtol=1e-12)


def test_row_bootstrap_contains_the_value_and_has_the_binomial_width(data):
    y, s = data
    p = predictions(2, y, s)
    table = group_metrics(y, p, s, group_names={0: "x", 1: "y", 2: "z"}, n_bootstrap=1000, random_state=0)
    assert table.attrs == {"interval": "rows", "n_runs": 1, "confidence": 0.95, "n_bootstrap": 1000}
    for metric in ("accuracy", "selection_rate", "true_positive_rate", "false_positive_rate"):
        t = table[metric]
        assert np.all((t.lower <= t.value) & (t.value <= t.upper)), metric
    # a rate of n rows resampled with replacement has std sqrt(r(1-r)/n): the 95 % interval is about 2·1.96 of it;
    # 1000 resamples estimate the 2.5 % and 97.5 % points to a few percent
    acc = table["accuracy"]
    for name, g in zip("xyz", range(3)):
        n_g = np.sum(s == g)
        r = acc.loc[name, "value"]
        assert acc.loc[name, "upper"] - acc.loc[name, "lower"] == pytest.approx(
            2 * Z975 * np.sqrt(r * (1 - r) / n_g), rel=0.15)
    # stratified: each group keeps its size, so counts do not move
    assert np.all(table["count"].lower == table["count"].upper)
    assert table.loc["overall", ("count", "value")] == len(y)


def test_runs_average_and_interval_narrows_with_more_runs(data):
    y, s = data
    runs = [predictions(seed, y, s) for seed in range(40)]
    table = group_metrics(y, runs, s, metrics=["accuracy"], n_bootstrap=2000, random_state=0)
    assert table.attrs["interval"] == "runs" and table.attrs["n_runs"] == 40
    per_run = np.array([[np.mean(p[s == g] == y[s == g]) for g in range(3)] for p in runs])
    np.testing.assert_allclose(table[("accuracy", "value")].iloc[:3], per_run.mean(0), rtol=1e-12)
    gaps = per_run.max(1) - per_run.min(1)  # each run's difference, then their mean
    assert table.loc["difference", ("accuracy", "value")] == pytest.approx(gaps.mean(), rel=1e-12)
    acc = table["accuracy"]
    assert np.all((acc.lower <= acc.value) & (acc.value <= acc.upper))
    # the bootstrap of a mean of R runs: width ≈ 2·1.96·sd/sqrt(R), sd the runs' plug-in std
    width = lambda t: (t[("accuracy", "upper")] - t[("accuracy", "lower")]).iloc[:3].to_numpy()  # noqa: E731
    np.testing.assert_allclose(width(table), 2 * Z975 * per_run.std(0) / np.sqrt(40), rtol=0.15)
    # the same spread over 4× the runs: the interval halves
    ten = group_metrics(y, runs[:10], s, metrics=["accuracy"], n_bootstrap=2000, random_state=0)
    forty = group_metrics(y, runs[:10] * 4, s, metrics=["accuracy"], n_bootstrap=2000, random_state=0)
    np.testing.assert_allclose(width(forty), width(ten) / 2, rtol=0.15)


def test_runs_as_a_2d_array_and_per_run_test_sets(data):
    y, s = data
    runs = np.stack([predictions(seed, y, s) for seed in range(3)])
    as_list = group_metrics(y, list(runs), s, n_bootstrap=100, random_state=3)
    as_array = group_metrics(y, runs, s, n_bootstrap=100, random_state=3)
    pd.testing.assert_frame_equal(as_list, as_array)
    halves = [slice(0, 1000), slice(1000, 2000), slice(500, 1500)]
    table = group_metrics([y[h] for h in halves], [r[h] for r, h in zip(runs, halves)], [s[h] for h in halves],
                          metrics=["accuracy"], n_bootstrap=100, random_state=0)
    expected = np.mean([np.mean(r[h] == y[h]) for r, h in zip(runs, halves)])
    assert table.loc["overall", ("accuracy", "value")] == pytest.approx(expected, rel=1e-12)


def test_reproducible_with_random_state(data):
    y, s = data
    p = predictions(4, y, s)
    a = group_metrics(y, p, s, n_bootstrap=100, random_state=7)
    pd.testing.assert_frame_equal(a, group_metrics(y, p, s, n_bootstrap=100, random_state=7))


def test_undefined_rate_is_nan_and_skipped_by_the_difference():
    y = np.array([1, 0, 1, 0, 0, 0])
    p = np.array([1, 0, 0, 1, 0, 1])
    s = np.array([0, 0, 0, 1, 1, 1])  # group 1 has no positives: its TPR is undefined
    table = group_metrics(y, p, s, metrics=["tpr", "fpr"], n_bootstrap=50, random_state=0)
    assert np.isnan(table.loc["1", ("true_positive_rate", "value")])
    assert table.loc["difference", ("true_positive_rate", "value")] == 0.0
    assert table.loc["difference", ("false_positive_rate", "value")] == pytest.approx(2 / 3 - 0)


def test_string_labels_need_a_positive_label():
    y = np.array(["no", "yes", "yes", "no"] * 5)
    p = np.array(["no", "yes", "no", "no"] * 5)
    s = np.array([0, 1] * 10)
    with pytest.raises(ValueError, match="positive_label=1 is not one of the labels"):
        group_metrics(y, p, s, n_bootstrap=10)
    table = group_metrics(y, p, s, metrics=["tpr"], positive_label="yes", n_bootstrap=10, random_state=0)
    assert table.loc["overall", ("true_positive_rate", "value")] == pytest.approx(0.5)
    assert list(group_metrics(y, p, s, metrics=["accuracy"], n_bootstrap=10).columns.levels[0]) == ["accuracy"]


def test_bootstrap_mean_interval():
    values = np.array([[1.0, np.nan], [2.0, 4.0], [3.0, 6.0]])
    mean, lower, upper = bootstrap_mean_interval(values, n_bootstrap=500, random_state=0)
    np.testing.assert_allclose(mean, [2.0, 5.0])
    assert np.all(lower <= mean) and np.all(mean <= upper)
    assert lower[0] >= 1.0 and upper[0] <= 3.0


@pytest.mark.parametrize("kwargs, message", [
    ({"y_pred": [0, 1]}, "y_pred has 2 entries but y_true has 6"),
    ({"y_pred": [[0, 1, 0, 1, 0, 1], [0, 1]]}, r"y_pred\[1\] has 2 entries but y_true\[1\] has 6"),
    ({"y_true": [[0] * 6] * 3, "y_pred": [[0] * 6] * 2}, "y_true has 3 vectors but y_pred has 2 runs"),
    ({"s": [0] * 6}, "single group"),
    ({"metrics": ["accuracy", "auc"]}, "unknown name 'auc'"),
    ({"metrics": []}, "metrics is empty"),
    ({"metrics": ["tpr", "true_positive_rate"]}, "twice"),
    ({"metrics": [3]}, "names or callables"),
    ({"metrics": {"mean": lambda t, p: np.array([1.0, 2.0])}}, "one number per group"),
    ({"confidence": 1.5}, "confidence must be a number in"),
    ({"n_bootstrap": 0}, "n_bootstrap must be > 0"),
    ({"random_state": "seed"}, "random_state must be"),
    ({"group_names": ["a"]}, "group_names has 1 names but s has 2 groups"),
    ({"group_names": ["a", "overall"]}, "group_names must be distinct and not 'overall'"),
])
def test_bad_input(kwargs, message):
    args = {"y_true": [0, 1, 1, 0, 1, 0], "y_pred": [0, 1, 0, 0, 1, 1], "s": [0, 0, 0, 1, 1, 1],
            "n_bootstrap": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        group_metrics(**args)
