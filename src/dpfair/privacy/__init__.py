"""Differential privacy: privacy units, accounting, plans and calibration, secret randomness, releases, budgets."""

from dpfair.privacy.accounting import (
    ACCOUNTANTS,
    LedgerEntry,
    PLDAccountant,
    PrivacyLedger,
    RDPAccountant,
    epsilon_of,
    make_accountant,
)
from dpfair.privacy.budget import PrivacyBudget
from dpfair.privacy.calibration import (
    calibrate_noise,
    dpsgd_event,
    epsilon_for_noise,
    noise_for_epsilon,
)
from dpfair.privacy.mechanisms import (
    Release,
    gaussian_event,
    keep_probability,
    laplace_event,
    pure_dp_event,
    randomized_response_event,
)
from dpfair.privacy.plan import Part, PrivacyPlan, ledger_totals
from dpfair.privacy.randomness import SecretRandom, noise_is_reproducible, reproducible_noise
from dpfair.privacy.sensitivity import max_neighbour_distance, neighbours
from dpfair.privacy.units import PrivacyUnit, check_privacy_unit, check_public_features, relation_of

__all__ = [
    "ACCOUNTANTS", "LedgerEntry", "PLDAccountant", "PrivacyBudget", "PrivacyLedger", "RDPAccountant", "epsilon_of",
    "make_accountant", "calibrate_noise", "dpsgd_event", "epsilon_for_noise", "noise_for_epsilon",
    "Release", "gaussian_event", "keep_probability", "laplace_event", "pure_dp_event", "randomized_response_event",
    "Part", "PrivacyPlan", "ledger_totals", "SecretRandom", "noise_is_reproducible", "reproducible_noise",
    "max_neighbour_distance", "neighbours", "PrivacyUnit", "check_privacy_unit", "check_public_features",
    "relation_of",
]
