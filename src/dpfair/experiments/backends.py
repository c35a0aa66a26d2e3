"""Where a sweep's tasks run: :func:`get_backend` (``"local"`` processes; ``"dask"`` for a cluster).

A backend maps a function over tasks and yields ``(index, result)`` as each task finishes, in any order;
the sweep stores each result as it arrives, so whatever finished before a kill is kept. Workers only
compute: the results store is written by the process that runs the sweep.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
from collections.abc import Callable, Iterator

BACKENDS = ("local", "dask")


def threads_per_worker(workers: int) -> int:
    """Each of ``workers`` processes on this machine gets an equal share of its cores for torch's threads."""
    return max(1, (os.cpu_count() or 1) // workers)


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


class LocalBackend:
    """Tasks spread over ``workers`` processes on this machine (spawned, each with its share of the cores);
    ``workers=1`` runs them in this process, one after another."""

    def __init__(self, workers: int | None = None):
        cores = os.cpu_count() or 1
        self.workers = max(1, min(workers or cores, cores))
        self._pool = None

    def __enter__(self):
        if self.workers > 1:
            self._pool = cf.ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_init_worker,
                                                initargs=(threads_per_worker(self.workers),))
        return self

    def __exit__(self, *exc):
        if self._pool is not None:
            self._pool.shutdown(wait=exc[0] is None, cancel_futures=True)
        return False

    def map_unordered(self, fn: Callable, tasks: list) -> Iterator[tuple[int, object]]:
        if self._pool is None:
            for i, task in enumerate(tasks):
                yield i, fn(task)
            return
        futures = {self._pool.submit(fn, task): i for i, task in enumerate(tasks)}
        for future in cf.as_completed(futures):
            yield futures[future], future.result()


def get_backend(name: str = "local", *, workers: int | None = None, address: str | None = None):
    """The backend ``name``: ``"local"`` (:class:`LocalBackend`) or ``"dask"`` (a Dask cluster at
    ``address``, or a local one on loopback when none is given)."""
    if name == "local":
        if address is not None:
            raise ValueError("the local backend takes no --address; use --backend dask to reach a cluster")
        return LocalBackend(workers)
    if name == "dask":
        from dpfair.experiments.dask_backend import DaskBackend

        return DaskBackend(workers=workers, address=address)
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
