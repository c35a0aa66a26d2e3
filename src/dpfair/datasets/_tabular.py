"""Loaders of the tabular fairness benchmarks (UCI and ProPublica files).

Group codes follow one convention where it applies: sex is coded female = 0, male = 1 in every data set,
whatever the raw coding; a binary group is otherwise listed in ``group_names`` in the order of its codes.
Each loader's docstring gives its exact definitions.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd

from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets.base import Dataset, Table, check_bool, check_choice, finish

UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
GITHUB = "https://raw.githubusercontent.com"
CC_BY = "CC BY 4.0 (UCI Machine Learning Repository)"


def _drop_missing(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, int]:
    keep = frame[columns].notna().all(axis=1)
    return frame.loc[keep].reset_index(drop=True), int((~keep).sum())


def _features(table: Table, exclude: list[str], include_sensitive: bool) -> Table:
    """Remove the columns that define the sensitive attribute from the features unless asked to keep them."""
    if not include_sensitive:
        table.categorical = [c for c in table.categorical if c not in exclude]
        table.numeric = [c for c in table.numeric if c not in exclude]
        table.binary = [c for c in table.binary if c not in exclude]
    return table


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


def load_adult(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
               path=None, download: bool = True, include_sensitive: bool = False,
               original_split: bool = False) -> Dataset:
    """UCI Adult (census income, 1994): predict income > 50K.

    ``adult.data`` (32,561 rows) and ``adult.test`` (16,281 rows, junk first line skipped, trailing ``.`` of its
    labels stripped) are pooled; rows with a missing value (``?``) are dropped, leaving 45,222 rows.  Label
    1 = income ``>50K``.  Sensitive attributes: ``sex`` (default; Female = 0, Male = 1); ``race`` (5 groups, codes
    in the order Amer-Indian-Eskimo, Asian-Pac-Islander, Black, Other, White); ``race_binary`` (non-White = 0,
    White = 1); ``sex*race`` (2 × sex + race_binary: Female non-White 0, Female White 1, Male non-White 2, Male
    White 3).  Features: age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week (standardised;
    ``fnlwgt`` is the census sampling weight, kept as in most benchmarks) and one-hot workclass, marital-status,
    occupation, relationship, native-country, plus race/sex unless they define the groups.  ``education`` is
    dropped: it is a one-to-one relabelling of ``education-num``.  ``original_split=True`` uses the UCI files as
    train (30,162 rows) and test (15,060 rows) instead of a random split.  The files are embedded in the package,
    so this loader works offline.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ADULT_SENSITIVE, "adult")
    original_split = check_bool(original_split, "original_split")
    train_raw, test_raw = fetch(ADULT_FILES, path=path, data_home=data_home, download=download)
    read = dict(header=None, names=ADULT_COLUMNS, skipinitialspace=True, na_values="?")
    train = pd.read_csv(io.BytesIO(train_raw), **read)
    test = pd.read_csv(io.BytesIO(test_raw), skiprows=1, **read)
    test["income"] = test["income"].str.rstrip(".")
    frame = pd.concat([train.assign(_test=False), test.assign(_test=True)], ignore_index=True)
    frame, n_dropped = _drop_missing(frame, ADULT_COLUMNS)

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
            f"{', '.join(f'{i} = {g}' for i, g in enumerate(groups))}. Numeric columns standardised "
            "(fnlwgt kept), categorical columns one-hot, education dropped (duplicates education-num); "
            f"sensitive columns {'kept as' if include_sensitive else 'not used as'} features."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame,
        categorical=["workclass", "marital-status", "occupation", "relationship", "race", "sex", "native-country"],
        numeric=["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"],
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
    (Female = 0, Male = 1).  Features: age, juv_fel_count, juv_misd_count, juv_other_count, priors_count
    (standardised) and c_charge_degree (F/M, one-hot); age_cat is left out (a binning of age); race and sex
    only with ``include_sensitive``.  The COMPAS scores (decile_score, score_text) and the recidivism outcome
    columns are not features: they leak or are the tool under study.  The file is embedded in the package.  ProPublica publishes it without a licence file.
    """
    check_choice(sensitive, "sensitive attribute", ("race", "sex"), "compas")
    all_races = check_bool(all_races, "all_races")
    (raw,) = fetch(COMPAS_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw), keep_default_na=False, na_values=[""])
    n_raw = len(frame)
    keep = (
        frame["days_b_screening_arrest"].between(-30, 30)
        & (frame["is_recid"] != -1)
        & (frame["c_charge_degree"] != "O")
        & (frame["score_text"] != "N/A")
    )
    frame = frame.loc[keep].reset_index(drop=True)
    n_filtered = len(frame)
    if not all_races:
        frame = frame.loc[frame["race"].isin(["African-American", "Caucasian"])].reset_index(drop=True)
    numeric = ["age", "juv_fel_count", "juv_misd_count", "juv_other_count", "priors_count"]
    categorical = ["c_charge_degree", "race", "sex"]
    frame, n_dropped = _drop_missing(frame, numeric + categorical + ["two_year_recid"])

    if sensitive == "sex":
        s, groups = _sex_codes((frame["sex"] == "Female").to_numpy()), ["Female", "Male"]
    else:
        groups = COMPAS_RACES if all_races else ["African-American", "Caucasian"]
        s = pd.Categorical(frame["race"], categories=groups).codes.astype(np.int64)
    races = "all races" if all_races else "African-American and Caucasian defendants only"
    table = Table(
        name="compas", y=frame["two_year_recid"].to_numpy().astype(np.int64), s=s,
        label_names=["no two-year recidivism", "two-year recidivism"], group_names=list(groups),
        sensitive=sensitive,
        description=(
            f"ProPublica COMPAS two-year recidivism ({n_raw:,} rows; ProPublica's filter leaves {n_filtered:,}; "
            f"{races}: {len(frame):,} rows; {n_dropped} dropped for missing values). Label 1 = two_year_recid. "
            f"Groups by {sensitive}: {', '.join(f'{i} = {g}' for i, g in enumerate(groups))}. Features: age, "
            "juvenile felony/misdemeanour/other counts, priors_count (standardised), charge degree (one-hot); "
            "COMPAS scores and outcome columns excluded; race and sex "
            f"{'kept as' if include_sensitive else 'not used as'} features."
        ),
        licence="ProPublica public data (no licence file; research re-use with attribution)",
        n_dropped=n_dropped, frame=frame, categorical=categorical, numeric=numeric,
    )
    return finish(_features(table, ["race", "sex"], include_sensitive), test_size, random_state)


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
GERMAN_NUMERIC = ["duration", "credit_amount", "installment_rate", "residence_since", "age", "existing_credits",
                  "people_liable"]


def load_german(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
                path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """UCI Statlog German Credit: predict good credit risk.

    ``german.data`` (1,000 rows, 20 attributes, space separated, symbolic codes ``A11``… explained in
    ``german.doc``).  Label 1 = good credit (attribute 21 = 1; 700 rows), 0 = bad (= 2).  Sensitive attributes:
    ``sex`` (default; from attribute 9 "personal status and sex": A92/A95 female = 0, A91/A93/A94 male = 1) and
    ``age`` (attribute 13: age <= 25 = 0, age > 25 = 1).  The defining column (personal_status_sex or age) is
    not a feature unless ``include_sensitive``.  Seven numeric attributes are standardised, the 13 symbolic
    ones one-hot encoded (feature names keep the codes, e.g. ``purpose=A43``).  Licence CC BY 4.0.
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
            "Numeric attributes standardised, symbolic attributes one-hot (codes as in german.doc); the defining "
            f"column {'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, numeric=list(GERMAN_NUMERIC),
        categorical=[c for c in GERMAN_COLUMNS[:-1] if c not in GERMAN_NUMERIC],
    )
    return finish(_features(table, exclude, include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- credit

CREDIT_FILES = (
    DataFile("credit", "default_of_credit_card_clients.csv",
             "88bd2bd25327b52af2148b7437740aca427aaf8f0e52ad782ee8bbae44b509bd",
             f"{GITHUB}/dhavalptl630007/DataSets/c31a7ae62231225146d364eb057181571ebfc191/"
             "default_of_credit_card_clients.csv"),
)
CREDIT_LABEL = "default payment next month"


def load_credit(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
                path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """UCI Default of Credit Card Clients (Taiwan, 2005): predict default on next month's payment.

    ``default_of_credit_card_clients.csv`` (30,000 rows; a CSV export of UCI's .xls, identical cell by cell; the
    download URL is that export's repository because UCI only serves the workbook).  Label 1 = ``default payment
    next month``.  Sensitive attribute ``sex`` (also accepted as ``SEX``): raw SEX 2 (female) = 0, 1 (male) = 1.
    Features: EDUCATION and MARRIAGE one-hot (undocumented codes 0, 5, 6 kept as categories); LIMIT_BAL, AGE,
    PAY_0, PAY_2..PAY_6, BILL_AMT1..6, PAY_AMT1..6 standardised; ID dropped; SEX only with
    ``include_sensitive``.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("sex", "SEX"), "credit")
    (raw,) = fetch(CREDIT_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw))
    frame, n_dropped = _drop_missing(frame, list(frame.columns))
    categorical = ["SEX", "EDUCATION", "MARRIAGE"]
    numeric = [c for c in frame.columns if c not in categorical + ["ID", CREDIT_LABEL]]
    table = Table(
        name="credit", y=frame[CREDIT_LABEL].to_numpy().astype(np.int64),
        s=_sex_codes((frame["SEX"] == 2).to_numpy()), label_names=["no default", "default"],
        group_names=["Female", "Male"], sensitive="sex",
        description=(
            f"UCI Default of Credit Card Clients, Taiwan ({len(frame):,} rows, {n_dropped} dropped). Label 1 = "
            "default payment next month. Groups by SEX: 0 = female (SEX 2), 1 = male (SEX 1). EDUCATION and "
            "MARRIAGE one-hot, the other 20 columns standardised, ID dropped; SEX "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, categorical=categorical, numeric=numeric,
    )
    return finish(_features(table, ["SEX"], include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- parkinsons

PARKINSONS_FILES = (
    DataFile("parkinsons", "parkinsons_updrs.data",
             "f2c7d5025dec4e92e7feae367a5f7ccf58789a10ac6b54bdf15976c599f9dd39",
             f"{UCI}/parkinsons/telemonitoring/parkinsons_updrs.data"),
)


def load_parkinsons(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
                    path=None, download: bool = True, include_sensitive: bool = False,
                    split_by_subject: bool = False) -> Dataset:
    """UCI Parkinsons Telemonitoring: predict a high total UPDRS score from voice measurements.

    ``parkinsons_updrs.data`` (5,875 recordings of 42 patients).  Label 1 = ``total_UPDRS`` above the median of
    the whole column (27.576): a fixed public threshold, as in DP-FERMI, so roughly balanced classes.  Sensitive
    attribute ``sex``: raw 1 (female) = 0, raw 0 (male) = 1.  Features: age, test_time and the 16 voice measures
    (standardised); subject#, motor_UPDRS and total_UPDRS are not features, sex only with
    ``include_sensitive``.  Rows are repeated recordings of the same patients: the default random split puts
    recordings of one patient on both sides (as the benchmark papers do); ``split_by_subject=True`` splits
    patients instead (no stratification; test_size is then the fraction of patients).  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("sex",), "parkinsons")
    split_by_subject = check_bool(split_by_subject, "split_by_subject")
    (raw,) = fetch(PARKINSONS_FILES, path=path, data_home=data_home, download=download)
    frame = pd.read_csv(io.BytesIO(raw))
    frame, n_dropped = _drop_missing(frame, list(frame.columns))
    threshold = float(frame["total_UPDRS"].median())
    numeric = [c for c in frame.columns if c not in ("subject#", "sex", "motor_UPDRS", "total_UPDRS")]
    table = Table(
        name="parkinsons", y=(frame["total_UPDRS"] > threshold).to_numpy().astype(np.int64),
        s=_sex_codes((frame["sex"] == 1).to_numpy()),
        label_names=[f"total_UPDRS<={threshold:g}", f"total_UPDRS>{threshold:g}"],
        group_names=["Female", "Male"], sensitive="sex",
        description=(
            f"UCI Parkinsons Telemonitoring ({len(frame):,} recordings of {frame['subject#'].nunique()} patients, "
            f"{n_dropped} dropped). Label 1 = total_UPDRS > {threshold:g} (median of the whole column, a fixed "
            "threshold). Groups by sex: 0 = female (raw 1), 1 = male (raw 0). Age, test_time and 16 voice "
            "measures standardised; subject#, motor_UPDRS, total_UPDRS excluded; sex "
            f"{'kept as' if include_sensitive else 'not used as'} a feature."
            + ("" if split_by_subject else " Recordings of one patient can fall in both train and test.")
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, numeric=numeric, binary=["sex"],
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
BANK_CATEGORICAL = ["job", "marital", "education", "default", "housing", "loan", "contact", "month", "poutcome"]


def bank_age_groups(age: np.ndarray, n_groups: int) -> tuple[np.ndarray, list[str]]:
    """Group codes and names of the bank age groups (group 0 = under 25 or over 60)."""
    cuts = BANK_AGE_CUTS[n_groups]
    age = np.asarray(age)
    middle = (age >= 25) & (age <= 60)
    band = np.searchsorted(np.asarray(cuts, dtype=np.int64), age, side="left")
    s = np.where(middle, 1 + band, 0).astype(np.int64)
    edges = [25, *(c + 1 for c in cuts), 61]
    names = ["age<25|>60"] + [f"age {lo}-{hi - 1}" for lo, hi in zip(edges[:-1], edges[1:])]
    return s, names


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
    in PF-LD's Table 1).  ``age`` is a feature only with ``include_sensitive``.  Other numeric columns
    standardised, categorical ones one-hot.  Licence CC BY 4.0 (the Kaggle file is derived from the UCI data).
    """
    check_choice(sensitive, "sensitive attribute", ("age",), "bank")
    check_choice(variant, "variant", tuple(BANK_FILES), "bank")
    check_choice(n_groups, "n_groups", tuple(BANK_AGE_CUTS), "bank")
    keep_duration = check_bool(keep_duration, "keep_duration")
    (raw,) = fetch([BANK_FILES[variant]], path=path, data_home=data_home, download=download)
    if variant == "full":
        frame = pd.read_csv(io.BytesIO(raw), sep=";").rename(columns={"y": "deposit"})
    else:
        frame = pd.read_csv(io.BytesIO(raw))
    frame, n_dropped = _drop_missing(frame, list(frame.columns))
    s, groups = bank_age_groups(frame["age"].to_numpy(), n_groups)
    numeric = ["age", "balance", "day", "campaign", "pdays", "previous"] + (["duration"] if keep_duration else [])
    shares = np.bincount(s, minlength=len(groups)) / len(s)
    group_text = ", ".join(f"{i} = {g} ({p:.0%})" for i, (g, p) in enumerate(zip(groups, shares)))
    table = Table(
        name="bank", y=(frame["deposit"] == "yes").to_numpy().astype(np.int64), s=s,
        label_names=["no deposit", "deposit"], group_names=groups, sensitive="age",
        description=(
            f"UCI Bank Marketing, {'Kaggle 11,162-row file' if variant == 'kaggle' else 'bank-full.csv'} "
            f"({len(frame):,} rows, {n_dropped} dropped; 'unknown' kept as a category). Label 1 = term deposit "
            f"subscribed. Groups by age: {group_text}. "
            f"duration {'kept' if keep_duration else 'dropped (leaks the label)'}; numeric columns standardised, "
            f"categorical one-hot; age {'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence=CC_BY if variant == "full" else "CC BY 4.0 (derived from UCI Bank Marketing; Kaggle copy)",
        n_dropped=n_dropped, frame=frame, categorical=list(BANK_CATEGORICAL), numeric=numeric,
    )
    return finish(_features(table, ["age"], include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- communities

COMMUNITIES_FILES = (
    DataFile("communities", "communities.data", "09e0b5c07eae24c1efab19b2edee05e160e7f5743b6f31e31eec3d73624da2ea",
             f"{UCI}/communities/communities.data"),
    DataFile("communities", "communities.names", "80914f24ab37261fb0fbda7e417cad8001335dadda4a8d702c265601ef8434fc",
             f"{UCI}/communities/communities.names"),
)


def load_communities(*, sensitive: str = "race", test_size: float = 0.25, random_state: int = 0, data_home=None,
                     path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """UCI Communities and Crime (US, 1990 census + 1995 FBI data): predict a high violent-crime rate.

    ``communities.data`` (1,994 communities, 128 columns, ``?`` = missing) with column names from the
    ``@attribute`` lines of ``communities.names``.  The five non-predictive columns (state, county, community,
    communityname, fold) are dropped, and so are the 22 LEMAS police columns that are missing for 1,675
    communities (every column more than 50 % missing) rather than the rows; the one row then still missing a
    value (OtherPerCap) is dropped, leaving 1,993.  Label 1 = ``ViolentCrimesPerPop`` above its median over the
    whole column (a fixed threshold).  Sensitive attribute ``race``: 1 = majority-white community
    (``racePctWhite`` > 0.5; the column is normalised to [0, 1] by UCI, so this is approximately "more than half
    white"), 0 = otherwise.  The defining column ``racePctWhite`` is not a feature unless
    ``include_sensitive``; the other race-percentage columns stay (they are strong proxies).  The remaining 100
    numeric features are standardised.  Licence CC BY 4.0.
    """
    check_choice(sensitive, "sensitive attribute", ("race",), "communities")
    data_raw, names_raw = fetch(COMMUNITIES_FILES, path=path, data_home=data_home, download=download)
    columns = re.findall(r"^@attribute\s+(\S+)", names_raw.decode("latin-1"), flags=re.MULTILINE)
    frame = pd.read_csv(io.BytesIO(data_raw), header=None, names=columns, na_values="?")
    n_raw = len(frame)
    frame = frame.drop(columns=columns[:5])
    sparse = [c for c in frame.columns if frame[c].isna().mean() > 0.5]
    frame = frame.drop(columns=sparse)
    frame, n_dropped = _drop_missing(frame, list(frame.columns))
    target = "ViolentCrimesPerPop"
    threshold = float(frame[target].median())
    table = Table(
        name="communities", y=(frame[target] > threshold).to_numpy().astype(np.int64),
        s=(frame["racePctWhite"] > 0.5).to_numpy().astype(np.int64),
        label_names=[f"{target}<={threshold:g}", f"{target}>{threshold:g}"],
        group_names=["non-majority-white", "majority-white"], sensitive="race",
        description=(
            f"UCI Communities and Crime ({n_raw:,} communities; 5 non-predictive columns and {len(sparse)} columns "
            f"more than 50% missing (LEMAS) dropped, then {n_dropped} row with a missing value dropped: "
            f"{len(frame):,} rows). Label 1 = ViolentCrimesPerPop > {threshold:g} (its median). Groups by race: "
            "0 = not majority-white, 1 = majority-white (normalised racePctWhite > 0.5). Features standardised; "
            f"racePctWhite {'kept as' if include_sensitive else 'not used as'} a feature, other race columns kept."
        ),
        licence=CC_BY, n_dropped=n_dropped, frame=frame, numeric=[c for c in frame.columns if c != target],
    )
    return finish(_features(table, ["racePctWhite"], include_sensitive), test_size, random_state)


# --------------------------------------------------------------------------------------------------- dutch

DUTCH_FILES = (
    DataFile("dutch", "dutch_census_2001.arff", "0e7e3f32668919c239db820f625815e1ea834c71402cdea595e03ef08c8616ef",
             f"{GITHUB}/tailequy/fairness_dataset/abb5a18b822ba56a221c5311082e192e85000b95/Dutch_census/"
             "dutch_census_2001.arff"),
)


def _read_nominal_arff(raw: bytes) -> pd.DataFrame:
    """Parse a Weka ARFF whose attributes are all nominal (values kept as strings; ``?`` = missing)."""
    header, _, body = raw.partition(b"\n@data")
    columns = re.findall(r"^@attribute\s+(\S+)\s+\{", header.decode("utf-8"), flags=re.MULTILINE | re.IGNORECASE)
    return pd.read_csv(io.BytesIO(body), header=None, names=columns, dtype=str, na_values="?", comment="%")


def load_dutch(*, sensitive: str = "sex", test_size: float = 0.25, random_state: int = 0, data_home=None,
               path=None, download: bool = True, include_sensitive: bool = False) -> Dataset:
    """Dutch census 2001 (IPUMS-International sample, fairness-benchmark version): predict a high-level occupation.

    ``dutch_census_2001.arff`` (60,420 rows, 12 nominal attributes), as distributed by Le Quy et al. (2022).
    Label 1 = occupation ``2_1`` (professional/managerial), 0 = ``5_4_9``.  Sensitive attribute ``sex`` (IPUMS
    coding 1 male, 2 female): female = 0, male = 1.  The other 10 attributes (age band, household position and
    size, previous residence, citizenship, country of birth, education level, economic status, current economic
    activity, marital status) are integer codes of categories and are one-hot encoded; sex only with
    ``include_sensitive``.  Licence not stated (IPUMS microdata: research use only).
    """
    check_choice(sensitive, "sensitive attribute", ("sex",), "dutch")
    (raw,) = fetch(DUTCH_FILES, path=path, data_home=data_home, download=download)
    frame = _read_nominal_arff(raw)
    frame, n_dropped = _drop_missing(frame, list(frame.columns))
    table = Table(
        name="dutch", y=(frame["occupation"] == "2_1").to_numpy().astype(np.int64),
        s=_sex_codes((frame["sex"] == "2").to_numpy()),
        label_names=["occupation 5_4_9 (low level)", "occupation 2_1 (high level)"],
        group_names=["Female", "Male"], sensitive="sex",
        description=(
            f"Dutch census 2001 benchmark version ({len(frame):,} rows, {n_dropped} dropped). Label 1 = occupation "
            "2_1 (professional/managerial). Groups by sex: 0 = female (code 2), 1 = male (code 1). The 10 other "
            f"nominal attributes one-hot; sex {'kept as' if include_sensitive else 'not used as'} a feature."
        ),
        licence="not stated (IPUMS-International census sample; research use only)",
        n_dropped=n_dropped, frame=frame, categorical=[c for c in frame.columns if c != "occupation"],
    )
    return finish(_features(table, ["sex"], include_sensitive), test_size, random_state)
