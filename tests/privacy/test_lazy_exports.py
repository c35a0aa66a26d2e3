"""dpfair.privacy's names: the accountant loads with the package, the names whose modules need torch on first use."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import dpfair.privacy as privacy


def test_every_public_name_is_its_modules_object():
    """Each name of ``__all__`` resolves, to the very object its defining module holds (one class, not a copy)."""
    for name in privacy.__all__:
        value = getattr(privacy, name)
        module = importlib.import_module(value.__module__) if hasattr(value, "__module__") else None
        if module is not None and module.__name__.startswith("dpfair.privacy."):
            assert getattr(module, name) is value, name
    assert set(privacy.__all__) <= set(dir(privacy))
    namespace: dict = {}
    exec("from dpfair.privacy import *", namespace)  # noqa: S102 (a star import, as a user may write)
    assert set(privacy.__all__) <= set(namespace)


def test_neither_reading_ledgers_nor_a_mechanism_imports_torch():
    """Issue 45: the privacy layer handles torch tensors without importing torch (a tensor's caller has); a
    measurement of counts releases through it without loading torch."""
    script = ("import json, sys\n"
              "from dpfair.privacy import PrivacyLedger, epsilon_of, relation_of\n"
              "import dpfair.privacy.accounting\n"
              "first = 'torch' in sys.modules\n"
              "from dpfair.privacy import Release\n"
              "import dpfair.privacy as p\n"
              "print(json.dumps([first, 'torch' in sys.modules, p.plan.__name__]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [False, False, "dpfair.privacy.plan"]


def test_an_unknown_name_is_an_attribute_error():
    try:
        privacy.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")
