"""Estimators: one module per method, each a scikit-learn style classifier.

``METHODS`` maps the CLI's ``--method`` names to estimator classes.
"""

from dpfair.algorithms.base import FairEstimator, TorchClassifier, load_estimator
from dpfair.algorithms.clipping import (
    ClippingRule,
    DPSGDFClipping,
    FairDPClipping,
    FlatClipping,
    PerLayerClipping,
    QuantileClipping,
)
from dpfair.algorithms.dp_oracle import DPOracleClassifier
from dpfair.algorithms.dp_postprocess import DPPostProcessingClassifier
from dpfair.algorithms.dpfermi import DPFERMIClassifier
from dpfair.algorithms.dpfermi_sweep import fit_dpfermi_grid
from dpfair.algorithms.dpsgd import DPSGDClassifier
from dpfair.algorithms.erm import ERMClassifier
from dpfair.algorithms.fairlearn_wrappers import ReductionsClassifier, ThresholdClassifier
from dpfair.algorithms.output_perturbation import OutputPerturbationClassifier
from dpfair.algorithms.pfld import PFLDClassifier
from dpfair.algorithms.private_demographics import PrivateDemographicsClassifier

METHODS = {
    "dp-fermi": DPFERMIClassifier,
    "dp-sgd": DPSGDClassifier,
    "erm": ERMClassifier,
    "pf-ld": PFLDClassifier,
    "dp-postprocess": DPPostProcessingClassifier,
    "dp-oracle": DPOracleClassifier,
    "private-demographics": PrivateDemographicsClassifier,
    "output-perturbation": OutputPerturbationClassifier,
    "reductions": ReductionsClassifier,
    "threshold": ThresholdClassifier,
}

ESTIMATORS = {cls.__name__: cls for cls in METHODS.values()}

__all__ = [
    "ClippingRule", "DPSGDFClipping", "FairDPClipping", "FlatClipping", "PerLayerClipping", "QuantileClipping",
    "DPFERMIClassifier", "DPOracleClassifier", "DPPostProcessingClassifier", "DPSGDClassifier", "ERMClassifier",
    "ESTIMATORS", "FairEstimator", "METHODS", "OutputPerturbationClassifier", "PFLDClassifier",
    "PrivateDemographicsClassifier", "ReductionsClassifier", "ThresholdClassifier", "TorchClassifier",
    "fit_dpfermi_grid", "load_estimator",
]
