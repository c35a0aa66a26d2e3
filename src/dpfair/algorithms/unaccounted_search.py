"""Private fits that scikit-learn repeats on the same people, outside any dpfair accounting: said once per search.

``GridSearchCV(est, grid, cv=3).fit(X, y, sensitive_features=s)`` works with a dpfair estimator, and fits it
once per candidate and fold and once more to refit, all on the same people, then chooses among the fits by
scores computed on their data without noise. Each fit's ``privacy_spent_`` is that fit's alone; what the search
as a whole spends is the composition of every fit plus the choice, which no printed ε covers (basic
composition bounds the fits at the sum of their ε; the choice is not bounded at all). dpfair's own searches
account it: :mod:`dpfair.model_selection` draws every fit from one :class:`~dpfair.privacy.PrivacyBudget` (its
fits arrive here with that budget attached, and so are not warned about), and ``dpfair tune`` /
:class:`~dpfair.selection.PrivateSearch` selects privately (its runs are no scikit-learn search).

What counts as a search: a scikit-learn ``BaseSearchCV`` (``GridSearchCV``, ``RandomizedSearchCV``, the halving
searches) or ``TunedThresholdClassifierCV`` running its ``fit``, or one of the validation functions of
:data:`VALIDATION_FUNCTIONS` (``cross_validate``, ``cross_val_score``, ``cross_val_predict``, ...), found by
walking up the call stack for the outermost such frame of ``sklearn.model_selection``. Two hooks, one warning
(:class:`~dpfair.exceptions.PrivacyLeakWarning`) per search call (a search fitted twice, or
``cross_val_score`` called twice, is two searches):

- at the end of every private fit that drew from no budget (:func:`warn_if_unaccounted_search`): with this
  fit's ε and whom it protects, and the number of fits the search makes where its public settings give it
  (candidates × folds + refit; folds for the validation functions; "every fit" for a halving search, whose
  rounds depend on the scores);
- when scikit-learn clones such an estimator in the calling process (:func:`warn_if_parallel_search`, from
  :meth:`FairEstimator.__sklearn_clone__ <dpfair.algorithms.FairEstimator.__sklearn_clone__>`) for a search
  whose ``n_jobs`` runs its fits in parallel (``joblib.effective_n_jobs(n_jobs) > 1``: worker processes, or
  threads): their stacks do not hold the search, so a fit there cannot tell it is one of many and says nothing;
  the warning is given once, before the first fit, in the process and thread that called the search, with the
  ε the estimator is set to (a grid over ``epsilon`` sets others). A search's refit, which runs in the calling
  process, is then not warned about again.

Only the searches' public settings are read (the grid, ``cv``, ``n_jobs``, ``refit``, the number of rows for a
leave-one-out split), never the data.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings

from dpfair.exceptions import PrivacyLeakWarning

#: Where scikit-learn's searches and validation functions live (a frame of this package's code is inside one).
SEARCH_PACKAGE = "sklearn.model_selection"

#: scikit-learn's public functions that fit an estimator once per fold (and more).
VALIDATION_FUNCTIONS = frozenset({"cross_validate", "cross_val_score", "cross_val_predict", "learning_curve",
                                  "validation_curve", "permutation_test_score"})

#: Of those, the ones that fit once per fold of ``cv``, exactly.
ONE_FIT_PER_FOLD = frozenset({"cross_validate", "cross_val_score", "cross_val_predict"})

#: The mark left in a search frame's locals once it was warned about: it lives and dies with that call, so a
#: second call (a new frame, which may reuse the old one's id) is warned about again.
_MARK = "__dpfair_unaccounted_search_warned__"

_ALTERNATIVES = ("For an accounted search use `dpfair tune` / dpfair.selection.PrivateSearch (private "
                 "selection), or dpfair.model_selection.GridSearchCV / cross_validate (every fit on one "
                 "PrivacyBudget).")


@functools.cache
def _search_classes() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """``(searches, halving searches)``: the scikit-learn classes whose ``fit`` is a search (imported here, lazily:
    ``BaseSearchCV`` is not among scikit-learn's public names, so each import is guarded)."""
    searches, halving = [], []
    try:
        from sklearn.model_selection._search import BaseSearchCV
        searches.append(BaseSearchCV)
    except ImportError:  # pragma: no cover - every supported scikit-learn has it
        from sklearn.model_selection import GridSearchCV, RandomizedSearchCV
        searches += [GridSearchCV, RandomizedSearchCV]
    try:
        from sklearn.model_selection import TunedThresholdClassifierCV
        searches.append(TunedThresholdClassifierCV)
    except ImportError:  # pragma: no cover - scikit-learn < 1.5
        pass
    try:
        from sklearn.model_selection._search_successive_halving import BaseSuccessiveHalving
        halving.append(BaseSuccessiveHalving)
    except ImportError:  # pragma: no cover
        pass
    return tuple(searches), tuple(halving)


def _outermost_search():
    """``(search object or None, frame, stacklevel)`` of the outermost scikit-learn search on this thread's stack,
    or ``None`` outside one. ``stacklevel``, for a ``warnings.warn`` in this function's caller, is the code that
    called the search (the first frame above it outside scikit-learn, whose wrappers it skips)."""
    searches, _ = _search_classes()
    found, caller, depth = None, None, 0
    frame = inspect.currentframe()
    try:
        while frame is not None:
            module = str(frame.f_globals.get("__name__", ""))
            if module.startswith(SEARCH_PACKAGE):
                name = frame.f_code.co_name
                if name == "fit" and isinstance(frame.f_locals.get("self"), searches):
                    found, caller = (frame.f_locals["self"], frame), None
                elif name in VALIDATION_FUNCTIONS:
                    found, caller = (None, frame), None
            elif found is not None and caller is None and not module.startswith("sklearn."):
                caller = depth
            frame = frame.f_back
            depth += 1
        return None if found is None else (*found, caller if caller is not None else depth - 1)
    finally:
        del frame


def _first_time(frame) -> bool:
    """Whether the search call of ``frame`` was not warned about yet; marks it."""
    local = frame.f_locals
    if _MARK in local:
        return False
    local[_MARK] = True
    return True


def _fits_of(search, frame) -> int | None:
    """How many fits the search of ``frame`` makes, from its public settings: candidates × folds (+ 1 refit) for a
    grid or randomized search, folds for ``cross_validate`` / ``cross_val_score`` / ``cross_val_predict``;
    ``None`` where they do not tell (a halving search, a splitter that needs the groups, the other functions)."""
    from sklearn.model_selection import ParameterGrid, ParameterSampler, check_cv

    _, halving = _search_classes()
    try:
        local = frame.f_locals
        X, y, groups = local.get("X"), local.get("y"), local.get("groups")
        if search is None:
            if frame.f_code.co_name not in ONE_FIT_PER_FOLD:
                return None
            return int(check_cv(local.get("cv"), y, classifier=True).get_n_splits(X, y, groups))
        if isinstance(search, halving):
            return None
        if getattr(search, "param_grid", None) is not None:
            candidates = len(ParameterGrid(search.param_grid))
        elif getattr(search, "param_distributions", None) is not None:
            candidates = len(ParameterSampler(search.param_distributions, search.n_iter))
        else:
            return None
        folds = int(check_cv(search.cv, y, classifier=True).get_n_splits(X, y, groups))
        return candidates * folds + (1 if search.refit else 0)
    except (TypeError, ValueError, AttributeError):
        return None


def _where(search, frame) -> str:
    return f"{type(search).__name__}.fit" if search is not None else f"{frame.f_code.co_name}()"


def _unaccounted(search, name: str, n_fits: int | None) -> str:
    """The part of the message shared by both hooks: what the search as a whole spends, and the alternatives."""
    count = f"its {n_fits} fits ({'candidates × folds + refit' if search is not None else 'one per fold'})" \
        if n_fits else "every fit it makes"
    if search is not None:
        scores = "it chooses among them by scores computed on their data without noise"
    elif name == "cross_val_predict()":
        scores = "the predictions it returns come from all of those fits"
    else:
        scores = "the scores it returns are computed on their data without noise"
    bound = (f" (their ε add up to about {n_fits}× one fit's by basic composition, where each spends as much)"
             if n_fits else "")
    return f"{count} use the same people and {scores}: a total that no printed ε accounts{bound}. {_ALTERNATIVES}"


def warn_if_unaccounted_search(estimator, epsilon: float, delta: float) -> None:
    """Warn once per scikit-learn search that ``estimator`` (a private fit that drew from no
    :class:`~dpfair.privacy.PrivacyBudget`, spending ``(epsilon, delta)``) is one of its many fits.

    Silent outside a search, and in a search's parallel worker (whose stack does not hold the search:
    :func:`warn_if_parallel_search` warned in the calling process)."""
    found = _outermost_search()
    if found is None:
        return
    search, frame, stacklevel = found
    try:
        if not _first_time(frame):
            return
        where, n_fits = _where(search, frame), _fits_of(search, frame)
    finally:
        del frame
    from dpfair.privacy.units import protection

    protects = protection(getattr(estimator, "privacy_unit_", None), vars(estimator).get("sensitive_column_"),
                          epsilon=epsilon)
    warnings.warn(
        f"{type(estimator).__name__} was fitted inside scikit-learn's {where} with no PrivacyBudget: this fit spent "
        f"ε = {epsilon:.4g} at δ = {delta:.3g} (protecting {protects}) and privacy_spent_ covers it alone; "
        + _unaccounted(search, where, n_fits),
        PrivacyLeakWarning, stacklevel=stacklevel)  # the line that called the search


def warn_if_parallel_search(estimator) -> None:
    """Warn once per scikit-learn search whose ``n_jobs`` fits ``estimator`` (a private clone that draws from no
    :class:`~dpfair.privacy.PrivacyBudget`) in parallel workers, where its fits cannot see the search; called when
    scikit-learn clones it in the calling process. Silent for a search that fits in this thread (its fits warn),
    and for ``epsilon=inf`` (no noise, no guarantee claimed)."""
    try:
        epsilon = float(getattr(estimator, "epsilon", math.inf))
    except (TypeError, ValueError):
        return
    if not math.isfinite(epsilon):
        return
    found = _outermost_search()
    if found is None:
        return
    search, frame, stacklevel = found
    try:
        n_jobs = getattr(search, "n_jobs", None) if search is not None else frame.f_locals.get("n_jobs")
        from joblib import effective_n_jobs

        try:
            jobs = effective_n_jobs(n_jobs)
        except (TypeError, ValueError):
            return
        if jobs <= 1 or not _first_time(frame):
            return
        where, n_fits = _where(search, frame), _fits_of(search, frame)
    finally:
        del frame
    from dpfair.privacy.units import protection

    protects = protection(getattr(estimator, "privacy_unit", None), None, epsilon=epsilon)
    warnings.warn(
        f"{type(estimator).__name__} is fitted inside scikit-learn's {where} with n_jobs={n_jobs} and no "
        f"PrivacyBudget: its fits run in {jobs} parallel workers, which cannot tell they are part of a search, so "
        f"this is said once, here. Each fit spends the epsilon it is set to (this estimator's: {epsilon:g}, "
        f"protecting {protects}) and its privacy_spent_ covers it alone; " + _unaccounted(search, where, n_fits),
        PrivacyLeakWarning, stacklevel=stacklevel)
