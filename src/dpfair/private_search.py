"""Private model selection: the fairest model within an error budget, with the search itself on the ledger.

A trade-off curve is drawn by training many models and reading their scores; picking one from it is a
further use of the private data that no model's ε covers. :func:`tune` (and the estimator behind it,
:class:`PrivateSearch`) picks the hyper-parameters privately and prints ε of the whole procedure.

**The mechanism: random stopping** (Liu & Talwar 2019; Papernot & Steinke 2022, "Hyperparameter tuning
with Renyi differential privacy"). The training rows are split (by ``random_state``, public, as the
train/test split is) into a *fit* part and a *validation* part. Then

1. the validation part's group sizes (per constraint cell of the notion) are released once with
   Gaussian noise (``counts_share`` of ε, calibrated alone) and floored: the public denominators of the
   score, and, for DP-FERMI (unless the user gave public ``group_proportions``), every run's group
   proportions, so that no run releases its own;
2. a number of runs K is drawn from the secret generator (:class:`~dpfair.privacy.SecretRandom`, never a
   seed anyone knows; one repeat-and-select release, :meth:`~dpfair.privacy.Release.repeat`, which also draws
   each run's candidate and its public seed) from a truncated negative binomial of shape η and mean μ (``repetitions``:
   ``"geometric"``, η = 1, Liu & Talwar's random stopping; ``"logarithmic"``, η = 0; ``"poisson"``,
   η = ∞; or a number η > 0);
3. each run picks a candidate uniformly at random (secret coins too), trains it on the fit part at the
   per-model ε found below, and releases its score on the validation part with Gaussian noise
   (``score_share`` of ε, calibrated alone); the runs are fitted by the method's
   :meth:`~dpfair.algorithms.base.FairEstimator.fit_many`: DP-FERMI's as one batched grid, each model with
   its own secret batches and noise, other methods one after the other;
4. the run with the highest *released* score is the output.

Only the winning run is published: its model, its candidate and its released score. The other runs'
scores and K stay secret, since publishing them would forfeit the bound below (the search's privacy
comes from hiding how many runs it took). The runs are silent (no progress bar; their warnings, which
their number could be read from, are dropped; each candidate's plan was stated up front, before any release).

**Accounting.** One run is the composition of the method's planned releases (its ``privacy_plan_``,
identical for every candidate, which is checked) and its score's Gaussian release; the search records
dp_accounting's ``RepeatAndSelectDpEvent(run, μ, η)``, whose Rényi DP is Papernot & Steinke's Theorem 2
(η < ∞) or 6 (Poisson), composed with the count release (and, under the record unit, the private
reference below) on the RDP accountant, the only one that bounds repeated runs (the PLD accountant
defers to it). The per-model ε is the largest whose total spends at most ``epsilon`` at ``delta``
(bisection on the public plan). The conditions of the theorem hold by construction: K is drawn
independently of the data from the distribution the accountant is given (its mean computed from the
sampling distribution's γ, which the accountant's inversion can only lower, and the bound only grows
as γ falls), every run is an independent run of the same mechanism (fresh secret generators, distinct
batch streams), and the output is the best run by its released score alone.

**The score** of a run, on the validation part (greater is better)::

    u = −( violation + penalty · max(0, error − (reference_error + max_error_increase)) )

the constraint "error ≤ reference + X" as an exact penalty: among runs within the error budget the
fairest wins, and a run over it loses ``penalty`` points of violation per point of excess error. A
lexicographic rule (feasible first, then fairest) is this rule as the penalty grows without bound; its
score jumps at the budget's edge, so one person could move it by the whole range and no finite noise
would hide them. The penalty keeps the score Lipschitz in (error, violation), hence of bounded
sensitivity. ``violation`` is the pairwise gap of the notion (as :mod:`dpfair.fairness.metrics`
defines it; for binary labels the positive class's rates) with each rate's denominator the *released*
count of its (cell, group), so that every denominator is public.

**Sensitivity** (a brute-force test enumerates the neighbours of small data sets). For a fixed model
(the run's training is accounted by its own plan, and the score is released after it: adaptive
composition, so the score's sensitivity is that of a fixed model even where the scored rows were also
fitted, as with ``validation_size=0``), let m be the released (floored) counts and n_val the validation
size (public, as n is):

* sensitive unit (one person's s changes, x and y fixed): the person moves from group a to group b in
  their cell; one outcome count at a falls by one and one at b rises by one (the same outcome unless the
  model reads s), so every rate gap moves by at most 1/m[c, a] + 1/m[c, b]: Δ_violation = max over cells
  of the sum of the two largest 1/m. The error moves only if the model reads s at prediction: 1/n_val;
* record unit (a validation record added or removed, denominators fixed): one count moves by one,
  Δ_violation = 1/min m, and Δ_error = 1/n_val.

Δ = Δ_violation + penalty · Δ_error; the Gaussian release uses the bound convention of
:mod:`dpfair.privacy.units` (radius Δ/2 under replace-one, Δ under add/remove).

**The constrained strategy** (``strategy="constrained"``, and ``"auto"``'s choice for DP-FERMI under the
sensitive unit when the grid varies λ alone). There x and y are public, so the error of a released model
on the training rows is post-processing: no search is needed to find the λ that meets "error ≤ reference
+ X". One DP-FERMI fit spends the whole ε, its λ following the constraint by dual ascent after each epoch
(``DPFERMIClassifier(target_error=reference + X)``, :func:`~dpfair.algorithms.dpfermi_engine.adapt_lambda`),
from the estimator's ``lam``; the grid's λ values are not tried one by one. Its ledger is the model's own
(nothing else is released), and the model is trained at the total ε rather than the fraction random stopping
leaves each run. How both strategies compare with the non-privately selected curve is measured in
``results/selection/summary.md`` (constrained) and ``results/selection/random_stopping/summary.md``.

**The reference error** is the user's public proxy (``reference_error=``), or else under the sensitive
unit the error of a non-private, unconstrained model on unseen rows of the public (x, y), which costs
nothing: on the validation part when one is held out, else its 5-fold cross-validated error on the
training part (its training error would be optimistic by its own overfitting, which private models barely
have); under the record unit (x and y private) a DP-SGD logistic model fitted on the fit part (half of
``reference_share`` of ε) whose validation error is released with Gaussian noise (the other half;
sensitivity 1/n_val).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from types import SimpleNamespace

import dp_accounting as dpa
import numpy as np
from dp_accounting import dp_event
from scipy import optimize, stats
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils.validation import check_is_fitted

from dpfair.algorithms.base import named_sensitive_columns, public_categories
from dpfair.algorithms.signal import floor_counts
from dpfair.utils.capabilities import Capabilities, capabilities
from dpfair.fairness.notions import get_notion
from dpfair.fairness.scorers import predict_with_groups
from dpfair.privacy import (
    Part,
    PrivacyBudget,
    PrivacyLedger,
    PrivacyUnit,
    SecretRandom,
    calibrate_noise,
    check_privacy_unit,
    gaussian_event,
    ledger_totals,
)
from dpfair.privacy.budget import charging_grid
from dpfair.privacy.session import ReleaseSession
from dpfair.utils.validation import (
    check_1d,
    check_delta,
    check_epsilon,
    check_features,
    check_positive,
    encode_categories,
)

__all__ = ["PrivateSearch", "Repetitions", "SelectionScore", "cell_counts", "split_rows", "tune"]

#: ``repetitions`` by name: the shape η of the truncated negative binomial number of runs.
REPETITIONS = {"logarithmic": 0.0, "geometric": 1.0, "poisson": math.inf}

#: The search's strategies (:class:`PrivateSearch`).
STRATEGIES = ("auto", "random_stopping", "constrained")

#: Hyper-parameters the search sets itself on every run, which a grid may not vary.
RESERVED = ("epsilon", "delta", "random_state", "noise_multiplier", "privacy_unit", "accountant", "verbose",
            "notion", "groups", "classes")

#: Part names (and ledger labels) of the search's releases.
COUNTS, SCORE, REFERENCE_ERROR = "validation counts", "selection score", "reference error"
#: Folds of the public reference's cross-validated error (:meth:`PrivateSearch._public_reference`).
REFERENCE_FOLDS = 5

#: The per-model ε is searched until the total lies in [(1 − TOLERANCE)·ε, ε].
TOLERANCE = 0.005

# per-model ε by public plan (the audit's hundreds of searches of one plan search it once)
_PER_MODEL: dict[tuple, tuple[float, PrivacyLedger]] = {}


def split_rows(n: int, validation_size: float, random_state) -> tuple[np.ndarray, np.ndarray]:
    """``(fit rows, validation rows)``: a public random split of ``range(n)`` seeded by ``random_state``.

    ``validation_size = 0``: no held-out part; every row is both fitted and scored.
    """
    size = check_positive(validation_size, "validation_size", allow_zero=True)
    if size >= 1.0:
        raise ValueError(f"validation_size must lie in [0, 1), got {validation_size!r}")
    if size == 0.0:
        rows = np.arange(n)
        return rows, rows
    n_val = round(size * n)
    if n_val < 1 or n_val > n - 2:
        raise ValueError(f"validation_size={size:g} of {n} rows leaves {n_val} validation and {n - n_val} fit "
                         "rows; give more rows or another validation_size (0: score on the fitted rows)")
    order = np.random.default_rng(random_state).permutation(n)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


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


def cell_counts(notion: str, y: np.ndarray, s: np.ndarray, n_classes: int, n_groups: int) -> np.ndarray:
    """``counts[c, r]``: rows of constraint cell c (of ``notion``) and group r; ``y``, ``s`` as codes (class 1
    positive)."""
    cells, n_cells = get_notion(notion).cells(y, n_classes)
    counts = np.zeros((n_cells, n_groups))
    keep = cells >= 0
    np.add.at(counts, (cells[keep], s[keep]), 1.0)
    return counts


@dataclass(frozen=True)
class SelectionScore:
    """``u = −(violation + penalty·max(0, error − threshold))`` of predictions on the validation part.

    ``denominators[c, r]``: the public (released) size of cell c, group r; ``n_val``: the public
    normaliser of the error; ``reads_s``: whether the scored model reads s at prediction. Labels,
    predictions and groups are passed as codes; the positive class of binary labels is code 1.
    """

    notion: str
    threshold: float
    penalty: float
    denominators: np.ndarray
    n_val: int
    n_classes: int
    unit: PrivacyUnit
    reads_s: bool

    def violation(self, y: np.ndarray, y_pred: np.ndarray, s: np.ndarray) -> float:
        """The pairwise gap of the notion's rates, each over its public denominator."""
        notion = get_notion(self.notion)
        cells, n_cells = notion.cells(y, self.n_classes)
        outcome, n_out, _ = notion.outcomes(y, y_pred, self.n_classes)
        hits = np.zeros((n_cells, self.denominators.shape[1], n_out))
        keep = cells >= 0
        np.add.at(hits, (cells[keep], s[keep], outcome[keep]), 1.0)
        rates = hits / self.denominators[..., None]
        if n_out == 2:  # the positive outcome (correct, hit, class 1); the other's rates add nothing for two
            rates = rates[..., 1:]
        return float((rates.max(axis=1) - rates.min(axis=1)).max())

    def value(self, y: np.ndarray, y_pred: np.ndarray, s: np.ndarray) -> float:
        error = float(np.sum(y_pred != y)) / self.n_val
        return -(self.violation(y, y_pred, s) + self.penalty * max(0.0, error - self.threshold))

    @property
    def sensitivity(self) -> float:
        """Δ: the largest change of :meth:`value` between neighbours, for a fixed model (module docstring)."""
        inverse = 1.0 / self.denominators
        if self.unit is PrivacyUnit.SENSITIVE:
            two = np.sort(inverse, axis=1)[:, -2:].sum(axis=1)
            return float(two.max()) + (self.penalty / self.n_val if self.reads_s else 0.0)
        return float(inverse.max()) + self.penalty / self.n_val

    @property
    def bound(self) -> float:
        """The bound of the score's release (:mod:`dpfair.privacy.units`: radius under replace-one)."""
        return self.sensitivity / 2.0 if self.unit is PrivacyUnit.SENSITIVE else self.sensitivity


def _counts_bound(unit: PrivacyUnit) -> float:
    """One person's one-hot cell: replace-one moves it between two cells (radius √2/2), add/remove by one."""
    return math.sqrt(2) / 2 if unit is PrivacyUnit.SENSITIVE else 1.0


def _plan_of(estimator, X, y, s, checked: bool = False) -> PrivacyLedger:
    """The ledger ``estimator`` would spend on ``(X, y, s)``: its public plan
    (:meth:`~dpfair.algorithms.FairEstimator.plan`: the rows, X's width, the public group and class lists), before
    anything is read or released. ``checked``: the plan's warnings show (the search's many plans of one candidate
    warn once, when checked). The lists default to the values present, as the fit that follows takes them.
    """
    est = PrivacyBudget.detach(clone(estimator))
    params = est.get_params()
    groups = params.get("groups") if params.get("groups") is not None else np.unique(np.asarray(s))
    classes = params.get("classes") if params.get("classes") is not None else np.unique(np.asarray(y))
    with warnings.catch_warnings():
        if not checked:
            warnings.simplefilter("ignore")
        plan = est.plan(len(X), np.shape(X)[1], groups=groups, classes=classes)
    ledger = plan.ledger()
    if not plan.private or not len(ledger):
        raise ValueError(f"{type(estimator).__name__} released nothing through a calibrated plan; a private search "
                         "needs a private method")
    return ledger


class PrivateSearch(ClassifierMixin, BaseEstimator):
    """Private selection of hyper-parameters (random stopping, or DP-FERMI's λ by its public error constraint);
    ``privacy_spent_`` covers the whole search.

    Parameters
    ----------
    estimator : a private dpfair estimator; every run fits a clone of it.
    param_grid : the candidates: a dict of value lists (their product) or a list of dicts, as scikit-learn's
        ``ParameterGrid``. They may not set the search's own parameters (``epsilon``, ``delta``,
        ``random_state``, ``notion``, ...) and must share one privacy plan (e.g. λ of DP-FERMI).
    epsilon, delta : the budget of the whole search (``delta=None``: 1/n²).
    notion : the fairness notion scored (``None``: the estimator's ``notion``); a fair estimator is set to it.
    max_error_increase : X ≥ 0 in the constraint "validation error ≤ reference_error + X".
    reference_error : a public proxy of the non-private error (``None``: obtained as the module docstring says).
    penalty : points of violation one point of error beyond the budget costs in the score.
    repetitions : the law of the number of runs: "geometric" (Liu & Talwar), "logarithmic", "poisson", or a
        truncated negative binomial's shape η ≥ 0 (Papernot & Steinke).
    mean_runs : its mean (``None``: twice the number of candidates).
    strategy : "random_stopping" (the candidates, the module docstring), "constrained" (one DP-FERMI fit whose λ
        follows "training error ≤ reference + X" at no privacy cost: sensitive unit, a grid of λ alone) or
        "auto" (default): "constrained" where it applies, else "random_stopping".
    validation_size : share of the rows held out to be scored rather than fitted; 0 fits and scores every row. A
        held-out part guards against a score flattered by over-fitting (a large model); without one each run
        trains on more rows, and the score's denominators are the whole train part's counts, so its noise
        is several times smaller for the same ε (figures: docs/guide/benchmarks.md, "Measurements behind
        defaults").
        ``"auto"`` (default): 0 for a linear model (``model="logistic"``, which a private fit does not
        over-fit), else 0.2.
    counts_share, score_share, reference_share : shares of ε the validation counts, each run's score and
        (record unit, no ``reference_error``) the private reference spend, each calibrated alone; the
        per-model ε takes what is left of the total.
    budget : a :class:`~dpfair.privacy.PrivacyBudget` charged the search's total before its first release
        (``None``: the one attached to ``estimator``, if any).
    random_state : seeds the public split (and the runs' public initialisation goes with secret seeds).

    Fitted attributes: ``best_estimator_`` (the winning run's model, or the constrained strategy's one fit; its
    ``privacy_ledger_`` and ``privacy_spent_`` are the search's), ``best_params_``, ``released_score_`` (the
    winner's released score, the only score published; ``None`` under the constrained strategy, which releases
    none), ``privacy_ledger_``, ``privacy_spent_``, ``selection_`` (what was run, all public) and ``classes_``.
    """

    def __init__(self, estimator, param_grid, *, epsilon=1.0, delta=None, notion=None, max_error_increase=0.01,
                 reference_error=None, penalty=10.0, repetitions="geometric", mean_runs=None, strategy="auto",
                 validation_size="auto", counts_share=0.05, score_share=0.25, reference_share=0.1, budget=None,
                 random_state=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.notion = notion
        self.max_error_increase = max_error_increase
        self.reference_error = reference_error
        self.penalty = penalty
        self.repetitions = repetitions
        self.mean_runs = mean_runs
        self.strategy = strategy
        self.validation_size = validation_size
        self.counts_share = counts_share
        self.score_share = score_share
        self.reference_share = reference_share
        self.budget = budget
        self.random_state = random_state

    # ---- what the auditor and scikit-learn read -----------------------------------------------------
    @property
    def privacy_unit(self) -> str:
        """The privacy unit of the estimator searched over (and of the search)."""
        return getattr(self.estimator, "privacy_unit", "record")

    def __dpfair_capabilities__(self) -> Capabilities:
        """What callers may ask of the search (:func:`dpfair.utils.capabilities.capabilities`): its winner reads s at
        prediction when the estimator searched over does. It declares no more: a search is no method another
        search could repeat."""
        return Capabilities(predict_needs_sensitive=capabilities(self.estimator).predict_needs_sensitive)

    def predict_proba(self, X, **kwargs):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X, **kwargs)

    def predict(self, X, **kwargs):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X, **kwargs)

    # ---- the search -----------------------------------------------------------------------------
    def check_hyperparameters(self) -> PrivateSearch:
        """Refuse settings and candidates that no data could make valid; return ``self``. ``fit`` runs it first.

        It reads the search's parameters alone, never the data, so a bad candidate costs no privacy and the CLI
        refuses it before loading any data: every candidate is checked by the estimator's own
        :meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters` (a clone with the candidate set),
        ``validation_size`` is ``"auto"`` or a share in [0, 1), and a held-out share is refused where the
        strategy (the constrained one fits and scores every row) would ignore it.
        """
        self._settings()
        return self

    def _settings(self):
        """``(base, target, notion, candidates)``: the data-free checks of :meth:`check_hyperparameters`."""
        base = self.estimator
        declared = capabilities(base)
        if not declared.private:
            raise ValueError(f"a private search needs a private dpfair estimator, got {type(base).__name__}: a "
                             "non-private one spends ε = ∞ in every run")
        target = check_epsilon(self.epsilon, "epsilon", allow_inf=False)
        notion = self.notion if self.notion is not None else base.get_params().get("notion")
        get_notion(notion)
        if declared.notions and notion not in declared.notions:
            raise ValueError(f"{type(base).__name__} targets {', '.join(declared.notions)}; notion={notion!r} is not "
                             "one of them")
        check_positive(self.max_error_increase, "max_error_increase", allow_zero=True)
        if not math.isfinite(check_positive(self.penalty, "penalty", allow_zero=True)):
            raise ValueError(f"penalty must be finite, got {self.penalty!r}: the score's sensitivity grows with it, and "
                             "an infinite one would need infinite noise")
        if self.reference_error is not None and not 0.0 <= check_positive(
                self.reference_error, "reference_error", allow_zero=True) <= 1.0:
            raise ValueError(f"reference_error must lie in [0, 1], got {self.reference_error!r}")
        for name in ("counts_share", "score_share", "reference_share"):
            if not 0.0 < check_positive(getattr(self, name), name) < 1.0:
                raise ValueError(f"{name} must lie in (0, 1), got {getattr(self, name)!r}")
        try:
            candidates = list(ParameterGrid(self.param_grid))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"param_grid must be a dict of value lists or a list of such dicts: {exc}") from None
        if not candidates:
            raise ValueError("param_grid holds no candidate; give at least one value per hyper-parameter")
        valid = base.get_params()
        for point in candidates:
            reserved = sorted(set(point) & set(RESERVED))
            unknown = sorted(set(point) - set(valid))
            if reserved:
                raise ValueError(f"param_grid may not set {reserved[0]!r}: the search sets it on every run (pass "
                                 "epsilon, delta, notion, random_state to the search itself)")
            if unknown:
                raise ValueError(f"{type(base).__name__} has no hyper-parameter {unknown[0]!r}; valid: "
                                 f"{', '.join(valid)}")
            try:
                clone(base).set_params(**point).check_hyperparameters()
            except ValueError as exc:
                raise ValueError(f"the grid's candidate {point}: {exc}") from None
        size = self.validation_size
        if not (isinstance(size, str) and size == "auto") and not (
                isinstance(size, numbers.Real) and not isinstance(size, bool) and 0.0 <= size < 1.0):
            raise ValueError(f"validation_size must lie in [0, 1) (the share of rows held out to score the runs) or be "
                             f"'auto', got {size!r}")
        strategy = self._strategy(base, candidates, check_privacy_unit(getattr(base, "privacy_unit", "record")))
        if strategy == "constrained" and not isinstance(size, str) and size > 0:
            raise ValueError(f"validation_size={size!r} holds rows out to score random stopping's runs, but the "
                             "constrained strategy scores none (its one fit trains on every row): drop validation_size "
                             "(or pass 0), or pass strategy='random_stopping'")
        return base, target, notion, candidates

    def _check(self, X, y, s):
        base, target, notion, candidates = self._settings()
        valid = base.get_params()
        # a DataFrame's columns named after the sensitive Series encode s: refused where the runs read X as public,
        # else handed to the runs' own accounting (the search fits them on arrays, which carry no names)
        groups = valid.get("groups")
        groups = range(groups) if isinstance(groups, int) and not isinstance(groups, bool) else \
            (() if groups is None else groups)
        names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
        named = named_sensitive_columns(names, getattr(s, "name", None), [str(g) for g in groups])
        if named:
            base = clone(base).declare_sensitive_columns(named, names, s.name)
        X = check_features(X, "X")
        y = check_1d(y, "y", X.shape[0])
        if s is None:
            raise ValueError("a private search scores fairness: call fit(X, y, sensitive_features=s)")
        s = check_1d(s, "sensitive_features", X.shape[0])
        delta = check_delta(self.delta if self.delta is not None else 1.0 / X.shape[0] ** 2, n=X.shape[0])
        return base, target, delta, notion, candidates, X, y, s

    def fit(self, X, y, sensitive_features=None):
        """Run the search on ``(X, y, s)`` (module docstring); the winner is ``best_estimator_``."""
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, key)
        base, target, delta, notion, candidates, X, y, s = self._check(X, y, sensitive_features)
        unit = check_privacy_unit(getattr(base, "privacy_unit", "record"))
        if self._strategy(base, candidates, unit) == "constrained":
            return self._fit_constrained(base, target, delta, notion, candidates, X, y, s, unit)
        params = base.get_params()
        classes = public_categories(params.get("classes"), y, "classes", unit is PrivacyUnit.RECORD,
                                    "classes=[...] on the estimator (the data set's label values)", stacklevel=4)
        groups = public_categories(params.get("groups"), s, "groups", True,
                                   "groups=k or groups=[...] on the estimator (the data set's group values)",
                                   stacklevel=4)
        y_codes, _ = encode_categories(y, "y", classes=classes)
        s_codes, _ = encode_categories(s, "sensitive_features", classes=groups)
        fixed = {k: v for k, v in (("notion", notion), ("groups", params.get("groups")),
                                   ("classes", params.get("classes"))) if k in params}
        if "groups" in fixed and fixed["groups"] is None:
            fixed["groups"] = groups.tolist()
        if "classes" in fixed and fixed["classes"] is None:
            fixed["classes"] = classes.tolist()
        base = PrivacyBudget.detach(clone(base).set_params(**fixed, delta=delta, verbose=False))
        n_cells = len(get_notion(notion).cell_labels(len(classes)))
        shares_released = _takes_released_shares(base)
        if shares_released:  # planned with placeholder shares: a plan depends on whether they are public, not on them
            base.set_params(group_proportions=_shares(np.ones((n_cells, len(groups)))))
        fit_rows, val_rows = split_rows(len(y), _validation_size(self.validation_size, base), self.random_state)
        Xf, yf, sf = X[fit_rows], y[fit_rows], s[fit_rows]
        Xv, sv = X[val_rows], s[val_rows]
        yv_codes, sv_codes, n_val = y_codes[val_rows], s_codes[val_rows], len(val_rows)
        mean = float(self.mean_runs) if self.mean_runs is not None else 2.0 * len(candidates)
        law = Repetitions.of(self.repetitions, mean)
        relation = unit.relation
        sigma_counts = calibrate_noise(gaussian_event, self.counts_share * target, delta, relation)
        sigma_score = calibrate_noise(gaussian_event, self.score_share * target, delta, relation)

        reference, reference_source, ref_plan = self.reference_error, "public proxy (reference_error)", None
        if reference is None and unit is PrivacyUnit.SENSITIVE:
            reference, reference_source = self._public_reference(base, X, y, fit_rows, val_rows, self.random_state)
        elif reference is None:
            ref_model, sigma_error = self._reference_plan(target, delta, classes, groups)
            ref_plan = (ref_model, sigma_error, _plan_of(ref_model, Xf, yf, sf, checked=True))
            reference_source = "DP-SGD logistic regression on the fit part, its validation error released"

        run_epsilon, planned = self._per_model_epsilon(base, candidates, Xf, yf, sf, target, delta, law, unit,
                                                      sigma_counts, sigma_score, ref_plan)
        self._check_same_plan(base, candidates, Xf, yf, sf, run_epsilon)

        ledger = PrivacyLedger(relation)
        run_entry = next(e for e in planned.entries if e.label.startswith("repeated runs"))
        run_part = Part(run_entry.label, mechanism="fixed", fixed=run_entry.event)
        parts = {Part(COUNTS): sigma_counts, run_part: 0.0, Part(SCORE): sigma_score}
        if ref_plan is not None:
            parts[Part(REFERENCE_ERROR)] = ref_plan[1]
        with charging_grid(self._budget(), self, "a private search") as charge, \
                ReleaseSession.of_parts(ledger, parts, key=("private search", self.random_state),
                                        secure=bool(params.get("secure_mode", False))) as session:
            if charge is not None:  # the whole search, before its first release
                charge.claim_ledger(planned, delta)
            counts = cell_counts(notion, yv_codes, sv_codes, len(classes), len(groups))
            noisy = session.release(COUNTS).noisy_sum(counts, bound=_counts_bound(unit))
            denominators = floor_counts(noisy, sigma_counts * _counts_bound(unit))
            if shares_released:
                base.set_params(group_proportions=_shares(denominators))
            if ref_plan is not None:
                reference = self._private_reference(ref_plan, Xf, yf, sf, Xv, y[val_rows], sv, n_val, session)
            score = SelectionScore(notion, float(reference) + float(self.max_error_increase), float(self.penalty),
                                   denominators, n_val, len(classes), unit,
                                   capabilities(self).predict_needs_sensitive)
            runs = session.release(run_part.name)
            best, best_point, released = self._run(base, candidates, law, runs, run_epsilon, delta, session, score,
                                                   Xf, yf, sf, Xv, sv, yv_codes, sv_codes, classes)
        if ledger_totals(ledger) != ledger_totals(planned):
            raise RuntimeError(f"the search's ledger {ledger.to_records()} differs from its plan; please report this")
        self._finish(best, best_point, released, ledger, delta, candidates, law, run_epsilon, score, sigma_score,
                     reference, reference_source, notion, denominators, sigma_counts, n_val, len(fit_rows), unit)
        return self

    # ---- the constrained strategy -----------------------------------------------------------------
    def _strategy(self, base, candidates, unit) -> str:
        """``self.strategy`` resolved; refuses "constrained" where the error is private or the grid is not λ's."""
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {self.strategy!r}")
        Repetitions.of(self.repetitions, 1.0 if self.mean_runs is None else self.mean_runs)  # checked either way
        why = None
        if not capabilities(base).target_error:
            why = f"it is DP-FERMI's (target_error); {type(base).__name__} has none"
        elif unit is not PrivacyUnit.SENSITIVE:
            why = "the training error it follows is public only under privacy_unit='sensitive'"
        elif any(set(point) - {"lam"} for point in candidates):
            others = sorted({k for point in candidates for k in point} - {"lam"})
            why = "it tunes λ alone; the grid varies " + ", ".join(others)
        if self.strategy == "constrained" and why is not None:
            raise ValueError(f"strategy='constrained' does not apply: {why}; use strategy='random_stopping'")
        return "random_stopping" if self.strategy == "random_stopping" or why is not None else "constrained"

    def _fit_constrained(self, base, target, delta, notion, candidates, X, y, s, unit):
        """One DP-FERMI fit at the whole ε whose λ follows "training error ≤ reference + X" (module docstring)."""
        reference, source = self.reference_error, "public proxy (reference_error)"
        if reference is None:
            rows = np.arange(len(y))
            reference, source = self._public_reference(base, X, y, rows, rows, self.random_state)
        threshold = min(float(reference) + float(self.max_error_increase), 1.0 - 1e-9)
        start = float(base.lam) if float(base.lam) > 0 else 1.0
        model = PrivacyBudget.detach(clone(base)).set_params(
            notion=notion, epsilon=target, delta=delta, lam=start, target_error=threshold, verbose=False,
            random_state=self.random_state)
        with charging_grid(self._budget(), self, "a private search") as charge:
            if charge is not None:  # the whole fit, before its first release
                plan = _plan_of(model, X, y, s, checked=True)
                charge.claim_ledger(plan, delta)
            model.fit(X, y, sensitive_features=s)
        selection = {
            "strategy": "constrained", "chosen": {"lam": model.lam_}, "released_score": None,
            "candidates": [dict(c) for c in candidates], "per_model_epsilon": model.privacy_spent_[0],
            "privacy_unit": unit.value, "lam_start": start, "lam_path": [h["lam"] for h in model.history_],
            "score": {"notion": notion, "rule": "training error <= threshold, lambda by dual ascent (no score "
                      "released)", "threshold": threshold, "reference_error": float(reference),
                      "reference": source, "max_error_increase": float(self.max_error_increase)},
        }
        self._publish(model, selection)
        return self

    def _budget(self):
        """The budget the search draws from: its own, else the one attached to the estimator, if any."""
        return self.budget if self.budget is not None else getattr(self.estimator, "privacy_budget", None)

    def _publish(self, best, selection: dict) -> None:
        """The search's fitted attributes: ``best`` (whose ledger is the search's) and what was chosen."""
        best.selection_ = selection
        self.best_estimator_, self.best_params_ = best, dict(selection["chosen"])
        self.released_score_ = selection["released_score"]
        self.privacy_ledger_, self.privacy_spent_ = best.privacy_ledger_, best.privacy_spent_
        self.selection_ = selection
        self.classes_ = best.classes_

    # ---- the reference error ---------------------------------------------------------------------
    @staticmethod
    def _public_reference(base, X, y, fit_rows, val_rows, random_state) -> tuple[float, str]:
        """The non-private, unconstrained model's error on public ``(x, y)`` and what it is: on the validation rows
        when they are held out, else (every row fitted and scored) its K-fold cross-validated error.

        The runs are scored on the rows they were fitted on, but "error ≤ reference + X" means the non-private
        model's error on unseen rows, not on the rows it fitted: its training error is optimistic by its own
        overfitting, while a private model's noise and fairness term leave it little (figures on adult:
        docs/guide/command_line.md and docs/guide/benchmarks.md, "Measurements behind defaults").
        """
        from sklearn.model_selection import StratifiedKFold, cross_val_predict

        from dpfair.algorithms import ERMClassifier

        model = getattr(base, "model", "logistic")
        erm = ERMClassifier(model=model if isinstance(model, str) and model != "cnn" else "logistic", random_state=0)
        what = f"non-private unconstrained {erm.model} model on public (x, y)"
        if len(fit_rows) != len(val_rows) or not np.array_equal(fit_rows, val_rows):
            erm.fit(X[fit_rows], y[fit_rows])
            return float(np.mean(erm.predict(X[val_rows]) != y[val_rows])), f"{what}: its error on the validation part"
        folds = min(REFERENCE_FOLDS, int(np.unique(y, return_counts=True)[1].min()))
        if folds < 2:
            erm.fit(X, y)
            return float(np.mean(erm.predict(X) != y)), f"{what}: its training error (a class has one row)"
        seed = None if random_state is None else int(np.random.default_rng(random_state).integers(2**31 - 1))
        cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
        return (float(np.mean(cross_val_predict(erm, X, y, cv=cv) != y)),
                f"{what}: its {folds}-fold cross-validated error on the training part")

    def _reference_plan(self, target, delta, classes, groups):
        from dpfair.algorithms import DPSGDClassifier

        half = self.reference_share * target / 2.0
        model = DPSGDClassifier(epsilon=half, delta=delta, classes=classes.tolist(), groups=groups.tolist(),
                                random_state=self.random_state)
        return model, calibrate_noise(gaussian_event, half, delta, PrivacyUnit.RECORD.relation)

    @staticmethod
    def _private_reference(ref_plan, Xf, yf, sf, Xv, yv, sv, n_val, session) -> float:
        model = clone(ref_plan[0]).fit(Xf, yf, sensitive_features=sf)
        session.ledger.extend(SimpleNamespace(label=f"reference model: {e.label}", event=e.event, count=e.count)
                              for e in model.privacy_ledger_.entries)
        error = float(np.sum(predict_with_groups(model, Xv, sv) != yv)) / n_val
        noisy = session.release(REFERENCE_ERROR).noisy_sum(np.array([error]), bound=1.0 / n_val)
        return float(np.clip(noisy[0], 0.0, 1.0))

    # ---- the plan: the per-model ε that spends the total --------------------------------------------
    def _search_ledger(self, run: PrivacyLedger, law, unit, sigma_counts, sigma_score, ref_plan, method) -> PrivacyLedger:
        ledger = PrivacyLedger(unit.relation)
        ledger.record(gaussian_event(sigma_counts), COUNTS)
        if ref_plan is not None:
            _, sigma_error, ref_ledger = ref_plan
            ledger.extend(SimpleNamespace(label=f"reference model: {e.label}", event=e.event, count=e.count)
                          for e in ref_ledger.entries)
            ledger.record(gaussian_event(sigma_error), REFERENCE_ERROR)
        # a tuple, not dp_accounting's usual list: the event is hashed as a ledger entry (budgets, plan checks)
        one_run = dpa.ComposedDpEvent(tuple(e.event if e.count == 1 else dpa.SelfComposedDpEvent(e.event, e.count)
                                            for e in run.entries) + (gaussian_event(sigma_score),))
        ledger.record(law.event(one_run), f"repeated runs of {method} (K ~ {law.describe()['distribution']}, "
                                          f"mean {law.mean:.4g})")
        return ledger

    def _per_model_epsilon(self, base, candidates, Xf, yf, sf, target, delta, law, unit, sigma_counts, sigma_score,
                           ref_plan) -> tuple[float, PrivacyLedger]:
        method = type(base).__name__
        key = (method, repr(sorted((k, repr(v)) for k, v in base.get_params().items() if k != "random_state")),
               repr(candidates[0]), Xf.shape, target, delta, law, unit, sigma_counts, sigma_score,
               None if ref_plan is None else repr(ledger_totals(ref_plan[2])))
        if key in _PER_MODEL:
            return _PER_MODEL[key]
        point = candidates[0]

        def total(eps_run):
            run = _plan_of(clone(base).set_params(**point, epsilon=eps_run), Xf, yf, sf)
            ledger = self._search_ledger(run, law, unit, sigma_counts, sigma_score, ref_plan, method)
            return ledger.epsilon(delta, "rdp"), ledger

        def refuse(why: str):
            return ValueError(f"epsilon={target:g} is spent before any training: the counts, the scores and the "
                              f"repetitions leave too little for each model ({why}); raise epsilon, lower counts_share "
                              "or score_share, or use fewer runs (mean_runs)")

        hi, lo = target, target / 2.0
        spent, ledger = total(lo)
        while spent > target:
            hi, lo = lo, lo / 2.0
            if lo < target * 1e-3:
                raise refuse(f"with a per-model ε of {hi:.2g} the search spends {spent:.3g}")
            try:
                spent, ledger = total(lo)
            except ValueError as exc:  # the method's own calibration cannot reach so small an ε
                raise refuse(f"per-model ε {lo:.2g}: {exc}") from None
        best = (lo, ledger)
        for _ in range(60):
            if spent >= (1.0 - TOLERANCE) * target:
                break
            mid = math.sqrt(lo * hi)
            trial, ledger = total(mid)
            if trial <= target:
                lo, best, spent = mid, (mid, ledger), trial
            else:
                hi = mid
        _PER_MODEL[key] = best
        return best

    def _check_same_plan(self, base, candidates, Xf, yf, sf, run_epsilon) -> None:
        plans = [ledger_totals(_plan_of(clone(base).set_params(**p, epsilon=run_epsilon), Xf, yf, sf, checked=True))
                 for p in candidates]
        for point, plan in zip(candidates, plans):
            if plan != plans[0]:
                raise ValueError(f"candidates {candidates[0]} and {point} spend differently per run (their privacy "
                                 "plans differ); a private search repeats one mechanism, so vary only "
                                 "hyper-parameters that leave the plan unchanged (e.g. lam, learning_rate)")

    # ---- the runs ------------------------------------------------------------------------------------
    def _run(self, base, candidates, law, runs, run_epsilon, delta, session, score, Xf, yf, sf, Xv, sv,
             yv_codes, sv_codes, classes):
        """The runs of the repeat-and-select release ``runs`` (K, each run's candidate and seed drawn by it), each
        scored and its score released; the best by released score is returned, K and the others are dropped."""
        picks, seeds = runs.repeat(law, len(candidates))
        if len(seeds) == 0:
            raise ValueError("the search drew no run (a Poisson number of runs is 0 with probability e^-mean); its "
                             "counts were released, so its budget is spent: run it again with a new budget")
        points = [{**candidates[int(j)], "epsilon": run_epsilon, "delta": delta, "random_state": int(seed)}
                  for j, seed in zip(picks, seeds)]
        release = session.release(SCORE, ledger=session.covered(runs.part.name))  # inside the runs' event
        released = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # how many runs warned would tell K (the module docstring)
            fitted = type(base).fit_many([clone(base).set_params(**p) for p in points], Xf, yf, sf)
            for model in fitted:
                y_pred, _ = encode_categories(predict_with_groups(model, Xv, sv), "predictions", classes=classes)
                value = score.value(yv_codes, y_pred, sv_codes)
                released.append(float(release.noisy_sum(np.array([value]), bound=score.bound)[0]))
        chosen = best_released(released)
        return fitted[chosen], candidates[int(picks[chosen])], released[chosen]

    def _finish(self, best, point, released, ledger, delta, candidates, law, run_epsilon, score, sigma_score,
                reference, reference_source, notion, denominators, sigma_counts, n_val, n_fit, unit) -> None:
        best.privacy_ledger_ = ledger
        best.delta_ = delta
        best.privacy_spent_ = (ledger.epsilon(delta, "rdp"), delta)
        selection = {
            "strategy": "random_stopping", "chosen": dict(point), "released_score": released,
            "candidates": [dict(c) for c in candidates],
            "per_model_epsilon": run_epsilon, "repetitions": law.describe(), "privacy_unit": unit.value,
            "score": {"notion": notion, "rule": "-(violation + penalty * max(0, error - threshold))",
                      "threshold": score.threshold, "reference_error": float(reference),
                      "reference": reference_source, "max_error_increase": float(self.max_error_increase),
                      "penalty": score.penalty, "sensitivity": score.sensitivity,
                      "noise_std": sigma_score * score.bound},
            "validation": {"rows": n_val, "fit_rows": n_fit, "released_counts": denominators.tolist(),
                           "counts_noise_std": sigma_counts * _counts_bound(unit)},
        }
        self._publish(best, selection)


def best_released(released: list[float]) -> int:
    """The run a random-stopping search keeps: the index of the highest released score (the first on a tie).

    The choice reads the released scores alone, so it is post-processing of releases the search's
    ``RepeatAndSelectDpEvent`` already covers; a choice read off the exact scores would reveal the validation
    part through which run wins, whatever the ledger says.
    """
    return int(np.argmax(released))


def _validation_size(size, base) -> float:
    """``validation_size``, with ``"auto"`` resolved: 0 for a logistic model, 0.2 for any other."""
    if isinstance(size, str) and size == "auto":
        return 0.0 if base.get_params().get("model") == "logistic" else 0.2
    return size


def _takes_released_shares(base) -> bool:
    """Whether the runs take their group proportions from the search's released counts: DP-FERMI's, unless the
    user gave public ones (its per-cell shares are the counts' rows, normalised; each run then releases none)."""
    return capabilities(base).public_group_shares and base.group_proportions is None


def _shares(counts: np.ndarray) -> list:
    """Per-cell group shares from (released, floored: positive) counts ``(cells, groups)``; one row as ``(k,)``."""
    shares = counts / counts.sum(axis=1, keepdims=True)
    return (shares[0] if len(shares) == 1 else shares).tolist()


def tune(estimator, param_grid, X, y, sensitive_features=None, **params):
    """The model a private search selects (:class:`PrivateSearch`; ``params`` are its parameters).

    Returns the winning run's fitted estimator: its ``privacy_spent_`` and ``privacy_ledger_`` are those of
    the whole search, and ``selection_`` says what was chosen, with its released score.
    """
    return PrivateSearch(estimator, param_grid, **params).fit(X, y, sensitive_features).best_estimator_
