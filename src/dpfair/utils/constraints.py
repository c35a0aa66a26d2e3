"""Declared hyper-parameter constraints, checked in one place.

Each estimator states, as a class attribute, which values each of its constructor hyper-parameters accepts::

    parameter_constraints = {
        "lam": [Interval(float, 0, None, closed="left")],
        "batch_size": [Options("auto"), Interval(int, 0, None, closed="neither")],
        "w_radius": [None, Interval(float, 0, None, closed="neither")],
    }

A value is valid when one constraint of its list accepts it (``None`` in a list accepts ``None``).
:func:`check_parameters` checks every declared hyper-parameter of an estimator and refuses the first invalid one
with a ``ValueError`` of one line that names the parameter, the value it got and what to give instead
(:func:`refusal` writes it). The estimators' ``check_hyperparameters`` runs it first, before any data is read: a
hyper-parameter is public, so the check and its message reveal nothing about the data. The idea is
scikit-learn's (``_parameter_constraints``); the vocabulary and the messages are dpfair's own.

The vocabulary, each object able to say in one line what it accepts (:meth:`Constraint.describe`):

- :class:`Interval`: integers or real numbers between two bounds, each open or closed (reals: finite, unless
  ``inf`` is a closed upper bound);
- :class:`Options`: a few named values (``Options("auto")``, ``Options("pld", "rdp")``);
- :class:`Bools`: ``True`` or ``False``;
- :class:`Instances`: objects of given types (a ``torch.nn.Module``, a ``dict`` of keyword arguments);
- :class:`HasMethods`: objects with given methods (a classifier with ``fit`` and ``predict``);
- :class:`Listing`: a list, tuple or array of values (not a string);
- ``None``: ``None`` itself.

Rules that tie several hyper-parameters together (``counts_budget + dual_budget < 1``) or need the data (a column
index below the number of features) stay with the estimator that states them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass

import numpy as np

__all__ = ["Bools", "Constraint", "HasMethods", "Instances", "Interval", "Listing", "Options", "check_parameters",
           "describe", "parameter_values", "refusal"]


def _as_float(value) -> float:
    """``float(value)``, with an integer too large for a float read as ±inf (refused then like any infinite value)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


class Constraint:
    """One set of accepted values. ``note``: a few words on what the parameter is, added to a refusal's fix."""

    note: str | None = None

    def accepts(self, value) -> bool:
        """Whether ``value`` is in the set."""
        raise NotImplementedError

    def describe(self) -> str:
        """What the set holds, in a few words that follow "must be" (``"a number > 0"``)."""
        raise NotImplementedError

    def missed(self, value) -> str | None:
        """For a value of the right kind outside the set, the requirement it misses, following "must"
        (``"be > 0"``); ``None`` for a value of another kind (the refusal then says what the set holds)."""
        return None


def _number(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class Interval(Constraint):
    """Integers (``kind=int``) or real numbers (``kind=float``) between ``low`` and ``high`` (``None``: unbounded),
    ``closed`` on ``"both"`` sides, the ``"left"``, the ``"right"`` or ``"neither"``.

    ``bool`` is no number here (``True`` is not 1 epoch); numpy's scalars are. A real must be finite, save
    ``inf`` where it is a closed upper bound (``Interval(float, 0, math.inf, closed="right")``: ε, ``inf`` meaning
    no noise). An integer parameter refuses ``2.0``: a count is written as one.
    """

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"
    note: str | None = None

    def __post_init__(self):
        if self.kind not in (int, float):
            raise ValueError(f"Interval's kind must be int or float, got {self.kind!r}")
        if self.closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"Interval's closed must be 'both', 'left', 'right' or 'neither', got {self.closed!r}")

    @property
    def _left_closed(self) -> bool:
        return self.closed in ("both", "left")

    @property
    def _right_closed(self) -> bool:
        return self.closed in ("both", "right")

    @property
    def _takes_inf(self) -> bool:
        return self.high == math.inf and self._right_closed

    def _of_kind(self, value) -> bool:
        kind = numbers.Integral if self.kind is int else numbers.Real
        return isinstance(value, kind) and not isinstance(value, (bool, np.bool_))

    def _in_range(self, v: float) -> bool:
        if self.low is not None and (v < self.low or (v == self.low and not self._left_closed)):
            return False
        return self.high is None or v < self.high or (v == self.high and self._right_closed)

    def accepts(self, value) -> bool:
        if not self._of_kind(value):
            return False
        v = _as_float(value)
        if math.isnan(v) or (math.isinf(v) and not (v > 0 and self._takes_inf)):
            return False
        return self._in_range(v)

    def _bounds(self) -> tuple[str, str]:
        """(the requirement after "must", the set after "a number"): ``("be > 0", "> 0")``,
        ``("lie in (0, 1]", "in (0, 1]")``, ``("lie strictly between 0 and 1", "strictly between 0 and 1")``."""
        high = None if self.high is None or self.high == math.inf else self.high
        if self.low is not None and high is not None:
            if self.closed == "neither":
                text = f"strictly between {_number(self.low)} and {_number(high)}"
            else:
                text = (f"in {'[' if self._left_closed else '('}{_number(self.low)}, {_number(high)}"
                        f"{']' if self._right_closed else ')'}")
            return f"lie {text}", text
        if self.low is not None:
            text = f"{'>=' if self._left_closed else '>'} {_number(self.low)}"
        elif high is not None:
            text = f"{'<=' if self._right_closed else '<'} {_number(high)}"
        else:
            text = ""
        return f"be {text}".rstrip(), text

    def describe(self) -> str:
        kind = "an integer" if self.kind is int else "a number"
        text = f"{kind} {self._bounds()[1]}".rstrip()
        return f"{text} or inf" if self._takes_inf else text

    def missed(self, value) -> str | None:
        if not self._of_kind(value):
            return None
        v = _as_float(value)
        if math.isnan(v) or (math.isinf(v) and not (v > 0 and self._takes_inf)):
            return "be a finite number"
        return None if self._in_range(v) else self._bounds()[0]


def _same(value, option) -> bool:
    """``value == option`` for one value, never ``True == 1`` and never an error (an array compared)."""
    if isinstance(value, (bool, np.bool_)) != isinstance(option, bool):
        return False
    try:
        return bool(value == option)
    except (TypeError, ValueError):
        return False


class Options(Constraint):
    """A few named values: ``Options("auto")``, ``Options("pld", "rdp")`` (equal values pass: a ``str`` enum
    member equal to one of them too)."""

    def __init__(self, *values, note: str | None = None):
        if not values:
            raise ValueError("Options needs at least one value")
        self.values = tuple(values)
        self.note = note

    def accepts(self, value) -> bool:
        return any(_same(value, option) for option in self.values)

    def describe(self) -> str:
        names = ", ".join(map(repr, self.values))
        return names if len(self.values) == 1 else f"one of {names}"

    def __repr__(self) -> str:
        return f"Options{self.values!r}"


@dataclass(frozen=True)
class Bools(Constraint):
    """``True`` or ``False`` (numpy's too); not ``0``/``1``, nor the strings ``"yes"``/``"true"``."""

    note: str | None = None

    def accepts(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def describe(self) -> str:
        return "True or False"


class Instances(Constraint):
    """Objects of the types ``types`` (a type or a tuple of them), described as ``what``."""

    def __init__(self, types, what: str, *, note: str | None = None):
        self.types = types if isinstance(types, tuple) else (types,)
        self.what = what
        self.note = note

    def accepts(self, value) -> bool:
        return isinstance(value, self.types)

    def describe(self) -> str:
        return self.what

    def __repr__(self) -> str:
        return f"Instances({self.what!r})"


class HasMethods(Constraint):
    """Objects with every method of ``methods`` (duck typing: a scikit-learn classifier is any object with ``fit``
    and ``predict``), described as ``what`` (default: "an object with fit and predict")."""

    def __init__(self, *methods: str, what: str | None = None, note: str | None = None):
        self.methods = methods
        self.what = what or f"an object with {' and '.join(methods)}"
        self.note = note

    def accepts(self, value) -> bool:
        return not isinstance(value, type) and all(callable(getattr(value, m, None)) for m in self.methods)

    def describe(self) -> str:
        return self.what

    def __repr__(self) -> str:
        return f"HasMethods{self.methods!r}"


class Listing(Constraint):
    """A list, tuple, array or other iterable of values, not a string nor a mapping, described as ``what``."""

    def __init__(self, what: str = "a list of values", *, note: str | None = None):
        self.what = what
        self.note = note

    def accepts(self, value) -> bool:
        return isinstance(value, (Iterable, np.ndarray)) and not isinstance(value, (str, bytes, Mapping))

    def describe(self) -> str:
        return self.what

    def __repr__(self) -> str:
        return f"Listing({self.what!r})"


class _NoneConstraint(Constraint):
    """``None`` in a declaration's list: ``None`` itself."""

    def accepts(self, value) -> bool:
        return value is None

    def describe(self) -> str:
        return "None"


_NONE = _NoneConstraint()


def _constraints(allowed) -> list[Constraint]:
    out = []
    for c in allowed:
        if c is None:
            out.append(_NONE)
        elif isinstance(c, Constraint):
            out.append(c)
        else:
            raise TypeError(f"a parameter constraint must be a Constraint or None, got {c!r}")
    return out


def describe(allowed) -> str:
    """What a declaration's list accepts, in one line: ``"'auto' or a number > 0"``."""
    names = [c.describe() for c in _constraints(allowed)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _shown(value, limit: int = 60) -> str:
    """``repr(value)`` on one line, cut at ``limit`` characters (an array or an estimator prints long)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def refusal(name: str, value, allowed) -> str | None:
    """The one-line reason ``value`` is not valid for the parameter ``name`` under the declaration ``allowed``
    (``None`` when it is valid).

    A value of the right kind outside its bounds: ``"lam must be >= 0, got -1.0; give a number >= 0"``; a value of
    another kind: ``"epochs must be an integer > 0, got 1.5"``. A constraint's ``note`` follows in parentheses.
    """
    constraints = _constraints(allowed)
    if any(c.accepts(value) for c in constraints):
        return None
    missed = next((m for m in (c.missed(value) for c in constraints) if m is not None), None)
    accepted = describe(constraints)
    if missed is None:
        text = f"{name} must be {accepted}, got {_shown(value)}"
    else:
        text = f"{name} must {missed}, got {_shown(value)}; give {accepted}"
    note = next((c.note for c in constraints if c.note), None)
    return f"{text} ({note})" if note else text


def parameter_values(params) -> dict:
    """The hyper-parameters of ``params``: a mapping as it is, an estimator's ``get_params(deep=False)``, or a
    dataclass's init fields."""
    if isinstance(params, Mapping):
        return dict(params)
    if hasattr(params, "get_params"):
        return params.get_params(deep=False)
    if is_dataclass(params):
        return {f.name: getattr(params, f.name) for f in fields(params) if f.init}
    raise TypeError(f"check_parameters takes an estimator, a dataclass or a dict of values, got {type(params).__name__}")


def check_parameters(params, constraints: Mapping, *, owner: str | None = None) -> None:
    """Refuse the first declared hyper-parameter of ``params`` (an estimator, a dataclass or a dict) whose value
    ``constraints`` (``{name: [constraint, ...]}``) does not accept, with a ``ValueError`` of one line
    (:func:`refusal`; ``owner`` prefixes the name: ``QuantileClipping.learning_rate``).

    A declared name that ``params`` lacks is skipped, so a base class may declare what most of its subclasses take.
    """
    values = parameter_values(params)
    for name, allowed in constraints.items():
        if name in values:
            reason = refusal(f"{owner}.{name}" if owner else name, values[name], allowed)
            if reason is not None:
                raise ValueError(reason)
