"""Fairness notions, violations, ERMI and inequality indices: pure metrics, which import no privacy module (the
private measurement of them is :mod:`dpfair.measurement`).

* :mod:`~dpfair.fairness.notions`: the notion objects (:class:`Notion`: reference cells, rate,
  partition into constraint groups, violation), registered by name (:func:`get_notion`);
* :mod:`~dpfair.fairness.group_fairness`: group fairness as affine maps of
  subgroup accuracies (Mangold et al., 2023);
* :mod:`~dpfair.fairness.metrics`: violations, rate tables, report and summary;
* :mod:`~dpfair.fairness.ermi`: exponential Rényi mutual information;
* :mod:`~dpfair.fairness.inequality`: Atkinson, Gini, generalised entropy, and per-group accuracy
  inequality as FairDP reports it (:func:`accuracy_inequality`);
* :mod:`~dpfair.fairness.bias_variance`: FairDP's Theorem 1, the clipping bias and noise variance
  of a DP-SGD step;
* :mod:`~dpfair.fairness.group_table`: per-group metric tables (fairlearn's ``MetricFrame``) with
  bootstrap intervals over runs or test rows (:func:`group_metrics`);
* :mod:`~dpfair.fairness.scorers`: scorers for ``GridSearchCV`` / ``cross_validate`` that receive s by
  metadata routing (:func:`error_scorer`, :func:`violation_scorer`, :func:`fairness_scorer`); imported on first
  use, so that reading results (``dpfair report``) does not load sklearn.
"""

from dpfair.fairness.bias_variance import (
    bias_variance_terms,
    clipping_bias,
    mean_excess_norm,
    noise_variance,
)
from dpfair.fairness.ermi import conditional_ermi, ermi
from dpfair.fairness.group_fairness import (
    FairnessCoefficients,
    accuracy_group_codes,
    constraint_group_accuracies,
    fairness_coefficients,
    group_fairness_values,
)
from dpfair.fairness.group_table import group_metrics
from dpfair.fairness.inequality import (
    accuracy_inequality,
    atkinson_index,
    generalized_entropy,
    gini_coefficient,
    mean_log_deviation,
    per_group_accuracy,
    theil_index,
)
from dpfair.fairness.metrics import (
    CONVENTIONS,
    accuracy_parity_violation,
    conditional_rates,
    demographic_parity_violation,
    equal_opportunity_violation,
    equalized_odds_violation,
    fairness_report,
    fairness_summary,
    selection_rates,
)
from dpfair.fairness.notions import (
    NOTIONS,
    ConstraintGroups,
    Notion,
    constraint_groups,
    get_notion,
    notion_names,
    register_notion,
)
from dpfair.utils.lazy_exports import lazy_exports

__all__ = [
    "CONVENTIONS",
    "NOTIONS",
    "ConstraintGroups",
    "FairScorer",
    "FairnessCoefficients",
    "MissingGroupsError",
    "Notion",
    "accuracy_inequality",
    "accuracy_parity_violation",
    "atkinson_index",
    "bias_variance_terms",
    "clipping_bias",
    "conditional_ermi",
    "conditional_rates",
    "constraint_group_accuracies",
    "constraint_groups",
    "demographic_parity_violation",
    "equal_opportunity_violation",
    "equalized_odds_violation",
    "ermi",
    "error_scorer",
    "accuracy_group_codes",
    "fairness_coefficients",
    "fairness_report",
    "fairness_scorer",
    "fairness_summary",
    "generalized_entropy",
    "get_notion",
    "gini_coefficient",
    "group_fairness_values",
    "group_metrics",
    "mean_excess_norm",
    "mean_log_deviation",
    "noise_variance",
    "notion_names",
    "per_group_accuracy",
    "predict_with_groups",
    "register_notion",
    "selection_rates",
    "theil_index",
    "violation_scorer",
]

#: Names imported on first use (``from dpfair.fairness import error_scorer``): the scorers import sklearn, which
#: the rest of the package (``dpfair methods``, ``dpfair report``) must not pay for.
_LAZY = {**dict.fromkeys(("FairScorer", "MissingGroupsError", "error_scorer", "fairness_scorer", "predict_with_groups",
                          "violation_scorer"), "dpfair.fairness.scorers")}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
