"""PrivateMetricFrame: exact at ε = ∞, one accounted release, the noise it claims, intervals that cover."""

import math

import numpy as np
import pandas as pd
import pytest

from dpfair.exceptions import UtilityWarning
from dpfair.fairness.private_metric_frame import METRICS, PrivateMetricFrame
from dpfair.privacy import Part, PrivacyPlan, max_neighbour_distance, reproducible_noise

RATES = ["selection_rate", "true_positive_rate", "false_positive_rate", "accuracy"]


def _random_data(n, groups, seed, p_pos=0.4):
    rng = np.random.default_rng(seed)
    s = rng.choice(groups, size=n)
    y = (rng.random(n) < p_pos).astype(int)
    y_pred = np.where(rng.random(n) < 0.8, y, 1 - y)
    return y, y_pred, s


def test_exact_at_infinite_epsilon_equals_fairlearn():
    fm = pytest.importorskip("fairlearn.metrics")
    from sklearn.metrics import accuracy_score, zero_one_loss

    y, p, s = _random_data(3000, ["a", "b", "c"], seed=1)
    fns = {"selection_rate": fm.selection_rate, "true_positive_rate": fm.true_positive_rate,
           "false_positive_rate": fm.false_positive_rate, "true_negative_rate": fm.true_negative_rate,
           "false_negative_rate": fm.false_negative_rate, "accuracy": accuracy_score, "error": zero_one_loss,
           "count": fm.count}
    ref = fm.MetricFrame(metrics=fns, y_true=y, y_pred=p, sensitive_features=s)
    ours = PrivateMetricFrame(list(fns), y, p, s, epsilon=math.inf, n_bootstrap=10, random_state=0)
    assert ours.privacy_spent_ == (math.inf, 0.0)
    assert np.array_equal(ours.noisy_table_, ours.table_)  # no noise at all
    assert list(ours.by_group.index) == list(ref.by_group.index)
    np.testing.assert_allclose(ours.by_group[list(fns)].to_numpy(float), ref.by_group[list(fns)].to_numpy(float),
                               rtol=0, atol=1e-12)
    for ours_s, ref_s in [(ours.overall, ref.overall), (ours.difference(), ref.difference()),
                          (ours.ratio(), ref.ratio()), (ours.group_min(), ref.group_min()),
                          (ours.group_max(), ref.group_max())]:
        np.testing.assert_allclose(ours_s[list(fns)].to_numpy(float), ref_s[list(fns)].to_numpy(float),
                                   rtol=0, atol=1e-12)
    assert ours.demographic_parity_difference == pytest.approx(
        fm.demographic_parity_difference(y, p, sensitive_features=s), abs=1e-12)
    assert ours.equalized_odds_difference == pytest.approx(
        fm.equalized_odds_difference(y, p, sensitive_features=s), abs=1e-12)
    # groups may also be given (their order is the index's)
    given = PrivateMetricFrame("accuracy_score", y, p, s, groups=["c", "a", "b"], epsilon=math.inf, n_bootstrap=10)
    assert list(given.by_group.index) == ["c", "a", "b"]
    assert given.by_group.loc["a", "accuracy"] == pytest.approx(ref.by_group.loc["a", "accuracy"], abs=1e-12)


@pytest.mark.parametrize("unit, relation", [("sensitive", "REPLACE_ONE"), ("record", "ADD_OR_REMOVE_ONE")])
def test_one_accounted_release_spends_what_was_asked(unit, relation):
    y, p, s = _random_data(2000, [0, 1], seed=2)
    frame = PrivateMetricFrame(RATES, y, p, s, groups=[0, 1], epsilon=1.0, privacy_unit=unit, n_bootstrap=10)
    ledger = frame.privacy_ledger_
    assert ledger.relation.name == relation
    assert [(e.label, e.count) for e in ledger.entries] == [("contingency table", 1)]
    assert frame.privacy_plan_ == PrivacyPlan((Part("contingency table"),))
    assert frame.privacy_plan_.matches(ledger, {"contingency table": frame.noise_multiplier_})
    eps, delta = frame.privacy_spent_
    assert delta == 1.0 / 2000 ** 2
    # the calibration finds the smallest σ spending at most ε on the same accountant
    assert 0.97 <= eps <= 1.0
    assert frame.noise_std_ == pytest.approx(frame.noise_multiplier_ * (1 / math.sqrt(2) if unit == "sensitive" else 1))


@pytest.mark.parametrize("unit, bound", [("sensitive", 1 / math.sqrt(2)), ("record", 1.0)])
def test_table_sensitivity_is_within_the_bound(unit, bound):
    """The accountant's Gaussian event covers neighbours at L2 distance ≤ 2·bound (replace-one) or ≤ bound
    (add/remove): check the table's distance by changing every person of a small data set."""
    y, p, s = _random_data(30, [0, 1, 2], seed=3)
    X = p.reshape(-1, 1).astype(float)  # ŷ carried as a column, so that a record neighbour drops it too

    def table_x(X, y, s):
        return np.bincount((s * 2 + y) * 2 + X[:, 0].astype(int), minlength=12).astype(float)

    dist = max_neighbour_distance(table_x, X, y, s, unit=unit, n_groups=3)
    limit = 2 * bound if unit == "sensitive" else bound
    assert dist == pytest.approx(math.sqrt(2) if unit == "sensitive" else 1.0)
    assert dist <= limit + 1e-12


def test_noise_std_is_sigma_times_bound():
    # 20 releases of a 40-group table: 20·40·4 = 3,200 cells of noise, each N(0, std²) (reproducible noise,
    # a distinct stream per random_state). The sample std's relative standard error is 1/√(2·3200) ≈ 1.25 %:
    # a 5 % tolerance is 4 standard errors; the mean's is std/√3200 ≈ 1.8 % of std (tolerance 4 × 1.8 % = 7 %).
    groups = list(range(40))
    y, p, s = _random_data(4000, groups, seed=4)
    exact = PrivateMetricFrame("count", y, p, s, epsilon=math.inf, n_bootstrap=1).table_
    noise, std = [], None
    for r in range(20):
        frame = PrivateMetricFrame("count", y, p, s, groups=groups, epsilon=2.0, n_bootstrap=1, random_state=r)
        noise.append(frame.noisy_table_ - exact)
        std = frame.noise_std_
    noise = np.concatenate([z.ravel() for z in noise])
    assert noise.size == 3200
    assert np.std(noise) == pytest.approx(std, rel=0.05)
    assert abs(np.mean(noise)) < 0.07 * std


# Coverage: R = 200 intervals; if each covers with probability 0.95, the fraction covering has standard error
# √(0.95·0.05/200) ≈ 0.0154, so it lies within 0.95 ± 3·0.0154 ≈ ±0.046 unless the intervals are wrong.
R = 200
COVERAGE_TOL = 3 * math.sqrt(0.95 * 0.05 / R)


def _population_sample(n, rng):
    """2 groups (30 % in group 1); the prediction is 1 with probability 0.5 in group 0 and 0.4 in group 1,
    whatever y: the population's demographic-parity difference is 0.1."""
    s = (rng.random(n) < 0.3).astype(int)
    y = (rng.random(n) < 0.4).astype(int)
    p = (rng.random(n) < np.where(s == 1, 0.4, 0.5)).astype(int)
    return y, p, s


def test_intervals_cover_the_population_value():
    rng = np.random.default_rng(5)
    covered = 0
    for r in range(R):
        y, p, s = _population_sample(20_000, rng)
        frame = PrivateMetricFrame("selection_rate", y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=200,
                                   random_state=r)
        lo, hi = frame.demographic_parity_interval()
        covered += lo <= 0.1 <= hi
    assert abs(covered / R - 0.95) <= COVERAGE_TOL


def test_noise_only_intervals_cover_the_exact_value():
    # fixed rows, fresh noise per release: with sampling=False the interval targets the exact value on the rows.
    # n = 1,000 (≈ 300 rows in group 1, noise std ≈ 6 per cell) so that the noise, not rounding, sets the width.
    rng = np.random.default_rng(6)
    y, p, s = _population_sample(1_000, rng)
    exact = PrivateMetricFrame("selection_rate", y, p, s, epsilon=math.inf, n_bootstrap=1)
    truth = exact.demographic_parity_difference
    assert truth > 0.02  # away from 0, where |difference| would fold the interval
    covered = 0
    for r in range(R):
        frame = PrivateMetricFrame("selection_rate", y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=200,
                                   random_state=r, sampling=False)
        lo, hi = frame.demographic_parity_interval()
        covered += lo <= truth <= hi
    assert abs(covered / R - 0.95) <= COVERAGE_TOL


def test_tiny_group_is_flagged():
    rng = np.random.default_rng(7)
    s = np.array(["big"] * 2000 + ["tiny"] * 5)
    y = (rng.random(2005) < 0.5).astype(int)
    p = y.copy()
    with pytest.warns(UtilityWarning, match="group 'tiny'.*raise epsilon or merge small groups"):
        frame = PrivateMetricFrame(["selection_rate", "true_positive_rate"], y, p, s, groups=["big", "tiny"],
                                   epsilon=0.5, n_bootstrap=200, random_state=0)
    assert frame.flags.loc["tiny"].all()
    assert not frame.flags.loc["big"].any()


@pytest.mark.parametrize("kwargs, match", [
    ({"metrics": "precision"}, "unknown metric 'precision'"),
    ({"groups": None}, "groups is required at a finite epsilon"),
    ({"y_pred": [0, 1]}, "pass one entry per person"),
    ({"s": ["a", "b", "z", "a"]}, "sensitive_features has values outside groups"),
    ({"y_true": [0, 1, 2, 0]}, "y_true has values outside classes"),
    ({"epsilon": 0.0}, "epsilon must be > 0"),
    ({"privacy_unit": "person"}, "privacy_unit must be one of"),
])
def test_bad_input_gets_one_line(kwargs, match):
    args = {"metrics": "selection_rate", "y_true": [0, 1, 1, 0], "y_pred": [0, 1, 0, 0], "s": ["a", "b", "a", "b"],
            "groups": ["a", "b"], "epsilon": 1.0, "privacy_unit": "sensitive"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match) as info:
        PrivateMetricFrame(args["metrics"], args["y_true"], args["y_pred"], args["s"], groups=args["groups"],
                           epsilon=args["epsilon"], privacy_unit=args["privacy_unit"], n_bootstrap=10)
    assert "\n" not in str(info.value)


def test_metric_names_are_fairlearns():
    assert set(METRICS) == {"count", "selection_rate", "true_positive_rate", "false_positive_rate",
                            "true_negative_rate", "false_negative_rate", "accuracy", "error"}


def test_reproducible_noise_makes_the_release_deterministic():
    y, p, s = _random_data(500, [0, 1], seed=8)
    with reproducible_noise(11):
        a = PrivateMetricFrame(RATES, y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=50, random_state=3)
    with reproducible_noise(11):
        b = PrivateMetricFrame(RATES, y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=50, random_state=3)
    assert np.array_equal(a.noisy_table_, b.noisy_table_)
    pd.testing.assert_frame_equal(a.intervals, b.intervals)
