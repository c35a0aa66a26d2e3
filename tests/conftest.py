"""Test configuration: the data home is the offline mirror ``../shared/data``."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()

if SHARED_DATA.is_dir():
    os.environ.setdefault("DPFAIR_DATA", str(SHARED_DATA))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data mirror {SHARED_DATA} not found")
    return SHARED_DATA
