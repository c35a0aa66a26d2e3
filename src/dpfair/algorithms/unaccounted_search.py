"""Private fits that scikit-learn repeats on the same people, outside any dpfair accounting: said once per search.

``GridSearchCV(est, grid, cv=3).fit(X, y, sensitive_features=s)`` works with a dpfair estimator, and fits it
once per candidate and fold and once more to refit, all on the same people, then chooses among the fits by
scores computed on their data without noise. Each fit's ``privacy_spent_`` is that fit's alone; what the search
as a whole spends is the composition of every fit plus the choice, which no printed ε covers (basic
composition bounds the fits at ``n_fits · ε``; the choice is not bounded at all). dpfair's own searches account
it: :mod:`dpfair.model_selection` draws every fit from one :class:`~dpfair.privacy.PrivacyBudget` (its fits
arrive here with that budget attached, and so are not warned about), and ``dpfair tune`` /
:class:`~dpfair.private_search.PrivateSearch` selects privately.

:func:`warn_if_unaccounted_search` is called at the end of every private fit that drew from no budget. It looks
up the call stack for scikit-learn's model-selection code (a search's ``fit``, or ``cross_validate``,
``cross_val_score`` and the other validation functions) and, the first time it meets that search, warns
:class:`~dpfair.exceptions.PrivacyLeakWarning` with this fit's ε, the number of fits the search makes where it
can be read off the search (candidates × folds + refit) and the accounted alternatives. It reads the search's
public settings only. With ``n_jobs > 1`` scikit-learn fits in worker processes whose stack holds only its
per-fit helper, so each worker warns once for itself (their warnings go to the workers' stderr).
"""

from __future__ import annotations

import inspect
import warnings
import weakref
from collections import deque

from dpfair.exceptions import PrivacyLeakWarning

#: Where scikit-learn's searches and validation functions live (a frame of this package's code is inside one).
SEARCH_PACKAGE = "sklearn.model_selection"

#: scikit-learn's functions that fit an estimator once per fold.
VALIDATION_FUNCTIONS = frozenset({"cross_validate", "cross_val_score", "cross_val_predict", "learning_curve",
                                  "validation_curve", "permutation_test_score", "_fit_and_score",
                                  "_fit_and_predict"})

_warned_searches: weakref.WeakSet = weakref.WeakSet()  # the search objects already warned about
_warned_calls: deque = deque(maxlen=256)  # ids of validation-function frames already warned about (while alive)


def _outermost_search():
    """``(search object or None, frame)`` of the outermost scikit-learn model-selection call on the stack, or
    ``None`` outside one."""
    found = None
    frame = inspect.currentframe()
    try:
        while frame is not None:
            if str(frame.f_globals.get("__name__", "")).startswith(SEARCH_PACKAGE):
                name = frame.f_code.co_name
                if name == "fit" and "self" in frame.f_locals:
                    found = (frame.f_locals["self"], frame)
                elif name in VALIDATION_FUNCTIONS:
                    found = (None, frame)
            frame = frame.f_back
        return found
    finally:
        del frame


def _fits_of(search) -> int | None:
    """Candidates × folds (+ 1 refit) of a grid or randomized search, from its public settings; ``None`` where
    they cannot be read."""
    from sklearn.model_selection import ParameterGrid, check_cv

    try:
        if getattr(search, "param_grid", None) is not None:
            candidates = len(ParameterGrid(search.param_grid))
        elif getattr(search, "n_iter", None) is not None:
            candidates = int(search.n_iter)
        else:
            return None
        folds = check_cv(search.cv, classifier=True).get_n_splits()
        return candidates * folds + (1 if getattr(search, "refit", False) else 0)
    except (TypeError, ValueError, AttributeError):
        return None


def warn_if_unaccounted_search(estimator, epsilon: float, delta: float) -> None:
    """Warn once per scikit-learn search that ``estimator`` (a private fit that drew from no
    :class:`~dpfair.privacy.PrivacyBudget`, spending ``(epsilon, delta)``) is one of its many fits."""
    found = _outermost_search()
    if found is None:
        return
    search, frame = found
    if search is not None:
        if search in _warned_searches:
            return
        _warned_searches.add(search)
        where, n_fits = f"{type(search).__name__}.fit", _fits_of(search)
    else:
        if id(frame) in _warned_calls:
            return
        _warned_calls.append(id(frame))
        where, n_fits = f"{frame.f_code.co_name}()", None
    del frame
    count = f"its {n_fits} fits (candidates × folds + refit)" if n_fits else "every fit it makes"
    bound = f" (up to {n_fits * epsilon:.4g} by basic composition, plus the choice)" if n_fits else ""
    warnings.warn(
        f"{type(estimator).__name__} was fitted inside scikit-learn's {where} with no PrivacyBudget: this fit spent "
        f"ε = {epsilon:.4g} (δ = {delta:.3g}) and privacy_spent_ covers it alone; {count} use the same people and "
        f"the choice reads their scores without noise, a total no printed ε accounts{bound}. For an accounted "
        "search use `dpfair tune` / dpfair.private_search.PrivateSearch (private selection), or "
        "dpfair.model_selection.GridSearchCV / cross_validate (every fit on one PrivacyBudget).",
        PrivacyLeakWarning, stacklevel=2)
