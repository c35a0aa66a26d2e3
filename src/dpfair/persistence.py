"""Safe model files: a fitted estimator as tensors plus JSON, read back without running any code.

A model file is one ``torch.save`` archive (zip, pickle protocol 2) holding only::

    {"format": "dpfair-estimator", "version": 1,
     "meta": "<JSON text>",                  # the estimator, described below
     "tensors": {"t0": tensor, "t1": ...}}   # every array and weight, by key

and :func:`load_estimator` reads it back in two locked steps. First the
archive's pickle stream is *scanned* (never run): it may name only the handful
of torch functions that rebuild a tensor from its bytes (and the storage and
dtype names they take); anything else — a ``__reduce__`` payload, a numpy or
scikit-learn object, a non-zip legacy pickle — is refused before unpickling
starts. Then ``torch.load(weights_only=True)`` reads it (torch's restricted
unpickler: a second lock), and the structure above is checked.

The JSON ``meta`` holds the estimator as a tree of tagged values. Only classes
on allow-lists can appear in it and be rebuilt:

- the estimator itself: a class of ``dpfair.algorithms.ESTIMATORS`` (each
  registers with :mod:`dpfair.model_files` as its class is made), rebuilt by
  its constructor from ``get_params()``, then given its **public fitted
  attributes** (names ending in ``_``, not starting with ``_``). Attributes
  starting with ``_`` (secret generators, pre-release private values, caches)
  are never written; a random generator among the public attributes is a bug
  and refused at save time;
- JSON values, tuples, dicts (any keys), numpy arrays and torch tensors (→
  tensors; string and object arrays → JSON lists), numpy scalars, the enums
  :class:`~dpfair.privacy.PrivacyUnit` and ``dp_accounting.NeighboringRelation``;
- the privacy ledger and plan (dpfair dataclasses ``PrivacyLedger``,
  ``LedgerEntry``, ``PrivacyPlan``, ``Part``), whose dp_accounting events are
  trees of ``{"type": <event class>, fields}`` rebuilt from an allow-list of
  dp_accounting event classes;
- torch modules: one built by :func:`dpfair.nn.make_model` is stored as the
  call that rebuilds it (name, ``n_features``, ``n_classes``, ``model_kwargs``)
  plus its ``state_dict`` — checked at save time by rebuilding it. A
  user-defined module cannot be stored as code: its ``state_dict`` is saved and
  :func:`load_estimator` needs ``model=<a module of the same architecture>``;
- scikit-learn / fairlearn objects, by an explicit encoding (constructor
  parameters + fitted attributes) for a short allow-list of classes:
  ``LogisticRegression``, ``LinearSVC``, ``GaussianNB``, ``DummyClassifier``,
  ``LinearDiscriminantAnalysis``; fairlearn's ``ExponentiatedGradient`` (its
  loaded constraint object, which holds the training data, is not saved —
  only ``fit`` uses it), ``ThresholdOptimizer`` (its trade-off curves, plotting
  state derived from the training data, are not saved), their moments,
  threshold rules and pandas containers. An object of any other class makes
  :func:`save_estimator` fail with the path of the attribute: nothing a model
  needs is dropped silently.
- a scikit-learn ``Pipeline`` whose last step is a dpfair estimator and whose
  other steps are allow-listed transformers (``StandardScaler``,
  ``MinMaxScaler``, ``MaxAbsScaler``, ``RobustScaler``) or ``"passthrough"``:
  stored as its steps, each encoded as above, and read back as a ``Pipeline``.
  A transformer's fitted statistics (means, ranges, row counts) are computed
  from the rows it was fitted on and published by the file; saving warns
  (:class:`~dpfair.exceptions.PrivacyLeakWarning`) when the estimator's ε covers
  those rows (a private method under the record unit) and so does not cover them.

Why an explicit encoding rather than skops: no new dependency, the allow-list
is exactly what dpfair's estimators hold, the training data that fairlearn
keeps inside its fitted objects stays out of the file, and a file can be
audited by reading its JSON.

Models are loaded on the CPU (``device_`` reads ``cpu``); move ``model_``
with ``.to(...)`` if needed.

The format itself (encoder, scan, decoder, allow-lists) is :mod:`dpfair.model_files`,
below the estimators so that they can save themselves while importing none of
them; this module is its public face, above the estimators, so that it reads any
dpfair model file in a process that has not imported the estimator yet.
"""

from __future__ import annotations

from dpfair import model_files
from dpfair.model_files import FORMAT, VERSION, library_versions, load_provenance

__all__ = ["FORMAT", "VERSION", "library_versions", "load_estimator", "load_provenance", "save_estimator"]


def save_estimator(est, path, *, provenance: dict | None = None) -> None:
    """Write a fitted dpfair estimator to ``path`` as tensors plus JSON (see the module docstring).

    Saves the class name, ``get_params()`` and the public fitted attributes; never an attribute starting
    with ``_``. Raises ``ValueError`` naming the attribute when something cannot be saved safely.
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
