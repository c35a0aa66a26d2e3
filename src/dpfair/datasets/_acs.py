"""Folktables ACSIncome (Ding et al., NeurIPS 2021) built from a local ACS PUMS person file."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from dpfair.datasets._files import DataFile, fetch, locate
from dpfair.datasets.base import Column, Dataset, Schema, Table, check_choice, check_test_size, finish

ACS_PUMS_URL = "https://www2.census.gov/programs-surveys/acs/data/pums"
ACS_FILES = (
    DataFile("acs_income", "acs_income.csv", None, None,
             homepage=f"{ACS_PUMS_URL}/2018/1-Year/ (a person file such as psam_p06.csv from csv_pca.zip, renamed; "
                      "or an ACSIncome CSV exported with folktables, pip install folktables)"),
)
ACS_LICENCE = "US Census public-use data (ACS PUMS)"
ACS_FEATURES = ["AGEP", "COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "WKHP", "SEX", "RAC1P"]
ACS_THRESHOLD = 50_000
# folktables' adult_filter, in its order: (column, operator, constant).
ACS_FILTERS = (("AGEP", ">", 16), ("PINCP", ">", 100), ("WKHP", ">", 0), ("PWGTP", ">=", 1))
ACS_GROUPS = {
    "SEX": ["Female", "Male"],
    "RAC1P": ["White", "Black or African American", "American Indian", "Alaska Native",
              "American Indian and Alaska Native, tribe specified or not", "Asian",
              "Native Hawaiian and Other Pacific Islander", "Some Other Race", "Two or More Races"],
}
# POBP code blocks of the PUMS data dictionary: 001-056 states and DC, 060-078 US island areas (Puerto Rico
# included), then one block of hundreds per world region.
ACS_POBP_REGIONS = ((1, 56, "US state or DC"), (60, 78, "US island area"), (100, 199, "Europe"),
                    (200, 299, "Asia"), (300, 399, "Americas"), (400, 499, "Africa"), (500, 599, "Oceania or at sea"))


def _codes(n: int, start: int = 0) -> list[str]:
    return [str(i) for i in range(start, start + n)]


# Code lists of the 2018 PUMS data dictionary (code 0 = N/A, folktables' coding of a blank, where the dictionary
# has N/A); OCCP one-hot over its first two digits (00-99: blocks of 100 codes of the Census occupation list);
# POBP over the regions above; AGEP (top-coded at 99) and WKHP (99 = 99 or more) mapped from their range to [-1, 1].
ACS_SCHEMA = Schema(
    (
        Column.numeric("AGEP", 17, 99, 58, 41),
        Column.categorical("COW", _codes(10)),
        Column.categorical("SCHL", _codes(25)),
        Column.categorical("MAR", _codes(5, 1)),
        Column.categorical("OCCP", ["N/A"] + [f"{i:02d}" for i in range(100)]),
        Column.categorical("POBP", [region for _, _, region in ACS_POBP_REGIONS]),
        Column.categorical("RELP", _codes(18)),
        Column.numeric("WKHP", 1, 99, 50, 49),
        Column.categorical("SEX", _codes(2, 1)),
        Column.categorical("RAC1P", _codes(9, 1)),
    ),
    source="codes of the 2018 ACS PUMS data dictionary; OCCP by its first two digits, POBP by world region; "
           "AGEP and WKHP from their documented ranges",
)


def _coarsen(codes: pd.DataFrame) -> pd.DataFrame:
    """The integer codes as the schema's category strings (OCCP and POBP coarsened)."""
    out = codes.astype(str)
    occp = codes["OCCP"]
    out["OCCP"] = np.where(occp == 0, "N/A", (occp // 100).map("{:02d}".format))
    pobp = codes["POBP"]
    out["POBP"] = np.select([(pobp >= lo) & (pobp <= hi) for lo, hi, _ in ACS_POBP_REGIONS],
                            [region for _, _, region in ACS_POBP_REGIONS], default=pobp.astype(str))
    return out


def load_acs_income(*, sensitive: str = "SEX", test_size: float = 0.25, random_state: int = 0, data_home=None,
                    path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """Folktables ACSIncome (Ding et al., NeurIPS 2021): predict personal income > 50,000 USD from ACS PUMS.

    Read from a file the user provides (no download, no checksum: the Census files are many and large),
    ``<data home>/acs_income/acs_income.csv`` (or ``.gz``) or any file given as ``path=``: either an ACS PUMS
    person CSV (e.g. ``psam_p06.csv`` from ``csv_pca.zip``; states may be concatenated) or a pre-extracted
    ACSIncome CSV (no PWGTP column) with the 10 feature columns and ``PINCP``, the income or folktables' label
    (True/False or 0/1).  As folktables' ``ACSIncome``: rows kept if AGEP > 16, PINCP > 100, WKHP > 0 and
    PWGTP >= 1 (each filter whose column the file has; PINCP only as an income); label 1 = PINCP > 50,000 (not
    adjusted by ADJINC); a missing feature value is coded 0.  Folktables' full ACSIncome (1,664,500 rows, the
    size Mangold et al., ICML 2023, use) comes from the 2018 1-Year person files of its state list (the 50 states
    and Puerto Rico, not DC).  Person files from 2019 on have RELSHIPP instead of RELP and are refused.

    Sensitive attribute ``SEX`` (default; raw 1 male, 2 female: female = 0, male = 1) or ``RAC1P`` (codes 1-9 as
    groups 0-8); its column is a feature only with ``include_sensitive`` (Mangold et al. leave sex out).
    Features (:data:`ACS_SCHEMA`): AGEP and WKHP clipped to their documented ranges and mapped to [-1, 1]; COW,
    SCHL, MAR, RELP, SEX, RAC1P one-hot over the data dictionary's codes; OCCP one-hot over its first two digits
    and POBP over world regions (public coarsenings of lists of about 530 and 220 codes).  Licence: US Census
    public-use data.
    """
    check_choice(sensitive, "sensitive attribute", tuple(ACS_GROUPS), "acs_income")
    test_size = check_test_size(test_size)
    (raw,) = fetch(ACS_FILES, path=path, data_home=data_home, download=download)
    (found,) = locate(ACS_FILES, path=path, data_home=data_home)
    where = f"acs_income: {found or 'the ACS file'}"  # every error about the file names it
    needed = set(ACS_FEATURES) | {"PINCP", "PWGTP", "RELSHIPP"}
    try:
        frame = pd.read_csv(io.BytesIO(raw), usecols=lambda c: c in needed)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where} is not a readable CSV file ({str(exc).strip().splitlines()[0]}); expected an ACS "
                         "PUMS person CSV or an ACSIncome CSV") from None
    absent = [c for c in ACS_FEATURES + ["PINCP"] if c not in frame.columns]
    if absent:
        hint = " (ACS PUMS files from 2019 on have RELSHIPP instead of RELP)" if "RELSHIPP" in frame.columns else ""
        raise ValueError(f"{where} has no column(s) {', '.join(absent)}{hint}; expected an ACS PUMS person CSV or an "
                         "ACSIncome CSV with AGEP, COW, SCHL, MAR, OCCP, POBP, RELP, WKHP, SEX, RAC1P and PINCP")
    pums = "PWGTP" in frame.columns
    numeric = ACS_FEATURES + (["PWGTP"] if pums else []) + ([] if frame["PINCP"].dtype == bool else ["PINCP"])
    for column in numeric:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = np.flatnonzero(values.isna().to_numpy() & frame[column].notna().to_numpy())
        if bad.size:
            raise ValueError(f"{where}: column {column} holds {frame[column].iloc[bad[0]]!r} on line {bad[0] + 2}, "
                             "not a number; the ACS PUMS columns hold numeric codes")
        frame[column] = values
    is_label = not pums and (frame["PINCP"].dtype == bool or frame["PINCP"].isin([0, 1]).all())
    n_raw = len(frame)
    keep = pd.Series(True, index=frame.index)
    for column, op, bound in ACS_FILTERS:
        if column in frame.columns and not (column == "PINCP" and is_label):
            values = frame[column].astype(float)
            keep &= values > bound if op == ">" else values >= bound
    frame = frame.loc[keep]
    if n_raw == 0:
        raise ValueError(f"{where} holds no rows, only a header; give a file of ACS PUMS person records")
    if frame.empty:
        raise ValueError(f"{where}: none of its {n_raw:,} rows passes folktables' filters (AGEP > 16, PINCP > 100, "
                         "WKHP > 0, PWGTP >= 1); give a file of ACS PUMS person records")
    lines = frame.index.to_numpy() + 2  # the file's line of each kept row (line 1 is the header)
    frame = frame.reset_index(drop=True)
    y = frame["PINCP"].astype(bool) if is_label else frame["PINCP"] > ACS_THRESHOLD

    codes = frame[ACS_FEATURES].astype(float).fillna(0.0)
    bad_codes = (~np.isfinite(codes) | (codes != np.round(codes))).to_numpy()
    if bad_codes.any():
        row, col = np.argwhere(bad_codes)[0]
        raise ValueError(f"{where}: column {ACS_FEATURES[col]} holds {codes.iat[row, col]:g} on line {lines[row]}, "
                         "not an integer code of the PUMS data dictionary")
    codes = codes.astype(np.int64)
    groups = ACS_GROUPS[sensitive]
    s = codes["SEX"].map({2: 0, 1: 1}) if sensitive == "SEX" else codes["RAC1P"] - 1
    outside = np.flatnonzero((s.isna() | ~s.between(0, len(groups) - 1)).to_numpy())
    if outside.size:
        raise ValueError(f"{where}: column {sensitive} holds {codes[sensitive].iat[outside[0]]} on line "
                         f"{lines[outside[0]]}, outside its {len(groups)} groups (codes "
                         f"{'1-2' if sensitive == 'SEX' else f'1-{len(groups)}'})")
    kind = "an ACS PUMS person file" if pums else "a pre-extracted ACSIncome file"
    table = Table(
        name="acs_income", y=y.to_numpy().astype(np.int64), s=s.to_numpy().astype(np.int64),
        label_names=["PINCP<=50000", "PINCP>50000"], group_names=list(groups), sensitive=sensitive,
        description=(
            f"Folktables ACSIncome from {kind} ({n_raw:,} rows; filters AGEP > 16, PINCP > 100, WKHP > 0, "
            f"PWGTP >= 1 leave {len(frame):,}). Label 1 = PINCP > 50,000. Groups by {sensitive}: "
            f"{', '.join(f'{i} = {g}' for i, g in enumerate(groups))}. AGEP and WKHP mapped from their documented "
            "ranges to [-1, 1], the other columns one-hot over the PUMS data dictionary's codes (OCCP by its first "
            f"two digits, POBP by world region; a missing code is 0, as in folktables); {sensitive} "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=ACS_LICENCE, n_dropped=0, frame=_coarsen(codes),
        schema=ACS_SCHEMA if include_sensitive else ACS_SCHEMA.without([sensitive]),
        encodes_sensitive=[sensitive] if include_sensitive else [],
    )
    try:
        return finish(table, test_size, random_state)
    except ValueError as exc:  # a code outside the schema's categories, a split it cannot make: about this file
        raise ValueError(f"{str(exc).strip().splitlines()[0]} (in {found or 'the ACS file'})") from None
