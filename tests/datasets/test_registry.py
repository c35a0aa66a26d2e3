"""load_dataset argument errors and dataset_info."""

import pytest

from dpfair.datasets import dataset_info, list_datasets, load_dataset


def test_unknown_data_set_lists_the_names():
    with pytest.raises(ValueError, match="'adullt'.*adult.*compas"):
        load_dataset("adullt")
    with pytest.raises(ValueError, match="adullt"):
        dataset_info("adullt")


def test_unknown_sensitive_attribute_lists_the_valid_ones():
    with pytest.raises(ValueError, match="'gender'.*sex, race, race_binary, sex\\*race"):
        load_dataset("adult", sensitive="gender")
    with pytest.raises(ValueError, match="'sex'.*class"):
        load_dataset("mnist", sensitive="sex")


@pytest.mark.parametrize("name, options, word", [
    ("adult", {"orignal_split": True}, "orignal_split.*original_split"),
    ("bank", {"n_groups": 4}, "n_groups.*2, 3, 5"),
    ("bank", {"variant": "uci"}, "variant.*kaggle, full"),
    ("adult", {"original_split": "yes"}, "original_split"),
    ("german", {"test_size": 1.5}, "test_size"),
    ("synthetic", {"path": "x"}, "path"),
])
def test_bad_options(name, options, word):
    with pytest.raises(ValueError, match=word):
        load_dataset(name, **options)


def test_info_for_present_data(shared_data):
    info = dataset_info("german", data_home=shared_data)
    assert info["on_disk"] and info["rows"] == 1_000 and info["features"] == 58
    assert info["groups"] == ["Female", "Male"] and info["group_sizes"] == {"Female": 310, "Male": 690}
    assert info["label_balance"] == pytest.approx(0.7)
    assert info["sensitive_options"] == ["sex", "age"] and "CC BY" in info["licence"]
    mnist = dataset_info("mnist", data_home=shared_data)
    assert len(mnist["label_balance"]) == 10 and mnist["rows"] == 10_000


def test_info_for_absent_data(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    info = dataset_info("dutch", data_home=tmp_path)
    assert info["on_disk"] is False and info["rows"] is None and info["group_sizes"] is None
    assert info["files"] == ["dutch/dutch_census_2001.arff"] and info["licence"]
    embedded = dataset_info("compas", data_home=tmp_path)
    assert embedded["on_disk"] and embedded["rows"] == 5_278


def test_info_for_every_data_set_does_not_crash(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in list_datasets():
        info = dataset_info(name, data_home=tmp_path)
        assert info["name"] == name and isinstance(info["on_disk"], bool)
