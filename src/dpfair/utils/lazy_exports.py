"""Names a package exports without importing their modules until first use (PEP 562 module ``__getattr__``).

A package lists ``{name: module}``; ``__getattr__, __dir__ = lazy_exports(__name__, names, globals())`` at its end
imports a name's module when the name is first read and caches the name in the package, so that importing the
package stays cheap (``dpfair report`` and ``dpfair methods`` load no torch or scikit-learn) while every name in
``__all__`` stays importable as before. A submodule named among the modules (``dpfair.privacy.plan``) is returned
when read as an attribute before anything imported it.
"""

from __future__ import annotations

import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: dict[str, str], namespace: dict):
    """``(__getattr__, __dir__)`` for ``package`` (its ``__name__``), whose globals are ``namespace``."""
    modules = set(names.values())

    def __getattr__(name: str):
        module = names.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            namespace[name] = value  # later look-ups skip this function
            return value
        if f"{package}.{name}" in modules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
