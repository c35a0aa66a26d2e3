"""Tables too large to hold: a file, a folder of files (a partitioned data set) or a glob, read as one Arrow
data set in record batches (:func:`open_table`).

A warehouse's table is rarely one file: it is a folder of Parquet parts, often partitioned in Hive's style
(``region=north/part-0.parquet``), or a set of CSV exports. :class:`ColumnarTable` names them as one table and
reads only the columns asked for, a batch of rows at a time, so that memory is bounded by the batch, not by the
table. CSV cells of the columns read as text stay text (``"01"`` keeps its zero), and the cells pandas reads as
missing (empty, ``NA``, ``NaN``, ``null``, ...) are missing here too, as :func:`~dpfair.datasets.reading.read_table`
reads them. Every file's columns are checked before the first row is read, so a folder whose files disagree is one
line naming the file and the column, not a half-finished pass.

Privacy: reading is not a release. What this module says about a table is public or a fact of its files' layout
(the file names, their column names and types, the number of rows in a Parquet footer); it never prints a value.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from pathlib import Path

from dpfair.datasets.reading import COMPRESSIONS, FORMATS, check_separator, file_format

__all__ = ["DEFAULT_BATCH_ROWS", "ColumnarTable", "open_table", "table_files"]

#: Rows per record batch: about 8 MiB a column of 8-byte values, small beside any machine and large enough that
#: Arrow's per-batch cost vanishes.
DEFAULT_BATCH_ROWS = 1 << 20

#: Record batches read ahead of the one in use (one file at a time): Arrow's default (16 batches of 4 files) holds
#: some 64 batches in memory, which for a wide table is gigabytes.
READAHEAD_BATCHES = 2

#: The pandas missing-value markers a CSV cell may hold (``pandas.read_csv``'s defaults), read as missing.
CSV_MISSING = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
               "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def _glob_chars(text: str) -> bool:
    return any(c in text for c in "*?[")


def _known(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] in FORMATS and not path.name.startswith((".", "_"))


def table_files(source) -> tuple[list[Path], Path | None]:
    """The files of a table and the folder they are partitioned under (``None`` for a file or a glob).

    ``source``: a file, a folder (every CSV, TSV or Parquet file under it, hidden and ``_``-prefixed ones such as
    ``_SUCCESS`` skipped) or a glob (``"exports/2026-*.parquet"``, ``**`` for any depth). Nothing found is a
    ``FileNotFoundError`` naming ``source``; files of more than one format a ``ValueError``."""
    text = str(source)
    path = Path(text)
    if path.is_file():
        file_format(path)  # a name that tells no format: one line naming the suffixes read
        files, base = [path], None
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _known(p.relative_to(path)))
        base = path
        if not files:
            raise FileNotFoundError(f"{text}: a folder with no CSV, TSV or Parquet file in it (files ending in "
                                    ".csv, .tsv, .parquet or .pq, at any depth)")
    elif _glob_chars(text):
        files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file() and _known(Path(p)))
        base = None
        if not files:
            raise FileNotFoundError(f"{text}: no CSV, TSV or Parquet file matches this pattern")
    else:
        if path.suffix:
            file_format(path)  # a name that tells no format is said first, as for a file that exists
        raise FileNotFoundError(f"data file {text!r} not found")
    kinds = sorted({file_format(p) for p in files})
    if len(kinds) > 1:
        raise ValueError(f"{text}: files of {' and '.join(kinds)} formats together; a table is one format (convert "
                         "the others, or name one kind with a glob such as *.parquet)")
    return files, base


@dataclass(frozen=True)
class ColumnarTable:
    """One table over one or more files, read column by column in record batches (:func:`open_table`).

    Attributes: ``source`` (as the user named it), ``files``, ``kind`` (``"parquet"``, ``"csv"``, ``"tsv"``),
    ``columns`` (every column name the table has, partition keys included), ``dataset`` (the
    :class:`pyarrow.dataset.Dataset`) and ``base`` (the folder a partitioned table's files lie under, or
    ``None``)."""

    source: str
    files: tuple[Path, ...]
    kind: str
    columns: tuple[str, ...]
    dataset: object
    base: Path | None = None

    def require(self, names, flags: dict | None = None) -> None:
        """Every file holds each of ``names`` (a missing one is one ``ValueError`` naming it, its flag in
        ``flags`` and the file)."""
        import pyarrow as pa

        flags = flags or {}
        partitions = self.partition_keys()
        for name in names:
            if name not in self.columns:
                flag = f" ({flags[name]})" if name in flags else ""
                raise ValueError(f"{self.source}: no column {name!r}{flag}; its columns: {list(self.columns)[:20]}")
        if len(self.files) == 1:
            return
        for fragment in self.dataset.get_fragments():
            try:
                have = set(fragment.physical_schema.names) | partitions
            except (OSError, pa.ArrowException) as exc:
                raise ValueError(f"{fragment.path}: cannot read it as {self.kind}: {_first_line(exc)}") from None
            lacking = [n for n in names if n not in have]
            if lacking:
                raise ValueError(f"{self.source}: files of different schemas: {fragment.path} has no column "
                                 f"{lacking[0]!r}; give a folder or glob whose files share their columns")

    def partition_keys(self) -> set[str]:
        """The columns a partitioned folder's ``key=value`` folders name."""
        if self.base is None:
            return set()
        return {part.split("=", 1)[0] for f in self.files for part in f.relative_to(self.base).parts[:-1]
                if "=" in part}

    def row_count(self) -> int | None:
        """The number of rows when the files' footers say it without a pass (Parquet), else ``None``."""
        if self.kind != "parquet":
            return None
        return int(self.dataset.count_rows())

    def batches(self, columns, batch_rows: int = DEFAULT_BATCH_ROWS):
        """The table's ``columns``, ``batch_rows`` rows (at most) at a time, as :class:`pyarrow.RecordBatch` es.
        A file that cannot be read, or whose column has another type than the first file's, is one
        ``ValueError`` naming the table."""
        import pyarrow as pa

        scanner = self.dataset.scanner(columns=list(columns), batch_size=int(batch_rows), use_threads=True,
                                       batch_readahead=READAHEAD_BATCHES, fragment_readahead=1)
        try:
            for batch in scanner.to_batches():
                if batch.num_rows:
                    yield batch
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{self.source}: cannot read it as one {self.kind} table: {_first_line(exc)} (do its "
                             "files share their columns' types?)") from None


    def frames(self, columns, cells: int, batch_rows: int = DEFAULT_BATCH_ROWS):
        """The table's ``columns`` as pandas frames of at most ``cells`` cells (at least 1,024 rows, at most
        ``batch_rows``): what a schema's cleaning rules read, a batch at a time. A text cell as pandas holds it is
        some 60 bytes, so ``cells`` bounds a frame's memory whatever the table's width."""
        columns = list(columns)
        rows = min(int(batch_rows), max(1024, int(cells) // max(1, len(columns))))
        for batch in self.batches(columns, rows):
            yield batch.to_pandas()


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


_PANDAS_INDEX = re.compile(r"__index_level_\d+__")

#: Bytes of each text file looked at for its encoding before Arrow reads it.
SNIFF_BYTES = 1 << 16


def _check_utf8(path: Path) -> None:
    """A CSV or TSV file whose first bytes are not UTF-8 text (a UTF-16 export, Latin-1): one line and the fix."""
    import codecs

    if path.suffix.lower() in COMPRESSIONS:
        return  # Arrow reads it decompressed and says so itself
    with open(path, "rb") as handle:
        head = handle.read(SNIFF_BYTES)
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        clean = b"\x00" not in head
    except UnicodeDecodeError:
        clean = False
    if not clean:
        raise ValueError(f"{path}: not UTF-8 text (a spreadsheet's UTF-16 or Latin-1 export?); save it as UTF-8 "
                         "CSV")


def _header(path: Path, delimiter: str) -> list[str]:
    """The column names of a CSV or TSV file's first line (decompressed where its name says so)."""
    import csv
    import io

    import pyarrow as pa

    with pa.input_stream(str(path), compression="detect") as stream:
        first = io.TextIOWrapper(stream, encoding="utf-8", newline="").readline()
    return next(csv.reader([first], delimiter=delimiter), [])


def _keys(path: Path, base: Path) -> tuple[str, ...]:
    return tuple(part.split("=", 1)[0] for part in path.relative_to(base).parts[:-1] if "=" in part)


def _check_partitions(files, base: Path, source) -> None:
    """Every file of a partitioned folder lies under the same ``key=value`` folders: a file outside them (a
    partition folder missing, a file copied one level too high) would read as rows without that column's value."""
    keys = {path: _keys(path, base) for path in files}
    every = list(dict.fromkeys(k for ks in keys.values() for k in ks))
    for path, ks in keys.items():
        lacking = [k for k in every if k not in ks]
        if lacking:
            example = next(p for p, other in keys.items() if lacking[0] in other)
            raise ValueError(f"{source}: a missing partition: {path} is not under a {lacking[0]}=... folder as "
                             f"{example} is; put every file under the same key=value folders")


def open_table(source, *, text_columns=(), raw: bool = False) -> ColumnarTable:
    """``source`` (a file, a folder or a glob: :func:`table_files`) as one :class:`ColumnarTable`.

    ``text_columns``: columns a CSV reads as text (the rest as Arrow infers them). ``raw=True`` reads every cell of
    a CSV as the text it holds, an empty cell as ``""`` (what a schema's cleaning rules read, as
    :func:`~dpfair.datasets.reading.read_table` with ``raw=True``). A folder's Hive-style partition folders
    (``key=value``) are columns too. Parquet needs pyarrow (a dependency of dpfair)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

    files, base = table_files(source)
    if base is not None:
        _check_partitions(files, base, source)
    kind = file_format(files[0])
    if kind == "parquet":  # a row group is read when its batches are: not buffered ahead (a wide table's gigabytes)
        fmt = pads.ParquetFileFormat(default_fragment_scan_options=pads.ParquetFragmentScanOptions(pre_buffer=False))
    else:
        for path in files:
            _check_utf8(path)
        delimiter = "\t" if kind == "tsv" else ","
        if raw:
            convert = pacsv.ConvertOptions(column_types=dict.fromkeys(_header(files[0], delimiter), pa.string()),
                                           null_values=[], strings_can_be_null=False)
        else:
            convert = pacsv.ConvertOptions(column_types=dict.fromkeys(text_columns, pa.string()),
                                           null_values=list(CSV_MISSING), strings_can_be_null=True)
        fmt = pads.CsvFileFormat(parse_options=pacsv.ParseOptions(delimiter=delimiter), convert_options=convert)
    try:
        if base is not None:
            dataset = pads.dataset([str(f) for f in files], format=fmt, partitioning="hive",
                                   partition_base_dir=str(base))
        else:
            dataset = pads.dataset([str(f) for f in files], format=fmt)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(f"{source}: cannot read it as {kind}: {_first_line(exc)}") from None
    # pandas' own index, which to_parquet writes as a column (read_parquet restores it as the index): not data
    names = tuple(n for n in dataset.schema.names if not (kind == "parquet" and _PANDAS_INDEX.fullmatch(n)))
    if kind != "parquet" and len(names) == 1:
        check_separator(files[0], kind, names[0])
    return ColumnarTable(str(source), tuple(files), kind, names, dataset, base)
