"""Progress of long operations: the one helper behind every progress bar dpfair shows.

Fits (``verbose=True``), grids, noise calibration, audits, a certificate's draws and
membership shadow models all report through :func:`progress`, a thin layer on tqdm:

- **One bar per operation.** The outermost open operation decides: while a bar is open
  (shown or silent), every bar opened inside it (the fits of a grid or an audit, the
  calibration inside a fit) prints nothing of its own. When the outer bar is shown, the
  inner one appears as a short note after it (``calibrating noise``, ``DPSGDClassifier
  120/400``), so a silent ``verbose=False`` fit stays silent whatever runs inside it.
- **One switch.** :func:`quiet` (a context manager) or :func:`set_enabled` silences every
  bar of the process; the command line's ``--quiet`` sets it.
- **stderr.** A bar that is asked for is shown, whether or not stderr is a terminal (the
  user asked: ``verbose=True``, a command without ``--quiet``); off a terminal it redraws at
  most every :data:`FILE_INTERVAL` seconds, so a log holds a few lines, not thousands.
- **Delay.** ``delay=s`` shows a bar only once its operation has run ``s`` seconds (noise
  calibration, usually instant, sometimes minutes).

Privacy: what a bar prints is an output (DESIGN.md, "The threat model"). Bars print public
counters (steps, epochs, fits, models), elapsed time and released or public values such as
the ε spent so far (a function of the public plan and of how many releases were made);
never a loss, an accuracy or a count computed on private data.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from tqdm.auto import tqdm

#: Seconds between redraws of a bar (and of its notes) when stderr is not a terminal.
FILE_INTERVAL = 5.0
#: Seconds between redraws of a note from an inner operation on a terminal.
NOTE_INTERVAL = 0.5
#: A bar whose total is not known yet: a count and the elapsed time (tqdm's default reads "7it").
UNKNOWN_TOTAL_FORMAT = "{desc}: {n_fmt} {unit}s [{elapsed}{postfix}]"

_enabled = True
_local = threading.local()


def set_enabled(enabled: bool) -> bool:
    """Show (``True``) or silence (``False``) every bar opened from now on, process-wide; returns the previous setting."""
    global _enabled
    previous, _enabled = _enabled, bool(enabled)
    return previous


def is_enabled() -> bool:
    """Whether bars may be shown (``False`` inside :func:`quiet` or after ``set_enabled(False)``)."""
    return _enabled


@contextlib.contextmanager
def quiet():
    """``with dpfair.utils.progress.quiet():`` no bar opened inside is shown (the command line's ``--quiet``)."""
    previous = set_enabled(False)
    try:
        yield
    finally:
        set_enabled(previous)


def _open_bars() -> list:
    """The bars open in this thread, outermost first."""
    if not hasattr(_local, "open"):
        _local.open = []
    return _local.open


def _format(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class Progress:
    """One operation's progress: a tqdm bar on stderr, or its silent stand-in.

    ``update(n, **postfix)`` advances it by ``n`` and shows the public values ``postfix``
    after the counts; ``set_total`` gives the total once it is known; ``shown`` says
    whether it prints; :meth:`due` throttles costly postfix values. Use it as a context
    manager or call :meth:`close`: a bar closed by an exception clears its line.
    """

    def __init__(self, total=None, desc: str = "", unit: str = "it", enabled: bool = True, delay: float = 0.0):
        bars = _open_bars()
        self.desc, self.unit, self.total, self.n = desc, unit, total, 0
        self._postfix: dict = {}
        self._note = ""
        self._noted_at = self._due_at = -float("inf")
        # an inner operation notes its progress on the outermost bar, if that one is shown
        self._outer = bars[0] if bars and bars[0]._bar is not None else None
        self._bar = None
        if enabled and _enabled and not bars:
            stream = sys.stderr
            terminal = bool(getattr(stream, "isatty", lambda: False)())
            self._interval = NOTE_INTERVAL if terminal else FILE_INTERVAL
            self._bar = tqdm(total=total, desc=desc, unit=unit, file=stream, delay=delay, dynamic_ncols=terminal,
                             mininterval=0.1 if terminal else FILE_INTERVAL,
                             bar_format=UNKNOWN_TOTAL_FORMAT if total is None else None)
        bars.append(self)
        if self._outer is not None:
            self._outer._show_note(self)

    @property
    def shown(self) -> bool:
        return self._bar is not None

    def update(self, n: int = 1, **postfix) -> None:
        """Advance by ``n`` (0: only show ``postfix``, public values such as ``ε=0.42``)."""
        self.n += n
        if self._bar is not None:
            if postfix:
                self._postfix.update(postfix)
                self._redraw_postfix(refresh=n == 0)
            if n:
                self._bar.update(n)
        elif self._outer is not None:
            self._outer._show_note(self)

    def set_total(self, total, unit: str | None = None) -> None:
        """The total (and unit) once known, e.g. a fit's step count after its checks and calibration."""
        self.total = total
        self.unit = unit or self.unit
        if self._bar is not None:
            self._bar.total, self._bar.unit = total, self.unit
            self._bar.bar_format = UNKNOWN_TOTAL_FORMAT if total is None else None
            self._bar.refresh()
        elif self._outer is not None:
            self._outer._show_note(self)

    def due(self, seconds: float) -> bool:
        """Whether this shown bar last answered ``True`` at least ``seconds`` ago (throttles a costly postfix value)."""
        if self._bar is None:
            return False
        now = time.monotonic()
        if now - self._due_at < seconds:
            return False
        self._due_at = now
        return True

    def close(self, failed: bool = False) -> None:
        bars = _open_bars()
        if self not in bars:
            return
        bars.remove(self)
        if self._bar is not None:
            if failed:
                self._bar.leave = False
            self._bar.close()
        elif self._outer is not None:
            self._outer._show_note(None)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)

    # ---- notes from inner operations ------------------------------------------------------
    def _show_note(self, inner: Progress | None) -> None:
        """Note ``inner``'s progress after this bar's counts (``None``: clear it); redrawn at most every interval."""
        if inner is None:
            self._note = ""
        else:
            count = f"{inner.n}/{inner.total}" if inner.total else (f"{inner.n}" if inner.n else "")
            self._note = f"{inner.desc} {count}".strip()
        now = time.monotonic()
        due = now - self._noted_at >= self._interval
        if due:
            self._noted_at = now
        self._redraw_postfix(refresh=due)

    def _redraw_postfix(self, refresh: bool) -> None:
        parts = [f"{k}={_format(v)}" for k, v in self._postfix.items()] + ([self._note] if self._note else [])
        self._bar.set_postfix_str(", ".join(parts), refresh=refresh)


class _Silent(Progress):
    """A bar that never prints and opens no nesting: for code paths with no operation of their own to show."""

    def __init__(self):
        self.desc, self.unit, self.total, self.n = "", "it", None, 0
        self._bar = self._outer = None

    def update(self, n: int = 1, **postfix) -> None:
        pass

    def set_total(self, total, unit: str | None = None) -> None:
        pass

    def close(self, failed: bool = False) -> None:
        pass


SILENT = _Silent()


def progress(total=None, desc: str = "", unit: str = "it", enabled: bool = True, delay: float = 0.0) -> Progress:
    """A :class:`Progress` for an operation of ``total`` ``unit`` s (``None``: not known yet).

    ``enabled``: whether the caller wants it shown (an estimator's ``verbose``); it is shown
    only if, besides, no other bar is open in this thread and :func:`quiet` is not in effect.
    ``delay``: show it only once the operation has run this many seconds.
    """
    return Progress(total, desc, unit, enabled, delay)
