"""Files written as one unit: all of them or none, never replacing a file unless asked (:func:`write_atomic`).

Every file of a unit is written in full to a temporary file in its folder first; a failure there (a full disk)
removes the temporaries and leaves the folder as it was. Then, under a lock on the folder (:func:`folder_lock`),
each temporary is hard-linked to its name, which fails if the name exists (the existence check at write time: a
file another process wrote meanwhile is never replaced), or with ``overwrite`` renamed over it (the old file kept
aside until the unit is in). A failure part-way removes what the unit committed and puts back what it replaced.

A leaf module (it imports nothing of dpfair), so that any layer can write its results this way: the command line's
results and models, the HTML report of a results store. Its errors are one line naming the file, the reason and
what was kept, and say what to do in the words of the command line (``--out``, ``--overwrite``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

#: errno values that mean the disk (or the quota, or the file-size limit) took no more bytes.
DISK_FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is full",
             errno.EFBIG: "the file is larger than the system allows"}


class WriteError(OSError):
    """A unit that could not be written: ``str()`` is the one-line message, ``reason`` the system's reason in
    words (:func:`reason`), ``path`` the file that failed."""

    def __init__(self, message: str, *, path=None, reason: str = ""):
        super().__init__(message)
        self.path = path
        self.reason = reason


def reason(exc: OSError) -> str:
    """Why ``exc`` failed, in words: a full disk (:data:`DISK_FULL`) named so, else the system's message."""
    return DISK_FULL.get(exc.errno) or exc.strerror or str(exc)


def write_atomic(out: Path, files: Callable[[Path], Iterable[tuple[Path, bytes]]], *, overwrite: bool = False,
                 stamped: bool = False, spent: str = "") -> tuple[Path, ...]:
    """Write a unit of files as one: all of them or none, never replacing a file unless ``overwrite``.

    ``files(out)`` gives ``[(path, bytes), ...]`` (or an iterable of byte chunks for a file streamed as it is
    computed) for the main file ``out`` (a function of the name, so that a
    result can name its companion files). ``stamped`` (a default name): a name taken is not an error, the unit
    goes to the next free one (``NAME-2``, ``NAME-3``, ...). Returns the paths written. Errors are one line
    naming the file, the reason and what was kept (``spent``: what the run cost all the same, e.g. its ε): a
    :class:`ValueError` when a name is taken, a :class:`WriteError` (an ``OSError``) when the system refuses.
    """
    kept = "nothing was written" + (f" ({spent})" if spent else "")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteError(f"cannot write in {out.parent}: {reason(exc)}; {kept}; choose another --out",
                         path=out.parent, reason=reason(exc)) from None
    temps: list[str] = []
    try:
        for attempt in range(1, 1000):
            target = out if attempt == 1 else out.with_name(f"{out.stem}-{attempt}{out.suffix}")
            pairs = list(files(target))
            staged = [(path, _stage(path, data, temps, kept)) for path, data in pairs]
            try:
                with folder_lock(out.parent):
                    _commit(staged, overwrite and not stamped)
            except FileExistsError as exc:  # os.link names the target second, os.open first
                if stamped:
                    continue
                raise ValueError(f"{exc.filename2 or exc.filename} already exists (written by another command while "
                                 f"this one ran); {kept}; pass --overwrite or choose another --out") from None
            except OSError as exc:
                path = exc.filename2 or exc.filename or target
                raise WriteError(f"cannot write {path}: {reason(exc)}; {kept}; choose another --out", path=path,
                                 reason=reason(exc)) from None
            return tuple(path for path, _ in pairs)
        raise ValueError(f"{out.parent} holds 999 results named {out.stem}-N{out.suffix} already; {kept}; "
                         "choose another --out")
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _stage(path: Path, data, temps: list, kept: str) -> str:
    """``data`` (bytes, or an iterable of byte chunks: a file written as it is computed) written in full to a new
    temporary file beside ``path``; its name is added to ``temps``."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        temps.append(tmp)
        with os.fdopen(fd, "wb") as f:
            for chunk in [data] if isinstance(data, bytes) else data:  # bytes, or an iterable of them (streamed)
                f.write(chunk)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as open() would create it (mkstemp's file is private to its owner)
    except OSError as exc:
        fix = "free some space or choose another --out" if exc.errno in DISK_FULL else "choose another --out"
        raise WriteError(f"cannot write {path}: {reason(exc)}; {kept}; {fix}", path=path,
                         reason=reason(exc)) from None
    return tmp


@contextlib.contextmanager
def folder_lock(folder: Path):
    """An exclusive ``flock`` on ``folder`` while a unit is committed, so that two processes' units never
    interleave (best effort: where the system has no such lock, the per-file checks still hold)."""
    fd = None
    with contextlib.suppress(ImportError, OSError):
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _commit(staged: list[tuple[Path, str]], overwrite: bool) -> None:
    """Give each temporary file its name (see :func:`write_atomic`); all or none."""
    done: list[tuple[Path, str | None]] = []  # (path, the replaced file kept aside, or None)
    try:
        for path, tmp in staged:
            if overwrite:
                old = None
                if path.exists():
                    old = f"{path.parent}/.{path.name}.{os.getpid()}.{os.urandom(6).hex()}.old"
                    try:
                        os.link(path, old)
                    except OSError:
                        old = None
                os.replace(tmp, path)
                done.append((path, old))
                continue
            try:
                os.link(tmp, path)  # fails if the name exists
            except FileExistsError:
                raise
            except OSError:  # no hard links on this file system: claim the name exclusively, then fill it
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                done.append((path, None))
                os.replace(tmp, path)
                continue
            done.append((path, None))
    except BaseException:
        for path, old in reversed(done):
            with contextlib.suppress(OSError):
                if old is None:
                    os.unlink(path)
                else:
                    os.replace(old, path)
        raise
    for _, old in done:
        if old is not None:
            with contextlib.suppress(OSError):
                os.unlink(old)
