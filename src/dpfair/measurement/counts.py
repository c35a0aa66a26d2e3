"""The exact table of counts group × label × prediction of a table of predictions, streamed (what
``dpfair measure --predictions`` reads before its one release).

:func:`count_predictions` reads three kinds of columns (the true label, the prediction and one or more sensitive
columns) of a file, a folder of files or a glob (:func:`~dpfair.datasets.columnar.open_table`), a record batch at
a time, turns each batch's values into codes of the declared public lists with Arrow's vectorised ``index_in``,
and adds the batch's ``bincount`` to a k × l × l table. Memory is one batch and the table; time is a few passes of
compiled code over each column, no Python per value. With ``client`` (a ``distributed.Client``), each partition of
a ``dask.dataframe`` over the same files is counted on the cluster's workers and the tables are summed on the
driver.

Values match the declared lists as :func:`~dpfair.measurement.files.read_predictions` matches them: text as it is
written; integers as their decimal text; whole floats as integers (``1.0`` is ``"1"``); booleans as ``"1"`` and
``"0"``; a missing cell is an error naming the column, as is a value outside the declared list (never a row or a
count: the check reads private values).

Privacy: the table is exact, so private; :class:`CountTable` never shows a count in its ``repr``, and
:meth:`~dpfair.measurement.frame.PrivateMetricFrame.from_counts` is its one accounted release. On a cluster, the
workers that read the rows compute exact partial tables and send them to the driver, inside the trust boundary
that already holds the rows; only the release leaves it. The errors raised during a pass say which check failed,
never how many rows or which.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from dpfair.datasets.columnar import DEFAULT_BATCH_ROWS, open_table
from dpfair.datasets.schema import GROUP_JOIN
from dpfair.utils.progress import progress

__all__ = ["CountTable", "PublicCodes", "count_predictions"]


@dataclass(frozen=True, repr=False)
class CountTable:
    """The exact counts ``counts[g, y, ŷ]`` of people by public group, label and prediction (private: its
    ``repr`` shows the lists and the shape, never a count)."""

    counts: np.ndarray
    groups: tuple[str, ...]
    classes: tuple[str, ...]

    @property
    def n(self) -> int:
        """The number of rows counted (public, as everywhere in dpfair)."""
        return int(self.counts.sum())

    def __repr__(self) -> str:
        return f"CountTable(groups={list(self.groups)}, classes={list(self.classes)}, shape={self.counts.shape})"


def _whole_text(value: float) -> str:
    return str(int(value)) if math.isfinite(value) and value == int(value) else repr(float(value))


class PublicCodes:
    """The codes of one column's values in a public list (:meth:`codes`): ``public[code] == value``.

    ``column``: the column's name; ``outside``: the one-line error for a value outside the list (naming the
    column, the list and the fix; never the value, a row or a count)."""

    def __init__(self, public, column: str, outside: str):
        self.public = [str(v) for v in public]
        self.column, self.outside = column, outside
        self._sets = {}

    def _value_set(self, kind: str):
        """The public values that an Arrow array of ``kind`` can equal, as that type, and their positions."""
        import pyarrow as pa

        if kind not in self._sets:
            if kind == "string":
                values, where = self.public, list(range(len(self.public)))
                arrow = pa.array(values, pa.string())
            else:
                values, where = [], []
                for i, text in enumerate(self.public):
                    try:
                        number = float(text)
                    except ValueError:
                        continue
                    if kind == "int" and number == int(number) and str(int(number)) == text:
                        values.append(int(number))
                        where.append(i)
                    elif kind == "float" and _whole_text(number) == text:
                        values.append(number)
                        where.append(i)
                arrow = pa.array(values, pa.int64() if kind == "int" else pa.float64())
            self._sets[kind] = (arrow, np.asarray(where, dtype=np.int64))
        return self._sets[kind]

    def codes(self, array) -> np.ndarray:
        """The codes (int64) of an Arrow array's values; a missing value or one outside the list is one
        ``ValueError`` naming the column."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_dictionary(array.type):
            if array.null_count:
                self._missing()
            return self.codes(array.dictionary)[array.indices.to_numpy(zero_copy_only=False)] \
                if len(array.dictionary) else np.zeros(0, dtype=np.int64)
        if array.null_count:
            self._missing()
        kind = array.type
        if pa.types.is_boolean(kind):
            array, kind = pc.cast(array, pa.int64()), pa.int64()
        if pa.types.is_integer(kind):
            value_set, where = self._value_set("int")
            array = pc.cast(array, pa.int64())
        elif pa.types.is_floating(kind):
            value_set, where = self._value_set("float")
            array = pc.cast(array, pa.float64())
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            value_set, where = self._value_set("string")
            array = pc.cast(array, pa.string())
        else:
            value_set, where = self._value_set("string")
            array = pc.cast(array, pa.string())
        found = pc.index_in(array, value_set=value_set)
        if found.null_count:
            raise ValueError(self.outside)
        return where[found.to_numpy(zero_copy_only=False)]

    def _missing(self):
        raise ValueError(f"column {self.column!r} has empty cells; fill or drop those rows first (a measurement "
                         "needs every person's label, prediction and group)")


def _coders(label: str, prediction: str, sensitive: tuple[str, ...], group_lists, classes,
            default_classes: bool = False) -> tuple:
    """The codes of the label, the prediction and each sensitive column, with their errors."""
    listed = ", ".join(classes[:10])
    if default_classes:
        outside = ("the labels are not 0/1: declare them with --classes NEG,POS (the public list of labels; the "
                   "positive class last, or name it with --positive)",
                   "the predictions are not 0/1 labels: give predicted labels (scores or probabilities thresholded "
                   "at your decision cut-off first), or declare the labels with --classes NEG,POS")
    else:
        outside = tuple(f"column {c!r} has values outside classes=[{listed}]; declare every label with --classes "
                        "(the public list of labels), or fix the data" for c in (label, prediction))
    return (PublicCodes(classes, label, outside[0]), PublicCodes(classes, prediction, outside[1]),
            tuple(PublicCodes(g, c, f"column {c!r} has values outside groups=[{', '.join(map(str, g[:10]))}]; "
                                    "declare every group the column may hold with --groups, or fix the data")
                  for c, g in zip(sensitive, group_lists)))


def batch_counts(batch, label: str, prediction: str, sensitive: tuple[str, ...], group_lists, classes) -> np.ndarray:
    """The flat counts ``[g, y, ŷ]`` of one record batch (or Arrow table): each column coded against its public
    list, the groups of several sensitive columns their intersections in the order of
    ``itertools.product(*group_lists)`` (the first column's group the most significant)."""
    label_codes, prediction_codes, group_coders = _coders(label, prediction, sensitive, group_lists, classes)
    return _count(batch, label_codes, prediction_codes, group_coders)


def _count(batch, label_codes, prediction_codes, group_coders) -> np.ndarray:
    l = len(label_codes.public)
    g = np.zeros(batch.num_rows, dtype=np.int64)
    k = 1
    for coder in group_coders:
        g = g * len(coder.public) + coder.codes(batch.column(coder.column))
        k *= len(coder.public)
    cell = (g * l + label_codes.codes(batch.column(label_codes.column))) * l
    cell += prediction_codes.codes(batch.column(prediction_codes.column))
    return np.bincount(cell, minlength=k * l * l)


def _partition_counts(frame, label, prediction, sensitive, group_lists, classes) -> np.ndarray:
    """One ``dask.dataframe`` partition's flat counts (run on a worker)."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    return batch_counts(table, label, prediction, sensitive, group_lists, classes)


def _distinct(table, column: str) -> set[str]:
    """The values of one column as the lists match them (for ``epsilon=inf`` alone, where nothing is private)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    seen: set[str] = set()
    for batch in table.batches([column]):
        array = batch.column(0)
        if array.null_count:
            PublicCodes([], column, "")._missing()
        for value in pc.unique(array.dictionary_decode() if pa.types.is_dictionary(array.type) else array).to_pylist():
            if isinstance(value, bool):
                seen.add("1" if value else "0")
            elif isinstance(value, float):
                seen.add(_whole_text(value))
            else:
                seen.add(str(value))
    return seen


def count_predictions(source, *, label: str, prediction: str, sensitive, groups=None, classes=None,
                      batch_rows: int = DEFAULT_BATCH_ROWS, client=None, show_progress: bool = True) -> CountTable:
    """The exact :class:`CountTable` of the predictions in ``source`` (a CSV, TSV or Parquet file, a folder of
    them, or a glob), read a batch of ``batch_rows`` rows at a time.

    ``sensitive``: a column or a list of them (each person's group: the intersection of theirs); ``groups``: the
    public group list, or one list per sensitive column (``None``: every value present, each column's sorted, and
    the intersections present: for ``epsilon=inf`` alone, since it reads the groups off the rows); ``classes``:
    the public label list (``None``: ``0, 1``, which every label and prediction must be). ``client``: a
    ``distributed.Client`` whose workers count the partitions (each must reach the files at the same paths).
    A bar on stderr shows the rows read (their number is public)."""
    sensitive = (sensitive,) if isinstance(sensitive, str) else tuple(sensitive)
    needed = tuple(dict.fromkeys((label, prediction, *sensitive)))
    table = open_table(source, text_columns=needed)
    table.require(needed, {label: "--label", prediction: "--prediction", **dict.fromkeys(sensitive, "--sensitive")})
    total = table.row_count()
    if total == 0:
        raise ValueError(f"{source} has no rows; measure a file with one row per person")
    present = groups is None
    if present:
        group_lists = [sorted(_distinct(table, c)) for c in sensitive]
    else:
        group_lists = [list(g) for g in groups] if len(sensitive) > 1 else [list(groups)]
        if len(group_lists) != len(sensitive):
            raise ValueError(f"{len(sensitive)} sensitive columns need one group list each, got {len(group_lists)}")
    default_classes = classes is None
    class_list = ["0", "1"] if default_classes else [str(c) for c in classes]
    coders = _coders(label, prediction, sensitive, group_lists, class_list, default_classes)
    k = math.prod(len(g) for g in group_lists)
    l = len(class_list)
    flat = np.zeros(k * l * l, dtype=np.int64)
    if client is not None:
        flat += _cluster_counts(client, table, needed, label, prediction, sensitive, group_lists, class_list)
    else:
        with progress(total, desc=f"counting {table.files[0].name if len(table.files) == 1 else source}",
                      unit="row", enabled=show_progress) as bar:
            for batch in table.batches(needed, batch_rows):
                flat += _count(batch, *coders)
                bar.update(batch.num_rows)
    if not flat.any():
        raise ValueError(f"{source} has no rows; measure a file with one row per person")
    names = [GROUP_JOIN.join(parts) for parts in itertools.product(*group_lists)]
    counts = flat.reshape(k, l, l)
    if present and len(sensitive) > 1:  # the intersections present (ε = ∞ only: nothing is private)
        keep = counts.sum(axis=(1, 2)) > 0
        counts, names = counts[keep], [n for n, kept in zip(names, keep) if kept]
    return CountTable(counts, tuple(names), tuple(class_list))


def _cluster_counts(client, table, needed, label, prediction, sensitive, group_lists, classes) -> np.ndarray:
    """The flat counts of ``table`` summed over a ``dask.dataframe``'s partitions, counted on ``client``'s
    workers (the exact partial tables travel to this process only)."""
    import dask
    import dask.dataframe as dd

    files = [str(f) for f in table.files]
    if table.kind == "parquet":  # a partitioned folder as a whole, so that its partition keys are columns
        frame = dd.read_parquet(str(table.base) if table.base is not None else files, columns=list(needed))
    else:
        frame = dd.read_csv(files, sep="\t" if table.kind == "tsv" else ",", usecols=list(needed),
                            dtype=dict.fromkeys(needed, str), keep_default_na=True, blocksize="64MB")
    parts = [dask.delayed(_partition_counts, pure=False)(part, label, prediction, sensitive, group_lists, classes)
             for part in frame.to_delayed()]
    total = dask.delayed(sum, pure=False)(parts)
    return np.asarray(client.compute(total).result(), dtype=np.int64)
