"""What every sweep backend's workers share: their share of the cores, ending with their driver, their log.

:mod:`dpfair.experiments.backends` (local processes) and :mod:`dpfair.experiments.dask_backend` (a Dask
cluster) both start workers that compute a sweep's tasks; the rules those workers follow are here, once: each
gets an equal share of the machine's cores, dies with the driver that started it, never sees Ctrl-C, and
writes its stderr to the backend's log file (which holds no more than the terminal would have).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

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
