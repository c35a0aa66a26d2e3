"""Where a sweep's tasks run: :func:`get_backend` (``"local"`` processes; ``"dask"`` for a cluster).

A backend maps a function over tasks and yields ``(index, result)`` as each task finishes, in any order;
the sweep stores each result as it arrives, so whatever finished before a kill is kept. Workers only
compute: the results store is written by the process that runs the sweep (the driver).

Workers end with their driver. A worker the driver started dies with it, whether the driver ends
normally, on an error, on Ctrl-C or killed (SIGKILL, SIGTERM): nothing a worker holds is lost, since a
task not yet stored is trained again by the next run. Ctrl-C is the driver's alone: it stops the sweep
and says once what is stored, while the workers, which never see the signal, are ended by it. What a
worker writes to its stderr (warnings, a traceback as it dies) goes to the backend's ``log`` file, not
the terminal; the log is published as the store is (it holds no more than the terminal would have). These
rules of the workers, shared with the Dask backend, live in :mod:`dpfair.experiments.workers`.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from dpfair.experiments.workers import (
    RESUME,
    children_without_sigint,
    drop_if_empty,
    end_with_driver,
    log_note,
    log_stderr_to,
    threads_per_worker,
)

BACKENDS = ("local", "dask")


def _init_worker(threads: int, driver: int, log: str | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    end_with_driver(driver)
    if log is not None:
        log_stderr_to(log)
    import torch

    torch.set_num_threads(threads)


class LocalBackend:
    """Tasks spread over ``workers`` processes on this machine (spawned, each with its share of the cores);
    ``workers=1`` runs them in this process, one after another. The worker processes end with this
    process (see the module's text); their stderr goes to ``log`` when one is given."""

    def __init__(self, workers: int | None = None, log: str | os.PathLike | None = None):
        cores = os.cpu_count() or 1
        self.workers = max(1, min(workers or cores, cores))
        self.log = None if log is None else Path(log)
        self._pool = None
        self._processes: list = []

    def __enter__(self):
        if self.workers > 1:
            before = set(multiprocessing.active_children())
            self._pool = cf.ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"), initializer=_init_worker,
                initargs=(threads_per_worker(self.workers), os.getpid(), None if self.log is None else str(self.log)))
            try:
                with children_without_sigint():
                    # one call per worker starts every worker now, each never to see SIGINT
                    for _ in range(self.workers):
                        self._pool.submit(int)
            finally:
                self._processes = [p for p in multiprocessing.active_children() if p not in before]
                if sys.exc_info()[0] is not None:  # Ctrl-C held during the block arrives as it ends
                    self.__exit__(*sys.exc_info())
        return self

    def _end(self) -> None:
        """Stop the workers now (a task they are training is given up) and wait for them to end."""
        for process in self._processes:
            if process.is_alive():
                process.kill()
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __exit__(self, *exc):
        if self._pool is not None:
            if exc[0] is None:
                self._pool.shutdown(wait=True)
            else:  # an error or Ctrl-C: what the workers still train would not be stored
                self._end()
            self._pool = None
            drop_if_empty(self.log)
        return False

    def map_unordered(self, fn: Callable, tasks) -> Iterator[tuple[int, object]]:
        if self._pool is None:
            for i, task in enumerate(tasks):
                yield i, fn(task)
            return
        with children_without_sigint():
            futures = {self._pool.submit(fn, task): i for i, task in enumerate(tasks)}
        for future in cf.as_completed(futures):
            try:
                result = future.result()
            except cf.process.BrokenProcessPool:
                raise ConnectionError(f"local backend: a worker died while running task {futures[future]} "
                                      f"({fn.__name__}); {RESUME}{log_note(self.log)}") from None
            yield futures[future], result


def get_backend(name: str = "local", *, workers: int | None = None, address: str | None = None,
                log: str | os.PathLike | None = None):
    """The backend ``name``: ``"local"`` (:class:`LocalBackend`) or ``"dask"`` (a Dask cluster at
    ``address``, or a local one on loopback when none is given). The workers it starts write their
    stderr to ``log`` (default: the terminal)."""
    if name == "local":
        if address is not None:
            raise ValueError("the local backend takes no --address; use --backend dask to reach a cluster")
        return LocalBackend(workers, log=log)
    if name == "dask":
        from dpfair.experiments.dask_backend import DaskBackend

        return DaskBackend(workers=workers, address=address, log=log)
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
