"""The law of a private search's number of runs K and the event its accountant is given.

K is drawn from the secret generator (:class:`~dpfair.privacy.SecretRandom`, never a seed anyone knows), from a
truncated negative binomial of shape η and mean μ (Papernot & Steinke 2022, "Hyperparameter tuning with Renyi
differential privacy"; η = 1, the geometric law, is Liu & Talwar's random stopping) or a Poisson law (η = ∞).
The search records dp_accounting's ``RepeatAndSelectDpEvent(run, μ, η)`` (:meth:`Repetitions.event`), whose Rényi
DP is Papernot & Steinke's Theorem 2 (η < ∞) or 6 (Poisson). Its conditions hold by construction: K is drawn
independently of the data from the law the accountant is given, its mean computed from the sampling law's γ
(:meth:`Repetitions.of`), which the accountant's inversion can only lower, and the bound only grows as γ falls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import dp_accounting as dpa
import numpy as np
from dp_accounting import dp_event
from scipy import optimize, stats

from dpfair.privacy import SecretRandom
from dpfair.utils.validation import check_positive

__all__ = ["REPETITIONS", "Repetitions"]

#: ``repetitions`` by name: the shape η of the truncated negative binomial number of runs.
REPETITIONS = {"logarithmic": 0.0, "geometric": 1.0, "poisson": math.inf}


@dataclass(frozen=True)
class Repetitions:
    """The law of the number of runs K: truncated negative binomial of shape η (K ≥ 1) or Poisson (η = ∞).

    P(K = k) ∝ C(k + η − 1, k)·(1 − γ)^k for k ≥ 1 (η = 0: the logarithmic law (1 − γ)^k / k; η = 1:
    geometric), γ solving E[K] = ``mean``; Poisson: mean ``mean``, and K = 0 (no run) possible.
    """

    shape: float
    mean: float

    def __post_init__(self):
        if not self.shape >= 0 or math.isnan(self.shape):
            raise ValueError(f"the shape of the number of runs must be >= 0 (or inf: Poisson), got {self.shape}")
        if not self.mean >= 1 or not math.isfinite(self.mean):
            raise ValueError(f"the mean number of runs must be a finite number >= 1, got {self.mean}")

    @classmethod
    def of(cls, repetitions, mean: float) -> Repetitions:
        """From a name in :data:`REPETITIONS` or a shape η ≥ 0, with the exact mean of the law that is sampled."""
        if isinstance(repetitions, str) and repetitions not in REPETITIONS:
            raise ValueError(f"repetitions must be one of {', '.join(REPETITIONS)} or a shape >= 0, got "
                             f"{repetitions!r}")
        shape = REPETITIONS[repetitions] if isinstance(repetitions, str) else repetitions
        shape = check_positive(shape, "repetitions (a shape)", allow_zero=True)
        law = cls(shape, check_positive(mean, "mean_runs"))
        return law if math.isinf(law.shape) else cls(law.shape, law._mean_of(law.gamma))

    def _mean_of(self, gamma: float) -> float:
        if gamma >= 1.0:
            return 1.0
        if self.shape == 0.0:
            return (1.0 - gamma) / (gamma * -math.log(gamma))
        return self.shape * (1.0 - gamma) / (gamma * -math.expm1(self.shape * math.log(gamma)))

    @property
    def gamma(self) -> float:
        """γ of the truncated negative binomial whose mean is ``mean`` (``nan`` for Poisson)."""
        if math.isinf(self.shape):
            return math.nan
        if self.shape == 1.0:
            return 1.0 / self.mean
        if self.mean == 1.0:
            return 1.0
        return optimize.brentq(lambda g: self._mean_of(g) - self.mean, 1e-300, 1.0 - 1e-15, xtol=1e-300,
                               rtol=4 * np.finfo(float).eps)

    def draw(self, secret: SecretRandom) -> int:
        """K, by inversion of one secret uniform (the probabilities by their recurrence
        P(k + 1) = P(k)·(1 − γ)(k + η)/(k + 1) from P(1) = (1 − γ)·η/(γ^−η − 1), or (1 − γ)/ln(1/γ) for η = 0)."""
        u = float(secret.random(1)[0])
        if math.isinf(self.shape):
            return int(stats.poisson.ppf(u, self.mean))
        gamma, eta = self.gamma, self.shape
        if gamma >= 1.0:
            return 1
        p = (1.0 - gamma) * (eta / math.expm1(-eta * math.log(gamma)) if eta > 0 else 1.0 / -math.log(gamma))
        k, cdf = 1, p
        while cdf < u and p > 0.0:
            p *= (1.0 - gamma) * (k + eta) / (k + 1)
            k, cdf = k + 1, cdf + p
        return k

    def event(self, run: dpa.DpEvent) -> dpa.DpEvent:
        """The best of K runs of ``run``: dp_accounting's ``RepeatAndSelectDpEvent``."""
        return dp_event.RepeatAndSelectDpEvent(run, self.mean, self.shape)

    def describe(self) -> dict:
        name = next((k for k, v in REPETITIONS.items() if v == self.shape), "truncated negative binomial")
        return {"distribution": name, "shape": self.shape, "mean": self.mean}
