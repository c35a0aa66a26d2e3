"""What a fitted dpfair estimator does at prediction (:class:`Predictions`, a mixin of
:class:`~dpfair.algorithms.base.FairEstimator`).

``X`` at prediction is checked against what ``fit`` saw (the column s was taken from dropped, named columns in the
fitted order, the fitted width); ``predict`` is the argmax of the method's ``_predict_proba``, ``decision_function``
its log-odds (post-processing: no privacy cost), ``score`` the accuracy, taking the groups where the method reads
them at prediction.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from dpfair.utils.validation import check_features


class Predictions:
    """``predict_proba``, ``predict``, ``decision_function`` and ``score`` of a fitted estimator, on the method's
    ``_predict_proba``, with the checks of ``X`` (and of the groups) at prediction.

    A mixin of :class:`~dpfair.algorithms.base.FairEstimator`: its methods read the fitted attributes
    (``classes_``, ``n_features_in_``, ``feature_names_in_``, ``sensitive_column_``).
    """

    def _prediction_groups(self, X, sensitive_features):
        """``(X, s)`` at prediction: ``sensitive_features`` naming a column of the DataFrame X, or (``None``) the
        column ``fit`` took s from when X holds it, is taken out of X as s; other values are returned as given."""
        column = sensitive_features if isinstance(sensitive_features, str) else (
            vars(self).get("sensitive_column_") if sensitive_features is None else None)
        if column is not None and isinstance(X, pd.DataFrame) and column in X.columns:
            return X.drop(columns=[column]), X[column]
        if isinstance(sensitive_features, str):
            raise ValueError(f"sensitive_features={sensitive_features!r} is not a column of X; pass a DataFrame "
                             "holding that column, or the groups themselves (one value per row)")
        return X, sensitive_features

    def _prediction_features(self, X) -> np.ndarray:
        """``X`` at prediction: the column s was taken from dropped, named columns put in the order seen in fit,
        finite, of the fitted width.

        As scikit-learn does, a DataFrame given to a model fitted on an array (whose columns could be in any
        order: nothing says) warns, and so does an array given to a model fitted on named columns."""
        column = vars(self).get("sensitive_column_")
        if column is not None and isinstance(X, pd.DataFrame) and column in X.columns:
            X = X.drop(columns=[column])
        names = getattr(self, "feature_names_in_", None)
        named = isinstance(X, pd.DataFrame) and len(X.columns) and all(isinstance(c, str) for c in X.columns)
        if names is None and named:
            warnings.warn(f"X has feature names, but {type(self).__name__} was fitted without feature names: its "
                          "columns are read by position, in the order of the array fit was given",
                          UserWarning, stacklevel=3)
        elif names is not None and not isinstance(X, pd.DataFrame):
            warnings.warn(f"X does not have valid feature names, but {type(self).__name__} was fitted with feature "
                          "names: its columns are read by position, as in fit's DataFrame "
                          f"({', '.join(map(str, names[:5]))}{', …' if len(names) > 5 else ''})",
                          UserWarning, stacklevel=3)
        if names is not None and isinstance(X, pd.DataFrame):
            missing = [c for c in names if c not in X.columns]
            unexpected = [c for c in X.columns if c not in set(names)]
            if missing or unexpected:
                raise ValueError(f"X's columns differ from those seen in fit (missing {missing[:5]}, unexpected "
                                 f"{unexpected[:5]}); pass the columns the model was fitted with")
            X = X[list(names)]
        X = check_features(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input (as in fit); pass the columns the model "
                             "was fitted with")
        return X

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self, "classes_")
        return self._predict_proba(self._prediction_features(X))

    def predict(self, X) -> np.ndarray:
        proba = self.predict_proba(X)  # first: an unfitted model raises NotFittedError there
        return self.classes_[np.argmax(proba, axis=1)]

    def _predicts_by_argmax(self) -> bool:
        return type(self).predict is Predictions.predict

    @available_if(_predicts_by_argmax)
    def decision_function(self, X) -> np.ndarray:
        """Confidence scores, as scikit-learn's classifiers give them: for two classes the log-odds of the second,
        ``log p₁ − log p₀`` (positive exactly where ``predict`` gives ``classes_[1]``), shape (n,); for more, the
        log-probabilities, shape (n, k), whose argmax is ``predict``. Post-processing of ``predict_proba``: no
        privacy cost. Only for a method whose ``predict`` is that argmax (a randomised one has none)."""
        check_is_fitted(self, "classes_")
        logs = self._log_proba(self._prediction_features(X))
        return logs[:, 1] - logs[:, 0] if logs.shape[1] == 2 else logs

    def _log_proba(self, X) -> np.ndarray:
        """log ``predict_proba`` (a method with a more exact route, e.g. from logits, overrides it)."""
        return np.log(np.clip(self._predict_proba(X), np.finfo(np.float64).tiny, None))

    def score(self, X, y, sensitive_features=None, sample_weight=None) -> float:
        """Accuracy of ``predict`` on ``(X, y)``; a method that reads the group at prediction time
        (``predict(X, sensitive_features=s)``) takes it here too, as ``cross_validate`` routes it."""
        from sklearn.metrics import accuracy_score

        from dpfair.fairness.scorers import predict_with_groups

        return float(accuracy_score(y, predict_with_groups(self, X, sensitive_features), sample_weight=sample_weight))
