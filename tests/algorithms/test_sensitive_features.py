"""Features that encode s under the sensitive unit (issue 26, part 3): one rule, asked of every estimator.

Under ``privacy_unit="sensitive"`` X is public, so a feature that encodes s is read without noise: refused by
:func:`dpfair.privacy.check_public_features` (one line naming the fix), except by output perturbation, whose
``sensitive_feature_columns`` puts those columns under its accounting.
"""

import math

import numpy as np
import pandas as pd
import pytest

from dpfair.algorithms import (
    METHODS,
    DPFERMIClassifier,
    DPPostProcessingClassifier,
    ERMClassifier,
    OutputPerturbationClassifier,
    PFLDClassifier,
)
from dpfair.datasets import load_dataset
from dpfair.experiments.runner import declared_estimator
from dpfair.privacy import check_public_features
from dpfair.selection import PrivateSearch

FIX = r"drop them from X \(include_sensitive=false for a built-in data set\) or use privacy_unit='record'"


def test_the_rule_refuses_only_under_the_sensitive_unit_with_one_line_naming_the_fix():
    with pytest.raises(ValueError, match=rf"feature\(s\) 'sex=F', 'sex=M' encode the sensitive attribute 'sex'.*{FIX}"
                       ) as caught:
        check_public_features("sensitive", ["sex=F", "sex=M"], "sex")
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=r"'p0', 'p1', 'p2', 'p3' and 780 more encode"):
        check_public_features("sensitive", [f"p{j}" for j in range(784)], "inverted")
    check_public_features("record", ["sex=F"], "sex")  # every feature is protected with its record
    check_public_features(None, ["sex=F"], "sex")  # a non-private method claims nothing
    check_public_features("sensitive", ["sex=F"], "sex", accounted=True)  # output perturbation's columns
    check_public_features("sensitive", [], "sex")


def _default(cls):
    params = cls().get_params()
    return cls(**{k: v for k, v in (("groups", 2), ("classes", 2)) if k in params})


@pytest.mark.parametrize("method", sorted(METHODS))
def test_each_method_is_asked_what_it_does_with_such_columns(method):
    est = _default(METHODS[method])
    params = est.get_params()
    private = "epsilon" in params
    unit = getattr(est, "privacy_unit", None)
    reads_public_x = private and unit == "sensitive" and "sensitive_feature_columns" not in params
    if reads_public_x:
        with pytest.raises(ValueError, match="encode the sensitive attribute 'sex'"):
            est.check_sensitive_columns([1], ["age", "sex"], "sex")
    else:
        handed = est.check_sensitive_columns([1], ["age", "sex"], "sex")
        assert handed == ([1] if "sensitive_feature_columns" in params else [])
    if "privacy_unit" in params and unit == "sensitive":  # the record unit protects every feature
        assert est.set_params(privacy_unit="record").check_sensitive_columns([1], ["age", "sex"], "sex") == []


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    n = 300
    sex = rng.integers(0, 2, n)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["a", "b", "c"]).assign(sex=sex)
    y = (X["a"] + sex + 0.3 * rng.normal(size=n) > 0.5).astype(int)
    return X, y


@pytest.mark.parametrize("make", [
    lambda: DPFERMIClassifier(groups=2, classes=2, epochs=1),
    lambda: PFLDClassifier(groups=2, classes=2, epochs=1),
    lambda: DPPostProcessingClassifier(groups=2, classes=2),
], ids=["dp-fermi", "pf-ld", "dp-postprocess"])
def test_a_dataframe_holding_the_sensitive_column_is_refused_and_leaves_the_estimator_unfitted(frame, make):
    X, y = frame
    est = make()
    with pytest.raises(ValueError, match=rf"'sex' encode the sensitive attribute 'sex'.*{FIX}"):
        est.fit(X, y, sensitive_features=X["sex"])
    assert not hasattr(est, "classes_")
    dummies = pd.get_dummies(X, columns=["sex"], dtype=float)  # sex_0, sex_1 for the declared groups 0, 1
    with pytest.raises(ValueError, match=r"'sex_0', 'sex_1' encode"):
        make().fit(dummies, y, sensitive_features=X["sex"])


def test_the_record_unit_a_non_private_method_and_a_frame_without_s_are_accepted(frame):
    X, y = frame
    s = X["sex"]
    # ε = 2 with half of it on the group counts: 300 records are enough for the record unit at that ε, and the
    # released counts (noise std about 4) of the groups of 137 and 163 are far from small
    assert math.isfinite(DPFERMIClassifier(groups=2, classes=2, epochs=1, privacy_unit="record", epsilon=2.0,
                                           proportions_budget=0.5)
                         .fit(X, y, sensitive_features=s).privacy_spent_[0])
    assert ERMClassifier(epochs=1).fit(X, y, sensitive_features=s).privacy_spent_[0] == math.inf
    assert DPFERMIClassifier().check_sensitive_frame(X.drop(columns="sex"), s, [0, 1]) == []
    assert DPFERMIClassifier().check_sensitive_frame(X.to_numpy(), s, [0, 1]) == []  # an array carries no names
    assert DPFERMIClassifier().check_sensitive_frame(X, s.to_numpy(), [0, 1]) == []  # nor an unnamed s


def test_output_perturbation_accounts_for_the_sensitive_column_of_a_dataframe(frame):
    X, y = frame
    s = X["sex"]
    est = OutputPerturbationClassifier(privacy_unit="sensitive", groups=2, classes=2, epsilon=1.0)
    est.fit(X, y, sensitive_features=s)
    assert est.sensitive_feature_columns_ == [3] and est.get_params()["sensitive_feature_columns"] is None
    assert 0.9 < est.privacy_spent_[0] <= 1.0
    without = OutputPerturbationClassifier(privacy_unit="sensitive", groups=2, classes=2).fit(
        X.drop(columns="sex"), y, sensitive_features=s)
    assert without.sensitive_feature_columns_ == [] and without.privacy_spent_[0] == 0.0


def test_a_private_search_asks_its_estimator_too(frame):
    X, y = frame
    s = X["sex"]
    with pytest.raises(ValueError, match="'sex' encode the sensitive attribute 'sex'"):
        PrivateSearch(DPFERMIClassifier(groups=2, classes=2, epochs=1), {"lam": [0.0, 1.0]}).fit(
            X, y, sensitive_features=s)
    search = PrivateSearch(OutputPerturbationClassifier(privacy_unit="sensitive", groups=2, classes=2),
                           {"l2_regularization": [1.0]}, notion="demographic_parity", random_state=0)
    search.fit(X, y, sensitive_features=s)
    assert search.best_estimator_.sensitive_feature_columns_ == [3]
    assert search.estimator.get_params()["sensitive_feature_columns"] is None  # the user's estimator is untouched


def _flip_sex(data, row: int):
    """The neighbouring data set: one person's sex changed, in s and in the columns that encode it."""
    X, s = data.X_train.copy(), data.s_train.copy()
    names = data.feature_names
    code = next(f for f in data.sensitive_feature_names if X[row, names.index(f)] == 1.0)
    other = "personal_status_sex=A93" if s[row] == 0 else "personal_status_sex=A92"  # male single / female
    X[row, names.index(code)], X[row, names.index(other)] = 0.0, 1.0
    s[row] = 1 - s[row]
    return X, s


def test_the_issue_demonstration_output_perturbation_accounts_for_included_sex(shared_data):
    """german with include_sensitive: the minimiser differs between neighbours (one person's sex, in s and in
    X), so it may not be released at ε = 0; the data set's columns are handed over and the release is noised
    for a sensitivity that covers the change."""
    data = load_dataset("german", include_sensitive=True, data_home=shared_data)
    est = declared_estimator(OutputPerturbationClassifier, {"privacy_unit": "sensitive", "random_state": 0}, data)
    assert est.get_params()["sensitive_feature_columns"] == list(data.sensitive_columns)
    est.fit(*data.train)
    assert est.sensitive_feature_columns_ == list(data.sensitive_columns)
    assert 0.9 < est.privacy_spent_[0] <= 1.0 and est.noise_std_ > 0
    # at ε = ∞ the release is the minimiser itself: the two neighbours' differ, by at most the sensitivity
    # (μ = 0.1: at the default μ = 1 the minimiser is shrunk to predicting one class, a LearnedNothingWarning)
    exact = declared_estimator(OutputPerturbationClassifier,
                               {"privacy_unit": "sensitive", "epsilon": math.inf, "l2_regularization": 0.1,
                                "random_state": 0}, data)
    X_other, s_other = _flip_sex(data, row=0)
    w = exact.fit(*data.train).coef_
    w_other = exact.fit(X_other, data.y_train, s_other).coef_
    assert 0.0 < np.linalg.norm(w - w_other) <= exact.sensitivity_
    with pytest.raises(ValueError, match="encode the sensitive attribute 'sex'"):
        declared_estimator(DPPostProcessingClassifier, {}, data)
