"""Estimators: one module per method, each a scikit-learn style classifier.

``METHODS`` maps the CLI's ``--method`` names to estimator classes; later
methods register here.
"""

from dpfair.algorithms.base import FairEstimator, TorchClassifier, load_estimator, poisson_batches
from dpfair.algorithms.dpfermi import DPFERMIClassifier
from dpfair.algorithms.dpsgd import DPSGDClassifier
from dpfair.algorithms.erm import ERMClassifier

METHODS = {
    "erm": ERMClassifier,
    "dp-sgd": DPSGDClassifier,
    "dp-fermi": DPFERMIClassifier,
}

ESTIMATORS = {cls.__name__: cls for cls in METHODS.values()}

__all__ = ["DPFERMIClassifier", "DPSGDClassifier", "ERMClassifier", "ESTIMATORS", "FairEstimator", "METHODS", "TorchClassifier",
           "load_estimator", "poisson_batches"]
