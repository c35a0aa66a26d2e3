"""The on-disk cache of calibration's ε evaluations: exactly the uncached σ, public keys only, bad entries ignored."""

import json

import numpy as np
import pytest

from dpfair.algorithms import DPFERMIClassifier
from dpfair.exceptions import LearnedNothingWarning
from dpfair.privacy import accounting, accounting_cache, calibrate_noise, dpsgd_event
from dpfair.privacy.memo import MEMO


def _plan(sigma):
    return dpsgd_event(sigma, 0.02, 300)


def _calibrate():
    return calibrate_noise(_plan, 1.0, 1e-5, "sensitive")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder and an empty in-process memo, so that every ε comes from the disk or the accountant."""
    monkeypatch.setenv(accounting_cache.CACHE_ENV, str(tmp_path))
    MEMO.clear()
    return tmp_path


def _entries(folder):
    return sorted((folder / "accounting").glob("*.json"))


def _no_accountant(monkeypatch):
    """Make any ε computed on an accountant fail: what follows must read every ε from the cache."""
    def refuse(*args):
        raise AssertionError("an ε was composed on the accountant instead of read from the cache")
    monkeypatch.setattr(accounting, "_epsilon_uncached", refuse)


def test_a_warm_cache_gives_exactly_the_uncached_sigma_without_accounting(cache, monkeypatch):
    monkeypatch.setenv(accounting_cache.CACHE_ENV, "")  # off
    uncached = _calibrate()
    assert not (cache / "accounting").exists()

    monkeypatch.setenv(accounting_cache.CACHE_ENV, str(cache))
    MEMO.clear()
    cold = _calibrate()
    assert _entries(cache)
    MEMO.clear()  # a new process, as far as the caches go
    _no_accountant(monkeypatch)
    warm = _calibrate()
    assert uncached == cold == warm


def test_entries_hold_only_the_public_plan(cache):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)) + 123.456  # a value that must not appear anywhere in the cache
    y, s = rng.integers(0, 2, 300), rng.integers(0, 2, 300)
    # half of ε on the group counts (default 5 %): their noise then does not make a 137-person group look
    # possibly under 30 (a SmallGroupWarning); the plan keeps the same releases
    # and random labels on unscaled features: the fit learns nothing, and says so
    with pytest.warns(LearnedNothingWarning, match="learned nothing"):
        est = DPFERMIClassifier(epochs=2, groups=2, proportions_budget=0.5, random_state=0).fit(X, y, s)
    entries = _entries(cache)
    assert entries
    for path in entries:
        text = path.read_text()
        assert "123.4" not in text
        entry = json.loads(text)
        assert set(entry) == {"key", "epsilon"}
        fmt, version, event, delta, relation, kind = entry["key"]
        assert fmt == accounting_cache.FORMAT and version.startswith("dp_accounting ")
        assert relation == "REPLACE_ONE" and kind in ("pld", "rdp")
        assert float.fromhex(delta) == est.delta_
        assert event.split("(", 1)[0] in {"ComposedDpEvent", "SelfComposedDpEvent", "PoissonSampledDpEvent",
                                          "GaussianDpEvent"}


def test_corrupt_or_mismatched_entries_are_ignored_and_rewritten(cache, monkeypatch):
    first = _calibrate()
    entries = _entries(cache)
    entries[0].write_text("{not json")
    entries[1].write_text(json.dumps({"key": ["another"], "epsilon": (0.0).hex()}))  # a hash collision, say
    for path in entries[2:]:
        path.write_text(json.dumps({"key": json.loads(path.read_text())["key"], "epsilon": "nan"}))
    MEMO.clear()
    assert _calibrate() == first
    MEMO.clear()
    _no_accountant(monkeypatch)
    assert _calibrate() == first  # every entry was rewritten whole


def test_an_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(accounting_cache.CACHE_ENV, str(blocker))  # no folder can be made under a file
    MEMO.clear()
    with_cache_off = _calibrate()
    assert accounting_cache.read_epsilon("x", 1e-5, "REPLACE_ONE", "pld") is None
    monkeypatch.setenv(accounting_cache.CACHE_ENV, "")
    MEMO.clear()
    assert _calibrate() == with_cache_off


def test_the_test_suite_never_writes_into_the_home_cache():
    folder = accounting_cache.cache_dir()
    assert folder is not None and not str(folder).startswith(str(accounting_cache.Path.home() / ".cache"))
