"""A sweep's tasks on a Dask cluster: :class:`DaskBackend` (``dpfair sweep --backend dask``).

Dask was chosen over Ray because its local cluster listens on 127.0.0.1 only, where Ray's servers bind
every interface (a sweep's workers hold private data); start-up, memory, installed size and per-task
overhead, all small against a task that trains for seconds, are measured in
``results/experiments/backends.md`` (``benchmarks/distributed_backends.py``).

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

Ending. The local cluster's workers end with this process however it ends (Dask's workers watch their
nanny, which lives in this process), ignore Ctrl-C once started (the sweep's process handles it and
closes the cluster), and write their messages (and this process's Dask scheduler and nannies theirs) to the backend's ``log``
file instead of the terminal. A sweep whose tasks cannot finish says so in bounded time: a task whose
workers died is an error at once, and so is a cluster left without workers for :data:`NO_WORKER_S`
seconds or a lost scheduler (looked at every :data:`HEALTH_S` seconds); closing the cluster after an
error takes at most :data:`CLOSE_S` seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator

from dpfair.experiments.workers import (
    RESUME,
    drop_if_empty,
    log_note,
    log_stderr_to,
    threads_per_worker,
)

#: Seconds between looks at the cluster while no task finishes.
HEALTH_S = 1.0
#: Seconds a cluster may have no worker before the sweep stops with an error.
NO_WORKER_S = 60.0
#: Seconds closing the client and the local cluster may take after an error.
CLOSE_S = 10.0
_LOG_ENV = "DPFAIR_WORKER_LOG"

_INSTALL = 'pip install "dpfair[distributed]"'


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

    log : path, optional
        The file that the local cluster's workers, scheduler and nannies write their messages to (default:
        the terminal). Not used with ``address``: that cluster's workers log where their owner said.
    """

    def __init__(self, workers: int | None = None, address: str | None = None,
                 log: str | os.PathLike | None = None):
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
        self.log = None if log is None or address is not None else os.fspath(log)
        self._cluster = None
        self._client = None
        self._handlers = None

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

        share = str(threads_per_worker(self.workers))
        env = {"OMP_NUM_THREADS": share, "MKL_NUM_THREADS": share}
        if self.log is not None:
            env[_LOG_ENV] = self.log
            dask_logger = logging.getLogger("distributed")
            self._handlers = dask_logger.handlers[:]
            handler = logging.FileHandler(self.log, delay=True)
            handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
            dask_logger.handlers[:] = [handler]
        try:
            # No HTTP routes: the scheduler and workers still open an HTTP server each (on 127.0.0.1, a free
            # port), which then answers nothing — no dashboard, no JSON views of the tasks. Each worker runs
            # dask_setup below as it starts (a preload).
            with dask.config.set({"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}):
                self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                             host="127.0.0.1", protocol="tls://", security=Security.temporary(),
                                             dashboard_address=None,
                                             scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                             env=env, preload=[__name__])
            self._client = Client(self._cluster)
        except RuntimeError as exc:  # "Nanny failed to start": a worker process died as it started
            self.__exit__()
            raise ConnectionError(f"dask backend: a worker died while the local cluster started ({exc}); "
                                  f"{RESUME}{log_note(self.log)}") from None
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self._client is not None:
                _bounded(self._client.close, CLOSE_S)
        finally:
            self._client = None
            closed = True
            try:
                if self._cluster is not None:
                    closed = _bounded(self._cluster.close, CLOSE_S)
            finally:
                self._cluster = None
                # a cluster not closed in time may still log (a nanny restarting a worker): into the file
                if self._handlers is not None and closed:
                    dask_logger = logging.getLogger("distributed")
                    for handler in dask_logger.handlers:
                        handler.close()
                    dask_logger.handlers[:] = self._handlers
                    self._handlers = None
                drop_if_empty(self.log)
        return False

    @property
    def client(self):
        """The Dask client of this backend (``None`` outside the ``with`` block)."""
        return self._client

    @property
    def scheduler_address(self) -> str | None:
        """The scheduler this backend is connected to (``None`` outside the ``with`` block)."""
        return None if self._client is None else self._client.scheduler.address

    def map_unordered(self, fn: Callable, tasks) -> Iterator[tuple[int, object]]:
        """``(i, fn(tasks[i]))`` for every task, in the order they finish. A task that raises re-raises
        its error here; a worker lost mid-task (killed, out of memory, its machine gone) raises a
        ``ConnectionError`` that says how to resume, and so does a cluster without a worker for
        :data:`NO_WORKER_S` seconds or a lost scheduler. Tasks still pending when the caller stops are
        cancelled."""
        import time
        from concurrent.futures import CancelledError

        from distributed import wait
        from distributed.scheduler import KilledWorker

        futures = [self._client.submit(fn, task, pure=False) for task in tasks]
        index = {future.key: i for i, future in enumerate(futures)}
        pending = set(futures)
        workers_seen = time.monotonic()
        try:
            while pending:
                try:
                    done = wait(list(pending), timeout=HEALTH_S, return_when="FIRST_COMPLETED").done
                except TimeoutError:
                    done = set()
                if not done:  # nothing finished: is anything still able to?
                    if self._client.status != "running":
                        raise CancelledError
                    if self._client.nthreads():
                        workers_seen = time.monotonic()
                    elif time.monotonic() - workers_seen > NO_WORKER_S:
                        raise ConnectionError(
                            f"dask backend: a worker died and the cluster has had no worker for {NO_WORKER_S:g} s "
                            f"({len(pending)} tasks left); {RESUME}{log_note(self.log)}")
                    continue
                for future in done:
                    try:
                        result = future.result()
                    except KilledWorker:
                        raise ConnectionError(f"dask backend: a worker died while running task "
                                              f"{index[future.key]} ({fn.__name__}); {RESUME}{log_note(self.log)}") from None
                    pending.discard(future)
                    future.release()
                    yield index[future.key], result
        except CancelledError:
            raise ConnectionError(f"dask backend: the connection to the scheduler was lost; {RESUME}{log_note(self.log)}") from None
        finally:
            if pending and self._client is not None and self._client.status == "running":
                self._client.cancel(list(pending))


def _bounded(close: Callable, seconds: float) -> bool:
    """``close(timeout=seconds)``; ``False`` when it took longer (or failed): what it did not close ends with
    this process (the workers watch it)."""
    try:
        close(timeout=seconds)
    except (TimeoutError, OSError, RuntimeError):
        return False
    return True


def dask_setup(worker) -> None:
    """Run by each worker of a local cluster as it starts (a Dask preload): Ctrl-C in the terminal is left
    to the sweep's process, and the worker's stderr goes to the sweep's log file."""
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the worker's main thread: it keeps Dask's handling
        pass
    log = os.environ.get(_LOG_ENV)
    if log:
        log_stderr_to(log)
