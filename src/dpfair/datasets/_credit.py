"""Loaders of the credit and banking benchmarks: UCI Statlog German Credit, UCI Default of Credit Card Clients
(Taiwan) and UCI Bank Marketing (Portuguese bank), each with its public schema fixed in code (see
:mod:`dpfair.datasets._tabular` for how its constants were chosen).
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd

from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets._tabular_common import CC_BY, GITHUB, SUMMARY, UCI, drop_missing, feature_schema, sex_codes
from dpfair.datasets.base import Column, Dataset, Schema, Table, check_bool, check_choice, finish, numeric_columns


# --------------------------------------------------------------------------------------------------- german

GERMAN_FILES = (
    DataFile("german", "german.data", "b21f3d81db8071257d5ff1deaeba1fd4303b62712e6fcc9715c7a86202cb5871",
             f"{UCI}/statlog/german/german.data"),
)
GERMAN_COLUMNS = [
    "checking_status", "duration", "credit_history", "purpose", "credit_amount", "savings", "employment_since",
    "installment_rate", "personal_status_sex", "other_debtors", "residence_since", "property", "age",
    "other_installment_plans", "housing", "existing_credits", "job", "people_liable", "telephone",
    "foreign_worker", "credit_risk",
]
# The 7 numeric attributes (their rounded summary: german.doc gives no ranges), then the 13 symbolic ones with every
# code german.doc lists (A47 "vacation - does not exist?" and A95 "female: single" do not occur in german.data).
GERMAN_SCHEMA = Schema(
    numeric_columns("""
        duration          0   80     20.9  12.1
        credit_amount     0   20000  3270  2820
        installment_rate  1   4      2.97  1.12
        residence_since   1   4      2.85  1.1
        age               18  80     35.5  11.4
        existing_credits  1   4      1.41  0.577
        people_liable     1   2      1.16  0.362
    """) + tuple(Column.categorical(name, codes) for name, codes in [
        ("checking_status", ["A11", "A12", "A13", "A14"]),
        ("credit_history", ["A30", "A31", "A32", "A33", "A34"]),
        ("purpose", ["A40", "A41", "A42", "A43", "A44", "A45", "A46", "A47", "A48", "A49", "A410"]),
        ("savings", ["A61", "A62", "A63", "A64", "A65"]),
        ("employment_since", ["A71", "A72", "A73", "A74", "A75"]),
        ("personal_status_sex", ["A91", "A92", "A93", "A94", "A95"]),
        ("other_debtors", ["A101", "A102", "A103"]),
        ("property", ["A121", "A122", "A123", "A124"]),
        ("other_installment_plans", ["A141", "A142", "A143"]),
        ("housing", ["A151", "A152", "A153"]),
        ("job", ["A171", "A172", "A173", "A174"]),
        ("telephone", ["A191", "A192"]),
        ("foreign_worker", ["A201", "A202"]),
    ]),
    source="codes from german.doc; " + SUMMARY,
)


def load_german(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
                path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """UCI Statlog German Credit: predict good credit risk.

    ``german.data`` (1,000 rows, 20 attributes, space separated, symbolic codes ``A11``… explained in
    ``german.doc``).  Label 1 = good credit (attribute 21 = 1; 700 rows), 0 = bad (= 2).  Sensitive attributes:
    ``sex`` (default; from attribute 9 "personal status and sex": A92/A95 female = 0, A91/A93/A94 male = 1) and
    ``age`` (attribute 13: age <= 25 = 0, age > 25 = 1).  The defining column (personal_status_sex or age) is
    not a feature unless ``include_sensitive``.  Seven numeric attributes are clipped to public ranges and scaled
    with fixed constants, the 13 symbolic ones one-hot encoded over every code german.doc lists (feature names
    keep the codes, e.g. ``purpose=A43``; ``purpose=A47``, listed but absent from the file, is an all-zero
    feature); see :data:`GERMAN_SCHEMA`.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("sex", "age"), "german")
    (raw,) = fetch(GERMAN_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw), sep=" ", header=None, names=GERMAN_COLUMNS)
    frame, n_dropped = drop_missing(frame, GERMAN_COLUMNS)
    if sensitive == "sex":
        s = sex_codes(frame["personal_status_sex"].isin(["A92", "A95"]).to_numpy())
        groups, exclude = ["Female", "Male"], ["personal_status_sex"]
    else:
        s, groups, exclude = (frame["age"] > 25).to_numpy().astype(np.int64), ["age<=25", "age>25"], ["age"]
    table = Table(
        name="german", y=(frame["credit_risk"] == 1).to_numpy().astype(np.int64), s=s,
        label_names=["bad credit", "good credit"], group_names=groups, sensitive=sensitive,
        description=(
            f"UCI Statlog German Credit ({len(frame):,} rows, {n_dropped} dropped). Label 1 = good credit risk. "
            f"Groups by {sensitive}: {', '.join(f'{i} = {g}' for i, g in enumerate(groups))} "
            f"({'from attribute 9, A92/A95 = female' if sensitive == 'sex' else 'attribute 13 split at 25'}). "
            "Numeric attributes clipped and scaled with fixed public constants, symbolic attributes one-hot over "
            "the codes of german.doc; the defining "
            f"column {'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, schema=GERMAN_SCHEMA,
    )
    return finish(feature_schema(table, exclude, include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- credit

#: UCI distributes the data as an Excel workbook; this is a CSV export of its sheet ("Save as CSV", the named
#: header row kept), pinned by commit and sha256, cell for cell identical to three independent exports.
CREDIT_FILES = (
    DataFile("credit", "default_of_credit_card_clients.csv",
             "88bd2bd25327b52af2148b7437740aca427aaf8f0e52ad782ee8bbae44b509bd",
             f"{GITHUB}/dhavalptl630007/DataSets/c31a7ae62231225146d364eb057181571ebfc191/"
             "default_of_credit_card_clients.csv"),
)
CREDIT_LABEL = "default payment next month"
# UCI's page documents SEX 1 = male, 2 = female; EDUCATION 1-4 (graduate school, university, high school, others);
# MARRIAGE 1-3 (married, single, others); PAY_* -1 = paid duly, 1-9 = months of delay.  The file also holds the
# undocumented codes EDUCATION 0, 5, 6, MARRIAGE 0 and PAY_* -2, 0: they are declared here as categories / in
# range.  Other numeric constants: the rounded summary of the file.
CREDIT_SCHEMA = Schema(
    numeric_columns("""
        LIMIT_BAL  0        1e6      167000   130000
        AGE        20       80       35.5     9.22
        PAY_0      -2       9        -0.0167  1.12
        PAY_2      -2       9        -0.134   1.2
        PAY_3      -2       9        -0.166   1.2
        PAY_4      -2       9        -0.221   1.17
        PAY_5      -2       9        -0.266   1.13
        PAY_6      -2       9        -0.291   1.15
        BILL_AMT1  -400000  1700000  51200    73600
        BILL_AMT2  -400000  1700000  49200    71200
        BILL_AMT3  -400000  1700000  47000    69300
        BILL_AMT4  -400000  1700000  43300    64300
        BILL_AMT5  -400000  1700000  40300    60800
        BILL_AMT6  -400000  1700000  38900    59600
        PAY_AMT1   0        1700000  5660     16600
        PAY_AMT2   0        1700000  5920     23000
        PAY_AMT3   0        1700000  5230     17600
        PAY_AMT4   0        1700000  4830     15700
        PAY_AMT5   0        1700000  4800     15300
        PAY_AMT6   0        1700000  5220     17800
    """) + (
        Column.categorical("SEX", ["1", "2"]),
        Column.categorical("EDUCATION", ["0", "1", "2", "3", "4", "5", "6"]),
        Column.categorical("MARRIAGE", ["0", "1", "2", "3"]),
    ),
    source="codes from the UCI page plus the undocumented codes present in the file; " + SUMMARY,
)


def read_credit(path, data_home, download: bool) -> tuple[pd.DataFrame, int]:
    """``(frame, n_dropped)``: the 30,000 rows of the credit CSV, rows with a missing value dropped (none)."""
    (raw,) = fetch(CREDIT_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw))
    return drop_missing(frame, list(frame.columns))


def load_credit(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
                path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """UCI Default of Credit Card Clients (Taiwan, 2005): predict default on next month's payment.

    ``default_of_credit_card_clients.csv`` (30,000 rows; a CSV export of UCI's .xls, identical cell by cell; the
    download URL is that export's repository because UCI only serves the workbook).  Label 1 = ``default payment
    next month``.  Sensitive attribute ``sex`` (also accepted as ``SEX``): raw SEX 2 (female) = 0, 1 (male) = 1.
    Features (:data:`CREDIT_SCHEMA`): EDUCATION and MARRIAGE one-hot (undocumented codes 0, 5, 6 declared as
    categories); LIMIT_BAL, AGE, PAY_0, PAY_2..PAY_6, BILL_AMT1..6, PAY_AMT1..6 clipped to public ranges and
    scaled with fixed constants; ID dropped; SEX only with ``include_sensitive``.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("sex", "SEX"), "credit")
    frame, n_dropped = read_credit(path, data_home, download)
    table = Table(
        name="credit", y=frame[CREDIT_LABEL].to_numpy().astype(np.int64),
        s=sex_codes((frame["SEX"] == 2).to_numpy()), label_names=["no default", "default"],
        group_names=["Female", "Male"], sensitive="sex",
        description=(
            f"UCI Default of Credit Card Clients, Taiwan ({len(frame):,} rows, {n_dropped} dropped; read from a CSV "
            "export of UCI's Excel workbook). Label 1 = "
            "default payment next month. Groups by SEX: 0 = female (SEX 2), 1 = male (SEX 1). EDUCATION and "
            "MARRIAGE one-hot, the other 20 columns clipped and scaled with fixed public constants, ID dropped; SEX "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, schema=CREDIT_SCHEMA,
    )
    return finish(feature_schema(table, ["SEX"], include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- bank

BANK_FILES = {
    "kaggle": DataFile("bank", "kaggle/bank.csv", "c25bf6ac8ef9e37119427fce9a32923baf57cb466ca27b34b2c930e88035d2fe",
                       f"{GITHUB}/Lexie88rus/bank-marketing-analysis/7ad60d39249c902a9292e106a02f1b977725807e/"
                       "bank.csv"),
    "full": DataFile("bank", "bank-full.csv", "ada45d7c04ac65e4bf1a0a27996e73510848c28095dd40df9f5d4c153af67931",
                     f"{UCI}/00222/bank.zip", member="bank-full.csv"),
}
# Upper ends (inclusive) of the age bands that split ages 25-60 into 2 or 4 bands of near-equal size. They are the
# integer cut points that best equalise the bands, identical for kaggle/bank.csv and bank-full.csv (also the
# floored quartiles of age within 25-60 in the Kaggle file); computed once from the whole files and fixed here.
BANK_AGE_CUTS = {2: (), 3: (38,), 5: (32, 38, 47)}
# Categories as bank-names.txt lists them, in its order ("unknown" is a category).  day is the day of the month
# (1-31); the other numeric constants are the rounded summary of the Kaggle file (ranges also cover bank-full.csv).
BANK_SCHEMA = Schema(
    numeric_columns("""
        age       18      100     41.2   11.9
        balance   -10000  110000  1530   3230
        day       1       31      15.7   8.42
        campaign  1       70      2.51   2.72
        pdays     -1      900     51.3   109
        previous  0       300     0.833  2.29
        duration  0       5000    372    347
    """) + tuple(Column.categorical(name, values) for name, values in [
        ("job", ["admin.", "unknown", "unemployed", "management", "housemaid", "entrepreneur", "student",
                 "blue-collar", "self-employed", "retired", "technician", "services"]),
        ("marital", ["married", "divorced", "single"]),
        ("education", ["unknown", "secondary", "primary", "tertiary"]),
        ("default", ["yes", "no"]),
        ("housing", ["yes", "no"]),
        ("loan", ["yes", "no"]),
        ("contact", ["unknown", "telephone", "cellular"]),
        ("month", ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]),
        ("poutcome", ["unknown", "other", "failure", "success"]),
    ]),
    source="categories from bank-names.txt; " + SUMMARY,
)


def bank_age_groups(age: np.ndarray, n_groups: int, cuts: tuple[int, ...] | None = None
                    ) -> tuple[np.ndarray, list[str]]:
    """Group codes and names of the bank age groups (group 0 = under 25 or over 60).

    ``cuts`` are the inclusive upper ends of all but the last band of ages 25-60 (``n_groups - 2`` increasing
    ages); default :data:`BANK_AGE_CUTS`.
    """
    cuts = BANK_AGE_CUTS[n_groups] if cuts is None else tuple(cuts)
    if len(cuts) != n_groups - 2 or list(cuts) != sorted(set(cuts)) or not all(25 <= c < 60 for c in cuts):
        raise ValueError(f"{n_groups} bank age groups need {n_groups - 2} increasing cut points in 25-59, "
                         f"got {cuts}")
    age = np.asarray(age)
    middle = (age >= 25) & (age <= 60)
    band = np.searchsorted(np.asarray(cuts, dtype=np.int64), age, side="left")
    s = np.where(middle, 1 + band, 0).astype(np.int64)
    edges = [25, *(c + 1 for c in cuts), 61]
    names = ["age<25|>60"] + [f"age {lo}-{hi - 1}" for lo, hi in zip(edges[:-1], edges[1:])]
    return s, names


def read_bank(variant: str, path, data_home, download: bool) -> tuple[pd.DataFrame, int]:
    """``(frame, n_dropped)``: the rows of the Kaggle ``bank.csv`` (``variant="kaggle"``, 11,162) or of UCI's
    ``bank-full.csv`` (``"full"``, 45,211; label column renamed ``deposit``), rows with a missing value dropped."""
    (raw,) = fetch([BANK_FILES[variant]], path=path, data_home=data_home, download=download)
    if variant == "full":
        frame = pd.read_csv(io.BytesIO(raw), sep=";").rename(columns={"y": "deposit"})
    else:
        frame = pd.read_csv(io.BytesIO(raw))
    return drop_missing(frame, list(frame.columns))


def load_bank(*, sensitive: str = "age", test_size: float = 0.25, random_state: int = 0, data_home=None,
              path=None, download: bool = True, include_sensitive: bool = False, variant: str = "kaggle",
              n_groups: int = 2, keep_duration: bool = False) -> Dataset:
    """UCI Bank Marketing (Portuguese bank, 2008–2010): predict term-deposit subscription.

    ``variant="kaggle"`` (default) reads the Kaggle ``bank.csv`` (11,162 rows: every "yes" row of the full file
    and 5,873 "no" rows; label ``deposit``), the version used by PF-LD; ``variant="full"`` reads UCI's
    ``bank-full.csv`` (45,211 rows, ``;`` separated, label ``y``).  Label 1 = subscribed (yes).  ``unknown`` is
    kept as a category, not treated as missing.  ``duration`` (call length, known only after the call, leaks the
    label) is dropped unless ``keep_duration``.  Sensitive attribute ``age``, in ``n_groups`` groups: 2 groups =
    under 25 or over 60 (0) vs 25–60 (1); 3 groups = 0, 25–38, 39–60; 5 groups = 0, 25–32, 33–38, 39–47,
    48–60 (fixed cut points, see ``BANK_AGE_CUTS``; shares in the Kaggle file 8/46/46 % and 8/24/23/23/23 %, as
    in PF-LD's Table 1).  ``age`` is a feature only with ``include_sensitive``.  Other numeric columns clipped to
    public ranges and scaled with fixed constants, categorical ones one-hot over the categories of bank-names.txt
    (:data:`BANK_SCHEMA`).  Licence CC BY 4.0 (the Kaggle file is derived from the UCI data).
    """
    check_choice(sensitive, "sensitive attribute", ("age",), "bank")
    check_choice(variant, "variant", tuple(BANK_FILES), "bank")
    check_choice(n_groups, "n_groups", tuple(BANK_AGE_CUTS), "bank")
    keep_duration = check_bool(keep_duration, "keep_duration")
    frame, n_dropped = read_bank(variant, path, data_home, download)
    s, groups = bank_age_groups(frame["age"].to_numpy(), n_groups)
    shares = np.bincount(s, minlength=len(groups)) / len(s)
    group_text = ", ".join(f"{i} = {g} ({p:.0%})" for i, (g, p) in enumerate(zip(groups, shares)))
    table = Table(
        name="bank", y=(frame["deposit"] == "yes").to_numpy().astype(np.int64), s=s,
        label_names=["no deposit", "deposit"], group_names=groups, sensitive="age",
        description=(
            f"UCI Bank Marketing, {'Kaggle 11,162-row file' if variant == 'kaggle' else 'bank-full.csv'} "
            f"({len(frame):,} rows, {n_dropped} dropped; 'unknown' kept as a category). Label 1 = term deposit "
            f"subscribed. Groups by age: {group_text}. "
            f"duration {'kept' if keep_duration else 'dropped (leaks the label)'}; numeric columns clipped and "
            "scaled with fixed public constants, categorical one-hot over the categories of bank-names.txt; age "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=CC_BY if variant == "full" else "CC BY 4.0 (derived from UCI Bank Marketing; Kaggle copy)",
        n_dropped=n_dropped, frame=frame,
        schema=BANK_SCHEMA if keep_duration else BANK_SCHEMA.without(["duration"]),
    )
    return finish(feature_schema(table, ["age"], include_sensitive), test_size, random_state)
