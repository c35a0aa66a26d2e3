"""The declared cleaning rules of a public schema: how a raw cell of a user's table becomes a clean value.

A real export holds cells a model cannot read as they stand: empty cells and tokens such as ``"NA"``, numbers
written ``"12,500"``, ``"1.234,5"``, ``"$40,000"`` or ``"12.5%"``, categories written ``"North"``, ``"NORTH"`` and
``"north "``, heavy-tailed amounts, dates.  Each rule here is a named object a :class:`~dpfair.datasets.Column`
declares (its TOML key in brackets), and each is a function of one cell and the rule's own constants:

* :class:`MissingRule` (``missing``): what a missing cell becomes, ``"error"`` (the default), ``"drop"`` (the row
  is left out of training and not scored at prediction) or ``{fill = VALUE, indicator = true}`` (the cell takes a
  declared value, and an extra 0/1 feature ``name=<missing>`` says it was missing).  What counts as missing is the
  schema's ``missing_values`` (:data:`DEFAULT_MISSING_VALUES` unless declared), compared after stripping spaces,
  and any null of a Parquet file;
* :class:`NumberFormat` (``parse``): how numbers are written, named by an example (:data:`NUMBER_FORMATS`):
  thousands and decimal separators, an optional percent sign (a percentage column reads ``12.5`` and ``12.5%`` both
  as ``0.125``), currency signs and codes stripped, ``(1,234)`` read as a negative amount;
* :class:`CategoryMatcher` (``normalize``, ``aliases``): a category matched after folding case and surrounding or
  repeated spaces, and declared alternative spellings mapped onto a category;
* :class:`Transform` (``transform``): ``"log"`` or ``"log1p"`` applied after clipping to the declared range (so the
  default scaling maps ``[t(lo), t(hi)]`` onto ``[-1, 1]``), or ``{bins = [edges]}``: one-hot over the intervals
  between declared public edges;
* :data:`OUT_OF_RANGE` (``on_out_of_range``): a number outside ``[lo, hi]`` is clipped (the default), an error (a
  declared hard domain: an age of -3 is a fact about the export, not a value to clip), or missing;
* :data:`DATE_PARTS` (``parts`` of a ``date`` column): the year (clipped to ``[lo, hi]``), quarter, month, day or
  weekday of a date.

Privacy: every rule reads one cell and declared constants, never a statistic of the other rows, so the features of
a row depend on that row alone and cleaning costs no ε.  A row-local filter (``"drop"``) maps neighbouring tables
to neighbouring (or equal) tables under add/remove-one (the record unit), so a fit's ε covers the rows it keeps;
under the sensitive unit the features and labels are public, so a drop on them changes only the public n, while a
drop on the sensitive column itself would depend on a private value and is refused there
(:func:`~dpfair.datasets.load_table`).  :class:`CleaningCounts` counts what the rules did to a file's cells (for
``dpfair predict``'s report of the rows it scores; a training command never prints them: they are statistics of
private rows).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: What counts as missing when a schema declares no ``missing_values``: the tokens pandas reads as missing in a CSV
#: (so a schema written before cleaning was declared reads its files as it always did), compared after stripping.
DEFAULT_MISSING_VALUES = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                          "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")

#: The ways of writing numbers a column may declare (``parse = "1,234.5"``), by example: ``(thousands separator,
#: decimal separator)``.  A ``%`` after the example (``"1234.5%"``, ``"1,234.5%"``) declares a percentage column.
NUMBER_FORMATS = {"1234.5": (None, "."), "1,234.5": (",", "."), "1.234,5": (".", ","), "1 234,5": (" ", ","),
                  "1'234.5": ("'", "."), "1234,5": (None, ",")}
#: The currency signs a declared number format strips (and any three-letter upper-case code such as ``USD``).
CURRENCY_SIGNS = "$€£¥₹₩₽¢"
#: What a number outside its column's declared ``[lo, hi]`` becomes: clipped (the default), an error, or missing.
OUT_OF_RANGE = ("clip", "error", "missing")
#: The parts of a date a ``date`` column may declare, and the public vocabulary of each one-hot part.
DATE_PARTS = ("year", "quarter", "month", "day", "weekday")
_DATE_LEVELS = {"quarter": tuple(str(q) for q in range(1, 5)), "month": tuple(str(m) for m in range(1, 13)),
                "weekday": ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")}
#: The level a missing cell of a column declared ``indicator = true`` sets (feature ``name=<missing>``).
MISSING_LEVEL = "<missing>"
TRANSFORMS = ("log", "log1p", "bins")

_PLAIN = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_SPACES = "[ \u00a0\u202f]"
_CURRENCY = rf"^[{CURRENCY_SIGNS}]\s*|\s*[{CURRENCY_SIGNS}]$|^[A-Z]{{3}}\s+|\s+[A-Z]{{3}}$"
#: The characters a number may be written with in any declared format (a cheap first check of a column).
NUMBER_CHARACTERS = rf"^[\d\s.,'%()+\-{CURRENCY_SIGNS}\u00a0\u202fA-Z]*\d[\d\s.,'%()+\-{CURRENCY_SIGNS}\u00a0\u202fA-Z]*$"


def _strings(text: pd.Series) -> pd.Series:
    """Stripped strings as an Arrow-backed series, so that the regular expressions below run in pyarrow."""
    return text.astype(str).astype("string[pyarrow]")


# ------------------------------------------------------------------------------------------------ missing cells


def float_text(x: np.ndarray) -> np.ndarray:
    """Floats as text, a whole number as an integer (``2.0`` → ``"2"``): a CSV column of integer codes with a gap
    reads as float, and a category list must read the same from CSV and Parquet."""
    whole = (np.round(x) == x) & (np.abs(x) < 2.0**53)
    shown = x.astype(str).astype(object)
    shown[whole] = x[whole].astype(np.int64).astype(str)
    return shown


def text_cells(values: pd.Series, tokens) -> tuple[np.ndarray, np.ndarray]:
    """``(text, missing)``: each cell as stripped text (``None`` where missing) and the mask of missing cells (a
    null, or a text that is one of ``tokens`` once stripped).  Whole floats print as integers (``2.0`` → ``"2"``:
    a Parquet column of codes with a gap is float), so a CSV read as text and its Parquet copy agree."""
    values = pd.Series(values).reset_index(drop=True)
    null = values.isna().to_numpy()
    text = np.full(len(values), None, dtype=object)
    present = values[~null]
    if pd.api.types.is_float_dtype(present.dtype):
        text[~null] = float_text(present.to_numpy(np.float64))
    elif pd.api.types.is_bool_dtype(present.dtype):
        text[~null] = np.where(present.to_numpy(bool), "1", "0").astype(object)
    else:
        text[~null] = present.astype(str).str.strip().to_numpy(object)
    missing = null.copy()
    if tokens:
        missing[~null] = pd.Index(text[~null]).isin(list(tokens))
        text[missing] = None
    return text, missing


@dataclass(frozen=True)
class MissingRule:
    """What a missing cell of a column becomes (TOML ``missing = ...``).

    ``action`` is ``"error"`` (training and prediction stop with one line naming the column), ``"drop"`` (the row
    is left out of training, and not scored at prediction: its output row says so) or ``"fill"``: the cell takes
    ``fill`` (a number for a numeric or 0/1 column, a declared category for a categorical one; omitted for a
    categorical column with ``indicator``), and with ``indicator`` one more 0/1 feature ``name=<missing>`` marks
    the rows whose cell was missing.  A row-local rule: see the module's privacy note.
    """

    action: str = "error"
    fill: float | str | None = None
    indicator: bool = False

    @classmethod
    def from_spec(cls, spec, kind: str, where: str) -> MissingRule:
        """The rule of a schema's ``missing`` value: ``"error"``, ``"drop"`` or ``{fill = ..., indicator = ...}``."""
        if spec in ("error", "drop"):
            return cls(spec)
        if not isinstance(spec, dict):
            raise ValueError(f"{where}.missing must be \"error\", \"drop\" or a table {{fill = VALUE, indicator = "
                             f"true}}, got {spec!r}")
        unknown = [k for k in spec if k not in ("fill", "indicator")]
        if unknown:
            raise ValueError(f"{where}.missing: unknown key {unknown[0]!r}; valid: fill, indicator")
        indicator = spec.get("indicator", False)
        if not isinstance(indicator, bool):
            raise ValueError(f"{where}.missing.indicator must be true or false, got {indicator!r}")
        fill = spec.get("fill")
        if kind == "date":
            if fill is not None or not indicator:
                raise ValueError(f"{where}.missing of a date column takes no fill: declare {{indicator = true}}")
            return cls("fill", None, True)
        if kind == "categorical":
            if fill is not None and (not isinstance(fill, (str, int)) or isinstance(fill, bool)):
                raise ValueError(f"{where}.missing.fill must be one of the column's categories, got {fill!r}")
            fill = None if fill is None else str(fill)
            if fill is None and not indicator:
                raise ValueError(f"{where}.missing needs fill = CATEGORY or indicator = true (its own level)")
        else:
            if isinstance(fill, bool) or not isinstance(fill, (int, float)) or not math.isfinite(fill):
                raise ValueError(f"{where}.missing.fill must be a finite number (the value a missing cell takes), "
                                 f"got {fill!r}")
            fill = float(fill)
            if kind == "binary" and fill not in (0.0, 1.0):
                raise ValueError(f"{where}.missing.fill of a 0/1 column must be 0 or 1, got {fill!r}")
        return cls("fill", fill, indicator)

    def to_spec(self):
        if self.action != "fill":
            return self.action
        out = {} if self.fill is None else {"fill": self.fill}
        if self.indicator:
            out["indicator"] = True
        return out

    def describe(self) -> str:
        if self.action != "fill":
            return {"error": "missing: an error", "drop": "missing: row dropped"}[self.action]
        parts = [] if self.fill is None else [f"filled with {self.fill:g}" if isinstance(self.fill, float)
                                              else f"filled with {self.fill!r}"]
        return "missing: " + " + ".join(parts + (["indicator"] if self.indicator else []))


# ------------------------------------------------------------------------------------------------ numbers


@dataclass(frozen=True)
class NumberFormat:
    """How a column writes its numbers (TOML ``parse = EXAMPLE``, one of :data:`NUMBER_FORMATS`, optionally with
    a trailing ``%``): the thousands separator (a space also matches no-break spaces), the decimal separator, and
    whether the column holds percentages (read as fractions: ``12.5%`` → ``0.125``).  Currency signs and codes
    around a number are stripped, and an amount in parentheses is negative (accounting style)."""

    example: str

    def __post_init__(self):
        base = self.example[:-1] if self.example.endswith("%") else self.example
        if base not in NUMBER_FORMATS:
            raise ValueError(f"unknown number format {self.example!r}; valid: "
                             + ", ".join(repr(f) for f in NUMBER_FORMATS) + " (a trailing % for percentages)")

    @property
    def thousands(self) -> str | None:
        return NUMBER_FORMATS[self.example.rstrip("%")][0]

    @property
    def decimal(self) -> str:
        return NUMBER_FORMATS[self.example.rstrip("%")][1]

    @property
    def percent(self) -> bool:
        return self.example.endswith("%")

    def pattern(self) -> str:
        """The strict shape of a number in this format (groups of three digits between thousands separators)."""
        t = None if self.thousands is None else (_SPACES if self.thousands == " " else re.escape(self.thousands))
        d = re.escape(self.decimal)
        whole = r"\d+" if t is None else rf"(\d{{1,3}}({t}\d{{3}})+|\d+)"
        return rf"^[+-]?({whole}({d}\d*)?|{d}\d+)$"

    def parse(self, text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        """``(x, bad)`` of a series of stripped strings: the numbers, and the mask of cells that are not one."""
        s = _strings(text)
        negative = s.str.match(r"^\(.*\)$").to_numpy(bool)
        if negative.any():
            s = s.where(~negative, s.str.slice(1, -1)).str.strip()
        if s.str.contains(rf"[{CURRENCY_SIGNS}]|[A-Z]", regex=True).any():
            s = s.str.replace(_CURRENCY, "", regex=True).str.strip()
            s = s.str.replace(r"^([+-])\s*[" + CURRENCY_SIGNS + r"]\s*", r"\1", regex=True)
        pct = s.str.endswith("%").to_numpy(bool)
        if self.percent and pct.any():
            s = s.where(~pct, s.str.slice(0, -1).str.strip())
        ok = (s.str.match(self.pattern()).to_numpy(bool) & (~pct | self.percent)
              & ~(negative & s.str.match(r"^[+-]").to_numpy(bool)))
        if self.thousands is not None:
            s = s.str.replace(_SPACES if self.thousands == " " else re.escape(self.thousands), "", regex=True)
        if self.decimal != ".":
            s = s.str.replace(self.decimal, ".", regex=False)
        return _floats(s, ok, negative, 0.01 if self.percent else 1.0)


def _floats(s: pd.Series, ok: np.ndarray, negative: np.ndarray, factor: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.full(len(s), np.nan)
    if ok.any():
        x[ok] = s.to_numpy(object)[ok].astype(str).astype(np.float64)  # correctly rounded, as Python's float()
    x[negative] = -x[negative]
    if factor != 1.0:
        x = x * factor
    return x, ~ok


def parse_plain(text: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(x, bad)`` of stripped strings read as plain numbers (``12.5``, ``-3``, ``1e5``; no separators)."""
    s = _strings(text)
    ok = s.str.match(_PLAIN).to_numpy(bool) | s.str.lower().isin(["inf", "-inf", "+inf"]).to_numpy(bool)
    return _floats(s, ok, np.zeros(len(s), bool), 1.0)


def numbers(values: pd.Series, tokens, fmt: NumberFormat | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, missing, bad)`` of one column: its numbers (NaN where missing or not a number), the missing cells,
    and the cells that are neither missing nor a number in ``fmt`` (plain numbers when ``None``)."""
    values = pd.Series(values).reset_index(drop=True)
    if pd.api.types.is_bool_dtype(values.dtype) or pd.api.types.is_numeric_dtype(values.dtype):
        x = values.to_numpy(np.float64, na_value=np.nan)
        return x, np.isnan(x), np.zeros(len(x), bool)
    text, missing = text_cells(values, tokens)
    x = np.full(len(values), np.nan)
    bad = np.zeros(len(values), bool)
    present = ~missing
    if present.any():
        cells = pd.Series(text[present], dtype=object)
        lowered = cells.str.lower()
        truth = lowered.isin(["true", "false"]).to_numpy()
        parsed, wrong = (parse_plain if fmt is None else fmt.parse)(cells.where(~truth, "0"))
        parsed[truth] = (lowered[truth] == "true").to_numpy(np.float64)
        wrong[truth] = False
        x[present], bad[present] = parsed, wrong
    return x, missing, bad


# ------------------------------------------------------------------------------------------------ categories


def normal_form(text) -> str:
    """A category's spelling as :class:`CategoryMatcher` compares it: case folded, spaces collapsed."""
    return " ".join(str(text).split()).casefold()


@dataclass(frozen=True)
class CategoryMatcher:
    """How a categorical column's cells are matched to its declared categories (TOML ``normalize``, ``aliases``).

    ``normalize`` compares case-folded text with surrounding and repeated spaces removed (``"EAST"``, ``"east "``
    and ``"East"`` are one category, named as declared); ``aliases`` maps declared alternative spellings onto a
    category (``{"N." = "North"}``), themselves compared the same way.
    """

    categories: tuple[str, ...]
    normalize: bool = False
    aliases: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        keys = [self._key(c) for c in self.categories]
        if len(set(keys)) != len(keys):
            clash = [c for c, k in zip(self.categories, keys) if keys.count(k) > 1]
            raise ValueError(f"categories {clash} are one category once normalized; list it once")
        for alias, target in self.aliases:
            if target not in self.categories:
                raise ValueError(f"alias {alias!r} maps to {target!r}, which is not one of the categories")
            if self._key(alias) in keys and self.categories[keys.index(self._key(alias))] != target:
                raise ValueError(f"alias {alias!r} is already the category {self.categories[keys.index(self._key(alias))]!r}")

    def _key(self, text: str) -> str:
        return normal_form(text) if self.normalize else text

    def codes(self, text: np.ndarray) -> np.ndarray:
        """Each cell's position in ``categories`` (-1 where unlisted or missing); ``text`` as :func:`text_cells`."""
        lookup = {self._key(c): i for i, c in enumerate(self.categories)}
        lookup.update({self._key(a): self.categories.index(t) for a, t in self.aliases})
        spelling, spellings = pd.factorize(pd.Series(text, dtype=object))  # -1 where missing
        found = np.array([lookup.get(self._key(s), -1) for s in spellings] + [-1], dtype=np.int64)
        return found[spelling]


# ------------------------------------------------------------------------------------------------ transforms


@dataclass(frozen=True)
class Transform:
    """A declared monotone transform of a numeric column before scaling (TOML ``transform = ...``).

    ``"log"`` (needs ``lo > 0``) and ``"log1p"`` (``lo > -1``) are applied after clipping to ``[lo, hi]``, so the
    default ``center``/``scale`` map ``[t(lo), t(hi)]`` onto ``[-1, 1]``: typical incomes of a 0-5e6 range spread
    over the features instead of all mapping near -1.  ``{bins = [e_1, ..., e_m]}`` (increasing public edges)
    one-hot encodes the interval of each value: ``name<e_1``, ``name=[e_1,e_2)``, ..., ``name>=e_m``.
    """

    name: str
    edges: tuple[float, ...] = ()

    def __post_init__(self):
        if self.name not in TRANSFORMS:
            raise ValueError(f"unknown transform {self.name!r}; valid: \"log\", \"log1p\", {{bins = [edges]}}")
        edges = tuple(float(e) for e in self.edges)
        object.__setattr__(self, "edges", edges)
        if self.name == "bins":
            if not edges or not all(math.isfinite(e) for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
                raise ValueError(f"bins needs strictly increasing finite edges, got {list(self.edges)}")
        elif edges:
            raise ValueError(f"only bins has edges, not {self.name}")

    @classmethod
    def from_spec(cls, spec, where: str) -> Transform:
        if isinstance(spec, str):
            return cls(spec)
        if isinstance(spec, dict) and set(spec) == {"bins"}:
            edges = spec["bins"]
            if not isinstance(edges, list) or not all(isinstance(e, (int, float)) and not isinstance(e, bool)
                                                      for e in edges):
                raise ValueError(f"{where}.transform.bins must be a list of numbers, got {edges!r}")
            return cls("bins", tuple(edges))
        raise ValueError(f"{where}.transform must be \"log\", \"log1p\" or {{bins = [edges]}}, got {spec!r}")

    def to_spec(self):
        return {"bins": [_number_text(e) for e in self.edges]} if self.name == "bins" else self.name

    def check_range(self, lo: float, hi: float, where: str) -> None:
        if self.name == "log" and not lo > 0:
            raise ValueError(f"{where}: transform \"log\" needs lo > 0 (got {lo:g}); use \"log1p\" for values >= 0")
        if self.name == "log1p" and not lo > -1:
            raise ValueError(f"{where}: transform \"log1p\" needs lo > -1 (got {lo:g})")

    def apply(self, x: np.ndarray) -> np.ndarray:
        return np.log(x) if self.name == "log" else np.log1p(x)

    def bin_names(self, column: str) -> list[str]:
        e = [_number_text(v) for v in self.edges]
        return ([f"{column}<{e[0]}"] + [f"{column}=[{a},{b})" for a, b in zip(e, e[1:])] + [f"{column}>={e[-1]}"])

    def bin_codes(self, x: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.edges), x, side="right")


def _number_text(value: float) -> int | float:
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


# ------------------------------------------------------------------------------------------------ dates


def date_parts(values: pd.Series, tokens, fmt: str | None) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """``(dates, missing, bad)`` of a column of dates: ISO 8601 text (``2024-03-15``, with or without a time) unless
    ``fmt`` declares a ``strftime`` format, or a Parquet date/timestamp column."""
    values = pd.Series(values).reset_index(drop=True)
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        dates = values.dt.tz_localize(None) if getattr(values.dt, "tz", None) is not None else values
        missing = dates.isna().to_numpy()
        return dates, missing, np.zeros(len(values), bool)
    if values.dtype == object and len(values) and all(hasattr(v, "year") for v in values.dropna()):
        values = values.astype(str).where(values.notna(), None)  # datetime.date objects of a Parquet date column
    text, missing = text_cells(values, tokens)
    cells = pd.Series(text, dtype=object)
    dates = pd.to_datetime(cells, format=fmt or "ISO8601", errors="coerce")
    if getattr(dates.dt, "tz", None) is not None:
        dates = dates.dt.tz_convert(None)
    bad = dates.isna().to_numpy() & ~missing
    return dates, missing, bad


def date_part_values(dates: pd.Series, part: str) -> np.ndarray:
    """One part of each date: the year or day as a float, the quarter, month or weekday as its level's code."""
    if part == "year":
        return dates.dt.year.to_numpy(np.float64, na_value=np.nan)
    if part == "day":
        return dates.dt.day.to_numpy(np.float64, na_value=np.nan)
    raw = {"quarter": dates.dt.quarter - 1, "month": dates.dt.month - 1, "weekday": dates.dt.weekday}[part]
    return raw.fillna(0).to_numpy(np.int64)


def date_levels(part: str) -> tuple[str, ...]:
    return _DATE_LEVELS[part]


# ------------------------------------------------------------------------------------------------ what was done


@dataclass
class CleaningCounts:
    """What the declared rules did to a file's cells, per column: ``filled`` (missing, given the fill value or its
    own level), ``not_scored`` (missing under ``"drop"``: the row is left out), ``clipped`` (outside ``[lo, hi]``),
    ``out_of_range`` (outside ``[lo, hi]`` under ``on_out_of_range = "missing"``), ``other`` (an unlisted category
    sent to the ``<other>`` level).  Statistics of the rows read: ``dpfair predict`` prints them for the rows it
    scores, and nothing prints them for private training rows."""

    counts: dict[str, Counter] = field(default_factory=dict)

    def add(self, column: str, what: str, n) -> None:
        n = int(np.sum(n)) if not isinstance(n, (int, np.integer)) else int(n)
        if n:
            self.counts.setdefault(column, Counter())[what] += n

    def merge(self, other: CleaningCounts) -> CleaningCounts:
        """Add ``other``'s counts (of another batch of rows) to these; returns ``self``."""
        for column, c in other.counts.items():
            self.counts.setdefault(column, Counter()).update(c)
        return self

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {column: dict(sorted(c.items())) for column, c in self.counts.items()}

    def lines(self) -> list[tuple[str, str]]:
        """One ``(column, "12 clipped, 3 filled")`` line per column touched."""
        names = {"filled": "missing, filled", "not_scored": "missing, row not scored", "clipped": "clipped to range",
                 "out_of_range": "out of range, read as missing", "other": "unlisted, sent to other"}
        return [(column, ", ".join(f"{n:,} {names[k]}" for k, n in sorted(c.items())))
                for column, c in self.counts.items()]

