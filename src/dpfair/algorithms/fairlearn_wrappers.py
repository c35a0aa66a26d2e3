"""Non-private references: fairlearn's reductions and threshold post-processing behind dpfair's API.

``ReductionsClassifier`` wraps fairlearn's ``ExponentiatedGradient`` (Agarwal,
Beygelzimer, Dudík, Langford, Wallach, *A Reductions Approach to Fair
Classification*, ICML 2018, Algorithm 1): the fair problem
``min_Q err(Q) s.t. |γ_j(Q)| ≤ difference_bound`` over randomized classifiers
Q is solved as a game between a learner that best-responds with a
cost-sensitive fit of the base estimator (sample weights from the Lagrange
multipliers) and an auditor that updates the multipliers λ (‖λ‖₁ ≤ 1/eg_eps) by
exponentiated gradient; Q is the mixture of the best responses. The
constraints γ compare a rate on each group with the same rate on everyone
(demographic parity: P(h=1 | s=a) − P(h=1); equalized odds and equal
opportunity: the same within each label, resp. y = 1; accuracy parity: the
error rate). This is "model A" of the PF-LD paper.

``ThresholdClassifier`` wraps fairlearn's ``ThresholdOptimizer`` (Hardt,
Price, Srebro, *Equality of Opportunity in Supervised Learning*, NeurIPS
2016): the base estimator's scores are thresholded per group, with
randomisation between two thresholds, to maximise accuracy under the
constraint. It uses s at prediction time.

Both are randomized classifiers: ``predict_proba`` gives their probability of
predicting the second class and ``predict`` draws the prediction from it with
a ``numpy.random.RandomState`` seeded from ``random_state`` (exactly as
fairlearn's ``predict(X, random_state=seed)`` does, so the same seed gives the
same predictions on every call). Labels must be binary.

Privacy: none. The ledger holds one ``NonPrivateDpEvent`` and
``privacy_spent_ = (inf, 0)``.
"""

from __future__ import annotations

from typing import ClassVar

import dp_accounting as dpa
import numpy as np
from fairlearn.postprocessing import ThresholdOptimizer
from fairlearn.reductions import (
    DemographicParity,
    EqualizedOdds,
    ErrorRateParity,
    ExponentiatedGradient,
    FalsePositiveRateParity,
    TruePositiveRateParity,
)
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted, has_fit_parameter

from dpfair.utils.upstream import pmf_predict
from dpfair.algorithms.base import FairEstimator
from dpfair.utils.constraints import Bools, HasMethods, Interval, Options
from dpfair.utils.validation import encode_categories

#: dpfair notion → fairlearn moment of ExponentiatedGradient.
REDUCTION_MOMENTS = {
    "demographic_parity": DemographicParity,
    "equalized_odds": EqualizedOdds,
    "equal_opportunity": TruePositiveRateParity,
    "accuracy_parity": ErrorRateParity,
    "predictive_equality": FalsePositiveRateParity,
}

#: dpfair notion → fairlearn ThresholdOptimizer constraint (it has no accuracy parity).
THRESHOLD_CONSTRAINTS = {
    "demographic_parity": "demographic_parity",
    "equalized_odds": "equalized_odds",
    "equal_opportunity": "true_positive_rate_parity",
    "predictive_equality": "false_positive_rate_parity",
}


#: the objectives ThresholdOptimizer maximises (equalized odds: the two accuracies only; fairlearn refuses the rest)
THRESHOLD_OBJECTIVES = ("accuracy_score", "balanced_accuracy_score", "selection_rate", "true_positive_rate",
                        "true_negative_rate")


def default_estimator() -> LogisticRegression:
    """The base learner when none is given: L2-regularised logistic regression (lbfgs, deterministic)."""
    return LogisticRegression(max_iter=1000)


def seeded_estimator(estimator, seed: int):
    """A fresh clone of ``estimator`` (default: logistic regression) whose unset ``random_state`` is ``seed``."""
    est = default_estimator() if estimator is None else clone(estimator)
    params = est.get_params(deep=False)
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=seed)
    return est


def randomized_labels(proba: np.ndarray, seed: int, classes: np.ndarray) -> np.ndarray:
    """Draw ŷ = classes[1] with probability ``proba[:, 1]`` as fairlearn's ``predict(random_state=seed)``."""
    draws = np.random.RandomState(seed).rand(len(proba))
    return classes[(proba[:, 1] >= draws).astype(np.int64)]



def _float64(X) -> np.ndarray:
    """``X`` in float64 (a float32 feature store's rows copied): fairlearn writes its scores into float64 frames."""
    return np.asarray(X, dtype=np.float64)

class ReductionsClassifier(FairEstimator):
    """Agarwal et al.'s exponentiated-gradient reductions (fairlearn's ``ExponentiatedGradient``); not private.

    Parameters
    ----------
    estimator : a scikit-learn classifier whose ``fit`` takes ``sample_weight`` (default: logistic regression).
    notion : "demographic_parity", "equalized_odds", "equal_opportunity", "accuracy_parity" or
        "predictive_equality".
    difference_bound : the slack of each constraint, ``|γ_j(Q)| ≤ difference_bound``.
    eg_eps : fairlearn's ``eps`` of ``ExponentiatedGradient`` (multipliers bounded by ``1/eg_eps`` in L1);
        not a privacy parameter.
    max_iter, nu, eta0, run_linprog_step : passed to ``ExponentiatedGradient`` unchanged (``n_iter_``: the
        rounds it ran).
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``), as every dpfair
        estimator takes them; ``None`` infers them from the data (not private here: no warning).
    random_state : seeds the base estimator (when its ``random_state`` is unset) and ``predict``'s draws.
    verbose : a progress bar on stderr (:mod:`dpfair.utils.progress`).
    """

    _requires_sensitive = True
    _binary_only = True
    _notions = tuple(REDUCTION_MOMENTS)
    _sample_weight_refusal = ("fairlearn's exponentiated gradient weights the rows itself (by its Lagrange "
                              "multipliers) and takes no row weights; fit without sample_weight")
    _fairness_strength = "difference_bound"
    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "estimator": [HasMethods("fit", "predict", what="a classifier with fit and predict"), None],
        "notion": [Options(*REDUCTION_MOMENTS)],
        "difference_bound": [Interval(float, 0, None, closed="left")],
        "eg_eps": [Interval(float, 0, None, closed="neither")],
        "max_iter": [Interval(int, 0, None, closed="neither")],
        "nu": [None, Interval(float, 0, None, closed="neither")],
        "eta0": [Interval(float, 0, None, closed="neither")],
        "run_linprog_step": [Bools()],
    }

    def __init__(self, estimator=None, *, notion="demographic_parity", difference_bound=0.01, eg_eps=0.01,
                 max_iter=50, nu=None, eta0=2.0, run_linprog_step=True, groups=None, classes=None, random_state=None,
                 verbose=False):
        self.estimator = estimator
        self.notion = notion
        self.difference_bound = difference_bound
        self.eg_eps = eg_eps
        self.max_iter = max_iter
        self.nu = nu
        self.eta0 = eta0
        self.run_linprog_step = run_linprog_step
        self.groups = groups
        self.classes = classes
        self.random_state = random_state
        self.verbose = verbose

    def check_hyperparameters(self) -> ReductionsClassifier:
        """The declared constraints (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), then
        a base estimator whose ``fit`` takes the reductions' row weights."""
        super().check_hyperparameters()
        if self.estimator is not None and not has_fit_parameter(self.estimator, "sample_weight"):
            raise ValueError(f"estimator {type(self.estimator).__name__} does not accept sample_weight in fit, "
                             "which the reductions need; use e.g. sklearn's LogisticRegression")
        return self

    def _fit_reductions(self, X, y, sensitive, moment, rng: np.random.Generator) -> None:
        """Run exponentiated gradient with ``moment`` on ``sensitive``; seeds from ``rng`` (the fit's public
        generator)."""
        estimator_seed, self.prediction_seed_ = (int(v) for v in rng.integers(2**31, size=2))
        self.mitigator_ = ExponentiatedGradient(
            seeded_estimator(self.estimator, estimator_seed), moment, eps=self.eg_eps, max_iter=self.max_iter,
            nu=self.nu, eta0=self.eta0, run_linprog_step=self.run_linprog_step,
        ).fit(_float64(X), y, sensitive_features=sensitive)
        self.n_iter_ = int(self.mitigator_.last_iter_) + 1
        self.history_.append({"iterations": self.n_iter_, "best_gap": float(self.mitigator_.best_gap_),
                              "oracle_calls": int(self.mitigator_.n_oracle_calls_)})

    def _fit(self, ctx, X, y, s):
        self._fit_reductions(X, y, s, REDUCTION_MOMENTS[self.notion](difference_bound=self.difference_bound),
                             ctx.np_rng)
        self.privacy_ledger_.record(dpa.NonPrivateDpEvent(), "non-private reductions")
        self._finish_privacy()

    def _predict_proba(self, X) -> np.ndarray:
        return np.asarray(pmf_predict(self.mitigator_, _float64(X)), dtype=np.float64)

    def predict(self, X) -> np.ndarray:
        """Randomized predictions of the mixture Q, seeded by ``random_state`` (fairlearn's draw)."""
        return randomized_labels(self.predict_proba(X), self.prediction_seed_, self.classes_)


class ThresholdClassifier(FairEstimator):
    """Hardt et al.'s group-wise threshold post-processing (fairlearn's ``ThresholdOptimizer``); not private.

    Uses s at prediction: ``predict(X, sensitive_features=s)``.

    Parameters
    ----------
    estimator : a scikit-learn classifier with ``predict_proba`` or ``decision_function``
        (default: logistic regression); fitted on the data unless ``prefit=True``.
    notion : "demographic_parity", "equalized_odds", "equal_opportunity" or "predictive_equality".
    objective, grid_size, flip, prefit, predict_method : passed to ``ThresholdOptimizer`` unchanged.
    groups, classes : the public lists of group and label values (an int k: ``0..k-1``), as every dpfair
        estimator takes them; ``None`` infers them from the data (not private here: no warning).
    random_state : seeds the base estimator (when its ``random_state`` is unset) and ``predict``'s draws.
    verbose : a progress bar on stderr (:mod:`dpfair.utils.progress`).
    """

    _requires_sensitive = True
    _binary_only = True
    _notions = tuple(THRESHOLD_CONSTRAINTS)
    _predict_needs_sensitive = True
    _sample_weight_refusal = ("fairlearn's ThresholdOptimizer chooses its thresholds on unweighted rows; fit "
                              "without sample_weight")
    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "estimator": [HasMethods("fit", "predict", what="a classifier with fit and predict"), None],
        "notion": [Options(*THRESHOLD_CONSTRAINTS, note="ThresholdOptimizer offers no accuracy_parity: "
                                                        "ReductionsClassifier does")],
        "objective": [Options(*THRESHOLD_OBJECTIVES)],
        "grid_size": [Interval(int, 0, None, closed="neither")],
        "flip": [Bools()],
        "prefit": [Bools()],
        "predict_method": [Options("auto", "predict_proba", "decision_function", "predict")],
    }

    def __init__(self, estimator=None, *, notion="demographic_parity", objective="accuracy_score", grid_size=1000,
                 flip=False, prefit=False, predict_method="auto", groups=None, classes=None, random_state=None,
                 verbose=False):
        self.estimator = estimator
        self.notion = notion
        self.objective = objective
        self.grid_size = grid_size
        self.flip = flip
        self.prefit = prefit
        self.predict_method = predict_method
        self.groups = groups
        self.classes = classes
        self.random_state = random_state
        self.verbose = verbose

    def _base(self, seed: int):
        if self.prefit:
            if self.estimator is None:
                raise ValueError("prefit=True needs a fitted estimator; pass estimator=... or use prefit=False")
            return self.estimator
        return seeded_estimator(self.estimator, seed)

    def _fit(self, ctx, X, y, s):
        estimator_seed, self.prediction_seed_ = (int(v) for v in ctx.np_rng.integers(2**31, size=2))
        base = self._base(estimator_seed)
        if self.predict_method == "auto" and not any(hasattr(base, m) for m in ("predict_proba",
                                                                                "decision_function")):
            raise ValueError(f"estimator {type(base).__name__} has neither predict_proba nor decision_function; "
                             "thresholds need scores: use a probabilistic classifier or predict_method='predict'")
        self.postprocessor_ = ThresholdOptimizer(
            estimator=base, constraints=THRESHOLD_CONSTRAINTS[self.notion], objective=self.objective,
            grid_size=self.grid_size, flip=self.flip, prefit=self.prefit, predict_method=self.predict_method,
        ).fit(_float64(X), y, sensitive_features=s)
        self.privacy_ledger_.record(dpa.NonPrivateDpEvent(), "non-private threshold post-processing")
        self._finish_privacy()

    def _check_predict_inputs(self, X, sensitive_features):
        check_is_fitted(self, "postprocessor_")
        X, sensitive_features = self._prediction_groups(X, sensitive_features)
        X = self._prediction_features(X)
        if sensitive_features is None:
            raise ValueError(f"{type(self).__name__} uses the sensitive attribute at prediction: "
                             "call predict(X, sensitive_features=s)")
        codes, _ = encode_categories(sensitive_features, "sensitive_features", len(X), classes=self.groups_)
        return X, codes

    def predict_proba(self, X, sensitive_features=None) -> np.ndarray:
        """Probabilities of the randomized post-processed classifier (columns follow ``classes_``)."""
        X, codes = self._check_predict_inputs(X, sensitive_features)
        return np.asarray(pmf_predict(self.postprocessor_, _float64(X), sensitive_features=codes), dtype=np.float64)

    def predict(self, X, sensitive_features=None) -> np.ndarray:
        """Randomized predictions, seeded by ``random_state`` (fairlearn's draw)."""
        return randomized_labels(self.predict_proba(X, sensitive_features), self.prediction_seed_, self.classes_)
