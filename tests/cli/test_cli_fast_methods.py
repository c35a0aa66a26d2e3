"""`dpfair methods` and a cached `dpfair datasets` answer without importing torch or scikit-learn (issue 28):
`dpfair methods` prints the catalog stored beside :mod:`dpfair.algorithms.catalog`, which must say what the
estimator classes say."""

import json
import subprocess
import sys

import pytest

from dpfair.algorithms import METHODS
from dpfair.algorithms.catalog import (
    CATALOG_FILE,
    REGENERATE,
    accepted,
    build_catalog,
    catalog_text,
    describe_parameters,
    method_table,
)
from dpfair.cli import main

HEAVY = ("torch", "sklearn", "numba", "fairlearn")


def imported_heavy(code: str, env=None) -> list[str]:
    """The heavy packages a fresh interpreter has imported after running ``code``."""
    script = (f"import json, sys\n{code}\n"
              f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


def test_the_stored_catalog_says_what_the_classes_say():
    """A docstring, default, notion or guarantee edited without regenerating the file fails here."""
    stored = CATALOG_FILE.read_text(encoding="utf-8")
    assert stored == catalog_text(build_catalog()), (
        f"{CATALOG_FILE.name} differs from the estimator classes; regenerate it with `{REGENERATE}`")


def test_the_catalog_holds_every_method_with_its_rows_and_defaults():
    catalog = build_catalog()
    assert [e["method"] for e in catalog] == list(METHODS)
    assert [{k: v for k, v in e.items() if k != "parameters"} for e in catalog] == method_table()
    for entry in catalog:
        params = describe_parameters(METHODS[entry["method"]])
        assert [(p["name"], p["default_repr"], p["description"]) for p in entry["parameters"]] == [
            (p.name, repr(p.default), p.description) for p in params]
        json.dumps(entry, allow_nan=False)  # JSON-safe: no object, no ∞


@pytest.mark.parametrize("argv", [["methods"], ["methods", "dp-sgd"], ["methods", "dp-fermi", "--json"],
                                  ["methods", "--json"]])
def test_methods_imports_no_estimator(argv):
    """`dpfair methods` spent seconds importing torch and scikit-learn to read the classes' docstrings."""
    assert imported_heavy(f"from dpfair.cli import main\nassert main({argv!r}) == 0") == []


def test_importing_the_catalog_imports_no_estimator():
    assert imported_heavy("import dpfair.algorithms.catalog") == []


def test_methods_prints_each_class_default_and_description(capsys):
    """What the file gives is what the classes give: every hyper-parameter's ``name=repr(default)`` and its
    JSON default, for every method."""
    for method, cls in METHODS.items():
        assert main(["methods", method]) == 0
        text = capsys.readouterr().out
        assert main(["methods", method, "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        params = describe_parameters(cls)
        assert all(f"  {p.name}={p.default!r} " in text for p in params), method
        assert [p["name"] for p in shown["parameters"]] == [p.name for p in params]
        assert set(shown["parameters"][0]) == {"name", "default", "description", "accepts"}
        # what each hyper-parameter accepts, from its declared constraints (dpfair.utils.constraints)
        assert all(p["accepts"] == accepted(cls, p["name"]) != "" for p in shown["parameters"]), method
        assert all(f"[accepts {p['accepts']}]" in text for p in shown["parameters"]), method
        assert shown["estimator"] == cls.__name__


def test_an_unknown_method_is_one_line(capsys):
    assert main(["methods", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'nope'; choose one of dp-fermi" in err and len(err.strip().splitlines()) == 1


def test_cached_datasets_listing_imports_no_scikit_learn(tmp_path, shared_data):
    """A listing whose summaries are all cached reads no data, so it needs neither scikit-learn nor torch."""
    import os

    env = {**os.environ, "DPFAIR_CACHE_DIR": str(tmp_path / "cache"), "DPFAIR_DATA": str(shared_data)}
    listing = "from dpfair.cli import main\nassert main(['datasets', '--json']) == 0"
    imported_heavy(listing, env)  # the first listing loads each data set on disk and caches its summary
    assert list((tmp_path / "cache" / "datasets").glob("*.json"))
    assert imported_heavy(listing, env) == []
