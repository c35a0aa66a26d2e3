"""Differential privacy: privacy units, accounting, plans and calibration, secret randomness, releases, budgets.

The accountant (:mod:`~dpfair.privacy.accounting`) and the privacy units load with the package; the other names
(mechanisms, secret randomness, neighbours, and calibration, plans and budgets, which build on the mechanisms)
are imported on first use (``from dpfair.privacy import Release``). None of them imports torch: a release of
tensors uses the torch its caller imported (:func:`~dpfair.privacy.randomness.is_tensor`), so that reading a
ledger (``dpfair report``) or releasing a table of counts (``dpfair measure``) does not pay for it.
"""

from dpfair.utils.lazy_exports import lazy_exports
from dpfair.privacy.accounting import (
    ACCOUNTANTS,
    LedgerEntry,
    PLDAccountant,
    PrivacyLedger,
    RDPAccountant,
    epsilon_of,
    make_accountant,
)
from dpfair.privacy.units import (
    PrivacyUnit,
    check_privacy_unit,
    check_public_features,
    relation_of,
)

__all__ = [
    "ACCOUNTANTS", "LedgerEntry", "PLDAccountant", "PrivacyBudget", "PrivacyLedger", "RDPAccountant", "epsilon_of",
    "make_accountant", "calibrate_noise", "dpsgd_event", "epsilon_for_noise", "noise_for_epsilon",
    "Release", "gaussian_event", "keep_probability", "laplace_event", "pure_dp_event", "randomized_response_event",
    "Part", "PrivacyPlan", "ledger_totals", "SecretRandom", "noise_is_reproducible", "reproducible_noise",
    "max_neighbour_distance", "neighbours", "PrivacyUnit", "check_privacy_unit", "check_public_features",
    "relation_of",
]

#: Names imported on first use, by module: these modules import torch.
_LAZY = {
    **dict.fromkeys(("PrivacyBudget",), "dpfair.privacy.budget"),
    **dict.fromkeys(("calibrate_noise", "dpsgd_event", "epsilon_for_noise", "noise_for_epsilon"),
                    "dpfair.privacy.calibration"),
    **dict.fromkeys(("Release", "gaussian_event", "keep_probability", "laplace_event", "pure_dp_event",
                     "randomized_response_event"), "dpfair.privacy.mechanisms"),
    **dict.fromkeys(("Part", "PrivacyPlan", "ledger_totals"), "dpfair.privacy.plan"),
    **dict.fromkeys(("SecretRandom", "noise_is_reproducible", "reproducible_noise"), "dpfair.privacy.randomness"),
    **dict.fromkeys(("max_neighbour_distance", "neighbours"), "dpfair.privacy.sensitivity"),
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
