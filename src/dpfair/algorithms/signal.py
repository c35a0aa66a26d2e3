"""How much signal a fit's public noise leaves: floors on released counts, noise-aware tolerances, and the
warning that record-level privacy leaves too little data.

Everything here reads public quantities only (noise multipliers, bounds, n, parameter counts, and values
already released), so it is post-processing: it spends no privacy, and its branches and warnings reveal
nothing the release did not. A :class:`~dpfair.exceptions.UtilityWarning` says the settings leave too
little signal for a useful model; privacy holds as printed either way.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dpfair.exceptions import SmallGroupWarning, UtilityWarning

#: Released counts are raised to at least the larger of COUNT_FLOOR and COUNT_FLOOR_STDS noise standard deviations.
COUNT_FLOOR, COUNT_FLOOR_STDS = 1.0, 2.0

#: ``"auto"`` tolerances of noisy constraints: this many standard deviations of their estimate's noise.
TOLERANCE_STDS = 3.0

#: A tolerance above this leaves visible violations undetected: the fit warns.
VISIBLE_VIOLATION = 0.05

#: Record-level fits warn when √(p·ln(1/δ))/(n·ε) exceeds this (see :func:`warn_if_too_few_records`).
RECORD_LEVEL_LIMIT = 0.02


def floor_counts(noisy: np.ndarray, noise_std: float) -> np.ndarray:
    """Released counts raised to ``max(1, 2·noise_std)``: noise alone then cannot make a group look tiny (which
    would inflate what is divided by its size: DP-FERMI's W bound 2/√p_min, PF-LD's group means)."""
    return np.maximum(noisy, count_floor(noise_std))


def count_floor(noise_std: float) -> float:
    """The floor :func:`floor_counts` raises released counts of noise std ``noise_std`` to (public: from σ alone).
    A released count at it says only that the noisy count was at most that much."""
    return max(COUNT_FLOOR, COUNT_FLOOR_STDS * float(noise_std))


def noise_tolerance(noise: np.ndarray, describe: Callable[[tuple, float, float], str]) -> np.ndarray:
    """``TOLERANCE_STDS · noise`` for every constraint, ``noise`` the std of its estimate's public noise.

    Below that tolerance a violation cannot be told from the noise, so noise alone does not drive a
    multiplier. When the largest tolerance exceeds :data:`VISIBLE_VIOLATION` the fit warns with
    ``describe(index, tolerance, noise)`` of that constraint (its cause and fix).
    """
    tolerance = TOLERANCE_STDS * noise
    worst = np.unravel_index(int(np.argmax(tolerance)), tolerance.shape)
    if tolerance[worst] > VISIBLE_VIOLATION:
        warnings.warn(describe(worst, float(tolerance[worst]), float(noise[worst])), UtilityWarning, stacklevel=5)
    return tolerance


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by this function's caller that names the first frame
    outside dpfair: the user's line, however many of dpfair's frames (a subclass's ``fit``) lie between."""
    package = str(Path(__file__).resolve().parents[1])
    frame, level = inspect.currentframe().f_back, 1  # the caller's frame: level 1
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        frame, level = frame.f_back, level + 1
    return level


def record_level_ratio(n: int, n_params: int, epsilon: float, delta: float) -> float:
    """``√(p·ln(1/δ))/(n·ε)``: the excess risk, in units of the loss's scale, that record-level (ε, δ)-DP on
    ``n`` rows forces on a model of ``p`` parameters (see :func:`warn_if_too_few_records`); 0 at ε = ∞ or δ ≥ 1.
    Public quantities only."""
    if math.isinf(epsilon) or delta >= 1.0:
        return 0.0
    return math.sqrt(n_params * math.log(1.0 / delta)) / (n * epsilon)


def warn_if_too_few_records(method: str, n: int, n_params: int, epsilon: float, delta: float) -> None:
    """Warn when record-level (ε, δ)-DP on ``n`` rows leaves too little signal to expect a useful model.

    Private learning of a convex Lipschitz loss over p parameters must give up excess risk of order
    ``√p/(nε)`` times the loss's scale, and DP-SGD attains ``√(p·ln(1/δ))/(nε)`` up to log factors
    (Bassily, Smith, Thakurta, FOCS 2014). That ratio is a function of public quantities only (0.037 on
    german: 750 rows, 59 parameters, ε = 1, δ = 1/n²). Above ``RECORD_LEVEL_LIMIT`` the fit says so; the
    runs that set the limit are in docs/guide/benchmarks.md ("Measurements behind defaults").
    """
    ratio = record_level_ratio(n, n_params, epsilon, delta)
    if ratio > RECORD_LEVEL_LIMIT:
        warnings.warn(
            f"{method} protects whole records at epsilon={epsilon:g} on {n} rows with {n_params} parameters: "
            f"sqrt(p·ln(1/δ))/(n·ε) = {ratio:.3f} > {RECORD_LEVEL_LIMIT:g}, too little data for that privacy, so "
            "expect test error near a constant predictor's. Raise epsilon, train on more rows, use fewer features "
            "or a smaller model, or protect only the sensitive attribute ("
            + ("privacy_unit='sensitive')" if method == "DP-FERMI" else "e.g. --method dp-fermi)"),
            UtilityWarning, stacklevel=user_stacklevel())


#: A group with fewer training people than this is too small for a fair method: its rates (what a fairness
#: constraint compares) carry a sampling standard error up to 0.5/√30 ≈ 0.09, larger than most tolerances.
SMALL_GROUP_ROWS = 30

#: ... and a released group size is read as "maybe below SMALL_GROUP_ROWS" within this many noise standard
#: deviations of it (about 97.7 % one-sided for Gaussian noise).
SMALL_GROUP_STDS = 2.0


def warn_small_groups(method: str, names, sizes, *, noise_std: float = 0.0, released: bool = True,
                      floor: float | None = None) -> None:
    """Warn before the training loop about every group too small for what ``method`` does with it.

    ``sizes`` are the groups' sizes as the fit knows them, ``names`` their declared (public) names: a released
    noisy count (``released``, its noise of std ``noise_std``) or a public size. A group may be too small when
    that size is below ``SMALL_GROUP_ROWS + SMALL_GROUP_STDS · noise_std`` (a released count that high is
    unlikely for a group of fewer than 30). The warning names each such group, its size (the released value,
    so printing it is post-processing; a released count at ``floor``, that of :func:`floor_counts`, as "about
    <floor> or fewer"), and the fixes; privacy holds either way.
    """
    sizes = np.asarray(sizes, dtype=float)
    need = SMALL_GROUP_ROWS + SMALL_GROUP_STDS * float(noise_std)
    small = [(g, float(v)) for g, v in zip(names, sizes) if v < need]
    if not small:
        return
    how = (f"a released count, noise std {noise_std:.3g}" if released and noise_std > 0
           else "released" if released else "public")
    template = (
        f"{method}: group(s) {{groups}} training people ({how}), which may be fewer than {SMALL_GROUP_ROWS}: a "
        "fairness constraint on so few people is mostly the noise of their sample. Merge small groups, train on "
        "more rows" + (", or raise epsilon" if released and noise_std > 0 else "") + "; the figures of such a "
        "group are not reliable.")
    warnings.warn(SmallGroupWarning(template, [g for g, _ in small], [v for _, v in small],
                                    floor=floor if released else None),
                  stacklevel=user_stacklevel())
