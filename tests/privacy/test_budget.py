"""PrivacyBudget: composition across fits, refusal before any release, grids, nesting, sharing (issue 13, item 5)."""

import copy
import math
import pickle
import re

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from dpfair.algorithms import (
    DPFERMIClassifier,
    DPOracleClassifier,
    DPPostProcessingClassifier,
    ERMClassifier,
    OutputPerturbationClassifier,
    ThresholdClassifier,
    fit_dpfermi_grid,
)
from dpfair.algorithms import dp_postprocess
from dpfair.datasets import make_synthetic
from dpfair.exceptions import BudgetExceededError
from dpfair.privacy import PrivacyBudget, PrivacyLedger, Release
from dpfair.privacy.calibration import CALIBRATION_RTOL

DELTA = 1e-5
#: DP-FERMI with its σ fixed and public proportions: no calibration search, so a fit takes ~0.1 s.
FERMI = dict(noise_multiplier=2.0, group_proportions=[0.5, 0.5], epochs=1, batch_size=100, delta=DELTA, groups=2,
             classes=2, random_state=0)
POST = dict(delta=DELTA, groups=2, classes=2, random_state=0)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(400, 4, label_bias=0.3, feature_bias=1.0, random_state=0)


@pytest.fixture
def releases(monkeypatch):
    """Every Release made (each noisy sum, randomized response or selection is drawn through one)."""
    made = []
    init = Release.__init__

    def spy(self, *args, **kwargs):
        made.append(args[0].name)
        init(self, *args, **kwargs)

    monkeypatch.setattr(Release, "__init__", spy)
    return made


def test_total_is_the_composition_of_the_fits_ledgers(data):
    X, y, s = data
    budget = PrivacyBudget()  # unlimited: it adds up, at the fits' δ
    fits = [budget.attach(DPPostProcessingClassifier(epsilon=1.0, **POST)).fit(X, y, sensitive_features=s),
            budget.attach(DPFERMIClassifier(lam=0.0, **FERMI)).fit(X, y, sensitive_features=s),
            budget.attach(DPFERMIClassifier(lam=2.0, **FERMI)).fit(X, y, sensitive_features=s)]
    expected = PrivacyLedger.combined(f.privacy_ledger_ for f in fits).epsilon(DELTA)
    eps, delta = budget.spent()
    assert delta == DELTA and eps == pytest.approx(expected, rel=1e-6)
    assert eps < sum(f.privacy_spent_[0] for f in fits)  # composed on the accountant, tighter than adding
    assert budget.remaining() == (math.inf, DELTA)


def test_a_fit_past_the_total_is_refused_before_any_release(data, releases):
    X, y, s = data
    budget = PrivacyBudget(1.5, DELTA)
    budget.attach(DPPostProcessingClassifier(epsilon=1.0, **POST)).fit(X, y, sensitive_features=s)
    spent = budget.spent()
    releases.clear()
    est = budget.attach(DPPostProcessingClassifier(epsilon=1.0, **POST))
    assert (1 - CALIBRATION_RTOL) <= spent[0] <= 1.0  # the calibrated ε, at most the target
    refused = re.escape(f"ε = 1.5 that has spent ε = {spent[0]:.4g}: together ε = {2 * spent[0]:.4g} > 1.5, so it was "
                        "refused before releasing")
    with pytest.raises(BudgetExceededError, match=refused):
        est.fit(X, y, sensitive_features=s)
    assert releases == [] and budget.spent() == spent
    assert "privacy_ledger_" not in vars(est)
    with pytest.raises(NotFittedError):
        est.predict(X, sensitive_features=s)
    # what is left still admits a smaller fit
    budget.attach(DPPostProcessingClassifier(epsilon=0.4, **POST)).fit(X, y, sensitive_features=s)
    assert 1.3 < budget.spent()[0] <= 1.4  # pure ε-DP releases compose to at most the sum


def test_a_fit_that_fails_after_a_release_is_charged_its_plan(data, releases, monkeypatch):
    X, y, s = data

    def fail(*args, **kwargs):
        raise ValueError("the linear program failed")

    monkeypatch.setattr(dp_postprocess, "equalized_odds_lp", fail)  # runs after the counts' release
    budget = PrivacyBudget(5.0, DELTA)
    est = budget.attach(DPPostProcessingClassifier(epsilon=1.0, **POST))
    with pytest.raises(ValueError, match="linear program"):
        est.fit(X, y, sensitive_features=s)
    assert releases == [dp_postprocess.COUNTS] and "privacy_ledger_" not in vars(est)
    assert 1 - CALIBRATION_RTOL <= budget.spent()[0] <= 1.0


def test_noise_set_by_a_method_s_own_rule_is_claimed_at_its_release(releases):
    # 800 rows: record-level privacy at ε = 0.5 on the 400 of ``data`` warns of too little data (a UtilityWarning)
    X, y, _ = make_synthetic(800, 4, label_bias=0.3, feature_bias=1.0, random_state=0)
    # calibration="paper": the classical Gaussian mechanism's σ, not the accountant's search
    paper = dict(calibration="paper", epsilon=0.5, delta=DELTA, privacy_unit="record", classes=2)
    budget = PrivacyBudget()
    est = budget.attach(OutputPerturbationClassifier(**paper)).fit(X, y)
    assert budget.spent() == est.privacy_spent_
    releases.clear()
    with pytest.raises(BudgetExceededError, match="OutputPerturbationClassifier would spend"):
        PrivacyBudget(0.3, DELTA).attach(OutputPerturbationClassifier(**paper)).fit(X, y)
    assert releases == []


def test_non_private_fits_spend_infinity(data):
    X, y, s = data
    with pytest.raises(BudgetExceededError, match="ERMClassifier is not private"):
        PrivacyBudget(100.0, DELTA).attach(ERMClassifier()).fit(X, y)
    unlimited = PrivacyBudget()
    unlimited.attach(ThresholdClassifier()).fit(X, y, sensitive_features=s)
    assert unlimited.spent() == (math.inf, 0.0)


def test_a_grid_draws_its_joint_epsilon(data, releases):
    X, y, s = data
    budget = PrivacyBudget(5.0, DELTA)
    grid = fit_dpfermi_grid(X, y, s, {"lam": [0.0, 1.0, 2.0]}, budget=budget, **FERMI)
    assert budget.spent()[0] == pytest.approx(grid.privacy_spent[0], rel=1e-6)
    assert grid.privacy_spent[0] > max(est.privacy_spent_[0] for est in grid)
    releases.clear()
    with pytest.raises(BudgetExceededError, match="DP-FERMI grid of 3 models"):
        fit_dpfermi_grid(X, y, s, {"lam": [0.0, 1.0, 2.0]}, budget=budget, **FERMI)
    assert releases == []
    assert budget.spent()[0] == pytest.approx(grid.privacy_spent[0], rel=1e-6)


def test_a_nested_fit_is_part_of_the_enclosing_fit(data, releases):
    X, y, s = data
    budget = PrivacyBudget(4.5, DELTA)
    # reads s: post-processing composes its ledger; a chosen tolerance, as "auto" on 400 rows at ε = 2 is far above
    # 0.05 and warns that the audit cannot see a violation (a UtilityWarning; this test is about the budget)
    base = DPOracleClassifier(epsilon=2.0, n_rounds=3, tolerance=0.05, **POST)
    outer = budget.attach(DPPostProcessingClassifier(base, epsilon=3.0, **POST)).fit(X, y, sensitive_features=s)
    assert budget.spent()[0] == pytest.approx(outer.privacy_spent_[0], rel=1e-6)  # charged once, not twice
    releases.clear()
    with pytest.raises(BudgetExceededError, match="DPOracleClassifier would spend ε = 1.99"):
        budget.attach(DPPostProcessingClassifier(base, epsilon=3.0, **POST)).fit(X, y, sensitive_features=s)
    assert releases == []  # the base itself was refused, before its first release


def test_a_fit_is_part_of_a_running_claim_only_when_it_is_passed_down(data):
    """No ambient state: a fit started while another claim runs (here a search-like grid claim) is charged on its
    own; handed that claim (``fit_within``, ``fit_many(budget=charge)``), it is the claim's part (covered by it)."""
    from dpfair.privacy.budget import charging_grid

    X, y, s = data
    budget = PrivacyBudget(20.0, DELTA)
    planned = OutputPerturbationClassifier(epsilon=1.0, **POST).fit(X, y, s).privacy_ledger_
    with charging_grid(budget, "search", "a search") as charge:
        charge.claim_ledger(planned, DELTA)
        apart = budget.attach(OutputPerturbationClassifier(epsilon=2.0, **POST)).fit(X, y, s)
        part = OutputPerturbationClassifier(epsilon=3.0, **POST).fit_within(charge, X, y, s)
        many = OutputPerturbationClassifier.fit_many([OutputPerturbationClassifier(epsilon=3.0, **POST)], X, y, s,
                                                     budget=charge)
    assert part.privacy_budget is None and many[0].privacy_budget is None  # the claim is left on no estimator
    both = PrivacyLedger(planned.relation)
    both.extend(planned.entries)
    both.extend(apart.privacy_ledger_.entries)
    assert budget.spent()[0] == pytest.approx(both.epsilon(DELTA), rel=1e-6)  # the parts are inside the claim


def test_units_must_match(data, releases):
    X, y, s = data
    with pytest.raises(ValueError, match="protects privacy_unit='sensitive' but its PrivacyBudget protects 'record'"):
        PrivacyBudget(10.0, DELTA, unit="record").attach(DPFERMIClassifier(**FERMI)).fit(X, y, sensitive_features=s)
    assert releases == []


def test_shared_by_clones_and_copies_never_pickled(data, tmp_path):
    X, y, s = data
    budget = PrivacyBudget()
    est = budget.attach(DPFERMIClassifier(**FERMI))
    assert clone(est)._budget is budget and copy.deepcopy(est)._budget is budget and copy.copy(budget) is budget
    est.fit(X, y, sensitive_features=s).save(tmp_path / "model.pt")  # dpfair's model file leaves it out
    with pytest.raises(TypeError, match="cannot be pickled.*n_jobs"):
        pickle.dumps(est)
    pickle.dumps(PrivacyBudget.detach(est))
    assert "_budget" not in vars(est)


@pytest.mark.parametrize("kwargs,match", [
    (dict(epsilon=1.0), "needs the delta"),
    (dict(epsilon=0.0, delta=DELTA), "epsilon must be > 0"),
    (dict(epsilon=1.0, delta=1.5), "delta must lie strictly between 0 and 1"),
    (dict(epsilon=1.0, delta=DELTA, unit="person"), "privacy_unit must be one of"),
    (dict(accountant="moments"), "accountant must be one of"),
])
def test_bad_budgets(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PrivacyBudget(**kwargs)


def test_attach_needs_a_dpfair_estimator():
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(ValueError, match="holds no dpfair estimator"):
        PrivacyBudget().attach(LogisticRegression())


def test_threads_share_one_budget(data):
    from joblib import parallel_backend
    from sklearn.model_selection import cross_validate

    X, y, s = data
    budget = PrivacyBudget()
    with parallel_backend("threading", n_jobs=2):
        result = cross_validate(budget.attach(DPFERMIClassifier(**FERMI)), X, y, cv=4, return_estimator=True,
                                params={"sensitive_features": s})
    assert np.isfinite(result["test_score"]).all()
    fits = result["estimator"]
    assert all(est._budget is budget for est in fits)
    expected = PrivacyLedger.combined(est.privacy_ledger_ for est in fits).epsilon(DELTA)
    assert budget.spent()[0] == pytest.approx(expected, rel=1e-6)
