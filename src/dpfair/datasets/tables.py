"""Users' own tables: read a CSV or Parquet file into a :class:`~dpfair.datasets.Dataset` through a public schema.

A user's table goes through the same path as the built-in data sets (:func:`~dpfair.datasets.base.finish`): a
:class:`~dpfair.datasets.base.Schema` turns each row into features from that row and the schema's constants
alone (numeric columns clipped to ``[lo, hi]`` and scaled, categories one-hot, unlisted ones to an "other" level),
and names the label column with its classes and the sensitive column with its groups.

Privacy: the schema's category lists, ranges, classes and groups are facts about the data.  Declared by the user
(written by hand, or proposed by :func:`infer_schema` and reviewed) they are public knowledge, and the ε of a
model trained on the table covers everything else.  Inferred from the rows they are not covered: under the
sensitive unit (X public) the group list is still read from the private s, and under the record unit every range
and category list is a statistic of private records.  So inference warns (:class:`~dpfair.PrivacyLeakWarning`,
saying what was read), and :func:`load_table` refuses it under the record unit unless ``infer_under_record=True``.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from dpfair.datasets.base import Column, Dataset, Schema, Table, as_text, check_bool, finish
from dpfair.exceptions import PrivacyLeakWarning

#: File suffixes :func:`read_table` reads (a CSV may also be compressed: ``.csv.gz``, ``.csv.zip``, ...).
FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
COMPRESSIONS = (".gz", ".bz2", ".zip", ".xz", ".zst")
LICENCE = "the user's own data"


def _format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes.pop()
    kind = FORMATS.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise ValueError(f"{path}: cannot tell the format from its name; use a file ending in .csv, .tsv (optionally "
                         f"compressed, e.g. .csv.gz), .parquet or .pq")
    return kind


def table_name(path) -> str:
    """The data set name of a file: its name less the format suffixes (``loans.csv.gz`` -> ``loans``)."""
    name = Path(path).name
    for suffix in reversed(Path(path).suffixes):
        if suffix.lower() in FORMATS or suffix.lower() in COMPRESSIONS:
            name = name[: -len(suffix)]
    return name or Path(path).name


def read_table(path, *, text_columns=()) -> pd.DataFrame:
    """The rows of a CSV (``.csv``, ``.tsv``, optionally compressed) or Parquet (``.parquet``, ``.pq``) file.

    Columns are named by the file's header.  ``text_columns`` are read as text from a CSV (category codes such as
    ``"01"`` keep their leading zeros).  Parquet needs pyarrow.  A file that cannot be read is one ``ValueError``
    (``FileNotFoundError`` when it does not exist) naming it.
    """
    path = Path(path)
    kind = _format(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} not found")
    try:
        if kind == "parquet":
            if importlib.util.find_spec("pyarrow") is None:
                raise ValueError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow")
            frame = pd.read_parquet(path, engine="pyarrow")
        else:
            frame = pd.read_csv(path, sep="\t" if kind == "tsv" else ",", dtype=dict.fromkeys(text_columns, str))
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text (a spreadsheet's UTF-16 or Latin-1 export?); save it as UTF-8 "
                         "CSV") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        if str(exc).startswith(f"{path}:"):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"{path}: cannot read it as {kind}: {first}") from None
    names = list(frame.columns)
    if not all(isinstance(n, str) for n in names):
        raise ValueError(f"{path}: column names must be strings (a header row), got {names[:5]}")
    if kind != "parquet" and len(names) == 1:
        _check_separator(path, kind, names[0])
    return frame


#: Separators a one-column header may hide, and what each is called in the error.
_SEPARATORS = {";": "';'", "\t": "tab", "|": "'|'", ",": "','"}


def _check_separator(path: Path, kind: str, header: str) -> None:
    """A CSV or TSV read as one column whose header holds another separator: one line naming it and the fix."""
    own, read_as = ("\t", "a .tsv file is read tab-separated") if kind == "tsv" else (",", "a .csv file is read "
                                                                                          "comma-separated")
    for sep, name in _SEPARATORS.items():
        if sep != own and sep in header:
            fix = {"\t": "name the file .tsv", ",": "name the file .csv"}.get(sep, "save it comma-separated (.csv)")
            raise ValueError(f"{path}: one column {header[:60]!r}: the file seems {name}-separated and {read_as}; "
                             f"{fix}")


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


def _listed(names: list[str], most: int = 6) -> str:
    shown = ", ".join(map(repr, names[:most]))
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def infer_schema(frame, *, label: str, sensitive: str, max_categories: int = 50, name: str | None = None,
                 source: str | None = None, groups=None) -> Schema:
    """Propose a :class:`~dpfair.datasets.base.Schema` for ``frame`` (a DataFrame, or a file for :func:`read_table`).

    Every column other than ``label`` and ``sensitive`` becomes a feature: a boolean or 0/1 numeric column
    ``binary``; another numeric one ``numeric`` with the observed range rounded outward to two significant digits
    of its span as ``[lo, hi]`` and the scaling that maps it onto ``[-1, 1]``; a text column ``categorical`` over
    its observed values (sorted), with ``other=True`` so that a value unseen here maps to one "other" level.  A
    text column with more than ``max_categories`` values (an identifier, free text), or one that is always missing,
    goes to ``ignore``.  The classes and groups are the observed values of ``label`` and ``sensitive``, sorted;
    ``groups``, when given, is the public list of every group instead (declared, not read: the sensitive column is
    then only checked to hold nothing else, and the warning no longer names it).

    It reads the rows, so it warns :class:`~dpfair.PrivacyLeakWarning` naming what it read: the result is a
    statistic of the data, not public knowledge, until the user reviews it and declares it (``to_toml``).
    ``name`` is what the warning and errors call the table (default: the file, or "the table"); ``source`` the
    schema's source line.
    """
    if not isinstance(frame, pd.DataFrame):
        name, frame = name or str(frame), read_table(frame)
    where = repr(name) if name else "the table"
    if isinstance(max_categories, bool) or not isinstance(max_categories, int) or max_categories < 1:
        raise ValueError(f"max_categories must be a positive integer, got {max_categories!r}")
    for target, column in (("label", label), ("sensitive", sensitive)):
        if not isinstance(column, str) or column not in frame.columns:
            raise ValueError(f"{where} has no {target} column {column!r}; columns: {list(frame.columns)}")
    columns, ignore, ranged, listed = [], [], [], []
    for column in frame.columns:
        if column in (label, sensitive):
            continue
        values = frame[column].dropna()
        if values.empty:
            ignore.append(column)
        elif pd.api.types.is_bool_dtype(values.dtype):
            columns.append(Column.binary(column))
        elif pd.api.types.is_numeric_dtype(values.dtype):
            x = values.to_numpy(np.float64)
            if np.isin(x, (0.0, 1.0)).all():
                columns.append(Column.binary(column))
            elif not np.isfinite(x).all():
                raise ValueError(f"{where}: column {column!r} holds an infinite value; fix it before inferring")
            else:
                integer = bool(np.all(np.round(x) == x))
                columns.append(Column.numeric(column, *_round_outward(float(x.min()), float(x.max()), integer)))
                ranged.append(column)
        else:
            levels = sorted(set(as_text(values)))
            if len(levels) > max_categories:
                ignore.append(column)
            else:
                columns.append(Column.categorical(column, levels, other=True))
                listed.append(column)
    classes, observed = (sorted(set(as_text(frame[c].dropna()))) for c in (label, sensitive))
    if groups is None:
        groups = observed
    else:
        if isinstance(groups, str):
            raise ValueError(f"groups must be a list of the group names, got the string {groups!r}")
        groups = [str(g) for g in groups]  # the Schema checks them (distinct, non-empty, at least 2)
        if not set(observed) <= set(groups):  # which value is not named: the error is published too
            raise ValueError(f"{where}: the sensitive column {sensitive!r} holds a value outside the declared groups "
                             f"{groups}; declare every group it may hold")
    declared = groups is not observed
    for target, column, values in (("label", label, classes), ("sensitive", sensitive, groups)):
        if len(values) < 2:
            raise ValueError(f"{where}: the {target} column {column!r} has {len(values)} distinct value(s); it needs "
                             f"at least 2")
    warnings.warn(
        f"infer_schema read the rows of {where} to propose a schema: the types of {len(columns) + len(ignore)} "
        f"column(s), the ranges of {_listed(ranged) or 'none'}, the categories of {_listed(listed) or 'none'}, the "
        f"classes of {label!r}" + ("" if declared else f" and the groups of {sensitive!r}")
        + (f"; it left out {_listed(ignore)} (always missing or over {max_categories} values)" if ignore else "")
        + ". These are statistics of the rows, not covered by any ε: review the schema (Schema.to_toml writes it), "
        "declare it public and pass it as schema=.",
        PrivacyLeakWarning, stacklevel=2)
    source = source or f"inferred from the rows of {where} by infer_schema (review it and declare it public)"
    return Schema(tuple(columns), source, label, classes, sensitive, groups, ignore)


def as_schema(schema) -> Schema:
    """A :class:`~dpfair.datasets.base.Schema` from itself, its dict form (``to_dict``) or a TOML file or text."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, dict):
        return Schema.from_dict(schema)
    if isinstance(schema, (str, Path)):
        return Schema.from_toml(schema)
    raise ValueError(f"schema must be a Schema, its dict form or a TOML file, got {type(schema).__name__}")


def _check_columns(frame: pd.DataFrame, schema: Schema, path) -> None:
    """Every column the schema names is in the file, and every column of the file is known to the schema."""
    for target in ("label", "sensitive"):
        column = getattr(schema, target)
        if column not in frame.columns:
            raise ValueError(f"{path}: no {target} column {column!r}; columns: {list(frame.columns)}")
    schema.transform(frame.iloc[:0], str(path), strict=True)


def _text_columns(schema: Schema) -> tuple[str, ...]:
    return tuple(c for c in (schema.label, schema.sensitive) if c is not None) + tuple(
        c.name for c in schema.columns if c.kind == "categorical")


def read_with_schema(path, schema) -> pd.DataFrame:
    """The rows of ``path`` (:func:`read_table`) read as ``schema`` expects them: its label, sensitive and
    categorical columns as text, so that a code such as ``"01"`` matches its declared category."""
    return read_table(path, text_columns=_text_columns(as_schema(schema)))


def load_table(path, *, label: str | None = None, sensitive: str | None = None, schema=None, test_data=None,
               test_size: float = 0.25, random_state: int = 0, privacy_unit: str = "sensitive",
               infer_under_record: bool = False, groups=None) -> Dataset:
    """A user's table (a CSV or Parquet file, see :func:`read_table`) as a split, preprocessed :class:`Dataset`.

    ``schema`` (a :class:`~dpfair.datasets.base.Schema`, its ``to_dict`` form, or a TOML file or text) is the
    public description of the table: features, ``label`` column and classes, ``sensitive`` column and groups;
    ``label`` and ``sensitive``, when given too, must agree with it.  Columns are matched by name; a column the
    schema names but the file lacks, or one the file has but the schema does not know (neither a feature, the
    label, the sensitive column nor ``ignore`` d), is an error naming it and the file.  Each row's features come
    from that row and the schema alone (as for the built-in data sets).

    Without a schema, ``label`` and ``sensitive`` are required and the schema is inferred from this file's rows
    (:func:`infer_schema`, which warns :class:`~dpfair.PrivacyLeakWarning`).  Under ``privacy_unit="record"`` those
    inferred ranges and categories are private, so this refuses unless ``infer_under_record=True``.  Under
    ``"sensitive"`` the features and labels are public and only the group list read off ``sensitive`` is not:
    ``groups`` declares it (every group the column may hold), so that nothing inferred depends on s.

    ``test_data`` is a second file preprocessed with the same schema as the test part; otherwise a random split
    (``test_size``, seeded by ``random_state``) stratified by label × group, as the built-in loaders do.  The
    returned ``Dataset.schema`` is the schema used (it travels with a model; ``schema.transform`` scores new rows).
    """
    from dpfair.privacy.units import PrivacyUnit, check_privacy_unit

    unit = check_privacy_unit(privacy_unit)
    infer_under_record = check_bool(infer_under_record, "infer_under_record")
    for key, value in (("label", label), ("sensitive", sensitive)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"{key} must be the name of a column, got {value!r}")
    if schema is not None:
        schema = as_schema(schema)
        for key, given in (("label", label), ("sensitive", sensitive)):
            declared = getattr(schema, key)
            if declared is None:
                values = "classes" if key == "label" else "groups"
                raise ValueError(f"the schema declares no {key} column; add {key} = \"...\" and its {values} = [...]")
            if given is not None and given != declared:
                raise ValueError(f"{key}={given!r} but the schema declares {key} = {declared!r}; give one or make "
                                 f"them agree")
        if groups is not None and [str(g) for g in groups] != list(schema.groups):
            raise ValueError(f"groups={list(groups)} but the schema declares groups = {list(schema.groups)}; give one "
                             "or make them agree")
    elif label is None or sensitive is None:
        raise ValueError("load_table needs label= and sensitive= (the names of those columns), or a schema= that "
                         "declares them")
    elif unit is PrivacyUnit.RECORD and not infer_under_record:
        raise ValueError(f"{path}: under privacy_unit='record' a schema inferred from the rows (ranges, categories, "
                         f"classes, groups) is private; pass a reviewed schema= (infer_schema(...).to_toml() "
                         f"proposes one), or infer_under_record=True to accept that leak")
    text = () if schema is None else _text_columns(schema)
    frame = read_table(path, text_columns=text)
    inferred = schema is None
    if inferred:
        schema = infer_schema(frame, label=label, sensitive=sensitive, name=str(path),
                              source=f"inferred from the rows of {path}", groups=groups)
    _check_columns(frame, schema, path)
    table = Table(name=table_name(path), y=np.zeros(0), s=np.zeros(0), label_names=list(schema.classes),
                  group_names=list(schema.groups), sensitive=schema.sensitive, description="", licence=LICENCE,
                  n_dropped=0, frame=frame, schema=schema)
    parts = f"{path} ({len(frame):,} rows)"
    if test_data is not None:
        test = read_table(test_data, text_columns=text)
        _check_columns(test, schema, test_data)
        used = [*schema.names, schema.label, schema.sensitive]
        table.frame = pd.concat([frame[used], test[used]], ignore_index=True)
        table.test_mask = np.arange(len(table.frame)) >= len(frame)
        table.split_note = f"train rows from {path}, test rows from {test_data} (test_size ignored)"
        parts += f" and {test_data} ({len(test):,} rows)"
    table.y = schema.codes(table.frame, "label", table.name)
    table.s = schema.codes(table.frame, "sensitive", table.name)
    how = ("inferred from the training rows: a statistic of them, not public (see the PrivacyLeakWarning)" if inferred
           else f"declared public ({schema.source})" if schema.source else "declared public")
    table.description = (
        f"Own table {parts}. Label {schema.label!r}: {', '.join(f'{i} = {c}' for i, c in enumerate(schema.classes))}."
        f" Groups by {schema.sensitive!r}: {', '.join(f'{i} = {g}' for i, g in enumerate(schema.groups))}. Schema "
        f"{how}."
    )
    return finish(table, test_size, random_state)
