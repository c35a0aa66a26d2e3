"""Membership inference: how well can an attacker tell the training examples of a model from others?

**This is an empirical evaluation of particular attacks, not a privacy guarantee.** A low AUC says these
attacks failed on this model and data; it does not prove privacy (a better attack may succeed). The ε
printed by training is the guarantee: under (ε, δ)-DP every attack's TPR is at most ``e^ε·FPR + δ``.

Set-up (Carlini et al. 2022, "Membership inference attacks from first principles", section V)
-------------------------------------------------------------------------------------------------
A data pool ``(X, y, s)`` of ``N`` examples. The **target** model is trained on a random half of the pool
(the *members*); the other half are *non-members*. Each of ``n_shadow`` **shadow** models is trained on
its own random half, drawn so that every example is IN (in the training half) for exactly
``⌊n_shadow/2⌋`` shadows and OUT for the others (Carlini et al.'s balanced masks). The attacker knows the
whole pool, the training recipe (the estimator and its hyper-parameters) and the shadows' masks, but not
the target's members nor the noise of any private fit. Every attack scores each pool example (larger:
"more likely a member") from the target's ``predict_proba`` on it; :mod:`dpfair.audit.metrics` turns the
scores and the true membership into AUC, advantage and TPR at low FPR, overall and per group ``s``.

Models are made with ``sklearn.base.clone(estimator)`` and ``set_params(random_state=seed)`` (when the
estimator has that parameter), then ``fit(X, y, sensitive_features=s)`` (``s`` is left out for estimators
whose ``fit`` does not take it) and ``predict_proba(X)`` (with ``sensitive_features=s`` for estimators that
read it at prediction). The seeds of the split, the masks and the models come from ``random_state``: the
attacker's public randomness. The privacy noise of every private fit stays the estimator's own secret,
fresh for each model. Give dpfair estimators their public ``groups=`` and ``classes=`` lists: a random
half may miss a rare group or class, and they must not be inferred from it.

Shadow models are fitted one at a time. (:func:`dpfair.algorithms.fit_dpfermi_grid` trains many
DP-FERMI logistic models at once, but all on the same data; shadows need a different half each.)

Statistics of a model ``f`` on an example ``(x, y)``, from its probabilities ``p = f(x)`` with every
probability clipped to ``[PROB_FLOOR, 1]``:

* the loss ``ℓ = −log p_y`` (cross-entropy; computed as ``−log(1 − Σ_{y'≠y} p_{y'})`` when ``p_y > 1/2``,
  which keeps its precision when ``p_y`` rounds to 1);
* the logit-scaled confidence ``φ = log p_y − log Σ_{y'≠y} p_{y'}`` (= ``log(p_y / (1 − p_y))``, computed
  from the other classes so that it keeps its precision when ``p_y`` rounds to 1).

Attacks (names for ``attacks=``)
--------------------------------
``"loss"`` — Yeom, Giacomelli, Fredrikson, Jha (2018), "Privacy risk in machine learning: analyzing the
connection to overfitting": score ``= −ℓ``. Members have lower loss. Uses no shadow model; the ROC metrics
sweep every threshold.

``"shadow"`` — Shokri, Stronati, Song, Shmatikov (2017), "Membership inference attacks against machine
learning models", in its per-class attack-model form: for each class ``c``, an attack classifier
``A_c`` is trained on the shadows' outputs on the pool examples of class ``c``, labelled IN/OUT by each
shadow's mask; the score of an example is ``A_y(f_target(x))``, the probability of IN. Features: ``φ`` and
the log of the whole (clipped) probability vector, over the pool's classes. ``A_c`` is a gradient-boosted
tree ensemble (scikit-learn's ``HistGradientBoostingClassifier``, 100 trees, fixed seed) where Shokri et
al. used a small neural network. The attack model is global (one per class), not per example.

``"lira"`` — Carlini, Chien, Nasr, Song, Terzis, Tramèr (2022), online Likelihood Ratio Attack: for
example ``i``, fit ``N(μ_in,i, σ_in²)`` to ``φ`` of the shadows that trained on ``i`` and
``N(μ_out,i, σ_out²)`` to those that did not; the score of the target's ``φ_i`` is the log likelihood
ratio ``log N(φ_i; μ_in,i, σ_in²) − log N(φ_i; μ_out,i, σ_out²)``. The means are per example; the
variances are per example with at least ``PER_EXAMPLE_VARIANCE_MIN_SHADOWS`` (64) shadows, and global
otherwise (the paper's advice for few shadows): the within-example variance pooled over all examples
(each ``φ`` minus its own example's mean; degrees of freedom ``Σ_i (k_i − 1)``) when every example has
at least 2 IN and 2 OUT shadows, else (2 or 3 shadows) the variance of all IN (OUT) values together, as
Carlini et al.'s code does.

``"lira-offline"`` — the offline LiRA of the same paper: OUT shadows only, one-sided. The paper's
statistic is ``Λ_i = 1 − P[Z > φ_i] = Φ(z_i)`` with ``Z ~ N(μ_out,i, σ_out²)``; the score here is
``z_i = (φ_i − μ_out,i) / σ_out``, which ranks the examples the same way without ``Φ`` saturating at 1
in the tail that decides TPR at low FPR.

LiRA and the shadow attack need the estimator to be cheap enough to fit ``n_shadow + 1`` times.

Metrics and confidence intervals: see :mod:`dpfair.audit.metrics` (stratified percentile bootstrap over
examples, ``n_bootstrap`` resamples from a fixed seed, 1,000 by default).
"""

from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import clone

from dpfair.audit.metrics import (
    BOOTSTRAP_SEED,
    LOW_FPRS,
    METRICS,
    N_BOOTSTRAP,
    attack_metrics,
    check_confidence,
    fpr_label,
)
from dpfair.utils.capabilities import capabilities
from dpfair.utils.progress import progress
from dpfair.utils.threads import one_openmp_thread
from dpfair.utils.validation import check_1d, check_features
from dpfair.utils.attacks import ATTACKS, NOTE  # the attacks' names and the note, in their light home


#: Attacks that need shadow models.
SHADOW_ATTACKS = frozenset({"shadow", "lira", "lira-offline"})

#: Probabilities are clipped to [PROB_FLOOR, 1] before taking logs.
PROB_FLOOR = 1e-30

#: LiRA fits per-example variances from this many shadow models on (a global variance below).
PER_EXAMPLE_VARIANCE_MIN_SHADOWS = 64

#: Smallest standard deviation of a LiRA Gaussian (shadows that all agree would give σ = 0).
MIN_STD = 1e-6

#: The name of the row of all examples in per-group tables.
ALL = "all"


# ---- model statistics -------------------------------------------------------------------------


def _fit_accepts_sensitive(estimator) -> bool:
    try:
        return "sensitive_features" in inspect.signature(estimator.fit).parameters
    except (TypeError, ValueError):
        return False


def _fit_model(estimator, seed: int, X, y, s):
    """``clone(estimator)`` with ``random_state=seed`` (when it has one), fitted on ``(X, y, s)``."""
    model = clone(estimator)
    if "random_state" in model.get_params():
        model.set_params(random_state=int(seed))
    if s is not None and _fit_accepts_sensitive(model):
        model.fit(X, y, sensitive_features=s)
    else:
        model.fit(X, y)
    return model


def _predict_proba(model, X, s) -> np.ndarray:
    if capabilities(model).predict_needs_sensitive:
        if s is None:
            raise ValueError(f"{type(model).__name__} reads the sensitive attribute at prediction; pass "
                             "sensitive_features=s")
        return model.predict_proba(X, sensitive_features=s)
    return model.predict_proba(X)


def model_statistics(model, X, y, s, classes) -> tuple[np.ndarray, np.ndarray]:
    """``(log_probs, phi)``: the clipped log-probabilities over ``classes`` (``N × l``) and ``φ`` of the label.

    Columns of ``predict_proba`` follow ``model.classes_`` (``0..l-1`` when it has none); a pool class the
    model never saw gets probability 0 (then ``PROB_FLOOR``).
    """
    proba = np.asarray(_predict_proba(model, X, s), dtype=np.float64)
    if proba.ndim != 2 or proba.shape[0] != X.shape[0]:
        raise ValueError(f"{type(model).__name__}.predict_proba returned shape {proba.shape}; expected "
                         f"({X.shape[0]}, n_classes)")
    if not np.all(np.isfinite(proba)):
        raise ValueError(f"{type(model).__name__}.predict_proba returned NaN or infinite probabilities")
    model_classes = getattr(model, "classes_", None)
    if model_classes is None:
        model_classes = np.arange(proba.shape[1])
    cols = pd.Index(np.asarray(model_classes)).get_indexer(classes)
    aligned = np.where(cols >= 0, proba[:, np.maximum(cols, 0)], 0.0)  # N × l over the pool's classes
    label = pd.Index(classes).get_indexer(y)
    rows = np.arange(len(y))
    others = aligned.copy()
    others[rows, label] = 0.0
    rest = others.sum(axis=1)
    log_probs = np.log(np.clip(aligned, PROB_FLOOR, 1.0))
    # log p_y = log(1 − rest) where the label is likely: keeps the loss's precision when p_y rounds to 1
    confident = rest < 0.5
    log_probs[rows[confident], label[confident]] = np.log1p(-rest[confident])
    phi = log_probs[rows, label] - np.log(np.clip(rest, PROB_FLOOR, 1.0))
    return log_probs, phi


# ---- attacks ------------------------------------------------------------------------------------


def loss_scores(log_probs: np.ndarray, label_index: np.ndarray) -> np.ndarray:
    """Yeom et al.: the score is minus the cross-entropy loss, ``log p_y``."""
    return log_probs[np.arange(len(label_index)), label_index]


def shadow_attack_scores(shadow_features: np.ndarray, masks: np.ndarray, target_features: np.ndarray,
                         label_index: np.ndarray, random_state: int) -> np.ndarray:
    """Shokri et al.'s per-class attack models: P(IN | target's features) from a classifier per class.

    ``shadow_features``: ``K × N × F`` features of the K shadows on the pool; ``masks``: ``K × N`` IN/OUT;
    ``target_features``: ``N × F``; ``label_index``: the class of each example.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier
    scores = np.empty(target_features.shape[0])
    for c in np.unique(label_index):
        rows = label_index == c
        feats = shadow_features[:, rows].reshape(-1, shadow_features.shape[-1])
        labels = masks[:, rows].reshape(-1)
        attack = HistGradientBoostingClassifier(max_iter=100, max_leaf_nodes=15, learning_rate=0.1,
                                                early_stopping=False, random_state=random_state)
        with one_openmp_thread():  # small data: threads only contend
            attack.fit(feats, labels)
            scores[rows] = attack.predict_proba(target_features[rows])[:, list(attack.classes_).index(True)]
    return scores


def _pooled_std(values: np.ndarray, keep: np.ndarray) -> float:
    """Global σ of the values where ``keep`` (``K × N``): pooled within-example, else all together."""
    k = keep.sum(axis=0)
    if np.all(k >= 2):
        means = np.where(keep, values, 0.0).sum(axis=0) / k
        resid = np.where(keep, values - means, 0.0)
        return float(np.sqrt((resid ** 2).sum() / (k - 1).sum()))
    return float(np.std(values[keep]))


def _gaussian_fit(values: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-example means and (per-example or global) standard deviations of ``values`` where ``keep``."""
    k = keep.sum(axis=0)
    mean = np.where(keep, values, 0.0).sum(axis=0) / k
    if values.shape[0] >= PER_EXAMPLE_VARIANCE_MIN_SHADOWS:
        std = np.sqrt(np.where(keep, (values - mean) ** 2, 0.0).sum(axis=0) / np.maximum(k - 1, 1))
    else:
        std = np.full(values.shape[1], _pooled_std(values, keep))
    return mean, np.maximum(std, MIN_STD)


def lira_scores(shadow_phi: np.ndarray, masks: np.ndarray, target_phi: np.ndarray,
                online: bool = True) -> np.ndarray:
    """LiRA (Carlini et al. 2022) from the shadows' ``φ`` (``K × N``), their masks and the target's ``φ``.

    Online: ``log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²)``. Offline: ``(φ − μ_out) / σ_out``
    (monotone in the paper's one-sided ``1 − P[Z > φ]``).
    """
    mu_out, sd_out = _gaussian_fit(shadow_phi, ~masks)
    if not online:
        return (target_phi - mu_out) / sd_out
    mu_in, sd_in = _gaussian_fit(shadow_phi, masks)
    return stats.norm.logpdf(target_phi, mu_in, sd_in) - stats.norm.logpdf(target_phi, mu_out, sd_out)


def balanced_masks(n_shadow: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n_shadow × n`` IN masks: each example IN for exactly ``⌊n_shadow/2⌋`` shadows (Carlini et al.)."""
    order = rng.random((n_shadow, n)).argsort(axis=0)
    return order < n_shadow // 2


# ---- the report ---------------------------------------------------------------------------------


def _json_number(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (numbers.Integral,)):
        return int(v)
    v = float(v)
    if math.isnan(v):
        return None
    return v if math.isfinite(v) else str(v)


@dataclass
class MembershipReport:
    """The metrics of every attack, overall (group ``"all"``) and per group, and how they were obtained.

    ``metrics[attack][group]`` is the dict of :func:`dpfair.audit.metrics.attack_metrics` (NaN metrics
    for a group without both members and non-members). ``scores[attack]`` are the attack's scores of the
    pool examples and ``members`` the target's true membership (kept for ROC plots; not in
    :meth:`to_dict`). ``target_privacy_spent``: ``(ε, δ)`` the target's training spent, when it has one;
    ``target_privacy_unit``: whom that ε protects. Under ``"sensitive"`` it covers each person's sensitive
    attribute only, so it bounds nothing about membership (the record's presence); only under ``"record"``
    does (ε, δ)-DP cap every membership attack (TPR ≤ e^ε·FPR + δ).
    """

    metrics: dict[str, dict[str, dict[str, float]]]
    n_pool: int
    n_shadow: int
    random_state: int
    confidence: float
    n_bootstrap: int
    target_estimator: str
    target_privacy_spent: tuple[float, float] | None = None
    target_privacy_guarantee: str | None = None
    target_privacy_unit: str | None = None
    scores: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    members: np.ndarray | None = field(default=None, repr=False)
    note: str = NOTE

    COLUMNS = tuple(c for m in METRICS for c in (m, f"{m}_low", f"{m}_high")) + ("n_members", "n_nonmembers")

    @property
    def attacks(self) -> list[str]:
        return list(self.metrics)

    def to_frame(self) -> pd.DataFrame:
        """Rows ``(attack, group)`` (group ``"all"`` first), columns ``auc, auc_low, auc_high, advantage, …,
        tpr_at_0.1%_fpr, …, n_members, n_nonmembers``; the note is in ``frame.attrs["note"]``."""
        rows, index = [], []
        for attack, groups in self.metrics.items():
            for group, values in groups.items():
                index.append((attack, group))
                rows.append([values[c] for c in self.COLUMNS])
        frame = pd.DataFrame(rows, index=pd.MultiIndex.from_tuples(index, names=["attack", "group"]),
                             columns=list(self.COLUMNS))
        frame.attrs["note"] = self.note
        return frame

    def to_dict(self) -> dict:
        """A JSON-able dict: ``note``, ``attacks`` → group → metrics, the set-up (NaN → null, inf → "inf")."""
        spent = None
        if self.target_privacy_spent is not None:
            eps, delta = self.target_privacy_spent
            spent = {"epsilon": _json_number(eps), "delta": _json_number(delta),
                     "guarantee": self.target_privacy_guarantee, "privacy_unit": self.target_privacy_unit}
        return {
            "note": self.note,
            "attacks": {a: {g: {k: _json_number(v) for k, v in m.items()} for g, m in groups.items()}
                        for a, groups in self.metrics.items()},
            "n_pool": int(self.n_pool),
            "n_shadow": int(self.n_shadow),
            "random_state": int(self.random_state),
            "confidence": float(self.confidence),
            "confidence_intervals": f"stratified percentile bootstrap over examples, {self.n_bootstrap} resamples, "
                                    f"seed {BOOTSTRAP_SEED}",
            "target_estimator": self.target_estimator,
            "target_privacy_spent": spent,
        }

    def to_text(self) -> str:
        """A small table (attack, group, AUC [CI], advantage [CI], TPR at 0.1 % and 1 % FPR) and the note."""
        t01, t1 = (fpr_label(a) for a in LOW_FPRS)
        header = ("attack", "group", f"AUC [{100 * self.confidence:g}% CI]", "advantage", "TPR@0.1%FPR",
                  "TPR@1%FPR", "members/non")
        table = [header]
        for attack, groups in self.metrics.items():
            for group, m in groups.items():
                if math.isnan(m["auc"]):
                    cells = ("-",) * 4
                else:
                    cells = (f"{m['auc']:.3f} [{m['auc_low']:.3f}, {m['auc_high']:.3f}]", f"{m['advantage']:.3f}",
                             f"{m[t01]:.3f}", f"{m[t1]:.3f}")
                table.append((attack, str(group), *cells, f"{m['n_members']}/{m['n_nonmembers']}"))
        widths = [max(len(r[c]) for r in table) for c in range(len(header))]
        lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in table]
        if self.unit_caveat:
            lines.append(f"privacy unit: {self.unit_caveat}")
        return "\n".join(lines + [f"note: {self.note}"])

    @property
    def unit_caveat(self) -> str | None:
        """A line saying that the target's ε does not cover membership, when its privacy unit is ``"sensitive"``."""
        if self.target_privacy_unit == "sensitive":
            return ("the target's ε protects each person's sensitive attribute (privacy_unit='sensitive'), not "
                    "whether their record was trained on; it bounds none of these attacks")
        return None

    def __str__(self) -> str:
        return self.to_text()


# ---- entry point --------------------------------------------------------------------------------


def _check_attacks(attacks) -> tuple[str, ...]:
    if isinstance(attacks, str):
        attacks = [a.strip() for a in attacks.split(",") if a.strip()]
    try:
        names = tuple(attacks)
    except TypeError:
        raise ValueError(f"attacks must be a list of attack names ({', '.join(ATTACKS)}), got {attacks!r}") from None
    if not names:
        raise ValueError(f"attacks is empty; choose some of {', '.join(ATTACKS)}")
    unknown = [a for a in names if a not in ATTACKS]
    if unknown:
        raise ValueError(f"unknown attack {unknown[0]!r}; choose from {', '.join(ATTACKS)}")
    return tuple(a for a in ATTACKS if a in names)  # report order, no repeats


def _check_int(value, name: str, minimum: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}; {fix}")
    return int(value)


def _check_target(target, n: int):
    try:
        model, members = target
    except (TypeError, ValueError):
        raise ValueError("target must be a pair (fitted_model, members), members a boolean mask over the pool "
                         "(True: trained on)") from None
    if not hasattr(model, "predict_proba"):
        raise ValueError(f"target's model ({type(model).__name__}) has no predict_proba; the attacks need "
                         "probabilities")
    mask = np.asarray(members)
    if mask.ndim != 1 or mask.shape[0] != n:
        raise ValueError(f"target's members mask has shape {mask.shape} but the pool has {n} examples; pass one "
                         "True/False per row of X")
    if mask.dtype != bool:
        if not np.all(np.isin(mask, (0, 1))):
            raise ValueError("target's members must be a boolean mask (True: the model was trained on that row)")
        mask = mask.astype(bool)
    if mask.all() or not mask.any():
        raise ValueError("target's members mask must hold both members and non-members")
    return model, mask


def _group_metrics(scores, members, s, group_keys, **kwargs) -> dict[str, dict[str, float]]:
    out = {ALL: attack_metrics(scores, members, **kwargs)}
    if s is None:
        return out
    for value, key in group_keys:
        rows = s == value
        m, n = int(members[rows].sum()), int((~members[rows]).sum())
        if m and n:
            out[key] = attack_metrics(scores[rows], members[rows], **kwargs)
        else:
            out[key] = {**{c: math.nan for c in MembershipReport.COLUMNS}, "n_members": m, "n_nonmembers": n}
    return out


def membership_inference(estimator, X, y, sensitive_features=None, *, attacks=ATTACKS, n_shadow: int = 16,
                         random_state: int = 0, confidence: float = 0.95, target=None,
                         n_bootstrap: int = N_BOOTSTRAP, group_names=None, verbose: bool = False
                         ) -> MembershipReport:
    """Run membership inference attacks against a model trained by ``estimator`` on half of a pool.

    Parameters
    ----------
    estimator : unfitted classifier with ``fit`` and ``predict_proba`` (a dpfair estimator, or any
        scikit-learn classifier); cloned for the target and each shadow. May be ``None`` when ``target`` is
        given and only ``"loss"`` is asked for.
    X, y, sensitive_features : the pool (``N`` rows). ``sensitive_features`` also gives the per-group rows.
    attacks : some of ``"loss"``, ``"shadow"``, ``"lira"``, ``"lira-offline"`` (a list or a comma-separated
        string); see the module docstring.
    n_shadow : shadow models (≥ 2 for the shadow attack and LiRA; each example is IN for ``⌊n_shadow/2⌋``).
    random_state : the attacker's public randomness (split, masks, model seeds, attack models).
    confidence : level of the bootstrap intervals.
    target : optional ``(fitted_model, members)``: a model already trained on the pool rows where the
        boolean mask ``members`` is True (instead of training one here).
    n_bootstrap : bootstrap resamples per interval (see :mod:`dpfair.audit.metrics`).
    group_names : labels of the group values in the per-group rows (a mapping, or a sequence indexed by
        the group code); default ``str(value)``.
    verbose : a progress bar on stderr over the models trained (:mod:`dpfair.utils.progress`).

    Returns a :class:`MembershipReport`; its every output carries :data:`NOTE`.
    """
    names = _check_attacks(attacks)
    X = check_features(X, "X")
    n = X.shape[0]
    y = check_1d(y, "y", n)
    s = None if sensitive_features is None else check_1d(sensitive_features, "sensitive_features", n)
    if n < 4:
        raise ValueError(f"the pool has {n} rows; membership inference needs at least 4 (members and non-members)")
    needs_shadows = bool(SHADOW_ATTACKS & set(names))
    n_shadow = _check_int(n_shadow, "n_shadow", 2 if needs_shadows else 0,
                          "LiRA and the shadow attack need at least one IN and one OUT shadow per example "
                          "(use 16 or more, or attacks=['loss'])")
    random_state = _check_int(random_state, "random_state", 0, "it seeds the attacker's public randomness")
    confidence = check_confidence(confidence)
    _check_int(n_bootstrap, "n_bootstrap", 1, "use e.g. 1000")
    if estimator is None:
        if target is None or needs_shadows:
            raise ValueError("estimator is None; pass the unfitted estimator (it is cloned for the target and the "
                             "shadows), or a fitted target with attacks=['loss']")
    elif not (hasattr(estimator, "fit") and hasattr(estimator, "predict_proba")):
        raise ValueError(f"estimator must be a classifier with fit and predict_proba, got {type(estimator).__name__}")

    seeds = np.random.SeedSequence(random_state)
    split_seed, mask_seed, model_seed, attack_seed = seeds.spawn(4)
    model_seeds = np.random.default_rng(model_seed).integers(2**31, size=n_shadow + 1)
    try:
        classes = np.unique(y)
    except TypeError:
        raise ValueError("y mixes values that cannot be sorted together (e.g. numbers and strings)") from None
    label_index = np.searchsorted(classes, y)

    with progress((target is None) + (n_shadow if needs_shadows else 0), "membership", "model",
                  enabled=verbose) as bar:
        if target is None:
            members = np.zeros(n, dtype=bool)
            members[np.random.default_rng(split_seed).permutation(n)[: n // 2]] = True
            target_model = _fit_model(estimator, model_seeds[0], X[members], y[members],
                                      None if s is None else s[members])
            bar.update()
        else:
            target_model, members = _check_target(target, n)
        target_logp, target_phi = model_statistics(target_model, X, y, s, classes)

        scores: dict[str, np.ndarray] = {}
        if "loss" in names:
            scores["loss"] = loss_scores(target_logp, label_index)
        if needs_shadows:
            masks = balanced_masks(n_shadow, n, np.random.default_rng(mask_seed))
            shadow_logp = np.empty((n_shadow, n, len(classes)))
            shadow_phi = np.empty((n_shadow, n))
            for k in range(n_shadow):
                keep = masks[k]
                shadow = _fit_model(estimator, model_seeds[k + 1], X[keep], y[keep], None if s is None else s[keep])
                shadow_logp[k], shadow_phi[k] = model_statistics(shadow, X, y, s, classes)
                bar.update()
            if "shadow" in names:
                features = np.concatenate([shadow_phi[..., None], shadow_logp], axis=-1)
                target_features = np.column_stack([target_phi, target_logp])
                scores["shadow"] = shadow_attack_scores(features, masks, target_features, label_index,
                                                        int(attack_seed.generate_state(1)[0] >> 1))
            if "lira" in names:
                scores["lira"] = lira_scores(shadow_phi, masks, target_phi, online=True)
            if "lira-offline" in names:
                scores["lira-offline"] = lira_scores(shadow_phi, masks, target_phi, online=False)

    group_keys = []
    if s is not None:
        for value in np.unique(s):
            if group_names is None:
                key = str(value)
            elif isinstance(group_names, dict):
                key = str(group_names.get(value, value))
            else:
                key = str(group_names[int(value)])
            group_keys.append((value, key))
    metrics = {a: _group_metrics(scores[a], members, s, group_keys, confidence=confidence,
                                 n_bootstrap=n_bootstrap) for a in names}
    spent = getattr(target_model, "privacy_spent_", None)
    unit = getattr(target_model, "privacy_unit_", None)
    return MembershipReport(
        metrics=metrics, n_pool=n, n_shadow=n_shadow if needs_shadows else 0, random_state=random_state,
        confidence=confidence, n_bootstrap=int(n_bootstrap), target_estimator=type(target_model).__name__,
        target_privacy_spent=None if spent is None else (float(spent[0]), float(spent[1])),
        target_privacy_guarantee=getattr(target_model, "privacy_guarantee_", None),
        target_privacy_unit=None if unit is None else getattr(unit, "value", str(unit)),
        scores=scores, members=members,
    )
