"""A differentially private ``MetricFrame``: per-group classification metrics from one noisy contingency table.

:class:`PrivateMetricFrame` releases the table ``counts[g, y, ŷ]`` (k public groups × l classes × l classes)
once, with Gaussian noise, through dpfair's release path (a one-part :class:`~dpfair.privacy.PrivacyPlan`
calibrated on the accountant, a :class:`~dpfair.privacy.Release` drawing from a fresh
:class:`~dpfair.privacy.SecretRandom`, recorded on a :class:`~dpfair.privacy.PrivacyLedger`). Every figure it
reports (fairlearn's metric names, ``.overall``, ``.by_group``, ``.difference()``, ``.ratio()``, the intervals and
the flags) is computed from the released table alone: post-processing, no further privacy cost.

Sensitivity (the accountant's ``GaussianDpEvent(σ)`` covers two neighbours' sums at L2 distance ≤ ``bound``
under add/remove, ``2·bound`` under replace-one, with noise std ``σ·bound``):

- ``"record"`` (add/remove one person): one cell moves by 1, so distance 1: ``bound = 1``;
- ``"sensitive"`` (one person's s replaced, y and ŷ public): one count leaves cell (g, y, ŷ) and enters
  (g', y, ŷ), so distance √2 = 2·bound under replace-one: ``bound = 1/√2`` (noise std σ/√2).

Intervals: a parametric bootstrap on the released table. Each replicate draws (a) the rows again — for every
group a multinomial of its noisy total over its noisy cell shares (negative counts clipped to 0) — when
``sampling=True`` (the interval then targets the population value; ``False``: the exact value on these rows),
and (b) a fresh Gaussian of the release's std on every cell; the metric is recomputed and the interval is the
percentile one at ``confidence``. The bootstrap draws from a public generator seeded by ``random_state`` and
reads released values only (post-processing: no privacy cost). A group whose noisy denominator for a metric is
below ``5 ×`` its noise std, or whose interval is wider than 0.5, is flagged rather than reported as confident.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from dpfair.exceptions import UtilityWarning
from dpfair.privacy import (
    Part,
    PrivacyLedger,
    PrivacyPlan,
    PrivacyUnit,
    Release,
    SecretRandom,
    check_privacy_unit,
)
from dpfair.validation import check_1d, check_epsilon, check_positive

__all__ = ["METRICS", "PrivateMetricFrame"]

#: The part the frame releases.
TABLE = "contingency table"

#: The metrics the frame computes from the table (fairlearn's names), with aliases.
METRICS = ("count", "selection_rate", "true_positive_rate", "false_positive_rate", "true_negative_rate",
           "false_negative_rate", "accuracy", "error")
_ALIASES = {"accuracy_score": "accuracy", "error_rate": "error"}

#: A metric's denominator is flagged when its noisy value is below this many noise standard deviations.
FLAG_STDS = 5.0
#: ... or when the metric's interval is wider than this.
FLAG_WIDTH = 0.5


def _metric_parts(table: np.ndarray, pos: int) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """``{metric: (numerator, denominator)}`` of a table ``(..., l, l)`` indexed ``[y, ŷ]`` (count: no
    denominator). ``pos``: the index of the positive class; the others are negative."""
    total = table.sum(axis=(-2, -1))
    pred_pos = table[..., :, pos].sum(axis=-1)
    y_pos = table[..., pos, :].sum(axis=-1)
    tp = table[..., pos, pos]
    y_neg = total - y_pos
    fp = pred_pos - tp
    correct = np.trace(table, axis1=-2, axis2=-1)
    return {
        "count": (total, None),
        "selection_rate": (pred_pos, total),
        "true_positive_rate": (tp, y_pos),
        "false_positive_rate": (fp, y_neg),
        "true_negative_rate": (y_neg - fp, y_neg),
        "false_negative_rate": (y_pos - tp, y_pos),
        "accuracy": (correct, total),
        "error": (total - correct, total),
    }


#: How many cells each metric's denominator sums, per table of l classes (for its noise std).
def _denominator_cells(l: int) -> dict[str, int]:
    return {"selection_rate": l * l, "accuracy": l * l, "error": l * l, "true_positive_rate": l,
            "false_negative_rate": l, "false_positive_rate": (l - 1) * l, "true_negative_rate": (l - 1) * l}


def _metrics(table: np.ndarray, pos: int, names) -> dict[str, np.ndarray]:
    """Each metric of ``names`` on a table ``(..., l, l)`` (NaN where its denominator is 0)."""
    parts = _metric_parts(table, pos)
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in names:
            num, den = parts[name]
            out[name] = np.asarray(num, dtype=np.float64) if den is None else np.where(den > 0, num / den, np.nan)
    return out


def _between(values: np.ndarray, how: str) -> np.ndarray:
    """fairlearn's between-groups aggregates over the last axis (groups): difference = max − min,
    ratio = min / max (1 when both are 0)."""
    lo, hi = np.nanmin(values, axis=-1), np.nanmax(values, axis=-1)
    if how == "difference":
        return hi - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hi == 0, np.where(lo == 0, 1.0, np.nan), lo / hi)


class PrivateMetricFrame:
    """fairlearn's ``MetricFrame`` for a binary or multi-class classifier, released with (ε, δ)-DP.

    Parameters
    ----------
    metrics : a metric name or a list of them, among :data:`METRICS` (``accuracy_score`` is ``accuracy``).
    y_true, y_pred, sensitive_features : one entry per person.
    groups : the public list of groups (required unless ``epsilon=inf``: which groups exist is not released).
    classes : the public list of labels; the last one is the positive class of the rates.
    epsilon, delta : the budget of the one release (``delta=None``: 1/n²); ``epsilon=inf``: exact, no noise.
    privacy_unit : ``"sensitive"`` (one person's s replaced) or ``"record"`` (one person added or removed).
    accountant : ``"pld"`` or ``"rdp"``, on which σ is calibrated and ``privacy_spent_`` reported.
    confidence, n_bootstrap, random_state : the intervals' level, replicates and public seed.
    sampling : whether the intervals include the sampling of rows (population value) or only the noise.

    What it holds after construction: ``n_``, the number of rows (public); ``noisy_table_``, the released table
    ``[group, y, ŷ]`` (floats, before clipping); ``table_``, the table the metrics read (``noisy_table_`` with negative counts clipped to 0);
    ``noise_multiplier_`` and ``noise_std_``, σ and the noise std of every cell (``σ·bound``); and
    ``privacy_plan_``, ``privacy_ledger_``, ``privacy_spent_``, as on a private estimator.
    """

    def __init__(self, metrics, y_true, y_pred, sensitive_features, *, groups=None, classes=(0, 1), epsilon,
                 delta=None, privacy_unit="sensitive", accountant="pld", confidence=0.95, n_bootstrap=1000,
                 random_state=None, sampling=True):
        names = [metrics] if isinstance(metrics, str) else list(metrics)
        if not names:
            raise ValueError("metrics is empty; name at least one of " + ", ".join(METRICS))
        names = [_ALIASES.get(m, m) if isinstance(m, str) else m for m in names]
        unknown = [m for m in names if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric {unknown[0]!r}; choose among {', '.join(METRICS)}")
        self.metrics = list(dict.fromkeys(names))
        self.epsilon = check_epsilon(epsilon, budget=True)
        unit = check_privacy_unit(privacy_unit)
        self.privacy_unit = unit.value
        if not 0.0 < float(confidence) < 1.0:
            raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}; e.g. 0.95")
        self.confidence = float(confidence)
        self.n_bootstrap = check_positive(n_bootstrap, "n_bootstrap", integer=True)
        self.random_state = random_state
        self.sampling = bool(sampling)

        y_true = check_1d(y_true, "y_true")
        n = len(y_true)
        if n == 0:
            raise ValueError("y_true is empty; pass one entry per person")
        y_pred = check_1d(y_pred, "y_pred")
        s = check_1d(sensitive_features, "sensitive_features")
        if len(y_pred) != n or len(s) != n:
            raise ValueError(f"y_true, y_pred and sensitive_features have {n}, {len(y_pred)} and {len(s)} entries; "
                             "pass one entry per person in each")
        if groups is None:
            if math.isfinite(self.epsilon):
                raise ValueError("groups is required at a finite epsilon (the list of groups is public, not read "
                                 "from the data); pass groups=[...]")
            groups = np.unique(s)
        self.groups_ = _public_list(groups, "groups")
        self.classes_ = _public_list(classes, "classes")
        if len(self.classes_) < 2:
            raise ValueError(f"classes needs at least two labels, got {self.classes_.tolist()}")
        g = _codes(s, self.groups_, "sensitive_features", "groups")
        yt = _codes(y_true, self.classes_, "y_true", "classes")
        yp = _codes(y_pred, self.classes_, "y_pred", "classes")
        k, l = len(self.groups_), len(self.classes_)
        self.n_ = n  # public, as everywhere in dpfair (the guide's privacy model)
        self.delta_ = 1.0 / n ** 2 if delta is None else float(delta)
        if not 0.0 < self.delta_ < 1.0:
            raise ValueError(f"delta must lie strictly between 0 and 1, got {delta!r}; 1/n² is a common choice")

        # ---- the one accounted release ----
        table = np.bincount((g * l + yt) * l + yp, minlength=k * l * l).reshape(k, l, l).astype(np.float64)
        bound = 1.0 / math.sqrt(2.0) if unit is PrivacyUnit.SENSITIVE else 1.0
        self.privacy_plan_ = PrivacyPlan((Part(TABLE),))
        sigma = self.privacy_plan_.calibrate(self.epsilon, self.delta_, unit, accountant)[TABLE]
        self.privacy_ledger_ = PrivacyLedger(unit)
        release = Release(self.privacy_plan_[TABLE], sigma, SecretRandom(("PrivateMetricFrame", random_state)),
                          self.privacy_ledger_)
        self.noisy_table_ = release.noisy_sum(table, bound=bound)
        del table, g, yt, yp
        self.noise_multiplier_ = float(sigma)
        self.noise_std_ = float(release.noise_scale(bound))
        eps = self.privacy_ledger_.epsilon(self.delta_, accountant)
        self.privacy_spent_ = (eps, self.delta_ if math.isfinite(eps) else 0.0)

        # ---- post-processing of the released table only ----
        self.table_ = np.clip(self.noisy_table_, 0.0, None)
        self._pos = l - 1
        self._boot = self._bootstrap(np.random.default_rng(random_state))
        self.flags = self._flags()
        flagged = [(grp, m) for grp in self.flags.index for m in self.flags.columns if self.flags.loc[grp, m]]
        if flagged:
            shown = ", ".join(f"{m} of group {grp!r}" for grp, m in flagged[:6])
            warnings.warn(f"too few people behind {shown} for ε={self.epsilon:g} (noise std {self.noise_std_:.3g} "
                          "per cell): not a confident number; raise epsilon or merge small groups",
                          UtilityWarning, stacklevel=2)

    # ---- the bootstrap, on released values only ----------------------------------------------------------
    def _bootstrap(self, rng: np.random.Generator) -> np.ndarray:
        """Replicate tables ``(B, k, l, l)``: rows redrawn (when ``sampling``) and fresh noise of the release's std."""
        k, l = self.table_.shape[0], self.table_.shape[1]
        flat = self.table_.reshape(k, l * l)
        if self.sampling:
            totals = np.rint(flat.sum(axis=1)).astype(np.int64)
            sums = flat.sum(axis=1, keepdims=True)
            shares = np.divide(flat, sums, out=np.full_like(flat, 1.0 / (l * l)), where=sums > 0)
            rows = rng.multinomial(totals, shares, size=(self.n_bootstrap, k)).astype(np.float64)
        else:
            rows = np.broadcast_to(flat, (self.n_bootstrap, k, l * l))
        noisy = rows + self.noise_std_ * rng.standard_normal(rows.shape)
        return np.clip(noisy, 0.0, None).reshape(self.n_bootstrap, k, l, l)

    def _quantiles(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = (1.0 - self.confidence) / 2.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices (an empty denominator)
            return np.nanquantile(values, a, axis=0), np.nanquantile(values, 1.0 - a, axis=0)

    def _flags(self) -> pd.DataFrame:
        l = self.table_.shape[1]
        parts = _metric_parts(self.table_, self._pos)
        cells = _denominator_cells(l)
        width = self.intervals
        flags = {}
        for m in self.metrics:
            if m == "count":
                flags[m] = np.zeros(len(self.groups_), dtype=bool)
                continue
            den = parts[m][1]
            small = den <= FLAG_STDS * self.noise_std_ * math.sqrt(cells[m])
            wide = (width[(m, "high")] - width[(m, "low")]).to_numpy() > FLAG_WIDTH
            flags[m] = small | wide | ~np.isfinite(self.by_group[m].to_numpy())
        return pd.DataFrame(flags, index=self._index())

    # ---- fairlearn's face ---------------------------------------------------------------------------------
    def _index(self) -> pd.Index:
        return pd.Index(self.groups_, name="sensitive_feature_0")

    @property
    def by_group(self) -> pd.DataFrame:
        """Each metric per group (rows: the public groups, in the order given)."""
        values = _metrics(self.table_, self._pos, self.metrics)
        return pd.DataFrame({m: values[m] for m in self.metrics}, index=self._index())

    @property
    def overall(self) -> pd.Series:
        """Each metric on everyone (the table summed over groups)."""
        values = _metrics(self.table_.sum(axis=0), self._pos, self.metrics)
        return pd.Series({m: float(values[m]) for m in self.metrics})

    def group_min(self) -> pd.Series:
        return self.by_group.min()

    def group_max(self) -> pd.Series:
        return self.by_group.max()

    def difference(self) -> pd.Series:
        """Largest minus smallest group value of each metric (fairlearn's ``method="between_groups"``)."""
        values = _metrics(self.table_, self._pos, self.metrics)
        return pd.Series({m: float(_between(values[m], "difference")) for m in self.metrics})

    def ratio(self) -> pd.Series:
        """Smallest over largest group value of each metric (fairlearn's ``method="between_groups"``)."""
        values = _metrics(self.table_, self._pos, self.metrics)
        return pd.Series({m: float(_between(values[m], "ratio")) for m in self.metrics})

    @property
    def demographic_parity_difference(self) -> float:
        """fairlearn's ``demographic_parity_difference``: the difference of the groups' selection rates."""
        return float(_between(_metrics(self.table_, self._pos, ["selection_rate"])["selection_rate"], "difference"))

    @property
    def equalized_odds_difference(self) -> float:
        """fairlearn's ``equalized_odds_difference``: the larger difference of true and false positive rates."""
        v = _metrics(self.table_, self._pos, ["true_positive_rate", "false_positive_rate"])
        return float(max(_between(v["true_positive_rate"], "difference"),
                         _between(v["false_positive_rate"], "difference")))

    # ---- intervals ----------------------------------------------------------------------------------------
    @property
    def intervals(self) -> pd.DataFrame:
        """Per group, each metric's ``(low, high)`` percentile interval at ``confidence`` (columns
        ``(metric, "low"/"high")``), from the bootstrap of the module docstring."""
        values = _metrics(self._boot, self._pos, self.metrics)
        cols = {}
        for m in self.metrics:
            lo, hi = self._quantiles(values[m])
            cols[(m, "low")], cols[(m, "high")] = lo, hi
        return pd.DataFrame(cols, index=self._index())

    def overall_interval(self) -> pd.DataFrame:
        """Each metric's overall interval: rows the metrics, columns ``low``, ``high``."""
        values = _metrics(self._boot.sum(axis=1), self._pos, self.metrics)
        return pd.DataFrame([self._quantiles(values[m]) for m in self.metrics], index=self.metrics,
                            columns=["low", "high"])

    def difference_interval(self) -> pd.DataFrame:
        """Each metric's between-groups difference interval: rows the metrics, columns ``low``, ``high``."""
        values = _metrics(self._boot, self._pos, self.metrics)
        return pd.DataFrame([self._quantiles(_between(values[m], "difference")) for m in self.metrics],
                            index=self.metrics, columns=["low", "high"])

    def demographic_parity_interval(self) -> tuple[float, float]:
        """The interval of :attr:`demographic_parity_difference`."""
        v = _metrics(self._boot, self._pos, ["selection_rate"])["selection_rate"]
        lo, hi = self._quantiles(_between(v, "difference"))
        return float(lo), float(hi)


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

