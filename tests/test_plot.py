"""dpfair.plot on the Agg backend: the artists' data (lines, bars, error bars, labels), not pixels."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import dp_accounting as dpa  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.container import BarContainer, ErrorbarContainer  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

from dpfair import plot  # noqa: E402
from dpfair.datasets import make_synthetic  # noqa: E402
from dpfair.fairness import group_metrics  # noqa: E402
from dpfair.fairness.group_table import bootstrap_mean_interval  # noqa: E402
from dpfair.privacy import PrivacyLedger  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_import_dpfair_does_not_import_matplotlib():
    code = "import sys, dpfair, dpfair.fairness; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- tradeoff -------------------------------------------------------------------------------------

def result_jsons():
    """Result JSONs as `dpfair train` writes them (nested; a non-private run has epsilon null)."""
    rows = []
    for eps in (1.0, None):
        for lam in (0.0, 2.0):
            for seed in range(3):
                error = 0.15 + 0.02 * lam + 0.001 * seed + (0.01 if eps else 0.0)
                rows.append({"method": "dp-fermi", "seed": seed, "epsilon": eps, "test_error": error,
                             "hyperparameters": {"lam": lam, "epsilon": eps or 1.0},
                             "fairness": {"demographic_parity": 0.2 - 0.05 * lam + 0.01 * seed,
                                          "equalized_odds": 0.1}})
    return rows


def test_tradeoff_from_result_jsons_means_and_std():
    rows = result_jsons()
    ax = plot.tradeoff(rows, y="demographic_parity", by="lam")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["epsilon = 1", "epsilon = ∞"]
    assert ax.get_xlabel() == "test error" and ax.get_ylabel() == "demographic parity"
    frame = pd.json_normalize(rows)
    frame["epsilon"] = frame["epsilon"].fillna(np.inf)
    for container, (eps, curve) in zip(ax.containers, frame.groupby("epsilon")):
        line = container.lines[0]  # the data line of an errorbar
        stats = curve.groupby("hyperparameters.lam")[["test_error", "fairness.demographic_parity"]].agg(["mean", "std"])
        np.testing.assert_allclose(line.get_xdata(), stats[("test_error", "mean")])
        np.testing.assert_allclose(line.get_ydata(), stats[("fairness.demographic_parity", "mean")])
        # error bars: one vertical segment per point, ± one standard deviation of the seeds
        segments = [np.asarray(s) for s in container.lines[2][-1].get_segments()]
        np.testing.assert_allclose([s[1, 1] - s[0, 1] for s in segments],
                                   2 * stats[("fairness.demographic_parity", "std")])


def test_tradeoff_interval_is_the_bootstrap_of_the_seed_mean():
    rows = result_jsons()
    ax = plot.tradeoff(rows, y="demographic_parity", by="lam", hue=None, spread="interval", random_state=0)
    assert ax.get_legend() is None
    frame = pd.json_normalize(rows)
    points = frame[frame["hyperparameters.lam"] == 0.0][["test_error", "fairness.demographic_parity"]].to_numpy()
    mean, lower, upper = bootstrap_mean_interval(points, random_state=0)
    segment = np.asarray(ax.containers[0].lines[2][-1].get_segments()[0])  # y bars, first λ
    np.testing.assert_allclose(segment[:, 1], [lower[1], upper[1]])
    assert lower[1] <= mean[1] <= upper[1]


def test_tradeoff_pareto_front_and_names_as_hue():
    rows = pd.DataFrame({"method": ["a"] * 5 + ["b"] * 2, "error": [0.1, 0.2, 0.15, 0.3, 0.25, 0.1, 0.2],
                         "dp": [0.5, 0.2, 0.4, 0.1, 0.3, 0.3, 0.1]})
    ax = plot.tradeoff(rows, x="error", y="dp", hue="method", pareto=True, spread=None)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["method = a", "method = b"]
    front = ax.containers[0].lines[0]
    dominated = [line for line in ax.get_lines() if line.get_alpha() == 0.35][0]
    np.testing.assert_allclose(front.get_xydata(), [[0.1, 0.5], [0.15, 0.4], [0.2, 0.2], [0.3, 0.1]])
    np.testing.assert_allclose(dominated.get_xydata(), [[0.25, 0.3]])  # beaten by (0.2, 0.2)
    assert dominated.get_linestyle() == "None"
    np.testing.assert_array_equal(plot.pareto_front([0.1, 0.2, 0.15, 0.3, 0.25], [0.5, 0.2, 0.4, 0.1, 0.3]),
                                  [0, 2, 1, 3])


def test_tradeoff_benchmark_csv_rows_draw_on_a_given_axes():
    rows = pd.DataFrame({"epsilon": [1, 1, 3, 3], "lam": [0, 1, 0, 1], "error": [0.2, 0.25, 0.18, 0.22],
                         "dp": [0.2, 0.05, 0.2, 0.03]})
    fig, ax = plt.subplots()
    assert plot.tradeoff(rows, x="error", y="dp", by="lam", ax=ax) is ax
    assert [c.lines[0].get_xdata().tolist() for c in ax.containers] == [[0.2, 0.25], [0.18, 0.22]]


@pytest.mark.parametrize("kwargs, message", [
    ({"y": "violation"}, "y='violation' is not a column of results; columns: .*fairness.demographic_parity"),
    ({"y": "demographic_parity", "spread": "sem"}, "spread must be one of"),
    ({"y": "demographic_parity", "x": "method"}, "x column 'method' holds no numbers"),
    ({"y": "demographic_parity", "ax": "left"}, "ax must be a matplotlib Axes"),
])
def test_tradeoff_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        plot.tradeoff(result_jsons(), **kwargs)


def test_tradeoff_empty_or_not_results():
    with pytest.raises(ValueError, match="results is empty"):
        plot.tradeoff([])
    with pytest.raises(ValueError, match="a DataFrame or a list of dicts"):
        plot.tradeoff([1, 2])
    with pytest.raises(ValueError, match=r"y='v' is not a column of results; it matches \['a.v', 'b.v'\], name one"):
        plot.tradeoff([{"x": 1, "a": {"v": 1}, "b": {"v": 2}}], x="x", y="v", hue=None)


# ---- group_bars -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 600), rng.integers(0, 3, 600)
    runs = [np.where(rng.random(600) < 0.2 + 0.1 * s, 1 - y, y) for _ in range(5)]
    return group_metrics(y, runs, s, group_names=["A", "B", "C"], n_bootstrap=200, random_state=0)


def test_group_bars_heights_intervals_and_overall(table):
    ax = plot.group_bars(table, "true_positive_rate")
    acc = table["true_positive_rate"]
    bars = next(c for c in ax.containers if isinstance(c, BarContainer))
    errorbars = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))
    np.testing.assert_allclose([b.get_height() for b in bars], acc.value.iloc[:3])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B", "C"]
    segments = [np.asarray(s) for s in errorbars.lines[2][0].get_segments()]
    np.testing.assert_allclose([s[:, 1] for s in segments], acc[["lower", "upper"]].iloc[:3].to_numpy())
    overall = [line for line in ax.get_lines() if line.get_linestyle() == "--"][0]
    np.testing.assert_allclose(overall.get_ydata(), acc.loc["overall", "value"])
    assert ax.get_ylabel() == "true positive rate"
    assert ax.get_title() == "true positive rate by group, 95% bootstrap interval over 5 runs"
    assert any("overall" in t.get_text() for t in ax.get_legend().get_texts())


def test_group_bars_bad_input(table):
    with pytest.raises(ValueError, match="metric='auc' is not in the table; its metrics: accuracy"):
        plot.group_bars(table, "auc")
    with pytest.raises(ValueError, match="must be a table of dpfair.fairness.group_metrics"):
        plot.group_bars(table["accuracy"], "accuracy")


# ---- privacy_spent and PrivacyLedger.epsilon_curve ------------------------------------------------

def dpfermi_like_ledger():
    ledger = PrivacyLedger("sensitive")
    ledger.record(dpa.GaussianDpEvent(50.0), "group counts")
    ledger.record(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(3.0)), "step", 100)
    return ledger


# ---- group_accuracy -------------------------------------------------------------------------------

def test_group_accuracy_bars_are_seed_means_with_their_std():
    rows = [{"method": "dp-fermi", "lam": 1.0, "seed": s, "per_group_accuracy": {"F": f, "M": m}}
            for s, (f, m) in enumerate([(0.6, 0.8), (0.7, 0.9)])]
    rows.append({"method": "erm", "lam": float("nan"), "seed": 0, "per_group_accuracy": {"F": 0.5, "M": 0.95}})
    ax = plot.group_accuracy(pd.DataFrame(rows), label=["method", "lam"])
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [b.get_label() for b in bars] == ["dp-fermi, 1", "erm, none"]
    np.testing.assert_allclose([r.get_height() for r in bars[0]], [0.65, 0.85])
    np.testing.assert_allclose([r.get_height() for r in bars[1]], [0.5, 0.95])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["F", "M"]
    spread = next(c for c in ax.containers if isinstance(c, ErrorbarContainer))  # only the two-seed model has one
    segments = spread.lines[2][0].get_segments()
    np.testing.assert_allclose([s[1][1] - s[0][1] for s in segments], 2 * 0.1 / np.sqrt(2))
    # result JSONs, flattened: the same bars
    flat = plot.group_accuracy(rows[:2], label="method")
    np.testing.assert_allclose([r.get_height() for r in flat.containers[1]], [0.65, 0.85])
    with pytest.raises(ValueError, match="no 'per_group_accuracy' column"):
        plot.group_accuracy([{"method": "erm", "error": 0.1}])


def test_epsilon_curve_cuts_entries_and_ends_at_the_ledgers_epsilon():
    ledger, delta = dpfermi_like_ledger(), 1e-6
    releases, eps = ledger.epsilon_curve(delta, points=4)
    assert releases == [0, 25, 50, 76, 101]
    assert eps[0] == 0.0 and eps[-1] == ledger.epsilon(delta)
    assert all(b >= a for a, b in zip(eps, eps[1:]))
    cut = PrivacyLedger("sensitive")  # 25 releases: the counts and 24 steps
    cut.record(dpa.GaussianDpEvent(50.0), "group counts")
    cut.record(dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(3.0)), "step", 24)
    assert eps[1] == cut.epsilon(delta)
    assert PrivacyLedger("record").epsilon_curve(delta) == ([0], [0.0])
    with pytest.raises(ValueError, match="points must be a positive integer"):
        ledger.epsilon_curve(delta, points=0)


def test_privacy_spent_of_a_ledger():
    ledger = dpfermi_like_ledger()
    ax = plot.privacy_spent(ledger, delta=1e-6, points=4)
    releases, eps = ledger.epsilon_curve(1e-6, points=4)
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), releases)
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), eps)
    assert ax.get_ylabel() == "ε spent (δ = 1e-06)"
    with pytest.raises(ValueError, match="delta is needed with a PrivacyLedger"):
        plot.privacy_spent(ledger)


def test_privacy_spent_of_a_fitted_estimator_ends_at_its_epsilon():
    from dpfair.algorithms import DPFERMIClassifier, ERMClassifier

    X, y, s = make_synthetic(n_samples=400, random_state=0)[:3]
    # half of ε on the group counts (default 5 %): their noise then does not make a group of ~180 look possibly
    # under 30 (a SmallGroupWarning); the ledger holds the same releases
    est = DPFERMIClassifier(epsilon=1.0, epochs=2, groups=2, proportions_budget=0.5, random_state=0)
    est.fit(X, y, sensitive_features=s)
    line = plot.privacy_spent(est, points=3).get_lines()[0]
    eps = line.get_ydata()
    assert eps[0] == 0.0 and np.all(np.diff(eps) >= 0)
    assert eps[-1] == est.privacy_spent_[0]
    assert line.get_xdata()[-1] == sum(e.count for e in est.privacy_ledger_.entries)
    with pytest.raises(NotFittedError, match="DPFERMIClassifier is not fitted"):
        plot.privacy_spent(DPFERMIClassifier())
    erm = ERMClassifier().fit(X, y, sensitive_features=s)
    with pytest.raises(ValueError, match="ERMClassifier is not private"):
        plot.privacy_spent(erm)
    with pytest.raises(ValueError, match="a fitted dpfair estimator or a PrivacyLedger"):
        plot.privacy_spent([1, 2])
