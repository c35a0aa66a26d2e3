"""An on-disk cache of the ε evaluations that noise calibration makes, so a repeated plan skips its search.

The disk layer of the one memo of accounting results (:mod:`dpfair.privacy.memo`), which alone reads and
writes it.

Calibrating σ (:mod:`dpfair.privacy.calibration`) evaluates ε of the planned event at a sequence of σ,
each a PLD composition (a few tens of milliseconds); the search is deterministic, so with every ε read
back from the cache it visits the same σ and returns exactly the same σ as an uncached search. Every
input is public: the planned event (mechanism, σ, sampling rate, number of releases — what the fitted
ledger publishes anyway), δ, the neighbouring relation and the accountant. Nothing derived from the data
is keyed on or stored.

An entry is valid for one dp_accounting version and one version of dpfair's accounting code (a digest
of the modules that compute ε is part of the key), so an upgrade or an edit misses instead of returning
a stale ε. Writes are atomic (a temporary file renamed into place), so concurrent processes never see a
partial entry; an unreadable, corrupt or mismatched entry is ignored (and rewritten). A cache that cannot
be written is skipped silently: it only saves time.

Where: ``$DPFAIR_CACHE_DIR`` if set (an empty value turns the cache off), else ``~/.cache/dpfair`` (the
default data home of :mod:`dpfair.datasets` too); entries live in its ``accounting/`` folder, one small
JSON file each, and may be deleted at any time.
"""

from __future__ import annotations

import hashlib
import math
from importlib import metadata
from pathlib import Path

from dpfair.utils.cache_folder import CACHE_ENV, cache_dir, read_entry, write_entry  # noqa: F401 (re-exported)

#: The cache's folder of accounting entries.
_KIND = "accounting"

#: The layout of an entry; bump it when the entry format changes.
FORMAT = 1

#: The modules whose code computes ε from an event (relative to the package): their source is part of every key.
_ACCOUNTING_MODULES = ("privacy/accounting.py", "privacy/subsampled_rdp.py", "utils/upstream.py")


def _code_version() -> str | None:
    """dp_accounting's version and a digest of dpfair's accounting code; ``None`` (no cache) if unreadable."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    try:
        for name in _ACCOUNTING_MODULES:
            digest.update((package / name).read_bytes())
        upstream = metadata.version("dp-accounting")
    except (OSError, metadata.PackageNotFoundError):
        return None
    return f"dp_accounting {upstream}; dpfair accounting {digest.hexdigest()[:16]}"


#: The versions every entry is keyed on, read once as the module loads (the code cannot change under a process).
CODE_VERSION = _code_version()


def _key(event_repr: str, delta: float, relation: str, accountant: str) -> list | None:
    """The key of an evaluation, or ``None`` when the accounting code cannot be read (no caching then)."""
    if CODE_VERSION is None:
        return None
    return [FORMAT, CODE_VERSION, event_repr, float(delta).hex(), relation, accountant]


def read_epsilon(event_repr: str, delta: float, relation: str, accountant: str) -> float | None:
    """The cached ε of this evaluation, or ``None`` (no cache, no entry, or an entry that does not check)."""
    key = _key(event_repr, delta, relation, accountant)
    stored = None if key is None else read_entry(_KIND, key, "epsilon")
    try:
        epsilon = float.fromhex(stored)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(epsilon) or epsilon < 0 else epsilon


def write_epsilon(event_repr: str, delta: float, relation: str, accountant: str, epsilon: float) -> None:
    """Store one evaluation, atomically; nothing when the cache is off or cannot be written."""
    key = _key(event_repr, delta, relation, accountant)
    if key is not None:
        write_entry(_KIND, key, float(epsilon).hex(), "epsilon")
