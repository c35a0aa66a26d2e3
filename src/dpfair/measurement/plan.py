"""What a private measurement releases, how it splits ε, and how wide its intervals will be (public inputs only).

A :class:`~dpfair.measurement.frame.PrivateMetricFrame` releases a few tables of per-group counts or
sums with Gaussian or Laplace noise and computes every figure from them. :class:`MeasurementPlan` chooses those tables and
the split of the budget between them from PUBLIC inputs only (the metrics, the number of classes l); the number
of groups, the privacy unit and the data do not change the choice. :func:`plan_measurement` forecasts the
intervals' half-widths before any data is touched and :func:`epsilon_for_width` inverts it.

**The tables.** The counts ``[g, y, ŷ]`` (:data:`FULL`, l² cells per group), or their marginals ``[g, ŷ]``
(:data:`PREDICTIONS`), ``[g, y]`` (:data:`LABELS`), ``[g]`` (:data:`GROUPS`), and, for bounded continuous
metrics, the per-group sums of the scores shifted to ``[0, hi − lo]`` (:data:`SCORES`) or of the squared
errors ``(score − y)²`` (:data:`SQUARED`). One person moves one cell of EVERY table: under ``"record"``
(add/remove) each table moves by at most ``c`` in L2 (``c = 1`` for a count, ``hi − lo`` or the largest squared
error for a sum); under ``"sensitive"`` (replace one s, y and ŷ public) a value ``v ≤ c`` leaves group g and
enters g', distance ``√2·c``. With the convention of :mod:`dpfair.privacy.units` (``GaussianDpEvent(σ)``
covers distance ``bound`` under add/remove, ``2·bound`` under replace-one; noise std ``σ·bound``) a table's
``bound`` is ``c`` (record) or ``c/√2`` (sensitive).

**The split.** Table t is released with multiplier ``σ_t = σ/√w_t``, ``Σ w_t = 1``. A Gaussian of multiplier
σ_t (noise in units of its bound) shifts the privacy-loss mean by ``1/σ_t``; the composition of Gaussians is the
Gaussian of ``(Σ σ_t⁻²)^(-1/2) = σ``, so σ is calibrated once for ONE Gaussian at (ε, δ) and the plan with one
:class:`~dpfair.privacy.Part` per table is checked on the accountant (PLD's discretisation may put it a hair
above ε: σ is then raised until it is not).

**The weights.** A rate is N/D with N, D linear in the released cells; by the delta method its noise variance is
``Var(N − pD)/D²``, p the rate. N − pD is a sum of cells with coefficients (1 − p) on N's cells and −p on D's
other cells when both come from one table t (``A_t = (1−p)²·|N| + p²·(|D| − |N|)``, in cells of t), and
``A_s = |N|``, ``A_t = p²·|D|`` when N comes from s and D from t. With noise std ``σ·b/√w_t`` per cell, a
figure's noise variance is ``(σb/D)²·Σ_t A_t/w_t``. Summing over the requested figures (every group alike)
gives ``(σb)²·Σ_t C_t/w_t`` with ``C_t`` the variance weight landing on t. Minimising ``Σ C_t/w_t`` subject to
``Σ w_t = 1`` (Lagrange: ``C_t/w_t² = λ``) gives ``w_t = √C_t / Σ_s √C_s`` and the minimum ``(Σ_t √C_t)²``.
:meth:`MeasurementPlan.choose` picks, for every subset of the count tables, each metric's cheapest reading
given the weights and the weights given the readings (each step lowers ``Σ C_t/w_t``), and keeps the plan of
least predicted variance; the one-table plan (the full table) is among the candidates. The rate p of the
coefficients is the public constant :data:`PLANNING_RATE` (½). For demographic parity alone (l = 2) the
predictions' marginal halves the variance of the full table (``A = ½`` against ``1`` per group); for several
metrics the full table alone often wins, as splitting the budget costs more than it saves.

**Laplace.** With ``mechanism="laplace"`` table t gets the pure share ``ε_t``, ``Σ ε_t = ε`` (pure
composition), noise of scale ``b_t = Δ_t/ε_t`` (Δ_t its L1 distance: 2c under ``"sensitive"``, a count
leaving one cell and entering another, c under ``"record"``; ``bound = c`` either way, the accountant's
``LaplaceDpEvent`` covering L1 distance ``2·bound`` under replace-one) and variance ``2b_t²``. The summed variance
``Σ_t C_t·2Δ_t²/ε_t²`` under ``Σ ε_t = ε`` (Lagrange: ``C_t·Δ_t²/ε_t³ = λ``) is least at
``ε_t ∝ (C_t·Δ_t²)^(1/3)``, with minimum ``2·(Σ_t (C_t·Δ_t²)^(1/3))³/ε²``; the weights ``w_t = ε_t/ε`` are
stored in place of the Gaussian ones. ``"auto"`` (:meth:`MeasurementPlan.using`) compares the two mechanisms'
summed noise variance ``Σ_t C_t·v_t`` at (ε, δ) — public inputs only, so the choice reveals nothing — and keeps
the smaller: at small δ and few tables Laplace wins (its noise does not grow with ``√ln(1/δ)``).

**Public margins.** Under ``"sensitive"`` y and ŷ are public, so every count table's totals over the groups
(``counts[·, y, ŷ]`` summed over g) are public. With two groups only group 0's slice of each count table is
released and group 1's is the public total less it (post-processing): one person's change of s moves one cell
of the slice by 1, L1 and L2 distance 1, ``bound = ½`` for both mechanisms (against √2 and 2 for the whole
table). Group 1's noise is then minus group 0's, so a difference of the two groups' rates carries
``Var(N − pD)·(1/D₀ + 1/D₁)²``. Score sums stay released on both groups. A model whose predictions read s
makes ŷ a function of s: measure it under ``"record"``.

**The forecast.** A rate p on ``D = n_g·share`` rows (share 1 for selection rate and accuracy, π for TPR/FNR,
1 − π for FPR/TNR, π the positive rate of y) has variance ≈ ``p(1−p)/D`` (binomial sampling, group sizes
fixed) ``+ Σ_t τ_t²·A_t(p)/D²`` (the delta method above, τ_t the noise std of table t); a difference of two
groups adds their variances (independent cells); a half-width is ``z·√variance`` with z the normal quantile
at the confidence. For a mean of values in ``[0, c]`` the sampling variance is bounded by ``m(c − m)/n_g``
(Bhatia–Davis), which the frame's bootstrap uses too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import combinations
from statistics import NormalDist

import numpy as np
import pandas as pd

from dpfair.privacy import (
    Part,
    PrivacyPlan,
    PrivacyUnit,
    check_privacy_unit,
    epsilon_of,
    gaussian_event,
)
from dpfair.utils.validation import check_epsilon

__all__ = ["COUNT_TABLES", "FULL", "GROUPS", "LABELS", "MECHANISMS", "PLANNING_RATE", "PREDICTIONS", "SCORES",
           "SQUARED", "SUM_TABLES", "MeasurementForecast", "MeasurementPlan", "epsilon_for_width",
           "plan_measurement", "slice_weights"]

#: The counts ``[group, y, ŷ]``.
FULL = "contingency table"
#: The counts ``[group, ŷ]``.
PREDICTIONS = "prediction counts"
#: The counts ``[group, y]``.
LABELS = "label counts"
#: The counts ``[group]``.
GROUPS = "group sizes"
#: The per-group sums of the scores, shifted to ``[0, hi − lo]``.
SCORES = "score sums"
#: The per-group sums of the squared errors ``(score − y)²`` (y the indicator of the positive class).
SQUARED = "squared error sums"
#: The tables of counts, in the order :meth:`MeasurementPlan.choose` tries them.
COUNT_TABLES = (FULL, PREDICTIONS, LABELS, GROUPS)
#: The tables of per-group sums of a bounded score.
SUM_TABLES = (SCORES, SQUARED)
#: The one-Gaussian part a multi-table plan's σ is calibrated on.
MEASUREMENT = "measurement"

#: The noise a measurement may add: ``"auto"`` picks the one of smaller predicted variance (public inputs only).
MECHANISMS = ("auto", "gaussian", "laplace")

#: The rate p at which :meth:`MeasurementPlan.choose` weighs the coefficients (public, fixed).
PLANNING_RATE = 0.5

#: Metrics computed from counts.
COUNT_METRICS = ("count", "selection_rate", "true_positive_rate", "false_positive_rate", "true_negative_rate",
                 "false_negative_rate", "accuracy", "error")
#: Metrics computed from per-group sums of a bounded score, with the table each reads.
SCORE_METRICS = {"mean_prediction": SCORES, "brier_score": SQUARED}


def metric_masks(l: int) -> dict[str, tuple]:
    """``{metric: (numerator, denominator)}``: a boolean mask over the cells ``[y, ŷ]`` of one group (the last
    class is the positive one), or a sum table's name for a score metric's numerator; ``None``: no denominator."""
    pos = l - 1
    every = np.ones((l, l), dtype=bool)
    pred_pos = np.zeros((l, l), dtype=bool)
    pred_pos[:, pos] = True
    y_pos = np.zeros((l, l), dtype=bool)
    y_pos[pos, :] = True
    eye = np.eye(l, dtype=bool)
    return {"count": (every, None), "selection_rate": (pred_pos, every),
            "true_positive_rate": (pred_pos & y_pos, y_pos), "false_positive_rate": (pred_pos & ~y_pos, ~y_pos),
            "true_negative_rate": (~pred_pos & ~y_pos, ~y_pos), "false_negative_rate": (~pred_pos & y_pos, y_pos),
            "accuracy": (eye, every), "error": (~eye, every),
            "mean_prediction": (SCORES, every), "brier_score": (SQUARED, every)}


def cells(table: str, mask) -> int | None:
    """How many cells of ``table`` (per group) sum to the cells ``mask`` of ``[y, ŷ]``; ``None`` when the table
    cannot express them (a sum table expresses only itself: one cell)."""
    if isinstance(mask, str):
        return 1 if mask == table else None
    if table == FULL:
        return int(mask.sum())
    if table in (PREDICTIONS, LABELS):
        axis = 0 if table == PREDICTIONS else 1
        keep = mask.any(axis=axis)
        whole = (mask == (keep[None, :] if axis == 0 else keep[:, None])).all()
        return int(keep.sum()) if whole else None
    if table == GROUPS:
        return 1 if mask.all() else None
    return None


def read(tables: dict, table: str, mask) -> np.ndarray:
    """The per-group sum of the cells ``mask`` read off ``tables[table]`` (shapes ``(..., k, l, l)``,
    ``(..., k, l)`` or ``(..., k)``): a linear map of the released values (post-processing)."""
    t = tables[table]
    if isinstance(mask, str) or table in (GROUPS,) + SUM_TABLES:
        return t
    if table == FULL:
        return (t * mask).sum(axis=(-2, -1))
    keep = mask.any(axis=0 if table == PREDICTIONS else 1)
    return t[..., keep].sum(axis=-1)


def slice_weights(table: str, mask) -> np.ndarray:
    """The 0/1 weight of each of one group's cells of ``table`` (flattened) in the sum :func:`read` takes for
    ``mask``: ``read(tables, table, mask)[g] == slice_weights(table, mask) @ tables[table][g].ravel()``."""
    if isinstance(mask, str) or table in (GROUPS,) + SUM_TABLES:
        return np.ones(1)
    if table == FULL:
        return np.asarray(mask, dtype=np.float64).ravel()
    return np.asarray(mask.any(axis=0 if table == PREDICTIONS else 1), dtype=np.float64)


def coefficients(metric: str, reading: tuple, l: int, p: float) -> dict[str, float]:
    """``{table: A_t}``: the noise variance of ``metric`` read as ``reading = (numerator table, denominator
    table)`` is ``Σ_t τ_t²·A_t / D²`` at rate p (the module docstring); a count's is ``Σ_t τ_t²·A_t``."""
    num, den = metric_masks(l)[metric]
    t_num, t_den = reading
    if den is None:
        return {t_num: float(cells(t_num, num))}
    if isinstance(num, str):
        out = {t_num: 1.0}
        out[t_den] = out.get(t_den, 0.0) + p * p * cells(t_den, den)
        return out
    if t_num == t_den:
        c_num, c_den = cells(t_num, num), cells(t_num, den)
        return {t_num: (1 - p) ** 2 * c_num + p * p * (c_den - c_num)}
    return {t_num: float(cells(t_num, num)), t_den: p * p * cells(t_den, den)}


def _options(metric: str, l: int, allowed) -> list[tuple]:
    num, den = metric_masks(l)[metric]
    nums = [t for t in allowed if cells(t, num) is not None]
    if den is None:
        return [(t, None) for t in nums]
    return [(a, b) for a in nums for b in allowed if b in COUNT_TABLES and cells(b, den) is not None]


@dataclass(frozen=True)
class MeasurementPlan:
    """The tables a measurement releases, how each metric reads them and the split of the budget.

    ``readings``: ``(metric, numerator table, denominator table or None)``; ``weights``: ``(table, w_t)``, the
    tables in release order, ``Σ w_t = 1``: table t is noised with ``σ/√w_t`` (Gaussian) or gets the share
    ``ε_t = w_t·ε`` (Laplace). ``mechanism``: ``"gaussian"`` or ``"laplace"``; ``public_margins``: two groups
    under the sensitive unit, the count tables released on group 0 only (module docstring). Build it with
    :meth:`choose` (least predicted variance) or :meth:`single_table`, then :meth:`using` for the mechanism.
    """

    metrics: tuple
    classes: int
    readings: tuple
    weights: tuple
    mechanism: str = "gaussian"
    public_margins: bool = False

    @classmethod
    def choose(cls, metrics, classes: int = 2, *, tables=COUNT_TABLES + SUM_TABLES) -> MeasurementPlan:
        """The plan of least :meth:`variance` for ``metrics`` on ``classes`` labels, among those releasing only
        ``tables`` (e.g. no table of ŷ when there are no predictions): public inputs only."""
        return _choose(tuple(dict.fromkeys(metrics)), int(classes), tuple(tables))

    @classmethod
    def single_table(cls, metrics, classes: int = 2) -> MeasurementPlan:
        """Everything from the full table ``[g, y, ŷ]`` (plus the sum tables score metrics need)."""
        metrics, l = tuple(dict.fromkeys(metrics)), int(classes)
        allowed = (FULL,) + SUM_TABLES
        return _alternate(metrics, l, {m: _options(m, l, allowed) for m in metrics}, allowed)

    def using(self, mechanism: str = "auto", *, epsilon=None, delta=None, unit="sensitive", groups: int = 2,
              accountant: str = "pld") -> MeasurementPlan:
        """This plan's tables and readings released with ``mechanism`` (``"auto"``: the one of smaller
        :meth:`noise_variance` at (ε, δ); Gaussian at ε = ∞), with public margins when ``groups == 2`` under the
        sensitive unit. Public inputs only. Laplace weights: ``ε_t ∝ (C_t·Δ_t²)^(1/3)`` (module docstring)."""
        mechanism = check_mechanism(mechanism)
        margins = groups == 2 and check_privacy_unit(unit) is PrivacyUnit.SENSITIVE
        if mechanism == "auto":
            if epsilon is None or math.isinf(float(epsilon)):
                mechanism = "gaussian"
            else:
                options = [self.using(m, unit=unit, groups=groups) for m in ("gaussian", "laplace")]
                cost = [o.noise_variance(epsilon, delta, unit, accountant) for o in options]
                return options[1] if cost[1] < cost[0] else options[0]
        base = replace(self, mechanism="gaussian", public_margins=margins)
        if mechanism == "gaussian":
            return base
        C = self._table_weights()
        bound = replace(base, mechanism="laplace").bounds(unit)  # at the range (0, 1): each table's Δ_t
        shares = {t: (C[t] * bound[t] ** 2) ** (1.0 / 3.0) for t in self.tables}
        total = sum(shares.values())
        return replace(base, mechanism="laplace", weights=tuple((t, shares[t] / total) for t in self.tables))

    def _table_weights(self) -> dict:
        """``{table: C_t}``: the requested figures' variance weight on each table at the planning rate."""
        C = {t: 0.0 for t in self.tables}
        for m in self.metrics:
            for t, a in self.coefficients(m).items():
                C[t] += a
        return C

    def noise_variance(self, epsilon, delta, unit, accountant: str = "pld") -> float:
        """``Σ_t C_t·v_t``: the requested figures' summed noise variance per group in units of ``1/D²``, v_t the
        variance of one cell of table t (``(σ_t·bound_t)²``, Laplace ``2·(σ_t·bound_t)²``) at the planning rate
        and the score range (0, 1): what ``mechanism="auto"`` compares. Public inputs only."""
        sigmas = self.noise_multipliers(float(epsilon), float(delta), unit, accountant)
        bounds = self.bounds(unit)
        factor = 2.0 if self.mechanism == "laplace" else 1.0
        return sum(C * factor * (sigmas[t] * bounds[t]) ** 2 for t, C in self._table_weights().items())

    # ---- what it releases -----------------------------------------------------------------------------
    @property
    def tables(self) -> tuple:
        return tuple(t for t, _ in self.weights)

    def reading(self, metric: str) -> tuple:
        for m, num, den in self.readings:
            if m == metric:
                return num, den
        raise KeyError(metric)

    def best_reading(self, metric: str) -> tuple | None:
        """The planned reading of ``metric``, or the cheapest one the released tables allow (``None``: none)."""
        if metric in self.metrics:
            return self.reading(metric)
        w = dict(self.weights)
        options = _options(metric, self.classes, self.tables)
        if not options:
            return None
        return min(options, key=lambda o: _cost(coefficients(metric, o, self.classes, PLANNING_RATE), w))

    def coefficients(self, metric: str, p: float = PLANNING_RATE) -> dict[str, float]:
        """``{table: A_t}`` of the planned reading of ``metric`` at rate p (see :func:`coefficients`)."""
        return coefficients(metric, self.reading(metric), self.classes, p)

    def variance(self) -> float:
        """``Σ_t C_t/w_t``: the requested figures' summed noise variance per group, in units of ``(σ·bound/D)²``
        (σ the one-Gaussian multiplier), at the planning rate."""
        w = dict(self.weights)
        return sum(_cost(self.coefficients(m), w) for m in self.metrics)

    # ---- its privacy ----------------------------------------------------------------------------------
    def privacy_plan(self, pure_unit=None) -> PrivacyPlan:
        """One :class:`~dpfair.privacy.Part` of the plan's mechanism per released table. ``pure_unit``: Laplace parts
        recorded as pure DP on that unit (``Part.pure`` = the L1 distance Δ: ε_t = Δ/σ_t), as ``secure_mode``
        releases need."""
        pure = _l1_distance(pure_unit) if pure_unit is not None and self.mechanism == "laplace" else None
        return PrivacyPlan(tuple(Part(t, mechanism=self.mechanism, pure=pure) for t in self.tables))

    def noise_multipliers(self, epsilon: float, delta: float, unit, accountant: str = "pld") -> dict[str, float]:
        """σ_t per table: σ calibrated for one Gaussian at (ε, δ), ``σ_t = σ/√w_t``, then σ raised by steps of
        0.01 % (doubling) until the plan with one part per table spends at most ε on ``accountant`` (ε = ∞: no noise)."""
        if math.isinf(epsilon):
            return {t: 0.0 for t in self.tables}
        if self.mechanism == "laplace":  # σ_t = Δ/ε_t, Δ the L1 distance in bounds (2 replace-one, 1 add/remove)
            pure = _l1_distance(unit)
            plan, scale = self.privacy_plan(), 1.0
            for i in range(40):
                sigmas = {t: scale * pure / (w * epsilon) for t, w in self.weights}
                if plan.epsilon(sigmas, delta, unit, accountant) <= epsilon:
                    return sigmas
                scale *= 1.0 + 1e-4 * 2 ** i
            raise RuntimeError("the Laplace plan stays above epsilon; report this")  # pragma: no cover
        single = len(self.weights) == 1
        name = self.tables[0] if single else MEASUREMENT
        sigma = PrivacyPlan((Part(name),)).calibrate(epsilon, delta, unit, accountant)[name]
        plan = self.privacy_plan()
        for i in range(40):
            sigmas = {t: sigma / math.sqrt(w) for t, w in self.weights}
            if single or plan.epsilon(sigmas, delta, unit, accountant) <= epsilon:
                return sigmas
            sigma *= 1.0 + 1e-4 * 2 ** i  # steps of 0.01 %, doubling
        raise RuntimeError("the split plan stays above epsilon; report this")  # pragma: no cover

    def pure_epsilon(self, sigmas: dict, unit) -> float | None:
        """A Laplace plan's pure ε: ``Σ_t Δ/σ_t`` (table t's Laplace of scale ``σ_t·bound_t`` on a table that one
        person moves by at most ``Δ·bound_t`` in L1 is ``Δ/σ_t``-DP; basic composition), so the release is
        (ε, 0)-DP; ``None`` for a Gaussian plan (δ > 0)."""
        if self.mechanism != "laplace":
            return None
        return float(sum(math.inf if v == 0 else _l1_distance(unit) / v for v in sigmas.values()))

    def bounds(self, unit, score_range=(0.0, 1.0)) -> dict[str, float]:
        """Each table's ``bound`` (module docstring): ``c`` under ``"record"``; under ``"sensitive"`` ``c/√2``
        (Gaussian: L2 distance √2·c) or ``c`` (Laplace: L1 distance 2c), and ``c/2`` for a count table released
        on one group with public margins (distance c, either norm); ``c = 1`` for counts, ``hi − lo`` for score
        sums, ``max (score − y)²`` for squared errors."""
        lo, hi = (float(v) for v in score_range)
        unit = check_privacy_unit(unit)
        sensitive = unit is PrivacyUnit.SENSITIVE
        base = (1.0 / math.sqrt(2.0) if self.mechanism == "gaussian" else 1.0) if sensitive else 1.0
        scale = {SCORES: hi - lo, SQUARED: max(lo * lo, hi * hi, (lo - 1) ** 2, (hi - 1) ** 2)}
        margin = 0.5 if sensitive and self.public_margins else base
        return {t: (margin if t in COUNT_TABLES else base) * scale.get(t, 1.0) for t in self.tables}


def _l1_distance(unit) -> float:
    """Δ, the L1 distance between neighbours' tables in units of ``bound``: 2 under replace-one (the sensitive
    unit: a count leaves one cell and enters another), 1 under add/remove."""
    return 2.0 if check_privacy_unit(unit) is PrivacyUnit.SENSITIVE else 1.0


def check_mechanism(mechanism) -> str:
    """A mechanism name among :data:`MECHANISMS`, with an error that lists them."""
    if mechanism not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(map(repr, MECHANISMS))}, got {mechanism!r}")
    return mechanism


@lru_cache(maxsize=256)
def _choose(metrics: tuple, l: int, tables: tuple) -> MeasurementPlan:
    """:meth:`MeasurementPlan.choose`, kept per public input (a pure function of them)."""
    counts = [t for t in COUNT_TABLES if t in tables]
    best = None
    for r in range(1, len(counts) + 1):
        for subset in combinations(counts, r):
            allowed = subset + tuple(t for t in SUM_TABLES if t in tables)
            options = {m: _options(m, l, allowed) for m in metrics}
            if not all(options.values()):
                continue
            plan = _alternate(metrics, l, options, allowed)
            if best is None or plan.variance() < best.variance() * (1 - 1e-9):
                best = plan
    if best is None:
        raise ValueError(f"no table among {', '.join(tables)} gives {', '.join(metrics)}; pass y_pred for "
                         "metrics of the predictions")
    return best


def _cost(coeffs: dict, w: dict) -> float:
    return sum(a / w[t] if w.get(t, 0.0) > 0 else (0.0 if a == 0 else math.inf) for t, a in coeffs.items())


def _alternate(metrics, l, options, allowed) -> MeasurementPlan:
    """Readings and weights by alternate minimisation of ``Σ C_t/w_t`` (each step lowers it), from equal weights."""
    w = {t: 1.0 / len(allowed) for t in allowed}
    choice = None
    for _ in range(50):
        new = {m: min(options[m], key=lambda o, m=m: _cost(coefficients(m, o, l, PLANNING_RATE), w))
               for m in metrics}
        if new == choice:
            break
        choice = new
        C = {}
        for m, o in choice.items():
            for t, a in coefficients(m, o, l, PLANNING_RATE).items():
                C[t] = C.get(t, 0.0) + a
        roots = {t: math.sqrt(C[t]) for t in allowed if C.get(t, 0.0) > 0}
        total = sum(roots.values())
        w = {t: r / total for t, r in roots.items()}
    readings = tuple((m, *choice[m]) for m in metrics)
    return MeasurementPlan(tuple(metrics), l, readings, tuple((t, w[t]) for t in allowed if t in w))


# ---- the forecast ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MeasurementForecast:
    """What :func:`plan_measurement` predicts: the plan, σ_t and the noise std per table, and ``widths``, a
    table indexed by ``(metric, figure)`` (figure: a group, or ``"difference"``) with columns ``rows`` (the
    denominator's expected size), ``noise`` (the half-width from the noise alone) and ``half_width`` (noise and
    sampling)."""

    plan: MeasurementPlan
    epsilon: float
    delta: float
    noise_multipliers: dict
    noise_stds: dict
    widths: pd.DataFrame


def _sizes(n, group_sizes, group_shares) -> np.ndarray:
    if (group_sizes is None) == (group_shares is None):
        raise ValueError("pass exactly one of group_sizes (rows per group) and group_shares (fractions)")
    if group_sizes is not None:
        sizes = np.asarray(group_sizes, dtype=np.float64)
    else:
        shares = np.asarray(group_shares, dtype=np.float64)
        if n is None or np.any(shares <= 0) or abs(shares.sum() - 1.0) > 1e-6:
            raise ValueError("group_shares must be positive fractions adding up to 1, with n the number of rows")
        sizes = shares * float(n)
    if sizes.ndim != 1 or sizes.size < 2 or np.any(sizes <= 0):
        raise ValueError(f"the groups must be at least two positive sizes, got {sizes.tolist()}")
    return sizes


def plan_measurement(metrics, *, epsilon, delta=None, n=None, group_sizes=None, group_shares=None,
                     classes=(0, 1), privacy_unit="sensitive", accountant="pld", positive_rate=None,
                     score_range=(0.0, 1.0), confidence=0.95, sampling=True,
                     mechanism="auto") -> MeasurementForecast:
    """Forecast a :class:`~dpfair.measurement.frame.PrivateMetricFrame`'s interval half-widths.

    Public inputs only: the metrics, ε and δ (``None``: ``1/n²``, the frame's default), the groups' sizes
    (``group_sizes``, or ``group_shares`` with ``n``), the classes, the unit, and ``positive_rate``, the
    assumed value of every rate and share of positive labels (``None``: ½, the widest sampling variance).
    The plan and σ are the frame's own (:meth:`MeasurementPlan.choose`, :meth:`MeasurementPlan.noise_multipliers`);
    the variances are the module docstring's. ``sampling=False``: the noise only (the frame's
    ``sampling=False`` intervals).
    """
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    epsilon = check_epsilon(epsilon, budget=True)
    sizes = _sizes(n, group_sizes, group_shares)
    n = float(sizes.sum()) if n is None else float(n)
    delta = 1.0 / n ** 2 if delta is None else float(delta)
    l = len(list(classes))
    p = 0.5 if positive_rate is None else float(positive_rate)
    if not 0.0 < p < 1.0:
        raise ValueError(f"positive_rate must lie strictly between 0 and 1, got {positive_rate!r}")
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}; e.g. 0.95")
    plan = MeasurementPlan.choose(names, l).using(mechanism, epsilon=epsilon, delta=delta, unit=privacy_unit,
                                                  groups=len(sizes), accountant=accountant)
    sigmas = plan.noise_multipliers(epsilon, delta, privacy_unit, accountant)
    bounds = plan.bounds(privacy_unit, score_range)
    spread = math.sqrt(2.0) if plan.mechanism == "laplace" else 1.0  # a Laplace of scale b has std √2·b
    stds = {t: spread * sigmas[t] * bounds[t] for t in plan.tables}
    z = NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)
    masks = metric_masks(l)
    rows = []
    for m in plan.metrics:
        coeff = plan.coefficients(m, p)
        den = masks[m][1]
        share = 1.0 if den is None or den.all() else (p if den[l - 1].all() else 1.0 - p)
        # a score metric's value is c·(normalised mean): the count tables' terms scale by c² (module docstring)
        c = bounds[SCORE_METRICS[m]] / bounds[plan.reading(m)[1]] if m in SCORE_METRICS else 1.0
        var_noise = sum(stds[t] ** 2 * a * (1.0 if t in SUM_TABLES else c * c) for t, a in coeff.items())
        per_group = []
        for size in sizes:
            d = size * share
            if m == "count":
                noise, samp = var_noise, 0.0
            else:
                noise = var_noise / d ** 2
                samp = p * (1 - p) * c * c / d if sampling else 0.0
            per_group.append((d, noise, samp))
        for g, (d, noise, samp) in enumerate(per_group):
            rows.append((m, g, d, z * math.sqrt(noise), z * math.sqrt(noise + samp)))
        # the difference of the two groups whose figures are the most uncertain (independent cells); with public
        # margins group 1's noise is minus group 0's: the noise of N − pD moves the two rates in opposite
        # directions, variance var_noise·(1/D₀ + 1/D₁)²
        worst = sorted(per_group, key=lambda v: v[1] + v[2])[-2:]
        noise = sum(v[1] for v in worst)
        if plan.public_margins and m != "count" and all(t in COUNT_TABLES for t in coeff):
            noise = var_noise * (1.0 / per_group[0][0] + 1.0 / per_group[1][0]) ** 2
        rows.append((m, "difference", min(v[0] for v in worst), z * math.sqrt(noise),
                     z * math.sqrt(noise + sum(v[2] for v in worst))))
    widths = pd.DataFrame(rows, columns=["metric", "figure", "rows", "noise", "half_width"])
    widths = widths.set_index(["metric", "figure"])
    return MeasurementForecast(plan, epsilon, delta, sigmas, stds, widths)


def epsilon_for_width(metric, half_width, *, figure="difference", metrics=None, delta=None, n=None,
                      group_sizes=None, group_shares=None, classes=(0, 1), privacy_unit="sensitive",
                      accountant="pld", positive_rate=None, score_range=(0.0, 1.0), confidence=0.95,
                      sampling=True, mechanism="auto") -> float:
    """The smallest ε at which :func:`plan_measurement` forecasts ``half_width`` for ``(metric, figure)``
    (``metrics``: everything measured at once, default ``[metric]``).

    The noise variance is ``σ²·V`` (σ the one-Gaussian multiplier; V read off the forecast at ε = 1), so the
    width is reached at ``σ = √(((h/z)² − sampling variance)/V)``; ε is that Gaussian's on the accountant (the frame's
    calibration returns this σ back, up to its tolerance). A width the sampling alone exceeds is refused.
    """
    if check_mechanism(mechanism) == "auto":  # the mechanism of the smaller ε (auto's choice there, as a rule)
        return min(epsilon_for_width(metric, half_width, figure=figure, metrics=metrics, delta=delta, n=n,
                                     group_sizes=group_sizes, group_shares=group_shares, classes=classes,
                                     privacy_unit=privacy_unit, accountant=accountant, positive_rate=positive_rate,
                                     score_range=score_range, confidence=confidence, sampling=sampling,
                                     mechanism=m) for m in ("gaussian", "laplace"))
    names = [metric] if metrics is None else list(dict.fromkeys([metric] + list(metrics)))
    common = {"delta": delta, "n": n, "group_sizes": group_sizes, "group_shares": group_shares, "classes": classes,
              "privacy_unit": privacy_unit, "accountant": accountant, "positive_rate": positive_rate,
              "score_range": score_range, "confidence": confidence, "sampling": sampling, "mechanism": mechanism}
    ref = plan_measurement(names, epsilon=1.0, **common)
    row = ref.widths.loc[(metric, figure)]
    z = NormalDist().inv_cdf(0.5 + float(confidence) / 2.0)
    var_noise, var_total = (row["noise"] / z) ** 2, (row["half_width"] / z) ** 2
    var_sampling = var_total - var_noise
    target = (float(half_width) / z) ** 2
    if not target > var_sampling:
        raise ValueError(f"a half-width of {half_width:g} is out of reach at any epsilon: the sampling of the rows "
                         f"alone gives {z * math.sqrt(var_sampling):.3g}; measure more rows or ask for a wider one")
    if ref.plan.mechanism == "laplace":  # the noise variance is V/ε² exactly (σ_t = Δ/(w_t·ε))
        return float(math.sqrt(var_noise / (target - var_sampling)))
    w = dict(ref.plan.weights)
    sigma_ref = min(math.sqrt(w[t]) * s for t, s in ref.noise_multipliers.items())  # the one-Gaussian σ at ε = 1
    sigma = sigma_ref * math.sqrt((target - var_sampling) / var_noise)
    return float(epsilon_of(gaussian_event(sigma), ref.delta, privacy_unit, accountant))
