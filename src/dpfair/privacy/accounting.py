"""Privacy accounting on dp_accounting: accountants, ε of a ledger, the ledger itself.

Every private method in dpfair records what it releases as dp_accounting
``DpEvent`` objects (Gaussian, Laplace, Poisson-sampled, self-composed,
composed) in a :class:`PrivacyLedger`, and reports the ε of the composed
ledger at its δ. Noise multipliers follow the bound convention of
:mod:`dpfair.privacy.units`.

Two accountants: ``"pld"`` (privacy loss distributions; tight, the default
for reporting) and ``"rdp"`` (Rényi DP; the fallback when a PLD cannot be
built). For an unsampled mechanism the privacy loss depends only on the
distance between the two neighbouring outputs, and under ``REPLACE_ONE`` that
distance is 2·bound (a value +bound replaced by −bound). Both accountants here
convert such events to their ``ADD_OR_REMOVE_ONE`` equivalent with sensitivity
2·bound (multiplier halved), so that they agree (pinned by a test). dp_accounting
has no RDP bound for a Poisson-sampled Gaussian under ``REPLACE_ONE``; the RDP
accountant here takes its Rényi divergences from
:mod:`dpfair.privacy.subsampled_rdp` (those of the pair the PLD accountant uses), so
that the sensitive unit's releases and the RDP-only repeated-run bounds of private
selection (``RepeatAndSelectDpEvent``) compose.

Upstream behaviours worked around (dp-accounting 0.5.0–0.6.0; each is pinned
by a test in ``tests/test_upstream.py`` that fails once upstream changes it, and
says which workaround to remove then). Upstream internals are reached only
through :mod:`dpfair.utils.upstream`.

1. The RDP accountant ignores ``REPLACE_ONE`` for an unsampled
   ``GaussianDpEvent``: it accounts a shift of one bound, i.e. the
   ``ADD_OR_REMOVE_ONE`` value (σ = 0.2, δ = 1e-6: ε 37.4, where its PLD
   accountant gives 96.7). Upstream: ``RdpAccountant._maybe_compose``
   (``python/dp_accounting/dp_accounting/rdp/rdp_privacy_accountant.py``),
   reported as https://github.com/google/differential-privacy/issues/378
   (open), with a proposed fix in
   https://github.com/google/differential-privacy/pull/464 (open, unmerged).
2. The PLD accountant refuses a ``LaplaceDpEvent`` under ``REPLACE_ONE``
   (``PLDAccountant._maybe_compose`` in
   ``python/dp_accounting/dp_accounting/pld/pld_privacy_accountant.py``
   accepts it only under ``ADD_OR_REMOVE_ONE``/``REPLACE_SPECIAL``). No
   upstream issue was found.
3. The PLD accountant composes a ``RandomizedResponseDpEvent`` once whatever
   its count: its branch of ``PLDAccountant._maybe_compose`` (same file)
   composes ``from_randomized_response(...)`` without ``self_compose(count)``,
   unlike every other mechanism there, so ``SelfComposedDpEvent(rr, 5)``
   reports the ε of one release. No upstream issue was found.

Beside these, one extension: upstream accounts ``RandomizedResponseDpEvent``
under ``REPLACE_ONE`` only. dpfair records every pure ε-DP mechanism (the
exponential mechanism, ``secure_mode``'s discrete Laplace releases) as binary
randomized response with ε (:func:`~dpfair.privacy.pure_dp_event`), the
dominating pair of any ε-DP mechanism whatever the neighbouring relation, so
under ``ADD_OR_REMOVE_ONE`` the PLD accountant composes its ``REPLACE_ONE``
privacy loss distribution as is (binary only; k-ary randomized response stays
a replace-one mechanism).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace

import dp_accounting as dpa
from dp_accounting import NeighboringRelation

from dpfair.utils.upstream import (
    AccountantHook,
    PLDAccountantBase,
    RdpAccountantBase,
    absorb_pld,
    absorb_rdp,
    pld_discretization,
)
from dpfair.privacy.memo import MEMO, Computed, MemoKey
from dpfair.privacy.subsampled_rdp import replace_one_sampled_gaussian_rdp
from dpfair.privacy.units import relation_of
from dpfair.utils.progress import progress

ACCOUNTANTS = ("pld", "rdp")

#: An ε curve (:meth:`PrivacyLedger.epsilon_curve`) shows its progress (:mod:`dpfair.utils.progress`) once it
#: has run this many seconds (inside a shown operation, such as a report, a note on that bar).
CURVE_DELAY = 2.0

#: PLD discretisation of the privacy loss; 1e-4 is dp_accounting's default. Above ε = 4 the
#: interval grows with ε (``PLD_DISCRETIZATION · ε``, ε read off a coarse first pass), which keeps
#: the same relative accuracy at a cost that no longer grows with ε (the accuracy and the
#: times: docs/guide/benchmarks.md, "Measurements behind defaults"). A coarser interval is
#: pessimistic, so ε stays an upper bound.
PLD_DISCRETIZATION = 1e-4

#: The interval of that coarse first pass, and the ε above which the interval scales.
PLD_COARSE_DISCRETIZATION = 1e-2
PLD_SCALE_FROM = 4.0

#: Most grid points of one mechanism's discretised privacy loss: the interval of either pass is at
#: least the widest privacy-loss range of one mechanism (:func:`privacy_loss_span`) over this, so that a
#: tiny noise (a huge target ε) cannot make a PLD unboundedly large.
PLD_MAX_POINTS = 2_000_000

#: The Gaussian tail, in standard deviations, that the PLD's privacy loss covers on each side
#: (dp_accounting truncates at a log mass of −50: about 10.1).
_GAUSSIAN_TAIL = 10.5

_REPLACE = NeighboringRelation.REPLACE_ONE
_ADD_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE


def _unsampled_replace_equivalent(event: dpa.DpEvent) -> dpa.DpEvent | None:
    """For an unsampled Gaussian/Laplace under REPLACE_ONE: the ADD/REMOVE event with 2× the bound."""
    if isinstance(event, dpa.GaussianDpEvent):
        return dpa.GaussianDpEvent(event.noise_multiplier / 2.0)
    if isinstance(event, dpa.LaplaceDpEvent):
        return dpa.LaplaceDpEvent(event.noise_multiplier / 2.0)
    return None


class _ReplaceAwareMixin:
    """Routes unsampled mechanisms under REPLACE_ONE through an ADD/REMOVE sub-accountant (workarounds 1, 2).

    Both sub-accountants are of the same kind; ε is taken from the composed
    privacy loss of all events, so the composition stays exact (PLD) or
    additive in Rényi divergence (RDP). Gaussian and Laplace events are
    supported by both upstream accountants under ADD_OR_REMOVE_ONE, so the
    check pass (``do_compose=False``) accepts them.
    """

    def compose_event(self, event, count, do_compose):
        if self.neighboring_relation is _REPLACE:
            equivalent = _unsampled_replace_equivalent(event)
            if equivalent is not None:
                if do_compose:
                    self._compose_equivalent(equivalent, count)
                return None
            if isinstance(event, dpa.SelfComposedDpEvent):
                return self.compose_event(event.event, event.count * count, do_compose)
            if isinstance(event, dpa.ComposedDpEvent):
                for e in event.events:
                    err = self.compose_event(e, count, do_compose)
                    if err is not None:
                        return err
                return None
        return super().compose_event(event, count, do_compose)


class PLDAccountant(_ReplaceAwareMixin, AccountantHook, PLDAccountantBase):
    """dp_accounting's PLD accountant with unsampled REPLACE_ONE mechanisms made consistent."""

    def __init__(self, neighboring_relation=_ADD_REMOVE,
                 value_discretization_interval: float = PLD_DISCRETIZATION):
        super().__init__(neighboring_relation, value_discretization_interval)

    def compose_event(self, event, count, do_compose):
        # Workaround 3: upstream composes a RandomizedResponseDpEvent once whatever its count.
        # Under ADD_OR_REMOVE_ONE upstream has no randomized response at all; binary randomized
        # response with ε is then read as what dpfair uses it for (pure_dp_event): the dominating
        # pair of any pure ε-DP mechanism, which bounds its hockey-stick divergence whatever the
        # neighbouring relation, so its REPLACE_ONE privacy loss distribution applies as is.
        if isinstance(event, dpa.RandomizedResponseDpEvent):
            add_remove = self.neighboring_relation is not _REPLACE
            if add_remove and event.num_buckets != 2:
                return "k-ary randomized response (k > 2) is defined under REPLACE_ONE only"
            if count > 1 or add_remove:
                if do_compose:
                    helper = PLDAccountantBase(_REPLACE, pld_discretization(self))
                    helper.compose(event)
                    absorb_pld(self, helper, count)
                return None
        return super().compose_event(event, count, do_compose)

    def _compose_equivalent(self, event, count):
        helper = PLDAccountantBase(_ADD_REMOVE, pld_discretization(self))
        helper.compose(event, count)
        absorb_pld(self, helper)


class RDPAccountant(_ReplaceAwareMixin, AccountantHook, RdpAccountantBase):
    """dp_accounting's RDP accountant with unsampled REPLACE_ONE mechanisms made consistent, and Poisson-sampled
    Gaussians under REPLACE_ONE accounted (:mod:`dpfair.privacy.subsampled_rdp`)."""

    def __init__(self, neighboring_relation=_ADD_REMOVE, orders=None):
        super().__init__(orders, neighboring_relation)

    def compose_event(self, event, count, do_compose):
        if (self.neighboring_relation is _REPLACE and isinstance(event, dpa.PoissonSampledDpEvent)
                and isinstance(event.event, dpa.GaussianDpEvent)):
            if do_compose:
                rdp = replace_one_sampled_gaussian_rdp(event.event.noise_multiplier, event.sampling_probability,
                                                       self.orders)
                absorb_rdp(self, SimpleNamespace(rdp=count * rdp))
            return None
        return super().compose_event(event, count, do_compose)

    def _compose_equivalent(self, event, count):
        helper = RdpAccountantBase(self.orders, _ADD_REMOVE)
        helper.compose(event, count)
        absorb_rdp(self, helper)


def make_accountant(accountant: str = "pld", relation="record", orders=None):
    """A fresh accountant of kind ``"pld"`` or ``"rdp"`` for a privacy unit or relation (``orders``: the RDP
    accountant's Rényi orders, default dp_accounting's)."""
    rel = relation_of(relation)
    if accountant == "pld":
        return PLDAccountant(rel)
    if accountant == "rdp":
        return RDPAccountant(rel, orders)
    raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")


def epsilon_of(event: dpa.DpEvent, delta: float, relation="record", accountant: str = "pld", *,
               persist: bool = False) -> float:
    """ε at ``delta`` of one (composed) event, on the named accountant.

    With ``accountant="pld"`` a PLD that cannot be built (an unsupported event,
    or a noise so small that its PLD exhausts memory) falls back to RDP when RDP
    supports the event; otherwise the error says what to change. Results are kept
    in :data:`dpfair.privacy.memo.MEMO` (events are immutable), so the many identical
    ledgers of a sweep cost one accounting. ``persist``: also keep the result on disk
    (:mod:`dpfair.privacy.memo`), for events that are a function of a public plan only
    (noise calibration's evaluations), so that later processes reuse it.
    """
    rel = relation_of(relation)
    key = MemoKey("epsilon", repr(event), delta, rel.name, accountant)

    def compute() -> Computed:
        with absl_quiet():
            return Computed(*_epsilon_uncached(event, float(delta), rel, accountant))

    return MEMO.lookup(key, compute, persist=persist)


def replace_one_equivalent(event: dpa.DpEvent) -> dpa.DpEvent | None:
    """An event whose ``REPLACE_ONE`` accounting bounds what a release recorded under ``ADD_OR_REMOVE_ONE``
    reveals about one person's sensitive attribute (their record stays, only ``s`` changes), or ``None``
    where no such event is known here (then use :func:`replace_one_by_group_privacy`).

    Why the same noise covers it. A record-level bound C is the norm of one record's contribution:
    ‖f(S) − f(S∖i)‖ ≤ C for every S holding record i. Changing i's ``s`` leaves every other record, so
    S∖i, as it is: both neighbours' outputs lie within C of the same f(S∖i), which is the replace-one
    convention of :mod:`dpfair.privacy.units` with the same bound (a ball of radius C about the output
    without them; two neighbours differ by at most 2C, the triangle inequality through f(S∖i)). Poisson
    sampling draws records, not attributes, so the person is sampled on both sides or on neither, as the
    replace-one sampled pair assumes. Hence Gaussian, Laplace and Poisson-sampled Gaussian events are
    returned as they are. Binary randomized response is dpfair's record of a pure ε-DP mechanism
    (``pure_dp_event``); a replace-one is a removal then an addition, so it is 2ε-DP and becomes
    binary randomized response with 2ε. Composed, self-composed and repeat-and-select events convert part
    by part (Papernot and Steinke's bound holds under any relation, given the run's Rényi DP under it).
    Other events (Poisson-sampled Laplace, discrete Laplace, k-ary randomized response, ...) give ``None``.
    """
    if isinstance(event, (dpa.NoOpDpEvent, dpa.NonPrivateDpEvent, dpa.GaussianDpEvent, dpa.LaplaceDpEvent)):
        return event
    if isinstance(event, dpa.PoissonSampledDpEvent):
        return event if isinstance(event.event, dpa.GaussianDpEvent) else None
    if isinstance(event, dpa.RandomizedResponseDpEvent):
        if event.num_buckets == 1:
            return event
        if event.num_buckets != 2:
            return None
        if event.noise_parameter == 0:
            return dpa.NonPrivateDpEvent()
        ratio = 2.0 / event.noise_parameter - 1.0  # e^ε of binary randomized response with this noise
        noise = 2.0 / (ratio * ratio + 1.0)  # the same with e^(2ε) (a float overflow gives 0)
        # below the normal floats the noise no longer says which mechanism it is: ε = ∞ bounds it
        return dpa.RandomizedResponseDpEvent(noise, 2) if noise >= sys.float_info.min else dpa.NonPrivateDpEvent()
    if isinstance(event, dpa.SelfComposedDpEvent):
        inner = replace_one_equivalent(event.event)
        return None if inner is None else dpa.SelfComposedDpEvent(inner, event.count)
    if isinstance(event, dpa.ComposedDpEvent):
        parts = [replace_one_equivalent(e) for e in event.events]
        return None if any(p is None for p in parts) else dpa.ComposedDpEvent(parts)
    if isinstance(event, dpa.dp_event.RepeatAndSelectDpEvent):
        inner = replace_one_equivalent(event.event)
        return None if inner is None else dpa.dp_event.RepeatAndSelectDpEvent(inner, event.mean, event.shape)
    return None


def replace_one_by_group_privacy(event: dpa.DpEvent, delta: float, accountant: str = "pld") -> float:
    """ε at ``delta`` under ``REPLACE_ONE`` of a release recorded under ``ADD_OR_REMOVE_ONE``, by group privacy.

    A replace-one is a removal then an addition, so an (ε, δ') add/remove guarantee gives
    (2ε, (1 + e^ε)·δ') for replace-one. δ' is chosen so that (1 + e^ε(δ'))·δ' ≤ ``delta``: the ε returned
    holds at ``delta`` itself. Looser than :func:`replace_one_equivalent`'s exact route; for the events
    that route does not cover. ∞ for a non-private event.
    """
    inner = delta / 2.0
    for _ in range(30):
        eps = epsilon_of(event, inner, "record", accountant)
        if not math.isfinite(eps):
            return math.inf
        if (1.0 + math.exp(eps)) * inner <= delta:
            return 2.0 * eps
        # ε grows as δ' shrinks; a small margin lets the next δ' meet the condition
        inner = delta / (1.0 + math.exp(1.02 * eps + 1e-3))
    return math.inf  # no δ' found (never seen): no guarantee claimed


def compose_releases(events: Iterable[dpa.DpEvent]) -> dpa.DpEvent:
    """The composition of independent releases ``events``, equal events merged into one self-composition.

    Composition does not depend on the order of its parts, and k runs of one event are its k-fold
    self-composition, so the result accounts exactly the same releases (each still counted once per
    occurrence). The PLD accountant then convolves each distinct event with itself by powers (one FFT
    self-convolution) instead of k times in sequence: a store of many release groups with equal plans
    (every seed of a grid at one ε) costs a few compositions, not one per group.
    """
    counts: dict = {}  # by repr: a composed event holds a list, so events are not all hashable
    for event in events:
        first, k = counts.get(repr(event), (event, 0))
        counts[repr(event)] = (first, k + 1)
    return dpa.ComposedDpEvent([e if k == 1 else dpa.SelfComposedDpEvent(e, k) for e, k in counts.values()])


@contextlib.contextmanager
def absl_quiet():
    """dp_accounting's absl warnings off: RDP orders whose series does not converge are dropped (the bound
    stays valid) and each drop is logged (``_compute_log_a_frac failed to converge``), dozens of lines per
    fit. Every accounting in dpfair runs through :func:`epsilon_of`, so this is the one place to silence it."""
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        yield
    finally:
        absl.setLevel(level)


def _epsilon_uncached(event: dpa.DpEvent, delta: float, relation: NeighboringRelation,
                      accountant: str) -> tuple[float, bool]:
    """``(ε, whether it was computed on the accountant asked for)`` (``False``: a PLD fell back to RDP)."""
    acc = make_accountant(accountant, relation)
    if not acc.supports(event) and accountant == "pld" and make_accountant("rdp", relation).supports(event):
        return epsilon_of(event, delta, relation, "rdp"), False  # an RDP-only event (RepeatAndSelectDpEvent)
    if not acc.supports(event):
        raise ValueError(
            f"the {accountant} accountant cannot account {event} under {relation_of(relation).name}; "
            + ("use accountant='pld'" if accountant == "rdp" else "use a Gaussian or Laplace mechanism")
        )
    try:
        if accountant == "pld":
            span = privacy_loss_span(event, relation)
            if not math.isfinite(span):  # a loss beyond the float range: no PLD holds it; ∞ bounds it
                return math.inf, True
            acc = _pld_at_scale(event, delta, relation, span)
        else:
            acc.compose(event)
        eps = acc.get_epsilon(delta)
    except OverflowError:  # dp_accounting takes e^loss of a loss past ~709 nats (a tiny noise): ∞ bounds ε
        return math.inf, True
    except (MemoryError, ValueError):
        # the PLD cannot hold the event: a grid too large, or dp_accounting's discretisation failing numerically at
        # a tiny noise (its Laplace PLD at a parameter near 1e-3 reports "deltas are not in non-increasing
        # order"). RDP bounds the same ε (a looser upper bound); where it cannot account the event, ∞ does.
        if accountant != "pld":
            raise
        if not make_accountant("rdp", relation).supports(event):
            return math.inf, False
        return epsilon_of(event, delta, relation, "rdp"), False
    return float(eps), True


def _pld_at_scale(event: dpa.DpEvent, delta: float, relation: NeighboringRelation,
                  span: float | None = None) -> PLDAccountant:
    """A PLD accountant holding ``event``, discretised at ``PLD_DISCRETIZATION``, or ``PLD_DISCRETIZATION · ε`` above
    ``PLD_SCALE_FROM``.

    ε comes from a first pass at ``PLD_COARSE_DISCRETIZATION``. Every interval gives a
    pessimistic PLD (dp_accounting's default), so each pass upper-bounds the true ε; the
    interval only trades tightness for time (a fraction of a per cent of ε), and ε stays
    non-decreasing as the noise shrinks across the switch (a coarser pessimistic PLD is never tighter).
    Neither pass's interval is below ``span / PLD_MAX_POINTS`` (``span``: :func:`privacy_loss_span`):
    each mechanism's discretised loss has at most about ``PLD_MAX_POINTS`` points whatever its noise,
    so the cost of an accounting is bounded by its releases, not by ε (a huge ε: an interval that
    grows with it).
    """
    if span is None:
        span = privacy_loss_span(event, relation)
    floor = span / PLD_MAX_POINTS
    coarse = PLDAccountant(relation, max(PLD_COARSE_DISCRETIZATION, floor))
    coarse.compose(event)
    rough = coarse.get_epsilon(delta)
    scale = rough if rough > PLD_SCALE_FROM else 1.0
    if not math.isfinite(scale):  # a noiseless release: ε = ∞ at any interval
        return coarse
    fine = PLDAccountant(relation, max(PLD_DISCRETIZATION * scale, floor))
    fine.compose(event)
    return fine


def privacy_loss_span(event: dpa.DpEvent, relation="record") -> float:
    """The widest range (in nats) of one mechanism's privacy loss in ``event``, as the PLD accountant
    discretises it (0 where no mechanism has a finite, non-trivial one).

    Gaussian with multiplier σ (sensitivity 1; under ``REPLACE_ONE`` unsampled, σ/2 as this module
    converts it): the loss of an output x is (1/2 − x)/σ², linear, and over the outputs within
    ``_GAUSSIAN_TAIL``·σ of either mean (what the PLD keeps) it spans 1/σ² + 2·tail/σ; Poisson sampling
    only narrows it (a ratio of two mixtures lies between its components' ratios). Laplace with parameter b: ±1/b
    (b/2 under replace-one). Randomized response with noise p over k buckets: its two extreme losses
    ±log(1 + k·(1 − p)/p). A composition: its widest part. ∞ where a loss exceeds the float range.
    """
    def span(e, halve: bool) -> float:  # float arithmetic: an overflow gives inf, never an exception
        if isinstance(e, dpa.GaussianDpEvent):
            s = e.noise_multiplier / (2.0 if halve else 1.0)
            t = 1.0 / s if s > 0 else 0.0
            return t * t + 2.0 * _GAUSSIAN_TAIL * t
        if isinstance(e, dpa.LaplaceDpEvent):
            b = e.noise_multiplier / (2.0 if halve else 1.0)
            return 2.0 / b if b > 0 else 0.0
        if isinstance(e, dpa.RandomizedResponseDpEvent):
            p = e.noise_parameter
            return 2.0 * math.log1p(e.num_buckets * (1.0 - p) / p) if 0.0 < p < 1.0 else 0.0
        if isinstance(e, (dpa.PoissonSampledDpEvent, dpa.SelfComposedDpEvent, dpa.dp_event.RepeatAndSelectDpEvent)):
            return span(e.event, halve)
        if isinstance(e, dpa.ComposedDpEvent):
            return max((span(x, halve) for x in e.events), default=0.0)
        return 0.0

    return span(event, relation_of(relation) is _REPLACE)


@dataclass
class LedgerEntry:
    """One line of a ledger: ``count`` consecutive releases of the same mechanism."""

    label: str
    event: dpa.DpEvent
    count: int = 1

    def as_dict(self) -> dict:
        inner = self.event
        q = 1.0
        if isinstance(inner, dpa.PoissonSampledDpEvent):
            q, inner = inner.sampling_probability, inner.event
        return {
            "label": self.label,
            "mechanism": type(inner).__name__.replace("DpEvent", "").lower(),
            "noise_multiplier": float(getattr(inner, "noise_multiplier", float("nan"))),
            "sampling_probability": float(q),
            "count": int(self.count),
        }


@dataclass
class PrivacyLedger:
    """The events an estimator spent, under one neighbouring relation.

    Consecutive identical releases are run-length encoded, so T steps of
    DP-SGD compose as one ``SelfComposedDpEvent`` (PLD self-composition by FFT,
    not T convolutions).
    """

    relation: NeighboringRelation
    entries: list[LedgerEntry] = field(default_factory=list)

    def __post_init__(self):
        self.relation = relation_of(self.relation)

    def record(self, event: dpa.DpEvent, label: str = "", count: int = 1) -> None:
        if count <= 0:
            return
        last = self.entries[-1] if self.entries else None
        if last is not None and last.label == label and last.event == event:
            last.count += count
        else:
            self.entries.append(LedgerEntry(label, event, count))

    def extend(self, entries: Iterable[LedgerEntry]) -> None:
        for e in entries:
            self.record(e.event, e.label, e.count)

    @property
    def dp_event(self) -> dpa.DpEvent:
        """The whole ledger as one composed dp_accounting event."""
        events = [e.event if e.count == 1 else dpa.SelfComposedDpEvent(e.event, e.count) for e in self.entries]
        if not events:
            return dpa.NoOpDpEvent()
        return events[0] if len(events) == 1 else dpa.ComposedDpEvent(events)

    def epsilon(self, delta: float, accountant: str = "pld") -> float:
        """ε spent at ``delta``: 0 for an empty ledger, ``inf`` if anything was released without noise."""
        if not self.entries:
            return 0.0
        return epsilon_of(self.dp_event, delta, self.relation, accountant)

    def epsilon_curve(self, delta: float, points: int = 20, accountant: str = "pld") -> tuple[list[int], list[float]]:
        """ε spent after the first r releases, for ``points`` values of r evenly spread up to all of them.

        Returns ``(releases, epsilons)`` starting at ``(0, 0.0)``. The prefix of r releases is the
        ledger cut after its r-th release (an entry of ``count`` releases is cut inside), composed on
        ``accountant`` like :meth:`epsilon`: at most ``points`` accountings, and the last point is
        ``self.epsilon(delta, accountant)`` exactly. A prefix of a composition leaks no more than
        the whole, so the true curve is non-decreasing. A curve that runs longer than
        :data:`CURVE_DELAY` seconds shows its progress (one step per accounting: public counts).
        """
        if isinstance(points, bool) or not isinstance(points, int) or points < 1:
            raise ValueError(f"points must be a positive integer, got {points!r}")
        total = sum(e.count for e in self.entries)
        releases = sorted({round(total * i / points) for i in range(points + 1)})
        epsilons = []
        with progress(len(releases), "ε curve", "accounting", delay=CURVE_DELAY) as bar:
            for r in releases[:-1]:
                prefix, left = PrivacyLedger(self.relation), r
                for e in self.entries:
                    prefix.record(e.event, e.label, min(e.count, left))
                    left -= min(e.count, left)
                epsilons.append(prefix.epsilon(delta, accountant))
                bar.update()
            epsilons.append(self.epsilon(delta, accountant))
            bar.update()
        return releases, epsilons

    @classmethod
    def combined(cls, ledgers: Iterable[PrivacyLedger]) -> PrivacyLedger:
        """One ledger holding the releases of several fits on the same data (CV folds, retries, a search).

        Their ε composes because each fit draws from its own secret generator. Not for
        the models of one batched grid, which share their Poisson batches: use
        :attr:`~dpfair.algorithms.GridFit.privacy_spent` for those.
        """
        ledgers = list(ledgers)
        if not ledgers:
            raise ValueError("combined() needs at least one ledger")
        relations = {ledger.relation for ledger in ledgers}
        if len(relations) > 1:
            raise ValueError(f"the ledgers protect different neighbouring relations "
                             f"({', '.join(sorted(r.name for r in relations))}); an ε of both does not exist")
        out = cls(ledgers[0].relation)
        for ledger in ledgers:
            out.extend(ledger.entries)
        return out

    def to_records(self) -> list[dict]:
        return [e.as_dict() for e in self.entries]

    def to_json(self) -> dict:
        """The ledger as JSON-safe data, every event whole (:meth:`from_json` rebuilds it exactly)."""
        return {"relation": self.relation.name,
                "entries": [{"label": e.label, "event": event_to_json(e.event), "count": e.count}
                            for e in self.entries]}

    @classmethod
    def from_json(cls, data: dict) -> PrivacyLedger:
        """The ledger :meth:`to_json` wrote (a results store's, a sweep worker's)."""
        ledger = cls(NeighboringRelation[data["relation"]])
        for entry in data["entries"]:
            ledger.record(event_from_json(entry["event"]), entry["label"], int(entry["count"]))
        return ledger

    def __len__(self) -> int:
        return len(self.entries)


def event_to_json(event: dpa.DpEvent) -> dict:
    """A dp_accounting event as JSON-safe nested dicts: ``{"dp_event": class name, field: value, ...}``."""
    out = {"dp_event": type(event).__name__}
    for name, value in event.to_named_tuple()._asdict().items():
        if name in ("module_name", "class_name"):
            continue
        value = getattr(event, name)
        if isinstance(value, dpa.DpEvent):
            value = event_to_json(value)
        elif isinstance(value, (list, tuple)):
            value = [event_to_json(v) if isinstance(v, dpa.DpEvent) else v for v in value]
        out[name] = value
    return out


def event_from_json(data: dict) -> dpa.DpEvent:
    """The event :func:`event_to_json` wrote; only dp_accounting's own event classes are built."""
    cls = getattr(dpa.dp_event, str(data.get("dp_event")), None)
    if not (isinstance(cls, type) and issubclass(cls, dpa.DpEvent)):
        raise ValueError(f"{data.get('dp_event')!r} is not a dp_accounting event")

    def value(v):
        if isinstance(v, dict) and "dp_event" in v:
            return event_from_json(v)
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return cls(**{k: value(v) for k, v in data.items() if k != "dp_event"})
