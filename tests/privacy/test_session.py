"""The one release door (issue 43): :class:`dpfair.privacy.session.ReleaseSession`.

Every private consumer (a fit, the measurement frame, the audit game, a private search, DP-FERMI's grid) draws
through a session, and ``Release(`` is constructed nowhere else in the package than ``dpfair.privacy``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from dpfair.privacy import Part, PrivacyLedger, PrivacyPlan, ledger_totals
from dpfair.privacy.session import ReleaseSession

SRC = Path(__file__).resolve().parents[2] / "src" / "dpfair"
PLAN = PrivacyPlan((Part("counts"), Part("scores")))


def _session(**kwargs) -> ReleaseSession:
    return ReleaseSession(PrivacyLedger("record"), plan=PLAN, sigmas={"counts": 2.0, "scores": 4.0}, **kwargs)


def test_a_release_draws_at_its_parts_sigma_and_records_on_the_session_ledger():
    session = _session()
    out = session.release("counts").noisy_sum(np.zeros(3))
    assert out.shape == (3,) and np.all(out != 0.0)
    assert [(e.label, e.count) for e in session.ledger.entries] == [("counts", 1)]
    assert session.release("scores").noise_multiplier == 4.0
    with pytest.raises(KeyError):
        session.release("not planned")


def test_the_budget_is_claimed_at_adoption_and_before_every_release():
    claims = []
    session = ReleaseSession(PrivacyLedger("record"), claim=lambda: claims.append(1))
    with pytest.raises(RuntimeError, match="before a plan is adopted"):
        session.release("counts")
    assert claims == []  # refused before anything: no claim either
    session.adopt(PLAN, {"counts": 2.0, "scores": 4.0})
    session.release("counts")
    session.set_sigmas({"scores": 3.0})
    assert len(claims) == 3 and session.sigmas == {"counts": 2.0, "scores": 3.0}


def test_side_ledgers_join_the_session_ledger_and_count_so_far():
    session = _session()
    side = session.side_ledger()
    session.release("counts", ledger=side).noisy_sum(np.zeros(1))
    assert session.ledger.entries == [] and session.spent_so_far(1e-5)[0] > 0
    session.close_side_ledgers()
    assert [e.label for e in session.ledger.entries] == ["counts"] and session.side_ledgers == []


def test_only_a_fixed_part_covers_other_releases():
    event = ledger_totals  # any hashable stands for the fixed part's event here
    session = ReleaseSession.of_parts(PrivacyLedger("record"), {Part("runs", mechanism="fixed", fixed=event): 0.0,
                                                                  Part("score"): 1.0})
    scratch = session.covered("runs")
    session.release("score", ledger=scratch).noisy_sum(np.zeros(1))
    assert session.ledger.entries == [] and len(scratch.entries) == 1
    with pytest.raises(ValueError, match="fixed part"):
        session.covered("score")


def test_a_closed_session_releases_nothing_and_holds_no_secret():
    with _session() as session:
        session.release("counts")
    assert session.secret is None and session.closed
    with pytest.raises(RuntimeError, match="closed"):
        session.release("counts")


def test_release_objects_are_made_only_inside_the_privacy_package():
    made = {str(p.relative_to(SRC)) for p in SRC.rglob("*.py")
            if p.relative_to(SRC).parts[0] != "privacy" and re.search(r"\bRelease\(", p.read_text())}
    assert made == set(), f"build releases through a ReleaseSession, not Release( directly: {sorted(made)}"


def test_the_measurement_frame_and_the_audit_game_release_through_sessions(release_spy):
    from dpfair.audit import audit_release
    from dpfair.measurement import PrivateMetricFrame

    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 400), rng.integers(0, 2, 400)
    PrivateMetricFrame(["selection_rate"], y, y, s, groups=[0, 1], classes=[0, 1], epsilon=1.0)
    audit_release("gaussian", epsilon=1.0, runs=400)
    assert release_spy.outside_draws == 0 and release_spy.calls
    assert set(release_spy.calls) <= set(release_spy.sessions)
