"""The fit contract (issue 29): a public, side-effect-free ``plan`` equal to what a fit then releases; one
``FitContext`` per fit, dropped at its end (no transient attribute left on the estimator); ``fit_many``."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
from sklearn.base import clone

from dpfair.algorithms import (
    METHODS,
    DPPostProcessingClassifier,
    DPSGDClassifier,
    OutputPerturbationClassifier,
    PrivateDemographicsClassifier,
)
from dpfair.algorithms.fit_context import PublicShape
from dpfair.exceptions import UtilityWarning
from dpfair.utils.capabilities import capabilities
from dpfair.privacy import PrivacyBudget, ledger_totals

N, D = 240, 3

#: Small, fast settings of each method (public lists given, so that nothing is inferred from private data).
FAST = {
    "dp-fermi": {"epochs": 1, "batch_size": 60},
    "dp-sgd": {"epochs": 1, "batch_size": 60},
    "pf-ld": {"epochs": 1, "batch_size": 60, "model": "logistic"},
    "dp-oracle": {"n_rounds": 2, "n_thresholds": 5},
    "private-demographics": {"max_iter": 5},
    "erm": {"max_iter": 20},
    "reductions": {"max_iter": 5},
}

#: Private settings whose plans differ from a method's default one.
VARIANTS = [
    ("dp-sgd", {"sample_size": 1000, "noise_multiplier": None}),
    ("dp-sgd", {"noise_multiplier": 1.5}),
    ("pf-ld", {"group_proportions": [0.5, 0.5]}),
    ("output-perturbation", {"privacy_unit": "sensitive"}),
    ("output-perturbation", {"privacy_unit": "sensitive", "sensitive_feature_columns": [0]}),
    ("output-perturbation", {"calibration": "paper", "epsilon": 0.5, "sample_size": 500}),
    ("dp-postprocess", {"privacy_unit": "record",
                        "estimator": DPSGDClassifier(epochs=1, batch_size=60, epsilon=0.5)}),
    pytest.param("dp-oracle", {"secure_mode": True}, marks=pytest.mark.secret_noise),  # exact noise: no replay
]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    s = rng.integers(0, 2, N)
    y = (X[:, 0] + 0.5 * s + rng.normal(size=N) > 0).astype(np.int64)
    return X, y, s


def _make(name, **params):
    cls = METHODS[name]
    valid = cls().get_params()
    kw = {**FAST.get(name, {}), **params}
    kw.update({k: [0, 1] for k in ("groups", "classes") if k in valid})
    return cls(**{k: v for k, v in kw.items() if k in valid})


PRIVATE = [name for name, cls in METHODS.items() if capabilities(cls()).private]
CASES = [(name, {}) for name in PRIVATE] + VARIANTS


@pytest.mark.parametrize(("name", "params"), CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_plan_equals_what_the_fit_then_releases(data, name, params):
    X, y, s = data
    est = _make(name, **params)
    planned = est.plan(N, D, groups=2, classes=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UtilityWarning)  # every method on 240 rows: too little signal, as it says
        est.fit(X, y, sensitive_features=s)
    assert planned.plan == est.privacy_plan_
    assert dict(planned.sigmas) == est.noise_multipliers_
    assert planned.delta == est.delta_ and planned.epsilon == est.epsilon_target_
    assert planned.expected_ledger() == ledger_totals(est.privacy_ledger_)  # the fit released exactly its plan
    assert planned.privacy_spent == pytest.approx(est.privacy_spent_, rel=1e-9)


@pytest.mark.parametrize(("name", "params"), CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_plan_has_no_side_effects(name, params):
    est = _make(name, **params)
    before = copy.deepcopy(vars(est))
    est.plan(N, D, groups=2, classes=2)
    assert repr(vars(est)) == repr(before)
    assert est.fit_context is None and "_running_fit" not in vars(est)
    assert not hasattr(est, "privacy_ledger_") and not hasattr(est, "privacy_plan_")


def test_a_plan_is_a_function_of_public_inputs_only():
    """Two estimators with the same hyper-parameters plan the same for the same shape; a plan that needs a public
    list it was not given says so in one line."""
    a, b = DPSGDClassifier(epochs=2), DPSGDClassifier(epochs=2)
    assert a.plan(1000, 5) == b.plan(PublicShape.of(1000, 5))
    assert a.plan(1000, 5).plan != a.plan(2000, 5).plan  # the sampling rate reads n
    with pytest.raises(ValueError, match="depends on the number of groups") as info:
        PrivateDemographicsClassifier().plan(100, 3)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="n must be the number of training rows"):
        DPSGDClassifier().plan(0)


def test_a_non_private_method_plans_nothing():
    planned = METHODS["erm"]().plan(100, 3)
    assert planned.plan is None and not planned.private and planned.privacy_spent == (math.inf, 0.0)


def test_dp_postprocess_plans_its_base_from_the_bases_own_plan(data):
    base = DPSGDClassifier(epochs=1, batch_size=60, epsilon=0.5)
    est = DPPostProcessingClassifier(base, privacy_unit="record", groups=[0, 1], classes=[0, 1])
    planned = est.plan(N, D)
    base_plan = clone(base).plan(N, D, groups=2, classes=2)
    fixed = [p for p in planned.plan.parts if p.mechanism == "fixed"]
    assert [(p.count, p.fixed) for p in fixed] == [(c, e) for (_, e), c in base_plan.expected_ledger().items()]
    with pytest.raises(ValueError, match="alone spends"):
        DPPostProcessingClassifier(clone(base).set_params(epsilon=2.0), privacy_unit="record", epsilon=1.0,
                                   groups=[0, 1], classes=[0, 1]).plan(N, D)


def test_output_perturbation_plans_the_columns_a_schema_names(data):
    est = OutputPerturbationClassifier(privacy_unit="sensitive")
    assert est.plan(N, D).plan.parts[0].mechanism == "fixed"  # reads no s: a no-op
    assert est.plan(N, D, sensitive_columns=[1]).plan.parts[0].mechanism == "gaussian"


@pytest.mark.parametrize("name", list(METHODS))
def test_a_fit_leaves_only_fitted_attributes(data, name):
    """``fit`` hands its context to ``_fit`` and drops it: what a fit adds to the estimator is its fitted
    (``name_``) attributes, nothing transient; a failed fit leaves nothing at all."""
    X, y, s = data
    est = _make(name)
    before = set(vars(est))
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UtilityWarning)  # every method on 240 rows: too little signal, as it says
        est.fit(X, y, sensitive_features=s, callback=lambda e, info: seen.append(
            e.fit_context is not None and copy.deepcopy(e).fit_context is None))  # a copy never takes the context
    added = set(vars(est)) - before
    assert added and all(k.endswith("_") for k in added), sorted(k for k in added if not k.endswith("_"))
    assert seen and all(seen) and est.fit_context is None
    failed = clone(est)
    with pytest.raises(ValueError):
        failed.fit(X, y[:-1], sensitive_features=s)
    assert set(vars(failed)) == before and failed.fit_context is None


def test_fit_many_fits_each_in_order_and_charges_each_on_the_budget():
    rng = np.random.default_rng(1)  # 1,000 rows: enough for DP-SGD's record-level privacy at epsilon=0.5
    X, s = rng.normal(size=(1000, D)), rng.integers(0, 2, 1000)
    y = (X[:, 0] + 0.5 * s + rng.normal(size=1000) > 0).astype(np.int64)
    ests = [DPSGDClassifier(epochs=1, batch_size=60, epsilon=eps, delta=1e-5, groups=[0, 1], classes=[0, 1])
            for eps in (0.5, 1.0)]  # at the budget's delta: its composed epsilon is then above each fit's
    budget = PrivacyBudget(10.0, 1e-5, unit="record")
    fitted = DPSGDClassifier.fit_many(ests, X, y, s, budget=budget)
    assert fitted == ests and all(hasattr(e, "model_") for e in fitted)
    assert all(0.99 * eps <= e.privacy_spent_[0] <= eps for e, eps in zip(fitted, (0.5, 1.0)))
    assert 1.0 < budget.spent()[0] < 1.5 + 1e-9  # both charged, composed
    by_params = DPSGDClassifier.fit_many([{"epochs": 1, "batch_size": 60, "groups": [0, 1], "classes": [0, 1]}],
                                         X, y, s)
    assert isinstance(by_params[0], DPSGDClassifier) and hasattr(by_params[0], "model_")


def test_a_fit_that_leaves_a_side_ledger_open_is_refused(data):
    """Releases recorded on a side ledger that is never closed would be missing from the ledger and the charge."""
    from dpfair.algorithms import PFLDClassifier

    X, y, s = data
    est = PFLDClassifier(epsilon=1.0, epochs=1, groups=2, classes=2, random_state=0)
    est.begin_fit(X, y, s)
    est.fit_context.side_ledger()
    with pytest.raises(RuntimeError, match=r"PFLDClassifier's fit left 1 side ledger\(s\) open"):
        est.end_fit()
    assert est.fit_context is None
