"""Fairness certificates (Mangold, Perrot, Bellet, Tommasi, ICML 2023): how much privacy can cost fairness.

* :mod:`~dpfair.bounds.margins`: confidence margins ρ and per-example Lipschitz constants L_{x,y};
* :mod:`~dpfair.bounds.concentration`: Theorem 3.1's Markov bound, Remark B.1's Chernoff bound,
  Remark B.2's truncation;
* :mod:`~dpfair.bounds.fairness_lipschitz`: χ_k of every notion (Theorem 3.2, Corollary 3.3) and the
  resulting bounds on the fairness gap;
* :mod:`~dpfair.bounds.distance`: ‖h_priv − h*‖ for output perturbation (Lemma 4.1) and DP-SGD (Lemma 4.2);
* :mod:`~dpfair.bounds.finite_sample`: Lemma 3.4's term from the evaluation sample to the population;
* :mod:`~dpfair.bounds.refined`: App. G.3's constant L^{h−h'} when both models are known;
* :mod:`~dpfair.bounds.certificate`: Theorem 4.4 for a fitted estimator (``certify``).
"""

from dpfair.bounds.certificate import Certificate, certify, certify_margins, empirical_gaps
from dpfair.bounds.concentration import chernoff_bound, flip_probability, markov_bound
from dpfair.bounds.distance import dpsgd_radius, output_perturbation_radius, paper_noise_std
from dpfair.bounds.fairness_lipschitz import (
    ACCURACY,
    CERTIFIED_NOTIONS,
    FairnessGapBound,
    fairness_gap_bound,
    fairness_levels,
    notion_coefficients,
    pointwise_lipschitz,
)
from dpfair.bounds.finite_sample import finite_sample_term
from dpfair.bounds.margins import (
    confidence_margins,
    linear_lipschitz,
    module_lipschitz,
    module_scores,
    normalized_margins,
)
from dpfair.bounds.refined import refined_lipschitz

__all__ = [
    "ACCURACY", "CERTIFIED_NOTIONS", "Certificate", "FairnessGapBound", "certify", "certify_margins",
    "chernoff_bound", "confidence_margins", "dpsgd_radius", "empirical_gaps", "fairness_gap_bound", "fairness_levels",
    "finite_sample_term", "flip_probability", "linear_lipschitz", "markov_bound", "module_lipschitz",
    "module_scores", "normalized_margins", "notion_coefficients", "output_perturbation_radius", "paper_noise_std",
    "pointwise_lipschitz", "refined_lipschitz",
]
