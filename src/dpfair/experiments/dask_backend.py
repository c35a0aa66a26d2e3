"""A sweep's tasks on a Dask cluster: :class:`DaskBackend` (``dpfair sweep --backend dask``).

Dask was chosen over Ray by measurement (``benchmarks/distributed_backends.py``,
``results/experiments/backends.md``): its local cluster listens on 127.0.0.1 only, where Ray's servers
bind every interface; on a 2-core machine it started in 1-2 s (Ray's in about 5 s) with half Ray's memory,
and it installs 34 MB beyond dpfair's dependencies (Ray 238 MB). The ``tiny`` sweep took as long through
either (training dominates); Dask's per-task overhead (about 5 ms, Ray's 1 ms) is nothing against a
task that trains for seconds.

Privacy. Workers only compute: each task draws its noise on the worker, from that worker's secret
generator, and returns what the results store keeps; the store and its privacy accounting stay with the
process that runs the sweep. Tasks are submitted with ``pure=False``, so Dask never deduplicates two
tasks with equal inputs into one result (a repeated run must draw fresh noise, not reuse a release).

Safety. Without an ``address`` the cluster is a local one whose scheduler, nannies and workers listen on
127.0.0.1 only, with no dashboard, and it is closed when the ``with`` block ends, normally, on an error or
on Ctrl-C, so nothing is left listening. Its connections use TLS with certificates made for this cluster
and held in memory (``Security.temporary``, both sides authenticated): another user of the machine cannot
join it or submit code to the workers that hold the private data. A cluster at an ``address`` is as safe
as its owner made it: Dask's own TLS settings (``distributed.comm.tls`` in its configuration) apply to
the client here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

_INSTALL = 'pip install "dpfair[distributed]"'
_RESUME = "finished tasks are stored: run the same sweep again to train the rest"


class DaskBackend:
    """Tasks spread over the workers of a Dask cluster, yielded ``(index, result)`` as each finishes.

    Parameters
    ----------
    workers : int, optional
        Worker processes of the local cluster (default: one per core; each gets an equal share of the
        cores for torch's threads). Not allowed with ``address``: a running cluster has its own workers.
    address : str, optional
        A running Dask scheduler, e.g. ``"tcp://10.0.0.5:8786"`` (``dask scheduler`` on one machine,
        ``dask worker tcp://10.0.0.5:8786`` on each machine that computes). Every worker must have the same
        dpfair version (and torch) as this process, since tasks run dpfair's code there, and the data sets
        of the sweep under its ``DPFAIR_DATA`` (or its default data home). Without an address, a local
        cluster on 127.0.0.1 is started and closed with the ``with`` block.
    """

    def __init__(self, workers: int | None = None, address: str | None = None):
        try:
            import distributed  # noqa: F401
        except ImportError as exc:
            raise ValueError(f"the dask backend needs Dask's distributed scheduler: {_INSTALL}") from exc
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers}")
        if workers is not None and address is not None:
            raise ValueError("--workers sets the size of a local Dask cluster; the cluster at --address has its "
                             "own workers (start more with `dask worker ADDRESS`)")
        self.workers = workers or os.cpu_count() or 1
        self.address = address
        self._cluster = None
        self._client = None

    def __enter__(self):
        from distributed import Client, LocalCluster

        if self.address is not None:
            try:
                self._client = Client(self.address)
            except OSError as exc:
                raise ConnectionError(f"dask backend: cannot reach the Dask scheduler at {self.address} ({exc}); "
                                      "check that `dask scheduler` runs there and that this machine can "
                                      "connect to it") from None
            return self
        import dask
        from distributed.security import Security

        from dpfair.experiments.backends import threads_per_worker

        share = str(threads_per_worker(self.workers))
        # No HTTP routes: the scheduler and workers still open an HTTP server each (on 127.0.0.1, a free port),
        # which then answers nothing — no dashboard, no JSON views of the tasks.
        with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}):
            self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                         host="127.0.0.1", protocol="tls://", security=Security.temporary(),
                                         dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                         env={"OMP_NUM_THREADS": share, "MKL_NUM_THREADS": share})
        try:
            self._client = Client(self._cluster)
        except BaseException:
            self._cluster.close()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self._client is not None:
                self._client.close()
        finally:
            self._client = None
            if self._cluster is not None:
                self._cluster.close()
                self._cluster = None
        return False

    @property
    def scheduler_address(self) -> str | None:
        """The scheduler this backend is connected to (``None`` outside the ``with`` block)."""
        return None if self._client is None else self._client.scheduler.address

    def map_unordered(self, fn: Callable, tasks: list) -> Iterator[tuple[int, object]]:
        """``(i, fn(tasks[i]))`` for every task, in the order they finish. A task that raises re-raises
        its error here; a worker lost mid-task (killed, out of memory, its machine gone) raises a
        ``ConnectionError`` that says how to resume. Tasks still pending when the caller stops are
        cancelled."""
        from concurrent.futures import CancelledError

        from distributed import as_completed
        from distributed.scheduler import KilledWorker

        futures = [self._client.submit(fn, task, pure=False) for task in tasks]
        index = {future.key: i for i, future in enumerate(futures)}
        pending = set(futures)
        try:
            for future in as_completed(futures):
                try:
                    result = future.result()
                except KilledWorker:
                    raise ConnectionError(f"dask backend: a worker died while running task {index[future.key]} "
                                          f"({fn.__name__}); {_RESUME}") from None
                except CancelledError:
                    raise ConnectionError(f"dask backend: the connection to the scheduler was lost; {_RESUME}") \
                        from None
                pending.discard(future)
                future.release()
                yield index[future.key], result
        finally:
            if pending and self._client is not None and self._client.status == "running":
                self._client.cancel(list(pending))
