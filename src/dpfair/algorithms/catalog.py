"""What each method is, reads and targets, from the estimators themselves: ``dpfair methods`` prints it.

Nothing here is written twice: a method's summary is the first line of its class docstring, its
hyper-parameters are its constructor's (``get_params``) with their defaults, described by the
numpydoc ``Parameters`` section of the same docstring, and its notions, strength and privacy are what the class
declares (:func:`dpfair.utils.capabilities.capabilities`).

Reading them takes importing every estimator (torch, scikit-learn, fairlearn), so ``dpfair methods`` prints
``catalog.json`` beside this module instead: what :func:`build_catalog` reads from the classes, written by
``python -m dpfair.algorithms.catalog --write`` and checked against the classes by the test suite. This module
imports no estimator until :func:`build_catalog` runs.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from dpfair.utils.capabilities import capabilities

#: The catalog as written by :func:`write_catalog` (package data, read by :func:`read_catalog`).
CATALOG_FILE = Path(__file__).with_name("catalog.json")
#: The command that rewrites :data:`CATALOG_FILE` from the classes.
REGENERATE = "python -m dpfair.algorithms.catalog --write"

#: One ``name : text`` (or ``a, b : text``) entry of a numpydoc Parameters section (also read by the docs' build).
PARAMETER_ENTRY = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s+:\s*(.*)$")


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
        match = PARAMETER_ENTRY.match(line)
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
    if not capabilities(est).private:
        return "none (non-private)"
    unit = getattr(est, "privacy_unit", "record")
    return f"(ε, δ)-DP of {'the sensitive attribute' if unit == 'sensitive' else 'whole records'}"


def method_table() -> list[dict]:
    """One row per ``--method``: name, estimator, summary, default guarantee, notions it can target."""
    from dpfair.algorithms import METHODS

    return [{"method": name, "estimator": cls.__name__, "summary": summary(cls), "guarantee": guarantee(cls),
             "notions": list(capabilities(cls).notions), "fairness_strength": capabilities(cls).fairness_strength}
            for name, cls in METHODS.items()]


def _json_default(value):
    """A default as ``dpfair methods --json`` shows it: JSON scalars as they are, ∞ and NaN as null (JSON has
    neither), a tuple, list or dict item by item, any other object as its repr."""
    if isinstance(value, dict):
        return {str(k): _json_default(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_default(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return repr(value)


def accepted(cls, name: str) -> str:
    """What the hyper-parameter ``name`` of ``cls`` accepts, in one line, from its declared constraints
    (:mod:`dpfair.utils.constraints`; ``""`` where none is declared)."""
    from dpfair.utils.constraints import describe

    allowed = getattr(cls, "parameter_constraints", {}).get(name)
    return "" if allowed is None else describe(allowed)


def build_catalog() -> list[dict]:
    """:func:`method_table`'s rows, each with its ``parameters`` (:func:`describe_parameters`): name, default
    (JSON), ``default_repr`` (the default as Python prints it), description and what it accepts
    (:func:`accepted`). Imports every estimator."""
    from dpfair.algorithms import METHODS

    return [{**row, "parameters": [{"name": p.name, "default": _json_default(p.default),
                                    "default_repr": repr(p.default), "description": p.description,
                                    "accepts": accepted(METHODS[row["method"]], p.name)}
                                   for p in describe_parameters(METHODS[row["method"]])]}
            for row in method_table()]


def catalog_text(catalog: list[dict]) -> str:
    """The text of :data:`CATALOG_FILE` holding ``catalog``."""
    return json.dumps({"written_by": REGENERATE, "methods": catalog}, indent=1, ensure_ascii=False,
                      allow_nan=False) + "\n"


def write_catalog(path: Path = CATALOG_FILE) -> None:
    """Write :func:`build_catalog` to ``path`` (default :data:`CATALOG_FILE`)."""
    Path(path).write_text(catalog_text(build_catalog()), encoding="utf-8")


def read_catalog() -> list[dict]:
    """:data:`CATALOG_FILE`'s rows, as :func:`build_catalog` gave them when it was written; imports no estimator."""
    return json.loads(CATALOG_FILE.read_text(encoding="utf-8"))["methods"]


def main(argv: list[str] | None = None) -> int:
    """``--write`` rewrites :data:`CATALOG_FILE` from the classes; ``--check`` exits 1 when it differs from them."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--write"]:
        write_catalog()
        return 0
    if argv == ["--check"]:
        fresh = catalog_text(build_catalog()) == CATALOG_FILE.read_text(encoding="utf-8")
        print(f"{CATALOG_FILE} is {'up to date' if fresh else f'out of date; run {REGENERATE}'}")
        return 0 if fresh else 1
    print("usage: python -m dpfair.algorithms.catalog --write | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
