"""The notion objects: each notion's partition and violation against brute-force counts, the registry, and
predictive equality (the notion added through the registry) against fairlearn and in a fair fit."""

import itertools
import math

import numpy as np
import pytest
from fairlearn.metrics import false_positive_rate_difference

from dpfair.fairness import (
    NOTIONS,
    Notion,
    constraint_groups,
    fairness_report,
    fairness_summary,
    get_notion,
    notion_names,
    register_notion,
    selection_rates,
)
from dpfair.fairness.notions import ACCURACY, POSITIVE, SELECTION, check_notion

#: the public lists of groups and classes of the binary data of the fair fits: none is inferred from the private rows
PUBLIC = dict(groups=[0, 1], classes=[0, 1])


def test_demographic_and_accuracy_parity_partition_by_group():
    s = np.array([0, 2, 1, 2, 0])
    for notion in ("demographic_parity", "accuracy_parity"):
        groups = constraint_groups(notion, None, s)
        np.testing.assert_array_equal(groups.codes, s)
        np.testing.assert_array_equal(groups.reference, 0)
        assert groups.keys == ((None, 0), (None, 1), (None, 2))
        assert groups.n_reference_cells == 1


def test_equalized_odds_partition_by_label_and_group():
    y = np.array([0, 1, 2, 1, 0, 2])
    s = np.array([0, 1, 1, 0, 1, 0])
    groups = constraint_groups("equalized_odds", y, s)
    np.testing.assert_array_equal(groups.codes, y * 2 + s)
    np.testing.assert_array_equal(groups.reference, y)
    assert groups.n_constraint_groups == 6
    for g, (label, group) in enumerate(groups.keys):
        assert groups.reference_of[g] == label
        np.testing.assert_array_equal(groups.codes == g, (y == label) & (s == group))


def test_equal_opportunity_leaves_negatives_unconstrained():
    y = np.array(["no", "yes", "yes", "no"])
    s = np.array(["a", "b", "a", "b"])
    groups = constraint_groups("equal_opportunity", y, s, positive_label="yes")
    np.testing.assert_array_equal(groups.codes, [-1, 1, 0, -1])
    np.testing.assert_array_equal(groups.reference, [-1, 0, 0, -1])
    assert groups.keys == ((1, 0), (1, 1))
    assert groups.classes.tolist() == ["no", "yes"]


def test_predictive_equality_leaves_positives_unconstrained():
    y = np.array(["no", "yes", "yes", "no"])
    s = np.array(["a", "b", "a", "b"])
    groups = get_notion("predictive_equality").partition(y, s, positive_label="yes")
    np.testing.assert_array_equal(groups.codes, [0, -1, -1, 1])
    np.testing.assert_array_equal(groups.reference, [0, -1, -1, 0])
    assert groups.keys == ((0, 0), (0, 1))
    # more labels: one cell, every label but the positive one
    three = get_notion("predictive_equality").partition([0, 1, 2, 2], [0, 1, 0, 1], positive_label=1)
    np.testing.assert_array_equal(three.codes, [0, -1, 0, 1])
    assert three.keys == (((0, 2), 0), ((0, 2), 1))


def test_given_counts_keep_absent_codes():
    y = np.array([0, 2, 2, 0])
    s = np.array([0, 0, 2, 2])
    groups = constraint_groups("equalized_odds", y, s, n_classes=3, n_groups=4)
    assert groups.n_constraint_groups == 12
    np.testing.assert_array_equal(groups.codes, y * 4 + s)
    assert not np.any(groups.codes == 1 * 4 + 1)  # the empty cell keeps its index


@pytest.mark.parametrize(
    "args,match",
    [
        (("parity", [0, 1], [0, 1]), "notion must be one of"),
        (("equalized_odds", None, [0, 1]), "pass y"),
        (("predictive_equality", None, [0, 1]), "pass y"),
        (("equalized_odds", [0, 1, 1], [0, 1]), "y has 3 entries but s has 2"),
        (("demographic_parity", None, [0, 0]), "single group"),
        (("equal_opportunity", [0, 2], [0, 1]), "positive_label=1"),
        (("predictive_equality", [0, 2], [0, 1]), "positive_label=1"),
    ],
)
def test_bad_inputs(args, match):
    with pytest.raises(ValueError, match=match):
        constraint_groups(*args)


def test_codes_out_of_range():
    with pytest.raises(ValueError, match="outside 0..1"):
        constraint_groups("demographic_parity", None, [0, 2], n_groups=2)
    with pytest.raises(ValueError, match="integer codes"):
        constraint_groups("equalized_odds", ["a", "b"], [0, 1], n_classes=2)


# ---- brute force: each notion from its definition, one row and one rate at a time ------------------------------

#: Which rows each reference cell holds (a predicate on the label, ``pos`` the positive label), and the rate.
DEFINITIONS = {
    "demographic_parity": (lambda l, pos: [lambda y: True], "every class"),
    "equalized_odds": (lambda l, pos: [lambda y, c=c: y == c for c in range(l)], "every class"),
    "equal_opportunity": (lambda l, pos: [lambda y: y == pos], "positive"),
    "accuracy_parity": (lambda l, pos: [lambda y: True], "correct"),
    "predictive_equality": (lambda l, pos: [lambda y: y != pos], "positive"),
}


def _random(seed, n_classes, k, n=40):
    rng = np.random.default_rng(seed)
    y, p, s = rng.integers(0, n_classes, n), rng.integers(0, n_classes, n), rng.integers(0, k, n)
    s[:2] = [0, 1]  # at least two groups
    return y, p, s


def _brute_partition(notion, y, s, k, l, pos):
    cells, _ = DEFINITIONS[notion]
    codes, reference = [], []
    for yi, si in zip(y, s):
        cell = next((c for c, holds in enumerate(cells(l, pos)) if holds(yi)), -1)
        codes.append(-1 if cell < 0 else cell * k + si)
        reference.append(cell)
    return np.array(codes), np.array(reference)


def _brute_violation(notion, y, p, s, k, l, pos, convention):
    cells, rate = DEFINITIONS[notion]
    worst = 0.0
    for holds in cells(l, pos):
        rows = [i for i in range(len(y)) if holds(y[i])]
        outcomes = {"every class": [lambda i, j=j: p[i] == j for j in range(l)],
                    "positive": [lambda i: p[i] == pos], "correct": [lambda i: p[i] == y[i]]}[rate]
        for hit in outcomes:
            rates = [np.mean([hit(i) for i in rows if s[i] == r]) for r in range(k) if any(s[i] == r for i in rows)]
            if convention == "pairwise" and len(rates) >= 2:
                worst = max(worst, max(rates) - min(rates))
            if convention == "marginal" and rows:
                overall = np.mean([hit(i) for i in rows])
                worst = max(worst, max(abs(v - overall) for v in rates))
    return worst


@pytest.mark.parametrize("notion", NOTIONS)
@pytest.mark.parametrize("seed,n_classes,k", [(0, 2, 2), (1, 2, 3), (2, 3, 3), (3, 3, 4), (4, 2, 5)])
def test_partition_and_violation_match_brute_force(notion, seed, n_classes, k):
    y, p, s = _random(seed, n_classes, k)
    for pos in range(n_classes):
        groups = get_notion(notion).partition(y, s, positive_label=pos)
        codes, reference = _brute_partition(notion, y, s, k, n_classes, pos)
        np.testing.assert_array_equal(groups.codes, codes)
        np.testing.assert_array_equal(groups.reference, reference)
        for g, (_, r) in enumerate(groups.keys):  # every key names its cell and group
            assert groups.reference_of[g] == g // k and r == g % k
        for convention in ("pairwise", "marginal"):
            got = get_notion(notion).violation(y, p, s, convention, positive_label=pos)
            assert got == pytest.approx(_brute_violation(notion, y, p, s, k, n_classes, pos, convention), abs=1e-12)


@pytest.mark.parametrize("notion", NOTIONS)
def test_rates_are_the_counted_rates(notion):
    y, p, s = _random(5, 3, 3, n=60)
    table = get_notion(notion).rates(y, p, s, positive_label=2)
    part = get_notion(notion).partition(y, s, positive_label=2)
    for g, key in enumerate(part.keys):
        members = part.codes == g
        assert table.loc[key, "count"] == members.sum()
        for outcome in [c for c in table.columns if c != "count"]:
            expected = {SELECTION: lambda: np.mean(p[members] == outcome), POSITIVE: lambda: np.mean(p[members] == 2),
                        ACCURACY: lambda: np.mean(p[members] == y[members])}[get_notion(notion).rate]
            assert table.loc[key, outcome] == pytest.approx(expected() if members.any() else np.nan, nan_ok=True)


def test_demographic_parity_rates_are_the_selection_rates():
    y, p, s = _random(6, 3, 3)
    table = get_notion("demographic_parity").rates(y, p, s).drop(columns="count")
    np.testing.assert_allclose(table.to_numpy(), selection_rates(p, s).to_numpy())


# ---- the registry -----------------------------------------------------------------------------------------------

def test_registry_names_every_notion_once_in_order():
    assert NOTIONS == notion_names() == ("demographic_parity", "equalized_odds", "equal_opportunity",
                                          "accuracy_parity", "predictive_equality")
    for name in NOTIONS:
        notion = get_notion(name)
        assert isinstance(notion, Notion) and notion.name == name and check_notion(name) == name
        assert get_notion(notion) is notion
    assert [get_notion(n).conditions_on_label for n in NOTIONS] == [False, True, True, False, True]
    assert [get_notion(n).rate for n in NOTIONS] == [SELECTION, SELECTION, POSITIVE, ACCURACY, POSITIVE]


def test_registry_refuses_unknown_names_duplicates_and_names_outside_a_list():
    with pytest.raises(ValueError, match="notion must be one of demographic_parity, .*predictive_equality, got 'x'"):
        get_notion("x")
    with pytest.raises(ValueError, match="notion must be one of equalized_odds, got 'demographic_parity'"):
        get_notion("demographic_parity", among=("equalized_odds",))
    with pytest.raises(ValueError, match="already registered"):
        register_notion(get_notion("equalized_odds"))
    with pytest.raises(ValueError, match="named Notion"):
        register_notion("equalized_odds")


class FalseNegativeRateParity(Notion):
    """A notion written outside the registry: the rate of predicting the positive label on the positives."""

    name, rate, conditions_on_label, uses_positive_label = "false_negative_rate_parity", POSITIVE, True, True

    def cell_labels(self, n_classes, positive=1):
        return ((positive,),)


def test_a_notion_object_needs_no_registration_to_be_measured():
    """Everything that measures a notion takes the object: a subclass stating its cells and rate is enough."""
    y, p, s = _random(7, 2, 3)
    custom = FalseNegativeRateParity()
    assert get_notion(custom) is custom
    # P(ŷ = 1 | y = 1) and P(ŷ = 0 | y = 1) differ by a sign: the gap is equal opportunity's
    assert custom.violation(y, p, s) == get_notion("equal_opportunity").violation(y, p, s)
    with pytest.raises(ValueError, match="notion must be one of equalized_odds"):
        get_notion(custom, among=("equalized_odds",))


# ---- predictive equality, added through the registry ------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_predictive_equality_is_fairlearns_false_positive_rate_difference(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    n = int(rng.integers(30, 200))
    y, p, s = rng.integers(0, 2, n), rng.integers(0, 2, n), rng.integers(0, k, n)
    y[:k], s[:k] = 0, np.arange(k)  # every group has negatives: its false positive rate is defined
    expected = false_positive_rate_difference(y, p, sensitive_features=s)
    assert get_notion("predictive_equality").violation(y, p, s) == pytest.approx(expected, abs=1e-12)
    words = np.array(["deny", "grant"])  # positive_label is a label value
    assert get_notion("predictive_equality").violation(words[y], words[p], s, positive_label="grant") == (
        pytest.approx(expected, abs=1e-12))


def test_summary_and_report_loop_over_the_registry():
    y, p, s = _random(8, 2, 3)
    summary = fairness_summary(y, p, s)
    assert list(summary) == list(NOTIONS)
    assert summary["predictive_equality"] == get_notion("predictive_equality").violation(y, p, s)
    report = fairness_report(y, p, s)
    rows = report[report.metric == "predictive_equality"]
    assert sorted(rows.convention) == ["marginal", "pairwise"]


def test_dpfermi_with_predictive_equality_lowers_the_false_positive_rate_gap():
    """A proxy of the group among the features: the unconstrained model's false-positive rates differ by group;
    ERMI on the negatives (predictive equality's one cell) removes most of that gap."""
    from dpfair.algorithms.dpfermi.estimator import DPFERMIClassifier

    rng = np.random.default_rng(7)
    n = 2000
    X, s = rng.normal(size=(n, 4)), rng.integers(0, 2, n)
    y = (X[:, 0] + 1.2 * s + rng.normal(size=n) > 0.6).astype(int)
    X[:, 1] = 2.0 * s + 0.5 * rng.normal(size=n)
    kw = dict(notion="predictive_equality", epsilon=math.inf, batch_size=256, epochs=20, random_state=0,
              group_proportions=[0.5, 0.5], **PUBLIC)
    gap = lambda est: get_notion("predictive_equality").violation(y, est.predict(X), s)  # noqa: E731
    base = DPFERMIClassifier(lam=0.0, **kw).fit(X, y, sensitive_features=s)
    fair = DPFERMIClassifier(lam=8.0, **kw).fit(X, y, sensitive_features=s)
    assert gap(base) > 0.1
    assert gap(fair) < 0.5 * gap(base)


@pytest.mark.parametrize("method", ["pf-ld", "reductions", "threshold", "private-demographics"])
def test_methods_whose_constraints_follow_the_partition_target_predictive_equality(method):
    """Their constraint machinery is generic over the notion: listing the name was the whole change."""
    from dpfair.algorithms.fairlearn_wrappers import ReductionsClassifier, ThresholdClassifier
    from dpfair.algorithms.pfld import PFLDClassifier
    from dpfair.algorithms.private_demographics import PrivateDemographicsClassifier
    from dpfair.datasets import make_synthetic

    X, y, s = make_synthetic(n_samples=2000, n_features=4, n_groups=2, random_state=0)  # PF-LD: groups not hidden by noise
    est = {"pf-ld": lambda: PFLDClassifier(notion="predictive_equality", epochs=2, epsilon=8.0, counts_budget=0.5,
                                          random_state=0, **PUBLIC),  # enough ε for its counts and dual steps
           "reductions": lambda: ReductionsClassifier(notion="predictive_equality", max_iter=10, random_state=0),
           "threshold": lambda: ThresholdClassifier(notion="predictive_equality", random_state=0),
           "private-demographics": lambda: PrivateDemographicsClassifier(notion="predictive_equality", epsilon=2.0,
                                                                         max_iter=10, random_state=0, **PUBLIC)}[method]()
    est.fit(X, y, sensitive_features=s)
    kw = {"sensitive_features": s} if method == "threshold" else {}
    assert 0.0 <= get_notion("predictive_equality").violation(y, est.predict(X, **kw), s) <= 1.0
    assert est.fairness_target()["notion"] == "predictive_equality"


def test_every_notion_partitions_every_label_count():
    """Label-free notions need no y; the others give each row at most one group, of its own s."""
    for notion, l in itertools.product(NOTIONS, (2, 3)):
        y, _, s = _random(9, l, 3)
        part = get_notion(notion).partition(y, s)
        inside = part.codes >= 0
        assert np.array_equal(part.codes[inside] % 3, s[inside])
        assert np.array_equal(inside, part.reference >= 0)


class _MeasuredFrame:
    """A measured frame as a notion reads it (duck-typed: no measurement module): each rate's between-groups
    difference, and the interval of the largest difference of some rates."""

    def __init__(self, differences):
        self.differences, self.asked = differences, []

    def difference(self, rates):
        return {r: self.differences[r] for r in rates}

    def max_difference_interval(self, rates):
        self.asked.append(tuple(rates))
        return 0.5 * max(self.differences[r] for r in rates), 2.0 * max(self.differences[r] for r in rates)


def test_a_notion_reads_a_measured_frame_through_its_compared_rates():
    frame = _MeasuredFrame({"selection_rate": 0.1, "true_positive_rate": 0.3, "false_positive_rate": 0.2,
                            "accuracy": 0.05})
    eo = get_notion("equalized_odds")
    assert eo.difference(frame) == 0.3 and eo.difference_interval(frame) == (0.15, 0.6)
    assert frame.asked == [("true_positive_rate", "false_positive_rate")]  # one interval of the max, jointly
    assert get_notion("predictive_equality").difference(frame) == 0.2
    assert get_notion("accuracy_parity").difference(frame) == 0.05
    with pytest.raises(ValueError, match="compares no measured rate"):
        Notion().difference(frame)
