"""Proposing a public schema from a table's rows, and saying why each column got what it got.

:func:`propose_schema` reads a table (a DataFrame, or a file read cell by cell as text: a CSV and its Parquet copy
give the same proposal) and returns a :class:`Proposal`: a :class:`~dpfair.datasets.Schema` that trains as it
stands, and one :class:`Decision` per column naming what was proposed and why (its kind, range or categories,
its missing share and the rule proposed for the gaps, numbers parsed from separators or signs, near-duplicate
categories merged, a heavy tail given a log, a column ignored as free text, an identifier, a date or a code).
:func:`infer_schema` is its schema alone.

The rules, each a check of the column's cells (see :mod:`dpfair.datasets.cleaning` for what they declare):

* a column whose cells are all missing is ignored; one with gaps gets a missing rule (numbers: filled at the
  centre of their range, feature 0, with an indicator; categories: their own ``<missing>`` level; 0/1: filled
  with 0 and an indicator; a label: the row dropped);
* text that reads as numbers once a declared format is applied (``"12,500"``, ``"1.234,5"``, ``"$40"``,
  ``"12%"``) is numeric with that ``parse``; digit strings with a leading zero (zip codes) stay text (a code);
* ``"true"``/``"false"`` and 0/1 columns are binary; ISO dates are ignored with the declaration that uses them;
* text spelled several ways (``"East"``, ``"EAST"``, ``"east "``) is one category (``normalize = true``, named
  by its most common spelling); text over ``max_categories`` values is ignored as an identifier (nearly every
  value distinct) or as free text, and so is a numeric column named like an identifier whose values all differ;
* numbers whose median sits in the lowest 5 % of their range, all of them ``>= 0``, get ``transform = "log1p"``
  with each bound rounded outward to two significant digits; other ranges are rounded outward to two
  significant digits of their span.

Privacy: every proposal is a statistic of the rows (types, ranges, categories, classes, groups, missing shares),
not covered by any ε: :func:`infer_schema` warns :class:`~dpfair.PrivacyLeakWarning` naming what it read, and the
user reviews the result and declares it public before it is used as such.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dpfair.datasets.cleaning import (DEFAULT_MISSING_VALUES, NUMBER_CHARACTERS, NUMBER_FORMATS, NumberFormat,
                                      normal_form,
                                      parse_plain, text_cells)
from dpfair.datasets.reading import read_table
from dpfair.datasets.schema import Column, Schema
from dpfair.exceptions import PrivacyLeakWarning

#: The share of a numeric column's range below which its median marks a heavy tail (log1p proposed).
HEAVY_TAIL_MEDIAN = 0.05
#: A text column with more distinct values than this share of its cells is an identifier rather than free text.
IDENTIFIER_SHARE = 0.9
_IDENTIFIER_NAME = re.compile(r"(^|[_\s.-])(id|uuid|guid|key|number|no)$|^id[_\s.-]|[a-z]Id$|ID$", re.IGNORECASE)
_ISO_DATE = r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?)?$"
_DIGITS = r"^\d+$"
_DATE_HOW = ("to use it, declare kind = \"date\" with parts = [\"year\", \"month\"] and the public range of its "
             "years as lo and hi")


@dataclass
class Decision:
    """What :func:`propose_schema` chose for one column (``role``: feature, ignored, label or sensitive), in
    words: ``proposal`` (``"numeric, clip to [0, 5e+06], log1p"``) and the ``reasons`` behind it."""

    column: str
    role: str
    proposal: str
    reasons: list[str] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.proposal}" + (f" ({'; '.join(self.reasons)})" if self.reasons else "")


@dataclass
class Proposal:
    """A proposed :class:`~dpfair.datasets.Schema` and the :class:`Decision` behind each column."""

    schema: Schema
    decisions: list[Decision]
    n_rows: int
    #: The columns whose ranges and categories were read off the rows (what the warning names).
    read: dict = field(default_factory=dict)
    #: Whether the group lists were declared (``groups=``) rather than read off the sensitive column(s).
    declared_groups: bool = False

    def notes(self) -> dict[str, str]:
        """Column → the decision's line, for :meth:`Schema.to_toml`'s comments."""
        return {d.column: d.line() for d in self.decisions}

    def to_toml(self) -> str:
        return self.schema.to_toml(self.notes())


def _round_outward(lo: float, hi: float, integer: bool) -> tuple[float, float]:
    """``[lo, hi]`` widened to two significant digits of its span (whole numbers for an integer column)."""
    span = hi - lo if hi > lo else max(abs(lo), abs(hi))
    if span == 0:
        return lo, hi
    exponent = math.floor(math.log10(span)) - 1
    if integer:
        exponent = max(exponent, 0)
    step, digits = 10.0**exponent, max(-exponent, 0)
    return round(math.floor(lo / step) * step, digits), round(math.ceil(hi / step) * step, digits)


def _two_digits(value: float, up: bool) -> float:
    """``value`` rounded outward (``up``: towards +inf) to two significant digits; 0 stays 0."""
    if value == 0:
        return 0.0
    step = 10.0 ** (math.floor(math.log10(abs(value))) - 1)
    rounded = (math.ceil if up else math.floor)(value / step) * step
    return float(f"{rounded:.12g}")


def _listed(names, most: int = 6) -> str:
    names = list(names)
    shown = ", ".join(map(repr, names[:most]))
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _share(missing: np.ndarray) -> str:
    share = 100 * float(missing.mean())
    return f"{share:.2g} % missing" if share >= 0.1 else "under 0.1 % missing"


def _number_format(cells: pd.Series) -> NumberFormat | None:
    """The declared format that reads every cell as a number (plain numbers first), or ``None``."""
    if not cells.astype("string[pyarrow]").str.match(NUMBER_CHARACTERS).all():
        return None
    for example in ("1234.5", *(e for e in NUMBER_FORMATS if e != "1234.5")):
        for percent in ("", "%"):
            fmt = NumberFormat(example + percent)
            if not fmt.parse(cells)[1].any():
                return fmt
    return None


class _Proposer:
    """The rules of the module docstring, applied to one column at a time."""

    def __init__(self, frame: pd.DataFrame, max_categories: int, where: str):
        self.frame, self.max_categories, self.where = frame, max_categories, where
        self.columns: list[Column] = []
        self.ignore: list[str] = []
        self.decisions: list[Decision] = []
        self.read = {"ranges": [], "categories": []}

    def ignored(self, column: str, why: str, *reasons: str) -> None:
        self.ignore.append(column)
        self.decisions.append(Decision(column, "ignored", f"ignored: {why}", list(reasons)))

    def feature(self, column: Column, reasons: list[str]) -> None:
        self.columns.append(column)
        self.decisions.append(Decision(column.name, "feature", column.describe(), reasons))

    def propose(self, name: str) -> None:
        values = self.frame[name]
        if pd.api.types.is_datetime64_any_dtype(values.dtype):
            return self.ignored(name, "a date", _DATE_HOW)
        text, missing = text_cells(values, DEFAULT_MISSING_VALUES)
        present = ~missing
        if not present.any():
            return self.ignored(name, "always missing")
        reasons = [_share(missing)] if missing.any() else []
        if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
            x = values.to_numpy(np.float64, na_value=np.nan)[present]
            return self._numbers(name, x, missing, None, reasons)
        cells = pd.Series(text[present], dtype=object).astype("string[pyarrow]")  # regular expressions in pyarrow
        if cells.str.match(_ISO_DATE).all():
            return self.ignored(name, "a date (ISO 8601)", _DATE_HOW)
        if cells.str.lower().isin(["true", "false"]).all():
            return self._binary(name, missing, reasons)
        digits = cells.str.match(_DIGITS)
        if digits.all() and (cells.str.len().gt(1) & cells.str.startswith("0")).any():
            return self._text(name, cells, missing, reasons + ["digit strings with leading zeros: a code, read as "
                                                               "text"])
        x, bad = parse_plain(cells)
        if not bad.any():
            return self._numbers(name, x, missing, None, reasons)
        fmt = _number_format(cells)
        if fmt is not None:
            what = []
            if fmt.thousands is not None:
                what.append("thousands separators")
            if fmt.decimal != ".":
                what.append("a decimal comma")
            if fmt.percent:
                what.append("percent signs (read as fractions)")
            if cells.str.contains(r"[$€£¥₹₩₽¢]|^[A-Z]{3}\s|\s[A-Z]{3}$", regex=True).any():
                what.append("currency signs")
            if cells.str.match(r"^\(.*\)$").any():
                what.append("amounts in parentheses (negative)")
            reasons.append(f"numbers written with {' and '.join(what) or 'signs'}: parsed as {fmt.example!r}")
            return self._numbers(name, fmt.parse(cells)[0], missing, fmt, reasons)
        return self._text(name, cells, missing, reasons)


    def _binary(self, name: str, missing: np.ndarray, reasons: list[str]) -> None:
        rule = {"fill": 0, "indicator": True} if missing.any() else None
        if rule:
            reasons.append("gaps filled with 0, with an indicator")
        self.feature(Column.binary(name, missing=rule), reasons)

    def _numbers(self, name: str, x: np.ndarray, missing: np.ndarray, fmt, reasons: list[str]) -> None:
        if np.isin(x, (0.0, 1.0)).all() and fmt is None:
            return self._binary(name, missing, reasons)
        if not np.isfinite(x).all():
            raise ValueError(f"{self.where}: column {name!r} holds an infinite value; fix it before inferring")
        integer = bool(np.all(np.round(x) == x))
        if integer and _IDENTIFIER_NAME.search(name) and len(np.unique(x)) == len(x) and len(x) > self.max_categories:
            return self.ignored(name, "looks like an identifier", "named like one, every value distinct")
        lo, hi = float(x.min()), float(x.max())
        transform = None
        if lo >= 0 and hi > lo and (float(np.median(x)) - lo) / (hi - lo) < HEAVY_TAIL_MEDIAN:
            transform = "log1p"
            lo, hi = _two_digits(lo, up=False), _two_digits(hi, up=True)
            reasons.append("heavy tail (the median in the lowest 5 % of the range): log1p proposed")
        else:
            lo, hi = _round_outward(lo, hi, integer)
        rule = None
        if missing.any():
            t = np.log1p if transform else (lambda v: v)
            centre = (t(lo) + t(hi)) / 2
            fill = float(np.expm1(centre)) if transform else centre
            fill = float(f"{fill:.2g}") if transform else fill
            rule = {"fill": fill, "indicator": True}
            reasons.append(f"gaps filled with {fill:g} (the range's centre), with an indicator")
        self.read["ranges"].append(name)
        self.feature(Column.numeric(name, lo, hi, parse=fmt.example if fmt else None, transform=transform,
                                    missing=rule), reasons)

    def _text(self, name: str, cells: pd.Series, missing: np.ndarray, reasons: list[str]) -> None:
        by_key: dict[str, list[tuple[int, str]]] = {}
        for spelling, n in cells.value_counts(sort=False).items():  # the distinct spellings, not every cell
            by_key.setdefault(normal_form(spelling), []).append((-int(n), str(spelling)))
        n_distinct = len(by_key)
        if n_distinct > self.max_categories:
            if cells.nunique() >= IDENTIFIER_SHARE * len(cells):
                return self.ignored(name, "looks like an identifier", *reasons,
                                    f"{cells.nunique():,} distinct values of {len(cells):,}")
            return self.ignored(name, f"text over {self.max_categories} values", *reasons,
                                f"{n_distinct:,} distinct values: free text or a code; declare the categories that "
                                "matter to use it")
        # a category is named by a spelling in mixed case if it has one ("East" over "EAST" and "east"), then by
        # its most common spelling
        canonical = {key: min(options, key=lambda o: (not (o[1] != o[1].lower() and o[1] != o[1].upper()), o))[1]
                     for key, options in by_key.items()}
        merged = [sorted(s for _, s in options) for options in by_key.values() if len(options) > 1]
        normalize = bool(merged)
        if merged:
            shown = "; ".join(", ".join(map(repr, group)) for group in merged[:3])
            more = f" and {len(merged) - 3} more" if len(merged) > 3 else ""
            reasons.append(f"near-duplicate categories merged: {shown}{more} (normalize = true)")
        rule = None
        if missing.any():
            rule = {"indicator": True}
            reasons.append("gaps get their own level <missing>")
        self.read["categories"].append(name)
        self.feature(Column.categorical(name, sorted(canonical.values()), other=True, normalize=normalize,
                                        missing=rule), reasons)


def _target_values(frame: pd.DataFrame, column: str) -> tuple[list[str], bool]:
    """The sorted values of a label or sensitive column and whether it has gaps."""
    text, missing = text_cells(frame[column], DEFAULT_MISSING_VALUES)
    values = sorted(set(text[~missing]))
    return values, bool(missing.any())


def _check_columns(frame: pd.DataFrame, where: str, label, sensitive) -> tuple[str, ...]:
    columns = (sensitive,) if isinstance(sensitive, str) else tuple(sensitive) if isinstance(
        sensitive, (list, tuple)) and sensitive else None
    if columns is None:
        raise ValueError(f"sensitive must be a column name or a list of them, got {sensitive!r}")
    for target, column in (("label", label), *(("sensitive", c) for c in columns)):
        if not isinstance(column, str) or column not in frame.columns:
            raise ValueError(f"{where} has no {target} column {column!r}; columns: {list(frame.columns)}")
    if label in columns or len(set(columns)) != len(columns):
        raise ValueError(f"{where}: the label and sensitive columns must be distinct, got label={label!r}, "
                         f"sensitive={list(columns)}")
    return columns


def _declared_groups(groups, columns: tuple[str, ...]) -> list[list[str]] | None:
    """``groups`` as one list per sensitive column (a list for one column; a list of lists or a dict for several)."""
    if groups is None:
        return None
    if isinstance(groups, str):
        raise ValueError(f"groups must be a list of the group names, got the string {groups!r}")
    if isinstance(groups, dict):
        if sorted(groups) != sorted(columns):
            raise ValueError(f"groups must list the groups of each sensitive column {list(columns)}, got "
                             f"{list(groups)}")
        return [[str(g) for g in groups[c]] for c in columns]
    groups = list(groups)
    if len(columns) == 1:
        return [[str(g) for g in groups]]
    if len(groups) != len(columns) or not all(isinstance(g, (list, tuple)) for g in groups):
        raise ValueError(f"with several sensitive columns {list(columns)}, groups is one list per column")
    return [[str(g) for g in part] for part in groups]


def propose_schema(frame, *, label: str, sensitive, max_categories: int = 50, name: str | None = None,
                   source: str | None = None, groups=None) -> Proposal:
    """Propose a :class:`~dpfair.datasets.Schema` for ``frame`` (a DataFrame, or a file read cell by cell as text
    by :func:`~dpfair.datasets.read_table`), with a :class:`Decision` per column (the module's rules).

    ``sensitive`` is a column or a list of columns (their intersectional groups).  The classes and groups are
    the observed values of ``label`` and ``sensitive``, sorted; ``groups``, when given, is the public list of
    every group instead (one list per sensitive column: declared, not read; the sensitive columns are then only
    checked to hold nothing else).  Reads the rows, silently: :func:`infer_schema` is the call that warns.
    """
    if not isinstance(frame, pd.DataFrame):
        name, frame = name or str(frame), read_table(frame, raw=True)
    where = repr(name) if name else "the table"
    if isinstance(max_categories, bool) or not isinstance(max_categories, int) or max_categories < 1:
        raise ValueError(f"max_categories must be a positive integer, got {max_categories!r}")
    columns = _check_columns(frame, where, label, sensitive)
    proposer = _Proposer(frame, max_categories, where)
    for column in frame.columns:
        if column != label and column not in columns:
            proposer.propose(column)
    classes, label_gaps = _target_values(frame, label)
    observed, gaps = zip(*(_target_values(frame, c) for c in columns))
    declared = _declared_groups(groups, columns)
    if declared is not None:
        for column, seen, listed in zip(columns, observed, declared):
            if not set(seen) <= set(listed):  # which value is not named: the error is published too
                raise ValueError(f"{where}: the sensitive column {column!r} holds a value outside the declared "
                                 f"groups {listed}; declare every group it may hold")
    lists = declared if declared is not None else [list(v) for v in observed]
    for target, column, values in (("label", label, classes), *(("sensitive", c, v) for c, v in zip(columns, lists))):
        if len(values) < (2 if target == "label" or len(columns) == 1 else 1):
            raise ValueError(f"{where}: the {target} column {column!r} has {len(values)} distinct value(s); it needs "
                             f"at least 2")
    decisions = list(proposer.decisions)
    decisions.append(Decision(label, "label", f"label: classes {_listed(classes)}",
                              ["rows without a label are dropped (label_missing = \"drop\")"] if label_gaps else []))
    for column, values, has_gaps in zip(columns, lists, gaps):
        why = ["declared (--groups)"] if declared is not None else []
        if has_gaps:
            why.append("rows without a group are dropped (sensitive_missing = \"drop\"; refused under the sensitive "
                       "unit: declare a group for them instead)")
        decisions.append(Decision(column, "sensitive", f"sensitive: groups {_listed(values)}", why))
    source = source or f"inferred from the rows of {where} by infer_schema (review it and declare it public)"
    group_spec = lists[0] if len(columns) == 1 else dict(zip(columns, lists))
    schema = Schema(tuple(proposer.columns), source, label, classes, columns[0] if len(columns) == 1 else columns,
                    group_spec, proposer.ignore, label_missing="drop" if label_gaps else "error",
                    sensitive_missing="drop" if any(gaps) else "error")
    return Proposal(schema, decisions, len(frame), proposer.read, declared is not None)


def infer_schema(frame, *, label: str, sensitive, max_categories: int = 50, name: str | None = None,
                 source: str | None = None, groups=None) -> Schema:
    """Propose a :class:`~dpfair.datasets.Schema` for ``frame`` (a DataFrame, or a file): the schema of
    :func:`propose_schema`, whose module docstring gives the rules and whose :class:`Decision` s say why.

    It reads the rows, so it warns :class:`~dpfair.PrivacyLeakWarning` naming what it read: the result is a
    statistic of the data, not public knowledge, until the user reviews it and declares it (``to_toml``).
    ``name`` is what the warning and errors call the table (default: the file, or "the table"); ``source`` the
    schema's source line; ``groups`` the declared group list(s) (the warning then no longer names the groups).
    """
    if not isinstance(frame, pd.DataFrame):
        name, frame = name or str(frame), read_table(frame, raw=True)
    proposal = propose_schema(frame, label=label, sensitive=sensitive, max_categories=max_categories, name=name,
                              source=source, groups=groups)
    schema, read = proposal.schema, proposal.read
    where = repr(name) if name else "the table"
    ignored = [d for d in proposal.decisions if d.role == "ignored"]
    warnings.warn(
        f"infer_schema read the rows of {where} to propose a schema: the types of "
        f"{len(schema.columns) + len(schema.ignore)} column(s), the ranges of {_listed(read['ranges']) or 'none'}, "
        f"the categories of {_listed(read['categories']) or 'none'}, the missing cells, the classes of {label!r}"
        + ("" if proposal.declared_groups else f" and the groups of {schema.attribute!r}")
        + (f"; it left out {'; '.join(f'{d.column!r} ({d.proposal[9:]})' for d in ignored[:6])}"
           + (f" and {len(ignored) - 6} more" if len(ignored) > 6 else "") if ignored else "")
        + ". These are statistics of the rows, not covered by any ε: review the schema (Schema.to_toml writes it), "
        "declare it public and pass it as schema=.",
        PrivacyLeakWarning, stacklevel=2)
    return schema
