"""Safe model files: a fitted estimator as tensors plus JSON, read back without running any code.

A model file (format version 2) is one `safetensors <https://huggingface.co/docs/safetensors>`_ file::

    header metadata {"format": "dpfair-estimator", "version": "2",
                     "meta": "<JSON text>"}   # the estimator, described below
    tensors         "t0", "t1", ...           # every array and weight, by key
                    "sklearn" (uint8)         # the scikit-learn part: a skops archive, if the estimator holds one

safetensors is a JSON header followed by raw little-endian buffers: reading it parses JSON and copies bytes, and
there is no pickle anywhere in the file. :func:`load_estimator` checks the header (format, version), rebuilds the
JSON tree with an allow-list decoder, and reads the scikit-learn part, if any, with ``skops.io.loads``.

The JSON ``meta`` holds the estimator as a tree of tagged values. Only classes on allow-lists can appear in it and
be rebuilt:

- the estimator itself: a class of ``dpfair.algorithms.ESTIMATORS`` (each registers with :mod:`dpfair.model_files`
  as its class is made), rebuilt by its constructor from ``get_params()``, then given its **public fitted
  attributes** (names ending in ``_``, not starting with ``_``). Attributes starting with ``_`` (secret
  generators, pre-release private values, caches) are never written; a random generator among the public
  attributes is a bug and refused at save time;
- JSON values, tuples, dicts (any keys), numpy arrays and torch tensors (→ tensors; string and object arrays →
  JSON lists, which safetensors cannot hold), numpy scalars, pandas indexes, Series and DataFrames, the enums
  :class:`~dpfair.privacy.PrivacyUnit` and ``dp_accounting.NeighboringRelation``;
- the privacy ledger and plan (dpfair dataclasses ``PrivacyLedger``, ``LedgerEntry``, ``PrivacyPlan``, ``Part``),
  whose dp_accounting events are trees of ``{"type": <event class>, fields}`` rebuilt from an allow-list of
  dp_accounting event classes;
- torch modules: one built by :func:`dpfair.nn.make_model` is stored as the call that rebuilds it (name,
  ``n_features``, ``n_classes``, ``model_kwargs``) plus its ``state_dict`` — checked at save time by rebuilding it.
  A user-defined module cannot be stored as code: its ``state_dict`` is saved and :func:`load_estimator` needs
  ``model=<a module of the same architecture>``;
- meta-estimators, by the same rule as dpfair's estimators (constructor parameters + public fitted attributes):
  fairlearn's ``ExponentiatedGradient`` (without ``constraints_``, its moment loaded with the training rows, which
  only ``fit`` reads; its private hypotheses are rebuilt from ``predictors_``), ``ThresholdOptimizer`` (its
  trade-off curves, plotting state computed from the training rows, are private and so not saved), and a
  scikit-learn ``Pipeline`` whose last step is a dpfair estimator and whose other steps are ``StandardScaler``,
  ``MinMaxScaler``, ``MaxAbsScaler``, ``RobustScaler`` or ``"passthrough"``. A transformer's fitted statistics
  are computed from the rows it was fitted on and published by the file; saving warns
  (:class:`~dpfair.exceptions.PrivacyLeakWarning`) when the estimator's ε covers those rows (a private method
  under the record unit) and so does not cover them.
- the scikit-learn part: the scikit-learn and fairlearn objects themselves — ``LogisticRegression``,
  ``LinearSVC``, ``GaussianNB``, ``DummyClassifier``, ``LinearDiscriminantAnalysis``, the four scalers,
  fairlearn's moments (unloaded only) and dpfair's registered ones, and ThresholdOptimizer's fitted rule — are
  written with `skops <https://skops.readthedocs.io>`_ into one archive, referenced from the JSON by position.
  skops writes each object's state as JSON and its arrays as ``.npy`` files; ``skops.io.loads`` audits every
  type named in the archive before it builds any, against skops' defaults (scikit-learn's estimators, numpy and
  scipy types) and an explicit ``trusted`` list of classes (never ``trusted=True``), and builds objects without
  unpickling. What it returns is then checked against dpfair's own allow-list. skops does not hold the pandas
  containers fairlearn's ExponentiatedGradient keeps (an ``Index`` or ``DataFrame`` cannot be written; a
  ``Series`` would need trusting pandas' internal block managers), hence the JSON encoding for those.

An object of any other class makes :func:`save_estimator` fail with the path of the attribute: nothing a model
needs is dropped silently. Files of format version 1 (a torch zip archive) are refused with one line: refit the
model with this dpfair.

Models are loaded on the CPU (``device_`` reads ``cpu``); move ``model_`` with ``.to(...)`` if needed.

The format itself (encoder, decoder, allow-lists) is :mod:`dpfair.model_files`, below the estimators so that they
can save themselves while importing none of them; this module is its public face, above the estimators, so that it
reads any dpfair model file in a process that has not imported the estimator yet.
"""

from __future__ import annotations

from dpfair import model_files
from dpfair.model_files import FORMAT, VERSION, library_versions, load_provenance

__all__ = ["FORMAT", "VERSION", "library_versions", "load_estimator", "load_provenance", "save_estimator"]


def save_estimator(est, path, *, provenance: dict | None = None) -> None:
    """Write a fitted dpfair estimator to ``path`` as tensors plus JSON (see the module docstring).

    Saves the class name, ``get_params()`` and the public fitted attributes; never an attribute starting
    with ``_``. Raises ``ValueError`` naming the attribute when something cannot be saved safely.
    A path is written whole or not at all (a temporary file beside it, renamed over it).
    ``provenance``: JSON values saying what the model was trained on (``dpfair train`` writes the data set,
    its options, the sensitive attribute, the group names and the seed), read back by :func:`load_provenance`.
    It is published with the model: public facts only.
    """
    _dpfair_estimators()
    model_files.save_estimator(est, path, provenance=provenance)


def load_estimator(path, *, model=None):
    """Read an estimator written by :func:`save_estimator`; loading never runs code from the file.

    ``model``: for an estimator trained on a user-defined ``torch.nn.Module``, a module of the same
    architecture (its weights are replaced by the saved ones). Raises ``ValueError`` naming the file
    for anything that is not a dpfair model file of a version this dpfair reads.
    """
    _dpfair_estimators()
    return model_files.load_estimator(path, model=model)


def _dpfair_estimators() -> dict[str, type]:
    """Every dpfair estimator class, imported: each has registered with :mod:`dpfair.model_files` as it was made."""
    from dpfair.algorithms import ESTIMATORS

    return ESTIMATORS
