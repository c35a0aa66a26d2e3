"""Differential privacy: privacy units, accounting, calibration, releases and sensitivity checks."""

from dpfair.privacy.accounting import (
    ACCOUNTANTS,
    LedgerEntry,
    PLDAccountant,
    PrivacyLedger,
    RDPAccountant,
    epsilon_of,
    make_accountant,
)
from dpfair.privacy.calibration import (
    calibrate_noise,
    dpsgd_event,
    epsilon_for_noise,
    noise_for_epsilon,
)
from dpfair.privacy.mechanisms import gaussian_event, laplace_event, release_gaussian, release_laplace
from dpfair.privacy.sensitivity import max_neighbour_distance, neighbours
from dpfair.privacy.units import PrivacyUnit, check_privacy_unit, relation_of

__all__ = [
    "ACCOUNTANTS", "LedgerEntry", "PLDAccountant", "PrivacyLedger", "RDPAccountant", "epsilon_of",
    "make_accountant", "calibrate_noise", "dpsgd_event", "epsilon_for_noise", "noise_for_epsilon",
    "gaussian_event", "laplace_event", "release_gaussian", "release_laplace", "max_neighbour_distance",
    "neighbours", "PrivacyUnit", "check_privacy_unit", "relation_of",
]
