"""Output perturbation (Mangold, Perrot, Bellet, Tommasi, *Differential Privacy has Bounded Impact on
Fairness in Classification*, ICML 2023, Sec. 4.1 and App. E; Chaudhuri, Monteleoni, Sarwate 2011).

**The model.** ℓ2-regularised logistic regression on rows bounded in norm: every row x (with the public
constant ``intercept_scaling`` appended when ``fit_intercept``) is scaled to norm at most R
(``norm_bound``), x̃ = x · min(1, R/‖x‖), a per-row map that reads no other row and is applied again in
``predict``. Two classes: one weight vector w, score w·x̃, loss ``log(1 + exp(−y'·w·x̃))`` (y' = ±1);
l > 2 classes: W (l × p), softmax cross-entropy. The problem (3) of the paper, with a public normaliser N:

    f_D(w) = (1/N) Σ_{i ∈ D} ℓ(w; x̃_i, y_i) + (μ/2)‖w‖²,        μ = ``l2_regularization``,

μ-strongly convex, and ℓ is Λ-Lipschitz in w: ``‖∇ℓ‖ = |σ(w·x̃) − y|·‖x̃‖ ≤ R`` (binary, y ∈ {0, 1},
Λ = R); ``‖(p − e_y) x̃ᵀ‖_F = ‖p − e_y‖·‖x̃‖ ≤ √2·R`` (softmax, Λ = √2·R). With an intercept the constant
column is a coordinate of x̃ like any other: R bounds the augmented row and the intercept is
regularised like every weight, so Λ and the sensitivities below hold unchanged. ∇f_D(w*) = 0 gives
``μ‖w*‖ ≤ (n/N)·Λ``, so w* lies in the ball of radius Λ/μ (``radius_``) whenever n ≤ N.

**The release** (Sec. 4.1): ``w_priv = π(ŵ + N(0, σ² I_p))``, ŵ the solver's minimiser, π the
projection on the ball of radius Λ/μ (``project=True``; post-processing, and non-expansive, so
``‖w_priv − w*‖ ≤ ‖ŵ + noise − w*‖`` when w* lies in the ball).

**Sensitivity** (App. E, re-derived for each privacy unit). If f and g are μ-strongly convex with
minimisers w_f, w_g (so ∇f(w_f) = ∇g(w_g) = 0), then

    μ‖w_f − w_g‖² ≤ ⟨∇g(w_f) − ∇g(w_g), w_f − w_g⟩ = ⟨∇g(w_f) − ∇f(w_f), w_f − w_g⟩,

so ``‖w_f − w_g‖ ≤ ‖∇(g − f)(w_f)‖/μ``. Hence:

- ``privacy_unit="record"`` (add or remove one record z; ``ADD_OR_REMOVE_ONE``): g = f + ℓ(·; z)/N,
  so ``Δ* = Λ/(μN)``, with N a public normaliser fixed before the data are seen. dpfair treats the
  training size n as public under both units (the guide's privacy model, "What is public": DP-SGD's sampling rate and
  the default δ = 1/n² read it too), so ``sample_size=None`` takes N = n; ``sample_size`` fixes N in
  advance (the data set's published size). Each record then weighs 1/N whatever D holds, so the
  neighbour's minimiser moves by at most Λ/(μN) (the paper's replace-one objective, normalised by
  n itself, moves by up to 2Λ/(μ(n+1)) under add/remove). Privacy never needs n ≤ N; only
  ``‖w*‖ ≤ Λ/μ``, which makes π non-expansive around w*, does.
- ``privacy_unit="sensitive"`` (one person's s changes; x and y are public, so n is too, N = n by
  default): if no column of X encodes s, f_D does not read s, ``Δ* = 0``, and the minimiser is released
  exactly: the ledger records a no-op and ``privacy_spent_ = (0, δ)``. If s is a feature
  (``sensitive_feature_columns``, e.g. a loader's ``include_sensitive=True`` columns), changing s
  changes one row x̃ → x̃' inside the R-ball: g = f + (ℓ(·; x̃') − ℓ(·; x̃))/N and ``Δ* = 2Λ/(μN)``,
  the paper's Δ (``REPLACE_ONE``).

**Optimisation error.** The solver stops at ŵ with ``‖∇f(ŵ)‖ ≤ τ`` (``tol``), and strong convexity gives
``‖ŵ − w*‖ ≤ τ/μ`` on each neighbour, so the released mean moves by at most ``Δ = Δ* + 2τ/μ``
(``sensitivity_``). Under the bound convention of :mod:`dpfair.privacy.units` the Gaussian release
then has bound Δ (add/remove: the distance itself) or Δ/2 (replace-one: the radius of a ball holding
both means), ``noise_std_ = noise_multiplier_ · bound``; the multiplier is calibrated to (ε, δ) on the
accountant (one Gaussian part, one release, no subsampling), not by the paper's closed form
``σ² = 2Δ² log(1.25/δ)/ε²``, which ``calibration="paper"`` offers for reproduction (ε < 1; the
accountant then reports the smaller ε it actually spends).

**No data-dependent failure.** Errors are releases (a fit that fails on one neighbour only has
ε = ∞), so the solver has no failure branch: damped Newton (the p × p Hessian, Armijo backtracking on
``½‖∇f‖²``, along which the Newton step always descends) never raises, stores or logs nothing about
its run, and stops at ``‖∇f‖ ≤ τ``, or after ``max_iter`` steps, or when no step size lowers ``‖∇f‖``.
In exact arithmetic the first stop always comes first: Newton's method with backtracking on the
residual converges globally when the Hessian is Lipschitz and at least μI, and quadratically near w*
(2 steps at μ = 1, at most 16 in our checks down to μ = 1e-8 on separable data). The other two
stops exist so that float64 rounding cannot loop forever; ``tol ≥ 1e-12`` keeps τ above the rounding
of a float64 mean gradient, and ``μ ≥ 1e-10·R²`` keeps the Hessian's Cholesky factorisation safe.
The guarantee rests on the first stop: one above τ would add ``(‖∇f(ŵ)‖ − τ)/μ`` to the sensitivity
unaccounted, so keep ``max_iter`` generous. Besides the base's input checks (NaN, shapes, labels),
``fit`` raises only on hyper-parameters, which it checks before the solver runs and which read no data.

The noise comes from the fit's secret generator through one :class:`~dpfair.privacy.Release`; ŵ is
never stored on the estimator (it would be published with the model). The two steps are also
functions, for research code such as :mod:`dpfair.bounds`' certificates:
:func:`minimize_regularized_logistic` (its minimiser is **not private**) and
:func:`perturb_minimizer` (draws of π(w* + noise) around one w*).
"""

from __future__ import annotations

import math
from typing import ClassVar

import dp_accounting as dpa
import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, softmax
from sklearn.utils.validation import check_is_fitted

from dpfair.algorithms.base import FairEstimator
from dpfair.algorithms.signal import warn_if_too_few_records
from dpfair.utils.constraints import Bools, Interval, Listing, Options
from dpfair.privacy import (
    Part,
    PrivacyPlan,
    PrivacyUnit,
    SecretRandom,
    check_privacy_unit,
)
from dpfair.utils.validation import check_epsilon, check_positive

#: The names of the plan's parts (and of the ledger's entries).
RELEASE, PUBLIC_MINIMIZER = "perturbed minimiser", "minimiser (reads no sensitive attribute)"

#: Smallest ``tol``: above the float64 rounding of a mean gradient, so the solver's stop is reached.
MIN_TOL = 1e-12

#: Smallest ``l2_regularization / norm_bound²``: μI dominates the float64 rounding of the data Hessian
#: (at most R²/2 per entry), so its Cholesky factorisation cannot fail whatever the data.
MIN_L2 = 1e-10

_ARMIJO, _MAX_HALVINGS = 1e-4, 60


# ---- the public per-row map --------------------------------------------------------------------
def row_scale(X, norm_bound: float = 1.0, intercept_scaling: float | None = None) -> np.ndarray:
    """(n, 1) factors ``min(1, R/‖x‖)`` of the rows x (the constant ``intercept_scaling`` appended unless None)."""
    X = np.asarray(X, dtype=np.float64)
    constant = 0.0 if intercept_scaling is None else float(intercept_scaling) ** 2
    squared = np.sum(X**2, axis=1, keepdims=True) + constant
    return np.minimum(1.0, float(norm_bound) / np.maximum(np.sqrt(squared), np.finfo(np.float64).tiny))


def bound_rows(X, norm_bound: float = 1.0, intercept_scaling: float | None = None) -> np.ndarray:
    """Rows x (with the constant ``intercept_scaling`` appended unless ``None``) scaled to norm ≤ ``norm_bound``.

    ``x · min(1, R/‖x‖)``: a function of each row alone, so it adds nothing to any sensitivity.
    """
    X = np.asarray(X, dtype=np.float64)
    if intercept_scaling is not None:
        X = np.hstack([X, np.full((X.shape[0], 1), float(intercept_scaling))])
    return X * row_scale(X, norm_bound)


def lipschitz_constant(norm_bound: float, n_classes: int) -> float:
    """Λ of the logistic loss on rows of norm ≤ R: R for two classes, √2·R for softmax."""
    return float(norm_bound) * (1.0 if n_classes == 2 else math.sqrt(2.0))


# ---- the non-private minimiser -----------------------------------------------------------------
def _probabilities(W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """(n, k): σ(X wᵀ) for k = 1 (two classes), softmax(X Wᵀ) otherwise."""
    scores = X @ W.T
    return expit(scores) if W.shape[0] == 1 else softmax(scores, axis=1)


def _gradient(W, X, Y, mu, normalizer) -> np.ndarray:
    return (_probabilities(W, X) - Y).T @ X / normalizer + mu * W


def _hessian(W, X, mu, normalizer) -> np.ndarray:
    """The (kp × kp) Hessian: blocks ``Xᵀ diag(P_a (δ_ab − P_b)) X / N`` plus μI (k = 1: P(1 − P))."""
    P = _probabilities(W, X)
    k, p = W.shape
    H = np.empty((k, p, k, p))
    for a in range(k):
        for b in range(a, k):
            weights = P[:, a] * (float(a == b) - P[:, b]) / normalizer
            H[a, :, b, :] = H[b, :, a, :] = X.T @ (weights[:, None] * X)
    return H.reshape(k * p, k * p) + mu * np.eye(k * p)


def minimize_regularized_logistic(X, y, *, n_classes: int, l2_regularization: float = 1.0,
                                  normalizer: float | None = None, tol: float = 1e-10,
                                  max_iter: int = 100) -> np.ndarray:
    """**Not private.** ``argmin_w (1/N) Σ_i ℓ(w; x_i, y_i) + (μ/2)‖w‖²`` by damped Newton, to ``‖∇f‖ ≤ tol``.

    ``X`` as given (bound its rows with :func:`bound_rows` first for the Lipschitz constant to hold);
    ``y`` codes in ``0..n_classes−1``; N = ``normalizer`` (default: the number of rows). Returns w of
    shape (p,) for two classes, W of shape (n_classes, p) otherwise. Deterministic; never raises on
    the data (see the module docstring for the stopping rule).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    k = 1 if n_classes == 2 else int(n_classes)
    Y = y[:, None].astype(np.float64) if k == 1 else np.eye(k)[y]
    N = float(X.shape[0] if normalizer is None else normalizer)
    mu = float(l2_regularization)
    W = np.zeros((k, X.shape[1]))
    G = _gradient(W, X, Y, mu, N)
    for _ in range(int(max_iter)):
        merit = float(np.sum(G**2))
        if merit <= tol**2:
            break
        step = -cho_solve(cho_factor(_hessian(W, X, mu, N)), G.ravel()).reshape(W.shape)
        t = 1.0
        for _ in range(_MAX_HALVINGS):  # Armijo on ½‖∇f‖², whose slope along the Newton step is −‖∇f‖²
            G_new = _gradient(W + t * step, X, Y, mu, N)
            if np.sum(G_new**2) <= (1.0 - 2.0 * _ARMIJO * t) * merit:
                break
            t *= 0.5
        else:  # no step size lowers ‖∇f‖: float64 rounding, the stop is as good as it gets
            break
        W, G = W + t * step, G_new
    return W[0] if k == 1 else W


# ---- the release -------------------------------------------------------------------------------
def _project_rows(M: np.ndarray, radius: float) -> np.ndarray:
    """Each row of the (m, q) array ``M`` projected on the Euclidean ball of ``radius``."""
    norms = np.linalg.norm(M, axis=1, keepdims=True)
    return M * np.minimum(1.0, radius / np.maximum(norms, np.finfo(np.float64).tiny))


def project_onto_ball(w, radius: float) -> np.ndarray:
    """π: the Euclidean projection of a model w (a matrix: in Frobenius norm) on the ball of ``radius``."""
    w = np.asarray(w, dtype=np.float64)
    return _project_rows(w.reshape(1, -1), radius).reshape(w.shape)


def perturb_minimizer(w_star, noise_std: float, n_draws: int, *, radius: float | None = None,
                      secret: SecretRandom | None = None) -> np.ndarray:
    """``n_draws`` models ``π(w* + N(0, σ² I))`` around one minimiser, shape ``(n_draws, *w_star.shape)``.

    For research code that studies the distribution of private models (the paper's Figures 1–3): each
    draw released from a w* of real data is one more Gaussian release of that data, and w* itself is
    not private. ``radius=None``: no projection. Noise from ``secret`` (default: a fresh
    :class:`~dpfair.privacy.SecretRandom`).
    """
    w_star = np.asarray(w_star, dtype=np.float64)
    sigma = check_positive(noise_std, "noise_std", allow_zero=True)
    draws = check_positive(n_draws, "n_draws", integer=True)
    secret = SecretRandom(("perturb_minimizer",)) if secret is None else secret
    models = w_star + sigma * secret.normal((draws, *w_star.shape))
    return models if radius is None else _project_rows(models.reshape(draws, -1), radius).reshape(models.shape)


# ---- the estimator -----------------------------------------------------------------------------
class OutputPerturbationClassifier(FairEstimator):
    """ℓ2-regularised logistic regression released by output perturbation (Mangold et al. 2023, Sec. 4.1).

    The module docstring derives the sensitivity for each privacy unit and states the privacy argument.

    Parameters
    ----------
    epsilon, delta : the target budget (``delta=None``: 1/N²; ``epsilon=inf``: the minimiser, no noise).
    privacy_unit : "record" (add/remove one record; default) or "sensitive" (one person's s).
    l2_regularization : μ > 0, the strong convexity of the objective (the paper's experiments: 1).
    norm_bound : R > 0, rows (intercept column included) are scaled to norm at most R, in fit and predict.
    fit_intercept : append the public constant column ``intercept_scaling`` before the rows are bounded;
        it counts against R and its weight is regularised like the others (choose it below R, e.g.
        R/√2, so that the features keep room).
    intercept_scaling : the constant c > 0 of that column; ``intercept_ = c · w_c``.
    sample_size : N, the public number of training records that normalises the objective (the data
        set's published size). ``None``: the number of rows n (public in dpfair's privacy model).
    sensitive_feature_columns : under "sensitive", the columns of X that encode s (e.g. its one-hot
        columns); ``None`` or ``[]``: X holds no function of s, the model reads no s and spends ε = 0.
        Under "record" every column is protected anyway. The CLI and the sweeps pass a data set's
        ``sensitive_columns``; ``fit`` adds a DataFrame's columns named after the sensitive Series.
    tol : τ ≥ 1e-12, the solver stops at ``‖∇f(ŵ)‖ ≤ τ``; 2τ/μ is added to the sensitivity.
    max_iter : cap on Newton steps (public; a handful suffice, keep it generous: the guarantee needs the
        stop at ``‖∇f‖ ≤ tol``, see the module docstring).
    project : project the release on the ball of radius Λ/μ that holds the minimiser (post-processing).
    calibration : "accountant" (σ calibrated to (ε, δ) on ``accountant``) or "paper" (the Gaussian
        mechanism's closed form σ = Δ·√(2 log(1.25/δ))/ε, for reproducing the paper; needs ε < 1).
    noise_multiplier : fixes σ / bound instead of calibrating it.
    accountant : "pld" or "rdp", which reports ``privacy_spent_``.
    groups, classes : the public group and class lists (an int k: ``0..k-1``); ``None`` infers them,
        with a ``PrivacyLeakWarning`` where the data are private.
    secure_mode : draw the noise from :mod:`dpfair.privacy.samplers` (resists floating-point attacks).
    random_state : seeds nothing a guarantee rests on (the noise comes from a secret generator).
    verbose : a progress bar on stderr (:mod:`dpfair.utils.progress`).

    Under ``"record"``, a fit calibrated to ε warns when √(p·ln(1/δ))/(N·ε) > 0.02 (p released parameters):
    too few records for that privacy (:func:`dpfair.algorithms.signal.warn_if_too_few_records`).

    Fitted attributes: ``coef_`` ((1, d) or (l, d)), ``intercept_`` ((1,) or (l,); zeros without an
    intercept), ``classes_``, ``noise_std_`` (σ), ``noise_multiplier_``, ``sensitivity_`` (Δ, the
    largest distance between two neighbours' minimisers as solved), ``lipschitz_`` (Λ),
    ``strong_convexity_`` (μ), ``radius_`` (Λ/μ), ``sample_size_`` (N), ``n_params_`` (the number of
    released parameters), ``privacy_spent_``, ``privacy_ledger_``, ``privacy_plan_``.
    """

    _private = True
    _min_per_class = 1
    _certificate = "output_perturbation"  # Mangold et al.'s Lemma 4.1 (dpfair.bounds.certify)
    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "l2_regularization": [Interval(float, 0, None, closed="neither",
                                       note="it is μ, the strong convexity of the objective; the paper uses 1.0")],
        "norm_bound": [Interval(float, 0, None, closed="neither",
                                note="it is R, the norm rows are scaled to; 1.0 for standardised rows")],
        "fit_intercept": [Bools()],
        "intercept_scaling": [Interval(float, 0, None, closed="neither",
                                       note="the constant of the intercept column, below norm_bound, e.g. "
                                            "norm_bound / 2**0.5")],
        "sample_size": [None, Interval(int, 0, None, closed="neither",
                                       note="the public number of training records")],
        "sensitive_feature_columns": [None, Listing("a list of column indices of X")],
        "tol": [Interval(float, MIN_TOL, None, closed="left",
                         note="the gradient norm at which the solver stops, e.g. 1e-10; float64 gradients cannot "
                              "go lower")],
        "max_iter": [Interval(int, 0, None, closed="neither", note="a number of Newton steps, such as 100")],
        "project": [Bools()],
        "calibration": [Options("accountant", "paper")],
    }

    def __init__(self, *, epsilon=1.0, delta=None, privacy_unit="record", l2_regularization=1.0, norm_bound=1.0,
                 fit_intercept=False, intercept_scaling=1.0, sample_size=None, sensitive_feature_columns=None,
                 tol=1e-10, max_iter=100, project=True, calibration="accountant", noise_multiplier=None,
                 accountant="pld", groups=None, classes=None, secure_mode=False, random_state=None, verbose=False):
        self.epsilon = epsilon
        self.delta = delta
        self.privacy_unit = privacy_unit
        self.l2_regularization = l2_regularization
        self.norm_bound = norm_bound
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.sample_size = sample_size
        self.sensitive_feature_columns = sensitive_feature_columns
        self.tol = tol
        self.max_iter = max_iter
        self.project = project
        self.calibration = calibration
        self.noise_multiplier = noise_multiplier
        self.accountant = accountant
        self.groups = groups
        self.classes = classes
        self.secure_mode = secure_mode
        self.random_state = random_state
        self.verbose = verbose

    # ---- hyper-parameters (public: checked before the data are read) ------------------------------
    def _check_hyperparameters(self, n_features: int | None) -> None:
        """:meth:`check_hyperparameters`, and ``sensitive_feature_columns`` against X's width ``n_features``
        (public)."""
        self.check_hyperparameters()
        columns = [] if self.sensitive_feature_columns is None else list(self.sensitive_feature_columns)
        if columns and n_features is None:
            raise ValueError("output perturbation's plan with sensitive_feature_columns depends on the number of "
                             "features: pass n_features=X.shape[1]")
        if any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= c < n_features
               for c in columns) or len(set(columns)) != len(columns):
            raise ValueError(f"sensitive_feature_columns must list distinct column indices of X in "
                             f"0..{n_features - 1}, got {self.sensitive_feature_columns!r}")

    def check_hyperparameters(self) -> OutputPerturbationClassifier:
        """The declared constraints (:meth:`~dpfair.algorithms.base.FairEstimator.check_hyperparameters`), then
        μ against R (float64's reach) and what ``calibration="paper"`` asks of ε and σ."""
        super().check_hyperparameters()
        if float(self.l2_regularization) < MIN_L2 * float(self.norm_bound) ** 2:
            raise ValueError(f"l2_regularization must be >= {MIN_L2:g} * norm_bound**2, got "
                             f"{self.l2_regularization!r}; below it the noise (∝ 1/μ) swamps the model and "
                             "float64 Newton steps can fail")
        if self.calibration == "paper":
            if self.noise_multiplier is not None:
                raise ValueError("calibration='paper' sets the noise itself; drop noise_multiplier or use "
                                 "calibration='accountant'")
            epsilon = check_epsilon(self.epsilon, budget=True)
            if not (epsilon < 1.0 or math.isinf(epsilon)):
                raise ValueError(f"calibration='paper' (the classical Gaussian mechanism) needs epsilon < 1, got "
                                 f"{self.epsilon!r}; use calibration='accountant'")
        return self

    def _sensitive_columns(self, shape) -> list[int]:
        """The columns of X that encode s: ``sensitive_feature_columns`` and those a public schema names (a
        DataFrame's columns named after the sensitive Series, in ``shape.sensitive_columns``)."""
        given = [] if self.sensitive_feature_columns is None else self.sensitive_feature_columns
        return sorted({int(c) for c in given} | set(shape.sensitive_columns))

    def _public_size(self, n: int) -> int:
        """N: ``sample_size``, else the number of rows (public, as everywhere in dpfair); it sets δ = 1/N² too."""
        return n if self.sample_size is None else int(self.sample_size)

    # ---- privacy -------------------------------------------------------------------------------
    def _privacy_plan(self, shape) -> PrivacyPlan:
        """One Gaussian release of the minimiser, or (under "sensitive" with no column of X encoding s) a no-op:
        the minimiser reads no s."""
        self._check_hyperparameters(shape.n_features)
        if check_privacy_unit(self.privacy_unit) is PrivacyUnit.RECORD or self._sensitive_columns(shape):
            return PrivacyPlan((Part(RELEASE),))
        return PrivacyPlan((Part(PUBLIC_MINIMIZER, mechanism="fixed", fixed=dpa.NoOpDpEvent()),))

    def _noise_multiplier(self, epsilon, delta, unit):
        """``calibration="paper"``: the classical Gaussian mechanism's σ/bound, ``d·√(2 log(1.25/δ))/ε`` (d = 1 under
        add/remove, 2 under replace-one: the bound is half the distance there); else ``noise_multiplier``."""
        if self.calibration != "paper":
            return super()._noise_multiplier(epsilon, delta, unit)
        distance_per_bound = 1.0 if unit is PrivacyUnit.RECORD else 2.0
        return 0.0 if math.isinf(epsilon) else distance_per_bound * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon

    # ---- fitting -------------------------------------------------------------------------------
    def _fit(self, ctx, X, y, s):
        self._check_hyperparameters(X.shape[1])
        self.strong_convexity_ = mu = float(self.l2_regularization)
        tol, norm_bound = float(self.tol), float(self.norm_bound)
        self.sensitive_feature_columns_ = self._sensitive_columns(ctx.shape)
        n_classes = len(self.classes_)
        c = float(self.intercept_scaling) if self.fit_intercept else None
        self.sample_size_ = N = self._public_size(X.shape[0])
        self.lipschitz_ = lam = lipschitz_constant(norm_bound, n_classes)
        self.radius_ = lam / mu
        self.n_params_ = (1 if n_classes == 2 else n_classes) * (X.shape[1] + self.fit_intercept)
        reads_private = self.privacy_unit_ is PrivacyUnit.RECORD or bool(self.sensitive_feature_columns_)
        if self.privacy_unit_ is PrivacyUnit.RECORD and self.noise_multiplier is None:
            warn_if_too_few_records("output perturbation", N, self.n_params_, self.epsilon_target_, self.delta_)
        if reads_private:
            add_remove = self.privacy_unit_ is PrivacyUnit.RECORD
            self.sensitivity_ = (1.0 if add_remove else 2.0) * lam / (mu * N) + 2.0 * tol / mu
            bound = self.sensitivity_ if add_remove else self.sensitivity_ / 2.0
            self.noise_multiplier_ = ctx.calibrate(self.plan(ctx.shape))[RELEASE]
            self.noise_std_ = self.noise_multiplier_ * bound
        else:
            ctx.calibrate(self.plan(ctx.shape))
            self.privacy_ledger_.record(dpa.NoOpDpEvent(), PUBLIC_MINIMIZER)
            self.sensitivity_ = self.noise_multiplier_ = self.noise_std_ = 0.0

        w_hat = minimize_regularized_logistic(bound_rows(X, norm_bound, c), y, n_classes=n_classes,
                                              l2_regularization=mu, normalizer=N, tol=tol, max_iter=self.max_iter)
        w = ctx.release(RELEASE).noisy_sum(w_hat, bound=bound) if reads_private else w_hat
        if self.project:
            w = project_onto_ball(w, self.radius_)
        W = np.atleast_2d(w)
        self.coef_ = W[:, :X.shape[1]].copy()
        self.intercept_ = W[:, -1] * c if self.fit_intercept else np.zeros(W.shape[0])
        self._finish_privacy()

    # ---- prediction ----------------------------------------------------------------------------
    def decision_function(self, X) -> np.ndarray:
        """Scores ``min(1, R/‖(x, c)‖) · (x·coefᵀ + intercept)``: (n,) for two classes, (n, l) otherwise."""
        check_is_fitted(self, "coef_")
        X = self._prediction_features(X)
        scores = self._scores(X)
        return scores[:, 0] if scores.shape[1] == 1 else scores

    def _scores(self, X) -> np.ndarray:
        c = float(self.intercept_scaling) if self.fit_intercept else None
        return row_scale(X, float(self.norm_bound), c) * (X @ self.coef_.T + self.intercept_)

    def certificate_inputs(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Scores and per-row Lipschitz constants of the margin (:mod:`dpfair.bounds`): L = ‖x̃‖ (one weight
        vector) or √2‖x̃‖ (softmax), x̃ the bounded row the model reads."""
        check_is_fitted(self, "coef_")
        X = self._prediction_features(X)
        c = float(self.intercept_scaling) if self.fit_intercept else None
        norms = np.linalg.norm(bound_rows(X, float(self.norm_bound), c), axis=1)
        scores = self._scores(X)
        if scores.shape[1] == 1:
            return scores[:, 0], norms
        return scores, math.sqrt(2.0) * norms

    def private_draws(self, private, X, n_draws: int) -> list[np.ndarray]:
        """Predictions of ``n_draws`` releases π(w* + N(0, σ²I)) of ``private``'s noise around this model's w*.

        Research code (the certificates' empirical gaps): ``self`` must be the same estimator fitted at
        ``epsilon=inf`` (its coefficients are the non-private minimiser); each draw is one more release.
        """
        check_is_fitted(self, "coef_")
        if self.noise_std_ != 0.0 or not math.isinf(self.epsilon_target_):
            raise ValueError("private_draws needs the non-private fit (epsilon=inf) as self")
        X = self._prediction_features(X)
        c = float(self.intercept_scaling) if self.fit_intercept else None
        rows = bound_rows(X, float(self.norm_bound), c)
        W = np.hstack([self.coef_, (self.intercept_ / c)[:, None]]) if self.fit_intercept else self.coef_
        models = perturb_minimizer(W, private.noise_std_, n_draws, radius=private.radius_ if private.project else None)
        scores = np.einsum("np,dkp->dnk", rows, models)
        labels = (scores[..., 0] > 0).astype(np.int64) if W.shape[0] == 1 else np.argmax(scores, axis=2)
        return [self.classes_[row] for row in labels]

    def _predict_proba(self, X) -> np.ndarray:
        scores = self._scores(X)
        if scores.shape[1] == 1:
            p1 = expit(scores[:, 0])
            return np.column_stack([1.0 - p1, p1])
        return softmax(scores, axis=1)
