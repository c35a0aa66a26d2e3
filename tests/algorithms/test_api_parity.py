"""Python API parity (issue 28, part B): what one estimator takes, every estimator takes, as scikit-learn's do.

Each test plants one friction the issue met: ``groups=``/``classes=`` refused by some constructors,
``sensitive_features="column"``, ``sample_weight=``, ``decision_function``, feature names at prediction,
``evaluate`` on string groups, fairness scorers in scikit-learn's own CV, and a Pipeline in a safe model file.
"""

import io
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, StandardScaler

from dpfair.algorithms import (
    METHODS,
    DPSGDClassifier,
    ERMClassifier,
    OutputPerturbationClassifier,
    ReductionsClassifier,
    ThresholdClassifier,
)
from dpfair.exceptions import PrivacyLeakWarning
from dpfair.experiments.evaluate import evaluate
from dpfair.fairness import MissingGroupsError, fairness_scorer
from dpfair.model_selection import cross_validate
from dpfair.persistence import load_estimator, save_estimator

GROUPS, CLASSES = ["F", "M"], ["no", "yes"]


@pytest.fixture(scope="module")
def loans():
    """A small table that is not a built-in data set: string labels, a string group column (standardised numbers:
    unscaled ones are part D's friction)."""
    rng = np.random.default_rng(28)
    n = 300
    sex = np.where(rng.random(n) < 0.4, "F", "M")
    X = pd.DataFrame({"income": rng.normal(0.0, 1.0, n), "debt": rng.normal(0.0, 1.0, n),
                      "age": rng.normal(0.0, 1.0, n)})
    score = X["income"] - X["debt"] + 0.4 * (sex == "M") + 0.5 * rng.normal(size=n)
    y = np.where(score > 0, "yes", "no")
    return X, y, sex


def _one_line(exc) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# ---- groups= and classes= everywhere ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_estimator_takes_the_public_group_and_class_lists(method):
    est = METHODS[method](groups=GROUPS, classes=CLASSES)
    assert est.get_params()["groups"] == GROUPS and est.get_params()["classes"] == CLASSES


@pytest.mark.parametrize("cls", [ERMClassifier, ReductionsClassifier, ThresholdClassifier])
def test_declared_lists_name_the_fitted_groups_and_classes(loans, cls):
    X, y, s = loans
    est = cls(groups=["M", "F"], classes=CLASSES, random_state=0).fit(X, y, sensitive_features=s)
    assert est.groups_.tolist() == ["M", "F"] and est.classes_.tolist() == CLASSES


# ---- sensitive_features="column" ------------------------------------------------------------------------------
def test_a_named_column_is_s_and_is_taken_out_of_x(loans):
    X, y, s = loans
    named = ERMClassifier(random_state=0).fit(X.assign(sex=s), y, sensitive_features="sex")
    given = ERMClassifier(random_state=0).fit(X, y, sensitive_features=s)
    assert named.sensitive_column_ == "sex" and list(named.feature_names_in_) == list(X.columns)
    assert named.groups_.tolist() == GROUPS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the frame holding "sex" is read without a word
        np.testing.assert_allclose(named.predict_proba(X.assign(sex=s)), given.predict_proba(X), atol=1e-6)
        np.testing.assert_allclose(named.predict_proba(X), given.predict_proba(X), atol=1e-6)


def test_a_method_that_reads_s_at_prediction_takes_it_from_the_named_column(loans):
    X, y, s = loans
    est = ThresholdClassifier(random_state=0).fit(X.assign(sex=s), y, sensitive_features="sex")
    np.testing.assert_array_equal(est.predict(X.assign(sex=s)), est.predict(X, sensitive_features=s))


def test_a_column_name_without_such_a_column_is_one_line_naming_the_fix(loans):
    X, y, _ = loans
    with pytest.raises(ValueError, match="names a column, but X is a ndarray") as caught:
        ERMClassifier().fit(X.to_numpy(), y, sensitive_features="sex")
    assert "DataFrame" in _one_line(caught)
    with pytest.raises(ValueError, match="'sex' is not a column of X") as caught:
        ERMClassifier().fit(X, y, sensitive_features="sex")
    _one_line(caught)


# ---- sample_weight --------------------------------------------------------------------------------------------
def test_erm_weights_rows_as_repeating_them(loans):
    X, y, s = loans
    w = np.random.default_rng(1).integers(0, 3, len(y))
    rows = np.repeat(np.arange(len(y)), w)
    weighted = ERMClassifier(tol=1e-9, random_state=0).fit(X, y, s, sample_weight=w)
    repeated = ERMClassifier(tol=1e-9, random_state=0).fit(X.iloc[rows], y[rows], s[rows])
    np.testing.assert_allclose(weighted.predict_proba(X), repeated.predict_proba(X), atol=1e-4)
    plain = ERMClassifier(tol=1e-9, random_state=0).fit(X, y, s)
    assert np.abs(weighted.predict_proba(X) - plain.predict_proba(X)).max() > 1e-3  # the weights did something
    with pytest.raises(ValueError, match="sample_weight must be finite and >= 0"):
        ERMClassifier().fit(X, y, s, sample_weight=-np.ones(len(y)))


@pytest.mark.parametrize("make, why", [
    (lambda: DPSGDClassifier(groups=GROUPS, classes=CLASSES, epochs=1), "privacy accounting does not cover"),
    (lambda: ReductionsClassifier(), "weights the rows itself"),
    (lambda: ThresholdClassifier(), "unweighted rows"),
])
def test_other_methods_refuse_sample_weight_with_the_reason(loans, make, why):
    X, y, s = loans
    est = make()
    with pytest.raises(ValueError, match=f"does not take sample_weight: .*{why}") as caught:
        est.fit(X, y, s, sample_weight=np.ones(len(y)))
    _one_line(caught)
    assert not hasattr(est, "classes_")  # refused before anything was fitted (or released)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sample_weights'"):
        est.fit(X, y, s, sample_weights=np.ones(len(y)))


# ---- decision_function ----------------------------------------------------------------------------------------
def test_decision_function_is_the_log_odds_of_the_second_class(loans):
    X, y, s = loans
    est = ERMClassifier(random_state=0).fit(X, y, s)
    decision = est.decision_function(X)
    assert decision.shape == (len(y),)
    proba = est.predict_proba(X)  # float32 softmax: log-odds from it agree to its rounding (~1e-7 relative)
    np.testing.assert_allclose(decision, np.log(proba[:, 1]) - np.log(proba[:, 0]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(est.classes_[(decision > 0).astype(int)], est.predict(X))


def test_multiclass_decision_function_has_one_column_per_class_and_randomised_methods_have_none(loans):
    X, y, s = loans
    y3 = np.where(X["age"] > 0.5, "old", y)
    est = ERMClassifier(random_state=0).fit(X, y3, s)
    decision = est.decision_function(X)
    assert decision.shape == (len(y), 3)
    np.testing.assert_array_equal(est.classes_[decision.argmax(axis=1)], est.predict(X))
    assert not hasattr(ReductionsClassifier(), "decision_function")  # predict draws: no score decides it
    assert not hasattr(ThresholdClassifier(), "decision_function")


# ---- feature names at prediction ------------------------------------------------------------------------------
def test_fitted_on_an_array_then_given_a_frame_warns_as_scikit_learn_does(loans):
    X, y, s = loans
    est = ERMClassifier(random_state=0).fit(X.to_numpy(), y, s)
    with pytest.warns(UserWarning, match="X has feature names, but ERMClassifier was fitted without feature names"):
        est.predict(X[X.columns[::-1]])


def test_fitted_on_a_frame_reordered_columns_change_nothing_and_an_array_warns(loans):
    X, y, s = loans
    est = ERMClassifier(random_state=0).fit(X, y, s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(est.predict(X[X.columns[::-1]]), est.predict(X))
    with pytest.warns(UserWarning, match="X does not have valid feature names, but ERMClassifier was fitted with"):
        est.predict(X.to_numpy())


# ---- evaluate takes what fit takes ----------------------------------------------------------------------------
def test_evaluate_takes_string_groups_names_and_a_column(loans):
    X, y, s = loans
    est = ERMClassifier(random_state=0).fit(X, y, s)
    by_value = evaluate(est, X, y, s, group_names=GROUPS)  # string groups and names: a TypeError before
    assert set(by_value["per_group_accuracy"]) == set(GROUPS)
    codes = (s == "M").astype(int)
    assert evaluate(est, X, y, codes, group_names=GROUPS) == by_value
    assert evaluate(est, X.assign(sex=s), y, sensitive_features="sex") == by_value
    named = ERMClassifier(random_state=0).fit(X.assign(sex=s), y, sensitive_features="sex")
    assert evaluate(named, X.assign(sex=s), y)["per_group_accuracy"] == by_value["per_group_accuracy"]


# ---- fairness scorers in scikit-learn's own CV ----------------------------------------------------------------
def test_a_fairness_scorer_without_groups_stops_scikit_learns_cv_instead_of_scoring_nan(loans):
    X, y, s = loans
    with pytest.raises(MissingGroupsError, match=r"got no groups for the scored rows.*sensitive_features='sex'"):
        cross_val_score(ERMClassifier(), X, y, scoring=fairness_scorer("demographic_parity"),
                        params={"sensitive_features": s}, cv=3)
    with pytest.raises(MissingGroupsError):
        GridSearchCV(ERMClassifier(), {"weight_decay": [0.0, 0.1]}, scoring=fairness_scorer(), cv=3).fit(X, y)


def test_a_fairness_scorer_reading_a_named_column_works_without_metadata_routing(loans):
    X, y, s = loans
    Xs = X.assign(sex=s)
    scorer = fairness_scorer("demographic_parity", sensitive_features="sex")
    plain = cross_val_score(ERMClassifier(), Xs, y, scoring=scorer, params={"sensitive_features": "sex"}, cv=3)
    assert np.all(np.isfinite(plain))
    with pytest.warns(PrivacyLeakWarning, match="cross_validate: the fits spent ε = inf"):
        routed = cross_validate(ERMClassifier(), X, y, sensitive_features=s, cv=3,
                                scoring=fairness_scorer("demographic_parity"))["test_score"]
    np.testing.assert_allclose(plain, routed)
    search = GridSearchCV(ThresholdClassifier(random_state=0), {"grid_size": [50, 100]}, scoring=scorer, cv=3)
    search.fit(Xs, y, sensitive_features="sex")
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


# ---- a Pipeline in a safe model file --------------------------------------------------------------------------
def test_a_pipeline_of_scalers_and_an_estimator_saves_and_loads(loans):
    X, y, s = loans
    pipe = make_pipeline(StandardScaler(), MinMaxScaler(), ERMClassifier(random_state=0))
    pipe.fit(X, y, ermclassifier__sensitive_features=s)
    buf = io.BytesIO()
    save_estimator(pipe, buf)
    buf.seek(0)
    back = load_estimator(buf)
    assert [name for name, _ in back.steps] == [name for name, _ in pipe.steps]
    np.testing.assert_array_equal(back.predict_proba(X), pipe.predict_proba(X))


def test_a_pipeline_step_that_cannot_be_stored_safely_is_one_line_naming_it(loans):
    X, y, _ = loans
    pipe = make_pipeline(FunctionTransformer(np.abs), ERMClassifier(random_state=0)).fit(X, y)
    with pytest.raises(ValueError, match="its step 'functiontransformer' is a .*FunctionTransformer") as caught:
        save_estimator(pipe, io.BytesIO())
    _one_line(caught)


def test_saving_a_scaler_fitted_on_record_unit_rows_warns_what_it_publishes(loans):
    X, y, _ = loans
    pipe = make_pipeline(StandardScaler(), OutputPerturbationClassifier(classes=CLASSES, random_state=0))
    pipe.fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match=r"'standardscaler' \(StandardScaler: .*mean_.*does not cover"):
        save_estimator(pipe, io.BytesIO())
