"""Empirical privacy audits: attacks against trained models.

These are evaluations, not guarantees: an attack that fails proves nothing about privacy; the ε printed
by training is the guarantee.

* :mod:`~dpfair.audit.membership`: membership inference (loss threshold, Shokri et al.'s shadow models,
  LiRA online and offline) in Carlini et al.'s set-up, :func:`membership_inference`;
* :mod:`~dpfair.audit.metrics`: ROC AUC, advantage max|TPR − FPR|, TPR at a low FPR, with bootstrap and
  Clopper–Pearson intervals, for any attack's scores;
* :mod:`~dpfair.audit.games` and :mod:`~dpfair.audit.epsilon`: lower bounds on ε from distinguishing games,
  of a whole method (:func:`audit_epsilon`, :func:`audit_one_run`), of one noise primitive
  (:func:`audit_release`) or of the private measurement (:func:`audit_measurement`), proved by
  :func:`epsilon_lower_bound`.
"""

from dpfair.audit.epsilon import LowerBound, epsilon_lower_bound
from dpfair.audit.games import AuditReport, audit_epsilon, audit_measurement, audit_one_run, audit_release
from dpfair.audit.membership import ATTACKS, NOTE, MembershipReport, membership_inference
from dpfair.audit.metrics import attack_metrics, bootstrap_roc_metrics, clopper_pearson, roc_metrics

__all__ = [
    "ATTACKS",
    "NOTE",
    "AuditReport",
    "LowerBound",
    "MembershipReport",
    "attack_metrics",
    "audit_epsilon",
    "audit_measurement",
    "audit_one_run",
    "audit_release",
    "bootstrap_roc_metrics",
    "clopper_pearson",
    "epsilon_lower_bound",
    "membership_inference",
    "roc_metrics",
]
