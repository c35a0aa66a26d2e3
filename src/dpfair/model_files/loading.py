"""Loading: :func:`load_estimator` and :func:`load_provenance`, a file read, checked and rebuilt, every failure
one ``ValueError`` naming the file.

Contract: the file is read by :func:`dpfair.model_files.container.read_file` (format, version, metadata checked),
its estimator (or Pipeline ending in one) rebuilt by :mod:`dpfair.model_files.decoding`; only classes registered in
this process can be named, so :func:`dpfair.persistence.load_estimator` imports every dpfair estimator first.

Safety: this module only routes the file to the container's reader and the decoder, whose module docstrings give
the argument; the scikit-learn part is read by skops once, when a value first refers to it.
"""

from __future__ import annotations

import contextlib
import os

import torch

from dpfair.model_files.container import SKOPS_KEY, is_path, read_file, read_sklearn_part
from dpfair.model_files.decoding import decode_estimator, decode_node
from dpfair.model_files.errors import LoadError, expect
from dpfair.model_files.registry import estimator_classes

__all__ = ["load_estimator", "load_provenance"]


class _Loader:
    """The :class:`~dpfair.model_files.decoding.Source` of one file: its checked tensors, the caller's
    ``model=``, and its scikit-learn part, read when first needed."""

    def __init__(self, tensors: dict, model, where: str):
        self.tensors = tensors
        self.model = model
        self.where = where
        self._sklearn = None

    def tensor(self, key) -> torch.Tensor:
        if type(key) is not str or key not in self.tensors or key == SKOPS_KEY:
            raise LoadError(f"refers to a missing tensor {key!r}")
        return self.tensors[key]

    def sklearn(self, index, at: str):
        """Object ``index`` of the scikit-learn part, read (once) by skops with the explicit trusted list."""
        if self._sklearn is None:
            self._sklearn = read_sklearn_part(self.tensors.get(SKOPS_KEY), self.where)
        expect(type(index) is int and 0 <= index < len(self._sklearn), f"{at}: missing scikit-learn object {index!r}")
        return self._sklearn[index]


def load_estimator(path, *, model=None):
    """Read a model file whose classes are registered in this process: what :func:`dpfair.persistence.load_estimator`
    (the public function, which documents it and loads every dpfair estimator first) does."""
    where = os.fspath(path) if is_path(path) else repr(path)
    with _load_errors(where):
        tensors, meta = read_file(path, where)
        loader = _Loader(tensors, model, where)
        node = meta["estimator"]
        if type(node) is dict and set(node) == {"pipeline"}:
            return _decode_pipeline(node["pipeline"], loader)
        return decode_estimator(node, "estimator", loader)


def _decode_pipeline(node, ld: _Loader):
    """A saved Pipeline: only an allow-listed ``Pipeline`` whose last step is a dpfair estimator."""
    from sklearn.pipeline import Pipeline

    expect(type(node) is dict and set(node) == {"__object__"} and type(node["__object__"]) is list
           and node["__object__"][:1] == ["sklearn.pipeline.Pipeline"], "Pipeline: malformed pipeline")
    pipe = decode_node(node, "Pipeline", ld)
    expect(type(pipe) is Pipeline and bool(pipe.steps) and type(pipe.steps[-1][1]) in estimator_classes().values(),
           "Pipeline: its last step is not a dpfair estimator")
    return pipe


def load_provenance(path) -> dict:
    """What a model file says it was trained on (``save_estimator``'s ``provenance``; ``{}`` if none).

    The file is checked as :func:`load_estimator` checks it; nothing in it is run.
    """
    where = os.fspath(path) if is_path(path) else repr(path)
    with _load_errors(where):
        provenance = read_file(path, where)[1].get("provenance", {})
        expect(type(provenance) is dict, f"{where} is malformed: its provenance is not a JSON object")
        return provenance


@contextlib.contextmanager
def _load_errors(where: str):
    """Every failure to read a model file becomes one ``ValueError`` naming the file (missing files stay OSError)."""
    try:
        yield
    except LoadError as exc:
        msg = str(exc)
        raise ValueError(msg if where in msg else f"{where}: {msg}") from None
    except RecursionError:
        raise ValueError(f"{where} is malformed: its metadata is nested too deeply") from None
    except OSError:  # missing or unreadable file: not a question of format
        raise
    except Exception as exc:  # noqa: BLE001 - anything else a crafted file provokes while being rebuilt
        raise ValueError(f"{where} is malformed and was refused ({type(exc).__name__}: {exc})") from None
