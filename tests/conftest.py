"""Test configuration: the data home is the offline mirror ``../shared/data``."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
# the start of the PrivacyLeakWarning every fit under reproducible_noise raises (dpfair.privacy.randomness)
REPRODUCIBLE_NOISE_WARNING = "reproducible_noise is active"

if SHARED_DATA.is_dir():
    os.environ.setdefault("DPFAIR_DATA", str(SHARED_DATA))


@pytest.fixture(scope="session", autouse=True)
def _cache_in_a_temporary_folder(tmp_path_factory):
    """dpfair's on-disk cache (calibration's ε evaluations) goes to a temporary folder, never the user's home."""
    before = os.environ.get("DPFAIR_CACHE_DIR")
    os.environ["DPFAIR_CACHE_DIR"] = str(tmp_path_factory.mktemp("dpfair-cache"))
    yield
    if before is None:
        os.environ.pop("DPFAIR_CACHE_DIR")
    else:
        os.environ["DPFAIR_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data mirror {SHARED_DATA} not found")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _reproducible_noise_by_default(request):
    """Tests run on reproducible noise, so that statistical claims hold on fixed seeds and nothing flakes.

    Tests of the secrecy itself (fresh noise per fit, the attacks) are marked ``secret_noise`` and run on the
    OS-seeded secret generators, as users do.
    """
    if request.node.get_closest_marker("secret_noise"):
        yield
        return
    import warnings

    from dpfair.exceptions import PrivacyLeakWarning
    from dpfair.privacy import reproducible_noise

    with reproducible_noise(20261123), warnings.catch_warnings():
        # only the warning that the noise is reproducible (every fit's, the price of fixed seeds): any other
        # PrivacyLeakWarning reaches the test, which asserts it with pytest.warns or gets inputs that do not leak
        warnings.filterwarnings("ignore", REPRODUCIBLE_NOISE_WARNING, PrivacyLeakWarning)
        yield


@pytest.fixture
def replay():
    """``with replay(seed):`` makes secret noise reproducible (tests that compare fits; voids the guarantee)."""
    import contextlib
    import warnings

    from dpfair.exceptions import PrivacyLeakWarning
    from dpfair.privacy import reproducible_noise

    @contextlib.contextmanager
    def replayed(seed: int = 0):
        with reproducible_noise(seed), warnings.catch_warnings():
            warnings.filterwarnings("ignore", REPRODUCIBLE_NOISE_WARNING, PrivacyLeakWarning)
            yield

    return replayed


class ReleaseSpy:
    """Counts every release per part (``calls``, with the noise multipliers seen in ``sigmas``), every part a
    release session hands out (``sessions``: the one door, :class:`dpfair.privacy.session.ReleaseSession`), and
    every draw of secret coins made outside a release (``outside_draws``: must stay 0, the release path is the only
    one)."""

    RELEASES = ("noisy_sum", "randomize", "select", "repeat")
    DRAWS = ("normal", "laplace", "gumbel", "random", "integers", "public_seeds")

    def __init__(self, monkeypatch):
        from collections import Counter

        from dpfair.privacy import Release, SecretRandom

        from dpfair.privacy.session import ReleaseSession

        self.calls: Counter = Counter()
        self.sigmas: dict = {}
        self.sessions: Counter = Counter()  # every part handed out by a release session, by name
        self.inside = 0
        self.outside_draws = 0
        session_release = ReleaseSession.release

        def through_session(session, name, *args, **kwargs):
            self.sessions[name] += 1
            return session_release(session, name, *args, **kwargs)

        monkeypatch.setattr(ReleaseSession, "release", through_session)
        for method in self.RELEASES:
            monkeypatch.setattr(Release, method, self._wrap_release(getattr(Release, method)))
        for method in self.DRAWS:
            monkeypatch.setattr(SecretRandom, method, self._wrap_draw(getattr(SecretRandom, method)))

    def _wrap_release(self, fn):
        def wrapped(release, *args, **kwargs):
            self.calls[release.part.name] += 1
            self.sigmas.setdefault(release.part.name, set()).update(release.noise_multipliers)
            self.inside += 1
            try:
                return fn(release, *args, **kwargs)
            finally:
                self.inside -= 1
        return wrapped

    def _wrap_draw(self, fn):
        def wrapped(secret, *args, **kwargs):
            if not self.inside:
                self.outside_draws += 1
            return fn(secret, *args, **kwargs)
        return wrapped


@pytest.fixture
def release_spy(monkeypatch) -> ReleaseSpy:
    """A :class:`ReleaseSpy` on :class:`dpfair.privacy.Release` and :class:`dpfair.privacy.SecretRandom`."""
    return ReleaseSpy(monkeypatch)
