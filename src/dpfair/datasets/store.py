"""The feature store: a user's table streamed through its public schema into one float32 matrix, in memory when it
fits, else in a file written once and memory-mapped (:func:`build_store`).

A table of tens of millions of rows does not fit as pandas cells, nor as float64 features beside them. The store
reads the table (a file, a folder of files or a glob: :func:`~dpfair.datasets.columnar.open_table`) a record batch
at a time, in two passes:

1. **the targets**: the label, the sensitive column(s) and the columns whose missing cells drop a row (a few
   columns), giving each kept row's label and group codes and so the train/test split
   (:func:`~dpfair.datasets.base.split_rows`, the same stratified split as every data set);
2. **the features**: every batch through :meth:`Schema.prepare <dpfair.datasets.schema.Schema.prepare>`, its
   float32 rows written where the split puts them: train rows first, then test rows, each part in the table's
   order. The rows of one batch are two runs of consecutive rows of the store, so each batch is two writes, and
   ``X_train`` and ``X_test`` are views of the one matrix: no float64 copy, no second table.

Memory is the batch (about :data:`CELLS_PER_BATCH` cells) plus, in memory, the float32 matrix; on disk only the
batch, the matrix being pages of a file that the system reads as the rows are used (``RssFile``, not
``RssAnon``). A store on disk lies in a cache folder (``cache_dir=``, ``--cache-dir``; by default
``stores/`` under :func:`~dpfair.utils.cache_folder.cache_dir`), named by a digest of what it was built from (the
files' paths, sizes and modification times, the schema, the split): a later run on the same table reuses it. It is
written to a temporary file whose space is reserved first (``posix_fallocate``), then renamed into place with its
manifest: a disk that fills is one line before or while the store is written, and nothing half-written remains that
a later run would trust.

Privacy: the store is a public function of each row (the schema's constants, no statistic of the rows), and the
split's seed and fraction are public, as for every data set; the secret Poisson batches of DP-SGD and DP-FERMI
sample row indices and read those rows from the store, so the privacy argument is unchanged. The store is the
user's data, kept on the user's disk (the folder readable by its owner only); the notes it gives (row counts, rows
dropped by the schema's declared rules) are those :func:`~dpfair.datasets.load_table` gives of a table in memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair.datasets.base import Schema, Table, split_rows
from dpfair.datasets.columnar import ColumnarTable
from dpfair.utils.cache_folder import cache_dir as default_cache_root
from dpfair.utils.files import DISK_FULL
from dpfair.utils.progress import progress

__all__ = ["CELLS_PER_BATCH", "MEMORY_SHARE", "STORE_VERSION", "WHERE", "FeatureStore", "build_store",
           "check_table_columns", "store_folder"]

#: The version of a store file's layout (a manifest of another version is not trusted).
STORE_VERSION = 1
#: Cells (rows × columns read) per record batch: a batch's text cells as pandas holds them are about 60 bytes each,
#: so a batch costs some 60 MiB whatever the table's width.
CELLS_PER_BATCH = 1 << 20
#: ``where="auto"`` keeps a store in memory while it takes at most this share of the memory available.
MEMORY_SHARE = 0.5
#: Where a store may be kept.
WHERE = ("auto", "memory", "disk")


@dataclass(frozen=True, repr=False)
class FeatureStore:
    """A table's float32 features with its label and group codes, train rows first (:func:`build_store`).

    ``X (n, d)`` float32, an array in memory or a copy-on-write memory map of the store file (``path``): a fit that
    writes into its rows changes its own pages, never the file; ``y``, ``s`` int64 codes in the schema's ``classes``
    and ``groups`` (memory-mapped too, from the codes file beside a store on disk); rows ``[:n_train]`` are the train part, the rest the test part. ``n_dropped`` rows were left
    out by the schema's declared ``missing = "drop"`` rules; ``split_note`` says how the split was made."""

    X: np.ndarray
    y: np.ndarray
    s: np.ndarray
    n_train: int
    feature_names: tuple[str, ...]
    n_dropped: int
    split_note: str
    path: Path | None = None

    @property
    def X_train(self) -> np.ndarray:
        return self.X[: self.n_train]

    @property
    def X_test(self) -> np.ndarray:
        return self.X[self.n_train:]

    @property
    def nbytes(self) -> int:
        return int(self.X.shape[0]) * int(self.X.shape[1]) * 4

    def __repr__(self) -> str:  # sizes only: the store holds private rows
        where = f"file {self.path}" if self.path is not None else "memory"
        return (f"FeatureStore({self.X.shape[0]:,} rows × {self.X.shape[1]} float32 features in {where}, "
                f"{self.n_train:,} train)")


def check_table_columns(columns, schema: Schema, source) -> None:
    """Every column the schema names is among ``columns`` (a table's names), and every one of them is known to the
    schema (a feature, the label, a sensitive column or an ignored one): one ``ValueError`` naming the column and
    ``source`` otherwise."""
    columns = list(columns)
    for target, column in (("label", schema.label), *(("sensitive", c) for c in schema.sensitive_columns)):
        if column not in columns:
            raise ValueError(f"{source}: no {target} column {column!r}; columns: {columns[:20]}")
    schema.prepare(pd.DataFrame(columns=columns), str(source), strict=True)


def store_folder(cache_dir=None) -> Path:
    """The folder of the stores on disk: ``cache_dir`` if given, else ``stores/`` in dpfair's cache folder (or the
    system's temporary folder when the caches are turned off)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    root = default_cache_root()
    if root is None:
        import tempfile

        return Path(tempfile.gettempdir()) / "dpfair-stores"
    return root / "stores"


def _file_key(path: Path) -> list:
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


def _available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (``None`` where the system does not say)."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _release_arrow_memory() -> None:
    """Hand the memory Arrow's pool kept from a pass's batches back to the system (a fit follows)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


@dataclass
class _Targets:
    kept: np.ndarray  # the mask of the table's rows the schema keeps
    y: np.ndarray
    s: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.kept)


def _read_targets(table: ColumnarTable, schema: Schema, name: str, show_progress: bool) -> _Targets:
    """Pass 1: which rows the schema keeps, and their label and group codes."""
    columns = [schema.label, *schema.sensitive_columns]
    columns += [c.name for c in schema.columns if c.missing is not None and c.missing.action == "drop"]
    columns = list(dict.fromkeys(columns))
    kept, ys, ss = [], [], []
    with progress(table.row_count(), desc=f"feature store of {name}: labels and groups", unit="row",
                  enabled=show_progress) as bar:
        for frame in table.frames(columns, CELLS_PER_BATCH):
            mask = schema.kept_rows(frame, name)
            rows = frame.loc[mask]
            kept.append(mask)
            ys.append(schema.codes(rows, "label", name))
            ss.append(schema.codes(rows, "sensitive", name))
            bar.update(len(frame))
    if not kept:
        raise ValueError(f"{name}: the table has no rows; give a file with one row per person")
    return _Targets(np.concatenate(kept), np.concatenate(ys).astype(np.int64), np.concatenate(ss).astype(np.int64))


class _Sink:
    """Where pass 2 writes: rows ``[start, start + len)`` of an array in memory or of the store's temporary file."""

    def __init__(self, n: int, d: int, path: Path | None):
        self.d = d
        if path is None:
            try:
                self.X = np.empty((n, d), dtype=np.float32)
            except MemoryError:
                raise ValueError(f"the feature store ({n:,} rows × {d} features, {_gib(n * d * 4)}) does not fit in "
                                 "memory; keep it on disk (store=\"disk\", --store disk) in a folder with room "
                                 "(--cache-dir)") from None
            self.fd = None
        else:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            size = n * d * 4
            if size:
                try:
                    os.posix_fallocate(self.fd, 0, size)
                except OSError as exc:
                    if exc.errno in DISK_FULL:
                        raise
                    os.ftruncate(self.fd, size)  # a file system that reserves nothing: a sparse file

    def write(self, start: int, rows: np.ndarray) -> None:
        if not len(rows):
            return
        if self.fd is None:
            self.X[start:start + len(rows)] = rows
            return
        data = memoryview(np.ascontiguousarray(rows, dtype=np.float32)).cast("B")
        offset, done = start * self.d * 4, 0
        while done < len(data):
            done += os.pwrite(self.fd, data[done:], offset + done)

    def close(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)
            os.close(self.fd)
            self.fd = None


def _write_features(table: ColumnarTable, schema: Schema, name: str, targets: _Targets, position: np.ndarray,
                    n_train: int, sink: _Sink, show_progress: bool) -> None:
    """Pass 2: every batch's features, its train rows and its test rows each written as one run of the store."""
    columns = list(dict.fromkeys([*schema.names, schema.label, *schema.sensitive_columns]))
    changed = (f"{name}: the table changed while it was read (its rows differ between two passes); read it again "
               "once it is written")
    done, read = 0, 0
    with progress(targets.n_rows, desc=f"feature store of {name}: features", unit="row",
                  enabled=show_progress) as bar:
        for frame in table.frames(columns, CELLS_PER_BATCH):
            prepared = schema.prepare(frame, name, targets=True)
            if not np.array_equal(prepared.kept, targets.kept[read:read + len(frame)]):
                raise ValueError(changed)
            read += len(frame)
            X = prepared.X
            if not np.all(np.isfinite(X)):
                raise ValueError(f"{name}: the schema gave a non-finite feature; check its ranges and scales")
            where = position[done:done + len(X)]
            train = where < n_train
            for part in (train, ~train):
                if part.any():
                    sink.write(int(where[part][0]), X[part])
            done += len(X)
            bar.update(len(frame))
    if done != len(position) or read != targets.n_rows:
        raise ValueError(changed)


def _fill(tables, schema: Schema, parts, position: np.ndarray, n_train: int, sink: _Sink, show_progress) -> None:
    """Pass 2 of every table (the train file, then a test file's), each into its rows of the store."""
    starts = np.cumsum([0] + [len(p.y) for p in parts])
    for i, part in enumerate(tables):
        _write_features(part, schema, part.source, parts[i], position[starts[i]:starts[i + 1]], n_train, sink,
                        show_progress)


def _manifest(path: Path) -> Path:
    return path.with_suffix(".json")


def _reuse(path: Path, key: list, d: int) -> FeatureStore | None:
    """The complete store at ``path`` written for ``key``, or ``None`` (none, another key, a damaged one)."""
    try:
        manifest = json.loads(_manifest(path).read_text())
        if manifest.get("key") != key or manifest.get("version") != STORE_VERSION:
            return None
        n = int(manifest["rows"])
        if path.stat().st_size != n * d * 4:
            return None
        codes = np.load(path.with_suffix(".codes.npy"), mmap_mode="c", allow_pickle=False)  # file pages too
        if codes.shape != (2, n) or codes.dtype != np.int64:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    X = np.memmap(path, dtype=np.float32, mode="c", shape=(n, d))
    return FeatureStore(X, codes[0], codes[1], int(manifest["n_train"]),
                        tuple(manifest["feature_names"]), int(manifest["n_dropped"]), manifest["split_note"], path)


def _save_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def build_store(table: ColumnarTable, schema: Schema, *, test_table: ColumnarTable | None = None,
                test_size: float = 0.25, random_state: int = 0, where: str = "auto", cache_dir=None,
                show_progress: bool = False) -> FeatureStore:
    """``table`` (and ``test_table``, the test part, when given) through ``schema`` into a :class:`FeatureStore`.

    ``where``: ``"memory"``, ``"disk"`` (a file in :func:`store_folder` of ``cache_dir``) or ``"auto"`` (memory
    while the store takes at most :data:`MEMORY_SHARE` of the memory available, else disk). Rows the schema
    declares dropped are left out. Without ``test_table`` the split is :func:`~dpfair.datasets.base.split_rows`'
    (``test_size``, ``random_state``). Errors are one ``ValueError`` line: a column missing or unknown, a folder
    whose files differ, a store that fits neither in memory nor on the disk (said before the features are read), a
    disk that fills while it is written (the temporary file removed: nothing is left that a later run would use).
    """
    if where not in WHERE:
        raise ValueError(f"where must be one of {', '.join(WHERE)}, got {where!r}")
    name = table.source
    tables = [table] + ([test_table] if test_table is not None else [])
    for part in tables:
        check_table_columns(part.columns, schema, part.source)
        part.require([c for c in dict.fromkeys([*schema.names, schema.label, *schema.sensitive_columns])])
    d = len(schema.feature_names)
    key = [STORE_VERSION, [_file_key(f) for part in tables for f in part.files], schema.to_dict(),
           None if test_table is not None else [float(test_size), int(random_state)]]
    key = json.loads(json.dumps(key, sort_keys=True, default=str))  # as its manifest will hold it
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]
    folder = store_folder(cache_dir)
    path = folder / f"{digest}.f32"
    if where != "memory":
        reused = _reuse(path, key, d)
        if reused is not None:
            return reused
    counted = [part.row_count() for part in tables]  # Parquet footers: the size is known before any row is read
    if None not in counted and _on_disk(where, sum(counted) * d * 4):
        _check_room(folder, sum(counted), d, name)
    parts = [_read_targets(part, schema, part.source, show_progress) for part in tables]
    _release_arrow_memory()
    y = np.concatenate([p.y for p in parts])
    s = np.concatenate([p.s for p in parts])
    n = len(y)
    n_dropped = sum(p.n_rows for p in parts) - n
    if not n:
        raise ValueError(f"{name}: the schema's missing = \"drop\" rules leave no row; relax them")
    split = Table(name=name, y=y, s=s, label_names=list(schema.classes), group_names=list(schema.groups),
                  sensitive=schema.attribute or "", description="", licence="", n_dropped=n_dropped)
    if test_table is not None:
        split.test_mask = np.arange(n) >= len(parts[0].y)
        split.split_note = f"train rows from {table.source}, test rows from {test_table.source} (test_size ignored)"
    train, test, note = split_rows(split, test_size, random_state)
    position = np.empty(n, dtype=np.int64)
    position[train] = np.arange(len(train))
    position[test] = len(train) + np.arange(len(test))
    on_disk = _on_disk(where, n * d * 4)
    order = np.concatenate([train, test])
    store_y, store_s = y[order], s[order]
    if not on_disk:
        sink = _Sink(n, d, None)
        _fill(tables, schema, parts, position, len(train), sink, show_progress)
        _release_arrow_memory()
        return FeatureStore(sink.X, store_y, store_s, len(train), tuple(schema.feature_names), n_dropped, note)
    return _write_disk_store(tables, schema, parts, position, len(train), (store_y, store_s), n_dropped, note, path,
                             key, show_progress)


def _on_disk(where: str, size: int) -> bool:
    """Whether a store of ``size`` bytes goes to disk (``where="auto"``: beyond :data:`MEMORY_SHARE` of the memory
    available)."""
    return where == "disk" or (where == "auto" and size > MEMORY_SHARE * (_available_memory() or float("inf")))


_FIX = "free space there or name another folder with --cache-dir (cache_dir=)"


def _check_room(folder: Path, n: int, d: int, name: str) -> None:
    """One line when ``folder``'s disk cannot hold a store of ``n`` rows × ``d`` float32 features."""
    import shutil

    size = n * d * 4
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        raise ValueError(f"{folder}: cannot keep the feature store there: {exc.strerror or exc}; {_FIX}") from None
    if size > free:
        raise ValueError(f"{folder}: the feature store of {name} needs {_gib(size)} ({n:,} rows × {d} float32 "
                         f"features) and the disk has {_gib(free)} free; {_FIX}")


def _write_disk_store(tables, schema, parts, position, n_train, codes, n_dropped, note, path: Path, key,
                      show_progress) -> FeatureStore:
    """The store file written to a temporary name (its space reserved first), then renamed with its manifest."""
    n, d = len(position), len(schema.feature_names)
    size = n * d * 4
    folder = path.parent
    _check_room(folder, n, d, tables[0].source)
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    codes_tmp = folder / f".{path.stem}.codes.{os.getpid()}.tmp.npy"
    finals = (path, path.with_suffix(".codes.npy"), _manifest(path))
    sink = None
    try:
        sink = _Sink(n, d, tmp)
        _fill(tables, schema, parts, position, n_train, sink, show_progress)
        sink.close()
        np.save(codes_tmp, np.stack(codes).astype(np.int64), allow_pickle=False)
        os.replace(codes_tmp, finals[1])
        os.replace(tmp, path)
        manifest = {"version": STORE_VERSION, "key": key, "rows": n, "n_train": n_train, "n_dropped": n_dropped,
                    "feature_names": list(schema.feature_names), "split_note": note}
        _save_atomic(finals[2], json.dumps(manifest, default=str).encode())  # last: what makes the store trusted
    except BaseException as exc:
        # no valid store existed for this key (else it was reused): whatever of one lies here now is this run's
        for leftover in finals:
            with contextlib.suppress(OSError):
                os.unlink(leftover)
        if not isinstance(exc, OSError):
            raise
        if exc.errno in DISK_FULL:
            raise ValueError(f"{folder}: {DISK_FULL[exc.errno]} while the feature store of {tables[0].source} "
                             f"({_gib(size)}) was written; nothing was kept; {_FIX}") from None
        raise ValueError(f"{folder}: cannot write the feature store: {exc.strerror or exc}; nothing was kept; "
                         f"{_FIX}") from None
    finally:
        if sink is not None and sink.fd is not None:
            with contextlib.suppress(OSError):
                os.close(sink.fd)
        for leftover in (tmp, codes_tmp):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    _release_arrow_memory()
    stored = _reuse(path, key, d)
    if stored is None:
        raise ValueError(f"{folder}: the feature store just written cannot be read back; {_FIX}")
    return stored
