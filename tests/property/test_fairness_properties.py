"""Fairness metrics on random inputs (Hypothesis): what must hold for every data set, not only at test points.

Covers: both conventions, more than two labels, empty (label, group)
cells, arbitrary (order-changing) renaming of groups and labels, the inequality indices on arbitrary vectors,
and the precise domain on which dpfair's violations equal fairlearn's differences.
"""

import numpy as np
import pytest
from fairlearn.metrics import (
    accuracy_score_difference,
    demographic_parity_difference,
    equal_opportunity_difference,
    equalized_odds_difference,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from dpfair.fairness import (
    NOTIONS,
    accuracy_inequality,
    accuracy_parity_violation,
    atkinson_index,
    constraint_group_accuracies,
    demographic_parity_violation,
    equal_opportunity_violation,
    equalized_odds_violation,
    fairness_coefficients,
    fairness_summary,
    generalized_entropy,
    gini_coefficient,
    group_fairness_values,
    per_group_accuracy,
)

FAST = settings(max_examples=30, deadline=None, derandomize=True)
SLOW = settings(max_examples=15, deadline=None, derandomize=True)  # fairlearn's MetricFrame is the slow part
CONVENTIONS = ("pairwise", "marginal")
INDICES = ("atkinson", "gini", "mean_log_deviation", "theil")


@st.composite
def predictions(draw, n_labels=2, max_groups=4, every_cell=False):
    """``(y, ŷ, s)``: labels ``0..n_labels-1`` and groups ``0..k-1``, each present in y and s; (label, group)
    cells may be empty unless ``every_cell`` (then each has a row)."""
    k = draw(st.integers(2, max_groups))
    n = draw(st.integers(0, 50))
    labels = st.integers(0, n_labels - 1)

    def column(elements, size=n):  # lists, not arrays(): arrays() fills most entries with one value
        return np.array(draw(st.lists(elements, min_size=size, max_size=size)), dtype=np.int64)

    y, p, s = column(labels), column(labels), column(st.integers(0, k - 1))
    if every_cell:  # one row per cell
        extra = np.arange(n_labels * k)
        y_extra, s_extra = extra // k, extra % k
    else:  # rows that make every label and every group appear
        extra = np.arange(max(k, n_labels))
        y_extra, s_extra = extra % n_labels, extra % k
    p_extra = column(labels, len(extra))
    return np.r_[y, y_extra], np.r_[p, p_extra], np.r_[s, s_extra]


def _violations(y, p, s, convention):
    return {
        "demographic_parity": demographic_parity_violation(p, s, convention),
        "equalized_odds": equalized_odds_violation(y, p, s, convention),
        "equal_opportunity": equal_opportunity_violation(y, p, s, 1, convention),
        "accuracy_parity": accuracy_parity_violation(y, p, s, convention),
    }


def _same(a, b):
    """Equal up to rounding, NaN equal to NaN and inf to inf (the documented undefined values)."""
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12, atol=1e-12)


def _indices(d):
    return [d[key] for key in INDICES]


# ---- invariance -------------------------------------------------------------------------------------------------

@FAST
@given(st.integers(2, 3).flatmap(lambda l: predictions(n_labels=l)), st.randoms(use_true_random=False))
def test_no_metric_depends_on_the_order_of_the_rows(data, rnd):
    """Every metric is a function of the empirical distribution of (y, ŷ, s), which shuffling the rows together
    leaves unchanged: both conventions, any number of labels, per-group accuracy and the inequality indices
    (NaN/inf included: a group of accuracy 0 makes the mean log deviation inf, all groups at 0 make every index
    NaN, and that must survive a shuffle too)."""
    y, p, s = data
    order = np.array(rnd.sample(range(len(y)), len(y)))
    yo, po, so = y[order], p[order], s[order]
    for convention in CONVENTIONS:
        assert _violations(y, p, s, convention) == _violations(yo, po, so, convention)
    assert fairness_summary(y, p, s) == fairness_summary(yo, po, so)
    _same(per_group_accuracy(y, p, s), per_group_accuracy(yo, po, so))
    _same(_indices(accuracy_inequality(y, p, s)), _indices(accuracy_inequality(yo, po, so)))


@FAST
@given(predictions(every_cell=True), st.sampled_from(NOTIONS), st.randoms(use_true_random=False))
def test_the_affine_form_does_not_depend_on_the_order_of_the_rows(data, notion, rnd):
    """C⁰, C, the accuracy-group accuracies and F_k are functions of the empirical distribution of (y, ŷ, s)."""
    y, p, s = data
    order = np.array(rnd.sample(range(len(y)), len(y)))
    a, b = fairness_coefficients(notion, y, s), fairness_coefficients(notion, y[order], s[order])
    _same(a.C0, b.C0)
    _same(a.C, b.C)
    shuffled = (y[order], p[order], s[order])
    _same(constraint_group_accuracies(notion, y, p, s), constraint_group_accuracies(notion, *shuffled))
    _same(group_fairness_values(notion, y, p, s), group_fairness_values(notion, *shuffled))


@FAST
@given(predictions(), st.permutations(["α", "zeta", "B", "a"]))
def test_renaming_the_groups_in_any_order_changes_nothing_but_the_order(data, names):
    """Group values are names only. An injective renaming that changes their sorted order (0,1,2,3 → arbitrary
    strings) leaves every violation and inequality index unchanged, keeps each group's accuracy (under its new
    name) and permutes the measures F_r of the affine form the way the sorted order of the names moves."""
    y, p, s = data
    renamed = np.array(names, dtype=object)[s]
    assert fairness_summary(y, p, s) == fairness_summary(y, p, renamed)
    for convention in CONVENTIONS:
        assert _violations(y, p, s, convention) == _violations(y, p, renamed, convention)
    acc, acc_renamed = per_group_accuracy(y, p, s), per_group_accuracy(y, p, renamed)
    for r, value in acc.items():
        assert acc_renamed[names[r]] == value
    _same(_indices(accuracy_inequality(y, p, s)), _indices(accuracy_inequality(y, p, renamed)))
    # measure r of the renamed data is the group whose name sorts r-th
    present = np.unique(s)
    new_order = present[np.argsort([names[r] for r in present])]
    for notion in ("demographic_parity", "accuracy_parity"):
        _same(group_fairness_values(notion, y, p, renamed), group_fairness_values(notion, y, p, s)[new_order])


@FAST
@given(predictions(), st.booleans())
def test_renaming_the_labels_changes_only_which_label_is_positive(data, reverse):
    """Labels are names too. An order-keeping renaming (0/1 → "no"/"yes") changes nothing. An order-reversing one
    (0/1 → "yes"/"no") makes the old 0 the summary's positive label (the second smallest): demographic parity,
    equalized odds and accuracy parity are symmetric in the labels and do not move; equal opportunity becomes the
    true-positive-rate gap of the old label 0."""
    y, p, s = data
    names = np.array(["yes", "no"] if reverse else ["no", "yes"])
    before, after = fairness_summary(y, p, s), fairness_summary(names[y], names[p], s)
    for notion in ("demographic_parity", "equalized_odds", "accuracy_parity"):
        assert after[notion] == before[notion]
    positive = 0 if reverse else 1
    assert after["equal_opportunity"] == equal_opportunity_violation(y, p, s, positive_label=positive)


# ---- ranges -----------------------------------------------------------------------------------------------------

@FAST
@given(st.integers(2, 4).flatmap(lambda l: predictions(n_labels=l)))
def test_violations_are_in_0_1_and_marginal_is_between_half_pairwise_and_pairwise(data):
    """Violations are gaps between probabilities: in [0, 1]. The marginal gap |r_g − r| compares a group with the
    cell's rate r, a convex combination of the (defined) group rates, so it is at most the largest pairwise gap;
    by the triangle inequality the pairwise gap is at most twice the marginal one. Any number of labels, empty
    cells allowed."""
    y, p, s = data
    pairwise, marginal = _violations(y, p, s, "pairwise"), _violations(y, p, s, "marginal")
    for notion, value in pairwise.items():
        assert 0.0 <= marginal[notion] <= value + 1e-12 <= 1.0 + 1e-12
        assert value <= 2 * marginal[notion] + 1e-12


@FAST
@given(predictions())
def test_per_group_accuracy_is_a_probability_and_averages_to_the_accuracy(data):
    """Each group's accuracy lies in [0, 1] and, weighted by the group sizes, they average to the overall
    accuracy (the μ every index of accuracy_inequality divides by). Every index is then in its range: Atkinson
    and Gini in [0, 1], the generalised entropies ≥ 0 (inf allowed for a group of accuracy 0) — or all NaN,
    exactly when every group has accuracy 0 (documented: the indices are undefined)."""
    y, p, s = data
    acc = per_group_accuracy(y, p, s)
    sizes = np.bincount(s)
    assert ((acc >= 0) & (acc <= 1)).all()
    assert np.dot(sizes, acc.to_numpy()) / sizes.sum() == pytest.approx(np.mean(y == p), abs=1e-12)
    out = accuracy_inequality(y, p, s)
    if (acc == 0).all():
        assert all(np.isnan(out[key]) for key in INDICES)
        return
    assert -1e-12 <= out["atkinson"] <= 1.0 and -1e-12 <= out["gini"] <= 1.0
    assert out["mean_log_deviation"] >= -1e-12 and out["theil"] >= -1e-12


values_and_weights = st.integers(1, 8).flatmap(lambda m: st.tuples(
    st.lists(st.floats(0.0, 10.0, allow_subnormal=False), min_size=m, max_size=m).map(np.array),
    st.lists(st.integers(1, 5), min_size=m, max_size=m).map(np.array),
)).filter(lambda vw: vw[0].max() > 0)


# a value near 0 with ε > 1 overflows x^(1−ε) to inf; (… )^(1/(1−ε)) is then 0 and A_ε = 1, the right limit
@pytest.mark.filterwarnings("ignore:overflow encountered in power:RuntimeWarning")
@FAST
@given(values_and_weights, st.floats(0.0, 4.0), st.floats(1.0, 3.0), st.floats(0.01, 100.0))
def test_inequality_indices_stay_in_range_grow_with_aversion_and_ignore_the_scale(vw, eps, more, c):
    """Atkinson A_ε = 1 − M_{1−ε}/μ with M_p the weighted power mean: in [0, 1], and non-decreasing in ε since
    M_p is non-decreasing in p. Gini in [0, 1]; GE(α) ≥ 0 (Jensen). All are relative measures: multiplying every
    value by c > 0 changes none of them."""
    x, w = vw
    a, a_more = atkinson_index(x, eps, weights=w), atkinson_index(x, eps + more, weights=w)
    assert -1e-12 <= a <= a_more + 1e-9 <= 1.0 + 1e-9
    assert -1e-12 <= gini_coefficient(x, weights=w) <= 1.0
    for alpha in (0.0, 0.5, 1.0, 2.0):
        assert generalized_entropy(x, alpha, weights=w) >= -1e-12
    assert atkinson_index(c * x, eps, weights=w) == pytest.approx(a, abs=1e-9)
    assert gini_coefficient(c * x, weights=w) == pytest.approx(gini_coefficient(x, weights=w), abs=1e-12)
    for alpha in (0.0, 1.0, 2.0):
        _same_or_close(generalized_entropy(c * x, alpha, weights=w), generalized_entropy(x, alpha, weights=w))


def _same_or_close(a, b):
    assert (np.isinf(a) and np.isinf(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-9)


@FAST
@given(values_and_weights, st.floats(0.0, 4.0))
def test_integer_weights_are_repeated_values(vw, eps):
    """Weighting value i by an integer w_i is the unweighted index of the vector where value i appears w_i times
    (population weighting, as accuracy_inequality weights groups by their sizes)."""
    x, w = vw
    repeated = np.repeat(x, w)
    assert atkinson_index(x, eps, weights=w) == pytest.approx(atkinson_index(repeated, eps), abs=1e-9)
    assert gini_coefficient(x, weights=w) == pytest.approx(gini_coefficient(repeated), abs=1e-12)
    for alpha in (0.0, 1.0, 2.0):
        _same_or_close(generalized_entropy(x, alpha, weights=w), generalized_entropy(repeated, alpha))


# ---- the affine form --------------------------------------------------------------------------------------------

@FAST
@given(predictions(), st.sampled_from(["demographic_parity", "accuracy_parity"]))
def test_the_affine_form_holds_with_empty_cells(data, notion):
    """Demographic and accuracy parity are defined whenever each group has a row, even with an empty (label,
    group) cell; the module says such a cell gets a zero coefficient in every row, so its (undefined) accuracy,
    reported as 0, cannot matter: C⁰ + C·acc equals the direct definition on any data with two labels."""
    y, p, s = data
    coef = fairness_coefficients(notion, y, s)
    direct = group_fairness_values(notion, y, p, s)
    np.testing.assert_allclose(coef.C0 + coef.C @ constraint_group_accuracies(notion, y, p, s), direct, atol=1e-12)
    empty = [g for g, (label, r) in enumerate(coef.group_keys)
             if label is not None and not np.any((y == label) & (s == r))]
    assert np.all(coef.C[:, empty] == 0)


@FAST
@given(predictions(n_labels=3, every_cell=True), st.sampled_from(["equalized_odds", "equal_opportunity",
                                                                  "accuracy_parity"]), st.integers(0, 2))
def test_the_affine_form_holds_with_three_labels(data, notion, positive):
    """With more than two labels (Mangold et al.'s multi-class case) the measures compare accuracies:
    equalized odds P(ŷ=Y | Y=y, S=r) − P(ŷ=Y | Y=y) for every label, equal opportunity the same for the positive
    label only, accuracy parity P(ŷ=Y | S=r) − P(ŷ=Y). C⁰ + C·acc must equal these, computed here from counts."""
    y, p, s = data
    k = s.max() + 1
    hit = (y == p).astype(float)
    kwargs = {"positive_label": positive} if notion == "equal_opportunity" else {}
    coef = fairness_coefficients(notion, y, s, **kwargs)
    if notion == "accuracy_parity":
        direct = [hit[s == r].mean() - hit.mean() for r in range(k)]
    else:
        labels = [positive] if notion == "equal_opportunity" else range(3)
        direct = [hit[(y == c) & (s == r)].mean() - hit[y == c].mean() for c in labels for r in range(k)]
    affine = coef.C0 + coef.C @ constraint_group_accuracies(notion, y, p, s, **kwargs)
    np.testing.assert_allclose(affine, direct, atol=1e-12)


@FAST
@given(predictions(every_cell=True), st.sampled_from(NOTIONS))
def test_the_measures_are_centred(data, notion):
    """F_k = rate on the group − rate on its reference cell, and the cell's rate is the size-weighted mean of its
    groups' rates, so Σ_r P(S=r | cell) F_(cell, r) = 0 in every cell."""
    y, p, s = data
    F = group_fairness_values(notion, y, p, s)
    keys = fairness_coefficients(notion, y, s).measure_keys
    for label in {key[0] for key in keys}:
        rows = [i for i, key in enumerate(keys) if key[0] == label]
        in_cell = np.ones(len(y), bool) if label is None else y == label
        sizes = np.array([np.sum(in_cell & (s == keys[i][1])) for i in rows])
        assert abs(np.dot(sizes, F[rows])) < 1e-9


@FAST
@given(predictions(), st.sampled_from(["equalized_odds", "equal_opportunity"]))
def test_conditional_measures_need_every_cell_they_condition_on(data, notion):
    """P(ŷ=1 | Y=y, S=r) is undefined on an empty cell; the affine form and the direct values must refuse the data
    with a ValueError exactly when a cell they condition on (all of them for equalized odds, the positive ones for
    equal opportunity) is empty, and never return NaN."""
    y, p, s = data
    needed = (0, 1) if notion == "equalized_odds" else (1,)
    k = s.max() + 1
    defined = all(np.any((y == c) & (s == r)) for c in needed for r in range(k))
    if defined:
        assert np.isfinite(group_fairness_values(notion, y, p, s)).all()
        assert np.isfinite(fairness_coefficients(notion, y, s).C).all()
    else:
        with pytest.raises(ValueError, match="undefined"):
            group_fairness_values(notion, y, p, s)
        with pytest.raises(ValueError, match="undefined"):
            fairness_coefficients(notion, y, s)


# ---- agreement with fairlearn -----------------------------------------------------------------------------------

@SLOW
@given(predictions(), st.sampled_from([(0, 1), (-1, 1)]))
def test_always_equal_to_fairlearn_for_demographic_and_accuracy_parity(data, codes):
    """Binary labels, ŷ binary, every group non-empty (no other condition):

    * demographic_parity_violation(ŷ, s, "pairwise") = fairlearn demographic_parity_difference (max − min over
      groups of the selection rate P(ŷ=1 | S=r)); "marginal" = the same with method="to_overall"
      (max_r |P(ŷ=1 | S=r) − P(ŷ=1)|). dpfair maximises over both values j of ŷ, but the rates of j = 0 are
      one minus those of j = 1, so the gaps are the same.
    * accuracy_parity_violation = accuracy_score_difference (both conventions likewise).
    Labels coded 0/1 or −1/1 (fairlearn's pos_label = 1 in both)."""
    y, p, s = data
    y, p = np.array(codes)[y], np.array(codes)[p]
    for convention, method in (("pairwise", "between_groups"), ("marginal", "to_overall")):
        assert demographic_parity_violation(p, s, convention) == pytest.approx(
            demographic_parity_difference(y, p, sensitive_features=s, method=method), abs=1e-12)
        assert accuracy_parity_violation(y, p, s, convention) == pytest.approx(
            accuracy_score_difference(y, p, sensitive_features=s, method=method), abs=1e-12)


@SLOW
@given(predictions(every_cell=True))
def test_equal_to_fairlearn_for_equalized_odds_and_opportunity_when_every_cell_has_rows(data):
    """Binary y, ŷ ∈ {0, 1}, every (y, s) cell non-empty:

    * equalized_odds_violation(y, ŷ, s, "pairwise") = fairlearn equalized_odds_difference (agg="worst_case",
      method="between_groups"): max over y ∈ {0, 1} of the gap of P(ŷ=1 | Y=y, S=r), i.e. the larger of the
      TPR and FPR gaps; "marginal" = method="to_overall" (each group against P(ŷ=1 | Y=y)).
    * equal_opportunity_violation(positive_label=1) = equal_opportunity_difference (the TPR gap), both
      conventions.

    Outside this domain they differ on purpose: a group with no row of label y has no rate there; dpfair skips it
    (module docstring), fairlearn counts its rate as 0 (0/0 → 0)."""
    y, p, s = data
    for convention, method in (("pairwise", "between_groups"), ("marginal", "to_overall")):
        assert equalized_odds_violation(y, p, s, convention) == pytest.approx(
            equalized_odds_difference(y, p, sensitive_features=s, method=method), abs=1e-12)
        assert equal_opportunity_violation(y, p, s, 1, convention) == pytest.approx(
            equal_opportunity_difference(y, p, sensitive_features=s, method=method), abs=1e-12)
