"""What the loaders of the tabular benchmarks share: the sources' addresses and licence, the note on how their
schemas' constants were fixed, and the steps every loader takes (rows with a missing value dropped, the columns
that define the sensitive attribute kept or removed, sex coded female = 0, male = 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfair.datasets.base import Table

UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
GITHUB = "https://raw.githubusercontent.com"
CC_BY = "CC BY 4.0 (UCI Machine Learning Repository)"


def drop_missing(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, int]:
    keep = frame[columns].notna().all(axis=1)
    return frame.loc[keep].reset_index(drop=True), int((~keep).sum())


def feature_schema(table: Table, exclude: list[str], include_sensitive: bool,
                   encodes: list[str] | None = None) -> Table:
    """Remove the columns that define sensitive attributes (``exclude``) from the schema unless asked to keep them;
    kept, those that encode the declared one (``encodes``, default all of ``exclude``) are recorded as such."""
    if not include_sensitive:
        table.schema = table.schema.without(exclude)
    else:
        table.encodes_sensitive = list(exclude if encodes is None else encodes)
    return table


SUMMARY = ("ranges: extremes of the public file rounded outward unless documented; center/scale: its mean and "
           "standard deviation rounded to 3 significant digits, fixed once in code")


def sex_codes(is_female: np.ndarray) -> np.ndarray:
    return np.where(is_female, 0, 1).astype(np.int64)
