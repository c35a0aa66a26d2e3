"""dpfair's import contracts hold (issue 29, "Layering enforced in CI"): its layers, privacy below every estimator,
and no import cycles, checked by import-linter on every import, those inside functions included.

The contracts are the repository's ``.importlinter`` (``lint-imports`` in the repository root prints them). Each check
runs import-linter in a subprocess on a dpfair source tree (grimp parses it; nothing of dpfair is imported), about a
second each. The planted checks run it on a copy of ``src/dpfair`` with one violation added, to show that the
contracts catch what they are meant to, an import inside a function first among them.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is not installed (it comes with the test extra: "
                                           "pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CONFIG = ROOT / ".importlinter"
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _lint(source_root: Path, cwd: Path) -> subprocess.CompletedProcess:
    """import-linter's check of :data:`CONFIG` against the ``dpfair`` package under ``source_root``."""
    env = {**os.environ, "PYTHONPATH": str(source_root), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-c", LINT, "--config", str(CONFIG), "--no-cache"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_dpfair_keeps_its_import_contracts(tmp_path):
    run = _lint(SRC, tmp_path)
    assert run.returncode == 0, (f"an import contract of .importlinter is broken:\n{run.stdout[-6000:]}"
                                 f"{run.stderr[-2000:]}")
    assert "3 kept, 0 broken" in run.stdout


def _plant(tmp_path: Path, module: str, code: str) -> Path:
    """A copy of dpfair's Python sources with ``code`` appended to ``module`` (a path under ``src/dpfair``, created
    if missing); returns the copy's source root."""
    root = tmp_path / "src"
    shutil.copytree(SRC / "dpfair", root / "dpfair",
                    ignore=lambda folder, names: [n for n in names
                                                  if not n.endswith(".py") and not (Path(folder) / n).is_dir()
                                                  or n == "__pycache__"])
    target = root / "dpfair" / module
    target.write_text((target.read_text() if target.exists() else "") + "\n\n" + code)
    return root


@pytest.mark.parametrize("module, code, expected", [
    # the issue's own finding: the budget importing an estimator class, inside a function
    ("privacy/budget.py",
     "def _planted(est):\n    from dpfair.algorithms.base import FairEstimator\n\n"
     "    return isinstance(est, FairEstimator)\n",
     ["dpfair.privacy is not allowed to import dpfair.algorithms", "dpfair.privacy.budget -> dpfair.algorithms.base"]),
    # a lazy import that closes a loop between two modules of one package
    ("experiments/workers.py",
     "def _planted():\n    from dpfair.experiments.backends import get_backend\n\n    return get_backend\n",
     ["No cycles are allowed in dpfair.experiments"]),
    # an import under TYPE_CHECKING counts too
    ("nn/models.py",
     "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from dpfair.selection import PrivateSearch\n",
     ["dpfair.nn is not allowed to import dpfair.selection"]),
    # a new top-level module has no layer until .importlinter gives it one
    ("planted.py", "VALUE = 1\n", ["dpfair.planted"]),
], ids=["import inside a function", "lazy import closing a cycle", "TYPE_CHECKING import", "module without a layer"])
def test_the_contracts_catch_a_planted_violation(tmp_path, module, code, expected):
    run = _lint(_plant(tmp_path, module, code), tmp_path)
    assert run.returncode != 0, f"the planted violation in {module} went unnoticed:\n{run.stdout[-3000:]}"
    for text in expected:
        assert text in run.stdout, f"{text!r} not in the report:\n{run.stdout[-3000:]}"


def test_the_architecture_picture_names_every_module_of_every_layer():
    """docs/architecture.md's picture is drawn from .importlinter (scripts/architecture_figure.py): a layer or
    module added to the contract without redrawing it fails here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("architecture_figure", ROOT / "scripts" / "architecture_figure.py")
    figure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figure)
    rows = figure.layers(CONFIG)
    assert ["cli"] in rows and ["privacy"] in rows and len(rows) >= 6
    svg = figure.OUT.read_text()
    missing = [name for row in rows for name in row if f">{name}" not in svg]
    assert not missing, f"redraw it: python scripts/architecture_figure.py (missing {missing})"
    assert "figures/layers.svg" in (ROOT / "docs" / "architecture.md").read_text()


def test_the_top_level_shows_the_layers_and_no_module_is_too_long():
    """Issue 43: a folder per idea at the top (at most 8 modules beside the folders), no source file over 800
    lines, and the fairness notions import no privacy module (the third contract of .importlinter)."""
    src = ROOT / "src" / "dpfair"
    top = sorted(p.name for p in src.glob("*.py"))
    assert len(top) <= 8, f"{len(top)} modules at the top of src/dpfair, at most 8: {top}"
    long = {str(p.relative_to(src)): n for p in src.rglob("*.py") if (n := len(p.read_text().splitlines())) > 800}
    assert not long, f"split by idea: {long}"
    assert "source_modules =\n    dpfair.fairness\nforbidden_modules =\n    dpfair.privacy" in CONFIG.read_text()
