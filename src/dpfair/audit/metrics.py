"""Metrics of a membership (or any binary distinguishing) attack, with confidence intervals.

An attack assigns each example a score; a larger score means "more likely a
member". With ``m`` members and ``n`` non-members, a threshold ``t`` gives the
true-positive rate ``TPR(t) = #{members with score ≥ t} / m`` and the
false-positive rate ``FPR(t) = #{non-members with score ≥ t} / n``; sweeping
``t`` draws the ROC curve. This module reports

* **AUC**, the area under the ROC curve: the probability that a random member
  scores above a random non-member (ties count one half). 0.5 is chance;
* **advantage** ``max_t |TPR(t) − FPR(t)|`` (Yeom et al. 2018; the
  "membership advantage" FairDP's appendix D.4.2 reports as
  ``max |r_fp − r_tp|``). The maximum is over every threshold, chosen *after*
  seeing the labels (an oracle threshold), so even scores independent of
  membership give a positive advantage, of order ``1/√min(m, n)``;
* **TPR at a low FPR** (Carlini et al. 2022): the largest ``TPR(t)`` over the
  thresholds with ``FPR(t) ≤ α``, for ``α`` = 0.1 % and 1 %. With ``n``
  non-members, ``FPR ≤ α`` allows ``⌊α n⌋`` false positives: at ``n < 1/α``
  none at all, so read these rates together with ``n_nonmembers``.

Confidence intervals are **percentile bootstrap** intervals over examples: a
stratified bootstrap that resamples the members and the non-members
separately, with replacement (so every resample keeps ``m`` and ``n``), from a
fixed seed, ``n_bootstrap`` resamples (1,000 by default). The bootstrap is used
for every metric because each of them chooses its threshold on the same scores
it is evaluated on, so exact binomial intervals do not apply to them.
:func:`clopper_pearson` gives the exact (Clopper–Pearson) interval of a rate
measured at a threshold fixed *in advance* (e.g. chosen on held-out data), for
the audits that have one.

Point estimates use scikit-learn (``roc_curve``, ``roc_auc_score``); the
bootstrap evaluates all resamples at once as weighted ROC curves over the
scores sorted once (a resample is a vector of multiplicities), which equals
scikit-learn's curve on the resampled data.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score, roc_curve

#: The false-positive rates at which the true-positive rate is reported (0.1 % and 1 %).
LOW_FPRS = (0.001, 0.01)

#: Default number of bootstrap resamples.
N_BOOTSTRAP = 1000

#: Default seed of the bootstrap (public: it only resamples the evaluation).
BOOTSTRAP_SEED = 0


def fpr_label(alpha: float) -> str:
    """``0.001`` → ``"tpr_at_0.1%_fpr"``: the column name of the TPR at FPR ``alpha``."""
    return f"tpr_at_{100 * alpha:g}%_fpr"


METRICS = ("auc", "advantage", *(fpr_label(a) for a in LOW_FPRS))


def check_confidence(confidence) -> float:
    """``confidence`` as a float strictly between 0 and 1 (the level of an interval or a bound)."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1 (e.g. 0.95), got {confidence!r}")
    return float(confidence)


def check_scores(scores, members, name: str = "scores") -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores, members)`` as finite float and bool arrays of the same length, both classes present."""
    sc = np.asarray(scores, dtype=np.float64)
    mb = np.asarray(members)
    if sc.ndim != 1 or mb.ndim != 1:
        raise ValueError(f"{name} and members must be 1-D, got shapes {sc.shape} and {mb.shape}")
    if sc.shape != mb.shape:
        raise ValueError(f"{name} has {sc.size} entries but members has {mb.size}; pass one entry per example")
    if not np.all(np.isfinite(sc)):
        raise ValueError(f"{name} contains NaN or infinite values; an attack score must be a finite number")
    if mb.dtype != bool:
        if not np.all(np.isin(mb, (0, 1))):
            raise ValueError("members must be a boolean mask (True: the example was in the training set)")
        mb = mb.astype(bool)
    if mb.all() or not mb.any():
        raise ValueError("members must contain both members (True) and non-members (False)")
    return sc, mb


def roc_metrics(scores, members, low_fprs=LOW_FPRS) -> dict[str, float]:
    """AUC, advantage and TPR at each FPR in ``low_fprs`` of one score vector (point estimates, scikit-learn)."""
    sc, mb = check_scores(scores, members)
    fpr, tpr, _ = roc_curve(mb, sc, drop_intermediate=False)  # keep every threshold: TPR at FPR ≤ α reads them
    out = {"auc": float(roc_auc_score(mb, sc)), "advantage": float(np.max(np.abs(tpr - fpr)))}
    for a in low_fprs:
        out[fpr_label(a)] = float(np.max(tpr[fpr <= a]))  # fpr[0] = 0, so never empty
    return out


def _weighted_curves(scores: np.ndarray, members: np.ndarray, w_pos: np.ndarray, w_neg: np.ndarray):
    """ROC curves of ``B`` reweighted score sets: ``(fpr, tpr)`` of shape ``(B, T + 1)``.

    ``w_pos`` (``B × m``) and ``w_neg`` (``B × n``) are the multiplicities of the members and
    non-members in each resample. Thresholds are the distinct scores, high to low; ties form
    one step, as in ``roc_curve``.
    """
    order = np.argsort(-scores, kind="mergesort")
    sc = scores[order]
    B = w_pos.shape[0]
    w = np.zeros((2, B, scores.size))
    w[0][:, members] = w_pos
    w[1][:, ~members] = w_neg
    tp, fp = np.cumsum(w[:, :, order], axis=2)
    last_of_tie = np.r_[sc[1:] != sc[:-1], True]
    tp, fp = tp[:, last_of_tie], fp[:, last_of_tie]
    zero = np.zeros((B, 1))
    tpr = np.hstack([zero, tp]) / w_pos.sum(axis=1, keepdims=True)
    fpr = np.hstack([zero, fp]) / w_neg.sum(axis=1, keepdims=True)
    return fpr, tpr


def _curve_metrics(fpr: np.ndarray, tpr: np.ndarray, low_fprs) -> dict[str, np.ndarray]:
    """The metrics of each row of a batch of ROC curves (trapezoidal AUC, as ``roc_auc_score``)."""
    out = {
        "auc": np.sum(np.diff(fpr, axis=1) * (tpr[:, 1:] + tpr[:, :-1]) / 2, axis=1),
        "advantage": np.max(np.abs(tpr - fpr), axis=1),
    }
    for a in low_fprs:
        out[fpr_label(a)] = np.max(np.where(fpr <= a, tpr, 0.0), axis=1)
    return out


def bootstrap_roc_metrics(scores, members, *, n_bootstrap: int = N_BOOTSTRAP, random_state: int = BOOTSTRAP_SEED,
                          low_fprs=LOW_FPRS, chunk: int | None = None) -> dict[str, np.ndarray]:
    """The metrics of ``n_bootstrap`` stratified bootstrap resamples (members and non-members resampled apart).

    Returns a dict metric → array of ``n_bootstrap`` values. Resamples are drawn as multinomial
    multiplicities (members and non-members from two streams spawned from ``random_state``) and
    evaluated ``chunk`` at a time
    (default: up to 200, fewer for large score sets, so that a chunk's arrays stay near 16 MB each).
    """
    sc, mb = check_scores(scores, members)
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, numbers.Integral) or n_bootstrap < 1:
        raise ValueError(f"n_bootstrap must be a positive integer (e.g. 1000), got {n_bootstrap!r}")
    if chunk is None:
        chunk = int(np.clip(2_000_000 // sc.size, 1, 200))
    # members and non-members from two streams, row by row: the resamples do not depend on ``chunk``
    rng_pos, rng_neg = (np.random.default_rng(s) for s in np.random.SeedSequence(random_state).spawn(2))
    m, n = int(mb.sum()), int((~mb).sum())
    parts: list[dict[str, np.ndarray]] = []
    for start in range(0, int(n_bootstrap), chunk):
        b = min(chunk, int(n_bootstrap) - start)
        w_pos = rng_pos.multinomial(m, np.full(m, 1.0 / m), size=b).astype(np.float64)
        w_neg = rng_neg.multinomial(n, np.full(n, 1.0 / n), size=b).astype(np.float64)
        parts.append(_curve_metrics(*_weighted_curves(sc, mb, w_pos, w_neg), low_fprs))
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def attack_metrics(scores, members, *, confidence: float = 0.95, n_bootstrap: int = N_BOOTSTRAP,
                   random_state: int = BOOTSTRAP_SEED, low_fprs=LOW_FPRS) -> dict[str, float]:
    """Point estimates and percentile-bootstrap intervals of every metric, and the counts.

    Keys: ``auc``, ``auc_low``, ``auc_high``, ``advantage``, ``advantage_low``, ``advantage_high``,
    ``tpr_at_0.1%_fpr`` (and ``_low``/``_high``), ``tpr_at_1%_fpr`` (…), ``n_members``, ``n_nonmembers``.
    The interval is the ``(1 − confidence)/2`` and ``(1 + confidence)/2`` quantiles of the bootstrap
    distribution (see the module docstring).
    """
    conf = check_confidence(confidence)
    sc, mb = check_scores(scores, members)
    point = roc_metrics(sc, mb, low_fprs)
    boot = bootstrap_roc_metrics(sc, mb, n_bootstrap=n_bootstrap, random_state=random_state, low_fprs=low_fprs)
    out: dict[str, float] = {}
    for key, value in point.items():
        lo, hi = np.quantile(boot[key], [(1 - conf) / 2, (1 + conf) / 2])
        out[key], out[f"{key}_low"], out[f"{key}_high"] = value, float(lo), float(hi)
    out["n_members"], out["n_nonmembers"] = int(mb.sum()), int((~mb).sum())
    return out


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper–Pearson) two-sided interval of a binomial rate ``k / n``.

    ``[B((1−c)/2; k, n−k+1), B((1+c)/2; k+1, n−k)]`` with ``B(q; a, b)`` the Beta quantile
    (0 when ``k = 0``, 1 when ``k = n``). Valid for a rate at a threshold fixed before the
    ``n`` trials were scored, e.g. a TPR at a threshold chosen on other data.
    """
    conf = check_confidence(confidence)
    for value, name in ((k, "k"), (n, "n")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer count, got {value!r}")
    if n == 0 or k > n:
        raise ValueError(f"need 0 <= k <= n and n >= 1 (successes out of trials), got k={k}, n={n}")
    alpha = 1 - conf
    low = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
    return low, high
