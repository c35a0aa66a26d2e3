"""The streamed count table (dpfair.measurement.counts): the same table from a file, a partitioned folder, a glob,
batch by batch, in this process or on a loopback Dask cluster; the same figures as the rows' frame; one line for
every table that cannot be counted."""

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpfair.measurement import PrivateMetricFrame
from dpfair.measurement.counts import CountTable, count_predictions
from dpfair.measurement.files import measure_file, measure_rows, read_predictions

GROUPS = ["north", "south", "islands"]


@pytest.fixture(scope="module")
def decisions():
    rng = np.random.default_rng(0)
    n = 2_000
    region = rng.choice(GROUPS, size=n, p=[0.5, 0.3, 0.2])
    approved = rng.binomial(1, np.where(region == "north", 0.6, 0.4))
    decision = np.where(rng.random(n) < 0.8, approved, 1 - approved)
    return pd.DataFrame({"approved": approved, "decision": decision, "region": region,
                         "sex": rng.choice(["F", "M"], size=n), "income": rng.normal(size=n)})


def _exact(frame: pd.DataFrame, groups=GROUPS, classes=("0", "1")) -> np.ndarray:
    g = pd.Index(groups).get_indexer(frame["region"])
    y = pd.Index(classes).get_indexer(frame["approved"].astype(str))
    p = pd.Index(classes).get_indexer(frame["decision"].astype(str))
    return np.bincount((g * 2 + y) * 2 + p, minlength=len(groups) * 4).reshape(len(groups), 2, 2)


def _write(decisions, tmp_path, layout: str):
    """The decisions as one CSV, one Parquet file, a folder partitioned by region, or a glob of CSV parts."""
    if layout == "csv":
        path = tmp_path / "d.csv"
        decisions.to_csv(path, index=False)
        return path
    if layout == "parquet":
        path = tmp_path / "d.parquet"
        decisions.to_parquet(path)
        return path
    if layout == "partitioned":
        root = tmp_path / "warehouse"
        pq.write_to_dataset(pa.Table.from_pandas(decisions), root, partition_cols=["region"])
        (root / "_SUCCESS").write_text("")
        return root
    parts = tmp_path / "exports"
    parts.mkdir()
    for i in range(4):
        decisions.iloc[i::4].to_csv(parts / f"2026-{i + 1:02d}.csv", index=False)
    return str(parts / "2026-*.csv")


@pytest.mark.parametrize("layout", ["csv", "parquet", "partitioned", "glob"])
def test_every_layout_counts_the_same_table_in_any_batch_size(decisions, tmp_path, layout):
    source = _write(decisions, tmp_path, layout)
    exact = _exact(decisions)
    for batch_rows in (7, 1 << 20):
        table = count_predictions(source, label="approved", prediction="decision", sensitive="region", groups=GROUPS,
                                  batch_rows=batch_rows, show_progress=False)
        np.testing.assert_array_equal(table.counts, exact)
        assert table.groups == tuple(GROUPS) and table.classes == ("0", "1") and table.n == len(decisions)


def test_the_streamed_frame_is_the_rows_frame(decisions, tmp_path):
    """From the counts, the same release as from the rows: the plan, the noise std, the ε, and at ε = ∞ every
    figure."""
    path = tmp_path / "d.csv"
    decisions.to_csv(path, index=False)
    kwargs = dict(label="approved", prediction="decision", sensitive="region")
    rows = read_predictions(path, **kwargs)
    for epsilon in (1.0, math.inf):
        streamed = measure_file(path, epsilon=epsilon, groups=GROUPS, n_bootstrap=50, random_state=0,
                                show_progress=False, **kwargs)
        held = measure_rows(rows, epsilon=epsilon, groups=GROUPS, n_bootstrap=50, random_state=0)
        assert streamed.n_ == held.n_ == len(decisions)
        assert streamed.privacy_spent_ == held.privacy_spent_
        assert streamed.noise_stds_ == held.noise_stds_
        assert streamed.measurement_plan_.tables == held.measurement_plan_.tables
        if math.isinf(epsilon):
            pd.testing.assert_frame_equal(streamed.by_group, held.by_group)
            pd.testing.assert_frame_equal(streamed.intervals, held.intervals)


def test_the_positive_class_reorders_the_counts(decisions, tmp_path):
    path = tmp_path / "d.parquet"
    decisions.to_parquet(path)
    kwargs = dict(label="approved", prediction="decision", sensitive="region", epsilon=math.inf, groups=GROUPS,
                  show_progress=False)
    rows = read_predictions(path, label="approved", prediction="decision", sensitive="region")
    for positive in ("0", "1"):
        streamed = measure_file(path, positive=positive, n_bootstrap=20, **kwargs)
        held = measure_rows(rows, epsilon=math.inf, groups=GROUPS, positive=positive, n_bootstrap=20)
        pd.testing.assert_frame_equal(streamed.by_group, held.by_group)


def test_values_match_the_declared_lists_whatever_their_type(tmp_path):
    """Text, integers, whole floats, booleans and Parquet dictionaries all match "0"/"1" and the group names."""
    n = 12
    frame = pd.DataFrame({"y_int": np.arange(n) % 2, "y_float": (np.arange(n) % 2).astype(float),
                          "y_bool": (np.arange(n) % 2).astype(bool), "y_text": (np.arange(n) % 2).astype(str),
                          "g_cat": pd.Categorical(np.where(np.arange(n) < 4, "a", "b")),
                          "g_int": np.where(np.arange(n) < 4, 10, 20)})
    path = tmp_path / "types.parquet"
    frame.to_parquet(path)
    reference = None
    for label in ("y_int", "y_float", "y_bool", "y_text"):
        for sensitive, groups in (("g_cat", ["a", "b"]), ("g_int", ["10", "20"])):
            table = count_predictions(path, label=label, prediction="y_int", sensitive=sensitive, groups=groups,
                                      show_progress=False)
            reference = table.counts if reference is None else reference
            np.testing.assert_array_equal(table.counts, reference)
    assert reference.sum() == n and reference[0].sum() == 4 and np.trace(reference, axis1=1, axis2=2).sum() == n


def test_intersections_and_groups_present_at_infinite_epsilon(decisions, tmp_path):
    path = tmp_path / "d.csv"
    decisions.to_csv(path, index=False)
    both = count_predictions(path, label="approved", prediction="decision", sensitive=["region", "sex"],
                             groups=[GROUPS, ["F", "M"]], show_progress=False)
    assert both.groups[:2] == ("north & F", "north & M")
    np.testing.assert_array_equal(both.counts.reshape(3, 2, 2, 2).sum(axis=1), _exact(decisions))
    present = count_predictions(path, label="approved", prediction="decision", sensitive="region",
                                show_progress=False)  # no list: every value present (ε = ∞ only)
    assert present.groups == tuple(sorted(GROUPS))


def test_the_count_table_never_shows_a_count():
    table = CountTable(np.array([[[17, 3], [5, 11]]]), ("a",), ("0", "1"))
    assert "17" not in repr(table) and "11" not in repr(table) and "shape=(1, 2, 2)" in repr(table)


def test_from_counts_refuses_a_table_that_is_not_counts():
    with pytest.raises(ValueError, match="shape"):
        PrivateMetricFrame.from_counts(["count"], np.zeros((2, 2)), groups=["a", "b"], epsilon=1.0)
    with pytest.raises(ValueError, match="non-negative integers"):
        PrivateMetricFrame.from_counts(["count"], np.full((2, 2, 2), 0.5), groups=["a", "b"], epsilon=1.0)
    with pytest.raises(ValueError, match="needs each person's score"):
        PrivateMetricFrame.from_counts(["mean_prediction"], np.ones((2, 2, 2), int), groups=["a", "b"], epsilon=1.0)


def _count(source, **kwargs):
    return count_predictions(source, **{"label": "approved", "prediction": "decision", "sensitive": "region",
                                        "groups": GROUPS, "show_progress": False, **kwargs})


def test_tables_that_cannot_be_counted_are_one_line_naming_the_fix(decisions, tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    decisions.iloc[:1000].to_parquet(folder / "a.parquet")
    decisions.iloc[1000:].drop(columns="decision").to_parquet(folder / "b.parquet")
    with pytest.raises(ValueError, match=r"files of different schemas: .*b.parquet has no column 'decision'"):
        _count(folder)
    (folder / "b.parquet").unlink()
    decisions.iloc[1000:].assign(approved=lambda f: f["approved"].astype(str) + "x").to_parquet(folder / "b.parquet")
    with pytest.raises(ValueError, match="cannot read it as one parquet table|outside classes"):
        _count(folder, classes=["0", "1"])
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    decisions.to_parquet(mixed / "a.parquet")
    decisions.to_csv(mixed / "b.csv", index=False)
    with pytest.raises(ValueError, match="files of csv and parquet formats together"):
        _count(mixed)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="a folder with no CSV, TSV or Parquet file"):
        _count(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no CSV, TSV or Parquet file matches"):
        _count(str(tmp_path / "nothing-*.parquet"))
    gaps = tmp_path / "gaps.csv"
    decisions.assign(region=decisions["region"].where(decisions.index != 5)).to_csv(gaps, index=False)
    with pytest.raises(ValueError, match="column 'region' has empty cells"):
        _count(gaps)
    with pytest.raises(ValueError, match=r"column 'region' has values outside groups=\[north, south\]"):
        _count(tmp_path / "mixed" / "a.parquet", groups=["north", "south"])


def test_a_loopback_dask_cluster_counts_the_identical_table(decisions, tmp_path):
    pytest.importorskip("distributed")
    from dpfair.experiments.dask_backend import DaskBackend

    root = _write(decisions, tmp_path, "partitioned")
    glob = _write(decisions, tmp_path, "glob")
    with DaskBackend(workers=2) as backend:
        for source in (root, glob):
            table = _count(source, client=backend.client)
            np.testing.assert_array_equal(table.counts, _exact(decisions))
