"""Loaders of the tabular fairness benchmarks (UCI and ProPublica files).

Group codes follow one convention where it applies: sex is coded female = 0, male = 1 in every data set,
whatever the raw coding; a binary group is otherwise listed in ``group_names`` in the order of its codes.
Each loader's docstring gives its exact definitions.

Each data set declares its public :class:`~dpfair.datasets.base.Schema` here, fixed in code (``*_SCHEMA``): the
categories of every categorical column as the data set's documentation lists them (adult.names, german.doc,
bank-names.txt, the ARFF header of dutch, the UCI pages), and for every numeric column a range ``[lo, hi]`` and
centring/scaling constants.  Unless a comment says the documentation gives them, ranges are the extremes of the
public file rounded outward and ``center``/``scale`` its mean and standard deviation rounded to 3 significant
digits: a summary of the public file fixed once in code and treated as public schema, never recomputed from the
rows being loaded.  Label thresholds are constants too.  So a row's features depend on that row alone.

This module holds adult, compas and parkinsons; the credit and banking loaders (german, credit, bank) are in
:mod:`dpfair.datasets._credit`, the census-like ones (communities, dutch) in :mod:`dpfair.datasets._census`, and
what they share in :mod:`dpfair.datasets._tabular_common`; all are importable from here.
"""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pandas as pd

from dpfair.datasets._census import (COMMUNITIES_FILES, COMMUNITIES_SCHEMA, COMMUNITIES_TARGET,  # noqa: F401
                                     COMMUNITIES_THRESHOLD, DUTCH_FILES, DUTCH_SCHEMA, load_communities, load_dutch,
                                     read_communities, read_dutch)
from dpfair.datasets._credit import (BANK_AGE_CUTS, BANK_FILES, BANK_SCHEMA, CREDIT_FILES, CREDIT_LABEL,  # noqa: F401
                                     CREDIT_SCHEMA, GERMAN_COLUMNS, GERMAN_FILES, GERMAN_SCHEMA, bank_age_groups,
                                     load_bank, load_credit, load_german, read_bank, read_credit)
from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets._tabular_common import (CC_BY, GITHUB, SUMMARY, UCI, drop_missing, feature_schema,
                                             sex_codes)
from dpfair.datasets.base import Column, Dataset, Schema, Table, check_bool, check_choice, finish, numeric_columns


# --------------------------------------------------------------------------------------------------- adult

ADULT_FILES = (
    DataFile("adult", "adult.data", "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
             f"{UCI}/adult/adult.data", embedded=True),
    DataFile("adult", "adult.test", "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
             f"{UCI}/adult/adult.test", embedded=True),
)
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation", "relationship",
    "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
]
ADULT_RACES = ["Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White"]
ADULT_SENSITIVE = ("sex", "race", "race_binary", "sex*race")
# Categories exactly as adult.names lists them, in its order.  Lower ends: adult.names says the records were
# extracted with age > 16 and hours-per-week > 0; 16 = the number of education levels it lists; 99999 and 99 are
# the census top codes of capital-gain and hours-per-week.  The rest is the rounded summary of the pooled file.
ADULT_SCHEMA = Schema(
    numeric_columns("""
        age             17  90      38.5    13.2
        fnlwgt          0   1.5e6   190000  106000
        education-num   1   16      10.1    2.55
        capital-gain    0   99999   1100    7510
        capital-loss    0   4500    88.6    405
        hours-per-week  1   99      40.9    12
    """) + (
        Column.categorical("workclass", ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov",
                                         "State-gov", "Without-pay", "Never-worked"]),
        Column.categorical("marital-status", ["Married-civ-spouse", "Divorced", "Never-married", "Separated",
                                              "Widowed", "Married-spouse-absent", "Married-AF-spouse"]),
        Column.categorical("occupation", [
            "Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
            "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
            "Priv-house-serv", "Protective-serv", "Armed-Forces"]),
        Column.categorical("relationship", ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative",
                                            "Unmarried"]),
        Column.categorical("race", ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]),
        Column.categorical("sex", ["Female", "Male"]),
        Column.categorical("native-country", [
            "United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany", "Outlying-US(Guam-USVI-etc)",
            "India", "Japan", "Greece", "South", "China", "Cuba", "Iran", "Honduras", "Philippines", "Italy",
            "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal", "Ireland", "France", "Dominican-Republic", "Laos",
            "Ecuador", "Taiwan", "Haiti", "Columbia", "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand",
            "Yugoslavia", "El-Salvador", "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"]),
    ),
    source="categories from adult.names; " + SUMMARY,
)


def read_adult(path, data_home, download: bool) -> tuple[pd.DataFrame, int]:
    """``(frame, n_dropped)``: adult.data and adult.test pooled (``_test`` marks the rows of adult.test, whose
    labels lose their trailing ``.``), rows with a missing value dropped: 45,222 rows, 3,620 dropped."""
    train_raw, test_raw = fetch(ADULT_FILES, path=path, data_home=data_home, download=download)
    read = dict(header=None, names=ADULT_COLUMNS, skipinitialspace=True, na_values="?")
    train = pd.read_csv(io.BytesIO(train_raw), **read)
    test = pd.read_csv(io.BytesIO(test_raw), skiprows=1, **read)
    test["income"] = test["income"].str.rstrip(".")
    frame = pd.concat([train.assign(_test=False), test.assign(_test=True)], ignore_index=True)
    return drop_missing(frame, ADULT_COLUMNS)


def load_adult(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
               path=None, download: bool = True, include_sensitive: bool = False,
               original_split: bool = False) -> Dataset:
    """UCI Adult (census income, 1994): predict income > 50K.

    ``adult.data`` (32,561 rows) and ``adult.test`` (16,281 rows, junk first line skipped, trailing ``.`` of its
    labels stripped) are pooled; rows with a missing value (``?``) are dropped, leaving 45,222 rows.  Label
    1 = income ``>50K``.  Sensitive attributes: ``sex`` (default; Female = 0, Male = 1); ``race`` (5 groups, codes
    in the order Amer-Indian-Eskimo, Asian-Pac-Islander, Black, Other, White); ``race_binary`` (non-White = 0,
    White = 1); ``sex*race`` (2 × sex + race_binary: Female non-White 0, Female White 1, Male non-White 2, Male
    White 3).  Features (:data:`ADULT_SCHEMA`): age, fnlwgt, education-num, capital-gain, capital-loss,
    hours-per-week (clipped to public ranges and scaled with fixed constants close to their mean and standard
    deviation; ``fnlwgt`` is the census sampling weight, kept as in most benchmarks) and workclass,
    marital-status, occupation, relationship, native-country one-hot over every category adult.names lists (so
    ``workclass=Never-worked``, whose rows all have a missing occupation, is an all-zero feature), plus race/sex
    unless they define the groups.  ``education`` is dropped: it is a one-to-one relabelling of
    ``education-num``.  ``original_split=True`` uses the UCI files as
    train (30,162 rows) and test (15,060 rows) instead of a random split.  The files are embedded in the package,
    so this loader works offline.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ADULT_SENSITIVE, "adult")
    original_split = check_bool(original_split, "original_split")
    frame, n_dropped = read_adult(path, data_home, download)
    y = (frame["income"] == ">50K").to_numpy().astype(np.int64)
    female = (frame["sex"] == "Female").to_numpy()
    white = (frame["race"] == "White").to_numpy()
    if sensitive == "sex":
        s, groups, exclude = sex_codes(female), ["Female", "Male"], ["sex"]
    elif sensitive == "race":
        s = pd.Categorical(frame["race"], categories=ADULT_RACES).codes.astype(np.int64)
        groups, exclude = list(ADULT_RACES), ["race"]
    elif sensitive == "race_binary":
        s, groups, exclude = white.astype(np.int64), ["non-White", "White"], ["race"]
    else:
        s = 2 * sex_codes(female) + white.astype(np.int64)
        groups = ["Female non-White", "Female White", "Male non-White", "Male White"]
        exclude = ["sex", "race"]
    table = Table(
        name="adult", y=y, s=s, label_names=["<=50K", ">50K"], group_names=groups, sensitive=sensitive,
        description=(
            f"UCI Adult census income (adult.data + adult.test pooled, 48,842 rows; {n_dropped:,} rows with a "
            f"missing value '?' dropped, {len(frame):,} left). Label 1 = income >50K. Groups by {sensitive}: "
            f"{', '.join(f'{i} = {g}' for i, g in enumerate(groups))}. Numeric columns clipped and scaled with "
            "fixed public constants (fnlwgt kept), categorical columns one-hot over the categories of adult.names, "
            "education dropped (duplicates education-num); sensitive columns "
            f"{'kept as' if include_sensitive else 'not used as'} features."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, schema=ADULT_SCHEMA,
    )
    if original_split:
        table.test_mask = frame["_test"].to_numpy()
        table.split_note = "original UCI split (adult.data = train, adult.test = test; test_size ignored)"
    return finish(feature_schema(table, exclude, include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- compas

COMPAS_FILES = (
    DataFile("compas", "compas-scores-two-years.csv",
             "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
             f"{GITHUB}/propublica/compas-analysis/master/compas-scores-two-years.csv", embedded=True),
)
COMPAS_RACES = ["African-American", "Asian", "Caucasian", "Hispanic", "Native American", "Other"]
# c_charge_degree: F (felony) or M (misdemeanour), the codes left by ProPublica's filter (which removes O).  The race
# vocabulary is the loader's public group list (two races by default, six with all_races).  Numeric constants: the
# rounded summary of the default 5,278 rows.
COMPAS_NUMERIC = numeric_columns("""
    age              18  100  34.4    11.7
    juv_fel_count    0   20   0.0614  0.41
    juv_misd_count   0   20   0.0985  0.517
    juv_other_count  0   20   0.119   0.482
    priors_count     0   40   3.46    4.88
""")


def compas_schema(races) -> Schema:
    return Schema(
        COMPAS_NUMERIC + (
            Column.categorical("c_charge_degree", ["F", "M"]),
            Column.categorical("race", races),
            Column.categorical("sex", ["Female", "Male"]),
        ),
        source="charge degrees and sexes of the ProPublica file, races from the loader's group list; " + SUMMARY,
    )


def read_compas(path, data_home, download: bool) -> tuple[pd.DataFrame, int]:
    """``(frame, n_raw)``: the rows of compas-scores-two-years.csv (``n_raw`` = 7,214) that pass ProPublica's
    filter (days_b_screening_arrest within ±30, is_recid != -1, c_charge_degree != 'O', score_text != 'N/A'):
    6,172 rows, every race."""
    (raw,) = fetch(COMPAS_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw), keep_default_na=False, na_values=[""])
    keep = (
        frame["days_b_screening_arrest"].between(-30, 30)
        & (frame["is_recid"] != -1)
        & (frame["c_charge_degree"] != "O")
        & (frame["score_text"] != "N/A")
    )
    return frame.loc[keep].reset_index(drop=True), len(frame)


def load_compas(*, sensitive: str = "race", test_size: float = 0.25, random_state: int = 0, data_home=None,
                path=None, download: bool = True, include_sensitive: bool = False,
                all_races: bool = False) -> Dataset:
    """ProPublica COMPAS (Broward County, 2013–2014): predict two-year recidivism.

    ``compas-scores-two-years.csv`` (7,214 rows) filtered as in ProPublica's analysis (days_b_screening_arrest
    within ±30, is_recid != -1, c_charge_degree != 'O', score_text != 'N/A'): 6,172 rows.  By default only
    African-American and Caucasian defendants are kept (5,278 rows); ``all_races=True`` keeps all 6,172.
    Label 1 = ``two_year_recid`` (re-offended within two years; the unfavourable outcome).  Sensitive
    attributes: ``race`` (default; African-American = 0, Caucasian = 1; with ``all_races`` six groups in
    alphabetical order African-American, Asian, Caucasian, Hispanic, Native American, Other) and ``sex``
    (Female = 0, Male = 1).  Features (:func:`compas_schema`): age, juv_fel_count, juv_misd_count,
    juv_other_count, priors_count (clipped to public ranges, scaled with fixed constants) and c_charge_degree
    (F/M, one-hot); age_cat is left out (a binning of age); race (one-hot over the races kept) and sex only with
    ``include_sensitive``.  The COMPAS scores (decile_score, score_text) and the recidivism outcome columns are
    not features: they leak or are the tool under study.  The file is embedded in the package.  ProPublica
    publishes it without a licence file.
    """
    check_choice(sensitive, "sensitive attribute", ("race", "sex"), "compas")
    all_races = check_bool(all_races, "all_races")
    frame, n_raw = read_compas(path, data_home, download)
    n_filtered = len(frame)
    if not all_races:
        frame = frame.loc[frame["race"].isin(["African-American", "Caucasian"])].reset_index(drop=True)
    races = COMPAS_RACES if all_races else ["African-American", "Caucasian"]
    schema = compas_schema(races)
    frame, n_dropped = drop_missing(frame, schema.names + ["two_year_recid"])

    if sensitive == "sex":
        s, groups = sex_codes((frame["sex"] == "Female").to_numpy()), ["Female", "Male"]
    else:
        groups = races
        s = pd.Categorical(frame["race"], categories=groups).codes.astype(np.int64)
    kept = "all races" if all_races else "African-American and Caucasian defendants only"
    table = Table(
        name="compas", y=frame["two_year_recid"].to_numpy().astype(np.int64), s=s,
        label_names=["no two-year recidivism", "two-year recidivism"], group_names=list(groups),
        sensitive=sensitive,
        description=(
            f"ProPublica COMPAS two-year recidivism ({n_raw:,} rows; ProPublica's filter leaves {n_filtered:,}; "
            f"{kept}: {len(frame):,} rows; {n_dropped} dropped for missing values). Label 1 = two_year_recid. "
            f"Groups by {sensitive}: {', '.join(f'{i} = {g}' for i, g in enumerate(groups))}. Features: age, "
            "juvenile felony/misdemeanour/other counts, priors_count (clipped and scaled with fixed public "
            "constants), charge degree (one-hot F/M); "
            "COMPAS scores and outcome columns excluded; race and sex "
            f"{'kept as' if include_sensitive else 'not used as'} features."
        ),
        licence="ProPublica public data (no licence file; research re-use with attribution)",
        n_dropped=n_dropped, frame=frame, schema=schema,
    )
    return finish(feature_schema(table, ["race", "sex"], include_sensitive, [sensitive]), test_size, random_state)



# --------------------------------------------------------------------------------------------------- parkinsons

PARKINSONS_FILES = (
    DataFile("parkinsons", "parkinsons_updrs.data",
             "f2c7d5025dec4e92e7feae367a5f7ccf58789a10ac6b54bdf15976c599f9dd39",
             f"{UCI}/parkinsons/telemonitoring/parkinsons_updrs.data"),
)
# The label threshold: the median of total_UPDRS over the whole public file, fixed here.
PARKINSONS_THRESHOLD = 27.576
# sex is 0/1 (parkinsons_updrs.names: 0 male, 1 female); the numeric constants are the rounded summary of the file.
PARKINSONS_SCHEMA = Schema(
    numeric_columns("""
        age            30   90      64.8     8.82
        test_time      -5   220     92.9     53.4
        Jitter(%)      0    0.1     0.00615  0.00562
        Jitter(Abs)    0    0.0005  4.4e-05  3.6e-05
        Jitter:RAP     0    0.06    0.00299  0.00312
        Jitter:PPQ5    0    0.07    0.00328  0.00373
        Jitter:DDP     0    0.18    0.00896  0.00937
        Shimmer        0    0.3     0.034    0.0258
        Shimmer(dB)    0    2.2     0.311    0.23
        Shimmer:APQ3   0    0.17    0.0172   0.0132
        Shimmer:APQ5   0    0.17    0.0201   0.0167
        Shimmer:APQ11  0    0.28    0.0275   0.02
        Shimmer:DDA    0    0.5     0.0515   0.0397
        NHR            0    0.75    0.0321   0.0597
        HNR            0    40      21.7     4.29
        RPDE           0    1       0.541    0.101
        DFA            0    1       0.653    0.0709
        PPE            0    1       0.22     0.0915
    """) + (Column.binary("sex"),),
    source=SUMMARY,
)
# motor_UPDRS, a feature only with keep_motor_updrs (the rounded summary of the file, as above).
PARKINSONS_MOTOR = Column.numeric("motor_UPDRS", 5, 40, 21.3, 8.13)


def load_parkinsons(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
                    path=None, download: bool = True, include_sensitive: bool = False,
                    split_by_subject: bool = False, keep_motor_updrs: bool = False) -> Dataset:
    """UCI Parkinsons Telemonitoring: predict a high total UPDRS score from voice measurements.

    ``parkinsons_updrs.data`` (5,875 recordings of 42 patients).  Label 1 = ``total_UPDRS`` above the median of
    the whole column (27.576, :data:`PARKINSONS_THRESHOLD`): a fixed public threshold, as in DP-FERMI, so roughly
    balanced classes.  Sensitive attribute ``sex``: raw 1 (female) = 0, raw 0 (male) = 1.  Features
    (:data:`PARKINSONS_SCHEMA`): age, test_time and the 16 voice measures (clipped to public ranges, scaled with
    fixed constants); subject#, motor_UPDRS and total_UPDRS are not features, sex (raw 0/1) only with
    ``include_sensitive``.  ``keep_motor_updrs=True`` adds motor_UPDRS (the motor part of the score the label
    thresholds, so the task becomes nearly trivial), as DP-FERMI's 19 features do (preset ``dp-fermi``).  Rows
    are repeated recordings of the same patients: the default random split puts recordings of one patient on
    both sides (as the benchmark papers do); ``split_by_subject=True`` splits patients instead (no
    stratification; test_size is then the fraction of patients).  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("sex",), "parkinsons")
    split_by_subject = check_bool(split_by_subject, "split_by_subject")
    keep_motor_updrs = check_bool(keep_motor_updrs, "keep_motor_updrs")
    schema = PARKINSONS_SCHEMA
    if keep_motor_updrs:  # after test_time, in the file's column order
        columns = list(schema.columns)
        schema = replace(schema, columns=(*columns[:2], PARKINSONS_MOTOR, *columns[2:]))
    (raw,) = fetch(PARKINSONS_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw))
    frame, n_dropped = drop_missing(frame, list(frame.columns))
    threshold = PARKINSONS_THRESHOLD
    table = Table(
        name="parkinsons", y=(frame["total_UPDRS"] > threshold).to_numpy().astype(np.int64),
        s=sex_codes((frame["sex"] == 1).to_numpy()),
        label_names=[f"total_UPDRS<={threshold:g}", f"total_UPDRS>{threshold:g}"],
        group_names=["Female", "Male"], sensitive="sex",
        description=(
            f"UCI Parkinsons Telemonitoring ({len(frame):,} recordings of {frame['subject#'].nunique()} patients, "
            f"{n_dropped} dropped). Label 1 = total_UPDRS > {threshold:g} (median of the whole public file, a fixed "
            "threshold). Groups by sex: 0 = female (raw 1), 1 = male (raw 0). Age, test_time"
            f"{', motor_UPDRS' if keep_motor_updrs else ''} and 16 voice measures clipped and scaled with fixed "
            f"public constants; subject#{'' if keep_motor_updrs else ', motor_UPDRS'}, total_UPDRS excluded; sex "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
            + ("" if split_by_subject else " Recordings of one patient can fall in both train and test.")
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, schema=schema,
    )
    if split_by_subject:
        table.split_groups = frame["subject#"].to_numpy()
        table.split_note = "split by patient (no patient in both parts; not stratified)"
    return finish(feature_schema(table, ["sex"], include_sensitive), test_size, random_state)
