"""Fixtures for the data set tests: no network, and data sets loaded once per test session."""

import pytest

from dpfair.datasets import _files, load_dataset


@pytest.fixture(scope="session", autouse=True)
def no_network():
    """Every download fails as if offline, so that the suite never touches the network."""

    def offline(url, dest):
        raise OSError(f"network disabled in tests ({url})")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_files, "_download", offline)
        yield


@pytest.fixture(scope="session")
def loaded(shared_data):
    """``loaded(name, **options)``: the data set from the mirror, loaded once per session and options."""
    cache = {}

    def get(name, **options):
        key = (name, tuple(sorted(options.items())))
        if key not in cache:
            where = {} if name == "synthetic" else {"data_home": shared_data}
            cache[key] = load_dataset(name, **where, **options)
        return cache[key]

    return get
