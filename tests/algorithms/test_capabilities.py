"""What each estimator declares it can do (:mod:`dpfair.utils.capabilities`) is what it does (issue 29).

Each declared capability is checked against the estimator's own behaviour: its hyper-parameters, its
signature, what ``check_hyperparameters`` refuses and what ``fit`` refuses, data-free or on a few rows.
"""

import inspect
import math

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils import get_tags

from dpfair.algorithms import METHODS, DPFERMIClassifier, DPSGDClassifier, method_name
from dpfair.utils.capabilities import Capabilities, capabilities
from dpfair.selection import PrivateSearch

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning:absl")


@pytest.mark.parametrize("method", list(METHODS))
def test_what_a_method_declares_matches_its_hyperparameters_and_signature(method):
    cls = METHODS[method]
    est = cls()
    params = est.get_params()
    declared = capabilities(est)
    assert declared == capabilities(cls) and isinstance(declared, Capabilities)
    assert declared.private == ("epsilon" in params)
    assert declared.private == get_tags(est).non_deterministic  # scikit-learn's own tag says the same
    assert declared.predict_needs_sensitive == ("sensitive_features" in inspect.signature(est.predict).parameters)
    assert declared.target_error == ("target_error" in params)
    assert declared.fairness_strength is None or declared.fairness_strength in params
    assert bool(declared.notions) == (est.fairness_target() != {})
    if "notion" in params:
        assert params["notion"] in declared.notions
        for notion in declared.notions:
            clone(est).set_params(notion=notion).check_hyperparameters()
    assert method_name(est) == method_name(cls) == method


@pytest.mark.parametrize("method", [m for m in METHODS if capabilities(METHODS[m]).private])
def test_a_private_method_guarantees_exactly_its_declared_units(method):
    est = METHODS[method]()
    units = capabilities(est).units
    assert units and set(units) <= {"sensitive", "record"}
    if "privacy_unit" not in est.get_params():  # fixed by the class
        assert units == (est.privacy_unit,)
        return
    for unit in ("sensitive", "record"):
        trial = clone(est).set_params(privacy_unit=unit)
        if unit in units:
            trial.check_hyperparameters()
        else:
            with pytest.raises(ValueError, match="privacy_unit='sensitive'"):
                trial.check_hyperparameters()


def _rows(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] > 0).astype(int), rng.integers(0, 2, n)


@pytest.mark.parametrize("method", [m for m in METHODS if capabilities(METHODS[m]).requires_sensitive])
def test_a_method_that_requires_s_refuses_a_fit_without_it(method):
    est = METHODS[method]()
    X, y, _ = _rows()
    with pytest.raises(ValueError, match="needs sensitive_features"):
        est.fit(X, y)


def test_batched_grids_and_a_search_ask_the_capabilities():
    assert capabilities(DPFERMIClassifier()).batched_grid
    assert not capabilities(DPFERMIClassifier(secure_mode=True)).batched_grid  # exact noise: one model at a time
    assert not capabilities(DPSGDClassifier()).batched_grid
    assert capabilities(DPFERMIClassifier()).public_group_shares
    # a meta-estimator forwards what its predictions need; it is no method a search could repeat
    for method in ("threshold", "dp-fermi"):
        search = PrivateSearch(METHODS[method](), {"lam": [0.0]})
        assert capabilities(search) == Capabilities(
            predict_needs_sensitive=capabilities(METHODS[method]).predict_needs_sensitive)
    with pytest.raises(ValueError, match="needs a private dpfair estimator"):
        PrivateSearch(PrivateSearch(DPFERMIClassifier(), {"lam": [0.0]}), {"lam": [0.0]}).check_hyperparameters()


def test_an_object_that_declares_nothing_can_do_nothing_special():
    assert capabilities(LogisticRegression()) == Capabilities() == capabilities(LogisticRegression)
    assert not Capabilities().private and Capabilities().units == () and Capabilities().certificate is None
    assert method_name(LogisticRegression()) is None

    class Mine(DPSGDClassifier):  # a user's subclass keeps what it inherits, under no --method name
        pass

    assert capabilities(Mine).certificate == "dpsgd" and method_name(Mine) is None


def test_the_fit_contracts_steps_are_fit_itself():
    """``begin_fit``, the method's steps, ``end_fit`` (or ``unfit``): what ``fit`` runs and a grid runs per model."""
    # groups of about 1,000: at epsilon=1 their released counts (noise std about 100) are not too small to be fair on
    X, y, s = _rows(2000)
    est = DPFERMIClassifier(epochs=1, groups=2, random_state=0)
    Xc, yc, sc = est.begin_fit(X, y, s)
    assert Xc.shape == X.shape and set(yc) == {0, 1} and "privacy_ledger_" in vars(est)
    est.unfit()  # a dry run undone: nothing fitted, nothing transient left
    assert not [k for k in vars(est) if k.endswith("_") or k.startswith("_")]
    data = est.begin_fit(X, y, s)
    est.train_prepared(est.prepare_fit(est.fit_context, *data))
    est.end_fit()
    assert math.isfinite(est.privacy_spent_[0]) and not [k for k in vars(est) if k.startswith("_")]
    assert est.noise_multipliers_ == est.privacy_plan_.calibrate(est.epsilon_target_, est.delta_, est.privacy_unit_,
                                                                 est.accountant)
