"""dpfair: fair and differentially private machine learning."""

from dpfair.exceptions import (
    BudgetExceededError,
    ChecksumError,
    DataNotFoundError,
    PrivacyLeakWarning,
    UtilityWarning,
)

__version__ = "0.1.0"

__all__ = [
    "BudgetExceededError", "ChecksumError", "DataNotFoundError", "PrivacyLeakWarning", "UtilityWarning", "__version__",
]
