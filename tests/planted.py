"""Planted bugs: each breaks one mechanism of dpfair the way a real bug once did (for tests of the audits only).

An audit (:mod:`dpfair.audit.epsilon`) is shown to have power only if it catches broken code: its lower bound on
ε must rise above the claimed ε when a bug is planted, and stay at or below it on the correct code. Each bug
reproduces one failure that voided a printed guarantee while every formula was right, by patching one named,
documented seam of the production code (``unittest.mock.patch.object``) for the length of a
``with planted_bug(...)`` block; production code has no branch for them:

* ``"halve_noise"``: :meth:`dpfair.privacy.Release.noise_scale` returns half of itself, so every Gaussian and
  Laplace release adds half its planned noise;
* ``"skip_clipping"``: :func:`dpfair.nn.per_sample.clip_coefficients` returns 1 for every example (after checking
  its arguments): no bound on anyone's gradient;
* ``"private_proportions"``: DP-FERMI's release of its group counts (:meth:`~dpfair.privacy.Release.noisy_sum` of
  the part :data:`dpfair.algorithms.dpfermi.COUNTS`) draws and records its noise, then returns the exact counts,
  so the group proportions DP-FERMI uses and publishes are those of the private data;
* ``"reuse_seed"``: :func:`dpfair.privacy.randomness.stream_entropy` seeds every secret stream from 0 and its key
  (the words :func:`~dpfair.privacy.reproducible_noise` uses) instead of fresh OS entropy, so models fitted on
  neighbouring data sets share their noise and their difference reveals the data;
* ``"unreleased_scores"``: :meth:`dpfair.selection.scores.SelectionScore.value` records each exact score it computes and
  :func:`dpfair.selection.scores.best_released` returns the run with the best exact validation score instead of the best
  released (noisy) one (the scores are still released and recorded), so which run wins reveals the validation part;
* ``"unnoised_counts"``: :class:`~dpfair.measurement.frame.PrivateMetricFrame`'s release of its
  tables (:meth:`~dpfair.privacy.Release.noisy_sum` of the :class:`~dpfair.privacy.Release` the measurement modules,
  ``dpfair.fairness.*``, bind: every part its ``privacy_plan_`` lists) draws and records its noise, then returns
  the exact counts, so every figure the frame publishes is the exact figure of the private table (it patches the
  measurement's release wherever it lies, whatever its parts are named; DP-FERMI's counts stay noisy).

The ledger and ``privacy_spent_`` do not change: that is what makes these bugs silent. Entering the block warns
(:class:`~dpfair.exceptions.PrivacyLeakWarning`) that the guarantees printed inside are void. A patch is global
to the process while the block runs (every thread sees it, as every thread of a fit must), so nothing that
needs a guarantee may run beside such a block.

This module is not part of the installed package. The tests import it as ``tests.planted`` (``python -m pytest``
runs from the repository root, which pyproject's ``pythonpath`` also puts on ``sys.path``), and
``benchmarks/privacy_audit.py`` adds the root to ``sys.path``. It is not ``benchmarks/planted.py``: Opacus
installs a top-level ``benchmarks`` package that would shadow the repository's folder.
"""

from __future__ import annotations

import sys
import warnings
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from unittest import mock

import numpy as np
import torch

from dpfair.exceptions import PrivacyLeakWarning

__all__ = ["BUGS", "active", "planted_bug"]

BUGS = ("halve_noise", "skip_clipping", "private_proportions", "reuse_seed", "unreleased_scores", "unnoised_counts")

#: The bugs planted now (a bug planted again inside its own block is not patched twice).
_ACTIVE: list[str] = []


def active() -> frozenset[str]:
    """The bugs planted now."""
    return frozenset(_ACTIVE)


def _everywhere(stack: ExitStack, module, name: str, replacement: Callable) -> None:
    """Patch the function ``module.name`` where it is defined and in every dpfair module that imported it by name
    (``from ... import name`` binds the original object there)."""
    original = getattr(module, name)
    for mod_name, mod in list(sys.modules.items()):
        if (mod_name == "dpfair" or mod_name.startswith("dpfair.")) and vars(mod).get(name) is original:
            stack.enter_context(mock.patch.object(mod, name, replacement))


def _halve_noise(stack: ExitStack) -> None:
    from dpfair.privacy import Release

    noise_scale = Release.noise_scale

    def halved(self, bound=1.0, scale=None):
        scale = noise_scale(self, bound, scale)
        return [0.5 * v for v in scale] if isinstance(scale, (list, tuple)) else 0.5 * scale

    stack.enter_context(mock.patch.object(Release, "noise_scale", halved))


def _skip_clipping(stack: ExitStack) -> None:
    from dpfair.nn import per_sample

    clip_coefficients = per_sample.clip_coefficients

    def unclipped(norms, max_norm):
        return torch.ones_like(clip_coefficients(norms, max_norm))  # the arguments are still checked

    _everywhere(stack, per_sample, "clip_coefficients", unclipped)


def _private_proportions(stack: ExitStack) -> None:
    from dpfair.algorithms.dpfermi.data import COUNTS
    from dpfair.privacy import Release

    noisy_sum = Release.noisy_sum

    def exact_counts(self, total, bound=1.0, *, scale=None):
        released = noisy_sum(self, total, bound, scale=scale)  # drawn and recorded, as the correct code does
        return total if self.part.name == COUNTS else released

    stack.enter_context(mock.patch.object(Release, "noisy_sum", exact_counts))


def _reuse_seed(stack: ExitStack) -> None:
    from dpfair.privacy import noise_is_reproducible, randomness

    stream_entropy = randomness.stream_entropy

    def reused(key):
        if noise_is_reproducible():
            return stream_entropy(key)
        parts = key if isinstance(key, tuple) else (key,)
        return [0, *(zlib.crc32(repr(part).encode()) for part in parts)]  # nothing marks the guarantee void

    _everywhere(stack, randomness, "stream_entropy", reused)


def _unreleased_scores(stack: ExitStack) -> None:
    from dpfair.selection import scores as selection

    value, exact = selection.SelectionScore.value, []

    def recorded(self, y, y_pred, s):
        score = value(self, y, y_pred, s)
        exact.append(score)
        return score

    def best_exact(released):
        # a search scores its runs, releasing each score right after computing it, then chooses: the last
        # len(released) exact scores are those of its runs, in order
        if len(exact) < len(released):
            raise RuntimeError(f"{len(released)} released scores but {len(exact)} exact ones were recorded")
        scores = exact[len(exact) - len(released):]
        exact.clear()
        return int(np.argmax(scores))

    stack.enter_context(mock.patch.object(selection.SelectionScore, "value", recorded))
    _everywhere(stack, selection, "best_released", best_exact)


def _unnoised_counts(stack: ExitStack) -> None:
    import dpfair.measurement.frame  # noqa: F401  (loaded before its binding is patched)
    from dpfair.privacy.mechanisms import Release
    from dpfair.privacy.session import ReleaseSession

    class ExactRelease(Release):
        """A release of the measurement: noise drawn and recorded, as the correct code does, then dropped."""

        def noisy_sum(self, total, bound=1.0, *, scale=None):
            super().noisy_sum(total, bound, scale=scale)
            return total

    class ExactSession(ReleaseSession):
        """The measurement's release session, handing out exact releases."""

        def release(self, name, ledger=None):
            made = super().release(name, ledger)
            made.__class__ = ExactRelease
            return made

    # the seam: `ReleaseSession` as the measurement modules bind it; DP-FERMI's, the searches' and every other
    # layer's sessions keep theirs
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith(MEASUREMENT_MODULES) and vars(mod).get("ReleaseSession") is ReleaseSession:
            stack.enter_context(mock.patch.object(mod, "ReleaseSession", ExactSession))


#: The modules whose release sessions are the measurement's (the seam of ``unnoised_counts``).
MEASUREMENT_MODULES = ("dpfair.measurement",)


_PATCHES = {"halve_noise": _halve_noise, "skip_clipping": _skip_clipping,
            "private_proportions": _private_proportions, "reuse_seed": _reuse_seed,
            "unreleased_scores": _unreleased_scores, "unnoised_counts": _unnoised_counts}


@contextmanager
def planted_bug(*names: str) -> Iterator[None]:
    """Plant the named bugs inside the block (TESTS ONLY: the guarantees printed inside are void)."""
    unknown = [n for n in names if n not in BUGS]
    if unknown or not names:
        raise ValueError(f"planted_bug takes one or more of {', '.join(BUGS)}, got {list(names)}")
    warnings.warn(f"planted bugs {', '.join(names)} are active: privacy guarantees inside this block are void "
                  "(tests of the audits only)", PrivacyLeakWarning, stacklevel=3)
    # every caller of a seam is loaded before it is patched: a module first imported inside the block would keep
    # a function it imports by name patched after the block
    import dpfair.algorithms  # noqa: F401
    import dpfair.selection  # noqa: F401

    new = [n for n in dict.fromkeys(names) if n not in _ACTIVE]
    with ExitStack() as stack:
        for name in new:
            _PATCHES[name](stack)
        _ACTIVE.extend(new)
        try:
            yield
        finally:
            del _ACTIVE[len(_ACTIVE) - len(new):]
