"""The docs site (issue 13, "What to build"; issue 28: the user guide): Sphinx builds the API reference from the
docstrings and the guide's Markdown pages (MyST), with warnings as errors.

One build (a subprocess, as ``python -m sphinx -W --keep-going -j 1 -b html docs OUT`` with the doctrees in
tmp too; about 25 s on one core), then checks of what it wrote: a docstring that breaks the reST, a guide page
that breaks the build or drops out of the site, or a public name left out of the reference fails here, so in CI.
"""

import importlib
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

pytest.importorskip("sphinx", reason="sphinx is not installed (it comes with the test extra: pip install -e '.[test]')")

DOCS = Path(__file__).resolve().parents[1] / "docs"

#: Every public subpackage or module with an API page, and the page.
PAGES = {
    "dpfair.algorithms": "algorithms", "dpfair.privacy": "privacy", "dpfair.fairness": "fairness",
    "dpfair.datasets": "datasets", "dpfair.nn": "nn", "dpfair.bounds": "bounds", "dpfair.audit": "audit",
    "dpfair.experiments": "experiments", "dpfair.model_selection": "model_selection", "dpfair.selection": "selection",
    "dpfair.measurement": "measurement",
    "dpfair.plot": "plot",
    "dpfair.utils.progress": "progress", "dpfair.persistence": "persistence", "dpfair.exceptions": "exceptions",
}


def _documented_objects(inventory: Path) -> set[str]:
    """The names in Sphinx's ``objects.inv``: 4 header lines, then zlib-compressed ``name domain:role ...`` lines."""
    data = inventory.read_bytes()
    body = data.split(b"\n", 4)[4]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines() if line}


def _public_names(module) -> list[str]:
    """``__all__``, or the public classes and functions defined in the module itself."""
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if n != "__version__"]
    return [n for n, obj in vars(module).items()
            if not n.startswith("_") and getattr(obj, "__module__", None) == module.__name__ and callable(obj)]


def test_api_reference_builds_without_warnings_and_covers_the_public_api(tmp_path):
    out = tmp_path / "html"
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-j", "1", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, f"sphinx-build -W failed:\n{build.stderr[-6000:]}"

    # the key objects have their entries, on their subpackage's page
    for page, anchor in [("api/algorithms.html", "dpfair.algorithms.dpfermi.DPFERMIClassifier"),
                         ("api/privacy.html", "dpfair.privacy.budget.PrivacyBudget"),
                         ("api/fairness.html", "dpfair.fairness.group_table.group_metrics")]:
        html = (out / page).read_text()
        assert f'id="{anchor}"' in html, f"{anchor} has no entry in {page}"
    # dpfair's "name : description" parameter entries read as descriptions, not as types
    algorithms = (out / "api/algorithms.html").read_text()
    assert "weight of the ERMI regulariser" in algorithms

    # every page of the toctree was written; the guide's pages (Markdown, through MyST) as HTML with their code,
    # the API reference opening with the estimators, the CLI page the parser
    for page in set(PAGES.values()):
        assert (out / "api" / f"{page}.html").is_file(), page
    for page in (DOCS / "guide").iterdir():
        assert (out / "guide" / f"{page.stem}.html").is_file(), page.name
    python = (out / "guide" / "python.html").read_text()
    assert "fit_dpfermi_grid" in python and "privacy_spent_" in python
    assert 'href="guide/methods.html"' in (out / "index.html").read_text()
    toc = (out / "index.html").read_text()
    assert toc.index("api/algorithms.html") < toc.index("api/privacy.html")
    first = algorithms.index("The estimators")
    assert first < algorithms.index('id="dpfair.algorithms.base.FairEstimator"'), "the estimators come first"
    cli = (out / "cli.html").read_text()
    for command in ("train", "audit", "certify", "methods", "info", "predict", "datasets", "accountant"):
        assert f"usage: dpfair {command}" in cli, command

    # every public name is in the reference, under the path users import from or where it is defined
    documented = _documented_objects(out / "objects.inv")
    missing = []
    for package in PAGES:
        module = importlib.import_module(package)
        for name in _public_names(module):
            obj = getattr(module, name)
            if hasattr(obj, "__qualname__"):
                paths = {f"{package}.{name}", f"{obj.__module__}.{obj.__qualname__}"}
            else:  # a constant: documented in the package or in one of its modules (``#:`` comment)
                paths = {d for d in documented if d.startswith(f"{package}.") and d.endswith(f".{name}")}
            if not paths & documented:
                missing.append(f"{package}.{name}")
    assert not missing, f"public names missing from the API reference (add them to docs/api/): {missing}"
