"""Issue 44: the float32 feature store that a user's table streams into (``dpfair.datasets.store``).

The store must hold exactly the rows the in-memory path encodes (the schema's float64 features, rounded once to
float32), split as every data set is split, whether it is kept in memory or in a memory-mapped file; a folder of
partitioned files is one table; a store on disk is written once and reused, and a full disk leaves nothing behind
that a later run would trust."""

import errno
import os
import shutil

import numpy as np
import pandas as pd
import pytest
from numpy.lib.array_utils import byte_bounds

from dpfair.algorithms import DPFERMIClassifier, DPSGDClassifier
from dpfair.datasets import Schema, load_table, read_table
from dpfair.datasets import store as store_module
from dpfair.datasets.base import Table, finish
from dpfair.datasets.columnar import open_table
from dpfair.datasets.store import build_store

from tests.datasets.test_own_table import LOANS_TOML, loans


@pytest.fixture
def table(tmp_path):
    """``(loans.csv, schema)``: 3,000 rows of the loans table, a declared schema."""
    path = tmp_path / "loans.csv"
    loans(3000, 0).to_csv(path, index=False)
    return path, Schema.from_toml(LOANS_TOML)


def in_memory_path(path, schema, random_state=0):
    """The path before the store: the whole table read as pandas cells, encoded in float64 and split."""
    frame = read_table(path, raw=True)
    data = finish(Table(name="loans", y=schema.codes(frame, "label"), s=schema.codes(frame, "sensitive"),
                        label_names=list(schema.classes), group_names=list(schema.groups), sensitive="sex",
                        description="", licence="", n_dropped=0, frame=frame, schema=schema), 0.25, random_state)
    return data


@pytest.mark.parametrize("where", ["memory", "disk"])
def test_the_store_holds_the_rows_the_in_memory_path_encodes_rounded_to_float32(table, tmp_path, where):
    path, schema = table
    before = in_memory_path(path, schema)
    data = load_table(path, schema=schema, where=where, cache_dir=tmp_path / "stores")
    assert data.X_train.dtype == np.float32 and data.X_test.dtype == np.float32
    np.testing.assert_array_equal(data.X_train, before.X_train.astype(np.float32))
    np.testing.assert_array_equal(data.X_test, before.X_test.astype(np.float32))
    for part in ("y_train", "s_train", "y_test", "s_test"):
        np.testing.assert_array_equal(getattr(data, part), getattr(before, part))
    assert data.feature_names == before.feature_names
    assert isinstance(data.X_train, np.memmap) == (where == "disk")
    # one matrix, train rows then test rows: the parts are views, no copy
    assert byte_bounds(data.X_train)[1] == byte_bounds(data.X_test)[0]


def test_a_store_on_disk_is_written_once_reused_and_rebuilt_when_its_table_changes(table, tmp_path):
    path, schema = table
    folder = tmp_path / "stores"
    first = build_store(open_table(path, raw=True), schema, where="disk", cache_dir=folder)
    files = sorted(p.name for p in folder.iterdir())
    assert [f for f in files if f.endswith(".f32")] == [first.path.name]
    assert not [f for f in files if "tmp" in f]  # nothing half-written
    assert oct(folder.stat().st_mode & 0o777) == "0o700"  # the user's data: readable by its owner only
    stamp = first.path.stat().st_mtime_ns
    again = build_store(open_table(path, raw=True), schema, where="disk", cache_dir=folder)
    assert again.path == first.path and again.path.stat().st_mtime_ns == stamp  # reused, not rewritten
    np.testing.assert_array_equal(again.X, first.X)
    assert "rows" in repr(again) and str(float(first.X[0, 0])) not in repr(again)  # sizes, never a value
    frame = loans(3000, 5)
    frame.to_csv(path, index=False)  # the table changed: another store
    changed = build_store(open_table(path, raw=True), schema, where="disk", cache_dir=folder)
    assert changed.path != first.path
    assert not np.array_equal(changed.X, first.X)


def test_a_fit_on_the_memory_mapped_store_equals_the_fit_in_memory_and_leaves_the_file_as_it_was(table, tmp_path):
    path, schema = table
    memory = load_table(path, schema=schema, where="memory")
    disk = load_table(path, schema=schema, where="disk", cache_dir=tmp_path / "stores")
    store_file = next((tmp_path / "stores").glob("*.f32"))
    content = store_file.read_bytes()
    for make in (lambda: DPSGDClassifier(epsilon=1.0, epochs=2, classes=2, groups=2, random_state=0),
                 lambda: DPFERMIClassifier(epsilon=1.0, epochs=2, groups=2, random_state=0)):
        a = make().fit(memory.X_train, memory.y_train, sensitive_features=memory.s_train)
        b = make().fit(disk.X_train, disk.y_train, sensitive_features=disk.s_train)
        np.testing.assert_array_equal(a.predict_proba(memory.X_test), b.predict_proba(disk.X_test))
    assert store_file.read_bytes() == content


def test_a_partitioned_folder_is_one_table_its_keys_are_columns(tmp_path):
    """A warehouse's table: Parquet parts under ``sex=F/`` and ``sex=M/``; the partition key is the sensitive
    column."""
    frame = loans(2000, 3)
    root = tmp_path / "loans"
    for sex, part in frame.groupby("sex"):
        (root / f"sex={sex}").mkdir(parents=True)
        half = len(part) // 2
        for i, chunk in enumerate([part.iloc[:half], part.iloc[half:]]):
            chunk.drop(columns="sex").to_parquet(root / f"sex={sex}" / f"part-{i}.parquet")
    data = load_table(root, schema=LOANS_TOML)
    assert len(data.y_train) + len(data.y_test) == 2000
    assert sorted(np.bincount(np.concatenate([data.s_train, data.s_test]))) == sorted(frame["sex"].value_counts())
    assert "2,000 rows" in data.description


def test_a_folder_whose_files_differ_is_one_line(tmp_path):
    root = tmp_path / "loans"
    root.mkdir()
    loans(500, 0).to_parquet(root / "a.parquet")
    loans(500, 1).drop(columns="age").to_parquet(root / "b.parquet")
    with pytest.raises(ValueError, match=r"files of different schemas: .*b.parquet has no column 'age'"):
        load_table(root, schema=LOANS_TOML)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_store_the_disk_cannot_hold_is_one_line_before_the_features_are_read(table, tmp_path, monkeypatch, kind):
    """A CSV's rows are counted by the labels' pass first; a Parquet table's footers say it before any row is read."""
    path, schema = table
    if kind == "parquet":
        read_table(path, raw=True).to_parquet(tmp_path / "loans.parquet")
        path = tmp_path / "loans.parquet"
    folder = tmp_path / "stores"
    monkeypatch.setattr(shutil, "disk_usage", lambda where: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    read = {"targets": 0, "features": 0}
    for step, name in (("targets", "_read_targets"), ("features", "_write_features")):
        original = getattr(store_module, name)
        monkeypatch.setattr(store_module, name, lambda *a, _f=original, _s=step, **k: read.__setitem__(
            _s, read[_s] + 1) or _f(*a, **k))
    with pytest.raises(ValueError, match=r"needs 0\.00 GiB \(3,000 rows × 8 float32 features\) and the disk has "
                                         r"0\.00 GiB free; free space there or name another folder with --cache-dir"):
        load_table(path, schema=schema, where="disk", cache_dir=folder)
    assert read == {"targets": int(kind == "csv"), "features": 0} and not list(folder.iterdir())


def test_a_disk_that_fills_while_the_store_is_written_leaves_nothing_behind(table, tmp_path, monkeypatch):
    path, schema = table
    folder = tmp_path / "stores"
    monkeypatch.setattr(store_module, "CELLS_PER_BATCH", 4096)  # several batches, so that the disk fills mid-way
    calls = []

    def filling(fd, data, offset):
        calls.append(offset)
        if len(calls) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return os.write(fd, data) if os.lseek(fd, offset, os.SEEK_SET) == offset else 0

    monkeypatch.setattr(os, "pwrite", filling)
    with pytest.raises(ValueError, match=r"the disk is full while the feature store of .*loans.csv .* was written; "
                                         r"nothing was kept"):
        load_table(path, schema=schema, where="disk", cache_dir=folder)
    assert list(folder.iterdir()) == []
    monkeypatch.undo()
    data = load_table(path, schema=schema, where="disk", cache_dir=folder)  # a later run builds it afresh
    np.testing.assert_array_equal(data.X_train, load_table(path, schema=schema, where="memory").X_train)


def test_rows_the_schema_drops_are_left_out_of_the_store_and_said(tmp_path):
    frame = loans(1000, 2)
    frame.loc[::10, "age"] = np.nan
    path = tmp_path / "loans.parquet"
    frame.to_parquet(path)
    toml = LOANS_TOML.replace('name = "age"\nkind = "numeric"', 'name = "age"\nkind = "numeric"\nmissing = "drop"')
    data = load_table(path, schema=toml, privacy_unit="record")
    assert len(data.y_train) + len(data.y_test) == 900
    assert "100 row(s) with a missing 'age' left out" in data.description
    kept = frame.dropna(subset=["age"]).reset_index(drop=True)
    expected = Schema.from_toml(toml).transform(kept)
    assert sorted(map(tuple, np.concatenate([data.X_train, data.X_test]))) == sorted(
        map(tuple, expected.astype(np.float32)))


def test_a_store_built_from_a_train_and_a_test_file_keeps_them_apart(table, tmp_path):
    path, schema = table
    test = tmp_path / "new.csv"
    loans(400, 9).to_csv(test, index=False)
    data = load_table(path, schema=schema, test_data=test, where="disk", cache_dir=tmp_path / "stores")
    assert len(data.y_train) == 3000 and len(data.y_test) == 400
    np.testing.assert_array_equal(data.X_test, schema.transform(pd.read_csv(test, dtype=str, keep_default_na=False))
                                  .astype(np.float32))


def test_a_partitioned_folder_with_a_missing_partition_is_one_line(tmp_path):
    """A file outside the ``sex=...`` folders would read as rows without a sex: refused, naming it."""
    frame = loans(600, 4)
    root = tmp_path / "loans"
    (root / "sex=F").mkdir(parents=True)
    frame[frame["sex"] == "F"].drop(columns="sex").to_parquet(root / "sex=F" / "part-0.parquet")
    frame[frame["sex"] == "M"].drop(columns="sex").to_parquet(root / "part-1.parquet")  # its sex=M folder missing
    with pytest.raises(ValueError, match=r"a missing partition: .*part-1.parquet is not under a sex=\.\.\. folder"):
        load_table(root, schema=LOANS_TOML)


def test_a_fit_reads_the_store_in_place(table, tmp_path, monkeypatch):
    """No copy of the store: the checked features are the store's own rows, and DP-FERMI's step gathers X's rows
    when its layout would copy a large table — the same model as the copied layout."""
    from dpfair.algorithms.dpfermi import batched
    from dpfair.utils.validation import check_features

    path, schema = table
    data = load_table(path, schema=schema, where="disk", cache_dir=tmp_path / "stores")
    assert np.shares_memory(check_features(data.X_train), data.X_train)

    def fit():
        return DPFERMIClassifier(epsilon=1.0, epochs=2, groups=2, classes=[0, 1], random_state=0,
                                 privacy_unit="record").fit(
            data.X_train, data.y_train, sensitive_features=data.s_train)

    copied = fit()
    monkeypatch.setattr(batched, "COPY_LIMIT_BYTES", 0)
    in_place = fit()
    np.testing.assert_allclose(in_place.predict_proba(data.X_test), copied.predict_proba(data.X_test), rtol=1e-5,
                               atol=1e-6)


def test_auto_keeps_the_store_in_memory_while_it_takes_at_most_half_the_memory_available(table, tmp_path,
                                                                                           monkeypatch):
    path, schema = table
    size = 3000 * 8 * 4
    monkeypatch.setattr(store_module, "_available_memory", lambda: 2 * size)
    assert load_table(path, schema=schema, cache_dir=tmp_path / "a").X_train.__class__ is np.ndarray
    monkeypatch.setattr(store_module, "_available_memory", lambda: 2 * size - 1)
    assert isinstance(load_table(path, schema=schema, cache_dir=tmp_path / "b").X_train, np.memmap)
