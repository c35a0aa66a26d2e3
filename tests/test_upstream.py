"""dpfair.utils.upstream: the upstream behaviours dpfair works around, and the private-API boundary.

The first three tests pin dp_accounting behaviours that :mod:`dpfair.privacy.accounting` works
around. Each FAILS when upstream changes the behaviour; its message says which workaround to
remove (or re-check) then. They call dp_accounting directly, never through dpfair.
"""

import ast
import math
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import dp_accounting as dpa
import numpy as np
import pandas as pd
import pytest
from dp_accounting import NeighboringRelation

from dpfair.utils import upstream
from dpfair.utils.upstream import PLDAccountantBase, RdpAccountantBase, UnsupportedUpstreamError
from dpfair.privacy import epsilon_of

REPLACE = NeighboringRelation.REPLACE_ONE
ADD_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE
ROOT = Path(__file__).resolve().parents[1]


def _raw_epsilon(accountant, event, delta):
    accountant.compose(event)
    return accountant.get_epsilon(delta)


# ---- upstream behaviours worked around ------------------------------------------------------
def test_upstream_rdp_still_accounts_an_unsampled_replace_one_gaussian_as_one_bound():
    """Workaround 1 (google/differential-privacy#378, fix proposed in PR #464)."""
    remove = ("dp_accounting's RdpAccountant now accounts an unsampled GaussianDpEvent under REPLACE_ONE "
              "differently (google/differential-privacy#378 / PR #464 landed?): check it is now the 2-bound "
              "value, then drop the Gaussian branch of _unsampled_replace_equivalent for the RDP accountant in "
              "dpfair/privacy/accounting.py and update its docstring")
    for sigma in (1.0, 0.2):
        replace = _raw_epsilon(RdpAccountantBase(neighboring_relation=REPLACE), dpa.GaussianDpEvent(sigma), 1e-6)
        one_bound = _raw_epsilon(RdpAccountantBase(neighboring_relation=ADD_REMOVE), dpa.GaussianDpEvent(sigma), 1e-6)
        assert replace == pytest.approx(one_bound, rel=1e-12), remove
    rdp = _raw_epsilon(RdpAccountantBase(neighboring_relation=REPLACE), dpa.GaussianDpEvent(0.2), 1e-6)
    pld = _raw_epsilon(PLDAccountantBase(REPLACE), dpa.GaussianDpEvent(0.2), 1e-6)
    assert rdp == pytest.approx(37.4, abs=0.05) and pld == pytest.approx(96.7, abs=0.05), remove
    # Ours: shift of ±bound on both accountants, RDP above the tight PLD value.
    assert epsilon_of(dpa.GaussianDpEvent(0.2), 1e-6, "sensitive", "pld") == pytest.approx(pld, rel=1e-6)
    assert epsilon_of(dpa.GaussianDpEvent(0.2), 1e-6, "sensitive", "rdp") >= pld


def test_upstream_pld_still_refuses_laplace_under_replace_one():
    """Workaround 2 (PLDAccountant._maybe_compose, pld/pld_privacy_accountant.py; no upstream issue found)."""
    assert not PLDAccountantBase(REPLACE).supports(dpa.LaplaceDpEvent(1.0)), (
        "dp_accounting's PLDAccountant now accepts a LaplaceDpEvent under REPLACE_ONE: check it accounts a "
        "shift of 2·bound (ε = 2/b for one release; 0.4.x accepted it with ε = 1/b), then drop the Laplace "
        "branch of _unsampled_replace_equivalent for the PLD accountant in dpfair/privacy/accounting.py"
    )
    assert PLDAccountantBase(ADD_REMOVE).supports(dpa.LaplaceDpEvent(1.0))
    assert epsilon_of(dpa.LaplaceDpEvent(2.0), 1e-9, "sensitive") == pytest.approx(1.0, abs=2e-3)


def test_upstream_pld_still_composes_randomized_response_once_whatever_its_count():
    """Workaround 3 (PLDAccountant._maybe_compose, pld/pld_privacy_accountant.py; no upstream issue found)."""
    rr = dpa.RandomizedResponseDpEvent(0.5, 2)
    once = _raw_epsilon(PLDAccountantBase(REPLACE), rr, 1e-6)
    five = _raw_epsilon(PLDAccountantBase(REPLACE), dpa.SelfComposedDpEvent(rr, 5), 1e-6)
    assert five == pytest.approx(once, rel=1e-12), (
        "dp_accounting's PLDAccountant now self-composes a RandomizedResponseDpEvent by its count: drop "
        "PLDAccountant.compose_event's randomized-response branch in dpfair/privacy/accounting.py"
    )
    ours = epsilon_of(dpa.SelfComposedDpEvent(rr, 5), 1e-6, "sensitive")
    exact = _raw_epsilon(PLDAccountantBase(REPLACE), dpa.ComposedDpEvent([rr] * 5), 1e-6)
    # above PLD_SCALE_FROM dpfair discretises at 1e-4·ε: pessimistic, so never below, and within 0.1 %
    assert exact - 1e-9 <= ours <= exact * 1.001
    assert ours > 4 * once


# ---- supported releases ------------------------------------------------------------------------
def _bounds(spec: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    low, high = re.fullmatch(r">=([\d.]+),<=([\d.]+)", spec).groups()
    return tuple(map(int, low.split("."))), tuple(map(int, high.split(".")))


def _release(dist: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", metadata.version(dist))[:3])


def test_pyproject_bounds_are_the_ones_compat_was_checked_against():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"dp-accounting{upstream.SUPPORTED_DP_ACCOUNTING}" in deps
    assert f"fairlearn{upstream.SUPPORTED_FAIRLEARN}" in deps


@pytest.mark.parametrize("dist,spec", [("dp-accounting", upstream.SUPPORTED_DP_ACCOUNTING),
                                       ("fairlearn", upstream.SUPPORTED_FAIRLEARN)])
def test_installed_release_is_supported(dist, spec):
    low, high = _bounds(spec)
    assert low <= _release(dist) <= high, f"{dist} {metadata.version(dist)} is outside {spec}"


# ---- the checks raise a clear error --------------------------------------------------------------
def test_missing_accountant_internals_name_the_supported_range():
    class Renamed(PLDAccountantBase):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._pld_v2 = self.__dict__.pop("_pld")

    with pytest.raises(UnsupportedUpstreamError, match=r"dp-accounting>=0\.5\.0,<=0\.6\.0.*Renamed has no _pld"):
        upstream._check_dp_accounting(pld_cls=Renamed)

    class Bypassed(RdpAccountantBase):
        def compose(self, event, count=1):
            return self

    with pytest.raises(ImportError, match="no longer goes through _maybe_compose"):
        upstream._check_dp_accounting(rdp_cls=Bypassed)


def test_pmf_predict_names_the_supported_range_when_fairlearn_renames_it():
    with pytest.raises(UnsupportedUpstreamError, match=r"fairlearn>=0\.13,<=0\.15\.0.*object has no _pmf_predict"):
        upstream.pmf_predict(object(), np.zeros((1, 1)))


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        upstream.nothing  # noqa: B018


def test_importing_compat_does_not_import_fairlearn():
    code = "import sys, dpfair.utils.upstream; print('fairlearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---- fairlearn internals --------------------------------------------------------------------------
def test_fairlearn_names_are_the_private_ones():
    from fairlearn.reductions import Moment, UtilityParity
    from fairlearn.reductions._moments import moment

    from dpfair.utils.upstream import MOMENT_ALL, MOMENT_EVENT, MOMENT_GROUP_ID, MOMENT_LABEL, MOMENT_SIGN
    assert (MOMENT_ALL, MOMENT_EVENT, MOMENT_GROUP_ID, MOMENT_LABEL, MOMENT_SIGN) == (
        moment._ALL, moment._EVENT, moment._GROUP_ID, moment._LABEL, moment._SIGN)
    assert upstream.Moment is Moment and upstream.UtilityParity is UtilityParity
    for name in ("PredictorAsCallable", "InterpolatedThresholder", "ThresholdOperation"):
        assert isinstance(getattr(upstream, name), type)


def test_set_utility_parity_state_reproduces_fairlearns_own_moment():
    from fairlearn.reductions import DemographicParity, UtilityParity

    rng = np.random.default_rng(0)
    n = 200
    X = pd.DataFrame(rng.normal(size=(n, 2)))
    y = pd.Series(rng.integers(0, 2, n))
    s = pd.Series(rng.integers(0, 3, n))
    reference = DemographicParity(difference_bound=0.05)
    reference.load_data(X, y, sensitive_features=s)

    class Copy(UtilityParity):
        def load_data(self, X, y, *, sensitive_features):
            upstream.Moment.load_data(self, X, y, sensitive_features=sensitive_features)
            upstream.set_utility_parity_state(
                self, utilities=reference.utilities, prob_event=reference.prob_event,
                prob_group_event=reference.prob_group_event, index=reference.index, U=reference.U,
            )

    copy = Copy(difference_bound=0.05)
    copy.load_data(X, y, sensitive_features=s)
    h = lambda X: (X[0] > 0).astype(float)  # noqa: E731
    pd.testing.assert_series_equal(copy.gamma(h), reference.gamma(h))
    pd.testing.assert_series_equal(copy.bound(), reference.bound())
    lam = pd.Series(rng.random(len(reference.index)), index=reference.index)
    pd.testing.assert_series_equal(copy.project_lambda(lam), reference.project_lambda(lam))
    pd.testing.assert_series_equal(copy.signed_weights(lam), reference.signed_weights(lam))


# ---- the boundary --------------------------------------------------------------------------------
#: Upstream private attributes that only dpfair.utils.upstream may touch.
_PRIVATE_ATTRIBUTES = {"_maybe_compose", "_pld", "_rdp", "_orders", "_contains_non_dp_event",
                       "_value_discretization_interval", "_pmf_predict"}
#: Modules still importing upstream private modules directly; each is to switch to dpfair.utils.upstream
#: (the names it needs are exported there) and then leave this set.
_PENDING: set[str] = set()


def _private_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        for m in modules:
            parts = m.split(".")
            if parts[0] in ("fairlearn", "dp_accounting") and any(p.startswith("_") for p in parts[1:]):
                found.append(f"line {node.lineno}: import of {m}")
        if isinstance(node, ast.Attribute) and node.attr in _PRIVATE_ATTRIBUTES:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_only_compat_reaches_upstream_internals():
    src = ROOT / "src" / "dpfair"
    offenders = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel == "utils/upstream.py" or rel in _PENDING:
            continue
        uses = _private_uses(path)
        if uses:
            offenders[rel] = uses
    assert not offenders, f"upstream private API outside dpfair.utils.upstream (add a helper there): {offenders}"


def test_compat_module_documents_every_helper_against_an_upstream_version():
    for name in ("AccountantHook", "pld_discretization", "absorb_pld", "absorb_rdp", "pmf_predict",
                 "set_utility_parity_state", "exponentiated_gradient_hypotheses_are_predictors",
                 "restore_exponentiated_gradient_hypotheses", "_load_fairlearn"):
        doc = getattr(upstream, name).__doc__ or ""
        assert re.search(r"(dp-accounting|fairlearn) \d+\.\d+", doc) or "fairlearn 0.13" in doc, name
    assert math.isfinite(upstream.pld_discretization(PLDAccountantBase()))
