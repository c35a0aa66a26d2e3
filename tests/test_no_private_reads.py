"""No module reads another module's ``_``-prefixed names, and no caller outside ``dpfair.algorithms`` decides what
an estimator can do by its class (issue 29, "One fit contract"; the project's rule).

A walk of ``src/dpfair`` with :mod:`ast`, no import of the code it reads save ``dpfair.algorithms`` (to tell which
imported names are estimator classes). What it flags:

* ``from dpfair.x import _name``, unless ``_name`` is a module of the importer's own package (the upstream names
  ``dpfair.utils.upstream`` re-exports have public names too); and an import of a private module (``dpfair.pkg._mod``) from outside
  ``dpfair.pkg``;
* ``x._name`` (an attribute read, write or delete; ``getattr``/``hasattr``/``setattr``/``delattr`` with a constant
  name; ``vars(x)[...]``, ``vars(x).get(...)``, ``... in vars(x)``) where ``x`` is not ``self``, ``cls`` or
  ``super()`` and ``_name`` is not defined in the same module (a function, class, class attribute, module name or
  ``self._name``): one module's private name read by another;
* outside ``dpfair.algorithms``: ``isinstance``/``issubclass``/``type(x) is C`` against a dpfair estimator class
  (imported from ``dpfair.algorithms``, or a loop variable over ``METHODS``/``ESTIMATORS``), and
  ``type(x).__name__ == "<an estimator's class name>"``. Callers ask :func:`dpfair.utils.capabilities.capabilities`.

``dpfair.utils.upstream`` is exempt: it is the one module that reads the internals of the libraries dpfair builds on,
behind a version check. :data:`ALLOWED` lists what other work of issue 29 is still removing; it shrinks to empty.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "dpfair"

#: The module whose reads of other libraries' internals are its purpose; the upstream names it re-exports keep
#: upstream's spelling (``from dpfair.utils.upstream import _ALL``: fairlearn's ``_ALL``).
EXEMPT = {"dpfair.utils.upstream"}
#: Upstream names that are public despite their underscore: namedtuple's methods, ``os._exit``.
UPSTREAM_PUBLIC = {"_asdict", "_replace", "_fields", "_make", "_exit"}

#: ``(module, the flagged source text)`` still to be removed, and what removes it. Empty once issue 29 is done.
ALLOWED: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own(node: ast.AST, own=frozenset({"self", "cls"})) -> bool:
    """``self``/``cls`` (``own``: the first parameters of the enclosing methods) or ``super()``: the object's own
    class hierarchy."""
    if isinstance(node, ast.Name):
        return node.id in own
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _nodes(node: ast.AST, own: frozenset = frozenset(), in_class: bool = False):
    """Every node under ``node`` with the names that stand for the object itself there: a method's first
    parameter (``self``, ``cls``), seen by the functions nested in it too; a plain function's ``cls`` is a class
    like any other."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = child.args.posonlyargs + child.args.args
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in child.decorator_list)
            inner = own | {params[0].arg} if in_class and params and not static else own
            yield child, own
            yield from _nodes(child, inner)
        else:
            yield child, own
            yield from _nodes(child, own, isinstance(child, ast.ClassDef))


def _defined(tree: ast.Module) -> set[str]:
    """Names this module defines: functions, classes, class attributes, module names and ``self._x`` / ``cls._x``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.add(leaf.id)
                    elif isinstance(leaf, ast.Attribute) and _own(leaf.value):
                        names.add(leaf.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) >= 2 and _own(node.args[0]) and isinstance(node.args[1], ast.Constant):
            names.add(str(node.args[1].value))
    return names


def _vars_of(node: ast.AST) -> ast.AST | None:
    """``x`` of ``vars(x)``, else ``None``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and node.args:
        return node.args[0]
    return None


def _private_reads(tree: ast.Module, module: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every read of another module's ``_`` name in ``tree`` (module docstring)."""
    defined = _defined(tree)
    package = module.rsplit(".", 1)[0] if module.count(".") else module
    found = []

    def flag(node, text):
        found.append((node.lineno, text))

    for node, own in _nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dpfair":
            source = node.module
            for alias in node.names:
                target = f"{source}.{alias.name}"
                if _private(alias.name) and not _submodule_of(target, package):
                    flag(node, f"from {source} import {alias.name}")
            if not _may_import(source, module):
                flag(node, f"from {source} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dpfair" and not _may_import(alias.name, module):
                    flag(node, f"import {alias.name}")
        elif isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value, own) \
                and node.attr not in defined | UPSTREAM_PUBLIC:
            flag(node, f"{ast.unparse(node.value)}.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "hasattr", "setattr", "delattr") and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str) \
                and _private(node.args[1].value) and not _own(node.args[0], own) and node.args[1].value not in defined:
            flag(node, f"{ast.unparse(node.args[0])}.{node.args[1].value}")
        else:
            owner, key = None, None
            if isinstance(node, ast.Subscript):  # vars(x)["_name"]
                owner, key = _vars_of(node.value), node.slice
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("get", "pop", "setdefault") and node.args:  # vars(x).get("_name")
                owner, key = _vars_of(node.func.value), node.args[0]
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
                owner, key = _vars_of(node.comparators[0]), node.left  # "_name" in vars(x)
            if owner is not None and not _own(owner, own) and isinstance(key, ast.Constant) \
                    and isinstance(key.value, str) and _private(key.value) and key.value not in defined:
                flag(node, f"vars({ast.unparse(owner)})[{key.value!r}]")
    return found


def _submodule_of(name: str, package: str) -> bool:
    """Whether ``name`` is a module inside ``package`` (``dpfair.datasets._acs`` inside ``dpfair.datasets``)."""
    if not name.startswith(f"{package}."):
        return False
    rest = name[len(package) + 1:]
    path = SRC.parent.joinpath(*package.split("."), *rest.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _may_import(source: str, importer: str) -> bool:
    """A private module ``pkg._mod`` (or anything under it) is imported only from inside ``pkg``."""
    parts = source.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            owner = ".".join(parts[:i])
            return importer == owner or importer.startswith(f"{owner}.")
    return True


def _estimator_classes() -> dict[str, type]:
    from dpfair.algorithms import ESTIMATORS, FairEstimator, TorchClassifier

    return {**ESTIMATORS, "FairEstimator": FairEstimator, "TorchClassifier": TorchClassifier}


def _imported_estimators(tree: ast.Module, classes: dict[str, type]) -> set[str]:
    """Local names bound to a dpfair estimator class by an import from ``dpfair.algorithms``."""
    import importlib

    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpfair.algorithms"):
            for alias in node.names:
                obj = getattr(importlib.import_module(node.module), alias.name, None)
                if isinstance(obj, type) and issubclass(obj, tuple(classes.values())):
                    names.add(alias.asname or alias.name)
    return names


def _registry_loop_names(tree: ast.Module) -> set[str]:
    """Names a ``for`` or comprehension binds while iterating over ``METHODS`` or ``ESTIMATORS``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)) and any(
                r in ast.unparse(node.iter) for r in ("METHODS", "ESTIMATORS")):
            names |= {leaf.id for leaf in ast.walk(node.target) if isinstance(leaf, ast.Name)}
    return names


def _class_tests(tree: ast.Module, classes: dict[str, type]) -> list[tuple[int, str]]:
    """``(line, text)`` of every test of an estimator against a dpfair estimator class (module docstring)."""
    suspects = _imported_estimators(tree, classes) | _registry_loop_names(tree)

    def names_class(node) -> bool:
        if isinstance(node, ast.Tuple):
            return any(names_class(e) for e in node.elts)
        return isinstance(node, ast.Name) and node.id in suspects

    def type_of(node) -> bool:  # type(x), or x.__class__
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type"
                and len(node.args) == 1) or (isinstance(node, ast.Attribute) and node.attr == "__class__")

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2 and names_class(node.args[1]):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(type_of(a) for a in sides) and any(names_class(b) for b in sides):
                found.append((node.lineno, ast.unparse(node)))
            named = any(isinstance(a, ast.Attribute) and a.attr == "__name__" and type_of(a.value) for a in sides)
            if named and any(isinstance(b, ast.Constant) and b.value in classes for b in sides):
                found.append((node.lineno, ast.unparse(node)))
    return found


@functools.cache
def _findings() -> tuple[list, list]:
    """``(private reads, class tests)`` of ``src/dpfair``, each ``(module, line, text)``: one walk for the tests."""
    classes = _estimator_classes()
    reads, tests = [], []
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        if module in EXEMPT:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        reads += [(module, line, text) for line, text in _private_reads(tree, module)]
        if not module.startswith("dpfair.algorithms"):
            tests += [(module, line, text) for line, text in _class_tests(tree, classes)]
    return reads, tests


def _unexpected(found: list[tuple[str, int, str]]) -> list[str]:
    return [f"{module}:{line}: {text}" for module, line, text in found if (module, text) not in ALLOWED]


def test_no_module_reads_another_modules_private_names():
    unexpected = _unexpected(_findings()[0])
    assert not unexpected, ("private names read across modules (make them public, documented, or ask the object "
                            "what it can do):\n" + "\n".join(unexpected))


def test_no_caller_outside_the_algorithms_tests_an_estimators_class():
    unexpected = _unexpected(_findings()[1])
    assert not unexpected, ("estimator classes tested outside dpfair.algorithms (ask "
                            "dpfair.utils.capabilities.capabilities(estimator) instead):\n" + "\n".join(unexpected))


def test_the_allow_list_holds_only_what_is_still_there():
    """An entry whose read is gone is removed from :data:`ALLOWED` too, so the list shrinks to empty."""
    found = {(module, text) for module, _, text in _findings()[0] + _findings()[1]}
    assert not set(ALLOWED) - found, f"stale entries in ALLOWED: {sorted(set(ALLOWED) - found)}"


# ---- the checker finds what it is meant to find --------------------------------------------------------

@pytest.mark.parametrize("source, module, expected", [
    ("from dpfair.privacy.budget import _claim", "dpfair.selection", ["from dpfair.privacy.budget import _claim"]),
    ("from dpfair.datasets import _acs", "dpfair.datasets._registry", []),
    ("from dpfair.datasets._presets import presets_of", "dpfair.experiments.spec",
     ["from dpfair.datasets._presets import ..."]),
    ("from dpfair.datasets._files import fetch", "dpfair.datasets._acs", []),
    ("def f(est):\n    return est._private", "dpfair.cli", ["est._private"]),
    ("def f(est):\n    return getattr(est, '_notions', ())", "dpfair.cli", ["est._notions"]),
    ("def f(est):\n    return vars(est).get('_budget')", "dpfair.cli", ["vars(est)['_budget']"]),
    ("def f(est):\n    return '_sigmas' in vars(est)", "dpfair.cli", ["vars(est)['_sigmas']"]),
    ("class A:\n    def f(self, other):\n        return self._x + other._x + super()._y\n    _x = 1",
     "dpfair.cli", []),
    ("def f(cls):\n    return cls._notions", "dpfair.cli", ["cls._notions"]),  # a class, not the method's own
    ("class A:\n    @classmethod\n    def f(cls):\n        return cls._notions", "dpfair.cli", []),
])
def test_the_private_read_checker(source, module, expected):
    assert [text for _, text in _private_reads(ast.parse(source), module)] == expected


def test_the_class_test_checker():
    source = ("from dpfair.algorithms import DPFERMIClassifier, METHODS\n"
              "def f(est):\n"
              "    a = isinstance(est, DPFERMIClassifier)\n"
              "    b = type(est).__name__ == 'DPFERMIClassifier'\n"
              "    c = next(n for n, cls in METHODS.items() if type(est) is cls)\n"
              "    d = isinstance(est, (int, float))\n")
    found = sorted(_class_tests(ast.parse(source), _estimator_classes()))
    assert [text for _, text in found] == ["isinstance(est, DPFERMIClassifier)",
                                           "type(est).__name__ == 'DPFERMIClassifier'", "type(est) is cls"]


#: The scripts around the package (benchmarks, scripts, the docs' build) are held to the same rule; what they read of
#: another library's private names (argparse's parser internals, to document the CLI) is listed here.
AROUND_ALLOWED = {("docs/conf.py", "parser._actions"), ("docs/conf.py", "argparse._SubParsersAction")}


def test_benchmarks_scripts_and_docs_read_no_private_names():
    root = SRC.parents[1]
    paths = [*sorted((root / "benchmarks").glob("*.py")), *sorted((root / "scripts").glob("*.py")),
             root / "docs" / "conf.py"]
    found = []
    for path in paths:
        name = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [f"{name}:{line}: {text}" for line, text in _private_reads(tree, name.replace("/", "."))
                  if (name, text) not in AROUND_ALLOWED]
    assert not found, "private names read by scripts around the package:\n" + "\n".join(found)
