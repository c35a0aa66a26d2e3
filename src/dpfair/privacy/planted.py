"""Planted bugs: test-only switches that each break one mechanism the way real bugs have.

An audit (:mod:`dpfair.audit.epsilon`) is shown to have power only if it
catches broken code: its lower bound on ε must rise above the claimed ε when a
bug is planted, and stay at or below it on the correct code. Each switch
reproduces one failure that voided a printed guarantee while every formula was
right:

* ``"halve_noise"``: every Gaussian / Laplace release adds half its planned noise;
* ``"skip_clipping"``: per-example clipping returns its input (no bound on anyone's gradient);
* ``"private_proportions"``: DP-FERMI publishes the exact group proportions of the
  private data instead of the released noisy ones (the release is still recorded);
* ``"reuse_seed"``: every secret generator starts from the same seed, so models fitted
  on neighbouring data sets share their noise and their difference reveals the data;
* ``"unreleased_scores"``: private selection (:mod:`dpfair.selection`) picks the run with the best
  exact validation score instead of the best released (noisy) one (the scores are still released
  and recorded), so which run wins reveals the validation part.

The ledger and ``privacy_spent_`` do not change: that is what makes these bugs
silent. A switch is active only inside ``with planted_bug(...)``, warns, and is
for tests and audits of the auditor only.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from contextvars import ContextVar

from dpfair.exceptions import PrivacyLeakWarning

__all__ = ["BUGS", "planted", "planted_bug"]

BUGS = ("halve_noise", "skip_clipping", "private_proportions", "reuse_seed", "unreleased_scores")

_ACTIVE: ContextVar[frozenset] = ContextVar("dpfair_planted_bugs", default=frozenset())


@contextmanager
def planted_bug(*names: str):
    """Activate the named bugs inside the block (TESTS ONLY: the guarantees printed inside are void)."""
    unknown = [n for n in names if n not in BUGS]
    if unknown or not names:
        raise ValueError(f"planted_bug takes one or more of {', '.join(BUGS)}, got {list(names)}")
    warnings.warn(f"planted bugs {', '.join(names)} are active: privacy guarantees inside this block are void "
                  "(tests of the audits only)", PrivacyLeakWarning, stacklevel=3)
    token = _ACTIVE.set(_ACTIVE.get() | frozenset(names))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def planted(name: str) -> bool:
    """Whether the bug ``name`` is active (read by the mechanisms it breaks)."""
    return name in _ACTIVE.get()
