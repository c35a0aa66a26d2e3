"""Definitions specific to each data set: options, sensitive attributes, group shares."""

import dataclasses
import gzip
import shutil

import numpy as np
import pytest

from dpfair.datasets import _mnist, load_dataset, make_synthetic
from dpfair.datasets._tabular import bank_age_groups
from dpfair.datasets.base import Table, finish


def group_counts(data):
    return np.bincount(np.concatenate([data.s_train, data.s_test]), minlength=data.n_groups)


def test_adult_original_split(loaded):
    data = loaded("adult", original_split=True)
    assert (len(data.y_train), len(data.y_test)) == (30_162, 15_060)
    assert "original UCI split" in data.description


def test_adult_sensitive_choices(loaded):
    race = loaded("adult", sensitive="race")
    assert race.group_names == ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]
    assert not any(f.startswith("race=") for f in race.feature_names)
    binary = loaded("adult", sensitive="race_binary")
    assert binary.group_names == ["non-White", "White"]
    assert group_counts(binary)[1] == group_counts(race)[4]
    crossed = loaded("adult", sensitive="sex*race")
    assert crossed.n_groups == 4 and crossed.sensitive == "sex*race"
    counts = group_counts(crossed)
    assert counts[0] + counts[1] == group_counts(loaded("adult"))[0]  # Female = codes 0 and 1
    assert counts[1] + counts[3] == group_counts(binary)[1]  # White = codes 1 and 3
    assert not any(f.startswith(("race=", "sex=")) for f in crossed.feature_names)
    assert "workclass=Private" in crossed.feature_names and "fnlwgt" in crossed.feature_names


def test_compas_all_races_and_sex(loaded):
    data = loaded("compas", all_races=True)
    assert len(data.y_train) + len(data.y_test) == 6_172
    assert group_counts(data).tolist() == [3_175, 31, 2_103, 509, 11, 343]
    sex = loaded("compas", sensitive="sex")
    assert sex.group_names == ["Female", "Male"] and group_counts(sex).sum() == 5_278
    assert not any("decile" in f or "recid" in f for f in data.feature_names)


def test_german_age_groups(loaded):
    data = loaded("german", sensitive="age")
    assert data.group_names == ["age<=25", "age>25"]
    assert group_counts(data).tolist() == [190, 810]
    assert "age" not in data.feature_names
    assert "age" in loaded("german").feature_names


def test_parkinsons_label_is_the_median_split(loaded):
    data = loaded("parkinsons")
    assert np.concatenate([data.y_train, data.y_test]).mean() == pytest.approx(0.5, abs=0.01)
    assert "27.576" in data.label_names[1]


def test_group_split_keeps_each_group_on_one_side():
    rng = np.random.default_rng(0)
    patients = np.repeat(np.arange(40), 25)
    table = Table(name="t", y=rng.integers(0, 2, 1000), s=rng.integers(0, 2, 1000), label_names=["0", "1"],
                  group_names=["a", "b"], sensitive="s", description="", licence="", n_dropped=0,
                  X=rng.standard_normal((1000, 3)), split_groups=patients)
    data = finish(table, 0.25, 0)
    train = set(patients[np.isin(table.X[:, 0], data.X_train[:, 0])])
    test = set(patients[np.isin(table.X[:, 0], data.X_test[:, 0])])
    assert not train & test and len(test) == 10


def test_parkinsons_split_by_subject(loaded):
    data = loaded("parkinsons", split_by_subject=True)
    assert len(data.y_train) + len(data.y_test) == 5_875
    assert 0.15 < len(data.y_test) / 5_875 < 0.35 and "split by patient" in data.description


@pytest.mark.parametrize("n_groups, shares", [(2, [8, 92]), (3, [8, 46, 46]), (5, [8, 23, 23, 23, 23])])
def test_bank_age_group_shares(loaded, n_groups, shares):
    data = loaded("bank", n_groups=n_groups)
    assert data.n_groups == n_groups and data.group_names[0] == "age<25|>60"
    measured = 100 * group_counts(data) / group_counts(data).sum()
    np.testing.assert_allclose(measured, shares, atol=2.5)


def test_bank_age_bands_are_contiguous():
    ages = np.arange(18, 96)
    s, names = bank_age_groups(ages, 5)
    assert names == ["age<25|>60", "age 25-32", "age 33-38", "age 39-47", "age 48-60"]
    assert s[ages == 24] == 0 and s[ages == 25] == 1 and s[ages == 32] == 1 and s[ages == 33] == 2
    assert s[ages == 60] == 4 and s[ages == 61] == 0


def test_bank_full_variant_and_duration(loaded):
    full = loaded("bank", variant="full")
    assert len(full.y_train) + len(full.y_test) == 45_211
    assert np.concatenate([full.y_train, full.y_test]).sum() == 5_289
    assert "duration" not in loaded("bank").feature_names
    assert "duration" in loaded("bank", keep_duration=True).feature_names


def test_celeba_options(loaded):
    data = loaded("celeba", sensitive="Young", target="Attractive", use_official_split=True)
    assert (len(data.y_train), len(data.y_test)) == (182_637, 19_962)
    assert group_counts(data).tolist() == [45_865, 156_734]
    assert "Smiling" in data.feature_names and "Attractive" not in data.feature_names
    assert set(np.unique(data.X_train)) == {0.0, 1.0}
    with pytest.raises(ValueError, match="target"):
        load_dataset("celeba", target="Male")
    with pytest.raises(ValueError, match="Hat"):
        load_dataset("celeba", target="Hat")


def test_celeba_as_mangold_et_al(loaded):
    """Label Smiling, group Male (not a feature), the 38 other attributes as -1/1, 90/10 split: n = 182,339."""
    data = loaded("celeba", encoding="pm1", test_size=0.1, random_state=42)
    assert (len(data.y_train), len(data.y_test)) == (182_339, 20_260)  # test part ceil(0.1 × 202,599)
    assert data.n_features == 38 and "Male" not in data.feature_names and "Smiling" not in data.feature_names
    assert set(np.unique(data.X_train)) == set(np.unique(data.X_test)) == {-1.0, 1.0}
    assert data.group_names == ["Female", "Male"] and data.label_names == ["not Smiling", "Smiling"]
    assert group_counts(data).tolist() == [118_165, 84_434]
    assert np.concatenate([data.y_train, data.y_test]).sum() == 97_669
    for y, s in ((data.y_train, data.s_train), (data.y_test, data.s_test)):
        assert s.mean() == pytest.approx(0.4168, abs=5e-4) and y.mean() == pytest.approx(0.4821, abs=5e-4)
    assert "-1/1 kept" in data.description and "clip to [-1, 1]" in data.schema.describe()
    default = loaded("celeba", test_size=0.1, random_state=42)  # encoding="01", unchanged
    assert default.feature_names == data.feature_names and default.schema.columns[0].kind == "binary"
    np.testing.assert_array_equal(default.X_train, (data.X_train + 1) / 2)
    np.testing.assert_array_equal(default.y_train, data.y_train)
    assert set(np.unique(loaded("celeba").X_train)) == {0.0, 1.0}
    with pytest.raises(ValueError, match="encoding.*01, pm1"):
        load_dataset("celeba", encoding="-1/1")


def test_mnist_built_from_test_images(loaded):
    data = loaded("mnist", sensitive="class")
    assert "10,000" in data.description and "test images" in data.description
    assert data.image_shape == (1, 28, 28)
    assert data.X_train.reshape(-1, *data.image_shape).shape == (7_500, 1, 28, 28)
    assert 0.0 <= data.X_train.min() and data.X_train.max() <= 1.0
    np.testing.assert_array_equal(data.s_train, data.y_train)


def test_mnist_default_group_is_not_the_label(loaded):
    """Issue 13, item 11: the default sensitive attribute was the digit itself, so every group-fairness notion
    compared a class with itself; the default is now the image-derived group."""
    data = loaded("mnist")
    assert data.sensitive == "inverted" and data.group_names == ["original", "inverted"]
    assert not np.array_equal(data.s_train, data.y_train)


def test_mnist_unbalanced_cuts_class_eight(loaded):
    data, full = loaded("mnist-unbalanced"), loaded("mnist", sensitive="class")
    assert np.sum(data.y_train == 8) == 63  # round(500 * 7,500 / 60,000)
    assert np.sum(data.y_train == 3) == np.sum(full.y_train == 3)
    np.testing.assert_array_equal(data.y_test, full.y_test)
    assert "63" in data.description
    other = load_dataset("mnist-unbalanced", random_state=1)
    assert np.sum(other.y_train == 8) == 63


def test_synthetic_biases():
    X, y, s = make_synthetic(n_samples=40_000, group_proportions=[0.8, 0.2], label_bias=0.3, feature_bias=2.0)
    assert X.shape == (40_000, 10) and X.dtype == np.float64
    assert s.mean() == pytest.approx(0.2, abs=0.01)
    assert y[s == 1].mean() - y[s == 0].mean() == pytest.approx(0.3, abs=0.02)
    shift = X[(s == 1) & (y == 0)].mean(axis=0) - X[(s == 0) & (y == 0)].mean(axis=0)
    assert np.linalg.norm(shift) == pytest.approx(2.0, abs=0.1)
    X0, y0, s0 = make_synthetic(n_samples=40_000, label_bias=0.0, n_groups=3, n_classes=3)
    assert np.bincount(s0).min() > 13_000
    for r in range(3):
        np.testing.assert_allclose(np.bincount(y0[s0 == r]) / np.sum(s0 == r), 1 / 3, atol=0.02)
    data = load_dataset("synthetic", n_samples=500, n_groups=3, random_state=4)
    assert data.n_groups == 3 and len(data.y_train) == 375


@pytest.mark.parametrize("kwargs", [{"label_bias": 1.5}, {"n_groups": 1}, {"group_proportions": [0.5, 0.4]},
                                    {"n_samples": 0}])
def test_synthetic_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        load_dataset("synthetic", **kwargs)


def _table(y, s):
    n = len(y)
    return Table(name="t", y=np.asarray(y), s=np.asarray(s), label_names=["0", "1"], group_names=["a", "b"],
                 sensitive="s", description="", licence="", n_dropped=0, X=np.arange(n, dtype=float)[:, None])


def test_stratification_falls_back_when_a_cell_is_tiny():
    y = np.array([0, 1] * 50)
    s = np.zeros(100, dtype=int)
    s[0] = 1  # a single row in cell (y=0, s=1)
    data = finish(_table(y, s), 0.25, 0)
    assert "stratified by label only" in data.description
    assert data.y_test.sum() in (12, 13)
    y = np.zeros(100, dtype=int)
    y[5] = 1  # a single row with label 1
    assert "not stratified" in finish(_table(y, s), 0.25, 0).description


def _write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def test_mnist_uses_the_official_split_when_training_images_exist(shared_data, tmp_path, monkeypatch):
    """A stand-in training set of 1,200 images (checksums switched off for it) takes the full-MNIST path."""
    folder = tmp_path / "mnist"
    folder.mkdir()
    for f in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        shutil.copy(shared_data / "mnist" / f, folder)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10), 120)
    _write_idx(folder / "train-images-idx3-ubyte.gz", rng.integers(0, 256, (1_200, 28, 28)))
    _write_idx(folder / "train-labels-idx1-ubyte.gz", labels)
    unchecked = tuple(dataclasses.replace(f, sha256=None, md5=None) for f in _mnist.MNIST_TRAIN_FILES)
    monkeypatch.setattr(_mnist, "MNIST_TRAIN_FILES", unchecked)
    data = load_dataset("mnist", data_home=tmp_path)
    assert (len(data.y_train), len(data.y_test)) == (1_200, 10_000)
    np.testing.assert_array_equal(data.y_train, labels)
    assert "official split" in data.description
    unbalanced = load_dataset("mnist-unbalanced", data_home=tmp_path)
    assert np.sum(unbalanced.y_train == 8) == 10  # round(500 * 1,200 / 60,000)
    assert len(unbalanced.y_train) == 1_200 - 110


def test_credit_says_where_its_copy_comes_from(loaded):
    """The README said UCI while the loader downloads a GitHub copy (issue 13, item 10): the copy is a CSV export of
    UCI's workbook pinned to a commit and a checksum, and the data set's description says so."""
    import re

    from dpfair.datasets import _tabular

    (credit,) = _tabular.CREDIT_FILES
    assert re.search(r"/[0-9a-f]{40}/", credit.url) and credit.sha256
    assert "CSV export of UCI's Excel workbook" in loaded("credit").description
