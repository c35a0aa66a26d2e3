"""Where dpfair keeps its on-disk caches: ``$DPFAIR_CACHE_DIR`` if set (an empty value turns the caches off), else
``~/.cache/dpfair``.

Entries are JSON files named by the SHA-256 of their key, each holding its key (checked when read) and value
(:func:`read_entry`, :func:`write_entry`). A module of its own that imports nothing of dpfair, so that a light command (``dpfair datasets``) finds the folder
without loading torch. Its users: the accounting cache (:mod:`dpfair.privacy.accounting_cache`), the data sets'
summaries (:func:`dpfair.datasets.dataset_info`) and the secret of a sweep's table keys
(:mod:`dpfair.experiments.spec`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

#: The environment variable naming the cache folder ("" turns the on-disk caches off).
CACHE_ENV = "DPFAIR_CACHE_DIR"


def default_cache_dir() -> Path:
    """``~/.cache/dpfair``: the folder when ``$DPFAIR_CACHE_DIR`` is not set."""
    return Path.home() / ".cache" / "dpfair"


def cache_dir() -> Path | None:
    """The folder of the on-disk caches, or ``None`` when they are turned off (``DPFAIR_CACHE_DIR=""``)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen.strip() else None
    return default_cache_dir()


def _entry_path(kind: str, key: list) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    return folder / kind / f"{hashlib.sha256(json.dumps(key).encode()).hexdigest()}.json"


def read_entry(kind: str, key: list, field: str = "value"):
    """The value stored under ``key`` (a JSON-able list) in the cache's ``kind`` folder, or ``None``: the cache off,
    no entry, or an entry written for another key (a digest collision, a damaged file). ``field``: the entry's
    name for its value."""
    path = _entry_path(kind, key)
    if path is None:
        return None
    try:
        stored = json.loads(path.read_text())
        return stored[field] if stored["key"] == key else None
    except (OSError, ValueError, TypeError, KeyError):
        return None


def write_entry(kind: str, key: list, value, field: str = "value") -> None:
    """Store ``value`` (JSON-able) under ``key`` atomically (a temporary file renamed into place): a reader sees the
    old entry or the new one, never half of one. Nothing when the cache is off or cannot be written."""
    path = _entry_path(kind, key)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as out:
            out.write(json.dumps({"key": key, field: value}))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
