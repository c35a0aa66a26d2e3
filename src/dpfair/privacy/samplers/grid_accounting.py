r"""What a secure release costs: the sensitivity after rounding to the grid, the accounting, the calibration.

Contract: rounding both neighbours to the grid ``gℤ`` moves each coordinate by at most ``g/2``, so the sensitivity
becomes ``Δ₂' = Δ₂ + g·√k`` (``Δ₁' = Δ₁ + g·k``) for ``k`` coordinates that can differ (:func:`grid_sensitivity`).
Then (the guide's :ref:`secure-noise-accounting`): the discrete Laplace of scale ``b`` is exactly ``ε = Δ₁'/b`` pure
DP (record it as a pure-ε event, not as a continuous ``LaplaceDpEvent``); the discrete Gaussian is exactly
``ρ = Δ₂'²/(2σ²)``-zCDP (Canonne, Kamath & Steinke 2020, §2); for a continuous-Gaussian accountant record the
multiplier ``σ'/Δ₂'`` with ``σ' = √(σ² − τ²g²)``, ``τ = 8`` (:data:`ACCOUNTING_TAU`), plus a slack that underflows
to 0.0 (:func:`secure_gaussian_accounting`). :func:`calibrate_secure_gaussian` / :func:`calibrate_secure_laplace`
pick the scale whose accounted multiplier reaches a planned one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpfair.privacy.samplers.discrete import check_positive, check_pow2, default_granularity, resolve_granularity

__all__ = [
    "ACCOUNTING_TAU",
    "SecureGaussianAccounting",
    "SecureLaplaceAccounting",
    "calibrate_secure_gaussian",
    "calibrate_secure_laplace",
    "grid_sensitivity",
    "secure_gaussian_accounting",
    "secure_laplace_accounting",
]

#: Smoothing width (grid steps) in the continuous-Gaussian accounting argument (the guide's
#: :ref:`secure-noise-accounting`).
ACCOUNTING_TAU = 8.0

# Most coordinates a release may count (``dim``).
_MAX_DIM = 2**62


def _up(x: float, steps: int = 2) -> float:
    for _ in range(steps):
        x = math.nextafter(x, math.inf)
    return x


def _down(x: float, steps: int = 2) -> float:
    for _ in range(steps):
        x = math.nextafter(x, -math.inf)
    return x


def _check_dim(dim) -> int:
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or not 1 <= dim <= _MAX_DIM:
        raise ValueError(f"dim (the number of coordinates that can differ) must be a positive int, got {dim!r}")
    return int(dim)


def grid_sensitivity(sensitivity: float, granularity: float, dim: int, norm: int = 2) -> float:
    """Sensitivity after rounding to the grid: ``Δ₂ + g·√dim`` (``norm=2``) or ``Δ₁ + g·dim`` (``norm=1``).

    Rounded up. ``dim``: the number of coordinates in which the sums of two neighbouring data sets can differ.
    Each neighbour moves by up to ``g/2`` per coordinate, so a coordinate difference grows by
    less than ``g``; Minkowski's inequality gives the bound.
    """
    delta = float(sensitivity)
    if not math.isfinite(delta) or delta < 0:
        raise ValueError(f"sensitivity must be a non-negative finite number, got {sensitivity!r}")
    g = check_pow2(granularity)
    k = _check_dim(dim)
    if norm == 2:
        return _up(delta + _up(g * _up(math.sqrt(k))))
    if norm == 1:
        return _up(delta + _up(g * float(k)))
    raise ValueError(f"norm must be 1 or 2, got {norm!r}")


@dataclass(frozen=True)
class SecureGaussianAccounting:
    """What a secure Gaussian release with ``std`` on grid ``granularity`` costs (the guide's
    :ref:`secure-noise-accounting`).

    ``sensitivity``: ``Δ₂' = Δ₂ + g√k``. ``zcdp_rho``: ``Δ₂'²/(2·std²)``, exact (CKS20).
    ``accounting_std``: ``σ' = √(std² − τ²g²)`` and ``noise_multiplier = σ'/Δ₂'``: record this
    multiplier with any continuous-Gaussian accountant (``GaussianDpEvent``, Poisson-sampled or not).
    ``log_ratio_slack``: ``η = 3k·ε_τ`` per release; over ``T`` releases add ``2Tη`` to ε and
    multiply δ by ``e^{Tη}`` (it underflows to 0.0 for τ = 8).
    """

    std: float
    granularity: float
    sensitivity: float
    accounting_std: float
    noise_multiplier: float
    zcdp_rho: float
    log_ratio_slack: float


@dataclass(frozen=True)
class SecureLaplaceAccounting:
    """What a secure Laplace release with ``scale`` on grid ``g`` costs: exactly ``ε = Δ₁'/scale`` pure DP.

    ``sensitivity``: ``Δ₁' = Δ₁ + g·k``; ``noise_multiplier = scale/Δ₁' = 1/ε``. Record it as a
    pure-ε event (``pure_dp_event(epsilon)``), not as a continuous ``LaplaceDpEvent``.
    """

    scale: float
    granularity: float
    sensitivity: float
    epsilon: float
    noise_multiplier: float


def _smoothing_error(tau: float) -> float:
    """``ε_τ = 2 Σ_{m≥1} exp(−2π²τ²m²)`` (float; underflows to 0.0 for τ ≳ 6)."""
    return 2.0 * sum(math.exp(-2.0 * math.pi**2 * tau * tau * m * m) for m in range(1, 4))


def secure_gaussian_accounting(std: float, sensitivity: float, dim: int, *,
                               granularity: float | None = None) -> SecureGaussianAccounting:
    """The accounting parameters of :func:`~dpfair.privacy.samplers.add_secure_gaussian` with ``std`` (the guide's
    :ref:`secure-noise-accounting`)."""
    std = check_positive(std, "std")
    g = resolve_granularity(granularity, std, "std")
    k = _check_dim(dim)
    delta = grid_sensitivity(sensitivity, g, k, norm=2)
    if delta <= 0:
        raise ValueError("sensitivity and dim give a zero sensitivity")
    steps = std / g
    if steps < 4.0:
        raise ValueError(f"std/granularity = {steps:g} < 4 grid steps: too coarse for the continuous-Gaussian "
                         f"accounting argument (use the default granularity)")
    tau = min(ACCOUNTING_TAU, steps / 2.0)
    acc_std = _down(g * math.sqrt(max(steps * steps - tau * tau, 0.0)))
    eta = 3.0 * k * _smoothing_error(tau)
    return SecureGaussianAccounting(
        std=std, granularity=g, sensitivity=delta, accounting_std=acc_std,
        noise_multiplier=_down(acc_std / delta), zcdp_rho=_up(delta * delta / (2.0 * std * std)),
        log_ratio_slack=_up(eta) if eta > 0 else 0.0)


def secure_laplace_accounting(scale: float, sensitivity: float, dim: int, *,
                              granularity: float | None = None) -> SecureLaplaceAccounting:
    """The accounting parameters of :func:`~dpfair.privacy.samplers.add_secure_laplace` with ``scale``:
    ``ε = (Δ₁ + g·k)/scale`` exactly."""
    scale = check_positive(scale, "scale")
    g = resolve_granularity(granularity, scale, "scale")
    delta = grid_sensitivity(sensitivity, g, dim, norm=1)
    if delta <= 0:
        raise ValueError("sensitivity and dim give a zero sensitivity")
    return SecureLaplaceAccounting(scale=scale, granularity=g, sensitivity=delta,
                                   epsilon=_up(delta / scale), noise_multiplier=_down(scale / delta))


def _calibrate_on_grid(noise_multiplier, sensitivity, dim, granularity, first_guess, account):
    """The smallest convenient scale on a settled grid whose ``account(scale, g)`` reaches ``noise_multiplier``.

    ``first_guess(z, Δ, k, g)`` starts the search on grid ``g``; the scale is raised by ulps until the
    accounted multiplier is at least ``z``; without a given ``granularity`` the grid follows the scale
    (:func:`default_granularity`) until it no longer moves.
    """
    z = check_positive(noise_multiplier, "noise_multiplier")
    base = check_positive(sensitivity, "sensitivity")
    k = _check_dim(dim)
    g = check_pow2(granularity) if granularity is not None else default_granularity(z * base)
    for _ in range(8):
        scale = first_guess(z, base, k, g)
        result = account(scale, base, k, granularity=g)
        while result.noise_multiplier < z:
            scale = _up(scale, 4)
            result = account(scale, base, k, granularity=g)
        if granularity is not None or default_granularity(scale) == g:
            return result
        g = default_granularity(scale)
    return result  # pragma: no cover - the grid settles after one doubling


def calibrate_secure_gaussian(noise_multiplier: float, sensitivity: float, dim: int, *,
                              granularity: float | None = None) -> SecureGaussianAccounting:
    """The smallest convenient ``std`` whose secure release is accounted with at least ``noise_multiplier``.

    Use ``result.std`` (and ``result.granularity``) for :func:`~dpfair.privacy.samplers.add_secure_gaussian` and
    keep recording the planned ``noise_multiplier`` (``result.noise_multiplier ≥`` it): ``std ≈ z·(Δ₂ + g√k)``.
    """
    def first_guess(z, base, k, g):
        return _up(math.sqrt((z * grid_sensitivity(base, g, k, norm=2)) ** 2 + (ACCOUNTING_TAU * g) ** 2), 4)

    return _calibrate_on_grid(noise_multiplier, sensitivity, dim, granularity, first_guess,
                              secure_gaussian_accounting)


def calibrate_secure_laplace(noise_multiplier: float, sensitivity: float, dim: int, *,
                             granularity: float | None = None) -> SecureLaplaceAccounting:
    """The ``scale`` whose secure Laplace release is ``ε = 1/noise_multiplier`` pure DP or better.

    ``scale ≈ z·(Δ₁ + g·k)``; use ``result.scale`` and ``result.granularity`` with
    :func:`~dpfair.privacy.samplers.add_secure_laplace`.
    """
    def first_guess(z, base, k, g):
        return _up(z * grid_sensitivity(base, g, k, norm=1), 4)

    return _calibrate_on_grid(noise_multiplier, sensitivity, dim, granularity, first_guess,
                              secure_laplace_accounting)
