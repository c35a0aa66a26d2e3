"""frontier(): Pareto fronts over seed means, their spread, and the lowest violation within a slack of the base.

Hand-made frames whose fronts are known exactly: each point has two seeds at mean ∓ d, so its mean is the
point, its standard deviation (ddof=1) is d·√2 and its range is [mean − d, mean + d].
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpfair.experiments.frontier import Frontier, frontier, pareto_front, point_ids, reference_errors

D = 0.004  # the half-range of each point's two seeds


def _rows(method, points, *, dataset="adult", preset=None, notion="demographic_parity", epsilon=1.0, d=D):
    """Two seeds per point: error and violation at mean ∓ d; ``points`` maps λ to (mean error, mean violation)."""
    rows = []
    for lam, (error, violation) in points.items():
        for seed, sign in ((0, -1), (1, 1)):
            rows.append({"dataset": dataset, "preset": preset, "notion": notion, "method": method, "epsilon": epsilon,
                         "seed": seed, "params": {} if lam is None else {"lam": lam},
                         "error": error + sign * d, "violation": violation + sign * d})
    return rows


# A: (0.10, 0.30), B: (0.12, 0.20), C: (0.15, 0.25) is beaten by B in both, D: (0.20, 0.05)
CURVE = {0.0: (0.10, 0.30), 0.5: (0.12, 0.20), 1.0: (0.15, 0.25), 2.0: (0.20, 0.05)}


def _erm(errors=(0.11, 0.12), dataset="adult", preset=None):
    return [{"dataset": dataset, "preset": preset, "notion": None, "method": "erm", "epsilon": math.nan, "seed": s,
             "params": {}, "error": e, "violation": math.nan} for s, e in enumerate(errors)]


def test_pareto_front_keeps_the_points_no_other_beats_in_both():
    x, y = [0.10, 0.12, 0.15, 0.20, 0.12], [0.30, 0.20, 0.25, 0.05, 0.20]
    assert pareto_front(x, y).tolist() == [0, 1, 3]  # the duplicate of point 1 and the dominated point 2 drop out
    assert pareto_front([0.1, 0.1], [0.2, 0.3]).tolist() == [0]  # same x, higher y: beaten
    assert pareto_front([], []).tolist() == []


def test_front_of_seed_means_with_their_spread():
    result = frontier(pd.DataFrame(_rows("dp-fermi", CURVE) + _erm()))
    assert isinstance(result, Frontier)
    points = result.points
    assert len(points) == 4  # erm has no violation of a targeted notion: not a point of any front
    assert [p["lam"] for p in points["params"]] == [0.0, 0.5, 1.0, 2.0]  # by error
    np.testing.assert_allclose(points["error"], [0.10, 0.12, 0.15, 0.20])
    np.testing.assert_allclose(points["violation"], [0.30, 0.20, 0.25, 0.05])
    np.testing.assert_allclose(points["error_std"], D * math.sqrt(2))
    np.testing.assert_allclose(points["violation_max"] - points["violation_min"], 2 * D)
    np.testing.assert_allclose(points["error_min"], points["error"] - D)
    assert points["n_seeds"].tolist() == [2, 2, 2, 2] and points["seeds"].map(tuple).tolist() == [(0, 1)] * 4
    assert points["pareto"].tolist() == [True, True, False, True]
    assert [p["lam"] for p in result.front["params"]] == [0.0, 0.5, 2.0]
    np.testing.assert_allclose(points["base"], 0.115)  # the mean error of the erm rows of the data set


def test_lowest_violation_within_each_slack_of_the_base():
    best = frontier(pd.DataFrame(_rows("dp-fermi", CURVE) + _erm()), slack=(0.0, 0.01, 0.03, 0.1)).best
    assert best["slack"].tolist() == [0.0, 0.01, 0.03, 0.1]
    np.testing.assert_allclose(best["threshold"], [0.115, 0.125, 0.145, 0.215])
    # error ≤ 0.115: A alone; ≤ 0.125 and ≤ 0.145: A and B, B is lower (C at 0.15 is out); ≤ 0.215: D
    assert [None if not f else p["lam"] for f, p in zip(best["feasible"], best["params"])] == [0.0, 0.5, 0.5, 2.0]
    np.testing.assert_allclose(best["violation"], [0.30, 0.20, 0.20, 0.05])
    np.testing.assert_allclose(best["violation_std"], D * math.sqrt(2))


def test_nothing_within_the_slack_and_no_base():
    rows = _rows("dp-fermi", CURVE)
    best = frontier(pd.DataFrame(rows + _erm(errors=(0.02, 0.04))), slack=0.01).best  # base 0.03: all beyond
    assert best["feasible"].tolist() == [False] and math.isnan(best["violation"].iloc[0])
    best = frontier(pd.DataFrame(rows)).best  # no erm run: no base, nothing is feasible
    assert not best["feasible"].any() and best["base"].isna().all()


def test_groups_are_separate_fronts_and_missing_keys_are_groups_too():
    rows = (_rows("dp-fermi", CURVE) + _rows("dp-fermi", {0.0: (0.3, 0.01)}, epsilon=3.0)
            + _rows("pf-ld", {0.0: (0.5, 0.5), 1.0: (0.4, 0.6)}) + _rows("dp-fermi", {0.0: (0.2, 0.2)}, preset="dp-fermi")
            + _rows("reductions", {0.0: (0.12, 0.01)}, epsilon=math.nan) + _erm())
    result = frontier(pd.DataFrame(rows))
    groups = {}
    for r in result.points.to_dict("records"):
        key = (r["method"], None if math.isnan(r["epsilon"]) else r["epsilon"], None if pd.isna(r["preset"]) else r["preset"])
        groups.setdefault(key, []).append(r["pareto"])
    assert groups == {
        ("dp-fermi", 1.0, None): [True, True, False, True],
        ("dp-fermi", 3.0, None): [True],  # the better point at ε = 3 does not hide ε = 1's
        ("pf-ld", 1.0, None): [True, True],  # neither beats the other
        ("dp-fermi", 1.0, "dp-fermi"): [True],  # another preset is another group
        ("reductions", None, None): [True],  # a non-private method's group (ε NaN)
    }
    best = result.best[result.best["slack"] == 0.03]
    assert len(best) == 5
    # the dp-fermi preset has no erm run of its own: no base there
    assert not best[best["preset"].eq("dp-fermi")]["feasible"].any()


def test_another_y_places_methods_that_target_no_notion():
    rows = _rows("dp-fermi", CURVE) + _erm()
    frame = pd.DataFrame(rows)
    frame["fairness.demographic_parity"] = frame["violation"].fillna(0.5)
    points = frontier(frame, y="fairness.demographic_parity").points
    erm = points[points["method"] == "erm"]
    assert len(erm) == 1 and erm["n_seeds"].item() == 2 and erm["fairness.demographic_parity"].item() == 0.5
    assert "fairness.demographic_parity_std" in points.columns


def test_base_as_a_number_or_a_mapping():
    frame = pd.DataFrame(_rows("dp-fermi", CURVE) + _rows("dp-fermi", CURVE, dataset="bank"))
    best = frontier(frame, base=0.10, slack=0.02).best
    assert best["threshold"].tolist() == pytest.approx([0.12, 0.12]) and best["violation"].tolist() == \
        pytest.approx([0.20, 0.20])
    best = frontier(frame, base={"adult": 0.10, ("bank", None): 0.19}, slack=0.01).best
    assert best["violation"].tolist() == pytest.approx([0.30, 0.05])  # adult: A alone; bank: up to D
    with pytest.raises(ValueError, match="no entry for data set 'bank'"):
        frontier(frame, base={"adult": 0.1})


def test_seeds_of_one_point_are_found_through_the_stored_configuration():
    rows = _rows("dp-fermi", {1.0: (0.2, 0.1)})
    for r in rows:  # a store's config: the seed and the model's key differ between seeds, nothing else
        r["config"] = {"dataset": "adult", "method": "dp-fermi", "params": r["params"], "seed": r["seed"],
                       "key": f"k{r['seed']}"}
    frame = pd.DataFrame(rows)
    assert point_ids(frame).nunique() == 1
    assert frontier(frame).points["n_seeds"].tolist() == [2]
    frame["config"] = [frame["config"][0], {**frame["config"][1], "params": {"lam": 2.0}}]
    assert point_ids(frame).nunique() == 2


def test_reference_errors_per_data_set_and_preset():
    frame = pd.DataFrame(_erm((0.1, 0.2)) + _erm((0.3,), preset="pf-ld") + _rows("dp-fermi", CURVE))
    assert reference_errors(frame) == pytest.approx({("adult", None): 0.15, ("adult", "pf-ld"): 0.3})


@pytest.mark.parametrize("kwargs, message", [
    ({"x": "loss"}, "no column 'loss'"),
    ({"by": ["dataset", 3]}, "by must be a column name"),
    ({"slack": -0.01}, "slack must be a non-negative number"),
    ({"slack": [0.01, math.inf]}, "slack must be a non-negative number"),
    ({"base": "erm"}, "base must be None"),
    ({"base": math.nan}, "base must be a finite number"),
    ({"base": {"adult": "x"}}, r"base\['adult'\] must be a finite number"),
])
def test_bad_arguments_name_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        frontier(pd.DataFrame(_rows("dp-fermi", CURVE)), **kwargs)


def test_frame_must_be_a_dataframe_and_empty_frames_give_empty_tables():
    with pytest.raises(ValueError, match="frame must be a pandas DataFrame"):
        frontier(_rows("dp-fermi", CURVE))
    empty = frontier(pd.DataFrame(_rows("dp-fermi", CURVE)).iloc[:0])
    assert empty.points.empty and empty.front.empty and empty.best.empty
    assert {"error_std", "violation_max", "n_seeds", "pareto"} <= set(empty.points.columns)


def test_a_frame_where_no_method_targets_a_notion_gives_empty_tables_with_their_columns():
    """FairDP's sweep (DP-SGD and ERM, no notion targeted) has no finite violation: the front is empty but keeps
    its columns (an empty object-dtype mask would have selected no columns instead of no rows)."""
    frame = pd.DataFrame(_erm() + [{**r, "method": "dp-sgd", "notion": None, "violation": math.nan}
                                   for r in _rows("dp-sgd", {None: (0.15, 0.0)})])
    result = frontier(frame)
    assert result.front.empty and {"point", "error", "violation", "pareto"} <= set(result.front.columns)
    assert result.points.empty and "point" in result.points.columns
