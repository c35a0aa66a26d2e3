"""The one door through which a private computation releases anything: :class:`ReleaseSession`.

Every consumer of private data in dpfair (an estimator's fit, the private search, the measurement frame, the audit
game, DP-FERMI's batched grid) opens one session and draws each noisy quantity through :meth:`ReleaseSession.release`.
A session holds, for the time the computation runs:

* the **plan** (a :class:`~dpfair.privacy.plan.PrivacyPlan`: the named parts) and every part's noise multiplier σ,
  both public functions of hyper-parameters and public sizes; a fit adopts them at its calibration
  (:meth:`ReleaseSession.adopt`), the other consumers open the session with them;
* the **secret generator** (:class:`~dpfair.privacy.randomness.SecretRandom`: 128 bits of OS entropy, never stored,
  never printed), made by the session unless a caller hands it one, and dropped at :meth:`ReleaseSession.close`;
* the **ledger** (or, for a batched grid, one ledger per model) that every release records on, and the side ledgers
  of recurring releases (:meth:`ReleaseSession.side_ledger`);
* the **budget charge**: the :class:`~dpfair.privacy.budget.Charge` (or any callable) that is handed a claim at
  adoption and before every release, so a budget refuses a release before it happens.

Privacy argument, in one line: a :class:`~dpfair.privacy.mechanisms.Release` is constructed only here (and in the
mechanisms module that defines it), so every draw of secret noise is a part of a plan, at that part's σ, recorded on
the ledger the consumer publishes; the ε printed is the composition of that ledger.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from dpfair.privacy.accounting import PrivacyLedger
from dpfair.privacy.mechanisms import Release
from dpfair.privacy.plan import Part, PrivacyPlan
from dpfair.privacy.randomness import SecretRandom


class ReleaseSession:
    """One private computation's releases: plan and σ, secret generator, ledger(s), budget charge.

    ``ledger``: the :class:`~dpfair.privacy.PrivacyLedger` every release records on, or a sequence of ledgers (a
    batched release: one model per ledger, σ given per model). ``plan`` and ``sigmas``: the parts and their σ
    (``None``: adopted later, :meth:`adopt`). ``secret``: the secret generator (``None``: a fresh one keyed
    ``key``, secure under ``secure``; the key matters only under :func:`~dpfair.privacy.reproducible_noise`).
    ``claim``: called with no argument at :meth:`adopt`, :meth:`set_sigmas` and before every release (a fit's
    budget claim; ``None``: no budget). ``charge``: the running budget claim (a :class:`~dpfair.privacy.budget.Charge`)
    this computation's releases belong to, which it passes down to the fits it runs (``fit_many(budget=charge)``,
    ``fit_within(charge, ...)``) so that they are part of it; ``None``: no budget.
    """

    def __init__(self, ledger: PrivacyLedger | Sequence[PrivacyLedger], *, plan: PrivacyPlan | None = None,
                 sigmas: Mapping[str, object] | None = None, secret: SecretRandom | None = None, key=(),
                 secure: bool = False, claim: Callable[[], None] | None = None, charge=None):
        self.ledger = ledger
        self.plan = plan
        self.sigmas: dict = dict(sigmas or {})
        self.secret = secret if secret is not None else SecretRandom(key, secure=secure)
        self.claim = claim
        self.charge = charge
        self.side_ledgers: list[PrivacyLedger] = []
        self.closed = False

    @classmethod
    def of_parts(cls, ledger, parts: Mapping[Part, object], **kwargs) -> ReleaseSession:
        """A session over the plan of ``parts`` (``{part: σ}``), for a consumer whose parts are not an estimator's
        plan (a search's counts and scores, an audited release)."""
        return cls(ledger, plan=PrivacyPlan(tuple(parts)), sigmas={p.name: s for p, s in parts.items()}, **kwargs)

    # ---- the plan --------------------------------------------------------------------------------------
    def adopt(self, plan: PrivacyPlan, sigmas: Mapping[str, object]) -> None:
        """Adopt a calibrated plan and its σ before the first release (a fit's calibration); claimed at once."""
        self._check_open()
        self.plan, self.sigmas = plan, dict(sigmas)
        self._claim()

    def set_sigmas(self, sigmas: Mapping[str, object]) -> None:
        """Set some parts' σ after adoption (a method's own rule, e.g. a paper's closed form); claimed again."""
        self._check_open()
        self.sigmas = {**self.sigmas, **sigmas}
        self._claim()

    # ---- releases --------------------------------------------------------------------------------------
    def release(self, name: str, ledger: PrivacyLedger | Sequence[PrivacyLedger] | None = None) -> Release:
        """The release of the plan's part ``name`` at its σ, drawing from this session's secret generator and
        recording on the session's ledger (or on ``ledger``: one of :meth:`side_ledger`'s or :meth:`covered`'s).
        The budget is claimed first."""
        self._check_open()
        if self.plan is None:
            raise RuntimeError("nothing may be released before a plan is adopted (calibrate first)")
        self._claim()
        return Release(self.plan[name], self.sigmas[name], self.secret, self.ledger if ledger is None else ledger)

    def side_ledger(self) -> PrivacyLedger:
        """A ledger for one recurring release, appended to the session's at :meth:`close_side_ledgers`
        (composition does not depend on the order, and a ledger grouped by kind is fast to account)."""
        ledger = PrivacyLedger(self._relation())
        self.side_ledgers.append(ledger)
        return ledger

    def close_side_ledgers(self) -> None:
        """Append every side ledger's entries to the session's ledger, in the order they were opened."""
        for ledger in self.side_ledgers:
            self.ledger.extend(ledger.entries)
        self.side_ledgers = []

    def covered(self, by: str) -> PrivacyLedger:
        """A scratch ledger for releases whose cost is already inside the part ``by`` of the plan (a ``"fixed"``
        part: e.g. each run's released score, inside the event of the repeated runs); refused for any other part,
        so a release cannot drop out of the ledger by accident."""
        part = self.plan[by] if self.plan is not None else None
        if part is None or part.mechanism != "fixed":
            raise ValueError(f"only a fixed part of the plan covers other releases; {by!r} is not one")
        return PrivacyLedger(self._relation())

    # ---- what it spent ---------------------------------------------------------------------------------
    def spent_so_far(self, delta: float, accountant: str = "pld") -> tuple[float, float]:
        """``(ε, δ)`` of the releases made so far, side ledgers included: a function of the public plan and of how
        many releases were made, never of the data."""
        ledger = PrivacyLedger.combined([self.ledger, *self.side_ledgers])
        epsilon = ledger.epsilon(delta, accountant)
        return epsilon, (delta if math.isfinite(epsilon) else 0.0)

    def close(self) -> None:
        """The computation ended: the secret generator goes; a later release is refused."""
        self.secret = None
        self.closed = True

    def __enter__(self) -> ReleaseSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- internals -------------------------------------------------------------------------------------
    def _claim(self) -> None:
        if self.claim is not None:
            self.claim()

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("this release session is closed: its computation ended, and its secret generator "
                               "with it")

    def _relation(self):
        ledgers = [self.ledger] if isinstance(self.ledger, PrivacyLedger) else list(self.ledger)
        return ledgers[0].relation
