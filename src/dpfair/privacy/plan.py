"""Privacy plans: an estimator's releases, named, with their shares of ε, calibrated once.

Before it touches private data, every private estimator states its
:class:`PrivacyPlan`: the :class:`Part` s it will release (a mechanism, how
many times, on which sampling rate) and how ε is split between them. Parts
with a fixed ``share`` are calibrated alone to ``share·ε``; the remaining parts
share one noise multiplier σ, the smallest whose composition *with every
part of the plan* spends at most ε on the accountant that reports
``privacy_spent_`` (see :mod:`dpfair.privacy.calibration`). Each search is an
entry of the accounting memo (:mod:`dpfair.privacy.memo`), keyed by the plan's
``repr`` (parts are immutable and their repr lists every field), so the many
estimators of a sweep pay for it once and :meth:`PrivacyPlan.calibration_keys`
names the entries that explain its σ.

After ``fit``, the estimator's ledger must equal its plan
(:meth:`PrivacyPlan.matches`): same parts, same events, same counts — so the
ε we print is the ε the plan promised, and a test checks it for every method.

Parametrisations (one scalar σ per part, ε decreasing in σ):

- ``"gaussian"`` / ``"laplace"``: the noise multiplier (noise scale / bound); a Laplace part
  with ``pure`` set (``secure_mode``: exact discrete Laplace noise, which ``LaplaceDpEvent``
  does not bound) is recorded as the pure ``pure/σ``-DP mechanism it is, ``pure`` being the
  L1 distance of two neighbours' sums in bounds (2 under replace-one, 1 under add/remove);
- ``"randomized_response"`` (``buckets = k``): σ = 1/ε_local;
- ``"exponential"``: σ = 2/ε₀, i.e. ε₀ of a replace-one Laplace release of
  multiplier σ, so that an exponential mechanism and Laplace releases of the
  same σ cost alike per round (Jagielski et al.'s oracle learner).

σ = 0 is "no noise" (ε = ∞): what every part gets when ε = ∞.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import dp_accounting as dpa

from dpfair.privacy.accounting import PrivacyLedger, epsilon_of
from dpfair.privacy.calibration import calibrate_noise, calibration_key
from dpfair.privacy.mechanisms import (
    gaussian_event,
    laplace_event,
    pure_dp_event,
    randomized_response_event,
)
from dpfair.privacy.memo import MemoKey
from dpfair.privacy.units import relation_of
from dpfair.utils.validation import check_positive

MECHANISMS = ("gaussian", "laplace", "randomized_response", "exponential", "fixed")


@dataclass(frozen=True)
class Part:
    """One kind of release an estimator makes: ``count`` times ``mechanism`` on a Poisson rate.

    ``share``: a fixed share of ε, calibrated alone; ``None``: calibrated jointly
    with the other parts that have none (one σ for all of them). ``"fixed"``
    parts carry an event given whole: one spent elsewhere on the same data (a base
    model's ledger), which the calibration of the others accounts for, or a private
    search's repeated runs (:meth:`~dpfair.privacy.Release.repeat`). ``pure``: a
    Laplace part recorded as pure DP (``secure_mode``; see the module docstring).
    """

    name: str
    mechanism: str = "gaussian"
    count: int = 1
    sampling_probability: float = 1.0
    share: float | None = None
    buckets: int = 2
    fixed: dpa.DpEvent | None = None
    pure: float | None = None

    def __post_init__(self):
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {self.mechanism!r}")
        check_positive(self.count, f"count of {self.name!r}", integer=True)
        if not 0.0 < self.sampling_probability <= 1.0:
            raise ValueError(f"sampling_probability of {self.name!r} must lie in (0, 1], got "
                             f"{self.sampling_probability}")
        if self.share is not None and not 0.0 < self.share < 1.0:
            raise ValueError(f"the share of epsilon of {self.name!r} must lie in (0, 1), got {self.share}")

    def event(self, noise_multiplier: float) -> dpa.DpEvent:
        """The event of ONE release of this part with the given σ."""
        sigma = float(noise_multiplier)
        if self.mechanism == "fixed":
            return self.fixed
        if self.mechanism == "gaussian":
            return gaussian_event(sigma, self.sampling_probability)
        if self.mechanism == "laplace":
            if self.pure is None:
                return laplace_event(sigma, self.sampling_probability)
            pure = pure_dp_event(math.inf if sigma == 0 else self.pure / sigma)
            return pure if self.sampling_probability == 1.0 else dpa.PoissonSampledDpEvent(
                self.sampling_probability, pure)
        epsilon = math.inf if sigma == 0 else (1.0 if self.mechanism == "randomized_response" else 2.0) / sigma
        if self.mechanism == "randomized_response":
            return randomized_response_event(epsilon, self.buckets)
        return pure_dp_event(epsilon)

    def repeated(self, noise_multiplier: float) -> dpa.DpEvent:
        event = self.event(noise_multiplier)
        return event if self.count == 1 else dpa.SelfComposedDpEvent(event, self.count)


@dataclass(frozen=True)
class PrivacyPlan:
    """The releases of one fit, before it runs. Immutable; its ``repr`` describes it whole (the memo's key)."""

    parts: tuple[Part, ...]

    def __post_init__(self):
        names = [p.name for p in self.parts]
        if len(set(names)) != len(names):
            raise ValueError(f"the parts of a plan need distinct names, got {names}")
        shares = sum(p.share or 0.0 for p in self.parts)
        joint = any(p.share is None and p.mechanism != "fixed" for p in self.parts)
        if (joint and shares >= 1.0) or shares > 1.0 + 1e-12:
            raise ValueError(f"the fixed shares of epsilon add up to {shares:g}; they must leave a positive share "
                             "for the other releases")

    def __getitem__(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        raise KeyError(name)

    def event(self, sigmas: dict[str, float]) -> dpa.DpEvent:
        """Everything the fit releases with these noise multipliers, as one composed event."""
        events = [p.repeated(sigmas[p.name]) for p in self.parts]
        return events[0] if len(events) == 1 else dpa.ComposedDpEvent(events)

    def calibrate(self, epsilon: float, delta: float, unit, accountant: str = "pld",
                  noise_multiplier: float | None = None) -> dict[str, float]:
        """σ per part spending at most ``epsilon`` (fixed shares first, then one σ for the rest).

        ``noise_multiplier``: a σ the user fixed for the joint parts (no search);
        ``epsilon = inf``: no noise anywhere.
        """
        return dict(_calibrate(self, float(epsilon), float(delta), relation_of(unit), accountant,
                               None if noise_multiplier is None else float(noise_multiplier)))

    def calibration_keys(self, epsilon: float, delta: float, unit, accountant: str = "pld") -> list[MemoKey]:
        """The memo keys of the searches :meth:`calibrate` runs for this budget (fixed shares first, then the
        joint σ), once it has run: ``MEMO.explain(key)`` says why each σ is what it is."""
        relation, epsilon = relation_of(unit), float(epsilon)
        sigmas = dict(_calibrate(self, epsilon, float(delta), relation, accountant, None))
        if not math.isfinite(epsilon):
            return []  # no search: no noise anywhere
        keys = [calibration_key(_share_description(p), p.share * epsilon, delta, relation, accountant)
                for p in self.parts if p.share is not None and p.mechanism != "fixed"]
        joint = _joint(self)
        if joint:
            fixed = {name: s for name, s in sigmas.items() if name not in {p.name for p in joint}}
            keys.append(calibration_key(_joint_description(self, joint, fixed), epsilon, delta, relation,
                                        accountant))
        return keys

    def epsilon(self, sigmas: dict[str, float], delta: float, unit, accountant: str = "pld") -> float:
        return epsilon_of(self.event(sigmas), delta, unit, accountant)

    def expected_ledger(self, sigmas: dict[str, float]) -> Counter:
        """``{(part name, event): count}``: what the ledger of a fit run on this plan must hold."""
        return Counter({(p.name, p.event(sigmas[p.name])): p.count for p in self.parts})

    def matches(self, ledger: PrivacyLedger, sigmas: dict[str, float]) -> bool:
        """Whether ``ledger`` holds exactly the planned releases (order aside: composition does not depend on it)."""
        return ledger_totals(ledger) == self.expected_ledger(sigmas)


def ledger_totals(ledger: PrivacyLedger) -> Counter:
    """``{(label, event): count}`` of a ledger, summing its run-length entries."""
    out: Counter = Counter()
    for e in ledger.entries:
        out[(e.label, e.event)] += e.count
    return out


def _share_description(part: Part) -> str:
    """The memo's description of a part calibrated alone: its ``count`` releases, as a function of σ."""
    return f"{part!r}.repeated(sigma)"


def _joint(plan: PrivacyPlan) -> list[Part]:
    """The parts that share one σ: neither fixed nor given a share."""
    return [p for p in plan.parts if p.mechanism != "fixed" and p.share is None]


def _joint_description(plan: PrivacyPlan, joint: list[Part], fixed: dict[str, float]) -> str:
    """The memo's description of the joint search: the whole plan, the σ of the others, σ for the joint parts."""
    return f"{plan!r}.event({fixed!r} | {{{', '.join(repr(p.name) for p in joint)}: sigma}})"


def _calibrate(plan: PrivacyPlan, epsilon: float, delta: float, relation, accountant: str,
               noise_multiplier: float | None) -> tuple[tuple[str, float], ...]:
    """``((part name, σ), ...)`` of :meth:`PrivacyPlan.calibrate`; each search is a memo entry."""
    infinite = math.isinf(epsilon)
    sigmas: dict[str, float] = {}
    for p in plan.parts:
        if p.mechanism == "fixed" or (p.share is not None and infinite):
            sigmas[p.name] = 0.0
        elif p.share is not None:
            try:
                sigmas[p.name] = calibrate_noise(p.repeated, p.share * epsilon, delta, relation, accountant,
                                                 description=_share_description(p))
            except ValueError:
                raise ValueError(f"epsilon={epsilon:g} is too small for part {p.name!r}, which gets a share "
                                 f"{p.share:g} of it ({p.share * epsilon:.3g}): no noise multiplier up to 1e6 "
                                 "reaches that; raise epsilon or that part's share") from None
    joint = _joint(plan)
    fixed = dict(sigmas)
    if joint:
        if noise_multiplier is not None:
            sigma = check_positive(noise_multiplier, "noise_multiplier", allow_zero=True)
        elif infinite:
            sigma = 0.0
        else:
            sigma = calibrate_noise(lambda s: plan.event({**fixed, **{p.name: s for p in joint}}), epsilon, delta,
                                    relation, accountant, description=_joint_description(plan, joint, fixed))
        sigmas.update({p.name: sigma for p in joint})
    return tuple((p.name, sigmas[p.name]) for p in plan.parts)
