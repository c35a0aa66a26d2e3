"""The file container: a safetensors file (an 8-byte length, a JSON header, raw little-endian buffers) whose
metadata holds the format name, its version and the estimator's JSON tree, plus, as one ``uint8`` tensor, the
scikit-learn part (a skops archive).

Contract: :func:`write` makes the bytes and writes a path whole or not at all; :func:`read_file` returns the
tensors and the JSON metadata after checking the format, the version and the complex tensors;
:func:`read_sklearn_part` returns the scikit-learn part's objects.

Safety: safetensors parses only JSON and buffers (no pickle; a zip or torch archive is refused before parsing);
skops reads its part with an explicit ``trusted`` list of classes, auditing every type the part names before it
builds any and building objects without unpickling, after the part's declared inflated size is bounded; what it
returns is checked against the allow-list of :mod:`dpfair.model_files.registry`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import zipfile

import torch

from dpfair.model_files.errors import LoadError, expect
from dpfair.model_files.registry import is_moment, named, skops_trusted, sklearn_classes

FORMAT = "dpfair-estimator"
VERSION = 2

__all__ = ["FORMAT", "INFLATE_RATIO", "INFLATE_SLACK", "SKOPS_KEY", "VERSION", "is_path", "read_file",
           "read_sklearn_part", "write"]

#: The safetensors entry holding the scikit-learn part (a skops archive, as bytes).
SKOPS_KEY = "sklearn"


# ==================================================================================== writing
def write(path, tensors: dict, sklearn: list, content: dict) -> None:
    """A model file of ``tensors`` (name: CPU tensor), the scikit-learn part ``sklearn`` (objects, saved by skops
    when there are any) and the JSON metadata ``{"format": FORMAT, "version": VERSION, **content}``, to ``path`` (a
    path, written whole or not at all, or a binary file object)."""
    import safetensors.torch

    tensors = dict(tensors)
    if sklearn:  # skops is imported only for a model that holds scikit-learn objects
        import skops.io

        part = skops.io.dumps(sklearn, compression=zipfile.ZIP_DEFLATED, compresslevel=1)
        tensors[SKOPS_KEY] = torch.frombuffer(bytearray(part), dtype=torch.uint8)
    meta = {"format": FORMAT, "version": VERSION, **content}
    data = safetensors.torch.save(tensors, metadata={"format": FORMAT, "version": str(VERSION),
                                                     "meta": json.dumps(meta, allow_nan=False)})
    if is_path(path):
        _write_file(os.fspath(path), data)
    else:
        path.write(data)


def _write_file(path: str, data: bytes) -> None:
    """``data`` to ``path`` whole or not at all: a temporary file beside it, renamed over it once written."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".dpfair-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_path(path) -> bool:
    """Whether ``path`` names a file (rather than being a binary file object)."""
    return isinstance(path, (str, os.PathLike))


# ==================================================================================== reading
#: What to do with a file this dpfair cannot read.
_FIX = ("Only model files written by this dpfair's save_estimator / FairEstimator.save can be loaded; refit the "
        "model with this dpfair and save it again")


def read_file(path, where: str) -> tuple[dict, dict]:
    """The tensors of a model file and its JSON metadata, both checked; nothing in the file is run."""
    import safetensors.torch

    if is_path(path):
        with open(path, "rb") as f:
            raw = f.read()
    else:
        raw = path.read()
    if not isinstance(raw, bytes):
        raise LoadError(f"{where} must be a path or a binary file object")
    if raw[:4] == b"PK\x03\x04":
        raise LoadError(f"{where} is a zip archive, not a dpfair model file of format version {VERSION} "
                        "(safetensors + JSON): a model saved by an older dpfair (format version 1, a torch "
                        f"archive) or another tool's file. {_FIX}")
    try:
        tensors = safetensors.torch.load(raw)
        header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    except Exception as exc:  # noqa: BLE001 - safetensors' refusals: bad header, bad offsets, truncated buffers
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise LoadError(f"{where} is not a dpfair model file (not a valid safetensors file: {detail}; a pickle is "
                        f"never unpickled, since that can run code). {_FIX}") from None
    info = header.get("__metadata__") if type(header) is dict else None
    if type(info) is not dict or info.get("format") != FORMAT:
        raise LoadError(f"{where} is not a dpfair model file (no 'format': {FORMAT!r} entry in its metadata)")
    version = info.get("version")
    if type(version) is not str or not version.isdigit():
        raise LoadError(f"{where} has no valid format version")
    if int(version) != VERSION:
        newer = int(version) > VERSION
        raise LoadError(f"{where} uses dpfair model format version {version}; this dpfair reads version "
                        f"{VERSION}. " + ("Upgrade dpfair to load it." if newer else _FIX))
    try:
        meta = json.loads(info.get("meta", ""))
    except (ValueError, RecursionError):
        raise LoadError(f"{where} is malformed: its metadata is not valid JSON") from None
    expect(type(meta) is dict and meta.get("format") == FORMAT and meta.get("version") == VERSION
           and "estimator" in meta, f"{where} is malformed: its metadata has no estimator")
    complex_keys = meta.get("complex", [])
    expect(type(complex_keys) is list and all(type(k) is str and k in tensors and k != SKOPS_KEY
                                              and tensors[k].dtype == torch.float64 and tensors[k].dim()
                                              and tensors[k].shape[-1] == 2 for k in complex_keys),
           f"{where} is malformed: its complex tensors are not pairs of float64")
    for k in complex_keys:
        tensors[k] = torch.view_as_complex(tensors[k])
    return tensors, meta


#: The most a file's scikit-learn part may inflate to: its members' declared sizes, summed, at most this many times
#: its compressed bytes plus :data:`INFLATE_SLACK` (a saved part deflates about five-fold).
INFLATE_RATIO, INFLATE_SLACK = 100, 16 << 20


def _check_inflated_size(data: bytes, where: str) -> None:
    """Refuse a scikit-learn part whose zip members declare more bytes than :data:`INFLATE_RATIO` allows, before
    anything is inflated: memory stays bounded (Python's zip reader stops every member at its declared size)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            declared = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise LoadError(f"{where}: its scikit-learn part is malformed ({type(exc).__name__})") from None
    if declared > INFLATE_RATIO * len(data) + INFLATE_SLACK:
        raise LoadError(f"{where}: its scikit-learn part would inflate {len(data):,} bytes to {declared:,}, more "
                        f"than {INFLATE_RATIO}x; it is refused unread (a damaged or crafted file): save the model "
                        "again with dpfair")


def read_sklearn_part(blob, where: str) -> list:
    import skops.io
    from skops.io.exceptions import UntrustedTypesFoundException

    expect(isinstance(blob, torch.Tensor) and blob.dtype == torch.uint8 and blob.dim() == 1,
           f"{where} is malformed: it refers to a scikit-learn part it does not hold")
    data, trusted = blob.numpy().tobytes(), skops_trusted()
    _check_inflated_size(data, where)
    try:
        objects = skops.io.loads(data, trusted=trusted)
    except UntrustedTypesFoundException:
        names = {f"{c.__module__}.{c.__qualname__}" for c in trusted}
        untrusted = [t for t in skops.io.get_untrusted_types(data=data) if t not in names]  # reads the schema only
        raise LoadError(f"{where}: its scikit-learn part names types dpfair does not trust ({', '.join(untrusted)}"
                        "); it is refused, and none of them was built") from None
    except Exception as exc:  # noqa: BLE001 - a malformed skops archive
        raise LoadError(f"{where}: its scikit-learn part is malformed ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:200] if str(exc) else ''})") from None
    expect(type(objects) is list, f"{where}: its scikit-learn part is malformed")
    allowed = sklearn_classes()
    for i, obj in enumerate(objects):
        expect(named(obj, allowed) is not None, f"{where}: its scikit-learn part holds a "
               f"{type(obj).__module__}.{type(obj).__qualname__}, which is not on dpfair's allow-list")
        expect(not (is_moment(obj) and getattr(obj, "data_loaded", False)),
               f"{where}: a moment loaded with data is not allowed")
    return objects
