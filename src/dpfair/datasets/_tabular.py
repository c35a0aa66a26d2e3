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
"""

from __future__ import annotations

import io
import re
from dataclasses import replace

import numpy as np
import pandas as pd

from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets.base import Column, Dataset, Schema, Table, check_bool, check_choice, finish, numeric_columns

UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
GITHUB = "https://raw.githubusercontent.com"
CC_BY = "CC BY 4.0 (UCI Machine Learning Repository)"


def _drop_missing(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, int]:
    keep = frame[columns].notna().all(axis=1)
    return frame.loc[keep].reset_index(drop=True), int((~keep).sum())


def _features(table: Table, exclude: list[str], include_sensitive: bool, encodes: list[str] | None = None) -> Table:
    """Remove the columns that define sensitive attributes (``exclude``) from the schema unless asked to keep them;
    kept, those that encode the declared one (``encodes``, default all of ``exclude``) are recorded as such."""
    if not include_sensitive:
        table.schema = table.schema.without(exclude)
    else:
        table.encodes_sensitive = list(exclude if encodes is None else encodes)
    return table


SUMMARY = ("ranges: extremes of the public file rounded outward unless documented; center/scale: its mean and "
           "standard deviation rounded to 3 significant digits, fixed once in code")


def _sex_codes(is_female: np.ndarray) -> np.ndarray:
    return np.where(is_female, 0, 1).astype(np.int64)


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
    return _drop_missing(frame, ADULT_COLUMNS)


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
        s, groups, exclude = _sex_codes(female), ["Female", "Male"], ["sex"]
    elif sensitive == "race":
        s = pd.Categorical(frame["race"], categories=ADULT_RACES).codes.astype(np.int64)
        groups, exclude = list(ADULT_RACES), ["race"]
    elif sensitive == "race_binary":
        s, groups, exclude = white.astype(np.int64), ["non-White", "White"], ["race"]
    else:
        s = 2 * _sex_codes(female) + white.astype(np.int64)
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
    return finish(_features(table, exclude, include_sensitive), test_size, random_state)


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
    frame, n_dropped = _drop_missing(frame, schema.names + ["two_year_recid"])

    if sensitive == "sex":
        s, groups = _sex_codes((frame["sex"] == "Female").to_numpy()), ["Female", "Male"]
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
    return finish(_features(table, ["race", "sex"], include_sensitive, [sensitive]), test_size, random_state)


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
    frame, n_dropped = _drop_missing(frame, GERMAN_COLUMNS)
    if sensitive == "sex":
        s = _sex_codes(frame["personal_status_sex"].isin(["A92", "A95"]).to_numpy())
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
    return finish(_features(table, exclude, include_sensitive), test_size, random_state)


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
    return _drop_missing(frame, list(frame.columns))


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
        s=_sex_codes((frame["SEX"] == 2).to_numpy()), label_names=["no default", "default"],
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
    return finish(_features(table, ["SEX"], include_sensitive), test_size, random_state)


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
    frame, n_dropped = _drop_missing(frame, list(frame.columns))
    threshold = PARKINSONS_THRESHOLD
    table = Table(
        name="parkinsons", y=(frame["total_UPDRS"] > threshold).to_numpy().astype(np.int64),
        s=_sex_codes((frame["sex"] == 1).to_numpy()),
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
    return finish(_features(table, ["sex"], include_sensitive), test_size, random_state)


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
    return _drop_missing(frame, list(frame.columns))


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
    return finish(_features(table, ["age"], include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- communities

COMMUNITIES_FILES = (
    DataFile("communities", "communities.data", "09e0b5c07eae24c1efab19b2edee05e160e7f5743b6f31e31eec3d73624da2ea",
             f"{UCI}/communities/communities.data"),
    DataFile("communities", "communities.names", "80914f24ab37261fb0fbda7e417cad8001335dadda4a8d702c265601ef8434fc",
             f"{UCI}/communities/communities.names"),
)
COMMUNITIES_TARGET = "ViolentCrimesPerPop"
# The label threshold: the median of ViolentCrimesPerPop over the 1,993 complete rows of the public file, fixed here.
COMMUNITIES_THRESHOLD = 0.15
# The 100 columns used (file order; racePctWhite defines the groups): every predictive column except the 22 LEMAS
# police columns that are missing for 1,675 communities.  communities.names documents every value as normalised to
# [0, 1]; center/scale are the rounded mean and standard deviation of each column over the file.
COMMUNITIES_SCHEMA = Schema(numeric_columns("""
        population             0 1 0.0576  0.127
        householdsize          0 1 0.463   0.164
        racepctblack           0 1 0.179   0.253
        racePctWhite           0 1 0.754   0.244
        racePctAsian           0 1 0.154   0.209
        racePctHisp            0 1 0.144   0.232
        agePct12t21            0 1 0.424   0.155
        agePct12t29            0 1 0.494   0.144
        agePct16t24            0 1 0.336   0.166
        agePct65up             0 1 0.423   0.179
        numbUrban              0 1 0.0641  0.128
        pctUrban               0 1 0.697   0.445
        medIncome              0 1 0.361   0.209
        pctWWage               0 1 0.558   0.183
        pctWFarmSelf           0 1 0.292   0.204
        pctWInvInc             0 1 0.496   0.178
        pctWSocSec             0 1 0.471   0.174
        pctWPubAsst            0 1 0.318   0.222
        pctWRetire             0 1 0.479   0.168
        medFamInc              0 1 0.376   0.198
        perCapInc              0 1 0.35    0.191
        whitePerCap            0 1 0.368   0.187
        blackPerCap            0 1 0.291   0.172
        indianPerCap           0 1 0.204   0.165
        AsianPerCap            0 1 0.322   0.195
        OtherPerCap            0 1 0.285   0.191
        HispPerCap             0 1 0.386   0.183
        NumUnderPov            0 1 0.0555  0.128
        PctPopUnderPov         0 1 0.303   0.228
        PctLess9thGrade        0 1 0.316   0.213
        PctNotHSGrad           0 1 0.383   0.202
        PctBSorMore            0 1 0.362   0.209
        PctUnemployed          0 1 0.363   0.202
        PctEmploy              0 1 0.501   0.174
        PctEmplManu            0 1 0.396   0.202
        PctEmplProfServ        0 1 0.441   0.175
        PctOccupManu           0 1 0.391   0.199
        PctOccupMgmtProf       0 1 0.441   0.186
        MalePctDivorce         0 1 0.461   0.182
        MalePctNevMarr         0 1 0.434   0.175
        FemalePctDiv           0 1 0.488   0.175
        TotalPctDiv            0 1 0.494   0.184
        PersPerFam             0 1 0.488   0.155
        PctFam2Par             0 1 0.611   0.202
        PctKids2Par            0 1 0.621   0.206
        PctYoungKids2Par       0 1 0.664   0.218
        PctTeen2Par            0 1 0.583   0.191
        PctWorkMomYoungKids    0 1 0.501   0.169
        PctWorkMom             0 1 0.527   0.175
        NumIlleg               0 1 0.0363  0.109
        PctIlleg               0 1 0.25    0.23
        NumImmig               0 1 0.0301  0.0872
        PctImmigRecent         0 1 0.32    0.219
        PctImmigRec5           0 1 0.361   0.211
        PctImmigRec8           0 1 0.399   0.201
        PctImmigRec10          0 1 0.428   0.195
        PctRecentImmig         0 1 0.181   0.236
        PctRecImmig5           0 1 0.182   0.236
        PctRecImmig8           0 1 0.185   0.237
        PctRecImmig10          0 1 0.183   0.235
        PctSpeakEnglOnly       0 1 0.786   0.227
        PctNotSpeakEnglWell    0 1 0.151   0.22
        PctLargHouseFam        0 1 0.268   0.197
        PctLargHouseOccup      0 1 0.252   0.191
        PersPerOccupHous       0 1 0.462   0.17
        PersPerOwnOccHous      0 1 0.494   0.158
        PersPerRentOccHous     0 1 0.404   0.189
        PctPersOwnOccup        0 1 0.563   0.197
        PctPersDenseHous       0 1 0.186   0.21
        PctHousLess3BR         0 1 0.495   0.173
        MedNumBR               0 1 0.315   0.255
        HousVacant             0 1 0.0768  0.15
        PctHousOccup           0 1 0.72    0.194
        PctHousOwnOcc          0 1 0.549   0.185
        PctVacantBoarded       0 1 0.204   0.218
        PctVacMore6Mos         0 1 0.433   0.189
        MedYrHousBuilt         0 1 0.494   0.232
        PctHousNoPhone         0 1 0.264   0.243
        PctWOFullPlumb         0 1 0.243   0.206
        OwnOccLowQuart         0 1 0.265   0.224
        OwnOccMedVal           0 1 0.264   0.231
        OwnOccHiQuart          0 1 0.269   0.235
        RentLowQ               0 1 0.347   0.219
        RentMedian             0 1 0.373   0.209
        RentHighQ              0 1 0.423   0.248
        MedRent                0 1 0.384   0.213
        MedRentPctHousInc      0 1 0.49    0.169
        MedOwnCostPctInc       0 1 0.45    0.187
        MedOwnCostPctIncNoMtg  0 1 0.404   0.192
        NumInShelters          0 1 0.0295  0.103
        NumStreet              0 1 0.0228  0.1
        PctForeignBorn         0 1 0.216   0.231
        PctBornSameState       0 1 0.609   0.204
        PctSameHouse85         0 1 0.535   0.181
        PctSameCity85          0 1 0.626   0.2
        PctSameState85         0 1 0.651   0.198
        LandArea               0 1 0.0652  0.109
        PopDens                0 1 0.233   0.203
        PctUsePubTrans         0 1 0.162   0.229
        LemasPctOfficDrugUn    0 1 0.0941  0.24
"""), source="ranges from communities.names (normalised to [0, 1]); center/scale: the file's mean and standard "
          "deviation rounded to 3 significant digits, fixed once in code")


def read_communities(path, data_home, download: bool) -> pd.DataFrame:
    """The 1,994 rows × 128 columns of communities.data, named by the ``@attribute`` lines of communities.names
    (``?`` read as missing)."""
    data_raw, names_raw = fetch(COMMUNITIES_FILES, path=path, data_home=data_home, download=download)
    columns = re.findall(r"^@attribute\s+(\S+)", names_raw.decode("latin-1"), flags=re.MULTILINE)
    return pd.read_csv(io.BytesIO(data_raw), header=None, names=columns, na_values="?")


def load_communities(*, sensitive: str = "race", test_size: float = 0.25, random_state: int = 0, data_home=None,
                     path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """UCI Communities and Crime (US, 1990 census + 1995 FBI data): predict a high violent-crime rate.

    ``communities.data`` (1,994 communities, 128 columns, ``?`` = missing) with column names from the
    ``@attribute`` lines of ``communities.names``.  The five non-predictive columns (state, county, community,
    communityname, fold) are dropped, and so are the 22 LEMAS police columns that are missing for 1,675
    communities rather than the rows (the columns kept are fixed in :data:`COMMUNITIES_SCHEMA`); the one row then
    still missing a value (OtherPerCap) is dropped, leaving 1,993.  Label 1 = ``ViolentCrimesPerPop`` > 0.15, its
    median over the file (a fixed threshold, :data:`COMMUNITIES_THRESHOLD`).  Sensitive attribute ``race``:
    1 = majority-white community (``racePctWhite`` > 0.5; the column is normalised to [0, 1] by UCI, so this is
    approximately "more than half white"), 0 = otherwise.  The defining column ``racePctWhite`` is not a feature
    unless ``include_sensitive``; the other race-percentage columns stay (they are strong proxies).  The remaining 99
    numeric features are clipped to [0, 1] and scaled with fixed constants.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("race",), "communities")
    frame = read_communities(path, data_home, download)
    columns, n_raw = list(frame.columns), len(frame)
    target, threshold, schema = COMMUNITIES_TARGET, COMMUNITIES_THRESHOLD, COMMUNITIES_SCHEMA
    absent = [c for c in schema.names + [target] if c not in columns]
    if absent:
        raise ValueError(f"communities.names does not declare the column(s) {absent}")
    unused = [c for c in columns[5:] if c not in schema.names and c != target]
    frame, n_dropped = _drop_missing(frame[schema.names + [target]], schema.names + [target])
    table = Table(
        name="communities", y=(frame[target] > threshold).to_numpy().astype(np.int64),
        s=(frame["racePctWhite"] > 0.5).to_numpy().astype(np.int64),
        label_names=[f"{target}<={threshold:g}", f"{target}>{threshold:g}"],
        group_names=["non-majority-white", "majority-white"], sensitive="race",
        description=(
            f"UCI Communities and Crime ({n_raw:,} communities; 5 non-predictive columns and {len(unused)} LEMAS "
            f"columns (mostly missing) not used, then {n_dropped} row with a missing value dropped: "
            f"{len(frame):,} rows). Label 1 = ViolentCrimesPerPop > {threshold:g} (its median over the file, fixed). "
            "Groups by race: 0 = not majority-white, 1 = majority-white (normalised racePctWhite > 0.5). Features "
            "clipped to [0, 1] and scaled with fixed public constants; "
            f"racePctWhite {'kept as' if include_sensitive else 'not used as'} a feature, other race columns kept."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, schema=schema,
    )
    return finish(_features(table, ["racePctWhite"], include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- dutch

DUTCH_FILES = (
    DataFile("dutch", "dutch_census_2001.arff", "0e7e3f32668919c239db820f625815e1ea834c71402cdea595e03ef08c8616ef",
             f"{GITHUB}/tailequy/fairness_dataset/abb5a18b822ba56a221c5311082e192e85000b95/Dutch_census/"
             "dutch_census_2001.arff"),
)


# Every value the ARFF header declares for each attribute (codes sorted numerically; 13 of the 72 one-hot
# features never occur in the 60,420 rows, e.g. age bands 1-3); occupation is the label.
DUTCH_SCHEMA = Schema(
    tuple(Column.categorical(name, codes.split()) for name, codes in [
        ("sex", "1 2"),
        ("age", "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17"),
        ("household_position", "1110 1121 1122 1131 1132 1140 1210 1220"),
        ("household_size", "111 112 113 114 125 126"),
        ("prev_residence_place", "1 2 9"),
        ("citizenship", "1 2 3"),
        ("country_birth", "1 2 3"),
        ("edu_level", "0 1 2 3 4 5 9"),
        ("economic_status", "111 112 120 210 221 222 223 224"),
        ("cur_eco_activity", "111 122 124 131 132 133 134 135 136 137 138 139 200"),
        ("Marital_status", "1 2 3 4"),
    ]),
    source="the nominal values declared in the header of dutch_census_2001.arff",
)


def _read_nominal_arff(raw: bytes) -> pd.DataFrame:
    """Parse a Weka ARFF whose attributes are all nominal (values kept as strings; ``?`` = missing)."""
    header, _, body = raw.partition(b"\n@data")
    columns = re.findall(r"^@attribute\s+(\S+)\s+\{", header.decode("utf-8"), flags=re.MULTILINE | re.IGNORECASE)
    return pd.read_csv(io.BytesIO(body), header=None, names=columns, dtype=str, na_values="?", comment="%")


def read_dutch(path, data_home, download: bool) -> tuple[pd.DataFrame, int]:
    """``(frame, n_dropped)``: the 60,420 rows of the Dutch census ARFF (codes as strings), rows with a missing
    value dropped (none)."""
    (raw,) = fetch(DUTCH_FILES, path=path, data_home=data_home, download=download)
    frame = _read_nominal_arff(raw)
    return _drop_missing(frame, list(frame.columns))


def load_dutch(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
               path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """Dutch census 2001 (IPUMS-International sample, fairness-benchmark version): predict a high-level occupation.

    ``dutch_census_2001.arff`` (60,420 rows, 12 nominal attributes), as distributed by Le Quy et al. (2022).
    Label 1 = occupation ``2_1`` (professional/managerial), 0 = ``5_4_9``.  Sensitive attribute ``sex`` (IPUMS
    coding 1 male, 2 female): female = 0, male = 1.  The other 10 attributes (age band, household position and
    size, previous residence, citizenship, country of birth, education level, economic status, current economic
    activity, marital status) are integer codes of categories and are one-hot encoded over every value the ARFF
    header declares (:data:`DUTCH_SCHEMA`; values declared but absent from the data give all-zero features);
    sex only with ``include_sensitive``.  Licence not stated (IPUMS microdata: research use only).
    """
    check_choice(sensitive, "sensitive attribute", ("sex",), "dutch")
    frame, n_dropped = read_dutch(path, data_home, download)
    table = Table(
        name="dutch", y=(frame["occupation"] == "2_1").to_numpy().astype(np.int64),
        s=_sex_codes((frame["sex"] == "2").to_numpy()),
        label_names=["occupation 5_4_9 (low level)", "occupation 2_1 (high level)"],
        group_names=["Female", "Male"], sensitive="sex",
        description=(
            f"Dutch census 2001 benchmark version ({len(frame):,} rows, {n_dropped} dropped). Label 1 = occupation "
            "2_1 (professional/managerial). Groups by sex: 0 = female (code 2), 1 = male (code 1). The 10 other "
            "nominal attributes one-hot over the values the ARFF header declares; sex "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence="not stated (IPUMS-International census sample; research use only)",
        n_dropped=n_dropped, frame=frame, schema=DUTCH_SCHEMA,
    )
    return finish(_features(table, ["sex"], include_sensitive), test_size, random_state)
