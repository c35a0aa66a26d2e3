"""A differentially private ``MetricFrame``: per-group metrics from a few noisy tables of counts or sums.

:class:`PrivateMetricFrame` releases, once and with Gaussian or Laplace noise (``mechanism``), the tables its
:class:`~dpfair.measurement.plan.MeasurementPlan` chooses for the requested metrics — the counts
``[g, y, ŷ]`` (k public groups × l classes × l classes), or the marginals ``[g, ŷ]``, ``[g, y]``, ``[g]`` where
they give the same figures with less noise, and the per-group sums of a bounded score for ``mean_prediction``
and ``brier_score`` — through dpfair's release path: a :class:`~dpfair.privacy.PrivacyPlan` with one Gaussian
part per table, σ calibrated once for one Gaussian at (ε, δ) and split ``σ_t = σ/√w_t`` (the composition is
that one Gaussian; checked on the accountant) — or one Laplace part per table with shares ``ε_t`` of ε,
``Σ ε_t = ε`` (``mechanism="auto"`` picks the mechanism of smaller predicted noise from public inputs; see
:mod:`~dpfair.measurement.plan`) — :class:`~dpfair.privacy.Release` s drawing from one fresh
:class:`~dpfair.privacy.SecretRandom`, recorded on one :class:`~dpfair.privacy.PrivacyLedger`. Every figure it
reports (fairlearn's metric names, ``.overall``, ``.by_group``, ``.difference()``, ``.ratio()``, the intervals and
the flags) is computed from the released tables alone: post-processing, no further privacy cost.

Sensitivity (the accountant's ``GaussianDpEvent(σ)`` covers two neighbours' sums at L2 distance ≤ ``bound``
under add/remove, ``2·bound`` under replace-one, with noise std ``σ·bound``); one person moves one cell of every
table:

- ``"record"`` (add/remove one person): a count cell moves by 1 (``bound = 1``), a sum by at most c, its
  values' range (``bound = c``);
- ``"sensitive"`` (one person's s replaced, y, ŷ and the score public): a count leaves cell (g, ...) and enters
  (g', ...), distance √2 = 2·bound: ``bound = 1/√2`` (noise std σ/√2); a sum's value v ≤ c moves likewise:
  ``bound = c/√2``. Scores are clipped to the public ``score_range = (lo, hi)`` and shifted to ``[0, hi − lo]``
  (c = hi − lo); squared errors ``(score − y)²`` lie in ``[0, c]`` with c their largest value on that range.
- Laplace: the same moves in L1 (the accountant's ``LaplaceDpEvent(σ)`` covers L1 distance ``bound`` under
  add/remove, ``2·bound`` under replace-one, noise scale ``σ·bound``, std ``√2·σ·bound``): ``bound = c`` under
  both units.
- Two groups under ``"sensitive"``: y and ŷ are public, so the count tables' totals over groups are public;
  only group 0's slice is released and group 1's is the public total less it. One change of s moves the slice
  by 1 (L1 and L2): ``bound = ½``. A model whose predictions read s must be measured under ``"record"``.

Intervals of one group's figure (:meth:`PrivateMetricFrame.intervals`, ``.overall_interval()``) come from the
mechanism itself (:mod:`~dpfair.measurement.intervals`): a count is ``N̂ = N + e`` with e the known
noise law of the cells it sums, inverted (``N ∈ [N̂ − q_{1−α/2}, N̂ − q_{α/2}] ∩ [0, n]``, n public); a rate
``N/D`` by Fieller's test inversion of ``N̂ − p·D̂``, with, under ``sampling=True`` (the population value), a
binomial for the rows within the group's denominator (Bhatia–Davis's variance bound for a score). They hold at
their level for every group size, a group of one included, because they never re-noise a clipped estimate.
The figures themselves are each metric's unclipped linear reads summed, then clipped to their range (a count to
``[0, n]``, a rate to ``[0, 1]``; NaN when the noisy denominator is ≤ 0).

A fairness notion's figure (:meth:`PrivateMetricFrame.notion_difference`, ``.notion_interval()``; fairlearn's
``demographic_parity_difference`` and ``equalized_odds_difference`` are two of them) is the largest difference of
the rates the notion compares (:attr:`~dpfair.fairness.notions.Notion.compared_rates`), with the interval of that
largest difference (``.max_difference_interval()``, simultaneous over the rates): the notion object says what it
compares, the frame measures it, so a notion registered later is measured with no change here.

Differences between groups (``.difference_interval()``, the spread max − min that noisy rates bias upward) use a
parametric bootstrap on the released tables when every group's figure is confident: each replicate (a) draws the
rows again when ``sampling=True`` — for every group a multinomial of its noisy total over the cells ``[y, ŷ]`` of
``table_``, each released count table moving by that draw's deviation from its expectation, and each score sum by
a normal deviation of variance ``n_g·m(c − m)`` — and (b) adds a fresh Gaussian (or Laplace) of each table's own
noise std to every released value (with public margins, group 1's draw is minus group 0's, as in the release);
the folded or simultaneous-pairs interval of :meth:`PrivateMetricFrame.difference_interval`. When a group is
flagged, where the bootstrap's replicates of a noise-swamped denominator do not hold, the spread's interval is
the hull of the per-group mechanism intervals at Bonferroni level ``1 − α/k``. Everything draws from a public
generator seeded by ``random_state`` and reads released values and public sizes only (post-processing: no privacy
cost). A group's count is flagged when it is at most ``FLAG_STDS = 7`` noise stds; a rate or mean when its noisy
denominator is below that, or its interval is wider than 0.5 (a mean's: half its range), or it is undefined.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pandas as pd

from dpfair.exceptions import UtilityWarning
from dpfair.fairness.notions import get_notion
from dpfair.measurement.plan import (
    COUNT_TABLES,
    FULL,
    GROUPS,
    LABELS,
    PREDICTIONS,
    SCORE_METRICS,
    SCORES,
    SQUARED,
    MeasurementPlan,
    cells,
    check_mechanism,
    metric_masks,
    read,
    slice_weights,
)
from dpfair.measurement.intervals import LinearNoise, count_intervals, ratio_intervals
from dpfair.privacy import (
    PrivacyLedger,
    check_privacy_unit,
)
from dpfair.privacy.session import ReleaseSession
from dpfair.utils.validation import check_1d, check_epsilon, check_positive

__all__ = ["METRICS", "SCORE_METRIC_NAMES", "PrivateMetricFrame"]

#: The part the frame releases when it releases the full table (its other tables: see
#: :mod:`dpfair.measurement.plan`).
TABLE = FULL

#: The metrics the frame computes from counts (fairlearn's names), with aliases.
METRICS = ("count", "selection_rate", "true_positive_rate", "false_positive_rate", "true_negative_rate",
           "false_negative_rate", "accuracy", "error")
#: The metrics the frame computes from per-group sums of a bounded score (``y_score``).
SCORE_METRIC_NAMES = ("mean_prediction", "brier_score")
_ALIASES = {"accuracy_score": "accuracy", "error_rate": "error", "brier_score_loss": "brier_score"}

#: A metric's denominator is flagged when its noisy value is below this many noise standard deviations: 5, plus 2
#: for the noise itself — a release whose noise pushed a small denominator up by 2 standard deviations is still
#: flagged (with 5 alone, the releases that escaped the flag were exactly those whose noise had inflated the
#: denominator, and their intervals were too narrow: results/measurement/).
FLAG_STDS = 7.0
#: ... or when the metric's interval is wider than this (a fraction of the range, for a mean score).
FLAG_WIDTH = 0.5

#: The most memory the intervals' replicates may take (bytes): about eight float64 arrays of B × k × l² entries
#: (the replicate tables, their noise, the rows redrawn) for B replicates, k groups and l classes. Beyond it the
#: frame refuses before any release, naming the fix, rather than exhaust the machine.
MAX_REPLICATE_BYTES = 2 * 1024**3


def _between(values: np.ndarray, how: str) -> np.ndarray:
    """fairlearn's between-groups aggregates over the last axis (groups): difference = max − min,
    ratio = min / max (1 when both are 0)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
        lo, hi = np.nanmin(values, axis=-1), np.nanmax(values, axis=-1)
    if how == "difference":
        return hi - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hi == 0, np.where(lo == 0, 1.0, np.nan), lo / hi)


class PrivateMetricFrame:
    """fairlearn's ``MetricFrame`` for a binary or multi-class classifier, released with (ε, δ)-DP.

    Parameters
    ----------
    metrics : a metric name or a list of them, among :data:`METRICS` (``accuracy_score`` is ``accuracy``) and
        :data:`SCORE_METRIC_NAMES` (``mean_prediction``, ``brier_score``: need ``y_score``).
    y_true, y_pred, sensitive_features : one entry per person (``y_pred=None`` when only score metrics and
        ``count`` are asked for).
    groups : the public list of groups (required unless ``epsilon=inf``: which groups exist is not released).
    classes : the public list of labels; the last one is the positive class of the rates.
    epsilon, delta : the budget of the measurement (``delta=None``: 1/n²); ``epsilon=inf``: exact, no noise.
    privacy_unit : ``"sensitive"`` (one person's s replaced) or ``"record"`` (one person added or removed).
    accountant : ``"pld"`` or ``"rdp"``, on which σ is calibrated and ``privacy_spent_`` reported.
    confidence, n_bootstrap, random_state : the intervals' level, replicates and public seed.
    sampling : whether the intervals include the sampling of rows (population value) or only the noise.
    y_score : one score per person (a probability of the positive class, ...), clipped to ``score_range``.
    score_range : the public range ``(lo, hi)`` of the scores.
    mechanism : ``"auto"`` (the mechanism of smaller predicted noise variance, from public inputs), ``"gaussian"``
        or ``"laplace"``.
    secure_mode : draw the noise exactly on a grid from the OS's CSPRNG (:mod:`dpfair.privacy.samplers`), not in
        floating point, whose low-order bits can betray a small count (Mironov, CCS 2012); the scale is raised by
        the grid's calibration (``noise_stds_`` says by how much) and the random state cannot be made reproducible.

    What it holds after construction: ``n_``, the number of rows (public); ``measurement_plan_``, the
    :class:`~dpfair.measurement.plan.MeasurementPlan` (tables, readings, weights); ``noisy_tables_``,
    each released table by name (floats, before clipping; with public margins group 1's rows are the public
    totals less group 0's); ``mechanism_``, the mechanism used; ``noise_multipliers_`` and ``noise_stds_``, each
    table's σ_t and noise std per cell (``σ_t·bound_t``, Laplace ``√2·σ_t·bound_t``); ``noise_multiplier_``, σ, the
    multiplier of the one Gaussian the release is equivalent to (``(Σ σ_t⁻²)^(-1/2)``; Laplace: the one Laplace
    spending the same pure ε, ``(Σ σ_t⁻¹)⁻¹``; σ_t itself for a one-table plan);
    ``noise_std_``, the largest noise std of a released count (every count cell's when one count table is
    released); ``noisy_table_``, a table ``[group, y, ŷ]``: the released full table when the plan releases it,
    otherwise built from the released marginals (each group's total, the inverse-variance mean of the marginals'
    totals, spread over ``[y, ŷ]`` as the product of the released y and ŷ shares, uniform over a dimension none
    releases) — post-processing, for display and the bootstrap's rows, not what the metrics read; ``table_``,
    ``noisy_table_`` with negative counts clipped to 0, for display; and ``privacy_plan_`` (one part per table),
    ``privacy_ledger_`` (one entry per table), ``privacy_spent_``, as on a private estimator (a Laplace plan's is
    ``(ε, 0)``: pure DP). The metrics read the released tables as ``measurement_plan_.readings`` say: the
    unclipped reads summed, then clipped to the metric's range.
    """

    def __init__(self, metrics, y_true, y_pred, sensitive_features, *, groups=None, classes=(0, 1), epsilon,
                 delta=None, privacy_unit="sensitive", accountant="pld", confidence=0.95, n_bootstrap=1000,
                 random_state=None, sampling=True, y_score=None, score_range=(0.0, 1.0), mechanism="auto",
                 secure_mode=False):
        self._settings(metrics, epsilon, mechanism, secure_mode, privacy_unit, confidence, n_bootstrap,
                       random_state, sampling, score_range)
        lo, hi = self.score_range
        y_true = check_1d(y_true, "y_true")
        n = len(y_true)
        if n == 0:
            raise ValueError("y_true is empty; pass one entry per person")
        needs_pred = any(m not in SCORE_METRIC_NAMES + ("count",) for m in self.metrics)
        if y_pred is None and needs_pred:
            raise ValueError("y_pred is None; pass the predictions (only count, mean_prediction and brier_score "
                             "do without them)")
        y_pred = None if y_pred is None else check_1d(y_pred, "y_pred")
        s = check_1d(sensitive_features, "sensitive_features")
        if (y_pred is not None and len(y_pred) != n) or len(s) != n:
            raise ValueError(f"y_true, y_pred and sensitive_features have {n}, "
                             f"{n if y_pred is None else len(y_pred)} and {len(s)} entries; "
                             "pass one entry per person in each")
        scored = [m for m in self.metrics if m in SCORE_METRIC_NAMES]
        if scored and y_score is None:
            raise ValueError(f"{scored[0]} needs y_score; pass one score per person (clipped to score_range)")
        if groups is None:
            if math.isfinite(self.epsilon):
                raise ValueError("groups is required at a finite epsilon (the list of groups is public, not read "
                                 "from the data); pass groups=[...]")
            groups = np.unique(s)
        self._lists(groups, classes)
        g = _codes(s, self.groups_, "sensitive_features", "groups")
        yt = _codes(y_true, self.classes_, "y_true", "classes")
        yp = np.zeros(n, dtype=np.int64) if y_pred is None else _codes(y_pred, self.classes_, "y_pred", "classes")
        k, l = len(self.groups_), len(self.classes_)
        cube = np.bincount((g * l + yt) * l + yp, minlength=k * l * l).reshape(k, l, l)
        sums = {}
        if scored:
            score = check_1d(y_score, "y_score", n)
            try:
                score = np.asarray(score, dtype=np.float64)
            except (TypeError, ValueError):
                raise ValueError(f"y_score must hold one number per person ({n}); pass scores, not labels") from None
            if not np.all(np.isfinite(score)):  # a NaN would make its group's released sum NaN, whatever the noise
                raise ValueError("y_score has values that are not finite numbers; fill or drop them first")
            score = np.clip(score, lo, hi)
            sums[SCORES] = lambda: np.bincount(g, weights=score - lo, minlength=k)
            sums[SQUARED] = lambda: np.bincount(g, weights=(score - (yt == l - 1)) ** 2, minlength=k)
        del s, yp
        self._release(cube, sums, delta, accountant, predictions=y_pred is not None)

    @classmethod
    def from_counts(cls, metrics, counts, *, groups, classes=(0, 1), epsilon, delta=None, privacy_unit="sensitive",
                    accountant="pld", confidence=0.95, n_bootstrap=1000, random_state=None, sampling=True,
                    mechanism="auto", secure_mode=False) -> PrivateMetricFrame:
        """The frame of the exact table ``counts[g, y, ŷ]`` (the number of people of each public group, label and
        prediction, in the order of ``groups`` and ``classes``), released as the constructor releases the rows'
        table: the same plan, the same privacy argument (one person moves one cell), the same figures.

        For tables counted elsewhere, chunk by chunk or on a cluster (:func:`~dpfair.measurement.counts.
        count_predictions`), so that no row need be in memory at once. The counts are private (exact): this call
        is their one accounted release. Score metrics need each person's score: measure them from the rows."""
        self = cls.__new__(cls)
        self._settings(metrics, epsilon, mechanism, secure_mode, privacy_unit, confidence, n_bootstrap,
                       random_state, sampling, (0.0, 1.0))
        scored = [m for m in self.metrics if m in SCORE_METRIC_NAMES]
        if scored:
            raise ValueError(f"{scored[0]} needs each person's score, which a table of counts does not hold; "
                             "measure it from the rows (PrivateMetricFrame(..., y_score=))")
        self._lists(groups, classes)
        k, l = len(self.groups_), len(self.classes_)
        cube = np.asarray(counts)
        if cube.shape != (k, l, l):
            raise ValueError(f"counts must have shape (groups, classes, classes) = ({k}, {l}, {l}), got "
                             f"{cube.shape}")
        if not (np.issubdtype(cube.dtype, np.integer) and (cube >= 0).all()):
            raise ValueError("counts must be non-negative integers: the number of people in each cell")
        if cube.sum() == 0:
            raise ValueError("counts are all zero; measure a table with one row per person")
        self._release(cube, {}, delta, accountant, predictions=True)
        return self

    def _settings(self, metrics, epsilon, mechanism, secure_mode, privacy_unit, confidence, n_bootstrap,
                  random_state, sampling, score_range) -> None:
        """The public settings, checked (what the rows or the counts do not decide)."""
        names = [metrics] if isinstance(metrics, str) else list(metrics)
        if not names:
            raise ValueError("metrics is empty; name at least one of " + ", ".join(METRICS))
        names = [_ALIASES.get(m, m) if isinstance(m, str) else m for m in names]
        unknown = [m for m in names if m not in METRICS + SCORE_METRIC_NAMES]
        if unknown:
            raise ValueError(f"unknown metric {unknown[0]!r}; choose among {', '.join(METRICS + SCORE_METRIC_NAMES)}")
        self.metrics = list(dict.fromkeys(names))
        self.epsilon = check_epsilon(epsilon, budget=True)
        self.mechanism = check_mechanism(mechanism)
        if not isinstance(secure_mode, (bool, np.bool_)):
            raise ValueError(f"secure_mode must be True or False, got {secure_mode!r}")
        self.secure_mode = bool(secure_mode)
        unit = check_privacy_unit(privacy_unit)
        self.privacy_unit = unit.value
        if not 0.0 < float(confidence) < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}; e.g. 0.95")
        self.confidence = float(confidence)
        self.n_bootstrap = check_positive(n_bootstrap, "n_bootstrap", integer=True)
        self.random_state = random_state
        self.sampling = bool(sampling)
        self.score_range = _score_range(score_range)

    def _lists(self, groups, classes) -> None:
        """The public group and class lists, checked."""
        self.groups_ = _public_list(groups, "groups")
        self.classes_ = _public_list(classes, "classes")
        if len(self.classes_) < 2:
            raise ValueError(f"classes needs at least two labels, got {self.classes_.tolist()}")
        if "brier_score" in self.metrics and len(self.classes_) != 2:
            raise ValueError(f"brier_score needs two classes, got {len(self.classes_)}; measure it one class "
                             "against the rest")

    def _release(self, cube: np.ndarray, sums: dict, delta, accountant, *, predictions: bool) -> None:
        """The one accounted measurement of the exact table ``cube[g, y, ŷ]`` (and of the score sums ``sums``,
        each a function computing one table, called only if the plan releases it), then its post-processing."""
        k, l = len(self.groups_), len(self.classes_)
        n = int(cube.sum())
        scored = [m for m in self.metrics if m in SCORE_METRIC_NAMES]
        unit = check_privacy_unit(self.privacy_unit)
        self.n_ = n  # public, as everywhere in dpfair (the guide's privacy model)
        self.delta_ = 1.0 / n ** 2 if delta is None else float(delta)
        if not 0.0 < self.delta_ < 1.0:
            if delta is None:  # n = 1: the default 1/n² is 1
                raise ValueError(f"the default delta 1/n² is {self.delta_:g} for {n} row(s); pass delta (--delta) "
                                 "below 1 (or measure more rows)")
            raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r}; 1/n² is a common choice")

        need = 64 * self.n_bootstrap * k * l * l
        if need > MAX_REPLICATE_BYTES:
            raise ValueError(f"the intervals of {k} groups × {l} classes over {self.n_bootstrap} replicates need about "
                             f"{need / 1024**3:.1f} GiB (at most {MAX_REPLICATE_BYTES / 1024**3:g}); lower n_bootstrap "
                             f"(--bootstrap) to {max(1, MAX_REPLICATE_BYTES // (64 * k * l * l))} or fewer, or merge "
                             "groups")

        # ---- the plan: public inputs only ----
        available = COUNT_TABLES if predictions else (LABELS, GROUPS)
        available = available + tuple(SCORE_METRICS[m] for m in scored)
        plan = MeasurementPlan.choose(self.metrics, l, tables=available).using(
            self.mechanism, epsilon=self.epsilon, delta=self.delta_, unit=unit, groups=k, accountant=accountant)
        self.measurement_plan_ = plan
        self.mechanism_ = plan.mechanism
        self.privacy_plan_ = plan.privacy_plan(pure_unit=unit if self.secure_mode else None)
        sigmas = plan.noise_multipliers(self.epsilon, self.delta_, unit, accountant)
        bounds = plan.bounds(unit, self.score_range)

        # ---- the one accounted measurement: one release per table ----
        cube = cube.astype(np.float64)
        exact = {FULL: cube, PREDICTIONS: cube.sum(axis=1), LABELS: cube.sum(axis=2), GROUPS: cube.sum(axis=(1, 2))}
        exact.update({t: table() for t, table in sums.items() if t in plan.tables})
        self.privacy_ledger_ = PrivacyLedger(unit)
        with ReleaseSession(self.privacy_ledger_, plan=self.privacy_plan_, sigmas=sigmas,
                            key=("PrivateMetricFrame", self.random_state), secure=self.secure_mode) as session:
            self.noisy_tables_, self.noise_multipliers_, self.noise_stds_ = {}, {}, {}
            spread = math.sqrt(2.0) if plan.mechanism == "laplace" else 1.0  # a Laplace of scale b has std √2·b
            for t in plan.tables:
                release = session.release(t)
                margins = plan.public_margins and t in COUNT_TABLES
                if margins:
                    # group 0's slice released; group 1's is the public total (over groups: y, ŷ only) less it
                    first = release.noisy_sum(exact[t][0], bound=bounds[t])
                    self.noisy_tables_[t] = np.stack([first, exact[t].sum(axis=0) - first])
                else:
                    self.noisy_tables_[t] = release.noisy_sum(exact[t], bound=bounds[t])
                self.noise_multipliers_[t] = float(sigmas[t])
                block = exact[t][0] if margins else exact[t]
                self.noise_stds_[t] = float(spread * release.noise_scale(bounds[t], dim=np.size(block)))
        exact_cube = cube if math.isinf(self.epsilon) and predictions else None
        del cube, exact, sums
        power = 1 if plan.mechanism == "laplace" else 2  # one Laplace spends Σ_t 1/σ_t; one Gaussian (Σ σ_t⁻²)^-½
        inverse = sum(v ** -power for v in sigmas.values() if v > 0)
        self.noise_multiplier_ = float(inverse ** (-1.0 / power)) if inverse > 0 else 0.0
        self.noise_std_ = max(self.noise_stds_[t] for t in plan.tables if t in COUNT_TABLES) \
            if any(t in COUNT_TABLES for t in plan.tables) else 0.0
        eps = self.privacy_ledger_.epsilon(self.delta_, accountant)
        pure = plan.pure_epsilon(sigmas, unit)
        # a Laplace plan is pure DP: (Σ_t ε_t, 0), a stronger claim than the accountant's ε at δ
        self.privacy_spent_ = (pure, 0.0) if pure is not None and math.isfinite(self.epsilon) else \
            (eps, self.delta_ if math.isfinite(eps) else 0.0)

        # ---- post-processing of the released tables only ----
        self._bounds = bounds
        self._tables = {t: np.clip(v, 0.0, None) for t, v in self.noisy_tables_.items()}
        # at ε = ∞ nothing is private: the table is the exact one (every released table is its marginal)
        self.noisy_table_ = exact_cube if exact_cube is not None else self._joint_table()
        self.table_ = np.clip(self.noisy_table_, 0.0, None)
        self._boot = self._bootstrap(np.random.default_rng(self.random_state))
        self.flags = self._flags()
        flagged = [(grp, m) for grp in self.flags.index for m in self.flags.columns if self.flags.loc[grp, m]]
        if flagged:
            shown = ", ".join(f"{m} of group {grp!r}" for grp, m in flagged[:6])
            if self.noise_std_ > 0:
                text = (f"too few people behind {shown} for ε={self.epsilon:g} (noise std {self.noise_std_:.3g} per "
                        "cell): not a confident number; raise epsilon or merge small groups")
            else:  # exact counts (ε = ∞): raising ε cannot help, only more people can
                text = (f"too few people behind {shown} (exact counts, no noise): no value or not a confident "
                        "number; merge small groups or measure on more rows")
            warnings.warn(text, UtilityWarning, stacklevel=3)

    # ---- the released tables, read ----------------------------------------------------------------------
    def _joint_table(self) -> np.ndarray:
        """``[g, y, ŷ]`` from the released tables: the full table, or the marginals' product (class docstring)."""
        if FULL in self.noisy_tables_:
            return np.asarray(self.noisy_tables_[FULL], dtype=np.float64)
        k, l = len(self.groups_), len(self.classes_)
        weights, totals = [], []
        for t in (PREDICTIONS, LABELS, GROUPS):
            if t in self._tables:
                c = 1 if t == GROUPS else l
                weights.append(1.0 / max(self.noise_stds_[t] ** 2 * c, 1e-300))
                totals.append(self._tables[t].reshape(k, -1).sum(axis=1))
        total = np.average(np.stack(totals), axis=0, weights=weights)

        def shares(t):
            if t not in self._tables:
                return np.full((k, l), 1.0 / l)
            v = self._tables[t]
            sums = v.sum(axis=1, keepdims=True)
            return np.divide(v, sums, out=np.full_like(v, 1.0 / l), where=sums > 0)

        return total[:, None, None] * shares(LABELS)[:, :, None] * shares(PREDICTIONS)[:, None, :]

    def _reads(self, tables: dict, metric: str, overall: bool = False) -> tuple:
        """``metric``'s numerator and denominator (``None`` for a count) per group (``overall``: on everyone),
        linear reads of ``tables`` (released or replicated, unclipped)."""
        reading = self.measurement_plan_.best_reading(metric)
        if reading is None:
            raise ValueError(f"{metric} is not among the measured metrics and the released tables do not give it; "
                             f"add it to metrics=")
        num_mask, den_mask = metric_masks(len(self.classes_))[metric]
        num = np.asarray(read(tables, reading[0], num_mask), dtype=np.float64)
        den = None if den_mask is None else np.asarray(read(tables, reading[1], den_mask), dtype=np.float64)
        if overall:
            num = num.sum(axis=-1)
            den = None if den is None else den.sum(axis=-1)
        return num, den

    def _values(self, tables: dict, metric: str, overall: bool = False) -> np.ndarray:
        """``metric`` per group (``overall``: on everyone) from ``tables`` (released or replicated): the ratio of
        the unclipped sums of cells its reading takes, clipped to the metric's range (a count to ``[0, n]``; a
        rate to ``[0, 1]``; NaN where the denominator is not positive). Summing before clipping keeps a small
        group's count unbiased: clipping each noisy cell at 0 first would add the noise's positive parts."""
        num, den = self._reads(tables, metric, overall)
        if den is None:
            return np.clip(num, 0.0, float(self.n_))
        with np.errstate(divide="ignore", invalid="ignore"):
            value = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        if metric in SCORE_METRIC_NAMES:
            c = self._range(metric)
            value = np.clip(value, 0.0, c) + (self.score_range[0] if metric == "mean_prediction" else 0.0)
        else:
            value = np.clip(value, 0.0, 1.0)
        return value

    def _range(self, metric: str) -> float:
        """c, the range of a metric's per-person values (1 for a rate; see the module docstring)."""
        lo, hi = self.score_range
        if metric == "mean_prediction":
            return hi - lo
        if metric == "brier_score":
            return max(lo * lo, hi * hi, (lo - 1) ** 2, (hi - 1) ** 2)
        return 1.0

    # ---- the bootstrap, on released values only ----------------------------------------------------------
    def _bootstrap(self, rng: np.random.Generator) -> dict:
        """Replicate tables ``{name: (B, ...)}``: rows redrawn (when ``sampling``) and fresh noise of each table's
        own std (module docstring)."""
        B = self.n_bootstrap
        k, l = self.table_.shape[0], self.table_.shape[1]
        out = {t: np.broadcast_to(v, (B,) + v.shape).copy() for t, v in self.noisy_tables_.items()}
        if self.sampling:
            flat = self.table_.reshape(k, l * l)
            totals = np.rint(flat.sum(axis=1)).astype(np.int64)
            sums = flat.sum(axis=1, keepdims=True)
            shares = np.divide(flat, sums, out=np.full_like(flat, 1.0 / (l * l)), where=sums > 0)
            rows = rng.multinomial(totals, shares, size=(B, k)).astype(np.float64)
            deviation = (rows - totals[:, None] * shares).reshape(B, k, l, l)
            moved = {FULL: deviation, PREDICTIONS: deviation.sum(axis=2), LABELS: deviation.sum(axis=3),
                     GROUPS: deviation.sum(axis=(2, 3))}
            for t in out:
                if t in COUNT_TABLES:
                    out[t] += moved[t]
            sizes = np.maximum(totals, 0).astype(np.float64)
            for m in self.metrics:
                t = SCORE_METRICS.get(m)
                if t is None or t not in out:
                    continue
                c = self._range(m)
                mean = np.clip(self._values(self.noisy_tables_, m) - (self.score_range[0] if m == "mean_prediction"
                                                               else 0.0), 0.0, c)
                var = np.nan_to_num(sizes * mean * (c - mean))
                out[t] += np.sqrt(var) * rng.standard_normal((B, k))
        laplace = self.measurement_plan_.mechanism == "laplace"
        for t, values in out.items():
            shape = values.shape
            margins = self.measurement_plan_.public_margins and t in COUNT_TABLES
            if margins:  # group 1's noise is minus group 0's (public totals)
                shape = (B, 1) + values.shape[2:]
            if laplace:
                noise = rng.laplace(0.0, self.noise_stds_[t] / math.sqrt(2.0), shape)
            else:
                noise = self.noise_stds_[t] * rng.standard_normal(shape)
            values += np.concatenate([noise, -noise], axis=1) if margins else noise
        return out

    def _quantiles(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = (1.0 - self.confidence) / 2.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices (an empty denominator)
            return np.nanquantile(values, a, axis=0), np.nanquantile(values, 1.0 - a, axis=0)

    def _flags(self) -> pd.DataFrame:
        """Each metric's :meth:`_flag_column` (rows: the groups)."""
        return pd.DataFrame({m: self._flag_column(m) for m in self.metrics}, index=self._index())

    def _flag_column(self, metric: str) -> np.ndarray:
        """Per group, whether ``metric`` is not a confident number: its released denominator (a count: the count
        itself) is at most :data:`FLAG_STDS` noise stds, its interval is wider than :data:`FLAG_WIDTH` of the
        metric's range, or it has no value."""
        num, den = self._reads(self.noisy_tables_, metric)
        noise = self._noise(metric)
        if den is None:
            return num <= FLAG_STDS * float(noise.sd(0.0))
        small = den <= FLAG_STDS * float(noise.denominator().sd(0.0))
        value = self._values(self.noisy_tables_, metric)
        if metric in self.metrics:
            lo, hi = (self._interval_table[(metric, end)].to_numpy() for end in ("low", "high"))
        else:
            lo, hi = self._mechanism_intervals(metric, self.confidence)
        return small | (hi - lo > FLAG_WIDTH * self._range(metric)) | ~np.isfinite(value)

    # ---- fairlearn's face ---------------------------------------------------------------------------------
    def _index(self) -> pd.Index:
        return pd.Index(self.groups_, name="sensitive_feature_0")

    @property
    def by_group(self) -> pd.DataFrame:
        """Each metric per group (rows: the public groups, in the order given)."""
        return pd.DataFrame({m: self._values(self.noisy_tables_, m) for m in self.metrics}, index=self._index())

    @property
    def overall(self) -> pd.Series:
        """Each metric on everyone (the released tables summed over groups)."""
        return pd.Series({m: float(self._values(self.noisy_tables_, m, overall=True)) for m in self.metrics})

    def group_min(self) -> pd.Series:
        return self.by_group.min()

    def group_max(self) -> pd.Series:
        return self.by_group.max()

    def _named(self, metrics) -> list[str]:
        """``metrics`` (default: the measured ones) under their canonical names."""
        if metrics is None:
            return list(self.metrics)
        return [_ALIASES.get(m, m) for m in ([metrics] if isinstance(metrics, str) else metrics)]

    def difference(self, metrics=None) -> pd.Series:
        """Largest minus smallest group value of each metric (fairlearn's ``method="between_groups"``);
        ``metrics``: which (default: the measured ones; any other the released tables give)."""
        return pd.Series({m: float(_between(self._values(self.noisy_tables_, m), "difference"))
                          for m in self._named(metrics)})

    def ratio(self, metrics=None) -> pd.Series:
        """Smallest over largest group value of each metric (fairlearn's ``method="between_groups"``);
        ``metrics`` as for :meth:`difference`."""
        return pd.Series({m: float(_between(self._values(self.noisy_tables_, m), "ratio")) for m in self._named(metrics)})

    # ---- fairness notions ---------------------------------------------------------------------------------
    def notion_difference(self, notion) -> float:
        """A fairness notion's difference on the released tables: the largest between-groups difference of the
        rates it compares (``notion``: a registered name or a :class:`~dpfair.fairness.notions.Notion`; its
        :meth:`~dpfair.fairness.notions.Notion.difference`, which reads :meth:`difference`). For two labels it is
        the notion's pairwise violation of the released rates; for more, the positive class against the rest
        (fairlearn's reading)."""
        return get_notion(notion).difference(self)

    def notion_interval(self, notion) -> tuple[float, float]:
        """The interval of :meth:`notion_difference` (the notion's
        :meth:`~dpfair.fairness.notions.Notion.difference_interval`: :meth:`max_difference_interval` of its
        rates)."""
        return get_notion(notion).difference_interval(self)

    @property
    def demographic_parity_difference(self) -> float:
        """fairlearn's ``demographic_parity_difference``: the difference of the groups' selection rates
        (``notion_difference("demographic_parity")``)."""
        return self.notion_difference("demographic_parity")

    @property
    def equalized_odds_difference(self) -> float:
        """fairlearn's ``equalized_odds_difference``: the larger difference of true and false positive rates
        (``notion_difference("equalized_odds")``)."""
        return self.notion_difference("equalized_odds")

    # ---- intervals ----------------------------------------------------------------------------------------
    @property
    def intervals(self) -> pd.DataFrame:
        """Per group, each metric's ``(low, high)`` interval at ``confidence`` (columns ``(metric, "low"/"high")``),
        by inverting the mechanism (:mod:`~dpfair.measurement.intervals`: a count from the law of its
        noise, a rate or mean by Fieller's test inversion, with the rows' sampling when ``sampling``): it holds at
        its level for every group size, down to one person (computed once; each call returns a copy)."""
        return self._interval_table.copy()

    @functools.cached_property
    def _interval_table(self) -> pd.DataFrame:
        cols = {}
        for m in self.metrics:
            lo, hi = self._mechanism_intervals(m, self.confidence)
            cols[(m, "low")], cols[(m, "high")] = lo, hi
        return pd.DataFrame(cols, index=self._index())

    def overall_interval(self) -> pd.DataFrame:
        """Each metric's overall interval (as :attr:`intervals`, on everyone): rows the metrics, columns ``low``,
        ``high``."""
        rows = [[float(v[0]) for v in self._mechanism_intervals(m, self.confidence, overall=True)]
                for m in self.metrics]
        return pd.DataFrame(rows, index=self.metrics, columns=["low", "high"])

    def _noise(self, metric: str, overall: bool = False) -> LinearNoise:
        """The law of the noise of ``N̂ − p·D̂`` for ``metric`` (one group's, or everyone's): the released cells
        its reading sums, in classes of equal coefficients (every group's law is the same: with public margins
        group 1's is group 0's negated, a symmetric law). On everyone, a count table released with public margins
        cancels (group 1's draws are minus group 0's)."""
        num_table, den_table = self.measurement_plan_.best_reading(metric)
        num_mask, den_mask = metric_masks(len(self.classes_))[metric]
        weights = {}
        for side, table, mask in ((0, num_table, num_mask), (1, den_table, den_mask)):
            if mask is None:
                continue
            w = slice_weights(table, mask)
            pair = weights.setdefault(table, np.zeros((2, w.size)))
            pair[side] += w
        classes = {}
        k = len(self.groups_)
        for table, (a, b) in weights.items():
            margins = self.measurement_plan_.public_margins and table in COUNT_TABLES
            if overall and margins:
                continue
            for pair in zip(a, b):
                if pair != (0.0, 0.0):
                    key = (table, *pair)
                    classes[key] = classes.get(key, 0) + (k if overall else 1)
        keys = sorted(classes)
        return LinearNoise(tuple(float(key[1]) for key in keys), tuple(float(key[2]) for key in keys),
                           tuple(classes[key] for key in keys), tuple(self.noise_stds_[key[0]] for key in keys),
                           self.measurement_plan_.mechanism == "laplace")

    def _mechanism_intervals(self, metric: str, confidence: float, overall: bool = False) -> tuple:
        """``(low, high)`` arrays (per group, or of length 1 on everyone) at ``confidence`` for ``metric``."""
        num, den = self._reads(self.noisy_tables_, metric, overall)
        num, den = np.atleast_1d(num), None if den is None else np.atleast_1d(den)
        noise = self._noise(metric, overall)
        rng = np.random.default_rng(self.random_state)
        n = float(self.n_)
        if den is None:
            return count_intervals(num, noise, confidence=confidence, upper=n, rng=rng)
        c = self._range(metric)
        lo, hi = ratio_intervals(num, den, noise, confidence=confidence, sampling=self.sampling, upper=n, rng=rng,
                                 scale=c, binomial=metric not in SCORE_METRIC_NAMES)
        shift = self.score_range[0] if metric == "mean_prediction" else 0.0
        return lo + shift, hi + shift

    def _difference_interval(self, metric: str) -> tuple[float, float]:
        """The interval of a metric's between-groups difference (see :meth:`difference_interval`)."""
        if self._flag_column(metric).any():
            return self._bonferroni_spread([metric])
        values = self._values(self._boot, metric)
        if values.shape[-1] != 2:
            return self._spread_interval([metric])
        lo, hi = (float(v) for v in self._quantiles(values[..., 1] - values[..., 0]))
        if not (math.isfinite(lo) and math.isfinite(hi)):
            return math.nan, math.nan
        ends = sorted((abs(lo), abs(hi)))
        return (0.0 if lo <= 0.0 <= hi else ends[0]), ends[1]

    def _spread_interval(self, metrics) -> tuple[float, float]:
        """The interval of θ = max over ``metrics`` of (max − min over groups).

        θ is the largest ``|d_ij|`` over the pairs of groups i < j of every metric, ``d_ij = r_i − r_j``. Lower
        end: ``max_ij (|d̂_ij| − c·sd_ij)`` (at least 0), with ``d̂`` the released differences, ``sd_ij`` their
        bootstrap standard deviations and c the ``1 − α/2`` quantile over the replicates of
        ``max_ij |d*_ij − d̂_ij| / sd_ij`` (simultaneous over the pairs: when every ``|d_ij|`` is above its bound,
        so is θ ≥ each of them). Upper end: the ``1 − α/2`` percentile of θ on the replicates (max − min of noisy
        rates is biased upward, so this end errs wide). Coverage ≥ 1 − α up to the bootstrap's error, and
        conservative: the percentile interval of θ alone misses a θ near 0 almost always (max − min of noisy
        rates is never near 0; results/measurement/). With a flagged group among them: :meth:`_bonferroni_spread`."""
        if any(self._flag_column(m).any() for m in metrics):
            return self._bonferroni_spread(metrics)
        alpha = 1.0 - self.confidence
        k = len(self.groups_)
        i, j = np.triu_indices(k, 1)
        hat = np.concatenate([self._values(self.noisy_tables_, m)[i] - self._values(self.noisy_tables_, m)[j] for m in metrics])
        boot = [self._values(self._boot, m) for m in metrics]
        pairs = np.concatenate([b[:, i] - b[:, j] for b in boot], axis=1)
        theta = np.max(np.stack([_between(b, "difference") for b in boot]), axis=0)
        keep = np.isfinite(hat) & np.isfinite(pairs).any(axis=0)  # pairs with a released value and replicates
        if not keep.any() or not np.isfinite(theta).any():
            return math.nan, math.nan
        hat, pairs = hat[keep], pairs[:, keep]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a pair with no finite replicate
            sd = np.nanstd(pairs, axis=0)
            sd = np.where(sd > 0, sd, np.finfo(float).tiny)
            z = np.nanmax(np.abs(pairs - hat) / sd, axis=1)
            c = float(np.nanquantile(z, 1.0 - alpha / 2.0))
            low = max(0.0, float(np.max(np.abs(hat) - c * sd)))
            high = float(np.nanquantile(theta, 1.0 - alpha / 2.0))
        return low, max(low, high)

    def _bonferroni_spread(self, metrics) -> tuple[float, float]:
        """θ = max over ``metrics`` of (max − min over groups), from the per-group intervals of the mechanism at
        level ``1 − α/(k·|metrics|)`` each: when all of them hold (probability ≥ 1 − α, the union bound),
        ``max_i low_i − min_j high_j ≤ θ ≤ max_i high_i − min_j low_j`` for each metric. Valid at every group size
        (the bootstrap is not, for a group whose noise swamps its denominator), and wider than the bootstrap's for
        large groups: used when a group is flagged."""
        level = 1.0 - (1.0 - self.confidence) / (len(self.groups_) * len(metrics))
        low, high = 0.0, 0.0
        for m in metrics:
            lo, hi = self._mechanism_intervals(m, level)
            low = max(low, float(np.max(lo) - np.min(hi)))
            high = max(high, float(np.max(hi) - np.min(lo)))
        return low, max(low, high)

    def difference_interval(self) -> pd.DataFrame:
        """Each metric's between-groups difference interval: rows the metrics, columns ``low``, ``high``.

        Two groups: the percentile interval of the signed difference (second group − first) on the bootstrap
        replicates, folded onto the absolute difference (``[0, max |end|]`` when it holds 0): it covers ``|d|``
        whenever it covers ``d``, so a difference near 0 — where max − min of noisy rates is biased upward and its
        own percentile interval would exclude 0 — is covered too. More groups: simultaneous bounds on the pairs'
        differences below, the percentile of max − min above (``_spread_interval``; conservative). When a group is
        flagged for the metric, the bootstrap does not hold (its replicates re-noise an estimate the noise
        dominates): the interval comes from the mechanism's per-group intervals (``_bonferroni_spread``)."""
        return pd.DataFrame([self._difference_interval(m) for m in self.metrics], index=self.metrics,
                            columns=["low", "high"])

    def max_difference_interval(self, metrics) -> tuple[float, float]:
        """The interval of the largest between-groups difference of ``metrics`` (what a notion comparing them
        reads, :meth:`notion_interval`). One metric: its row of :meth:`difference_interval`. Several: a
        simultaneous lower bound on every pair's absolute difference of every metric, and the percentile of the
        largest difference on the replicates above (``_spread_interval``; with two groups too, where the
        percentile interval of the larger of two absolute differences misses 0 as max − min does); from the
        per-group intervals at Bonferroni level when a group is flagged for one of them."""
        names = list(dict.fromkeys(self._named(metrics)))
        if not names:
            raise ValueError("max_difference_interval needs at least one metric")
        return self._difference_interval(names[0]) if len(names) == 1 else self._spread_interval(names)

    def demographic_parity_interval(self) -> tuple[float, float]:
        """The interval of :attr:`demographic_parity_difference` (as :meth:`difference_interval`;
        ``notion_interval("demographic_parity")``)."""
        return self.notion_interval("demographic_parity")

    def equalized_odds_interval(self) -> tuple[float, float]:
        """The interval of :attr:`equalized_odds_difference`, the larger of the true and false positive rates'
        differences (:meth:`max_difference_interval` of both; ``notion_interval("equalized_odds")``)."""
        return self.notion_interval("equalized_odds")


def _score_range(score_range) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise ValueError(f"score_range must be two numbers (lo, hi), got {score_range!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"score_range must be two finite numbers lo < hi, got {score_range!r}; e.g. (0, 1)")
    return lo, hi


def _public_list(values, name: str) -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty list of values, got {values!r}")
    if len(pd.unique(arr)) != len(arr):
        raise ValueError(f"{name} lists a value twice ({arr.tolist()[:10]}); list each once")
    return arr


def _codes(values: np.ndarray, public: np.ndarray, name: str, list_name: str) -> np.ndarray:
    codes = np.asarray(pd.Index(public).get_indexer(values), dtype=np.int64)
    if np.any(codes < 0):
        raise ValueError(f"{name} has values outside {list_name}={public.tolist()[:10]}; declare every value in "
                         f"{list_name}= or fix the data")
    return codes

