"""What each method is, reads and targets, from the estimators themselves: ``dpfair methods`` prints it.

Nothing here is written twice: a method's summary is the first line of its class docstring, its
hyper-parameters are its constructor's (``get_params``) with their defaults, described by the
numpydoc ``Parameters`` section of the same docstring, and its notions are the class's ``_notions``.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

_PARAMETER = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+:\s*(.*)$")


@dataclass(frozen=True)
class Parameter:
    """One hyper-parameter: its name, default and the docstring's description (``""`` if undocumented)."""

    name: str
    default: object
    description: str


def parameter_docs(cls) -> dict[str, str]:
    """``{name: description}`` from the ``Parameters`` section of ``cls``'s docstring (numpydoc).

    An entry ``a, b : text`` documents both ``a`` and ``b``; continuation lines (indented) join the text.
    The section ends at its first blank line.
    """
    lines = (inspect.getdoc(cls) or "").splitlines()
    try:
        start = next(i for i in range(len(lines) - 1)
                     if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"}) + 2
    except StopIteration:
        return {}
    docs: dict[str, str] = {}
    names: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            break
        match = _PARAMETER.match(line)
        if match and not line[0].isspace():
            names = [n.strip() for n in match.group(1).split(",")]
            for n in names:
                docs[n] = match.group(2).strip()
        elif names:
            for n in names:
                docs[n] = f"{docs[n]} {line.strip()}".strip()
    return docs


def describe_parameters(cls) -> list[Parameter]:
    """Every constructor hyper-parameter of ``cls`` in signature order, with its default and description."""
    docs = parameter_docs(cls)
    defaults = cls().get_params(deep=False)
    order = [name for name in inspect.signature(cls.__init__).parameters if name in defaults]
    return [Parameter(name, defaults[name], docs.get(name, "")) for name in order]


def summary(cls) -> str:
    """The first line of ``cls``'s docstring: what the method is and whose paper it follows."""
    return (inspect.getdoc(cls) or cls.__name__).splitlines()[0].rstrip(".")


def guarantee(cls) -> str:
    """The privacy the method gives by default, from its hyper-parameters."""
    est = cls()
    if not est._private:
        return "none (non-private)"
    unit = getattr(est, "privacy_unit", "record")
    return f"(ε, δ)-DP of {'the sensitive attribute' if unit == 'sensitive' else 'whole records'}"


def method_table() -> list[dict]:
    """One row per ``--method``: name, estimator, summary, default guarantee, notions it can target."""
    from dpfair.algorithms import METHODS

    return [{"method": name, "estimator": cls.__name__, "summary": summary(cls), "guarantee": guarantee(cls),
             "notions": list(cls._notions), "fairness_strength": cls._fairness_strength}
            for name, cls in METHODS.items()]
