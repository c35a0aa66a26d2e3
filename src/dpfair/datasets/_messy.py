"""A synthetic lender's export with the faults of real ones, to try the own-data path on (never a built-in)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpfair.utils.validation import check_positive

#: The regions and the ways the export writes each of them.
MESSY_REGIONS = {"North": ("North", "NORTH", "north ", " North"), "South": ("South", "south", "SOUTH"),
                 "East": ("East", "EAST", "east "), "West": ("West", "west")}
MESSY_ETHNICITIES = ("Asian", "Black", "Hispanic", "White", "Other")
MESSY_PURPOSES = ("car", "debt consolidation", "education", "home improvement", "medical", "small business")
_WORDS = ("asked", "about", "rates", "called", "twice", "prefers", "email", "branch", "visit", "referred", "by",
          "friend", "wants", "fixed", "term", "self", "employed", "docs", "pending", "verified", "income")


def make_messy_loans(n_rows: int = 30_000, *, random_state: int = 0, small_group: int = 40) -> pd.DataFrame:
    """A loans table as a lender's system exports it: every cell a string, as a CSV holds it.

    ``applicant_id`` (``"APP-0000123"``), ``applied_on`` (ISO dates), ``region`` written in several cases and with
    stray spaces (``"North"``, ``"NORTH"``, ``"north "``), ``income`` with thousands separators (``"110,976"``,
    log-normal with a heavy tail up to 5,000,000), ``loan_amount`` in dollars (``"$12,500.00"``), a 5-digit
    ``zip`` with leading zeros, ``age``, ``debt_ratio``, ``employment_years``, ``purpose``, ``owns_home``
    (``"true"``/``"false"``), a free-text ``notes`` column, the label ``approved`` (``"Yes"``/``"No"``), and the
    sensitive ``ethnicity`` (one group of ``small_group`` people) and ``sex``.  Six columns have gaps, written as
    empty cells or ``"NA"``; a missing debt ratio or income lowers the chance of approval (so an indicator helps).
    """
    n = check_positive(n_rows, "n_rows", integer=True)
    rng = np.random.default_rng(random_state)
    small = min(int(small_group), n // 10)
    ethnicity = rng.choice(["Asian", "Black", "Hispanic", "White"], n, p=[0.12, 0.18, 0.2, 0.5]).astype(object)
    ethnicity[rng.choice(n, small, replace=False)] = "Other"
    sex = rng.choice(["F", "M"], n)
    region = rng.choice(list(MESSY_REGIONS), n, p=[0.3, 0.25, 0.25, 0.2])
    income = np.minimum(rng.lognormal(10.6, 0.7, n) * np.where(rng.random(n) < 0.01, 30, 1), 5e6)
    age = rng.integers(18, 91, n)
    debt = np.clip(rng.gamma(2.0, 0.18, n), 0, 3).round(3)
    employment = np.clip(rng.poisson(np.maximum(age - 18, 0) / 5), 0, 60)
    purpose = rng.choice(MESSY_PURPOSES, n)
    owns = rng.random(n) < 0.35 + 0.004 * (age - 18)
    amount = np.round(rng.lognormal(9.3, 0.6, n), -2)
    gaps = {c: rng.random(n) < p for c, p in (("income", 0.06), ("age", 0.02), ("debt_ratio", 0.08),
                                               ("employment_years", 0.05), ("purpose", 0.04), ("owns_home", 0.03))}
    z = (1.4 * (np.log(income) - 10.6) - 2.2 * (debt - 0.36) + 0.015 * (age - 45) + 0.04 * employment
         - 0.35 * np.log(amount / 11000) + 0.3 * owns + 0.4 * (region == "North") - 0.3 * (region == "West")
         + 0.3 * (purpose == "car") - 0.4 * (purpose == "small business") - 0.9 * gaps["debt_ratio"]
         - 0.6 * gaps["income"] + 0.3 * (sex == "M") - 0.2)
    approved = rng.random(n) < 1 / (1 + np.exp(-z))

    def spell(values, written):
        out = np.empty(n, dtype=object)
        for key, options in written.items():
            where = values == key
            out[where] = rng.choice(options, int(where.sum()))
        return out

    def with_gaps(column, text):
        text = np.asarray(text, dtype=object)
        missing = gaps[column]
        text[missing] = np.where(rng.random(int(missing.sum())) < 0.5, "", "NA")
        return text

    days = rng.integers(0, 3 * 365, n)
    notes = [" ".join(rng.choice(_WORDS, rng.integers(2, 6))) if rng.random() < 0.6 else "" for _ in range(n)]
    return pd.DataFrame({
        "applicant_id": [f"APP-{i:07d}" for i in rng.permutation(n) + 1],
        "applied_on": (np.datetime64("2023-01-01") + days).astype(str),
        "region": spell(region, MESSY_REGIONS),
        "income": with_gaps("income", [f"{v:,.0f}" for v in income]),
        "loan_amount": [f"${v:,.2f}" for v in amount],
        "zip": [f"{v:05d}" for v in rng.integers(0, 100_000, n)],
        "age": with_gaps("age", age.astype(str)),
        "debt_ratio": with_gaps("debt_ratio", [repr(float(v)) for v in debt]),
        "employment_years": with_gaps("employment_years", employment.astype(str)),
        "purpose": with_gaps("purpose", purpose),
        "owns_home": with_gaps("owns_home", np.where(owns, "true", "false")),
        "notes": notes,
        "approved": np.where(approved, "Yes", "No"),
        "ethnicity": ethnicity,
        "sex": sex,
    })
