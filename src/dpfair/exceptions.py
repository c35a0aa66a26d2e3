"""Errors and warnings shared by the whole package.

Every error a user can cause is a ``ValueError`` (or ``FileNotFoundError``)
whose message names the argument at fault and how to fix it, so that the CLI
can print it as one line.
"""

import operator


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


class SmallGroupWarning(UtilityWarning):
    """Groups too small for a fair method's constraint (:func:`dpfair.algorithms.signal.warn_small_groups`).

    ``groups`` are the groups as the estimator knows them (its ``groups_`` entries: names, or the codes
    ``0..k-1`` of a list declared elsewhere), ``sizes`` their sizes as the fit knows them (released or public),
    ``template`` the message with ``{groups}`` where the groups are listed; :meth:`naming` rewrites it with the
    declared names of coded groups (what the command line prints). ``floor``: the value a released count is
    raised to when its noisy count falls below it (:func:`dpfair.algorithms.signal.floor_counts`); a size at the
    floor is shown as "about <floor> or fewer", with a note that the group's noisy count fell below the floor,
    so the group may be far smaller (never as a size "about" the floor alone).
    """

    def __init__(self, template: str, groups, sizes, floor: float | None = None):
        self.template, self.groups, self.sizes = template, list(groups), [float(v) for v in sizes]
        self.floor = None if floor is None else float(floor)
        super().__init__(self.naming(None))

    def naming(self, names) -> str:
        """The message, each group shown by ``names[code]`` where ``names`` is given and a group is a code."""
        def name(g):
            try:
                code = operator.index(g)  # an integer code (int or numpy integer), not a name
            except TypeError:
                return str(g)
            return str(names[code]) if names is not None and 0 <= code < len(names) else str(g)

        def floored(v):
            return self.floor is not None and v <= self.floor * (1 + 1e-9)

        listed = ", ".join(f"{name(g)!r} about {max(v, 0.0):,.0f}{' or fewer' if floored(v) else ''}"
                           for g, v in zip(self.groups, self.sizes))
        note = (f" (A size \"about {self.floor:,.0f} or fewer\" is the floor of the released counts: that group's "
                "noisy count fell below it and the floor was released in its place, so the group may be far "
                "smaller.)") if any(floored(v) for v in self.sizes) else ""
        return self.template.format(groups=listed) + note
