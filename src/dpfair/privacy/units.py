"""Privacy units: who is protected, and the neighbouring relation that follows.

``"sensitive"``: neighbouring data sets differ in one person's sensitive
attribute ``s`` (features and labels are public). With Poisson sampling the
person is in the batch on both sides or on neither, and only their
contribution changes: dp_accounting's ``REPLACE_ONE`` relation. Since X is
public there, no feature may encode s (:func:`check_public_features`).

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


def check_public_features(unit, names, sensitive: str, *, accounted: bool = False) -> None:
    """The rule that s may not hide in X where X is public: refuse features that encode the sensitive attribute.

    Under ``privacy_unit="sensitive"`` neighbouring data sets differ in one person's s while x and y are public,
    so a method may read X without noise (a base model, a public training error, the parts of a gradient it does
    not clip). A feature that encodes s (s itself, its one-hot columns, a column s is a function of) changes with
    s on the neighbouring data set, and every such read releases it with ε = ∞. So ``names``, the features that a
    public schema says encode s, are refused under that unit with one ``ValueError`` naming the fix, unless the
    method's own accounting covers them (``accounted``: output perturbation's ``sensitive_feature_columns``
    counts a change of s as a change of those columns). Under ``"record"`` every feature is protected with its
    record, and a non-private method (``unit=None``) claims no guarantee: neither is refused. The rule reads
    names and the unit only, never the data, so a refusal reveals nothing about s.
    """
    names = [str(n) for n in names]
    if not names or accounted or unit is None or check_privacy_unit(unit) is PrivacyUnit.RECORD:
        return
    shown = ", ".join(map(repr, names[:4])) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    raise ValueError(f"feature(s) {shown} encode the sensitive attribute {sensitive!r}; under "
                     "privacy_unit='sensitive' X is public, so the method would read them unprotected (ε = ∞): "
                     "drop them from X (include_sensitive=false for a built-in data set) or use "
                     "privacy_unit='record'")


def protection(unit, attribute: str | None = None, *, epsilon: float = 0.0, rest: str = "features and label") -> str:
    """Whom an ε protects, in words: the text every printed or written ε carries beside it.

    ``unit`` is a privacy unit (or ``None`` for a method that claims no guarantee), ``attribute`` the name of the
    sensitive column (``None``: "sensitive attribute"), ``rest`` what else a person's row holds (a model's
    "features and label", a measurement's "label and prediction"). Under ``"sensitive"`` the guarantee is about
    one person's value of that attribute, the rest of their row public (neighbours replace it); under
    ``"record"`` about their whole row, the attribute included (neighbours add or remove it). An infinite
    ``epsilon`` or no unit protects no one, and says so.
    """
    if unit is None or not epsilon < float("inf"):
        return "not private: protects no one"
    name = attribute or "sensitive attribute"
    if check_privacy_unit(unit) is PrivacyUnit.SENSITIVE:
        return f"each person's {name}; their {rest} public"
    return f"each person's whole record ({name}, {rest})" if attribute else "each person's whole record"
