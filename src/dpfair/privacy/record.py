"""What a result says about privacy, in one record: ε, δ, the privacy unit, whom the ε protects, and the ledger.

Every result the command line writes carries these facts under the same keys (``epsilon``, ``delta``,
``privacy_unit``, ``protects``, and where the result reports them ``not_covered``, ``privacy_guarantee``,
``privacy_ledger``, ...): :class:`PrivacyRecord` holds them, :meth:`PrivacyRecord.to_json` writes them in that
order, :meth:`PrivacyRecord.spent_text` says what a failed write left spent. It knows no estimator: a fitted model
is read through its public attributes (``privacy_spent_``, ``privacy_unit_``, ``privacy_guarantee_``,
``privacy_ledger_``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpfair.privacy.units import protection

#: The keys of :meth:`PrivacyRecord.to_json`, in the order a result writes them: the first, the optional ones (named
#: by the caller) and the last.
ALWAYS = ("epsilon", "delta", "privacy_unit", "protects")
OPTIONAL = ("privacy_spent", "not_covered", "per_model_epsilon", "privacy_guarantee", "noise_multiplier",
            "privacy_ledger")
KEYS = ("epsilon", "delta", "privacy_spent", "privacy_unit", "protects", "not_covered", "per_model_epsilon",
        "privacy_guarantee", "noise_multiplier", "privacy_ledger")


@dataclass(frozen=True)
class PrivacyRecord:
    """The privacy facts of one result.

    **epsilon, delta** -- what was spent (ε = ∞: not private).
    **unit** -- the privacy unit it ran under (``"sensitive"``, ``"record"``), ``None`` for a non-private run.
    **protects** -- whom the ε protects, in words (:func:`dpfair.privacy.units.protection`).
    **not_covered** -- what of the inputs the ε does not cover (a schema read off the rows), ``""`` when nothing.
    **guarantee** -- the guarantee's name (``"differential privacy"``, a void one).
    **ledger** -- the ledger's records (:meth:`dpfair.privacy.PrivacyLedger.to_records`).
    **noise_multiplier, per_model_epsilon** -- a fit's σ, a search's ε of each run.
    **spent** -- the spending as its source reports it (a membership audit's target's), written as
    ``privacy_spent``.
    """

    epsilon: float
    delta: float | None
    unit: str | None
    protects: str
    not_covered: str = ""
    guarantee: str | None = None
    ledger: list | None = None
    noise_multiplier: float | None = None
    per_model_epsilon: float | None = None
    spent: dict | None = None

    @classmethod
    def of(cls, epsilon: float, delta: float | None, unit, attribute: str | None = None, *,
           rest: str = "features and label", **fields) -> PrivacyRecord:
        """The record of ``(epsilon, delta)`` spent under ``unit`` on the sensitive column ``attribute`` (``rest``:
        what else a person's row holds, a measurement's "label and prediction"); ``fields``: the others."""
        unit = None if unit is None else getattr(unit, "value", str(unit))
        return cls(epsilon=epsilon, delta=delta, unit=unit,
                   protects=protection(unit, attribute, epsilon=epsilon, rest=rest), **fields)

    @classmethod
    def of_fit(cls, est, attribute: str | None = None, **fields) -> PrivacyRecord:
        """The record of a fitted model ``est``: its ε, δ, unit, guarantee and ledger; ``fields``: the others
        (``not_covered``, ``noise_multiplier``, ...)."""
        eps, delta = est.privacy_spent_
        return cls.of(eps, delta, getattr(est, "privacy_unit_", None), attribute,
                      **{"guarantee": est.privacy_guarantee_, "ledger": est.privacy_ledger_.to_records(), **fields})

    def to_json(self, *optional: str) -> dict:
        """``epsilon``, ``delta``, ``privacy_unit`` and ``protects``, with the keys of ``optional`` (of
        :data:`OPTIONAL`) that the result reports, in :data:`KEYS`' order; ``not_covered`` only when not empty.
        Values as they are (``inf`` included): the writer makes them JSON."""
        unknown = sorted(set(optional) - set(OPTIONAL))
        if unknown:
            raise ValueError(f"a privacy record has no optional key {unknown[0]!r}; choose from {', '.join(OPTIONAL)}")
        values = {"epsilon": self.epsilon, "delta": self.delta, "privacy_spent": self.spent,
                  "privacy_unit": self.unit, "protects": self.protects, "not_covered": self.not_covered,
                  "per_model_epsilon": self.per_model_epsilon, "privacy_guarantee": self.guarantee,
                  "noise_multiplier": self.noise_multiplier, "privacy_ledger": self.ledger}
        return {k: values[k] for k in KEYS
                if k in ALWAYS or (k in optional and (k != "not_covered" or self.not_covered))}

    def to_row(self) -> dict:
        """The record's facts under a results store's column names (a sweep's row: ``epsilon_spent``,
        ``delta_spent``, ``privacy_unit``); the store keeps the ledger whole beside them (its events as JSON)."""
        return {"epsilon_spent": self.epsilon, "delta_spent": self.delta, "privacy_unit": self.unit}

    def spent_text(self, what: str = "fit") -> str:
        """What a failed write leaves spent: ``"the fit spent ε = 0.997 all the same"`` (``what``: the fit, the
        search, the measurement); empty when ε = ∞."""
        return f"the {what} spent ε = {self.epsilon:.6g} all the same" if math.isfinite(self.epsilon) else ""
