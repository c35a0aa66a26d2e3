"""Where dpfair keeps its on-disk caches: ``$DPFAIR_CACHE_DIR`` if set (an empty value turns the caches off), else
``~/.cache/dpfair``.

A module of its own that imports nothing of dpfair, so that a light command (``dpfair datasets``) finds the folder
without loading torch. Its users: the accounting cache (:mod:`dpfair.privacy.accounting_cache`), the data sets'
summaries (:func:`dpfair.datasets.dataset_info`) and the secret of a sweep's table keys
(:mod:`dpfair.experiments.spec`).
"""

from __future__ import annotations

import os
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
