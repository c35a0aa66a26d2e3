"""A PrivacyBudget receives plain claims (issue 29, "the budget receives plain claim values"): a fit hands it a
:class:`~dpfair.privacy.budget.Claim` (its relation, whether it is private, its calibrated plan and σ, its δ) and
its final ledger, so that the privacy layer reads nothing off an estimator and knows no estimator class. Here the
owner of the fits is a bare object, not an estimator: what the budget decides follows from the claims alone.
"""

import math

import pytest
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from dpfair.algorithms import DPFERMIClassifier
from dpfair.exceptions import BudgetExceededError
from dpfair.privacy import Part, PrivacyBudget, PrivacyLedger, PrivacyPlan, PrivacyUnit
from dpfair.privacy.budget import Claim, charging

DELTA = 1e-5
RECORD = PrivacyUnit.RECORD.relation
PLAN = PrivacyPlan((Part("sum", count=3),))


class Owner:
    """Whatever fits: the budget needs its identity and nothing else."""


def _claim(epsilon: float) -> Claim:
    return Claim(RECORD, True, PLAN, PLAN.calibrate(epsilon, DELTA, "record"), DELTA)


def _fit(budget, epsilon: float) -> PrivacyLedger:
    """One fit of a bare owner through the hooks an estimator calls: claimed before its releases, then charged."""
    owner, fit_claim = Owner(), _claim(epsilon)
    with charging(owner, budget) as charge:
        charge.claim_fit(owner, Claim(RECORD, True, delta=DELTA))  # a fit's start: nothing calibrated, nor claimed
        charge.claim_fit(owner, fit_claim)  # its calibration
        ledger = fit_claim.ledger()  # what running the plan records
        charge.spent(ledger, DELTA)
    return ledger


def test_a_claim_costs_what_its_calibrated_plan_costs():
    fit_claim = _claim(1.0)
    assert fit_claim.calibrated and not Claim(RECORD, True, PLAN, None, DELTA).calibrated
    assert not Claim(RECORD, False, PLAN, {"sum": 1.0}, None).calibrated  # a non-private fit has no plan to cost
    ledger = fit_claim.ledger()
    assert ledger.relation is RECORD and [(e.label, e.count) for e in ledger.entries] == [("sum", 3)]
    assert ledger.epsilon(DELTA) == pytest.approx(1.0, rel=1e-2) and ledger.epsilon(DELTA) <= 1.0 + 1e-9


def test_the_budget_charges_plain_claims_and_refuses_past_its_total():
    budget = PrivacyBudget(1.2, DELTA)  # two fits of ε = 1 compose to about 1.4 on the accountant
    first = budget.mark()
    ledger = _fit(budget, 1.0)
    assert budget.spent() == (pytest.approx(ledger.epsilon(DELTA)), DELTA)
    second = budget.mark()
    with pytest.raises(BudgetExceededError, match="refused before releasing anything"):
        _fit(budget, 1.0)
    assert budget.spent_since(second) == (0.0, DELTA)  # refused before its calibration's claim was admitted
    assert budget.spent_since(first) == budget.spent()
    assert len(budget.refusals_since(first)) == 1 and budget.refusals_since(budget.mark()) == []


def test_a_non_private_claim_costs_infinity():
    budget, owner = PrivacyBudget(10.0, DELTA), Owner()
    with pytest.raises(BudgetExceededError, match="is not private"):
        with charging(owner, budget) as charge:
            charge.claim_fit(owner, Claim(RECORD, False))
    assert PrivacyBudget().spent() == (0.0, 0.0)


def test_a_plan_claims_what_its_ledger_costs():
    """A fit's plan is learned from the estimator before it runs (``plan``), and the claim its fit then hands the
    budget costs exactly the plan's ledger."""
    planned = DPFERMIClassifier(epochs=1, batch_size=50, privacy_unit="record", groups=2, classes=2).plan(500, 3)
    fit_claim = Claim(planned.unit.relation, True, planned.plan, planned.sigmas, planned.delta)
    assert fit_claim.ledger().to_records() == planned.ledger().to_records()
    assert fit_claim.ledger().epsilon(planned.delta) == pytest.approx(planned.privacy_spent[0])


def test_estimators_draw_from_an_attached_budget_through_privacy_budget():
    budget, est = PrivacyBudget(), DPFERMIClassifier()
    pipe = Pipeline([("scale", StandardScaler()), ("fair", est)])
    assert est.privacy_budget is None and PrivacyBudget.attached(pipe) is None
    assert budget.attach(pipe) is pipe and est.privacy_budget is budget and PrivacyBudget.attached(pipe) is budget
    PrivacyBudget.detach(pipe)
    assert est.privacy_budget is None and "_budget" not in vars(est)
    with pytest.raises(ValueError, match="holds no dpfair estimator"):
        budget.attach(StandardScaler())
    assert math.isinf(PrivacyBudget().epsilon)
