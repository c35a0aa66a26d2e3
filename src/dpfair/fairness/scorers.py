"""Fairness-aware scorers for model selection: the error, a notion's violation, and a weighted sum of the two.

For ``scoring=`` of ``GridSearchCV`` / ``cross_validate`` (scikit-learn's, or :mod:`dpfair.model_selection`'s).
They need the groups of the scored rows, which scikit-learn passes by metadata routing: with
``sklearn.set_config(enable_metadata_routing=True)`` (dpfair's wrappers switch it on themselves),
``search.fit(X, y, sensitive_features=s)`` routes each test fold's s to every scorer. The scorers
request ``sensitive_features`` unasked; ``set_score_request(sensitive_features=...)`` changes that
(``False``, or an alias). Without metadata routing (scikit-learn's own ``cross_val_score``), name the column of
the DataFrame X that holds the groups: ``fairness_scorer(..., sensitive_features="sex")`` reads each scored
fold's groups from it, as ``fit(X, y, sensitive_features="sex")`` does (``params={"sensitive_features":
"sex"}``). A scorer that gets no groups raises :class:`MissingGroupsError`, which scikit-learn's
``error_score`` cannot turn into a NaN score. An estimator that reads the group at prediction time
(``predict(X, sensitive_features=s)``: DP post-processing, the A-aware oracle learner, threshold
post-processing) is given the same s.

Like scikit-learn's losses they return the value negated, so that greater is better:

* :func:`error_scorer`: ``−error`` (the misclassification rate);
* :func:`violation_scorer`: ``−violation`` of a registered notion (``demographic_parity``, ``equalized_odds``,
  ...; :mod:`dpfair.fairness.notions`, pairwise by default);
* :func:`fairness_scorer`: ``−(error + weight · violation)``.

Why a weighted sum rather than "the error, subject to violation ≤ c": a search averages each
candidate's score over the folds and ranks the means. A sum is finite on every fold and its mean is
the sum of the means, so the ranking trades the two at the stated rate (one point of violation costs
``weight`` points of error). A cap scores a fold that misses it as −∞ (or an arbitrary penalty), so
one unlucky fold decides the rank and the mean means nothing. For a cap, score both
(``scoring={"error": error_scorer(), "violation": violation_scorer(notion)}``) and pass ``refit`` a
callable that picks the lowest mean error among the candidates whose mean violation is within it.

Scores computed on private data are not private: choosing by them is a further use of the data
(see :mod:`dpfair.model_selection`).
"""

from __future__ import annotations

import numbers

from sklearn.metrics import accuracy_score
from sklearn.utils.metadata_routing import MetadataRequest

from dpfair.utils.capabilities import capabilities
from dpfair.fairness.metrics import summary_positive_label
from dpfair.fairness.notions import check_convention, get_notion, notion_names

__all__ = ["FairScorer", "MissingGroupsError", "error_scorer", "fairness_scorer", "predict_with_groups",
           "violation_scorer"]


class MissingGroupsError(BaseException):
    """A fairness scorer was given no groups for the rows it scores.

    A ``BaseException``, like pytest's outcomes, on purpose: scikit-learn's ``cross_val_score`` and
    ``GridSearchCV`` turn every ``Exception`` a scorer raises into a NaN score (``error_score=np.nan``) and a
    warning, and then rank the NaNs. This one stops the selection with its message instead.
    """


def predict_with_groups(estimator, X, sensitive_features=None, method: str = "predict"):
    """``estimator.predict(X)`` (or another prediction ``method``, e.g. ``"predict_proba"``), given the groups
    when the estimator reads them at prediction time."""
    predict = getattr(estimator, method)
    if capabilities(estimator).predict_needs_sensitive:
        return predict(X, sensitive_features=sensitive_features)
    return predict(X)


class FairScorer:
    """``scorer(estimator, X, y, sensitive_features=s)`` = ``−(error_weight · error + weight · violation)``.

    Parameters
    ----------
    notion : the name of a registered notion (:func:`~dpfair.fairness.notions.get_notion`) whose violation is
        scored, or ``None`` (the error alone).
    weight : w ≥ 0, the weight of the violation.
    error_weight : 1 (count the error) or 0 (the violation alone).
    convention : "pairwise" (the largest gap between two groups) or "marginal" (to the overall rate).
    positive_label : the positive label of a notion that has one (equal opportunity, predictive equality);
        ``None``: the second smallest label
        (1 for 0/1 labels), as :func:`~dpfair.fairness.fairness_summary` uses.
    sensitive_features : the name of the column of the DataFrame X that holds the groups, read when none are
        routed (scikit-learn's CV without metadata routing); ``None``: routed groups only.
    """

    def __init__(self, notion=None, *, weight=1.0, error_weight=1, convention="pairwise", positive_label=None,
                 sensitive_features=None):
        if sensitive_features is not None and not isinstance(sensitive_features, str):
            raise ValueError(f"sensitive_features of a scorer names a column of X, got a "
                             f"{type(sensitive_features).__name__}; pass the column's name (groups given as values "
                             "are routed with metadata routing)")
        if notion is not None:
            try:
                notion = get_notion(getattr(notion, "name", notion)).name  # a registered notion, kept by name
            except ValueError:
                raise ValueError(f"notion must be one of {', '.join(notion_names())} or None, got {notion!r}") from None
        check_convention(convention)
        for name, value in (("weight", weight), ("error_weight", error_weight)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value < float("inf"):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if notion is None and not error_weight:
            raise ValueError("a scorer of nothing: give a notion, or error_weight > 0")
        self.notion, self.weight, self.error_weight = notion, float(weight), float(error_weight)
        self.convention, self.positive_label = convention, positive_label
        self.sensitive_features = sensitive_features
        self._requests = {"sensitive_features": True}

    # ---- metadata routing (scikit-learn asks every scorer what it consumes) -----------------------
    def set_score_request(self, *, sensitive_features=True):
        """Whether (``True``/``False``/``None``) or under which name (a string alias) ``sensitive_features`` is
        routed here."""
        self._requests = {"sensitive_features": sensitive_features}
        return self

    def get_metadata_routing(self) -> MetadataRequest:
        request = MetadataRequest(owner=repr(self))
        for param, alias in self._requests.items():
            request.score.add_request(param=param, alias=alias)
        return request

    # ---- scoring -------------------------------------------------------------------------------
    def _groups(self, X, sensitive_features):
        """The scored rows' groups: routed values, or a column of the DataFrame X (routed name, else this
        scorer's ``sensitive_features``); ``None`` when neither is there."""
        column = sensitive_features if isinstance(sensitive_features, str) else (
            self.sensitive_features if sensitive_features is None else None)
        if column is None:
            return sensitive_features
        if not hasattr(X, "columns") or column not in X.columns:
            raise ValueError(f"{self!r} reads the groups from the column {column!r} of X, which X does not have; "
                             "pass X as a DataFrame holding it")
        return X[column]

    def __call__(self, estimator, X, y_true, sensitive_features=None) -> float:
        sensitive_features = self._groups(X, sensitive_features)
        if sensitive_features is None and (self.notion is not None
                                           or capabilities(estimator).predict_needs_sensitive):
            raise MissingGroupsError(
                f"{self!r} got no groups for the scored rows (a NaN score would be ranked): name the column of the "
                "DataFrame X that holds them, fairness_scorer(..., sensitive_features='sex'), or route them: "
                "sklearn.set_config(enable_metadata_routing=True) (dpfair.model_selection does it) and "
                "fit(X, y, sensitive_features=s)")
        y_pred = predict_with_groups(estimator, X, sensitive_features)
        value = 0.0
        if self.error_weight:
            value += self.error_weight * (1.0 - accuracy_score(y_true, y_pred))
        if self.notion is not None:
            notion = get_notion(self.notion)
            positive = self.positive_label
            if positive is None:
                positive = summary_positive_label(y_true, y_pred) if notion.uses_positive_label else 1
            value += self.weight * notion.violation(y_true, y_pred, sensitive_features, self.convention, positive)
        return -float(value)

    def __repr__(self) -> str:
        if self.notion is None:
            return "error_scorer()"
        if not self.error_weight:
            return f"violation_scorer({self.notion!r})"
        return f"fairness_scorer({self.notion!r}, weight={self.weight:g})"


def error_scorer(*, sensitive_features=None) -> FairScorer:
    """``−error``, the misclassification rate negated; gives the groups to estimators that predict with them
    (``sensitive_features``: the column of X holding them, when none are routed)."""
    return FairScorer(sensitive_features=sensitive_features)


def violation_scorer(notion: str = "demographic_parity", *, convention: str = "pairwise",
                     positive_label=None, sensitive_features=None) -> FairScorer:
    """``−violation`` of ``notion`` on the scored rows (greater is better, like scikit-learn's losses);
    ``sensitive_features``: the column of X holding the groups, when none are routed."""
    return FairScorer(notion, error_weight=0, convention=convention, positive_label=positive_label,
                      sensitive_features=sensitive_features)


def fairness_scorer(notion: str = "demographic_parity", weight: float = 1.0, *, convention: str = "pairwise",
                    positive_label=None, sensitive_features=None) -> FairScorer:
    """``−(error + weight · violation)``: one violation point costs ``weight`` error points (module docstring: why a
    sum and not a cap); ``sensitive_features``: the column of X holding the groups, when none are routed."""
    return FairScorer(notion, weight=weight, convention=convention, positive_label=positive_label,
                      sensitive_features=sensitive_features)
