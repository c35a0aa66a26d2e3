"""Users' own tables: read a CSV or Parquet file into a :class:`~dpfair.datasets.Dataset` through a public schema.

A user's table goes through the same rules as the built-in data sets (:func:`~dpfair.datasets.base.finish`): a
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

from pathlib import Path

import numpy as np
import pandas as pd

from dpfair.datasets.base import Dataset, Schema, Table, assemble, check_bool, check_test_size
from dpfair.datasets.proposal import infer_schema, propose_schema  # noqa: F401 - the own-table API in one place
from dpfair.datasets.reading import COMPRESSIONS, FORMATS, LICENCE, read_table, table_name  # noqa: F401
from dpfair.datasets.store import WHERE, build_store, check_table_columns  # noqa: F401

def as_schema(schema) -> Schema:
    """A :class:`~dpfair.datasets.base.Schema` from itself, its dict form (``to_dict``) or a TOML file or text."""
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, dict):
        return Schema.from_dict(schema)
    if isinstance(schema, (str, Path)):
        return Schema.from_toml(schema)
    raise ValueError(f"schema must be a Schema, its dict form or a TOML file, got {type(schema).__name__}")


def read_with_schema(path, schema) -> pd.DataFrame:
    """The rows of ``path`` (:func:`read_table`) as ``schema`` reads them: every cell of a CSV as its text (the
    schema's cleaning rules parse numbers, match categories and find missing cells), a Parquet file's own types."""
    as_schema(schema)
    return read_table(path, raw=True)


def _columns(value, key: str) -> tuple[str, ...] | None:
    """A column name, or (for ``sensitive``) a list of them, as a tuple."""
    if value is None:
        return None
    names = [value] if isinstance(value, str) else list(value) if key == "sensitive" and isinstance(
        value, (list, tuple)) else None
    if not names or not all(isinstance(v, str) and v for v in names):
        what = "the name of a column" + (" or a list of them" if key == "sensitive" else "")
        raise ValueError(f"{key} must be {what}, got {value!r}")
    return tuple(names)


def _agree(schema: Schema, label, sensitive, groups) -> None:
    """The ``label``, ``sensitive`` and ``groups`` given beside a schema agree with what it declares."""
    for key, given, declared in (("label", label, (schema.label,) if schema.label else ()),
                                 ("sensitive", sensitive, schema.sensitive_columns)):
        if not declared:
            values = "classes" if key == "label" else "groups"
            raise ValueError(f"the schema declares no {key} column; add {key} = \"...\" and its {values} = [...]")
        if given is not None and given != declared:
            shown = given[0] if len(given) == 1 else list(given)
            raise ValueError(f"{key}={shown!r} but the schema declares {key} = "
                             f"{declared[0] if len(declared) == 1 else list(declared)!r}; give one or make them agree")
    if groups is not None:
        lists = groups if len(schema.sensitive_columns) > 1 else [groups]
        given = [[str(g) for g in part] for part in (lists.values() if isinstance(lists, dict) else lists)]
        if given != [list(g) for g in schema.group_lists]:
            raise ValueError(f"groups={groups!r} but the schema declares groups = {schema.to_dict()['groups']}; give "
                             "one or make them agree")


def _check_drop(schema: Schema, unit, path) -> None:
    """The schema's ``"drop"`` rules are row-local filters: under add/remove-one (the record unit) neighbouring
    tables stay neighbouring or become equal, so a fit's ε covers the rows it keeps; under the sensitive unit the
    features and labels are public, so a drop on them changes only the public n, while a drop on a missing group
    would depend on a private value and is refused."""
    from dpfair.privacy.units import PrivacyUnit

    if unit is PrivacyUnit.SENSITIVE and schema.sensitive_missing == "drop":
        raise ValueError(f"{path}: sensitive_missing = \"drop\" drops rows by whether a private group is missing, "
                         "which the sensitive unit does not cover; declare a group for them (a value such as "
                         "\"unknown\" in the column and in groups), or train under privacy_unit=record")


def _drop_note(schema: Schema, n_out: int) -> str:
    """The description's note of the ``n_out`` rows the schema's declared ``"drop"`` rules left out."""
    if not n_out:
        return ""
    rules = [f"{c.name!r}" for c in schema.columns if c.missing is not None and c.missing.action == "drop"]
    rules += [repr(getattr(schema, t)) if t == "label" else repr(schema.attribute)
              for t in ("label", "sensitive") if getattr(schema, f"{t}_missing") == "drop"]
    return (f" {n_out:,} row(s) with a missing {', '.join(rules)} left out, as the schema declares (missing = "
            "\"drop\": a row-local filter, so the ε covers the rows kept).")


def load_table(path, *, label: str | None = None, sensitive=None, schema=None, test_data=None,
               test_size: float = 0.25, random_state: int = 0, privacy_unit: str = "sensitive",
               infer_under_record: bool = False, groups=None, where: str = "auto", cache_dir=None,
               show_progress: bool = False) -> Dataset:
    """A user's table (a CSV or Parquet file, see :func:`read_table`) as a split, preprocessed :class:`Dataset`.

    ``schema`` (a :class:`~dpfair.datasets.base.Schema`, its ``to_dict`` form, or a TOML file or text) is the
    public description of the table: features and their cleaning rules, ``label`` column and classes,
    ``sensitive`` column(s) and groups; ``label`` and ``sensitive``, when given too, must agree with it.  Columns
    are matched by name; a column the schema names but the file lacks, or one the file has but the schema does not
    know (neither a feature, the label, a sensitive column nor ``ignore`` d), is an error naming it and the file.
    Each row's features come from that row and the schema alone (as for the built-in data sets); rows the schema
    declares dropped (``missing = "drop"``) are left out, and the description says how many.

    Without a schema, ``label`` and ``sensitive`` are required and the schema is inferred from this file's rows
    (:func:`infer_schema`, which warns :class:`~dpfair.PrivacyLeakWarning`).  Under ``privacy_unit="record"`` those
    inferred ranges and categories are private, so this refuses unless ``infer_under_record=True``.  Under
    ``"sensitive"`` the features and labels are public and only the group list read off ``sensitive`` is not:
    ``groups`` declares it (every group the column may hold; one list per column for several), so that nothing
    inferred depends on s.  ``sensitive`` may list several columns: the groups are their intersections.

    ``test_data`` is a second file preprocessed with the same schema as the test part; otherwise a random split
    (``test_size``, seeded by ``random_state``) stratified by label × group, as the built-in loaders do.  The
    returned ``Dataset.schema`` is the schema used (it travels with a model; ``schema.prepare`` scores new rows).

    ``path`` may be a file, a folder of files (a partitioned data set, whose ``key=value`` folders are columns) or a
    glob. The rows are streamed through the schema into a float32 feature store (:mod:`dpfair.datasets.store`):
    ``X_train`` and ``X_test`` are views of it, in memory or (``where="disk"``, or ``"auto"`` when it would take
    more than half the memory available) of a file in ``cache_dir`` that a later run on the same table reuses.
    ``show_progress`` shows a bar for each pass over the rows.
    """
    from dpfair.privacy.units import PrivacyUnit, check_privacy_unit

    unit = check_privacy_unit(privacy_unit)
    check_test_size(test_size)
    infer_under_record = check_bool(infer_under_record, "infer_under_record")
    label_columns, sensitive_columns = _columns(label, "label"), _columns(sensitive, "sensitive")
    if schema is not None:
        schema = as_schema(schema)
        _agree(schema, label_columns, sensitive_columns, groups)
    elif label is None or sensitive is None:
        raise ValueError("load_table needs label= and sensitive= (the names of those columns), or a schema= that "
                         "declares them")
    elif unit is PrivacyUnit.RECORD and not infer_under_record:
        raise ValueError(f"{path}: under privacy_unit='record' a schema inferred from the rows (ranges, categories, "
                         f"classes, groups) is private; pass a reviewed schema= (infer_schema(...).to_toml() "
                         f"proposes one), or infer_under_record=True to accept that leak")
    from dpfair.datasets.columnar import open_table

    table_in = open_table(path, raw=True)
    test_in = None if test_data is None else open_table(test_data, raw=True)
    inferred = schema is None
    if inferred:  # a proposal reads every row (review it, then declare it: dpfair schema writes one)
        frame = pd.concat([b.to_pandas() for b in table_in.batches(table_in.columns)], ignore_index=True)
        schema = infer_schema(frame, label=label, sensitive=list(sensitive_columns), name=str(path),
                              source=f"inferred from the rows of {path}", groups=groups)
        del frame
    _check_drop(schema, unit, path)
    store = build_store(table_in, schema, test_table=test_in, test_size=test_size, random_state=random_state,
                        where=where, cache_dir=cache_dir, show_progress=show_progress)
    table = Table(name=table_name(path), y=np.zeros(0), s=np.zeros(0), label_names=list(schema.classes),
                  group_names=list(schema.groups), sensitive=schema.attribute, description="", licence=LICENCE,
                  n_dropped=0, schema=schema)
    n_train, n = store.n_train, len(store.y)
    parts = (f"{path} ({n:,} rows)" if test_data is None else
             f"{path} ({n_train:,} rows) and {test_data} ({n - n_train:,} rows)")
    how = ("inferred from the training rows: a statistic of them, not public (see the PrivacyLeakWarning)" if inferred
           else f"declared public ({schema.source})" if schema.source else "declared public")
    by = schema.attribute + ("" if len(schema.sensitive_columns) == 1 else " (intersectional)")
    table.description = (
        f"Own table {parts}. Label {schema.label!r}: {', '.join(f'{i} = {c}' for i, c in enumerate(schema.classes))}."
        f" Groups by {by!r}: {', '.join(f'{i} = {g}' for i, g in enumerate(schema.groups))}."
        f"{_drop_note(schema, store.n_dropped)} Schema {how}."
    )
    return assemble(table, (store.X_train, store.y[:n_train], store.s[:n_train]),
                    (store.X_test, store.y[n_train:], store.s[n_train:]), schema.feature_names, schema,
                    store.split_note)
