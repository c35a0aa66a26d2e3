"""The model-file format behind :mod:`dpfair.persistence`: the registry and allow-lists of what a file may hold
(:mod:`~dpfair.model_files.registry`), the safetensors container (:mod:`~dpfair.model_files.container`), saving
(:mod:`~dpfair.model_files.encoding`), and loading (:mod:`~dpfair.model_files.decoding`,
:mod:`~dpfair.model_files.loading`).

:mod:`dpfair.persistence` describes the format and is the public API. This package sits below the estimators so
that they can save themselves (``FairEstimator.save``) while it imports none of them: each estimator class, and each
dpfair class that an estimator holds, registers here as its class is made. A file can only name a class registered
in the process reading it; :func:`dpfair.persistence.load_estimator` and :func:`dpfair.algorithms.load_estimator`
load every dpfair estimator first.

Why loading runs no code from the file: safetensors parses it (a JSON header and raw buffers, no pickle); the JSON
tree is rebuilt by :func:`~dpfair.model_files.decoding.decode_node`, which calls only the constructors of the
classes on the registry's allow-lists; the scikit-learn part is read by ``skops.io.loads`` with an explicit
``trusted`` list, and what it returns is checked against the same allow-list.

Importing the package loads the registry only (no torch); the other names load their module on first use.
"""

from __future__ import annotations

from dpfair.model_files.registry import register_dataclass, register_estimator, register_moment, registered
from dpfair.utils.lazy_exports import lazy_exports

__all__ = ["FORMAT", "VERSION", "library_versions", "load_estimator", "load_provenance", "register_dataclass",
           "register_estimator", "register_moment", "registered", "save_estimator"]

_LAZY = {
    "FORMAT": "dpfair.model_files.container", "VERSION": "dpfair.model_files.container",
    "INFLATE_RATIO": "dpfair.model_files.container", "INFLATE_SLACK": "dpfair.model_files.container",
    "library_versions": "dpfair.model_files.encoding", "save_estimator": "dpfair.model_files.encoding",
    "load_estimator": "dpfair.model_files.loading", "load_provenance": "dpfair.model_files.loading",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
