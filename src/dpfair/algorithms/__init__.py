"""Estimators: one module per method, each a scikit-learn style classifier.

``METHODS`` maps the CLI's ``--method`` names to estimator classes.

The names below load on first use (:pep:`562`), so that importing a light submodule (``dpfair.algorithms.catalog``,
which ``dpfair methods`` reads) does not import torch and scikit-learn with every estimator.
"""

from __future__ import annotations

from importlib import import_module

#: ``{--method name: (module, class)}``, in the order ``dpfair methods`` lists them.
_METHOD_HOMES = {
    "dp-fermi": ("dpfermi.estimator", "DPFERMIClassifier"),
    "dp-sgd": ("dpsgd", "DPSGDClassifier"),
    "erm": ("erm", "ERMClassifier"),
    "pf-ld": ("pfld", "PFLDClassifier"),
    "dp-postprocess": ("dp_postprocess", "DPPostProcessingClassifier"),
    "dp-oracle": ("dp_oracle", "DPOracleClassifier"),
    "private-demographics": ("private_demographics", "PrivateDemographicsClassifier"),
    "output-perturbation": ("output_perturbation", "OutputPerturbationClassifier"),
    "reductions": ("fairlearn_wrappers", "ReductionsClassifier"),
    "threshold": ("fairlearn_wrappers", "ThresholdClassifier"),
}

#: ``{public name: module}`` of every other name this package exports.
_HOMES = {
    **{cls: module for module, cls in _METHOD_HOMES.values()},
    **dict.fromkeys(("FairEstimator", "TorchClassifier", "load_estimator"), "base"),
    **dict.fromkeys(("ClippingRule", "DPSGDFClipping", "FairDPClipping", "FlatClipping", "PerLayerClipping",
                     "QuantileClipping"), "clipping"),
    "fit_dpfermi_grid": "dpfermi",
}


def __getattr__(name: str):
    if name == "METHODS":
        value = {method: __getattr__(cls) for method, (_, cls) in _METHOD_HOMES.items()}
    elif name == "ESTIMATORS":
        value = {cls.__name__: cls for cls in __getattr__("METHODS").values()}
    elif name in _HOMES:
        value = getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # loaded once: METHODS is one dict for everyone
    return value


def method_name(estimator) -> str | None:
    """The ``--method`` name of ``estimator``'s class (``estimator``: an estimator or a class), ``None`` for a class
    that no ``--method`` names (a user's subclass included). Imports no estimator."""
    cls = estimator if isinstance(estimator, type) else type(estimator)
    return next((method for method, (module, name) in _METHOD_HOMES.items()
                 if cls.__name__ == name and cls.__module__ == f"{__name__}.{module}"), None)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ClippingRule", "DPSGDFClipping", "FairDPClipping", "FlatClipping", "PerLayerClipping", "QuantileClipping",
    "DPFERMIClassifier", "DPOracleClassifier", "DPPostProcessingClassifier", "DPSGDClassifier", "ERMClassifier",
    "ESTIMATORS", "FairEstimator", "METHODS", "OutputPerturbationClassifier", "PFLDClassifier",
    "PrivateDemographicsClassifier", "ReductionsClassifier", "ThresholdClassifier", "TorchClassifier",
    "fit_dpfermi_grid", "load_estimator", "method_name",
]
