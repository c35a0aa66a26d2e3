"""What the commands print: tables of rows and columns, ε with whom it protects, warnings on one line, and values
made JSON."""

from __future__ import annotations

import functools
import math
import sys
import time
import warnings

import numpy as np

STARTED = time.perf_counter()  # the command's start, near enough: the command line's modules load first


def jsonable(value):
    """``value`` as JSON takes it: dict keys as strings, numpy numbers as Python's, ∞ and NaN as ``null``,
    anything else by its ``repr``."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None  # JSON has no infinity: ε = ∞ (no privacy) is null
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return repr(value)


def print_table(rows: list[tuple[str, str]]) -> None:
    """``label  value`` rows, the labels aligned, indented by two spaces."""
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


def print_columns(table, indent: str = "") -> None:
    """A table of text cells (its header first), each column as wide as its widest cell."""
    widths = [max(len(row[j]) for row in table) for j in range(len(table[0]))]
    for row in table:
        print(indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def epsilon_text(eps: float, protects: str) -> str:
    """``0.997 for each person's sex; …`` — a printed ε with whom it protects (``inf (not private: …)``)."""
    return f"{eps:.6g} for {protects}" if math.isfinite(eps) else f"{eps:.6g} ({protects})"


def privacy_rows(record) -> list[tuple[str, str]]:
    """``epsilon spent`` of a :class:`~dpfair.privacy.record.PrivacyRecord` with whom it protects, ``delta``, a
    void guarantee, and what the ε does not cover (a schema read off the rows)."""
    rows = [("epsilon spent", epsilon_text(record.epsilon, record.protects)), ("delta", f"{record.delta:.3g}")]
    if record.guarantee and record.guarantee.startswith("void"):
        rows += [("privacy guarantee", record.guarantee)]
    if record.not_covered and math.isfinite(record.epsilon):
        rows += [("not covered by ε", record.not_covered)]
    return rows


def show_warning(message, category, filename, lineno, file=None, line=None, group_names=None) -> None:
    """Warnings on the command line: one line naming the warning, no source path (a group by its declared name,
    ``group_names``, where the fit knew it by code: :func:`naming_groups`)."""
    from dpfair.exceptions import SmallGroupWarning

    text = message.naming(group_names) if isinstance(message, SmallGroupWarning) else str(message)
    print(f"dpfair: {category.__name__}: {text.strip().splitlines()[0]}", file=file or sys.stderr)


def naming_groups(group_names) -> None:
    """From now on this command's warnings name coded groups (the fits' ``0..k-1``) by the data set's declared
    ``group_names``."""
    warnings.showwarning = functools.partial(show_warning, group_names=list(group_names))
