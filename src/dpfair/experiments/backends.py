"""Where a sweep's tasks run: :func:`get_backend` (``"local"`` processes; ``"dask"`` for a cluster).

A backend maps a function over tasks and yields ``(index, result)`` as each task finishes, in any order;
the sweep stores each result as it arrives, so whatever finished before a kill is kept. Workers only
compute: the results store is written by the process that runs the sweep (the driver).

Workers end with their driver. A worker the driver started dies with it, whether the driver ends
normally, on an error, on Ctrl-C or killed (SIGKILL, SIGTERM): nothing a worker holds is lost, since a
task not yet stored is trained again by the next run. Ctrl-C is the driver's alone: it stops the sweep
and says once what is stored, while the workers, which never see the signal, are ended by it. What a
worker writes to its stderr (warnings, a traceback as it dies) goes to the backend's ``log`` file, not
the terminal; the log is published as the store is (it holds no more than the terminal would have).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

BACKENDS = ("local", "dask")
#: What a sweep stopped by a lost worker or cluster says about its results.
RESUME = "finished tasks are stored: run the same sweep again to train the rest"

#: Seconds between a worker's looks at whether its driver still runs (where the kernel cannot tell it).
PARENT_POLL_S = 0.5


def threads_per_worker(workers: int) -> int:
    """Each of ``workers`` processes on this machine gets an equal share of its cores for torch's threads."""
    return max(1, (os.cpu_count() or 1) // workers)


def end_with_driver(driver: int) -> None:
    """Make this process end as soon as process ``driver``, its parent, does.

    On Linux the kernel kills it when its parent exits (``prctl(PR_SET_PDEATHSIG, SIGKILL)``); everywhere a
    daemon thread checks every :data:`PARENT_POLL_S` seconds that its parent is still ``driver`` (an orphan
    is adopted by another process) and ends the process otherwise. A driver that died before this call
    ends it at once.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass  # the thread below still ends it
    if os.getppid() != driver:
        os._exit(1)

    def watch():
        while os.getppid() == driver:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="dpfair-end-with-driver", daemon=True).start()


def log_stderr_to(log: str | os.PathLike) -> None:
    """Send this process's stderr (file descriptor 2, so Python's tracebacks and C libraries' messages
    alike) to the end of the file ``log``."""
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def log_note(log) -> str:
    """The words an error adds to name the workers' log file (nothing without one)."""
    return "" if log is None else f" (the workers' messages are in {log})"


def drop_if_empty(log) -> None:
    """Remove the workers' log file ``log`` when nothing was written to it."""
    if log is not None:
        with contextlib.suppress(OSError):
            if os.stat(log).st_size == 0:
                os.remove(log)


@contextlib.contextmanager
def children_without_sigint():
    """Processes (and threads) started from this thread inside the block never receive SIGINT: it is
    blocked in this thread, and a blocked signal stays blocked in whatever the thread starts, across
    ``exec`` too, from the first instruction on. A Ctrl-C during the block is held, not lost: it arrives
    when the block ends. (No-op where signals cannot be blocked.)"""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


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
