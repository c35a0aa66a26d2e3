"""The registry of data sets: :func:`load_dataset`, :func:`list_datasets` and :func:`dataset_info`."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np

from dpfair.datasets import _acs, _celeba, _mnist, _synthetic, _tabular
from dpfair.datasets._files import DataFile, is_available, locate
from dpfair.datasets._presets import load_preset, presets_of
from dpfair.utils.cache_folder import read_entry, write_entry
from dpfair.datasets.base import Dataset

COMMON = ("sensitive", "test_size", "random_state", "data_home", "path")


@dataclass(frozen=True)
class _Entry:
    loader: Callable[..., Dataset]
    files: tuple[DataFile, ...]  # files needed with the default options
    sensitive: tuple[str, ...]  # valid sensitive attribute names, the default first
    licence: str


_REGISTRY: dict[str, _Entry] = {
    "adult": _Entry(_tabular.load_adult, _tabular.ADULT_FILES, _tabular.ADULT_SENSITIVE, _tabular.CC_BY),
    "compas": _Entry(_tabular.load_compas, _tabular.COMPAS_FILES, ("race", "sex"),
                     "ProPublica public data (no licence file; research re-use with attribution)"),
    "german": _Entry(_tabular.load_german, _tabular.GERMAN_FILES, ("sex", "age"), _tabular.CC_BY),
    "credit": _Entry(_tabular.load_credit, _tabular.CREDIT_FILES, ("sex",), _tabular.CC_BY),
    "parkinsons": _Entry(_tabular.load_parkinsons, _tabular.PARKINSONS_FILES, ("sex",), _tabular.CC_BY),
    "bank": _Entry(_tabular.load_bank, (_tabular.BANK_FILES["kaggle"],), ("age",),
                   "CC BY 4.0 (derived from UCI Bank Marketing; Kaggle copy)"),
    "communities": _Entry(_tabular.load_communities, _tabular.COMMUNITIES_FILES, ("race",), _tabular.CC_BY),
    "dutch": _Entry(_tabular.load_dutch, _tabular.DUTCH_FILES, ("sex",),
                    "not stated (IPUMS-International census sample; research use only)"),
    "acs_income": _Entry(_acs.load_acs_income, _acs.ACS_FILES, tuple(_acs.ACS_GROUPS), _acs.ACS_LICENCE),
    "celeba": _Entry(_celeba.load_celeba, _celeba.CELEBA_FILES[:1], ("Male", "Young"),
                     "CelebA agreement: non-commercial research and educational use only"),
    "mnist": _Entry(_mnist.load_mnist, _mnist.MNIST_TEST_FILES, ("inverted", "class"),
                    "CC BY-SA 3.0 (as usually cited)"),
    "mnist-unbalanced": _Entry(_mnist.load_mnist_unbalanced, _mnist.MNIST_TEST_FILES, ("class",),
                               "CC BY-SA 3.0 (as usually cited)"),
    "synthetic": _Entry(_synthetic.load_synthetic, (), ("group",), "generated data (no licence needed)"),
}


def list_datasets() -> list[str]:
    """Names accepted by :func:`load_dataset`, sorted."""
    return sorted(_REGISTRY)


def _entry(name: str) -> _Entry:
    if name not in _REGISTRY:
        raise ValueError(f"unknown data set {name!r}; valid: {', '.join(list_datasets())}")
    return _REGISTRY[name]


#: The code of an unknown sensitive value in ``s_train`` after ``load_dataset(..., missing_sensitive=f)``.
MISSING_SENSITIVE = -1


def load_dataset(name: str, *, preset: str | None = None, sensitive: str | None = None,
                 test_size: float | None = None, random_state: int = 0, data_home=None, path=None,
                 missing_sensitive: float = 0.0, **options) -> Dataset:
    """Load the data set ``name`` (see :func:`list_datasets`), split and preprocessed.

    ``sensitive`` picks the sensitive attribute (``None``: the data set's default); ``test_size`` is the test
    fraction of a random split seeded by ``random_state`` and stratified by label × group (``None``: 0.25);
    ``data_home`` and ``path`` say where the raw files are (see :mod:`dpfair.datasets`).  Other keyword ``options``
    go to the data set's loader (e.g. ``original_split=True`` for adult, ``n_groups=3`` for bank,
    ``download=False`` for any file-based data set); an unknown option or sensitive attribute raises
    ``ValueError`` listing the valid ones.

    ``preset`` (e.g. ``"dp-fermi"``, ``"pf-ld"``, ``"fairdp"``, ``"jagielski"``, ``"mangold"``; see
    :func:`dataset_info`'s ``presets``) loads the data set as that paper's experiments do instead: its rows,
    features, encoding, label and groups, and its test fraction where the paper states one (then ``test_size``
    may be left out); the preset fixes the sensitive attribute and the loader options (only those it lists, such
    as bank's ``n_groups`` for PF-LD's M-Bank, and ``download``, are accepted).  An unknown preset, or one for
    another data set, raises ``ValueError`` naming the valid ones.

    ``missing_sensitive`` (a fraction in [0, 1)) hides the sensitive attribute of that share of the training rows
    (their ``s_train`` becomes :data:`MISSING_SENSITIVE`, -1), as in PF-LD's experiment with 60/40/20/0 % of
    the sensitive values missing (Tran et al. 2021, Sec. 8.5); the test part keeps every value, so evaluation is
    unchanged. Which rows lose it is public randomness seeded by ``random_state``, independent of the data.
    Only methods that accept unknown values train on it (PF-LD with ``missing_value=-1``).
    """
    if isinstance(missing_sensitive, bool) or not isinstance(missing_sensitive, (int, float)) \
            or not 0 <= missing_sensitive < 1:
        raise ValueError(f"missing_sensitive must be a fraction in [0, 1), got {missing_sensitive!r}")
    data = _load(name, preset, sensitive, test_size, random_state, data_home, path, options)
    if missing_sensitive:
        hidden = np.random.default_rng([random_state, 1]).permutation(len(data.s_train))
        s_train = data.s_train.copy()
        s_train[hidden[:round(missing_sensitive * len(s_train))]] = MISSING_SENSITIVE
        data = dataclasses.replace(data, s_train=s_train, description=data.description + (
            f" The sensitive value of {missing_sensitive:.0%} of the training rows is hidden (-1)."))
    return data


def _load(name, preset, sensitive, test_size, random_state, data_home, path, options) -> Dataset:
    entry = _entry(name)
    if preset is not None:
        return load_preset(name, preset, sensitive=sensitive, test_size=test_size, random_state=random_state,
                           data_home=data_home, path=path, options=options)
    params = inspect.signature(entry.loader).parameters
    kwargs: dict = {"test_size": 0.25 if test_size is None else test_size, "random_state": random_state}
    if sensitive is not None:
        if "sensitive" in params:  # the loader checks the name
            kwargs["sensitive"] = sensitive
        elif sensitive not in entry.sensitive:
            raise ValueError(
                f"unknown sensitive attribute {sensitive!r} for data set {name!r}; valid: {', '.join(entry.sensitive)}"
            )
    for key, value in (("data_home", data_home), ("path", path)):
        if value is not None:
            if key not in params:
                raise ValueError(f"data set {name!r} is generated and reads no files; do not pass {key}")
            kwargs[key] = value
    valid = [p for p in params if p not in COMMON]
    unknown = [k for k in options if k not in valid]
    if unknown:
        raise ValueError(
            f"unknown option(s) {', '.join(map(repr, unknown))} for data set {name!r}; valid: "
            f"{', '.join(valid) if valid else '(none)'}"
        )
    return entry.loader(**kwargs, **options)


#: The fields of :func:`dataset_info` computed from the data, which its on-disk cache holds.
_FROM_DATA = ("rows", "n_dropped", "features", "classes", "label_balance", "groups", "group_sizes", "description")

#: The layout of a cached summary; bump it when the entry format changes.
INFO_CACHE_FORMAT = 1


def dataset_info(name: str, data_home=None) -> dict:
    """A summary of data set ``name`` under its default options, for ``dpfair datasets``.

    Keys: name, on_disk (whether it loads without downloading), files, licence, sensitive_options,
    default_sensitive, options (loader-specific keyword options), presets (the paper presets of ``load_dataset``'s
    ``preset=``), and, computed from the data when it is on disk
    (``None`` otherwise): rows (after cleaning), n_dropped, features, classes, label_balance (fraction of label 1
    for binary labels, else the fraction of each class), groups, group_sizes ({group name: rows}), description;
    ``error`` when the files are there but do not load (e.g. a checksum mismatch). Never downloads.

    The fields computed from the data take a full load (seconds for the larger data sets), so they are cached
    on disk, beside the accounting cache (``$DPFAIR_CACHE_DIR``, else ``~/.cache/dpfair``; an empty value turns
    it off), in ``datasets/``: one small JSON file per data set, keyed by the path, size and modification time of
    each file it reads and by a digest of the loaders' code, so a changed file or loader reads the data again.
    They summarise the built-in, public data sets and are printed by ``dpfair datasets`` anyway; a file that does
    not load is not cached.
    """
    entry = _entry(name)
    params = inspect.signature(entry.loader).parameters
    info = {
        "name": name,
        "on_disk": is_available(entry.files, data_home=data_home),
        "files": [f"{f.folder}/{f.name}" for f in entry.files],
        "licence": entry.licence,
        "sensitive_options": list(entry.sensitive),
        "default_sensitive": entry.sensitive[0],
        "options": [p for p in params if p not in COMMON],
        "presets": presets_of(name),
        **dict.fromkeys(_FROM_DATA),
    }
    if not info["on_disk"]:
        return info
    cache = _info_cache_key(name, entry, data_home)
    cached = _read_info(cache)
    if cached is not None:
        info.update(cached)
        return info
    kwargs = {"data_home": data_home, "download": False} if "download" in params else {}
    try:
        data = entry.loader(**kwargs)
    except (ValueError, OSError) as exc:  # a corrupt file spoils its own row, not the listing
        info.update(on_disk=False, error=str(exc).strip().splitlines()[0])
        return info
    y = np.concatenate([data.y_train, data.y_test])
    s = np.concatenate([data.s_train, data.s_test])
    freq = np.bincount(y, minlength=data.n_classes) / len(y)
    info.update(
        rows=int(len(y)),
        n_dropped=None if data.n_dropped is None else int(data.n_dropped),
        features=int(data.n_features),
        classes=[str(c) for c in data.label_names],
        label_balance=float(freq[1]) if data.n_classes == 2 else [float(f) for f in freq],
        groups=[str(g) for g in data.group_names],
        group_sizes={str(g): int(c) for g, c in zip(data.group_names, np.bincount(s, minlength=data.n_groups))},
        description=data.description,
    )
    _write_info(cache, {k: info[k] for k in _FROM_DATA})
    return info


@lru_cache(maxsize=1)
def _loaders_digest() -> str:
    """A digest of the data set package's code (every module of ``dpfair.datasets``)."""
    digest = hashlib.sha256()
    for source in sorted(Path(__file__).resolve().parent.rglob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def _info_cache_key(name: str, entry: _Entry, data_home) -> list | None:
    """The key of data set ``name``'s cached summary (its files' paths, sizes and times, the loaders' code, the
    version), or ``None`` (its files cannot be read: no caching)."""
    from dpfair import __version__

    try:
        found = [Path(p).resolve() for p in locate(entry.files, data_home=data_home)]
        files = [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in found]
        code = _loaders_digest()
    except (OSError, TypeError):
        return None
    return [INFO_CACHE_FORMAT, __version__, code, name, files]


def _read_info(key: list | None) -> dict | None:
    """The cached fields of a summary, or ``None`` (no cache, no entry, or one that does not check)."""
    stored = None if key is None else read_entry("datasets", key, "info")
    return dict(stored) if isinstance(stored, dict) and set(stored) == set(_FROM_DATA) else None


def _write_info(key: list | None, info: dict) -> None:
    """Store a summary's fields (atomically; nothing if that fails)."""
    if key is not None:
        write_entry("datasets", key, info, "info")

