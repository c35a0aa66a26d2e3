"""The Dask backend of ``dpfair sweep``: a local cluster on loopback trains what the local backend trains,
listens on 127.0.0.1 only, is gone when the sweep ends (or is interrupted), never merges two runs of a
task into one, and says how to resume when a worker dies."""

from __future__ import annotations

import importlib.util
import os
import socket
import sys

import pytest

from dpfair.experiments.backends import get_backend
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.experiments.sweep import run_sweep

needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason='Dask is not installed: pip install "dpfair[distributed]" (the test extra has it)')


def _listening() -> set[tuple[str, int]]:
    """(ip, port) of every listening TCP socket of this process and its descendants."""
    import psutil

    me = psutil.Process()
    out = set()
    for process in [me, *me.children(recursive=True)]:
        try:
            conns = (getattr(process, "net_connections", None) or process.connections)("inet")
        except psutil.Error:
            continue
        out |= {(c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN}
    return out


def _refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


class _Watched:
    """A backend that records, while it runs, its scheduler's address and the sockets it listens on."""

    def __init__(self, backend, seen: dict):
        self.backend, self.seen = backend, seen

    def __enter__(self):
        self.seen["before"] = _listening()
        self.backend.__enter__()
        self.seen["scheduler"] = self.backend.scheduler_address
        self.seen["listening"] = _listening() - self.seen["before"]
        return self

    def __exit__(self, *exc):
        return self.backend.__exit__(*exc)

    def map_unordered(self, fn, tasks):
        return self.backend.map_unordered(fn, tasks)


@needs_dask
def test_the_tiny_sweep_on_a_loopback_dask_cluster_stores_what_the_local_backend_stores_and_closes_it(
        tmp_path, monkeypatch):
    from dpfair.experiments import sweep

    spec = SweepSpec.load("tiny")
    local = ResultsStore(tmp_path / "local.sqlite")
    run_sweep(spec, local, workers=1, verbose=False)

    seen: dict = {}
    monkeypatch.setattr(sweep, "get_backend", lambda *a, **k: _Watched(get_backend(*a, **k), seen))
    dask = ResultsStore(tmp_path / "dask.sqlite")
    summary = run_sweep(spec, dask, backend="dask", workers=2, verbose=False)

    assert summary.trained == len(spec.points()) == 6 and not summary.failed
    keys = list(dask.frame()["key"])
    assert len(keys) == len(set(keys)) == 6  # each model stored once
    assert set(keys) == dask.done_keys() == local.done_keys() == {p.key for p in spec.points()}
    # the scheduler, two nannies, two workers and their HTTP servers, all on loopback, over TLS
    assert seen["scheduler"].startswith("tls://127.0.0.1:")
    assert ("127.0.0.1", _port(seen["scheduler"])) in seen["listening"]
    assert len(seen["listening"]) >= 5 and {ip for ip, _ in seen["listening"]} == {"127.0.0.1"}
    # closed with the sweep: nothing of it listens, the scheduler's port refuses connections
    assert not (_listening() - seen["before"]) & seen["listening"]
    assert all(_refuses(port) for _, port in seen["listening"])


@needs_dask
def test_an_interrupted_sweep_closes_the_cluster_and_equal_tasks_run_apart():
    from dpfair.experiments.dask_backend import DaskBackend

    before = _listening()
    with pytest.raises(KeyboardInterrupt), DaskBackend(workers=2) as backend:
        address = backend.scheduler_address
        opened = _listening() - before
        # pure=False: two tasks with equal inputs are two runs (Dask would otherwise hash them to one
        # result, and a repeated private fit would reuse its noise); 16 random bytes repeat with prob. 2^-128
        draws = [result for _, result in backend.map_unordered(os.urandom, [16, 16])]
        assert len(draws) == 2 and draws[0] != draws[1]
        for _ in backend.map_unordered(abs, [-1, -2]):
            raise KeyboardInterrupt
    assert backend.scheduler_address is None
    assert _refuses(_port(address)) and not (_listening() - before) & opened


@needs_dask
def test_a_worker_that_dies_is_one_error_naming_the_backend_and_how_to_resume():
    import dask
    import distributed  # noqa: F401  (adds its settings to dask.config before they are set below)

    from dpfair.experiments.dask_backend import DaskBackend

    # allowed-failures 0: the task is not retried on a restarted worker
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), DaskBackend(workers=1) as backend, \
            pytest.raises(ConnectionError, match=r"^dask backend: a worker died .* run the same sweep again"):
        list(backend.map_unordered(os._exit, [3]))


@needs_dask
def test_an_unreachable_scheduler_or_workers_with_an_address_is_a_clear_error():
    import dask
    import distributed  # noqa: F401  (adds its settings to dask.config before they are set below)

    with pytest.raises(ValueError, match="own workers"):
        get_backend("dask", workers=2, address="tcp://127.0.0.1:8786")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), \
            pytest.raises(ConnectionError, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"), \
            get_backend("dask", address=f"tcp://127.0.0.1:{port}"):
        pass


def test_without_dask_the_backend_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
    with pytest.raises(ValueError, match=r'pip install "dpfair\[distributed\]"'):
        get_backend("dask", workers=2)
