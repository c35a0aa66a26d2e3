"""Loaders of the census-like benchmarks: UCI Communities and Crime (US, 1990 census + 1995 FBI data) and the
Dutch census of 2001, each with its public schema fixed in code (see :mod:`dpfair.datasets._tabular` for how its
constants were chosen).
"""

from __future__ import annotations

import io
import re

import numpy as np
import pandas as pd

from dpfair.datasets._files import DataFile, fetch
from dpfair.datasets._tabular_common import CC_BY, GITHUB, UCI, drop_missing, feature_schema, sex_codes
from dpfair.datasets.base import Column, Dataset, Schema, Table, check_choice, finish, numeric_columns


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
    frame, n_dropped = drop_missing(frame[schema.names + [target]], schema.names + [target])
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
    return finish(feature_schema(table, ["racePctWhite"], include_sensitive), test_size, random_state)


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


def read_nominal_arff(raw: bytes) -> pd.DataFrame:
    """Parse a Weka ARFF whose attributes are all nominal (values kept as strings; ``?`` = missing)."""
    header, _, body = raw.partition(b"\n@data")
    columns = re.findall(r"^@attribute\s+(\S+)\s+\{", header.decode("utf-8"), flags=re.MULTILINE | re.IGNORECASE)
    return pd.read_csv(io.BytesIO(body), header=None, names=columns, dtype=str, na_values="?", comment="%")


def read_dutch(path, data_home, download: bool) -> tuple[pd.DataFrame, int]:
    """``(frame, n_dropped)``: the 60,420 rows of the Dutch census ARFF (codes as strings), rows with a missing
    value dropped (none)."""
    (raw,) = fetch(DUTCH_FILES, path=path, data_home=data_home, download=download)
    frame = read_nominal_arff(raw)
    return drop_missing(frame, list(frame.columns))


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
        s=sex_codes((frame["sex"] == "2").to_numpy()),
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
    return finish(feature_schema(table, ["sex"], include_sensitive), test_size, random_state)
