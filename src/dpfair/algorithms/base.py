"""The scikit-learn style base every dpfair estimator stands on.

What it gives a method, so that the method's file reads like its paper's
pseudo-code:

- ``fit(X, y, sensitive_features=s)``: input checks (finite features, aligned
  lengths, labels and groups encoded against their *public* lists), then the
  subclass's ``_fit``; a fit that fails leaves the estimator unfitted;
- the fit contract (:mod:`dpfair.algorithms.fit_context`): a public, side-effect-free
  :meth:`FairEstimator.plan` (what a fit will release and at what σ, from public
  inputs alone), and one :class:`~dpfair.algorithms.fit_context.FitContext` per fit,
  handed to the method's ``_fit(ctx, X, y, s)``; a grid of fits through
  :meth:`FairEstimator.fit_many`;
- randomness in two kinds: ``random_state`` seeds only the *public* generators
  ``ctx.np_rng`` / ``ctx.torch_rng`` (initialisation, public minibatch
  order); everything a guarantee rests on comes from ``ctx.secret``, a
  :class:`~dpfair.privacy.SecretRandom` made fresh for each fit from 128 bits of
  OS entropy and dropped when the fit ends (never stored or saved);
- public X under ``privacy_unit="sensitive"``: a DataFrame's columns named after
  the sensitive Series (``sex``, ``sex=...``, ``sex_<group>``) encode s, and are
  refused there (:meth:`~dpfair.algorithms.inputs.FitInputs.check_sensitive_columns`, the rule of
  :func:`~dpfair.privacy.check_public_features`) or accounted for by a method that
  can (output perturbation's ``sensitive_feature_columns``);
- public structure: the group list (``groups``) and the class list
  (``classes``) are public inputs. Inferring them from private arrays (s under
  either unit, y under the record unit) raises a :class:`PrivacyLeakWarning`,
  and no check, error message or array shape depends on private counts;
- device choice (``"auto"``: CUDA when available);
- privacy plumbing: a :class:`~dpfair.privacy.PrivacyLedger` under the
  estimator's privacy unit, a :class:`~dpfair.privacy.PrivacyPlan` calibrated
  before training (``ctx.calibrate``), :class:`~dpfair.privacy.Release` objects that
  draw the noise and record it, and ``privacy_spent_ = (ε, δ)`` from the ledger
  actually spent by that fit alone: fits repeated on the same people (a scikit-learn search, cross-validation)
  compose, and a fit inside a scikit-learn search that drew from no budget warns so
  (:mod:`dpfair.algorithms.unaccounted_search`);
- ``history_``: one row per epoch of what the method logs; it is saved with the
  model, so a private method logs public counters and post-processed releases only.

The checks and encoding of ``fit``'s inputs are :mod:`dpfair.algorithms.inputs` (its functions importable from here
too), prediction :mod:`dpfair.algorithms.prediction`: two mixins of :class:`FairEstimator`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from dpfair.algorithms import method_name
from dpfair.algorithms.fit_context import FitContext, FitPlan, PublicShape
from dpfair.algorithms.inputs import (  # the input checks; re-exported here, where callers import them
    FitInputs,
    check_sample_weight,
    make_generators,
    named_sensitive_columns,  # noqa: F401 - re-exported
    public_categories,  # noqa: F401 - re-exported
    resolve_device,
)
from dpfair.algorithms.learned import check_learned
from dpfair.algorithms.prediction import Predictions
from dpfair.algorithms.unaccounted_search import warn_if_parallel_search, warn_if_unaccounted_search
from dpfair.utils.capabilities import Capabilities
from dpfair.utils.constraints import Bools, Instances, Interval, Listing, Options, check_parameters
from dpfair.model_files import register_estimator
from dpfair.nn import MODEL_NAMES, make_model
from dpfair.privacy import (
    ACCOUNTANTS,
    PrivacyLedger,
    PrivacyPlan,
    PrivacyUnit,
    check_privacy_unit,
)
from dpfair.privacy.budget import Charge, charging
from dpfair.privacy.session import ReleaseSession
from dpfair.privacy.randomness import VOID_GUARANTEE
from dpfair.utils.progress import progress
from dpfair.utils.validation import check_delta, check_epsilon


class FairEstimator(FitInputs, Predictions, ClassifierMixin, BaseEstimator):
    """Base of every dpfair classifier. Subclasses implement ``_fit`` and ``_predict_proba``.

    Class attributes a subclass may set:
    ``_requires_sensitive`` (``fit`` needs ``sensitive_features``),
    ``_min_per_class`` / ``_min_per_group`` (members each class / group needs, checked only where
    those arrays are public: y under the sensitive unit, s for non-private methods),
    ``_private`` (whether ``epsilon``/``delta`` hyper-parameters exist),
    ``_binary_only`` (``fit`` takes two classes only; scikit-learn's ``multi_class`` tag).
    Subclasses may take ``groups`` and ``classes`` (public lists; see the module docstring)
    and ``secure_mode`` (noise from :mod:`dpfair.privacy.samplers`).
    """

    _requires_sensitive = False
    _min_per_class = 2
    _min_per_group = 2
    _private = False
    _binary_only = False
    #: the fairness notions the method can target (its ``notion`` values; one entry for a method built for one
    #: notion, none for a method that targets none) and the hyper-parameter setting how strictly it does
    _notions: tuple[str, ...] = ()
    _fairness_strength: str | None = None
    #: whether ``predict``/``predict_proba`` take ``sensitive_features`` (a group-aware rule)
    _predict_needs_sensitive = False
    #: the privacy units a private method with a ``privacy_unit`` hyper-parameter can guarantee (a method whose
    #: class fixes ``privacy_unit`` guarantees that one)
    _units: tuple[str, ...] = ("sensitive", "record")
    #: what else callers may ask (:class:`~dpfair.utils.capabilities.Capabilities`'s fields of the same names): a grid
    #: trained batched, λ following a public target error, public group shares, a certificate's distance bound
    _batched_grid = False
    _target_error = False
    _public_group_shares = False
    _certificate: str | None = None
    #: whether ``fit`` trains in float32, whose range X's rows must respect (:func:`~dpfair.utils.validation.check_feature_scale`)
    _float32_training = False
    #: The values each constructor hyper-parameter accepts (:mod:`dpfair.utils.constraints`), checked in one place by
    #: :meth:`check_hyperparameters`. A subclass extends it (``{**Base.parameter_constraints, "lam": [...]}``);
    #: declared here: the hyper-parameters most methods share (a name the class does not take is skipped).
    parameter_constraints: ClassVar[dict] = {
        "groups": [None, Interval(int, 2, None, closed="left"), Listing("a list of the group values")],
        "classes": [None, Interval(int, 2, None, closed="left"), Listing("a list of the label values")],
        "random_state": [None, Interval(int, 0, None, closed="left")],
        "verbose": [Bools(), Interval(int, 0, None, closed="left")],
        "epsilon": [Interval(float, 0, math.inf, closed="right", note="smaller ε means more privacy; inf: no noise")],
        "delta": [None, Interval(float, 0, 1, closed="neither", note="None: 1/n²")],
        "privacy_unit": [Options(*(unit.value for unit in PrivacyUnit))],
        "accountant": [Options(*ACCOUNTANTS)],
        "noise_multiplier": [None, Interval(float, 0, None, closed="left", note="None: calibrated to epsilon")],
        "secure_mode": [Bools()],
    }

    def __init_subclass__(cls, **kwargs):
        """A class that the method table names (:func:`dpfair.algorithms.method_name`) registers with
        :mod:`dpfair.model_files` as it is made, so that model files may hold it; a user's subclass does not."""
        super().__init_subclass__(**kwargs)
        if method_name(cls) is not None:
            register_estimator(cls)

    def check_hyperparameters(self) -> FairEstimator:
        """Refuse hyper-parameters that no data could make valid; return ``self``. ``fit`` runs it first.

        It reads the hyper-parameters alone (public), never the data, so callers may run it before any data is
        loaded or any release is made: the CLI, a sweep spec's grid, a private search's candidates
        (:class:`~dpfair.selection.PrivateSearch`), each asking a clone with the candidate set. Here: every
        declared constraint (:attr:`parameter_constraints`, :func:`dpfair.utils.constraints.check_parameters`: a real is
        finite unless its constraint takes ``inf``, as ``epsilon``'s does), then a finite ``epsilon`` at most
        :data:`~dpfair.utils.validation.MAX_EPSILON`; a subclass adds the rules that tie several hyper-parameters together.
        """
        check_parameters(self, self.parameter_constraints)
        if self._private:
            check_epsilon(self.epsilon, budget=True)
        return self

    def fairness_target(self) -> dict:
        """What the method targets, from its hyper-parameters: ``{"notion": ..., <strength parameter>: value}``
        (``{}`` for a method that targets no fairness notion)."""
        if not self._notions:
            return {}
        target = {"notion": self.get_params().get("notion", self._notions[0])}
        if self._fairness_strength is not None:
            target[self._fairness_strength] = self.get_params()[self._fairness_strength]
        return target

    def __sklearn_tags__(self):
        """scikit-learn's tags: dense numeric input (the defaults), and, for a private method, a fit that
        ``random_state`` does not repeat (its noise comes from a secret generator, never from the seed)."""
        tags = super().__sklearn_tags__()
        tags.non_deterministic = self._private
        tags.classifier_tags.multi_class = not self._binary_only
        return tags

    def __dpfair_capabilities__(self) -> Capabilities:
        """What this method can do (:mod:`dpfair.utils.capabilities`; callers ask
        :func:`dpfair.utils.capabilities.capabilities`), from the class attributes above and two hyper-parameters: a
        class that fixes ``privacy_unit`` guarantees that unit alone, and a ``secure_mode`` fit draws its exact
        noise for one model at a time (:class:`~dpfair.privacy.Release`), so its grids are not batched."""
        params = self.get_params(deep=False)
        fixed = None if "privacy_unit" in params else getattr(type(self), "privacy_unit", None)
        units = () if not self._private else (fixed,) if fixed is not None else tuple(self._units)
        return Capabilities(private=self._private, units=units, notions=tuple(self._notions),
                            fairness_strength=self._fairness_strength, requires_sensitive=self._requires_sensitive,
                            predict_needs_sensitive=self._predict_needs_sensitive,
                            batched_grid=self._batched_grid and not params.get("secure_mode", False),
                            target_error=self._target_error, public_group_shares=self._public_group_shares,
                            certificate=self._certificate)

    #: With scikit-learn's metadata routing on, ``sensitive_features`` goes to ``fit`` and ``score`` unasked:
    #: ``GridSearchCV(est, ...).fit(X, y, sensitive_features=s)`` routes s to every fit and score.
    __metadata_request__fit = {"sensitive_features": True}
    __metadata_request__score = {"sensitive_features": True}

    def __sklearn_clone__(self):
        """scikit-learn's ``clone``, keeping an attached :class:`~dpfair.privacy.PrivacyBudget` (shared, not
        copied): the clones that ``GridSearchCV`` and ``cross_validate`` fit draw from the same budget.

        A private estimator with no budget, cloned by a scikit-learn search whose ``n_jobs`` fits in parallel
        workers, warns here, once per search (:func:`~dpfair.algorithms.unaccounted_search.warn_if_parallel_search`):
        the workers' fits cannot tell that they are a search's."""
        new = super().__sklearn_clone__()
        new.privacy_budget = self.privacy_budget
        if self._private and self.privacy_budget is None:
            warn_if_parallel_search(new)
        return new

    def __getstate__(self):
        """scikit-learn's state for pickling and copying, without a running fit's context (its secret generator is
        never copied or pickled: a copy made by a callback during the fit is an unfitted-in-progress estimator)."""
        state = dict(super().__getstate__())  # object.__getstate__ may hand back the instance's own __dict__
        state.pop("_running_fit", None)
        return state

    @property
    def privacy_budget(self):
        """The :class:`~dpfair.privacy.PrivacyBudget` this estimator's fits draw from (``None``: none), as
        :meth:`~dpfair.privacy.PrivacyBudget.attach` and ``detach`` set it. It is no hyper-parameter: ``clone`` and
        ``copy.deepcopy`` keep it (shared, never copied), ``save`` leaves it out, and pickling refuses it."""
        return vars(self).get("_budget")

    @privacy_budget.setter
    def privacy_budget(self, budget) -> None:
        if budget is None:
            vars(self).pop("_budget", None)
        else:
            self._budget = budget

    # ---- fitting -------------------------------------------------------
    def fit(self, X, y, sensitive_features=None, *, callback=None, **fit_params):
        """Fit on ``(X, y)`` with the sensitive attribute ``sensitive_features``.

        ``sensitive_features``: one group value per row, or the name of a column of the DataFrame ``X``. A named
        column is taken out of X (s is then never a feature) and remembered as ``sensitive_column_``: prediction
        drops it from a DataFrame that holds it, and a method that reads s at prediction takes s from it. To keep
        that column as a feature too, pass it as a Series, ``sensitive_features=X["sex"]``: the rules for features
        that encode s apply (refused where X is public, ``privacy_unit="sensitive"``).

        ``sample_weight=w`` (row weights): taken by a method whose loss may weight rows (``ERMClassifier``), with
        its own ``fit`` signature; refused by the others with one line saying why (a private method's accounting
        bounds one row's unweighted contribution, and a weight multiplies it).

        ``callback``: ``callback(estimator, info)`` at the end of every epoch (round, solve) of
        training, ``info`` holding public counters (``epoch``, ``step``, ``steps``); it may read
        :meth:`privacy_spent_so_far`. With ``verbose=True`` a progress bar shows the steps and the ε
        spent so far (:mod:`dpfair.utils.progress`; ``dpfair.utils.progress.quiet()`` silences it).

        A fit that learned nothing (one class predicted, or a training loss not below the constant model's)
        warns with the likely cause (:func:`dpfair.algorithms.learned.check_learned`: it reads the rows only
        where X and y are public, never under ``privacy_unit="record"``).
        """
        within = vars(self).pop("_fit_within", None)  # handed by fit_within for this one call, else None
        with progress(desc=type(self).__name__, unit="step", enabled=bool(getattr(self, "verbose", False))) as bar, \
                charging(self, self.privacy_budget, within) as charge:  # checked before any release, charged after
            try:
                data = self.begin_fit(X, y, sensitive_features, **fit_params)
                ctx = self.fit_context
                ctx.bar, ctx.callback, ctx.charge = bar, callback, charge
                ctx.claim()  # a non-private fit claims ε = ∞ here, before reading data; others at calibration
                self._fit(ctx, *data)
                self._check_fitted()
                check_learned(self, *data, rows_public=not self._labels_private)  # warns if it learned nothing
                if not ctx.epochs_ended:  # a method without epochs: its whole fit is one
                    ctx.progress(1, "fit").update()
                    ctx.end_epoch(epoch=1, step=1, steps=1)
            except BaseException:
                self.unfit()
                raise
            self.end_fit()
            charge.spent(self.privacy_ledger_, vars(self).get("delta_"))
        if self._private and self.privacy_budget is None and math.isfinite(self.privacy_spent_[0]):  # unaccounted
            warn_if_unaccounted_search(self, *self.privacy_spent_)
        return self

    def fit_within(self, within, X, y, sensitive_features=None, **fit_params):
        """:meth:`fit` as a part of ``within``, the running budget claim (a :class:`~dpfair.privacy.budget.Charge`)
        of the fit or search this fit runs inside: a base model inside post-processing, a search's runs. Its claims
        are checked and charged as that claim's part (on ``within``'s budget, unless this estimator is attached to a
        budget of its own, which it is then charged on apart). ``None`` (or a no-op charge): a fit of its own, as
        :meth:`fit`. The enclosing computation passes its claim down explicitly (``fit_many(budget=charge)``,
        :func:`fit_part`): no fit finds its parent in ambient state."""
        self._fit_within = within  # read (and dropped) by fit at its start: the same frames as a user's fit
        try:
            return self.fit(X, y, sensitive_features, **fit_params)
        finally:
            vars(self).pop("_fit_within", None)

    @property
    def fit_context(self) -> FitContext | None:
        """The :class:`~dpfair.algorithms.fit_context.FitContext` of the fit running now (from :meth:`begin_fit`
        to :meth:`end_fit` or :meth:`unfit`), else ``None``. Read-only; held by this estimator only while its fit
        runs (never saved, never cloned): a grid that drives the steps of its models' fits (:meth:`fit_many`) reads
        each model's context here, a callback's :meth:`privacy_spent_so_far` too."""
        return vars(self).get("_running_fit")

    # The steps of the fit contract, public for code that runs the steps of several fits together (a batched grid,
    # :meth:`fit_many`): begin_fit, the method's own steps, then end_fit, or unfit when anything failed. ``fit``
    # is these around ``_fit``.
    def unfit(self) -> None:
        """Drop every fitted (``name_``) attribute and the running fit's context: the estimator is unfitted again
        (a failed fit ends so)."""
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, key)
        ctx = vars(self).pop("_running_fit", None)
        if ctx is not None:
            ctx.close()

    def end_fit(self) -> None:
        """The end of a fit that succeeded: its context (and with it the secret generator) is forgotten; the
        fitted (``name_``) attributes stay. A side ledger left open would be releases missing from the fit's ledger
        and its budget charge: refused."""
        ctx = vars(self).pop("_running_fit", None)
        if ctx is not None:
            open_ledgers = len(ctx.side_ledgers)
            if open_ledgers:
                ctx.close()
                raise RuntimeError(f"{type(self).__name__}'s fit left {open_ledgers} side ledger(s) open: "
                                   "its _fit must call ctx.close_side_ledgers() before it ends")
            ctx.close()

    def begin_fit(self, X, y, sensitive_features=None, *, checked=None, **fit_params):
        """The first step of a fit: checks the inputs and encodes them against the public group and class lists,
        makes this fit's :class:`~dpfair.algorithms.fit_context.FitContext` (public generators from
        ``random_state``, a fresh secret generator, an empty ledger; :attr:`fit_context` until the fit ends);
        returns ``(X, y_codes, s_codes)``. The fit then ends with :meth:`end_fit`, or :meth:`unfit`. ``checked``: a
        :class:`~dpfair.utils.validation.CheckedFeatures` from a caller that fits many models on the same ``X``.
        """
        self.unfit()
        weight = self._check_fit_params(fit_params)
        if self._private:
            self.privacy_unit_ = check_privacy_unit(self.privacy_unit)
        self.check_hyperparameters()
        X, sensitive_features = self._sensitive_column(X, sensitive_features)
        raw_X, raw_s = X, sensitive_features
        X, y_codes, s_codes = self._check_fit_inputs(X, y, sensitive_features, checked)
        # a DataFrame's columns named after the sensitive Series: refused where X is public, else accounted for by
        # the method (output perturbation's plan reads them from the fit's shape)
        named = [] if raw_s is None else self.check_sensitive_frame(raw_X, raw_s, self.groups_)
        if weight is not None:
            weight = check_sample_weight(weight, X.shape[0])
        self.device_ = resolve_device(getattr(self, "device", "cpu"))
        np_rng, torch_rng, self.random_state_ = make_generators(getattr(self, "random_state", None), self.device_)
        self.privacy_ledger_ = PrivacyLedger(self.privacy_unit_ if self._private else "record")
        session = None
        if self._private:
            session = ReleaseSession(self.privacy_ledger_, key=(type(self).__name__, self.random_state_),
                                     secure=bool(getattr(self, "secure_mode", False)))
            secret = session.secret
            self.epsilon_target_ = check_epsilon(self.epsilon, budget=True)
            if self.delta is None and len(X) < 2:  # the default δ = 1/n² is 1 there: no guarantee at all
                raise ValueError(f"{type(self).__name__} got {len(X)} training row; a private fit needs at least 2 "
                                 "(its default delta is 1/n²): train on more rows")
            self.delta_ = self._fit_delta(len(X), warn=True)
            self.privacy_guarantee_ = VOID_GUARANTEE if secret.reproducible else "differential privacy"
        else:
            self.privacy_guarantee_ = "none (non-private method)"
        self.history_ = []
        shape = PublicShape(len(X), X.shape[1], tuple(np.asarray(self.groups_).tolist())
                            if s_codes is not None and self.groups_ is not None else None,
                            tuple(np.asarray(self.classes_).tolist()), tuple(named))
        self._running_fit = FitContext(self, self.privacy_ledger_, shape, np_rng, torch_rng, session,
                                       private=self._private, delta=vars(self).get("delta_"),
                                       accountant=getattr(self, "accountant", "pld"), sample_weight=weight)
        return X, y_codes, s_codes

    def _fit(self, ctx: FitContext, X, y, s):  # pragma: no cover - abstract
        """The method's own steps on the encoded data, with this fit's context ``ctx`` (its generators, the release
        path, progress): a private method calibrates ``ctx.calibrate(self.plan(ctx.shape))`` before its first
        release, then draws every noisy quantity through ``ctx.release(part)``."""
        raise NotImplementedError

    def _check_fitted(self) -> None:
        """After ``_fit``: refuse a fitted model that cannot predict (a subclass says how to tell)."""

    # ---- the plan: what a fit will release, from public inputs alone ----
    def plan(self, n, n_features=None, *, groups=None, classes=None, sensitive_columns=()) -> FitPlan:
        """What a fit on ``n`` rows will release and at what σ, before any data is read: a
        :class:`~dpfair.algorithms.fit_context.FitPlan` (the :class:`~dpfair.privacy.PrivacyPlan`, every part's σ,
        the ε target, δ, the unit; ``privacy_spent`` of it).

        From public inputs only: ``n`` rows (a method with a public ``sample_size`` uses that), ``n_features`` (the
        columns of X), the public ``groups`` and ``classes`` (an int k or the values; ``None``: the estimator's
        own ``groups``/``classes``), ``sensitive_columns`` (columns of X a public schema says encode s). ``n`` may
        also be a :class:`~dpfair.algorithms.fit_context.PublicShape`. No side effect: the estimator is not
        changed, nothing is released or recorded. The fit calibrates through this same method, so its
        ``privacy_plan_`` and ``noise_multipliers_`` equal the plan's. A method that is not private plans nothing
        (``plan`` None, ε = ∞). Raises the one-line errors the fit would raise on these public inputs.
        """
        shape = n if isinstance(n, PublicShape) else PublicShape.of(
            n, n_features, groups if groups is not None else getattr(self, "groups", None),
            classes if classes is not None else getattr(self, "classes", None), sensitive_columns)
        self.check_hyperparameters()
        if not self._private:
            return FitPlan(None, {}, math.inf, None, None)
        return self._calibrated(self._privacy_plan(shape), shape)

    def _privacy_plan(self, shape: PublicShape) -> PrivacyPlan:
        """The :class:`~dpfair.privacy.PrivacyPlan` of a fit of ``shape`` (each private method states its own, from
        public quantities and hyper-parameters)."""
        raise NotImplementedError(f"{type(self).__name__} cannot state its plan from public inputs alone")

    def _calibrated(self, plan: PrivacyPlan, shape: PublicShape) -> FitPlan:
        """``plan`` calibrated: every part's σ for the ε target at δ on the accountant (``noise_multiplier``, where
        set, fixes the joint parts' σ; :meth:`_noise_multiplier` says)."""
        epsilon = check_epsilon(self.epsilon, budget=True)
        delta, unit = self._fit_delta(shape.n), check_privacy_unit(self.privacy_unit)
        sigmas = plan.calibrate(epsilon, delta, unit, self.accountant,
                                noise_multiplier=self._noise_multiplier(epsilon, delta, unit))
        return FitPlan(plan, sigmas, epsilon, delta, unit, self.accountant)

    def _noise_multiplier(self, epsilon: float, delta: float, unit: PrivacyUnit) -> float | None:
        """The σ that the plan's joint parts take instead of a calibrated one: ``noise_multiplier`` (``None``:
        calibrate). A method with a closed-form rule (a paper's) overrides it."""
        return getattr(self, "noise_multiplier", None)

    def _public_size(self, n: int) -> int:
        """N, the public number of records a fit on ``n`` rows is measured against: ``n`` here; a method with a
        ``sample_size`` hyper-parameter returns it (it then sets the default δ = 1/N² too)."""
        return n

    def _fit_delta(self, n: int, warn: bool = False) -> float:
        """δ of a fit on ``n`` rows: ``delta``, else 1/N² (:meth:`_public_size`); ``warn``: a ``delta`` above 1/n
        warns (once, at the fit)."""
        if self.delta is not None:
            return check_delta(self.delta, n=n if warn else None)
        return check_delta(1.0 / float(self._public_size(n)) ** 2)

    def _laplace_pure(self, unit: PrivacyUnit) -> float | None:
        """``Part(pure=...)`` of this fit's Laplace releases: under ``secure_mode`` they are exact discrete
        Laplace noise, accounted as pure DP with ε = pure/σ, ``pure`` the L1 distance of two neighbours'
        sums in bounds (2 under replace-one, 1 under add/remove); otherwise ``None`` (``LaplaceDpEvent``)."""
        if not getattr(self, "secure_mode", False):
            return None
        return 2.0 if unit is PrivacyUnit.SENSITIVE else 1.0

    # ---- many fits -----------------------------------------------------
    @classmethod
    def fit_many(cls, estimators, X, y, sensitive_features=None, *, budget=None) -> list:
        """Fit every estimator of ``estimators`` on the same ``(X, y, sensitive_features)``; returns them fitted, in
        order. ``estimators``: unfitted estimators of this class (e.g. clones of one, each set to a point of a
        grid), or dicts of parameters (each ``cls(**params)``).

        The default is a loop of their own ``fit``: each a separate fit with its own secret randomness, each
        claimed on its budget (``budget``: a :class:`~dpfair.privacy.PrivacyBudget` attached to every estimator
        first; or the running :class:`~dpfair.privacy.budget.Charge` of the search these fits are part of, handed
        to each fit (:meth:`fit_within`) and left on none; ``None``: each draws from its own, if any). A method whose grids train together overrides it and
        declares ``batched_grid`` (:mod:`dpfair.utils.capabilities`): DP-FERMI trains its models in one batched loop,
        each model's fit running the contract's steps (:meth:`begin_fit`, its steps, :meth:`end_fit`) and the
        grid claimed on the budget as one joint release before its first release. Callers ask ``fit_many`` of the
        estimator's class (``type(est).fit_many(...)``) and need not know which it does.
        """
        within = budget if isinstance(budget, Charge) else None  # a running claim these fits are part of
        fitted = []
        for est in estimators:
            est = cls(**est) if isinstance(est, dict) else est
            if budget is not None and within is None:
                est.privacy_budget = budget
            fitted.append(est.fit_within(within, X, y, sensitive_features))
        return fitted

    # ---- privacy -------------------------------------------------------
    def privacy_spent_so_far(self) -> tuple[float, float]:
        """``(ε, δ)`` of the releases made so far: during ``fit`` (from a callback) the ε spent up to now
        (:meth:`FitContext.spent_so_far <dpfair.algorithms.fit_context.FitContext.spent_so_far>`), ending at
        ``privacy_spent_``; ``(inf, 0)`` for a non-private method.

        A function of the public plan and of how many releases were made, never of the data, so it
        may be printed. Each call composes the partial ledger (cached for a ledger seen before).
        """
        ctx = self.fit_context
        if ctx is not None:
            return ctx.spent_so_far()
        if "privacy_ledger_" not in vars(self):
            raise NotFittedError(f"{type(self).__name__} has released nothing yet: call fit first")
        if not self._private:
            return math.inf, 0.0
        return self.privacy_ledger_.epsilon(self.delta_, self.accountant), self.delta_

    def _finish_privacy(self) -> None:
        if self._private:
            eps = self.privacy_ledger_.epsilon(self.delta_, self.accountant)
            self.privacy_spent_ = (eps, self.delta_)
        else:
            self.privacy_spent_ = (math.inf, 0.0)

    # ---- persistence ---------------------------------------------------
    def save(self, path, *, provenance: dict | None = None) -> None:
        """Write the fitted estimator to ``path`` as a safe model file (tensors + JSON; :mod:`dpfair.persistence`).

        ``provenance``: public JSON facts about the training (data set, options, seed), read back by
        :func:`dpfair.persistence.load_provenance` and shown by ``dpfair info``.
        """
        from dpfair.model_files import save_estimator

        save_estimator(self, path, provenance=provenance)


def fit_part(estimator, within, X, y, **fit_kwargs):
    """Fit ``estimator`` as a part of ``within``, the running budget claim of the fit it serves (a base model inside
    an enclosing fit: :meth:`FairEstimator.fit_within`); a scikit-learn estimator, which draws from no budget, is
    fitted as it is. Returns the fitted estimator."""
    fit_within = getattr(estimator, "fit_within", None)
    if fit_within is None:
        return estimator.fit(X, y, **fit_kwargs)
    return fit_within(within, X, y, **fit_kwargs)


def load_estimator(path, *, model=None) -> FairEstimator:
    """Read a model file written by :meth:`FairEstimator.save`; loading never runs code from the file.

    ``model``: a module of the same architecture, for estimators trained on a user-defined torch module.
    """
    import dpfair.algorithms as algorithms
    from dpfair.model_files import load_estimator as load

    algorithms.ESTIMATORS  # imports every dpfair estimator: each registered with dpfair.model_files as it was made
    return load(path, model=model)


class TorchClassifier(FairEstimator):
    """Estimators that train a ``torch.nn.Module`` (a name from :func:`dpfair.nn.make_model` or a module).

    Training runs in float32: X's rows must have norm below :data:`~dpfair.utils.validation.FLOAT32_MAX_ROW_NORM`
    (:func:`~dpfair.utils.validation.check_feature_scale`), and a fit whose parameters end NaN or infinite (gradient
    steps too long for the scale of X) is refused rather than returned: the check reads only the fitted
    parameters, which the fit would publish, so under either unit it is post-processing of the release.
    """

    _float32_training = True
    #: the model, where it trains and the training schedule, beside :class:`FairEstimator`'s
    parameter_constraints: ClassVar[dict] = {
        **FairEstimator.parameter_constraints,
        "model": [Instances((str, torch.nn.Module), f"a model name ({', '.join(map(repr, MODEL_NAMES))}) or a "
                                                    "torch.nn.Module returning logits")],
        "model_kwargs": [None, Instances(Mapping, "a dict of keyword arguments of dpfair.nn.make_model")],
        "device": [None, Instances((str, torch.device), "'auto', 'cpu', 'cuda', 'cuda:N' or a torch.device")],
        "epochs": [Interval(int, 0, None, closed="neither")],
        "learning_rate": [Interval(float, 0, None, closed="neither")],
        "batch_size": [Interval(int, 0, None, closed="neither")],
        "optimizer": [Options("sgd", "adam")],
        "momentum": [Interval(float, 0, None, closed="left")],
        "weight_decay": [Interval(float, 0, None, closed="left")],
    }

    def _check_fitted(self) -> None:
        if not all(bool(torch.isfinite(p).all()) for p in self.model_.parameters()):
            raise ValueError(f"{type(self).__name__}'s training diverged: its fitted parameters are NaN or infinite, "
                             "so every prediction would be NaN; standardise X (e.g. sklearn's StandardScaler) or "
                             "lower the learning rate")

    def _build_model(self, n_classes: int, rng: np.random.Generator) -> torch.nn.Module:
        """The module to train, initialised from ``rng`` (the fit's public generator, ``ctx.np_rng``)."""
        if isinstance(self.model, torch.nn.Module):
            model = copy.deepcopy(self.model)
        else:
            kwargs = dict(self.model_kwargs or {})
            kwargs.setdefault("seed", int(rng.integers(2**31)))
            model = make_model(self.model, self.n_features_in_, n_classes, **kwargs)
        return model.to(device=self.device_, dtype=torch.float32)

    def _make_optimizer(self, params):
        """``optimizer`` at ``learning_rate``, with L2 ``weight_decay`` where the estimator has one.

        Weight decay adds ``λθ`` to the released gradient: post-processing, no privacy cost.
        """
        name = self.optimizer
        decay = float(getattr(self, "weight_decay", 0.0))
        if name == "sgd":
            return torch.optim.SGD(params, lr=self.learning_rate, momentum=self.momentum, weight_decay=decay)
        if name == "adam":
            return torch.optim.Adam(params, lr=self.learning_rate, weight_decay=decay)
        raise ValueError(f"optimizer must be 'sgd' or 'adam', got {name!r}")

    def _tensor(self, a, dtype=torch.float32) -> torch.Tensor:
        return torch.as_tensor(a, dtype=dtype, device=self.device_)

    def _rows(self, rows: np.ndarray) -> torch.Tensor:
        """A batch's row indices on the model's device. To an accelerator through pinned memory without
        blocking: a copy from pageable memory would wait for every kernel queued, so that the host could
        not prepare the next step while the device runs this one."""
        rows = torch.from_numpy(rows)
        if self.device_.type != "cuda":
            return rows.to(self.device_)
        return rows.pin_memory().to(self.device_, non_blocking=True)

    def _predict_proba(self, X, log: bool = False) -> np.ndarray:
        """Class probabilities (``log``: their logarithms), from the fitted module evaluated in float64.

        Training runs in float32, prediction does not: a float32 matrix product's rounding depends on how many
        rows it is given (BLAS picks its kernel and blocking by the batch's shape, and machines differ), so a
        row's float32 logits differ by ~1e-7 relative between a batch and its subset. In float64 the same
        dependence is ~1e-16, so a row's prediction is a function of the row alone on any machine (scikit-learn's
        ``check_methods_subset_invariance``); the float32 parameters are represented exactly in float64.
        """
        model = copy.deepcopy(self.model_).to(dtype=torch.float64)
        dev = next(model.parameters()).device
        out = []
        model.eval()
        with torch.no_grad():
            for start in range(0, X.shape[0], 8192):
                xb = torch.as_tensor(X[start:start + 8192], dtype=torch.float64, device=dev)
                logits = model(xb)
                out.append((torch.log_softmax(logits, dim=1) if log else torch.softmax(logits, dim=1)).cpu().numpy())
        return np.concatenate(out)

    def _log_proba(self, X) -> np.ndarray:
        """From the logits in float64: the log-odds stay exact where float32 probabilities round to 0 or 1."""
        return self._predict_proba(X, log=True)
