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

Every ε the search evaluates is a function of the public plan alone, so it is kept in the one memo
of accounting results (:mod:`dpfair.privacy.memo`), in memory and on disk: a later process calibrating
the same plan (a repeated ``dpfair train``) reads the same values back, follows the same path and
returns exactly the same σ without composing a PLD. A search given a ``description`` of its plan is a
memo entry itself, kept with the points it evaluated (:meth:`~dpfair.privacy.memo.AccountingMemo.explain`
answers "why this σ").
"""

from __future__ import annotations

import math
from collections.abc import Callable

import dp_accounting as dpa

from dpfair.privacy.accounting import absl_quiet, epsilon_of, make_accountant
from dpfair.privacy.mechanisms import gaussian_event
from dpfair.privacy.memo import MEMO, Computed, MemoKey
from dpfair.privacy.units import relation_of
from dpfair.utils.progress import progress
from dpfair.utils.validation import check_delta, check_epsilon, check_positive

#: the calibrated ε lies in [(1 − CALIBRATION_RTOL)·target, target].
CALIBRATION_RTOL = 0.005

#: A calibration shows its progress (:mod:`dpfair.utils.progress`) once it has run this many seconds.
CALIBRATION_DELAY = 1.0


def calibrate_noise(
    plan: Callable[[float], dpa.DpEvent],
    target_epsilon: float,
    delta: float,
    relation="record",
    accountant: str = "pld",
    rtol: float = CALIBRATION_RTOL,
    max_noise: float = 1e6,
    description: str | None = None,
) -> float:
    """Smallest noise multiplier σ with ε(plan(σ)) ≤ target, to a relative ε tolerance ``rtol``.

    ``description``: the planned events as a function of σ, public and complete (two plans with one
    description must give the same event at every σ); with it the search is an entry of the memo
    (:func:`calibration_key`), computed once per process. A search that runs longer than
    :data:`CALIBRATION_DELAY` seconds shows its progress (or, inside a shown operation such as a verbose
    fit, a note on that bar; :mod:`dpfair.utils.progress`).
    """
    target = check_epsilon(target_epsilon, "epsilon", allow_inf=False, budget=True)
    delta = check_delta(delta)

    def compute() -> Computed:
        with progress(desc="calibrating noise", unit="evaluation", delay=CALIBRATION_DELAY) as bar:
            return _search(plan, target, delta, relation, accountant, rtol, max_noise, bar)

    if description is None:
        return compute().value
    return MEMO.lookup(calibration_key(description, target, delta, relation, accountant, rtol, max_noise), compute)


def calibration_key(description: str, target_epsilon: float, delta: float, relation="record",
                    accountant: str = "pld", rtol: float = CALIBRATION_RTOL, max_noise: float = 1e6) -> MemoKey:
    """The memo key of a calibration (:func:`calibrate_noise` with ``description``): every input of its answer."""
    return MemoKey("calibration", description, delta, relation_of(relation).name, accountant,
                   target=float(target_epsilon), options=(("rtol", float(rtol)), ("max_noise", float(max_noise))))


def _search(plan, target: float, delta: float, relation, accountant: str, rtol: float, max_noise: float,
            bar) -> Computed:
    """The search of :func:`calibrate_noise`: σ and the ``(σ, ε)`` points evaluated; ``bar`` counts them.

    Where RDP supports the plan, a cheap RDP bound on :data:`GUESS_ORDERS` (a handful of orders: still an
    upper bound on ε, a loose one) is solved first, to a coarse tolerance; its σ starts the search on the
    accountant asked for, whose every evaluation decides. Each ε goes through the memo (and the disk).
    """
    evaluated: dict[float, float] = {}  # the search's points, in order (a σ visited again is not re-evaluated)

    def eps(sigma: float) -> float:
        if sigma not in evaluated:
            evaluated[sigma] = epsilon_of(plan(sigma), delta, relation, accountant, persist=True)
            bar.update()
        return evaluated[sigma]

    start = 1.0
    if accountant == "pld" and make_accountant("rdp", relation).supports(plan(1.0)):
        guess = _Solver(lambda sigma: _guess_epsilon(plan(sigma), delta, relation), target, GUESS_RTOL,
                        max_noise, delta)
        try:
            start = guess.solve(1.0)
            slope = guess.slope
        except ValueError:  # a few RDP orders cannot reach a very small ε (≲ 0.01); PLD can
            slope = None
    else:
        slope = None
    sigma = _Solver(eps, target, rtol, max_noise, delta, slope).solve(start)
    return Computed(sigma, trail=tuple(evaluated.items()))


#: Rényi orders of the first, coarse RDP solve of a PLD calibration (any set of orders bounds ε).
GUESS_ORDERS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0, 512.0, 1024.0)

#: Relative tolerance of that coarse solve: it only places the start of the search that decides.
GUESS_RTOL = 0.05


#: The memo's name of the RDP accountant on :data:`GUESS_ORDERS`.
GUESS_ACCOUNTANT = "rdp@" + ",".join(f"{a:g}" for a in GUESS_ORDERS)


def _guess_epsilon(event: dpa.DpEvent, delta: float, relation) -> float:
    """ε of ``event`` on the RDP accountant restricted to :data:`GUESS_ORDERS` (through the memo)."""
    def compute() -> Computed:
        accountant = make_accountant("rdp", relation, orders=GUESS_ORDERS)
        with absl_quiet():
            accountant.compose(event)
            return Computed(float(accountant.get_epsilon(delta)))

    return MEMO.lookup(MemoKey("epsilon", repr(event), delta, relation_of(relation).name, GUESS_ACCOUNTANT), compute)


class _Solver:
    """The smallest σ with ``eps(σ) ≤ target``, to ``eps(σ) ≥ (1 − rtol)·target``: secant steps on log σ against
    log ε (nearly linear there), aimed at the middle of that window (the next step then rarely overshoots).

    Before a bracket exists, a step follows the slope of the last two points (or ``slope``, or −1: ε of a
    Gaussian falls as 1/σ) and moves σ by at most a factor :data:`MAX_FACTOR`; once a σ above and one below
    the target are known, each step is a regula falsi kept a tenth of the bracket from its ends, so the
    bracket shrinks geometrically. Only σ with ``eps(σ) ≤ target`` are returned.
    """

    MAX_FACTOR = 8.0

    #: A bracket narrower than this (relative σ) ends the search at its σ at or below the target: ε then
    #: jumps across the window (a part whose ε turns ∞ below some σ caps the ε reachable).
    BRACKET_RTOL = 1e-9

    def __init__(self, eps, target: float, rtol: float, max_noise: float, delta: float,
                 slope: float | None = None):
        self.eps, self.target, self.rtol, self.max_noise, self.delta = eps, target, rtol, max_noise, delta
        self.slope = slope if slope is not None and slope < 0 else -1.0
        self.aim = math.log((1.0 - rtol / 2.0) * target)

    def solve(self, start: float) -> float:
        lo = hi = None  # the largest σ seen above the target, the smallest at or below it
        points: list[tuple[float, float]] = []
        sigma = start
        for _ in range(100):
            e = self.eps(sigma)
            if e <= self.target:
                hi = sigma if hi is None else min(hi, sigma)
                if e >= (1.0 - self.rtol) * self.target:
                    return sigma
            else:
                lo = sigma if lo is None else max(lo, sigma)
            points.append((math.log(sigma), math.log(max(e, 1e-300)) if math.isfinite(e) else math.inf))
            if lo is not None and hi is not None:
                if hi <= lo * (1.0 + self.BRACKET_RTOL):  # ε jumps past the window here (onto ∞, say)
                    return hi
                sigma = self._inside(lo, hi)
                continue
            if hi is not None and hi < 1e-4:  # a huge ε: (almost) no noise reaches it
                return hi
            sigma = self._step(points)
            if lo is None and sigma >= hi:
                sigma = hi / 2.0
            elif hi is None and sigma <= lo:
                sigma = lo * 2.0
            if sigma > self.max_noise:
                if lo is not None and self.max_noise > lo:
                    sigma = self.max_noise
                else:
                    raise ValueError(
                        f"no noise multiplier up to {self.max_noise:g} reaches epsilon={self.target:g} at "
                        f"delta={self.delta:g}; raise epsilon or delta, or release less (fewer steps, a smaller "
                        "sampling rate)")
        if hi is None:
            raise RuntimeError("noise calibration found no noise multiplier within its budget; please report this")
        return hi

    def _step(self, points) -> float:
        """The next σ from one side of the target: a secant on the last two points, bounded."""
        (a, fa) = points[-1]
        if not math.isfinite(fa):
            return math.exp(a) * self.MAX_FACTOR
        if len(points) >= 2 and math.isfinite(points[-2][1]) and points[-2][0] != a:
            b, fb = points[-2]
            if fb != fa:
                self.slope = min((fa - fb) / (a - b), -0.05)
        move = (self.aim - fa) / self.slope
        move = min(max(move, -math.log(self.MAX_FACTOR)), math.log(self.MAX_FACTOR))
        return math.exp(a + move)

    def _inside(self, lo: float, hi: float) -> float:
        """Regula falsi between ``lo`` (ε above the target) and ``hi`` (at or below it), kept off the ends."""
        a, b = math.log(lo), math.log(hi)
        fa, fb = (math.log(max(self.eps(x), 1e-300)) for x in (lo, hi))  # memoised: no new evaluation
        t = (fa - self.aim) / (fa - fb) if math.isfinite(fa) and fa != fb else 0.5
        return math.exp(a + min(max(t, 0.1), 0.9) * (b - a))


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
    """ε of ``steps`` Poisson-sampled Gaussian releases with the given noise multiplier (0: no noise, ε = ∞)."""
    check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
    _check_rate(sampling_probability)
    check_positive(steps, "steps", integer=True)
    return epsilon_of(dpsgd_event(noise_multiplier, sampling_probability, steps), check_delta(delta),
                      relation, accountant)


def noise_for_epsilon(
    target_epsilon: float,
    delta: float,
    sampling_probability: float,
    steps: int,
    relation="record",
    accountant: str = "pld",
) -> float:
    """Noise multiplier for ``steps`` Poisson-sampled Gaussian releases to spend (ε, δ); ε = ∞ gives 0 (no noise)."""
    _check_rate(sampling_probability)
    check_positive(steps, "steps", integer=True)
    if check_epsilon(target_epsilon, "epsilon", budget=True) == math.inf:
        check_delta(delta)
        return 0.0
    return calibrate_noise(
        lambda sigma: dpsgd_event(sigma, sampling_probability, steps),
        target_epsilon, delta, relation, accountant,
        description=dpsgd_description(sampling_probability, steps),
    )


def dpsgd_description(sampling_probability: float, steps: int) -> str:
    """The memo's description of :func:`dpsgd_event` as a function of σ."""
    return f"dpsgd_event(sigma, sampling_probability={float(sampling_probability)!r}, steps={int(steps)})"


def _check_rate(q) -> float:
    q = check_positive(q, "sampling_probability")
    if q > 1:
        raise ValueError(f"sampling_probability must lie in (0, 1], got {q}; use batch_size / n")
    return q
