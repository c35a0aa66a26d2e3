"""File lookup, embedded copies, downloads (mocked) and checksums."""

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from dpfair.datasets import _files, data_home, load_dataset
from dpfair.datasets._tabular import PARKINSONS_FILES
from dpfair.exceptions import ChecksumError, DataNotFoundError


def assert_same(a, b):
    for x, y in zip(a.train + a.test, b.train + b.test):
        np.testing.assert_array_equal(x, y)
    assert a.feature_names == b.feature_names


@pytest.fixture
def empty_env(tmp_path, monkeypatch):
    """An empty $DPFAIR_DATA and an empty home folder (so no ~/.cache/dpfair either)."""
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir()
    data.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("DPFAIR_DATA", str(data))
    return data


def test_data_home_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("DPFAIR_DATA", str(tmp_path / "env"))
    assert data_home(tmp_path / "explicit") == tmp_path / "explicit"
    assert data_home() == tmp_path / "env"
    monkeypatch.delenv("DPFAIR_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_home() == tmp_path / "home" / ".cache" / "dpfair"


@pytest.mark.parametrize("name", ["adult", "compas"])
def test_embedded_copy_without_any_data_home(loaded, empty_env, name):
    data = load_dataset(name)
    assert_same(data, loaded(name))


def test_cache_home_is_searched_after_dpfair_data(shared_data, empty_env, tmp_path, loaded):
    cache = tmp_path / "home" / ".cache" / "dpfair" / "german"
    cache.mkdir(parents=True)
    shutil.copy(shared_data / "german" / "german.data", cache)
    assert_same(load_dataset("german"), loaded("german"))


def test_missing_file_offline_names_file_and_home(empty_env):
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("german")
    msg = str(err.value)
    assert "german.data" in msg and str(empty_env) in msg and "archive.ics.uci.edu" in msg
    assert "network disabled" in msg
    assert isinstance(err.value, FileNotFoundError)


def test_a_failed_download_names_the_url_once_and_leaves_no_folder(empty_env):
    """Issue 13, item 10: the message gave the URL twice and the failed download left an empty folder."""
    with pytest.raises(DataNotFoundError) as err:
        load_dataset("german")
    msg = str(err.value)
    assert "download from http" not in msg and msg.count("download it from https://archive.ics.uci.edu") == 1
    assert not (empty_env / "german").exists()


def test_download_switched_off(empty_env):
    with pytest.raises(DataNotFoundError, match="downloading is switched off"):
        load_dataset("german", download=False)


def test_download_into_data_home_then_verified(shared_data, empty_env, monkeypatch, loaded):
    urls = []

    def fake_download(url, dest):
        urls.append(url)
        shutil.copy(shared_data / "parkinsons" / "parkinsons_updrs.data", dest)

    monkeypatch.setattr(_files, "_download", fake_download)
    data = load_dataset("parkinsons")
    assert urls == [PARKINSONS_FILES[0].url]
    assert (empty_env / "parkinsons" / "parkinsons_updrs.data").is_file()
    assert_same(data, loaded("parkinsons"))


def test_corrupt_download_is_rejected(empty_env, monkeypatch):
    monkeypatch.setattr(_files, "_download", lambda url, dest: Path(dest).write_bytes(b"not the data\n"))
    with pytest.raises(ChecksumError, match="downloaded"):
        load_dataset("german")
    assert not (empty_env / "german" / "german.data").exists()


def test_corrupt_file_on_disk_raises_checksum_error(shared_data, tmp_path):
    folder = tmp_path / "german"
    folder.mkdir()
    raw = (shared_data / "german" / "german.data").read_bytes()
    (folder / "german.data").write_bytes(raw.replace(b"A11", b"A12", 1))
    with pytest.raises(ChecksumError) as err:
        load_dataset("german", data_home=tmp_path)
    msg = str(err.value)
    assert "german.data" in msg and "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871" in msg
    assert "delete it" in msg


def test_gzip_copy_is_read_and_checked_uncompressed(shared_data, tmp_path, loaded):
    folder = tmp_path / "german"
    folder.mkdir()
    (folder / "german.data.gz").write_bytes(gzip.compress((shared_data / "german" / "german.data").read_bytes()))
    assert_same(load_dataset("german", data_home=tmp_path), loaded("german"))


def test_explicit_path_file_or_folder(shared_data, tmp_path, loaded):
    assert_same(load_dataset("german", path=shared_data / "german" / "german.data"), loaded("german"))
    assert_same(load_dataset("communities", path=shared_data / "communities"), loaded("communities"))
    with pytest.raises(DataNotFoundError, match="explicit path"):
        load_dataset("german", path=tmp_path)


def test_explicit_path_beats_the_embedded_copy(shared_data, tmp_path):
    (tmp_path / "adult.data").write_bytes(b"corrupt\n")
    shutil.copy(shared_data / "adult" / "adult.test", tmp_path)
    with pytest.raises(ChecksumError, match="adult.data"):
        load_dataset("adult", path=tmp_path / "adult.data")


def test_checksum_is_computed_once_per_file_version(shared_data, tmp_path, monkeypatch):
    folder = tmp_path / "german"
    folder.mkdir()
    shutil.copy(shared_data / "german" / "german.data", folder)
    calls = []
    real_new = _files.hashlib.new
    monkeypatch.setattr(_files.hashlib, "new", lambda *args: calls.append(args[0]) or real_new(*args))
    load_dataset("german", data_home=tmp_path)
    load_dataset("german", data_home=tmp_path)
    assert calls == ["sha256"]


def test_celeba_missing_says_where_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="list_attr_celeba.txt.*mmlab.ie.cuhk.edu.hk"):
        load_dataset("celeba", data_home=tmp_path)
