"""Reading a user's table file: a CSV (or TSV, optionally compressed) or a Parquet file, one ``ValueError`` naming
the file and the fix for anything that cannot be read."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

#: File suffixes :func:`read_table` reads (a CSV may also be compressed: ``.csv.gz``, ``.csv.zip``, ...).
FORMATS = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet"}
COMPRESSIONS = (".gz", ".bz2", ".zip", ".xz", ".zst")
LICENCE = "the user's own data"


def file_format(path: Path) -> str:
    """The format of a table file from its name: ``"csv"``, ``"tsv"`` or ``"parquet"`` (a ``ValueError`` naming the
    suffixes read otherwise)."""
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


def read_table(path, *, text_columns=(), raw: bool = False) -> pd.DataFrame:
    """The rows of a CSV (``.csv``, ``.tsv``, optionally compressed) or Parquet (``.parquet``, ``.pq``) file.

    Columns are named by the file's header.  ``text_columns`` are read as text from a CSV (category codes such as
    ``"01"`` keep their leading zeros).  ``raw=True`` reads every cell of a CSV as the text it holds (an empty
    cell as ``""``, ``"NA"`` as ``"NA"``): what a schema's cleaning rules read, so that a CSV and its Parquet copy
    give the same cells (a Parquet file keeps its own types; its nulls are missing cells).  Parquet needs pyarrow.
    A file that cannot be read is one ``ValueError`` (``FileNotFoundError`` when it does not exist) naming it.
    """
    path = Path(path)
    kind = file_format(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} not found")
    try:
        if kind == "parquet":
            if importlib.util.find_spec("pyarrow") is None:
                raise ValueError(f"{path}: reading Parquet needs pyarrow: pip install pyarrow")
            frame = pd.read_parquet(path, engine="pyarrow")
        else:
            sep = "\t" if kind == "tsv" else ","
            frame = (pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False) if raw else
                     pd.read_csv(path, sep=sep, dtype=dict.fromkeys(text_columns, str)))
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
        check_separator(path, kind, names[0])
    return frame


#: Separators a one-column header may hide, and what each is called in the error.
_SEPARATORS = {";": "';'", "\t": "tab", "|": "'|'", ",": "','"}


def check_separator(path: Path, kind: str, header: str) -> None:
    """A CSV or TSV read as one column whose header holds another separator: one line naming it and the fix."""
    own, read_as = ("\t", "a .tsv file is read tab-separated") if kind == "tsv" else (",", "a .csv file is read "
                                                                                          "comma-separated")
    for sep, name in _SEPARATORS.items():
        if sep != own and sep in header:
            fix = {"\t": "name the file .tsv", ",": "name the file .csv"}.get(sep, "save it comma-separated (.csv)")
            raise ValueError(f"{path}: one column {header[:60]!r}: the file seems {name}-separated and {read_as}; "
                             f"{fix}")
