"""Privacy units: who is protected, and the neighbouring relation that follows.

``"sensitive"``: neighbouring data sets differ in one person's sensitive
attribute ``s`` (features and labels are public). With Poisson sampling the
person is in the batch on both sides or on neither, and only their
contribution changes: dp_accounting's ``REPLACE_ONE`` relation.

``"record"``: neighbouring data sets differ by adding or removing one whole
record ``(x, y, s)``: ``ADD_OR_REMOVE_ONE``.

Bound convention (dp_accounting's, used by every release in this package):
a noise multiplier is the noise standard deviation (or Laplace scale) divided
by the *bound on one person's contribution*: its norm under
``ADD_OR_REMOVE_ONE``, the radius of the ball it lies in under
``REPLACE_ONE`` (two values of it then differ by at most twice the bound).
"""

from __future__ import annotations

from enum import Enum

from dp_accounting import NeighboringRelation


class PrivacyUnit(str, Enum):
    SENSITIVE = "sensitive"
    RECORD = "record"

    @property
    def relation(self) -> NeighboringRelation:
        return _RELATION[self]


_RELATION = {
    PrivacyUnit.SENSITIVE: NeighboringRelation.REPLACE_ONE,
    PrivacyUnit.RECORD: NeighboringRelation.ADD_OR_REMOVE_ONE,
}


def check_privacy_unit(unit) -> PrivacyUnit:
    """Parse a privacy unit name, with an error that lists the valid ones."""
    try:
        return PrivacyUnit(unit)
    except ValueError:
        valid = ", ".join(repr(u.value) for u in PrivacyUnit)
        raise ValueError(f"privacy_unit must be one of {valid}, got {unit!r}") from None


def relation_of(unit_or_relation) -> NeighboringRelation:
    """The neighbouring relation of a privacy unit (or a relation passed through)."""
    if isinstance(unit_or_relation, NeighboringRelation):
        return unit_or_relation
    return check_privacy_unit(unit_or_relation).relation
