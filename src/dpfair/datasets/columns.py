"""The :class:`Column` of a public schema and its feature encoding: how one raw cell becomes features, declared.

A numeric column is clipped to a declared range ``[lo, hi]`` (transformed if declared) and mapped to
``(x - center) / scale``; a categorical one is one-hot over a declared vocabulary (a value outside it an error, or
one "other" level where declared); a 0/1 column is passed through and a date split into declared parts.  The
cleaning rules of :mod:`dpfair.datasets.cleaning` say what is missing and what it becomes.  No statistic of the
rows is used, so a row's features depend on that row alone.  :class:`~dpfair.datasets.schema.Schema` lists its
columns in feature order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpfair.datasets.cleaning import (DATE_PARTS, DEFAULT_MISSING_VALUES, MISSING_LEVEL, OUT_OF_RANGE,
                                      CategoryMatcher, CleaningCounts, MissingRule, NumberFormat, Transform,
                                      date_levels, date_part_values, date_parts, float_text, numbers,
                                      text_cells)

KINDS = ("numeric", "categorical", "binary", "date")

#: What an error about a table's values says instead of the values: an error is published (a terminal, a log, a
#: sweep's stored failure), and a value or a row number read off private rows would leak outside every ε.
NOT_SHOWN = "the values and their rows are not shown: they are the table's private data"
#: The level a categorical column declared with ``other=True`` maps unlisted values to (feature ``name=<other>``).
OTHER = "<other>"
_COLUMN_KEYS = {"numeric": ("lo", "hi", "center", "scale", "parse", "transform", "on_out_of_range", "missing"),
                "categorical": ("categories", "other", "normalize", "aliases", "missing"),
                "binary": ("missing",),
                "date": ("parts", "lo", "hi", "format", "missing")}


def as_text(values) -> np.ndarray:
    """The values of a column as the strings a schema lists them by (an object array, ``None`` where missing).

    A float that is a whole number prints as an integer (``2.0`` → ``"2"``: a CSV column of integer codes with a
    gap reads as float), anything else as ``str`` does; so a category list reads the same from CSV and Parquet.
    """
    values = pd.Series(values)
    missing = values.isna().to_numpy()
    out = np.full(len(values), None, dtype=object)
    present = values[~missing]
    if pd.api.types.is_float_dtype(present.dtype):
        text = float_text(present.to_numpy(np.float64))
    else:
        text = present.astype(str).to_numpy(object)
    out[~missing] = text
    return out


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    return float(value)


def distinct_strings(value, where: str, at_least: int = 0) -> tuple[str, ...]:
    """A list of distinct strings (integers are taken as their text: TOML users write ``[1, 2]``)."""
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(v, (str, int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value)
    items = tuple(str(v) for v in value) if ok else ()
    if not ok or len(items) < at_least or len(set(items)) != len(items) or not all(items):
        need = f"at least {at_least} " if at_least else ""
        raise ValueError(f"{where} must be a list of {need}distinct non-empty strings, got {value!r}")
    return items


def _flag(value, where: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{where} must be true or false, got {value!r}")
    return bool(value)


def _one_hot(codes: np.ndarray, width: int) -> np.ndarray:
    """Rows of ``width`` zeros with a one at ``codes`` (no one where the code is -1)."""
    out = np.zeros((len(codes), width))
    present = codes >= 0
    out[np.flatnonzero(present), codes[present]] = 1.0
    return out


@dataclass(frozen=True)
class Column:
    """One column of a public schema: how a raw cell becomes features, with declared constants.

    ``kind`` is ``"numeric"`` (the value is clipped to ``[lo, hi]``, transformed if declared, then mapped to
    ``(x - center) / scale``: one feature named after the column; ``center`` and ``scale`` default to the range's
    centre and half-width after the transform, so the declared range maps onto ``[-1, 1]``), ``"categorical"``
    (one-hot over ``categories`` in their declared order: features ``name=category``; a value outside them is an
    error, unless ``other=True`` declares one more level ``name=<other>`` that takes them), ``"binary"`` (a 0/1
    value passed through; ``true``/``false`` text reads as 1/0) or ``"date"`` (the declared ``parts``: the year
    clipped to ``[lo, hi]`` and scaled, the day scaled from 1-31, the quarter, month and weekday one-hot).

    The cleaning rules (:mod:`dpfair.datasets.cleaning`): ``missing`` (a :class:`MissingRule`; default ``None``:
    an error, except that a categorical column with ``other=True`` sends missing cells to ``<other>``),
    ``parse`` (a :class:`NumberFormat`), ``transform`` (a :class:`Transform`), ``normalize`` and ``aliases``
    (see :class:`CategoryMatcher`), ``on_out_of_range`` (:data:`OUT_OF_RANGE`) and ``date_format`` (a
    ``strftime`` format; default ISO 8601).  ``encodes_sensitive`` declares, as a public fact, that the column
    encodes the sensitive attribute (s itself, a proxy s is a function of): see ``Dataset.sensitive_columns``.
    A row's features depend on that row and these constants alone.  Build columns with :meth:`numeric`,
    :meth:`categorical`, :meth:`binary` and :meth:`date`, or read them with :meth:`from_dict`.
    """

    name: str
    kind: str
    categories: tuple[str, ...] = ()
    lo: float = -math.inf
    hi: float = math.inf
    center: float | None = None
    scale: float | None = None
    other: bool = False
    encodes_sensitive: bool = False
    missing: MissingRule | None = None
    parse: NumberFormat | None = None
    transform: Transform | None = None
    normalize: bool = False
    aliases: tuple[tuple[str, str], ...] = ()
    on_out_of_range: str = "clip"
    parts: tuple[str, ...] = ()
    date_format: str | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a column name must be a non-empty string, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"column {self.name!r}: unknown kind {self.kind!r}; valid: {', '.join(KINDS)}")
        where = f"column {self.name!r}:"
        for key in ("categories", "parts"):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        aliases = self.aliases.items() if isinstance(self.aliases, dict) else self.aliases
        object.__setattr__(self, "aliases", tuple((str(a), str(t)) for a, t in aliases))
        for key in ("other", "encodes_sensitive", "normalize"):
            object.__setattr__(self, key, _flag(getattr(self, key), f"{where} {key}"))
        if isinstance(self.parse, str):
            object.__setattr__(self, "parse", NumberFormat(self.parse))
        if isinstance(self.transform, (str, dict)):
            object.__setattr__(self, "transform", Transform.from_spec(self.transform, f"column {self.name!r}"))
        if isinstance(self.missing, (str, dict)):
            object.__setattr__(self, "missing", MissingRule.from_spec(self.missing, self.kind, f"column "
                                                                                                f"{self.name!r}"))
        self._check_kind_keys(where)
        lo, hi = _number(self.lo, f"{where} lo"), _number(self.hi, f"{where} hi")
        center, scale = self.center, self.scale
        if self.kind == "numeric" and self.transform is not None and self.transform.name != "bins":
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ValueError(f"{where} transform {self.transform.name!r} needs its public range lo and hi")
            self.transform.check_range(lo, hi, f"column {self.name!r}")
            t_lo, t_hi = self.transform.apply(np.array([lo, hi]))
        else:
            t_lo, t_hi = lo, hi
        needs_range = (self.kind == "numeric" and (self.transform is None or self.transform.name != "bins")) or (
            self.kind == "date" and "year" in self.parts)
        if needs_range and (center is None or scale is None):
            if not (math.isfinite(lo) and math.isfinite(hi)):
                what = "the public range of its years, lo and hi" if self.kind == "date" else (
                    "its public range lo and hi (finite numbers), or center and scale")
                raise ValueError(f"{where} give {what}")
            center = (t_lo + t_hi) / 2 if center is None else center
            scale = ((t_hi - t_lo) / 2 or 1.0) if scale is None else scale
        center = 0.0 if center is None else _number(center, f"{where} center")
        scale = 1.0 if scale is None else _number(scale, f"{where} scale")
        for key, value in (("lo", lo), ("hi", hi), ("center", float(center)), ("scale", float(scale))):
            object.__setattr__(self, key, value)
        if not (lo <= hi and math.isfinite(center) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"{where} need lo <= hi, a finite center and a finite scale > 0")
        if self.on_out_of_range not in OUT_OF_RANGE:
            raise ValueError(f"{where} on_out_of_range must be one of {', '.join(OUT_OF_RANGE)}, got "
                             f"{self.on_out_of_range!r}")
        rule = self.missing
        if rule is not None and rule.action == "fill" and self.kind == "categorical" and rule.fill is not None:
            if rule.fill not in self.categories:
                raise ValueError(f"{where} missing.fill {rule.fill!r} is not one of its categories")

    def _check_kind_keys(self, where: str) -> None:
        if self.kind == "categorical":
            cats = self.categories
            if not cats or not all(isinstance(c, str) for c in cats) or len(set(cats)) != len(cats):
                raise ValueError(f"{where} categories must be distinct strings, got {cats!r}")
            if self.other and OTHER in cats:
                raise ValueError(f"{where} {OTHER!r} names the level of other values; rename that category")
            if MISSING_LEVEL in cats:
                raise ValueError(f"{where} {MISSING_LEVEL!r} names the level of missing cells; rename that category")
            try:
                self.matcher  # noqa: B018 - checks normalized clashes and aliases
            except ValueError as exc:
                raise ValueError(f"{where} {exc}") from None
        else:
            for key in ("categories", "other", "normalize", "aliases"):
                if getattr(self, key):
                    raise ValueError(f"{where} only a categorical column has {key}")
        if self.kind != "numeric":
            for key, default in (("parse", None), ("transform", None), ("on_out_of_range", "clip")):
                if getattr(self, key) != default:
                    raise ValueError(f"{where} only a numeric column has {key}")
        if self.kind == "date":
            if not self.parts or any(p not in DATE_PARTS for p in self.parts) or len(set(self.parts)) != len(
                    self.parts):
                raise ValueError(f"{where} parts must list distinct parts of {', '.join(DATE_PARTS)}, got "
                                 f"{list(self.parts)}")
            if self.missing is not None and self.missing.action == "fill" and self.missing.fill is not None:
                raise ValueError(f"{where} a date column's missing cells take no fill value: use indicator = true")
        else:
            if self.parts:
                raise ValueError(f"{where} only a date column has parts")
            if self.date_format is not None:
                raise ValueError(f"{where} only a date column has a format")

    @classmethod
    def numeric(cls, name: str, lo: float, hi: float, center: float | None = None, scale: float | None = None, *,
                encodes_sensitive: bool = False, **rules) -> Column:
        """Clip to ``[lo, hi]``, transform if declared, then ``(x - center) / scale`` (default: the range mapped
        onto ``[-1, 1]``).  ``rules``: ``missing``, ``parse``, ``transform``, ``on_out_of_range``."""
        return cls(name, "numeric", lo=lo, hi=hi, center=center, scale=scale, encodes_sensitive=encodes_sensitive,
                   **rules)

    @classmethod
    def categorical(cls, name: str, categories, *, other: bool = False, encodes_sensitive: bool = False,
                    **rules) -> Column:
        """One-hot over ``categories``.  ``rules``: ``missing``, ``normalize``, ``aliases``."""
        return cls(name, "categorical", categories=tuple(categories), other=other,
                   encodes_sensitive=encodes_sensitive, **rules)

    @classmethod
    def binary(cls, name: str, *, encodes_sensitive: bool = False, **rules) -> Column:
        return cls(name, "binary", encodes_sensitive=encodes_sensitive, **rules)

    @classmethod
    def date(cls, name: str, parts, *, lo: float = -math.inf, hi: float = math.inf, date_format: str | None = None,
             **rules) -> Column:
        """The declared ``parts`` of a date (the years clipped to ``[lo, hi]``)."""
        return cls(name, "date", parts=tuple(parts), lo=lo, hi=hi, date_format=date_format, **rules)

    @property
    def matcher(self) -> CategoryMatcher:
        return CategoryMatcher(self.categories, self.normalize, self.aliases)

    @property
    def indicator(self) -> bool:
        return self.missing is not None and self.missing.indicator

    @property
    def feature_names(self) -> list[str]:
        if self.kind == "categorical":
            names = [f"{self.name}={c}" for c in self.categories + ((OTHER,) if self.other else ())]
        elif self.kind == "date":
            names = []
            for part in self.parts:
                if part in ("year", "day"):
                    names.append(f"{self.name}.{part}")
                else:
                    names += [f"{self.name}.{part}={level}" for level in date_levels(part)]
        elif self.transform is not None and self.transform.name == "bins":
            names = self.transform.bin_names(self.name)
        else:
            names = [self.name]
        return names + ([f"{self.name}={MISSING_LEVEL}"] if self.indicator else [])

    # ---------------------------------------------------------------------------------------------- encoding

    def features(self, values: pd.Series, dataset: str = "data", *, missing_values=DEFAULT_MISSING_VALUES,
                 counts: CleaningCounts | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(features, dropped)``: the ``(n, len(feature_names))`` float64 features of the raw ``values``, row by
        row, and the rows whose cell is missing under ``missing = "drop"`` (their features are meaningless).

        An error names the column, the kind of problem and its fix, never a value or a row (:data:`NOT_SHOWN`).
        ``counts`` records what the rules did (:class:`CleaningCounts`)."""
        where = f"{dataset}: column {self.name!r}"
        counts = CleaningCounts() if counts is None else counts
        values = pd.Series(values).reset_index(drop=True)
        encode = {"numeric": self._numeric, "categorical": self._categorical, "binary": self._binary,
                  "date": self._date}[self.kind]
        block, missing = encode(values, where, missing_values, counts)
        dropped = self._missing_rule(missing, where, counts)
        if self.indicator:
            block = np.hstack([block, missing[:, None].astype(np.float64)])
        return block, dropped

    def encode(self, values: pd.Series, dataset: str = "data", *,
               missing_values=DEFAULT_MISSING_VALUES) -> np.ndarray:
        """The features of ``values`` (:meth:`features`), every row kept: a cell declared ``"drop"`` is an error."""
        block, dropped = self.features(values, dataset, missing_values=missing_values)
        if dropped.any():
            raise ValueError(f"{dataset}: column {self.name!r} has missing cells declared dropped; read the rows with "
                             f"Schema.prepare, which says which rows it kept")
        return block

    def _missing_rule(self, missing: np.ndarray, where: str, counts: CleaningCounts) -> np.ndarray:
        dropped = np.zeros(len(missing), bool)
        if not missing.any():
            return dropped
        rule = self.missing
        if rule is None or rule.action == "error":
            fix = ("declare missing = \"drop\" or {fill = VALUE, indicator = true} in the schema"
                   + (", or other = true" if self.kind == "categorical" and rule is None else ""))
            raise ValueError(f"{where} has missing values; {fix}")
        if rule.action == "drop":
            counts.add(self.name, "not_scored", missing)
            return missing
        counts.add(self.name, "filled", missing)
        return dropped

    def _fill_value(self) -> float | None:
        rule = self.missing
        return rule.fill if rule is not None and rule.action == "fill" else None

    def _numeric(self, values, where, tokens, counts):
        x, missing, bad = numbers(values, tokens, self.parse)
        if bad.any():
            how = (f"not numbers written as {self.parse.example!r}" if self.parse is not None else
                   "not plain numbers (a thousands separator, a currency sign or a percent sign?)")
            fix = ("fix them or declare the column categorical" if self.parse is not None else
                   "declare how they are written, e.g. parse = \"1,234.5\", or declare the column categorical")
            raise ValueError(f"{where} is declared numeric but holds cells that are {how} ({NOT_SHOWN}); {fix}")
        present = ~missing
        outside = present & ((x < self.lo) | (x > self.hi))
        if outside.any():
            if self.on_out_of_range == "error":
                raise ValueError(f"{where} holds values outside its declared domain [{self.lo:g}, {self.hi:g}] "
                                 f"({NOT_SHOWN}); fix them, widen the domain, or declare on_out_of_range = "
                                 "\"clip\" or \"missing\"")
            if self.on_out_of_range == "missing":
                counts.add(self.name, "out_of_range", outside)
                missing = missing | outside
            else:
                counts.add(self.name, "clipped", outside)
        fill = self._fill_value()
        if fill is None:  # a dropped row's (or an error's) placeholder: never a feature of a kept row
            fill = self.lo if math.isfinite(self.lo) else 0.0
        x = np.clip(np.where(missing, fill, x), self.lo, self.hi)
        if self.transform is not None and self.transform.name == "bins":
            return _one_hot(self.transform.bin_codes(x), len(self.transform.edges) + 1), missing
        if self.transform is not None:
            x = self.transform.apply(x)
        return ((x - self.center) / self.scale)[:, None], missing

    def _categorical(self, values, where, tokens, counts):
        text, missing = text_cells(values, tokens)
        codes = self.matcher.codes(text)
        width = len(self.categories) + int(self.other)
        unlisted = ~missing & (codes < 0)
        if unlisted.any():
            if not self.other:
                raise ValueError(f"{where} holds values outside its declared categories {list(self.categories)} "
                                 f"({NOT_SHOWN}); add them, declare other = true"
                                 + ("" if self.normalize else ", or normalize = true (case and spaces)"))
            counts.add(self.name, "other", unlisted)
            codes[unlisted] = len(self.categories)
        if missing.any() and self.missing is None and self.other:  # the rule before cleaning was declared
            counts.add(self.name, "other", missing)
            codes[missing] = len(self.categories)
            missing = np.zeros(len(missing), bool)
        fill = self._fill_value()
        if fill is not None:
            codes[missing] = self.categories.index(fill)
        return _one_hot(codes, width), missing

    def _binary(self, values, where, tokens, counts):
        x, missing, bad = numbers(values, tokens, None)
        if bad.any() or not np.isin(x[~missing], (0.0, 1.0)).all():
            raise ValueError(f"{where} is declared 0/1 but holds other values ({NOT_SHOWN}); fix them or declare the "
                             "column numeric")
        fill = self._fill_value()
        return np.where(missing, fill or 0.0, x)[:, None], missing

    def _date(self, values, where, tokens, counts):
        dates, missing, bad = date_parts(values, tokens, self.date_format)
        if bad.any():
            shape = f"dates written as {self.date_format!r}" if self.date_format else "ISO 8601 dates (2024-03-15)"
            raise ValueError(f"{where} is declared a date but holds cells that are not {shape} ({NOT_SHOWN}); fix "
                             "them or declare its format (a strftime format such as \"%d/%m/%Y\")")
        blocks = []
        for part in self.parts:
            v = date_part_values(dates, part)
            if part in ("year", "day"):
                lo, hi = (self.lo, self.hi) if part == "year" else (1.0, 31.0)
                center, scale = (self.center, self.scale) if part == "year" else (16.0, 15.0)
                if part == "year":
                    outside = ~missing & ((v < lo) | (v > hi))
                    counts.add(self.name, "clipped", outside)
                v = np.where(missing, center, np.clip(v, lo, hi))
                blocks.append(((v - center) / scale)[:, None])
            else:
                codes = np.where(missing, -1, v)
                blocks.append(_one_hot(codes, len(date_levels(part))))
        return np.hstack(blocks), missing

    # ---------------------------------------------------------------------------------------------- forms

    def describe(self) -> str:
        tag = " (encodes the sensitive attribute)" if self.encodes_sensitive else ""
        rules = [] if self.missing is None else [self.missing.describe()]
        if self.kind == "categorical":
            other = f", other values -> {self.name}={OTHER}" if self.other else ""
            if self.normalize:
                rules.append("case and spaces normalized")
            if self.aliases:
                rules.append("aliases " + ", ".join(f"{a!r} -> {t!r}" for a, t in self.aliases))
            text = f"{self.name}: one-hot over {{{', '.join(self.categories)}}}{other}"
        elif self.kind == "binary":
            text = f"{self.name}: 0/1"
        elif self.kind == "date":
            years = f" (years clipped to [{self.lo:g}, {self.hi:g}])" if "year" in self.parts else ""
            text = f"{self.name}: date, parts {', '.join(self.parts)}{years}"
        else:
            if self.parse is not None:
                rules.insert(0, f"numbers written as {self.parse.example!r}"
                             + (" (percentages, read as fractions)" if self.parse.percent else ""))
            if self.on_out_of_range != "clip":
                rules.append(f"outside [{self.lo:g}, {self.hi:g}]: "
                             + ("an error" if self.on_out_of_range == "error" else "missing"))
            if self.transform is not None and self.transform.name == "bins":
                text = f"{self.name}: one-hot over the bins of edges {list(self.transform.to_spec()['bins'])}"
            else:
                t = "" if self.transform is None else f", {self.transform.name}"
                text = (f"{self.name}: clip to [{self.lo:g}, {self.hi:g}]{t}, (x - {self.center:.4g}) / "
                        f"{self.scale:.4g}")
        return text + (f"; {'; '.join(rules)}" if rules else "") + tag

    def to_dict(self) -> dict:
        """The column as JSON-able data (an infinite bound as ``None``); :meth:`from_dict` reads it back."""
        out = {"name": self.name, "kind": self.kind}
        if self.kind in ("numeric", "date"):
            out.update({key: (v if math.isfinite(v) else None) for key, v in (("lo", self.lo), ("hi", self.hi))})
        if self.kind == "numeric":
            if self.transform is None or self.transform.name != "bins":
                out.update(center=self.center, scale=self.scale)
            if self.parse is not None:
                out["parse"] = self.parse.example
            if self.transform is not None:
                out["transform"] = self.transform.to_spec()
            if self.on_out_of_range != "clip":
                out["on_out_of_range"] = self.on_out_of_range
        elif self.kind == "categorical":
            out.update(categories=list(self.categories), other=self.other)
            if self.normalize:
                out["normalize"] = True
            if self.aliases:
                out["aliases"] = dict(self.aliases)
        elif self.kind == "date":
            out["parts"] = list(self.parts)
            if self.date_format is not None:
                out["format"] = self.date_format
        if self.missing is not None:
            out["missing"] = self.missing.to_spec()
        if self.encodes_sensitive:
            out["encodes_sensitive"] = True
        return out

    @classmethod
    def from_dict(cls, data, where: str = "column") -> Column:
        """A column from :meth:`to_dict`'s form; an error names the key at fault (``where`` prefixes it)."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must be a table with keys name, kind, ..., got {data!r}")
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.name must be a non-empty string, got {name!r}")
        where = f"{where} ({name!r})"
        kind = data.get("kind")
        if kind not in KINDS:
            raise ValueError(f"{where}.kind must be one of {', '.join(KINDS)}, got {kind!r}")
        valid = ("name", "kind", *_COLUMN_KEYS[kind], "encodes_sensitive")
        unknown = [key for key in data if key not in valid]
        if unknown:
            raise ValueError(f"{where}: unknown key {unknown[0]!r} for a {kind} column; valid: {', '.join(valid)}")
        options = {}
        for key in ("lo", "hi", "center", "scale"):
            if data.get(key) is not None:
                options[key] = _number(data[key], f"{where}.{key}")
        if kind == "categorical":
            options["categories"] = distinct_strings(data.get("categories"), f"{where}.categories", 1)
        if kind == "date":
            options["parts"] = distinct_strings(data.get("parts"), f"{where}.parts", 1)
        for key in ("other", "encodes_sensitive", "normalize"):
            if key in data:
                options[key] = _flag(data[key], f"{where}.{key}")
        for key, option in (("parse", "parse"), ("format", "date_format"), ("on_out_of_range", "on_out_of_range")):
            if key in data:
                if not isinstance(data[key], str):
                    raise ValueError(f"{where}.{key} must be a string, got {data[key]!r}")
                options[option] = data[key]
        if "aliases" in data:
            aliases = data["aliases"]
            if not isinstance(aliases, dict) or not all(isinstance(v, str) for v in aliases.values()):
                raise ValueError(f"{where}.aliases must be a table of spellings to categories, got {aliases!r}")
            options["aliases"] = tuple(aliases.items())
        try:
            if "transform" in data:
                options["transform"] = Transform.from_spec(data["transform"], where)
            if "missing" in data:
                options["missing"] = MissingRule.from_spec(data["missing"], kind, where)
            return cls(name, kind, **options)
        except ValueError as exc:
            message = str(exc)
            raise ValueError(message if message.startswith(where) else f"{where}: {message.split(': ', 1)[-1]}"
                             if message.startswith("column ") else f"{where}: {message}") from None


def numeric_columns(text: str) -> tuple[Column, ...]:
    """Numeric columns from a whitespace table, one ``name lo hi center scale`` line each (blank lines skipped)."""
    columns = []
    for line in text.strip().splitlines():
        if line.strip():
            name, lo, hi, center, scale = line.split()
            columns.append(Column.numeric(name, float(lo), float(hi), float(center), float(scale)))
    return tuple(columns)
