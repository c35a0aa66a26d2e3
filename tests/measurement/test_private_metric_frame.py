"""PrivateMetricFrame: exact at ε = ∞, one accounted release, the noise it claims, intervals that cover."""

import math

import numpy as np
import pandas as pd
import pytest

from dpfair.exceptions import UtilityWarning
from dpfair.measurement.plan import (
    FULL,
    PREDICTIONS,
    SCORES,
    SQUARED,
    MeasurementPlan,
)
from dpfair.measurement.frame import METRICS, PrivateMetricFrame
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
    frame = PrivateMetricFrame(RATES, y, p, s, groups=[0, 1], epsilon=1.0, privacy_unit=unit, n_bootstrap=10,
                               mechanism="gaussian")
    ledger = frame.privacy_ledger_
    assert ledger.relation.name == relation
    assert [(e.label, e.count) for e in ledger.entries] == [("contingency table", 1)]
    assert frame.privacy_plan_ == PrivacyPlan((Part("contingency table"),))
    assert frame.privacy_plan_.matches(ledger, {"contingency table": frame.noise_multiplier_})
    eps, delta = frame.privacy_spent_
    assert delta == 1.0 / 2000 ** 2
    # the calibration finds the smallest σ spending at most ε on the same accountant
    assert 0.97 <= eps <= 1.0
    # two groups under "sensitive": group 0's slice only (public margins), L2 distance 1 = 2·bound, bound ½
    assert frame.noise_std_ == pytest.approx(frame.noise_multiplier_ * (0.5 if unit == "sensitive" else 1))


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


@pytest.mark.filterwarnings("ignore::dpfair.exceptions.UtilityWarning")
@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
@pytest.mark.parametrize("metrics, cells", [(RATES, 4), ("selection_rate", 2)])
def test_noise_std_is_sigma_times_bound(metrics, cells, mechanism):
    # 20 releases of a 40-group plan: RATES read the full table (20·40·4 = 3,200 cells of noise), demographic
    # parity the predictions' marginal (1,600 cells), each N(0, std_t²) (reproducible noise, a distinct stream per
    # random_state). Standardised by its table's std, the sample std's relative standard error is 1/√(2·N)
    # (≤ 1.8 %): a 7 % tolerance is ≥ 4 standard errors; the mean's is 1/√N ≤ 2.5 % (tolerance 4 × 2.5 % = 10 %).
    # Laplace (std √2·b, b = σ_t·bound, bound 1 under "sensitive": L1 distance 2): the sample std's relative
    # standard error is √(5/(4N)) ≤ 2.8 % (kurtosis 6): tolerance 10 %; E|X|/std is 1/√2 = 0.707 (Gaussian:
    # 0.798), with standard error √(½/N) ≤ 1.8 %: tolerance 0.055 tells them apart.
    groups = list(range(40))
    y, p, s = _random_data(4000, groups, seed=4)
    exact = PrivateMetricFrame(metrics, y, p, s, epsilon=math.inf, n_bootstrap=1)
    noise = []
    for r in range(20):
        frame = PrivateMetricFrame(metrics, y, p, s, groups=groups, epsilon=2.0, n_bootstrap=1, random_state=r,
                                   mechanism=mechanism)
        assert frame.measurement_plan_.tables == exact.measurement_plan_.tables  # public inputs only: one plan
        assert frame.mechanism_ == mechanism
        for t, released in frame.noisy_tables_.items():
            noise.append(((released - exact.noisy_tables_[t]) / frame.noise_stds_[t]).ravel())
            claimed = frame.noise_multipliers_[t] * (math.sqrt(2) if mechanism == "laplace" else 1 / math.sqrt(2))
            assert frame.noise_stds_[t] == pytest.approx(claimed)
    noise = np.concatenate(noise)
    assert noise.size == 20 * 40 * cells
    assert np.std(noise) == pytest.approx(1.0, rel=0.07 if mechanism == "gaussian" else 0.10)
    assert abs(np.mean(noise)) < 0.1
    assert np.mean(np.abs(noise)) == pytest.approx(1 / math.sqrt(2) if mechanism == "laplace" else
                                                   math.sqrt(2 / math.pi), abs=0.055)


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


def test_a_difference_of_zero_is_covered():
    """Two groups with exactly equal rates: max − min of noisy rates is always > 0, so a percentile interval of it
    never holds 0; the folded interval of the signed difference holds 0 whenever the signed one does (≈ 95 %)."""
    y = np.tile([0, 0, 1, 1], 250)
    p = np.tile([0, 1, 0, 1], 250)
    s = np.repeat([0, 1], 500)  # each group: the same 125 rows in every cell, every rate equal
    exact = PrivateMetricFrame(["selection_rate", "true_positive_rate"], y, p, s, epsilon=math.inf, n_bootstrap=1)
    assert exact.demographic_parity_difference == 0.0 and exact.difference()["true_positive_rate"] == 0.0
    covered = {"dp": 0, "tpr": 0}
    for r in range(R):
        frame = PrivateMetricFrame(["selection_rate", "true_positive_rate"], y, p, s, groups=[0, 1], epsilon=0.5,
                                   n_bootstrap=200, random_state=r, sampling=False, mechanism="gaussian")
        assert frame.demographic_parity_difference > 0.0  # the released figure is noisy
        lo, hi = frame.demographic_parity_interval()
        covered["dp"] += lo <= 0.0 <= hi
        lo, hi = frame.difference_interval().loc["true_positive_rate"]
        covered["tpr"] += lo <= 0.0 <= hi
    for fraction in covered.values():
        assert fraction / R >= 0.95 - COVERAGE_TOL


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


# ---- the plan: which tables, which split -------------------------------------------------------------------
def test_plan_for_demographic_parity_beats_the_full_table():
    # per group, the full table reads a selection rate with A = (1−p)²·2 + p²·2 = 1 (p = ½: the planning rate),
    # the predictions' marginal with A = (1−p)² + p² = ½: half the noise variance
    chosen, full = MeasurementPlan.choose(["selection_rate"], 2), MeasurementPlan.single_table(["selection_rate"], 2)
    assert chosen.tables == (PREDICTIONS,) and full.tables == (FULL,)
    assert chosen.variance() == pytest.approx(0.5) and full.variance() == pytest.approx(1.0)
    # several metrics: never worse than the one-table plan (it is a candidate)
    for metrics in (RATES, ["count", "selection_rate"], ["selection_rate", "mean_prediction"], list(METRICS)):
        for l in (2, 3):
            assert MeasurementPlan.choose(metrics, l).variance() <= MeasurementPlan.single_table(metrics, l).variance()
    y, p, s = _random_data(2000, [0, 1], seed=9)
    frame = PrivateMetricFrame("selection_rate", y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=10)
    assert [(e.label, e.count) for e in frame.privacy_ledger_.entries] == [(PREDICTIONS, 1)]
    # the table [g, y, ŷ] built from the released marginal keeps its ŷ-marginal (y spread evenly)
    np.testing.assert_allclose(frame.table_.sum(axis=1), np.clip(frame.noisy_tables_[PREDICTIONS], 0, None))


@pytest.mark.parametrize("unit", ["sensitive", "record"])
@pytest.mark.parametrize("metrics, classes", [(["selection_rate", "mean_prediction"], (0, 1)),
                                              (["count", "selection_rate"], (0, 1, 2))])
def test_a_plan_of_several_tables_spends_at_most_epsilon(unit, metrics, classes):
    rng = np.random.default_rng(10)
    n = 3000
    y, p, s = rng.choice(classes, n), rng.choice(classes, n), rng.choice([0, 1], n)
    frame = PrivateMetricFrame(metrics, y, p, s, groups=[0, 1], classes=classes, epsilon=1.0, privacy_unit=unit,
                               n_bootstrap=10, y_score=rng.random(n), mechanism="gaussian")
    plan = frame.measurement_plan_
    assert len(plan.tables) == 2 and sum(w for _, w in plan.weights) == pytest.approx(1.0)
    ledger = frame.privacy_ledger_
    assert sorted((e.label, e.count) for e in ledger.entries) == sorted((t, 1) for t in plan.tables)
    assert frame.privacy_plan_.matches(ledger, frame.noise_multipliers_)
    eps, delta = frame.privacy_spent_
    assert 0.97 <= eps <= 1.0 and delta == 1.0 / n ** 2
    assert frame.privacy_plan_.epsilon(frame.noise_multipliers_, delta, unit) <= 1.0
    # σ_t = σ/√w_t, and the composition is the one Gaussian of σ: (Σ σ_t⁻²)^(-1/2) = σ
    for t, w in plan.weights:
        assert frame.noise_multipliers_[t] == pytest.approx(frame.noise_multiplier_ / math.sqrt(w), rel=1e-9)
    one = PrivacyPlan((Part("one"),)).calibrate(1.0, delta, unit)["one"]
    assert one * (1 - 1e-9) <= frame.noise_multiplier_ <= one * 1.001


def test_marginal_plans_equal_fairlearn_at_infinite_epsilon():
    fm = pytest.importorskip("fairlearn.metrics")
    y, p, s = _random_data(3000, ["a", "b", "c"], seed=11)
    for metrics in (["selection_rate"], ["count"], ["count", "selection_rate"]):
        fns = {"selection_rate": fm.selection_rate, "count": fm.count}
        ref = fm.MetricFrame(metrics={m: fns[m] for m in metrics}, y_true=y, y_pred=p, sensitive_features=s)
        ours = PrivateMetricFrame(metrics, y, p, s, epsilon=math.inf, n_bootstrap=10, random_state=0)
        np.testing.assert_allclose(ours.by_group[metrics].to_numpy(float), ref.by_group[metrics].to_numpy(float),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours.overall[metrics].to_numpy(float), ref.overall[metrics].to_numpy(float),
                                   rtol=0, atol=1e-12)
    frame = PrivateMetricFrame("count", y, p, s, epsilon=math.inf, n_bootstrap=10)
    with pytest.raises(ValueError, match="selection_rate is not among the measured metrics"):
        _ = frame.demographic_parity_difference


@pytest.mark.parametrize("kwargs, match", [
    ({"y_score": None}, "mean_prediction needs y_score"),
    ({"y_score": [0.1, float("nan"), 0.3, 0.4]}, "y_score contains NaN or infinite values"),
    ({"y_score": [0.1, 0.2]}, "y_score"),
    ({"score_range": (1, 0)}, "score_range must be two finite numbers lo < hi"),
    ({"metrics": "selection_rate", "y_pred": None}, "y_pred is None; pass the predictions"),
])
def test_bad_score_input_gets_one_line(kwargs, match):
    args = {"metrics": "mean_prediction", "y_pred": [0, 1, 0, 0], "y_score": [0.1, 0.2, 0.3, 0.4],
            "score_range": (0, 1)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match) as info:
        PrivateMetricFrame(args["metrics"], [0, 1, 1, 0], args["y_pred"], ["a", "b", "a", "b"], groups=["a", "b"],
                           epsilon=1.0, y_score=args["y_score"], score_range=args["score_range"], n_bootstrap=10)
    assert "\n" not in str(info.value)


# ---- bounded continuous metrics ----------------------------------------------------------------------------
def test_score_metrics_equal_fairlearn_at_infinite_epsilon():
    fm = pytest.importorskip("fairlearn.metrics")
    from sklearn.metrics import brier_score_loss

    rng = np.random.default_rng(12)
    y, p, s = _random_data(3000, ["a", "b", "c"], seed=12)
    score = np.clip(0.3 * y + 0.7 * rng.random(3000), 0, 1)
    ref = fm.MetricFrame(metrics={"mean_prediction": fm.mean_prediction, "brier_score": brier_score_loss},
                         y_true=y, y_pred=score, sensitive_features=s)
    ours = PrivateMetricFrame(["mean_prediction", "brier_score_loss", "selection_rate"], y, p, s,
                              epsilon=math.inf, y_score=score, n_bootstrap=10)
    cols = ["mean_prediction", "brier_score"]
    np.testing.assert_allclose(ours.by_group[cols].to_numpy(float), ref.by_group[cols].to_numpy(float), atol=1e-12)
    np.testing.assert_allclose(ours.overall[cols].to_numpy(float), ref.overall[cols].to_numpy(float), atol=1e-12)
    np.testing.assert_allclose(ours.difference()[cols].to_numpy(float), ref.difference()[cols].to_numpy(float),
                               atol=1e-12)
    # scores are clipped to the public range: a range (-1, 2) leaves them, numpy's mean per group
    wide = PrivateMetricFrame("mean_prediction", y, None, s, epsilon=math.inf, y_score=3 * score - 1,
                              score_range=(-1, 2), n_bootstrap=10)
    for grp in ["a", "b", "c"]:
        assert wide.by_group.loc[grp, "mean_prediction"] == pytest.approx(np.mean((3 * score - 1)[s == grp]))


@pytest.mark.parametrize("unit", ["sensitive", "record"])
# 24 rows over 3 groups, deliberately: the neighbour search is exhaustive, so each group is too small to be confident
@pytest.mark.filterwarnings("ignore:too few people behind:dpfair.exceptions.UtilityWarning")
def test_score_sums_sensitivity_is_within_the_bound(unit):
    """Each released table of the frame (computed by the frame itself at ε = ∞) moves by at most its bound's
    distance (2·bound under replace-one, bound under add/remove) when one person changes, endpoints of the
    score range included."""
    rng = np.random.default_rng(13)
    n, lo, hi = 24, -1.0, 2.0
    y = rng.integers(0, 2, n)
    X = np.column_stack([rng.integers(0, 2, n), rng.uniform(lo, hi, n)])
    X[:4, 1] = [hi, lo, hi, lo]  # (score − y)² reaches its largest value, 4, at (2, y=0) and (−1, y=1)
    y[:4] = [0, 1, 1, 0]
    s = rng.integers(0, 3, n)
    metrics = ["selection_rate", "true_positive_rate", "count", "mean_prediction", "brier_score"]

    def tables(X, y, s):
        return PrivateMetricFrame(metrics, y, X[:, 0].astype(int), s, groups=[0, 1, 2], epsilon=math.inf,
                                  y_score=X[:, 1], score_range=(lo, hi), n_bootstrap=1).noisy_tables_

    frame_plan = PrivateMetricFrame(metrics, y, X[:, 0].astype(int), s, groups=[0, 1, 2], epsilon=math.inf,
                                    y_score=X[:, 1], score_range=(lo, hi), n_bootstrap=1).measurement_plan_
    bounds = frame_plan.bounds(unit, (lo, hi))
    assert bounds[SCORES] == pytest.approx(bounds[FULL] * 3) and bounds[SQUARED] == pytest.approx(bounds[FULL] * 4)
    for t in frame_plan.tables:
        dist = max_neighbour_distance(lambda X, y, s, t=t: tables(X, y, s)[t], X, y, s, unit=unit, n_groups=3)
        limit = 2 * bounds[t] if unit == "sensitive" else bounds[t]
        assert dist <= limit + 1e-9
        assert dist == pytest.approx(limit)  # the bound is reached: it is not loose
    # Laplace: the same tables in L1 (distance 2·bound under replace-one, bound under add/remove)
    laplace = frame_plan.using("laplace", unit=unit, groups=3).bounds(unit, (lo, hi))
    for t in frame_plan.tables:
        dist = max_neighbour_distance(lambda X, y, s, t=t: tables(X, y, s)[t], X, y, s, unit=unit, ord=1,
                                      n_groups=3)
        assert dist == pytest.approx(2 * laplace[t] if unit == "sensitive" else laplace[t])


def test_mean_score_intervals_cover():
    # noise only (sampling=False): the exact mean score of fixed rows, R = 200 releases (tolerance as above).
    # n = 400 (≈ 130 rows in group 1) at ε = 1: the noise dominates the interval.
    rng = np.random.default_rng(14)
    y, _, s = _population_sample(400, rng)
    score = np.clip(0.4 + 0.3 * y + 0.2 * rng.standard_normal(400), 0, 1)
    exact = PrivateMetricFrame("mean_prediction", y, None, s, epsilon=math.inf, y_score=score, n_bootstrap=1)
    truth = exact.by_group.loc[1, "mean_prediction"]
    covered = 0
    for r in range(R):
        frame = PrivateMetricFrame("mean_prediction", y, None, s, groups=[0, 1], epsilon=1.0, y_score=score,
                                   n_bootstrap=200, random_state=r, sampling=False)
        lo, hi = frame.intervals.loc[1, ("mean_prediction", "low")], frame.intervals.loc[1, ("mean_prediction",
                                                                                             "high")]
        covered += lo <= truth <= hi
    assert abs(covered / R - 0.95) <= COVERAGE_TOL


def test_mean_score_population_intervals_do_not_undercover():
    # with sampling: rows redrawn, the sum's sampling variance taken as Bhatia–Davis's bound m(c − m) per row
    # (conservative: the scores' variance is not released), so the coverage of the population mean (Beta(2, 3)
    # scores: mean 0.4) is at least nominal, within the tolerance above
    rng = np.random.default_rng(15)
    covered = 0
    for r in range(R):
        s = (rng.random(2000) < 0.3).astype(int)
        y = (rng.random(2000) < 0.4).astype(int)
        frame = PrivateMetricFrame("mean_prediction", y, None, s, groups=[0, 1], epsilon=1.0,
                                   y_score=rng.beta(2, 3, 2000), n_bootstrap=200, random_state=r)
        lo, hi = frame.intervals.loc[1, ("mean_prediction", "low")], frame.intervals.loc[1, ("mean_prediction",
                                                                                             "high")]
        covered += lo <= 0.4 <= hi
    assert covered / R >= 0.95 - COVERAGE_TOL


# ---- the mechanism and the public margins ------------------------------------------------------------------
def test_auto_picks_laplace_where_its_noise_is_smaller():
    # k = 2, ε = 1, δ = 1e-8 (sensitive): a Gaussian of the slice has std σ/2 ≈ 5; a Laplace of scale 1/ε on it
    # (L1 distance 1) has std √2·1 ≈ 1.41. The choice reads public inputs only (the same on any data).
    y, p, s = _random_data(4000, [0, 1], seed=16)
    common = {"groups": [0, 1], "epsilon": 1.0, "delta": 1e-8, "n_bootstrap": 10}
    auto = PrivateMetricFrame(RATES, y, p, s, **common)
    gauss = PrivateMetricFrame(RATES, y, p, s, mechanism="gaussian", **common)
    assert auto.mechanism_ == "laplace" and gauss.mechanism_ == "gaussian"
    assert auto.noise_std_ == pytest.approx(math.sqrt(2))  # b = Δ₁/ε = 1 (bound ½, L1 distance 1)
    assert auto.noise_std_ < gauss.noise_std_ / 3
    assert auto.measurement_plan_.noise_variance(1.0, 1e-8, "sensitive") < \
        gauss.measurement_plan_.noise_variance(1.0, 1e-8, "sensitive")
    other = PrivateMetricFrame(RATES, 1 - y, p, 1 - s, **common)
    assert other.measurement_plan_ == auto.measurement_plan_
    assert [(e.label, e.event) for e in auto.privacy_ledger_.entries] == [
        ("contingency table", Part("contingency table", mechanism="laplace").event(auto.noise_multiplier_))]
    with pytest.raises(ValueError, match="mechanism must be one of"):
        PrivateMetricFrame(RATES, y, p, s, mechanism="exponential", **common)


@pytest.mark.parametrize("unit", ["sensitive", "record"])
@pytest.mark.parametrize("accountant", ["pld", "rdp"])
def test_laplace_plan_of_several_tables_spends_at_most_epsilon(unit, accountant):
    rng = np.random.default_rng(17)
    n = 3000
    y, p, s = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 3, n)
    frame = PrivateMetricFrame(["selection_rate", "mean_prediction"], y, p, s, groups=[0, 1, 2], epsilon=1.0,
                               privacy_unit=unit, accountant=accountant, n_bootstrap=10, y_score=rng.random(n),
                               mechanism="laplace")
    plan = frame.measurement_plan_
    assert len(plan.tables) == 2 and plan.mechanism == "laplace" and not plan.public_margins
    assert frame.privacy_plan_.matches(frame.privacy_ledger_, frame.noise_multipliers_)
    eps, delta = frame.privacy_spent_
    assert 0.97 <= eps <= 1.0 + 1e-12 and delta == 0.0  # pure DP: claimed at δ = 0
    # pure composition: ε_t = Δ/σ_t (Δ = 2 replace-one, 1 add/remove) add up to ε (up to the accountant's slack)
    pure = 2.0 if unit == "sensitive" else 1.0
    assert sum(pure / v for v in frame.noise_multipliers_.values()) == pytest.approx(1.0, rel=0.02)
    # the split minimising Σ C_t·2b_t² under Σ ε_t = ε: ε_t ∝ (C_t·Δ_t²)^(1/3) (all Δ_t alike here)
    C = {}
    for m in plan.metrics:
        for t, a in plan.coefficients(m).items():
            C[t] = C.get(t, 0.0) + a
    roots = {t: c ** (1 / 3) for t, c in C.items()}
    assert dict(plan.weights) == pytest.approx({t: r / sum(roots.values()) for t, r in roots.items()})
    shares = {t: pure / v for t, v in frame.noise_multipliers_.items()}
    assert {t: e / sum(shares.values()) for t, e in shares.items()} == pytest.approx(dict(plan.weights))


@pytest.mark.filterwarnings("ignore::dpfair.exceptions.UtilityWarning")  # the empty group "c" below
@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_two_groups_release_one_slice_and_its_public_complement(mechanism):
    y, p, s = _random_data(3000, ["a", "b"], seed=18)
    frame = PrivateMetricFrame(RATES, y, p, s, groups=["a", "b"], epsilon=1.0, n_bootstrap=10, mechanism=mechanism)
    assert frame.measurement_plan_.public_margins
    exact = PrivateMetricFrame(RATES, y, p, s, groups=["a", "b"], epsilon=math.inf, n_bootstrap=1)
    for t, released in frame.noisy_tables_.items():
        total = exact.noisy_tables_[t].sum(axis=0)  # public under "sensitive": y and ŷ only
        np.testing.assert_allclose(released[1], total - released[0], rtol=0, atol=1e-9)
        assert not np.allclose(released[0], exact.noisy_tables_[t][0])  # the slice is noised
    # overall figures read the public totals: exact
    np.testing.assert_allclose(frame.overall.to_numpy(float), exact.overall.to_numpy(float), atol=1e-9)
    # the record unit, or three groups: every group released
    assert not PrivateMetricFrame(RATES, y, p, s, groups=["a", "b"], epsilon=1.0, n_bootstrap=10,
                                  privacy_unit="record").measurement_plan_.public_margins
    assert not PrivateMetricFrame(RATES, y, p, s, groups=["a", "b", "c"], epsilon=1.0,
                                  n_bootstrap=10).measurement_plan_.public_margins


@pytest.mark.parametrize("order", [2, 1])
def test_public_margin_slice_sensitivity(order):
    """The released slice (group 0's cells) moves by 1 in L1 and L2 when one person's s changes: 2·bound with
    bound ½, the bound the plan gives both mechanisms."""
    y, p, s = _random_data(30, [0, 1], seed=19)
    X = p.reshape(-1, 1).astype(float)

    def slice0(X, y, s):
        return np.bincount((s * 2 + y) * 2 + X[:, 0].astype(int), minlength=8).astype(float)[:4]

    dist = max_neighbour_distance(slice0, X, y, s, unit="sensitive", ord=order, n_groups=2)
    for mechanism in ("gaussian", "laplace"):
        plan = MeasurementPlan.single_table(RATES).using(mechanism, unit="sensitive", groups=2)
        assert dist == pytest.approx(2 * plan.bounds("sensitive")[FULL]) == pytest.approx(1.0)


@pytest.mark.parametrize("spread", [0.0, 0.1])
def test_more_than_two_groups_difference_interval_covers(spread):
    """Three groups, selection rates 0.3, 0.3 + spread/2, 0.3 + spread (true positive rates alike): the percentile
    interval of max − min covers a spread of 0 in about 1 % of releases (max − min of noisy rates is never near 0);
    the pairs' simultaneous lower bound covers it, and a spread away from 0, in ≥ 95 % (conservative)."""
    rows = []
    for g, rate in enumerate((0.3, 0.3 + spread / 2, 0.3 + spread)):
        for y in (0, 1):
            ones = round(300 * rate)
            rows += [(g, y, 1)] * ones + [(g, y, 0)] * (300 - ones)
    s, y, p = (np.array(c) for c in zip(*rows))
    metrics = ["selection_rate", "true_positive_rate", "false_positive_rate"]
    exact = PrivateMetricFrame(metrics, y, p, s, epsilon=math.inf, n_bootstrap=1)
    truth = {"dp": exact.demographic_parity_difference, "eo": exact.equalized_odds_difference}
    assert truth["dp"] == pytest.approx(spread, abs=0.005)
    covered = {"dp": 0, "eo": 0}
    for r in range(R):
        frame = PrivateMetricFrame(metrics, y, p, s, groups=[0, 1, 2], epsilon=0.5, n_bootstrap=200,
                                   random_state=r, sampling=False)
        for name, (lo, hi) in (("dp", frame.demographic_parity_interval()), ("eo", frame.equalized_odds_interval())):
            assert 0.0 <= lo <= hi
            covered[name] += lo <= truth[name] <= hi
    for fraction in covered.values():
        assert fraction / R >= 0.95 - COVERAGE_TOL


def test_two_groups_equalized_odds_of_zero_is_covered():
    """Two groups, every rate equal: the equalized-odds interval (a bound on each rate's absolute difference
    below) holds 0 in ≥ 95 % of releases, where the percentile interval of max(|ΔTPR|, |ΔFPR|) never would."""
    y = np.tile([0, 0, 1, 1], 250)
    p = np.tile([0, 1, 0, 1], 250)
    s = np.repeat([0, 1], 500)
    covered = 0
    for r in range(R):
        frame = PrivateMetricFrame(["true_positive_rate", "false_positive_rate"], y, p, s, groups=[0, 1],
                                   epsilon=0.5, n_bootstrap=200, random_state=r, sampling=False)
        lo, hi = frame.equalized_odds_interval()
        assert frame.equalized_odds_difference > 0.0
        covered += lo <= 0.0 <= hi
    assert covered / R >= 0.95 - COVERAGE_TOL


def test_intervals_that_would_exhaust_memory_are_refused_before_any_release():
    """10,000 declared groups × 1,000 replicates: one line naming the replicates that fit, and no noise drawn."""
    groups = [f"g{i}" for i in range(10_000)]
    y = np.tile([0, 1], 10)
    s = np.array(groups[:20], dtype=object)
    with pytest.raises(ValueError, match=r"10000 groups × 2 classes over 1000 replicates need about 2\.4 GiB.*"
                                         r"n_bootstrap \(--bootstrap\) to 838 or fewer, or merge groups"):
        PrivateMetricFrame(["selection_rate"], y, y, sensitive_features=s, epsilon=1.0, groups=groups)
    with pytest.warns(UtilityWarning, match="too few people behind selection_rate"):  # one person per group
        frame = PrivateMetricFrame(["selection_rate"], y, y, sensitive_features=s, epsilon=1.0, groups=groups[:20],
                                   n_bootstrap=50)
    assert frame.by_group.shape == (20, 1)


@pytest.mark.secret_noise  # the secure samplers draw from the OS CSPRNG: no seed
def test_secure_mode_draws_exact_noise_of_the_stated_std_and_spends_pure_epsilon():
    """secure_mode: the table's noise comes from the exact grid samplers; the frame states its (slightly raised) std,
    the ledger records pure DP, and the released counts scatter around the exact ones with that std (400 cells:
    the Laplace std's relative standard error is about √(5/1600) ≈ 0.06; unseeded, so 4.5 of them, a failure
    rate near 1e-5, still far below a factor-2 error)."""
    rng = np.random.default_rng(3)
    n = 2000
    y, p, s = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, 2, n)
    exact = np.bincount((s * 2 + y) * 2 + p, minlength=8).reshape(2, 2, 2)[0]
    rates = ["selection_rate", "true_positive_rate", "false_positive_rate"]  # released as the full table
    plain = PrivateMetricFrame(rates, y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=10)
    deviations = []
    for _ in range(100):
        frame = PrivateMetricFrame(rates, y, p, s, groups=[0, 1], epsilon=1.0, n_bootstrap=10,
                                   secure_mode=True)
        deviations.append(frame.noisy_tables_["contingency table"][0] - exact)
    assert frame.privacy_spent_ == (1.0, 0.0)
    assert frame.privacy_ledger_.epsilon(1e-9) == pytest.approx(1.0)
    std = frame.noise_stds_["contingency table"]
    assert plain.noise_stds_["contingency table"] <= std <= 1.01 * plain.noise_stds_["contingency table"]
    assert np.std(deviations) == pytest.approx(std, rel=4.5 * math.sqrt(5 / 1600))
    with pytest.raises(ValueError, match="secure_mode must be True or False"):
        PrivateMetricFrame(["selection_rate"], y, p, s, groups=[0, 1], epsilon=1.0, secure_mode="yes")
