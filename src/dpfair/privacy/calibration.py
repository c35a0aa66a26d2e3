"""Noise calibration: the noise multiplier that spends a target (ε, δ) on the accountant that reports it.

The search is over the estimator's *whole planned ledger*: a function
``plan(noise_multiplier) -> DpEvent`` builds every release the estimator will
make (all steps, all auxiliary releases) with that multiplier, and the
accountant that will report ``privacy_spent_`` computes its ε. ε decreases
monotonically in the noise multiplier, so a safeguarded bisection in log σ finds
the smallest σ whose ε is at most the target; it stops once ε lies in
``[(1 − rtol)·target, target]``, so the budget is spent, not wasted. RDP
upper-bounds the PLD ε, so where RDP supports the plan its (cheap) calibration
brackets the PLD search from above.

Every ε the search evaluates is a function of the public plan alone, so it is kept in the on-disk
cache of :mod:`dpfair.privacy.accounting_cache` as well as in memory: a later process calibrating
the same plan (a repeated ``dpfair train``) reads the same values back, follows the same path and
returns exactly the same σ without composing a PLD.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import dp_accounting as dpa

from dpfair.privacy.accounting import epsilon_of, make_accountant
from dpfair.privacy.mechanisms import gaussian_event
from dpfair.progress import progress
from dpfair.validation import check_delta, check_epsilon, check_positive

#: the calibrated ε lies in [(1 − CALIBRATION_RTOL)·target, target].
CALIBRATION_RTOL = 0.005

#: A calibration shows its progress (:mod:`dpfair.progress`) once it has run this many seconds.
CALIBRATION_DELAY = 1.0


def calibrate_noise(
    plan: Callable[[float], dpa.DpEvent],
    target_epsilon: float,
    delta: float,
    relation="record",
    accountant: str = "pld",
    rtol: float = CALIBRATION_RTOL,
    max_noise: float = 1e6,
) -> float:
    """Smallest noise multiplier σ with ε(plan(σ)) ≤ target, to a relative ε tolerance ``rtol``.

    A search that runs longer than :data:`CALIBRATION_DELAY` seconds shows its progress (or, inside a
    shown operation such as a verbose fit, a note on that bar; :mod:`dpfair.progress`).
    """
    target = check_epsilon(target_epsilon, "epsilon", allow_inf=False)
    delta = check_delta(delta)

    with progress(desc="calibrating noise", unit="evaluation", delay=CALIBRATION_DELAY) as bar:
        return _search(plan, target, delta, relation, accountant, rtol, max_noise, bar)


def _search(plan, target: float, delta: float, relation, accountant: str, rtol: float, max_noise: float,
            bar) -> float:
    """The search of :func:`calibrate_noise`; ``bar`` counts the ε evaluations."""
    cache: dict[tuple[float, str], float] = {}

    def eps(sigma: float, kind: str = accountant) -> float:
        if (sigma, kind) not in cache:
            cache[sigma, kind] = epsilon_of(plan(sigma), delta, relation, kind, persist=True)
            bar.update()
        return cache[sigma, kind]

    hi = 1.0
    if accountant == "pld" and make_accountant("rdp", relation).supports(plan(1.0)):
        try:  # RDP is cheaper and never below PLD's ε: its bracket is one for PLD too
            hi = _bracket_above(lambda sigma: eps(sigma, "rdp"), target, max_noise, delta)
        except ValueError:  # RDP's finite orders cannot reach a very small ε (≲ 0.01); PLD can
            hi = 1.0
    hi = _bracket_above(eps, target, max_noise, delta, start=hi)
    lo = hi / 2.0
    while eps(lo) <= target:
        hi, lo = lo, lo / 2.0
        if lo < 1e-4:
            return hi
    # Invariant: eps(lo) > target >= eps(hi). Safeguarded regula falsi on log σ against
    # log ε (nearly linear there), kept at least a tenth of the bracket away from its ends.
    for _ in range(60):
        if eps(hi) >= (1.0 - rtol) * target:
            break
        a, b = math.log(lo), math.log(hi)
        fa, fb = (math.log(max(eps(x), 1e-300)) for x in (lo, hi))  # a large δ can make ε exactly 0
        t = (fa - math.log(target)) / (fa - fb) if math.isfinite(fa) else 0.5
        mid = math.exp(a + min(max(t, 0.1), 0.9) * (b - a))
        if eps(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _bracket_above(eps, target: float, max_noise: float, delta: float, start: float = 1.0) -> float:
    """A noise multiplier whose ε is at most the target, by doubling from ``start``."""
    hi = start
    while eps(hi) > target:
        hi *= 2.0
        if hi > max_noise:
            raise ValueError(
                f"no noise multiplier up to {max_noise:g} reaches epsilon={target:g} at delta={delta:g}; "
                "raise epsilon or delta, or release less (fewer steps, a smaller sampling rate)"
            )
    return hi


def dpsgd_event(noise_multiplier: float, sampling_probability: float, steps: int) -> dpa.DpEvent:
    """``steps`` releases of a Poisson-sampled Gaussian sum (DP-SGD, Abadi et al. 2016, Alg. 1)."""
    return dpa.SelfComposedDpEvent(gaussian_event(noise_multiplier, sampling_probability), steps)


def epsilon_for_noise(
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    delta: float,
    relation="record",
    accountant: str = "pld",
) -> float:
    """ε of ``steps`` Poisson-sampled Gaussian releases with the given noise multiplier."""
    check_positive(noise_multiplier, "noise_multiplier")
    _check_rate(sampling_probability)
    check_positive(steps, "steps", integer=True)
    return epsilon_of(dpsgd_event(noise_multiplier, sampling_probability, steps), check_delta(delta),
                      relation, accountant)


@lru_cache(maxsize=256)
def noise_for_epsilon(
    target_epsilon: float,
    delta: float,
    sampling_probability: float,
    steps: int,
    relation="record",
    accountant: str = "pld",
) -> float:
    """Noise multiplier for ``steps`` Poisson-sampled Gaussian releases to spend (ε, δ)."""
    _check_rate(sampling_probability)
    check_positive(steps, "steps", integer=True)
    return calibrate_noise(
        lambda sigma: dpsgd_event(sigma, sampling_probability, steps),
        target_epsilon, delta, relation, accountant,
    )


def _check_rate(q) -> float:
    q = check_positive(q, "sampling_probability")
    if q > 1:
        raise ValueError(f"sampling_probability must lie in (0, 1], got {q}; use batch_size / n")
    return q
