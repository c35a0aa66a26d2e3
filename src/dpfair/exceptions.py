"""Errors and warnings shared by the whole package.

Every error a user can cause is a ``ValueError`` (or ``FileNotFoundError``)
whose message names the argument at fault and how to fix it, so that the CLI
can print it as one line.
"""


class PrivacyLeakWarning(UserWarning):
    """A computation spends privacy that is not accounted for.

    Raised when a user asks for a paper-faithful variant that uses a quantity
    computed from private data (group proportions, a data-dependent bound)
    without releasing it through an accounted mechanism.
    """


class UtilityWarning(UserWarning):
    """The settings leave too little signal for a useful model (too little data for the privacy asked,
    noise that hides the fairness constraints): the fit runs, and the warning names the cause and the fix.

    It says nothing about privacy, which holds as printed; filter it with
    ``warnings.simplefilter("ignore", dpfair.UtilityWarning)``.
    """


class LearnedNothingWarning(UtilityWarning):
    """A fit ended no better than the constant model (one class predicted for every training row, or a training
    loss not below that of predicting the class shares): the message names the likely cause and the fix
    (see :mod:`dpfair.algorithms.learned`)."""


class DataNotFoundError(FileNotFoundError):
    """A data set file is neither at the given path, nor in the data home, nor downloadable."""


class ChecksumError(ValueError):
    """A data set file on disk does not have the sha256 its source publishes."""


class BudgetExceededError(ValueError):
    """A fit (or grid) would spend more than what is left of its :class:`~dpfair.privacy.PrivacyBudget`.

    Raised before the fit releases anything; the message names the totals and the fix.
    """
