"""The model files' registry (issue 29: "persistence gets a registry the algorithms fill"): dpfair.model_files
imports no estimator; each estimator of the method table, each clipping rule and dpfair's fairlearn moment register
as their classes are made; dpfair.persistence, above the estimators, reads any dpfair model file in a fresh process.
"""

import subprocess
import sys

import numpy as np
import pytest

from dpfair import model_files
from dpfair.algorithms import ESTIMATORS, ERMClassifier, FairEstimator
from dpfair.algorithms.clipping import CLIPPING_RULES
from dpfair.algorithms.private_demographics import CorrectedParity
from dpfair.persistence import save_estimator


def _data():
    return np.random.default_rng(0).normal(size=(40, 2)), np.arange(40) % 2


def _fresh(code: str) -> subprocess.CompletedProcess:
    """``code`` run by a new interpreter: nothing of dpfair imported before it."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_the_registry_holds_the_method_table_and_what_estimators_hold():
    held = model_files.registered()
    assert held["estimators"] == dict(ESTIMATORS)  # the allow-list of estimators is the method table
    assert held["dataclasses"] == {cls.__name__: cls for cls in CLIPPING_RULES.values()}
    assert held["moments"] == {"dpfair.algorithms.private_demographics.CorrectedParity": CorrectedParity}


def test_a_users_subclass_is_not_registered(tmp_path):
    class Mine(ERMClassifier):
        pass

    assert "Mine" not in model_files.registered()["estimators"]
    with pytest.raises(ValueError, match="saves dpfair's estimators"):
        save_estimator(Mine().fit(*_data()), tmp_path / "mine.pt")


def test_a_name_is_registered_for_one_class_only():
    class ERMClassifier(FairEstimator):  # another class under a name the registry holds
        pass

    with pytest.raises(ValueError, match="registered for model files as dpfair.algorithms.erm.ERMClassifier"):
        model_files.register_estimator(ERMClassifier)
    with pytest.raises(TypeError, match="takes a dataclass"):
        model_files.register_dataclass(type("NotADataclass", (), {}))
    assert model_files.registered()["estimators"] == dict(ESTIMATORS)


def test_model_files_imports_no_estimator_and_persistence_reads_a_file_in_a_fresh_process(tmp_path):
    path = tmp_path / "m.pt"
    ERMClassifier().fit(*_data()).save(path)
    alone = _fresh("import sys, dpfair.model_files as m; "
                   "print(sorted(k for k in sys.modules if k.startswith('dpfair.algorithms')), m.registered())")
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert alone.stdout.strip() == "[] {'estimators': {}, 'dataclasses': {}, 'moments': {}}"
    loaded = _fresh(f"from dpfair.persistence import load_estimator; print(type(load_estimator({str(path)!r})))")
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "<class 'dpfair.algorithms.erm.ERMClassifier'>"


def test_importing_model_files_loads_the_registry_and_no_torch():
    """The package's format modules (container, encoding, decoding, loading) load on first use of their names, so
    that the estimators' import of the registry costs nothing."""
    run = _fresh("import sys, dpfair.model_files as m; print('torch' in sys.modules, sorted(k for k in sys.modules "
                 "if k.startswith('dpfair.model_files.'))); print(m.FORMAT, m.VERSION, 'torch' in sys.modules)")
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:2] == ["False ['dpfair.model_files.errors', 'dpfair.model_files.registry']",
                                          "dpfair-estimator 2 True"]
