"""Paper presets (``load_dataset(name, preset=...)``): rows, features, groups and the non-private baseline against
each paper's published figures, and the errors for presets that do not exist.

Tolerances for a baseline's accuracy: the paper reports a mean over its folds (PF-LD: five-fold cross-validation,
mean and standard deviation SD); we measure one split of n_test rows.  The difference of the two has standard
error sqrt(p(1-p)/n_test + SD²/5) (our split's binomial error plus the error of the paper's five-fold mean); the
tolerance is three of those plus half the paper's last printed digit (0.0005).  A 3-sigma band fails a correct
set-up with probability 0.3 %, and the seeds are fixed, so the test is deterministic.
"""

import math
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier

from dpfair.datasets import dataset_info, load_dataset
from dpfair.datasets._presets import PRESETS, presets_of


def pooled_groups(data):
    s = np.concatenate([data.s_train, data.s_test])
    return np.bincount(s, minlength=data.n_groups) / len(s)


def rows(data):
    return len(data.y_train) + len(data.y_test)


def accuracy(model, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(data.X_train, data.y_train)
    return float(np.mean(model.predict(data.X_test) == data.y_test))


def tolerance(paper_acc, paper_sd, n_test):
    return 3 * math.sqrt(paper_acc * (1 - paper_acc) / n_test + paper_sd ** 2 / 5) + 0.0005


def two_layer_net():
    """PF-LD's CLF is "a neural network with two hidden layers"; the widths (64) are assumed."""
    return MLPClassifier((64, 64), max_iter=20, random_state=0)


# ------------------------------------------------------------------------------------------------ PF-LD, Table 1-2


@pytest.mark.parametrize("name, options, n, features, shares", [
    # Table 1: Income 45,222 × 50, gender 32 % / 68 %; Bank 11,162 × 15, age 8 % / 92 %.
    ("adult", {}, 45_222, 50, [0.32, 0.68]),
    ("bank", {}, 11_162, 15, [0.08, 0.92]),
])
def test_pfld_table1(loaded, name, options, n, features, shares):
    data = loaded(name, preset="pf-ld", **options)
    assert (rows(data), data.n_features) == (n, features)
    # Table 1 prints whole percents: each share must round to the printed one.
    assert np.round(pooled_groups(data), 2).tolist() == shares


def test_pfld_compas_is_close_to_table1_but_not_equal(loaded):
    """Table 1: 6,150 rows, 10 features, women 20 %.  Zafar et al.'s preprocessing (which PF-LD cites) of
    ProPublica's filtered file gives 6,172 rows and 11 features; no documented filter removes exactly 22 rows, and
    even removing 22 men would leave 19.1 % women: the table's 20 % is within one percentage point."""
    data = loaded("compas", preset="pf-ld")
    assert (rows(data), data.n_features) == (6_172, 11)
    assert abs(rows(data) - 6_150) / 6_150 < 0.004
    assert abs(pooled_groups(data)[0] - 0.20) <= 0.01


def test_pfld_features_are_standardised(loaded):
    """Sec. 8: "all features have zero mean and unit variance" (constants fixed in code: up to their rounding)."""
    for name in ("adult", "compas", "bank"):
        data = loaded(name, preset="pf-ld")
        X = np.vstack([data.X_train, data.X_test])
        assert np.abs(X.mean(axis=0)).max() < 0.01 and np.abs(X.std(axis=0) - 1).max() < 0.005


def test_pfld_mbank_age_bands_follow_the_text():
    """Sec. 8: M-Bank³ = 25-40, 41-60, rest; M-Bank⁵ = 25-33, 34-40, 41-48, 49-60, rest.  Table 1's shares
    (46/46, 23×4) contradict these bands (they give 53/39 and 28/25/18/21); the loader's default bands reproduce
    Table 1 instead (tested below)."""
    from dpfair.datasets._presets import PFLD_BANK_CUTS
    from dpfair.datasets._tabular import bank_age_groups

    ages = np.array([18, 24, 25, 33, 34, 40, 41, 48, 49, 60, 61, 95])
    assert bank_age_groups(ages, 3, PFLD_BANK_CUTS[3])[0].tolist() == [0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0]
    assert bank_age_groups(ages, 5, PFLD_BANK_CUTS[5])[0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 0, 0]


@pytest.mark.parametrize("n_groups, shares", [(3, [0.08, 0.53, 0.39]), (5, [0.08, 0.28, 0.25, 0.18, 0.21])])
def test_pfld_mbank_groups(loaded, n_groups, shares):
    data = loaded("bank", preset="pf-ld", n_groups=n_groups)
    assert (rows(data), data.n_features, data.n_groups) == (11_162, 15, n_groups)
    # The 8 % minority is Table 1's; the other shares are the text's bands (see the test above).
    assert np.round(pooled_groups(data), 2).tolist() == shares
    # The loader's own bands (the integer cut points that best equalise them) are within 1.2 percentage points of
    # Table 1's shares (integer ages cannot split the file into exact quarters), the text's bands 4-7 points off.
    table1 = [0.08, 0.46, 0.46] if n_groups == 3 else [0.08, 0.23, 0.23, 0.23, 0.23]
    assert np.abs(pooled_groups(loaded("bank", n_groups=n_groups)) - table1).max() <= 0.012
    assert np.abs(np.array(shares) - table1).max() >= 0.04


@pytest.mark.parametrize("name, options, model, paper_acc, paper_sd", [
    # Table 2, column CLF (a two-hidden-layer network, five-fold CV): Income 0.848 (0.003), Compas 0.683 (0.011),
    # Bank 0.8 (0.007), M-Bank³ and M-Bank⁵ 0.807 (0.008).  Income uses logistic regression (the network takes
    # ~20 s on 34k rows; logistic regression is within 0.006 of it there), the others the network.
    ("adult", {}, LogisticRegression(max_iter=1000), 0.848, 0.003),
    ("compas", {}, two_layer_net(), 0.683, 0.011),
    ("bank", {}, two_layer_net(), 0.800, 0.007),
    ("bank", {"n_groups": 3}, two_layer_net(), 0.807, 0.008),
    ("bank", {"n_groups": 5}, two_layer_net(), 0.807, 0.008),
])
def test_pfld_non_private_accuracy(loaded, name, options, model, paper_acc, paper_sd):
    data = loaded(name, preset="pf-ld", **options)
    acc = accuracy(model, data)
    assert abs(acc - paper_acc) <= tolerance(paper_acc, paper_sd, len(data.y_test)), acc


def test_pfld_bank_keeps_duration(loaded):
    """The issue's bank gap: without duration (the loader's default) accuracy is ~0.72, not the paper's 0.80."""
    preset, default = loaded("bank", preset="pf-ld"), loaded("bank")
    assert "duration" in preset.feature_names and "duration" not in default.feature_names


# ------------------------------------------------------------------------------------------------ DP-FERMI, App. F.2


@pytest.mark.parametrize("name, n, features", [
    # App. F.2 / args.py: adult 102 input features ("around 48,000 entries" before removing missing values),
    # credit 85 ("around 30,000"), parkinsons 19 ("around 5800"); 3:1 train:test.
    ("adult", 45_222, 102),
    ("credit", 30_000, 85),
    ("parkinsons", 5_875, 19),
])
def test_dpfermi_shapes_and_split(loaded, name, n, features):
    data = loaded(name, preset="dp-fermi")
    assert (rows(data), data.n_features, data.group_names) == (n, features, ["Female", "Male"])
    assert len(data.y_test) == math.ceil(0.25 * n)


def test_dpfermi_parkinsons_uses_motor_updrs(loaded):
    """The paper's text gives no error figure (its Fig. 3 / 8 are curves; the issue reads ≈ 0.04 off them).  What
    the text and code do give: motor_UPDRS is a feature, which makes the task nearly trivial.  Logistic regression
    errs on 5.0 % of the 1,469 test rows with it (binomial standard error 0.6 %) and on 36 % without."""
    preset, default = loaded("parkinsons", preset="dp-fermi"), loaded("parkinsons")
    assert "motor_UPDRS" in preset.feature_names and "motor_UPDRS" not in default.feature_names
    error = 1 - accuracy(LogisticRegression(max_iter=1000), preset)
    assert error < 0.04 + 3 * math.sqrt(0.04 * 0.96 / len(preset.y_test)) + 0.005
    assert 1 - accuracy(LogisticRegression(max_iter=1000), default) > 0.3


# ------------------------------------------------------------------------------------------------ FairDP, App. B


def test_fairdp_adult(loaded):
    """App. B: 13 unprotected attributes, 103 dimensions, numeric ones in [0, 1], 30,162 + 15,060 rows, 80/20.
    No accuracy figure in the appendix."""
    data = loaded("adult", preset="fairdp")
    assert (rows(data), data.n_features, len(data.y_test)) == (30_162 + 15_060, 103, math.ceil(0.2 * 45_222))
    X = np.vstack([data.X_train, data.X_test])
    assert X.min() == 0 and X.max() == 1


def test_fairdp_dutch(loaded):
    """App. B: 10 unprotected attributes, 59 dimensions, 30,273 males and 30,147 females, 80/20.  The counts are
    the file's, with the sexes swapped: code 2, which IPUMS and the file's distributors document as female (the
    coding kept here), has 30,273 rows."""
    data = loaded("dutch", preset="fairdp")
    s = np.concatenate([data.s_train, data.s_test])
    assert (rows(data), data.n_features) == (60_420, 59)
    assert np.bincount(s).tolist() == [30_273, 30_147]  # female (code 2) = 0, male (code 1) = 1
    assert len(data.y_test) == math.ceil(0.2 * 60_420)


# ------------------------------------------------------------------------------------------------ Jagielski et al.


def test_jagielski_communities(loaded):
    """Sec. 5: m ≈ 2K, Kearns et al.'s cleaning (every row kept, label above the 70th percentile).  The paper's
    results are Pareto curves (Fig. 1): no non-private figure to compare with."""
    data = loaded("communities", preset="jagielski")
    y = np.concatenate([data.y_train, data.y_test])
    assert (rows(data), data.n_features) == (1_994, 121)
    assert y.mean() == pytest.approx(0.29, abs=0.01)  # strictly above the 70th percentile (ties at it are 0)
    assert "racePctWhite" not in data.feature_names and "LemasSwornFT" in data.feature_names


# ------------------------------------------------------------------------------------------------ Mangold et al.


def test_mangold_celeba(loaded):
    """Sec. 5 / App. G.1: 202,599 samples, 39 features including sex (not used), 182,339 train / 20,260 test.
    Table 1's figures are withheld from the paper copy: nothing to compare the accuracy with."""
    data = loaded("celeba", preset="mangold")
    assert (len(data.y_train), len(data.y_test), data.n_features) == (182_339, 20_260, 38)
    assert "Male" not in data.feature_names


# ------------------------------------------------------------------------------------------------ the interface


def test_every_preset_uses_a_fixed_schema(loaded):
    """Features come from constants fixed in code (a row's features depend on that row only)."""
    for name, presets in PRESETS.items():
        if name == "acs_income":  # not in the mirror
            continue
        for preset in presets:
            assert loaded(name, preset=preset).schema is not None, (name, preset)


def test_dataset_info_lists_presets():
    assert dataset_info("bank")["presets"] == ["pf-ld"]
    assert dataset_info("adult")["presets"] == ["dp-fermi", "fairdp", "pf-ld"]
    assert dataset_info("german")["presets"] == []
    assert presets_of("adult") == ["dp-fermi", "fairdp", "pf-ld"]


@pytest.mark.parametrize("name, kwargs, message", [
    ("adult", {"preset": "dpfermi"}, "unknown preset 'dpfermi' for data set 'adult'; valid: dp-fermi, fairdp, pf-ld"),
    ("compas", {"preset": "dp-fermi"}, "unknown preset 'dp-fermi' for data set 'compas'; valid: pf-ld"),
    ("german", {"preset": "pf-ld"}, "data set 'german' has no paper presets; presets exist for: .*adult \\(dp-fermi"),
    ("adult", {"preset": "pf-ld", "sensitive": "race"}, "fixes the sensitive attribute to 'sex'"),
    ("adult", {"preset": "fairdp", "test_size": 0.25}, "fixes test_size to 0.2"),
    ("adult", {"preset": "pf-ld", "original_split": True}, "'original_split' not accepted.*download"),
    ("bank", {"preset": "pf-ld", "n_groups": 4}, "unknown n_groups 4 .*valid: 2, 3, 5"),
])
def test_preset_errors(name, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load_dataset(name, **kwargs)


def test_preset_split_follows_random_state(loaded):
    """The preset fixes the split's size, never its seed."""
    a, b = loaded("parkinsons", preset="dp-fermi"), loaded("parkinsons", preset="dp-fermi", random_state=1)
    assert len(a.y_test) == len(b.y_test) and not np.array_equal(a.X_test, b.X_test)
    same = loaded("parkinsons", preset="dp-fermi", test_size=0.25)  # the preset's own value is accepted
    assert np.array_equal(same.X_test, a.X_test)


def test_missing_sensitive_hides_a_public_random_share_of_the_training_groups(shared_data):
    """PF-LD's Sec. 8.5 set-up: the share is exact, the test part is whole, the rows depend on the seed only."""
    from dpfair.datasets._registry import MISSING_SENSITIVE

    full = load_dataset("compas", random_state=3)
    part = load_dataset("compas", random_state=3, missing_sensitive=0.4)
    hidden = part.s_train == MISSING_SENSITIVE
    assert hidden.sum() == round(0.4 * len(full.s_train))
    np.testing.assert_array_equal(part.s_train[~hidden], full.s_train[~hidden])
    np.testing.assert_array_equal(part.s_test, full.s_test)
    np.testing.assert_array_equal(part.X_train, full.X_train)
    again = load_dataset("compas", random_state=3, missing_sensitive=0.4)
    np.testing.assert_array_equal(again.s_train, part.s_train)
    other = load_dataset("compas", random_state=4, missing_sensitive=0.4)
    assert (other.s_train == MISSING_SENSITIVE).sum() == hidden.sum()
    for bad in (1.0, -0.1, "half", True):
        with pytest.raises(ValueError, match="missing_sensitive must be a fraction in"):
            load_dataset("compas", missing_sensitive=bad)
