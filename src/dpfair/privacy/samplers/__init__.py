r"""Secure noise: exact discrete samplers on a power-of-two grid, from OS-seeded cryptographic randomness.

What it promises
----------------
``secure_mode=True`` draws from here. The textbook samplers release ``x + Z`` with ``Z`` a float made from a
uniform double; the set of floats ``Z`` can take has holes and the rounding of ``x + Z`` depends on ``x``, so one
output's low bits can tell ``x`` from a neighbouring ``x'`` whatever ε was recorded (Mironov 2012; Jin, McMurtry,
Rubinstein & Ohrimenko 2022). This package takes OpenDP's route: every output is an exact multiple of a
power-of-two granularity ``g``, drawn from exactly the discrete law the proofs are about (the discrete Laplace, and
the discrete Gaussian of Canonne, Kamath & Steinke 2020, Algorithm 3), from fresh OS coins, so the released float is
a function of the exact mechanism output and the guarantee is a theorem, not a work factor.

The privacy argument in short: release ``round(x/g)·g + g·Y`` in float64 (:func:`add_secure_gaussian`,
:func:`add_secure_laplace`); charge the rounding to the sensitivity, ``Δ₂' = Δ₂ + g·√k`` or ``Δ₁' = Δ₁ + g·k``
(:func:`grid_sensitivity`); account the discrete Laplace as exactly ``ε = Δ₁'/b`` pure DP, the discrete Gaussian as
exactly ``ρ = Δ₂'²/(2σ²)``-zCDP, or with a continuous-Gaussian accountant at ``σ' = √(σ² − τ²g²)``
(:func:`secure_gaussian_accounting`). The samplers are not constant-time. The derivations (the exact Bernoulli,
the discrete laws, the proof of the continuous-Gaussian accounting) are in the guide: :ref:`secure-noise`. Cost:
``benchmarks/secure_noise.py`` (results under ``results/secure_noise/``).

The modules: :mod:`~dpfair.privacy.samplers.exact` (coins, exact uniforms, the exact Bernoulli(e^{−r})),
:mod:`~dpfair.privacy.samplers.discrete` (the discrete laws, grid noise, the release),
:mod:`~dpfair.privacy.samplers.grid_accounting` (sensitivity on the grid, accounting, calibration),
:mod:`~dpfair.privacy.samplers.categorical` (exact randomized response and exponential mechanism).
"""

from dpfair.privacy.samplers.categorical import secure_exponential_mechanism, secure_randomized_response
from dpfair.privacy.samplers.discrete import (
    GRID_BITS,
    add_secure_gaussian,
    add_secure_laplace,
    default_granularity,
    round_to_grid,
    secure_discrete_gaussian,
    secure_discrete_laplace,
    secure_gaussian,
    secure_laplace,
)
from dpfair.privacy.samplers.exact import COIN_SOURCE, random_bytes, secure_integers, secure_uniform
from dpfair.privacy.samplers.grid_accounting import (
    ACCOUNTING_TAU,
    SecureGaussianAccounting,
    SecureLaplaceAccounting,
    calibrate_secure_gaussian,
    calibrate_secure_laplace,
    grid_sensitivity,
    secure_gaussian_accounting,
    secure_laplace_accounting,
)

__all__ = [
    "COIN_SOURCE",
    "random_bytes",
    "GRID_BITS",
    "SecureGaussianAccounting",
    "SecureLaplaceAccounting",
    "add_secure_gaussian",
    "add_secure_laplace",
    "calibrate_secure_gaussian",
    "calibrate_secure_laplace",
    "default_granularity",
    "grid_sensitivity",
    "round_to_grid",
    "secure_discrete_gaussian",
    "secure_discrete_laplace",
    "secure_exponential_mechanism",
    "secure_gaussian",
    "secure_gaussian_accounting",
    "secure_integers",
    "secure_laplace",
    "secure_laplace_accounting",
    "secure_randomized_response",
    "secure_uniform",
]
