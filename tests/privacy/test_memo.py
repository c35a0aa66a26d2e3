"""The one memo of accounting results (dpfair.privacy.memo): its key covers every input, it is bounded, it explains σ."""

import math
from pathlib import Path

import dp_accounting as dpa
import pytest

from dpfair.privacy import (
    Part,
    PrivacyPlan,
    calibration,
    dpsgd_event,
    epsilon_of,
    gaussian_event,
)
from dpfair.privacy.calibration import (
    CALIBRATION_RTOL,
    calibrate_noise,
    calibration_key,
)
from dpfair.privacy.memo import MEMO, AccountingMemo, Computed, MemoKey

EVENT = dpa.SelfComposedDpEvent(gaussian_event(2.0, 0.05), 50)
BASE = {"event": EVENT, "delta": 1e-5, "relation": "record", "accountant": "pld"}


def _epsilon_key(event, delta, relation, accountant):
    from dpfair.privacy.units import relation_of
    return MemoKey("epsilon", repr(event), delta, relation_of(relation).name, accountant)


@pytest.mark.parametrize("change", [
    {"event": dpa.SelfComposedDpEvent(gaussian_event(2.0, 0.05), 51)},
    {"event": dpa.SelfComposedDpEvent(gaussian_event(2.1, 0.05), 50)},
    {"event": dpa.SelfComposedDpEvent(gaussian_event(2.0, 0.06), 50)},
    {"delta": 1e-6},
    {"relation": "sensitive"},
    {"accountant": "rdp"},
])
def test_every_input_of_an_epsilon_is_in_its_key(change):
    changed = {**BASE, **change}
    assert _epsilon_key(**changed) != _epsilon_key(**BASE)
    assert epsilon_of(**changed) != epsilon_of(**BASE)
    assert MEMO.get(_epsilon_key(**changed)).value == epsilon_of(**changed)  # the key epsilon_of files it under


CALIBRATION = {"q": 0.05, "steps": 50, "target": 1.0, "delta": 1e-5, "relation": "record", "accountant": "pld",
               "rtol": CALIBRATION_RTOL, "max_noise": 1e6}


def _calibrate(q, steps, target, delta, relation, accountant, rtol, max_noise):
    description = calibration.dpsgd_description(q, steps)
    key = calibration_key(description, target, delta, relation, accountant, rtol, max_noise)
    try:
        sigma = calibrate_noise(lambda s: dpsgd_event(s, q, steps), target, delta, relation, accountant, rtol,
                                max_noise, description=description)
    except ValueError:  # no σ up to max_noise: an answer too
        sigma = math.nan
    return key, sigma


@pytest.mark.parametrize("change", [{"q": 0.06}, {"steps": 60}, {"target": 2.0}, {"delta": 1e-6},
                                    {"relation": "sensitive"}, {"accountant": "rdp"}, {"rtol": 0.3},
                                    {"max_noise": 0.5}])
def test_every_input_of_a_calibration_is_in_its_key(change):
    key, sigma = _calibrate(**CALIBRATION)
    other_key, other_sigma = _calibrate(**{**CALIBRATION, **change})
    assert other_key != key
    assert other_sigma != sigma  # nan (refused) differs too


def test_a_calibration_is_computed_once_and_explained(monkeypatch):
    plan = PrivacyPlan((Part("counts", share=0.1), Part("steps", count=40, sampling_probability=0.05)))
    sigmas = plan.calibrate(1.0, 1e-5, "sensitive")
    monkeypatch.setattr(calibration, "_search", lambda *a: pytest.fail("a memoised search ran again"))
    assert plan.calibrate(1.0, 1e-5, "sensitive") == sigmas
    keys = plan.calibration_keys(1.0, 1e-5, "sensitive")
    assert [k.target for k in keys] == [pytest.approx(0.1), 1.0]
    for key, name in zip(keys, ("counts", "steps")):
        entry = MEMO.get(key)
        assert entry.value == sigmas[name]
        chosen = dict(entry.trail)[entry.value]  # the search's own evaluation of the σ it returned
        assert (1 - CALIBRATION_RTOL) * key.target <= chosen <= key.target
        text = MEMO.explain(key)
        assert f"sigma={sigmas[name]!r}" in text and f"{chosen!r}  (chosen)" in text
    # the joint σ's ε is that of the whole plan at the calibrated σ, which the memo holds as an ε entry
    assert plan.epsilon(sigmas, 1e-5, "sensitive") <= 1.0
    assert plan.calibration_keys(math.inf, 1e-5, "sensitive") == []


def test_the_memo_is_bounded_least_recently_used_first_out():
    memo = AccountingMemo(maxsize=3)
    keys = [MemoKey("epsilon", f"event {i}", 1e-5, "ADD_OR_REMOVE_ONE", "pld") for i in range(5)]
    for i, key in enumerate(keys[:3]):
        assert memo.lookup(key, lambda i=i: Computed(float(i))) == i
    memo.lookup(keys[0], lambda: pytest.fail("in memory"))  # keys[0] used again: keys[1] is now the oldest
    for i, key in enumerate(keys[3:], 3):
        memo.lookup(key, lambda i=i: Computed(float(i)))
    assert len(memo) == 3 and memo.keys() == [keys[0], keys[3], keys[4]]
    with pytest.raises(KeyError):
        memo.explain(keys[1])
    with pytest.raises(ValueError):
        AccountingMemo(maxsize=0)


def test_keys_refuse_a_kind_they_do_not_describe():
    with pytest.raises(ValueError, match="kind"):
        MemoKey("sigma", "x", 1e-5, "REPLACE_ONE", "pld")
    with pytest.raises(ValueError, match="target"):
        MemoKey("calibration", "x", 1e-5, "REPLACE_ONE", "pld")


def test_accounting_modules_keep_no_other_cache():
    """The memo is the one cache of accounting results (subsampled_rdp's numeric kernel aside, module docstring)."""
    folder = Path(calibration.__file__).parent
    for name in ("accounting.py", "accounting_cache.py", "calibration.py", "plan.py", "memo.py"):
        text = (folder / name).read_text()
        assert "lru_cache" not in text and "functools.cache" not in text, name
