"""Distinguishing games: run a private method on neighbouring data sets many times and audit its ε.

World 0 is the data as given; world 1 its neighbour under the method's privacy unit:

* ``"sensitive"``: one canary person's s is changed (x and y fixed). The default canary
  is chosen adversarially from public knowledge of the data set (the auditor owns it):
  a row of the smallest group, the one with the largest feature norm, moved to the
  largest group — the change that moves group statistics and per-group terms most;
* ``"record"``: a canary record is added. The default canary is crafted in input space:
  the largest-norm row scaled by ``CANARY_SCALE``, with the label a (non-private,
  auditor-side) logistic regression on the data finds least likely there — a point a
  trained model gets confidently wrong, whose gradient only clipping (or a norm bound)
  keeps in check.

Each run fits a fresh clone of the estimator (fresh secret noise; a DP-FERMI logistic
model trains a whole world's runs as one batched computation). Every fitted model is
scored by statistics an attacker holding the model file can compute: the margin (log-odds)
of the canary's label, each released number alone, the projection of all of them (parameters and
array-valued fitted attributes such as released group proportions) onto the direction
separating the worlds, and their Laplace log-likelihood ratio (the test of Laplace-noised
counts, which moves one person's count in two cells), direction, centres and scales fitted
on the calibration runs only (cross-fitted on them, so that a fitted statistic is chosen
on honest scores). Scalar
fitted attributes (noise scales, sensitivities, step counts) are left out: they are
functions of the hyper-parameters and of n, which dpfair's privacy model declares
public (the guide's privacy model, "What is public"); under the record unit a published n would otherwise
tell the worlds apart by construction. The best statistic and
threshold are chosen on those calibration runs and the bound is proved on the others
(:func:`dpfair.audit.epsilon.epsilon_lower_bound`).

:func:`audit_release` plays the game with one noise primitive, :func:`audit_measurement` with the private
measurement (:class:`~dpfair.measurement.frame.PrivateMetricFrame`): a table of people (y, ŷ, s)
and its neighbour, many frames per world, attacked through what each frame publishes.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression

from dpfair.audit.epsilon import LowerBound, epsilon_lower_bound
from dpfair.utils.capabilities import capabilities
from dpfair.privacy import check_privacy_unit
from dpfair.utils.progress import progress

__all__ = ["MEASUREMENT_METRICS", "RELEASE_MECHANISMS", "AuditReport", "audit_epsilon", "audit_measurement",
           "audit_one_run", "audit_release", "choose_canary"]

#: How far the crafted record canary is pushed out (its features times this).
CANARY_SCALE = 100.0

#: Models publishing at most this many numbers also get one statistic per number.
MAX_COORDINATES = 256

_SKIP = {"privacy_spent_", "privacy_ledger_", "privacy_plan_", "history_", "noise_multipliers_", "classes_",
         "groups_", "n_features_in_", "delta_", "epsilon_target_"}


@dataclass
class AuditReport:
    """An audited lower bound beside the claimed ε, with how it was obtained."""

    method: str
    unit: str
    epsilon_claimed: float
    delta: float
    bound: LowerBound
    runs: int
    seconds: float
    canary: dict = field(default_factory=dict)

    @property
    def epsilon_lower_bound(self) -> float:
        return self.bound.epsilon

    @property
    def consistent(self) -> bool:
        """Whether the audit is consistent with the claim (lower bound ≤ claimed ε)."""
        return self.bound.epsilon <= self.epsilon_claimed + 1e-12

    def to_dict(self) -> dict:
        return {"method": self.method, "unit": self.unit, "epsilon_claimed": self.epsilon_claimed,
                "epsilon_lower_bound": self.bound.epsilon, "confidence": self.bound.confidence,
                "delta": self.delta, "runs": self.runs, "seconds": self.seconds, "consistent": self.consistent,
                "canary": self.canary, "test": self.bound.to_dict(),
                "conversion": "one-sided Clopper-Pearson bounds on FPR and FNR (union bound), "
                              "ε ≥ max ln((1 − δ − FNR)/FPR), ln((1 − δ − FPR)/FNR)); statistic and threshold "
                              "chosen on half of the runs, rates counted on the other half"}


def choose_canary(X, y, s, unit: str, n_groups: int) -> dict:
    """The default adversarial canary (see the module docstring), from the auditor's own data."""
    norms = np.linalg.norm(X, axis=1)
    if unit == "sensitive":
        counts = np.bincount(s, minlength=n_groups)
        present = np.flatnonzero(counts)
        small, large = present[np.argmin(counts[present])], present[np.argmax(counts[present])]
        rows = np.flatnonzero(s == small)
        row = int(rows[np.argmax(norms[rows])])
        return {"kind": "flip s", "row": row, "from_group": int(small), "to_group": int(large)}
    row = int(np.argmax(norms))
    x = CANARY_SCALE * X[row]
    # the label a model trained on the data finds least likely there: the canary stays confidently wrong,
    # so its gradient keeps the largest norm it can have (and only clipping bounds it)
    reference = LogisticRegression(max_iter=1000).fit(X, y)
    label = reference.classes_[int(np.argmin(reference.predict_proba(x[None, :])[0]))]
    return {"kind": "add record", "row": row, "x": x.tolist(), "label": int(label), "group": int(s[row])}


def _worlds(X, y, s, canary: dict):
    if canary["kind"] == "flip s":
        s1 = s.copy()
        s1[canary["row"]] = canary["to_group"]
        return (X, y, s), (X, y, s1)
    x = np.asarray(canary["x"], dtype=np.float64)[None, :]
    return (X, y, s), (np.vstack([X, x]), np.append(y, canary["label"]), np.append(s, canary["group"]))


def _released(model) -> np.ndarray:
    """Every number the fitted model publishes (its tensors and numeric fitted attributes), flattened."""
    parts = []
    module = getattr(model, "model_", None)
    if isinstance(module, torch.nn.Module):
        parts += [p.detach().double().cpu().numpy().ravel() for p in module.parameters()]
    for name in sorted(vars(model)):
        if not name.endswith("_") or name.startswith("_") or name in _SKIP:
            continue
        value = getattr(model, name)
        if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
            # any fixed function of the output is a valid test statistic: infinities become large numbers
            parts.append(np.nan_to_num(value.astype(np.float64).ravel(), nan=0.0, posinf=1e12, neginf=-1e12))
    return np.concatenate(parts) if parts else np.zeros(1)


def _canary_margin(model, X, y, s, canary) -> float:
    """The model's log-odds of the canary's label against the best other label (logits where it has them,
    so that a confident model does not saturate the statistic)."""
    i = canary["row"]
    x = np.asarray(canary["x"], dtype=np.float64)[None, :] if "x" in canary else X[i:i + 1]
    index = int(np.searchsorted(model.classes_, canary.get("label", y[i])))
    module = getattr(model, "model_", None)
    if isinstance(module, torch.nn.Module):
        with torch.no_grad():
            scores = module(torch.as_tensor(x, dtype=next(module.parameters()).dtype)).double().numpy()[0]
    elif hasattr(model, "decision_function"):
        raw = np.atleast_1d(np.asarray(model.decision_function(x), dtype=np.float64)[0])
        scores = np.array([0.0, raw[0]]) if raw.size == 1 else raw
    else:
        if capabilities(model).predict_needs_sensitive:
            proba = model.predict_proba(x, sensitive_features=np.array([canary.get("to_group", s[i])]))
        else:
            proba = model.predict_proba(x)
        scores = np.log(np.clip(proba[0], 1e-300, None))
    others = np.delete(scores, index)
    return float(scores[index] - others.max())


def _fit_runs(estimator, data, runs: int, seed: int, bar):
    """``runs`` fits on ``data``, counted on ``bar``. One at a time they share one public ``random_state``, as
    a user's fits do: only the secret noise may differ. A method that declares batched grids (DP-FERMI) trains
    them batched (its class's ``fit_many``), one public seed per model (models of one seed share their secret batch order, which would make
    the runs dependent)."""
    X, y, s = data
    if capabilities(estimator).batched_grid:
        fitted = list(type(estimator).fit_many(
            [clone(estimator).set_params(random_state=r) for r in range(seed, seed + runs)], X, y, s))
        bar.update(runs)
        return fitted
    fitted = []
    for _ in range(runs):
        fitted.append(clone(estimator).set_params(random_state=seed).fit(X, y, sensitive_features=s))
        bar.update()
    return fitted


def _fit_statistics(rows0: np.ndarray, rows1: np.ndarray):
    """The statistics fitted to runs of each world, as a function of a run's released numbers ``r``:

    * the projection (r − c)·d/‖d‖ on the direction d = m̄1 − m̄0 between the worlds' means, c their midpoint
      (the Neyman–Pearson statistic when the numbers carry isotropic Gaussian noise);
    * the Laplace log-likelihood ratio Σ_j (|r_j − m0_j| − |r_j − m1_j|)/b_j, m_w the worlds' medians and b_j
      their mean absolute deviation (the Neyman–Pearson statistic when each number carries independent Laplace
      noise: Laplace counts, where the canary moves one person between two cells). Numbers that do not move add
      at most |m0_j − m1_j|/b_j each, so they blur it less than they blur the projection.
    """
    mean0, mean1 = rows0.mean(0), rows1.mean(0)
    direction, centre = mean1 - mean0, 0.5 * (mean0 + mean1)
    length = np.linalg.norm(direction)
    direction = direction / length if length > 0 else direction
    med0, med1 = np.median(rows0, axis=0), np.median(rows1, axis=0)
    scale = 0.5 * (np.abs(rows0 - med0).mean(0) + np.abs(rows1 - med1).mean(0))
    scale = np.where(scale > 0, scale, 1.0)  # a constant number: its own statistic ("released number j") sees it

    def statistics(r: np.ndarray) -> dict:
        return {"released numbers, projected": (r - centre) @ direction,
                "released numbers, Laplace likelihood ratio": ((np.abs(r - med0) - np.abs(r - med1)) / scale).sum(1)}

    return statistics


def _fitted_statistics(released: list, calib: int) -> list[dict]:
    """Per world, the scores of every run under the statistics of :func:`_fit_statistics`, fitted on the
    calibration runs (the first ``calib`` of each world) only. An evaluation run is scored by the fit on all of
    them; a calibration run by the fit on the other half of them (cross-fitting), so that the statistic and the
    threshold are chosen on scores as honest as the evaluation runs' (scored in-sample, a fitted statistic looks
    better on the calibration runs than it is, and wins the choice over the canary margin)."""
    full = _fit_statistics(released[0][:calib], released[1][:calib])
    scores = [{k: np.empty(len(r)) for k in full(r[:1])} for r in released]
    halves = [np.arange(calib) % 2 == k for k in (0, 1)]
    for w, r in enumerate(released):
        for name, v in full(r[calib:]).items():
            scores[w][name][calib:] = v
        for k, half in enumerate(halves):
            other = halves[1 - k] if calib >= 4 else np.ones(calib, dtype=bool)  # too few runs to split: in-sample
            fitted = _fit_statistics(released[0][:calib][other], released[1][:calib][other])
            for name, v in fitted(r[:calib][half]).items():
                scores[w][name][np.flatnonzero(half)] = v
    return scores


def audit_epsilon(estimator, X, y, sensitive_features, *, unit=None, runs: int = 200, confidence: float = 0.95,
                  canary: dict | None = None, random_state: int = 0, n_groups: int | None = None,
                  verbose: bool = False) -> AuditReport:
    """Audit ``estimator``'s ε on ``(X, y, s)``: ``runs`` fits per world, the best test, its lower bound.

    ``unit``: the neighbouring relation audited (default: the unit of the estimator's guarantee, its
    ``privacy_unit``; ``"record"`` for estimators without one, the non-private references). The
    claimed ε is the ``privacy_spent_`` of the fits (the largest, if they differ). ``verbose``: a
    progress bar on stderr over the fits (:mod:`dpfair.utils.progress`).
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    s = np.asarray(sensitive_features)
    own = getattr(estimator, "privacy_unit", None)
    unit = check_privacy_unit(unit or own or "record").value
    if own is not None and check_privacy_unit(own).value != unit:
        raise ValueError(f"{type(estimator).__name__} guarantees privacy_unit={own!r}; an audit of {unit!r} would "
                         f"compare against no claim (set privacy_unit={unit!r} on the method if it offers it)")
    if runs < 4:
        raise ValueError(f"runs must be >= 4 (two per world for calibration and evaluation), got {runs}; "
                         "hundreds are needed for a meaningful bound")
    k = int(n_groups if n_groups is not None else s.max() + 1)
    canary = dict(canary or choose_canary(X, y, s, unit, k))
    worlds = _worlds(X, y, s, canary)
    if unit == "record" and estimator.get_params().get("sample_size", 0) is None:
        # add/remove DP with a public N: both worlds' q, step count and scale come from the same N
        estimator = clone(estimator).set_params(sample_size=len(y))
    t0 = time.perf_counter()
    per_world = runs // 2
    batched = capabilities(estimator).batched_grid
    fitted = []
    with progress(2 * per_world, "audit", "fit", enabled=verbose) as bar:
        for w, data in enumerate(worlds):
            fitted.append(_fit_runs(estimator, data, per_world, random_state + (w * per_world if batched else 0),
                                    bar))
    claimed = max(m.privacy_spent_[0] for world in fitted for m in world)
    delta = max(m.privacy_spent_[1] for world in fitted for m in world)
    margins = [np.array([_canary_margin(m, X, y, s, canary) for m in world]) for world in fitted]
    released = [np.stack([_released(m) for m in world]) for world in fitted]
    calib = per_world // 2
    scored = _fitted_statistics(released, calib)
    stats = [{"canary margin": margin, **scores} for margin, scores in zip(margins, scored)]
    if released[0].shape[1] <= MAX_COORDINATES:  # each released number alone (a group proportion, a weight)
        for world, r in zip(stats, released):
            world.update({f"released number {j}": r[:, j] for j in range(r.shape[1])})
    bound = epsilon_lower_bound(stats[0], stats[1], delta=delta, confidence=confidence,
                                calibration=calib / per_world)
    return AuditReport(type(estimator).__name__, unit, float(claimed), float(delta), bound, 2 * per_world,
                       time.perf_counter() - t0, canary)


#: The mechanisms :func:`audit_release` audits (the names of :class:`~dpfair.privacy.Part`).
RELEASE_MECHANISMS = ("gaussian", "laplace", "randomized_response")


def audit_release(mechanism: str = "gaussian", *, epsilon: float = 1.0, delta: float = 1e-5, unit=None,
                  runs: int = 400_000, confidence: float = 0.95, accountant: str = "pld",
                  buckets: int = 2) -> AuditReport:
    """Audit a noise primitive itself: one planned part, calibrated to (ε, δ), released ``runs`` times.

    The part is calibrated by :meth:`~dpfair.privacy.PrivacyPlan.calibrate`, as every estimator's are, and
    the claimed ε is what the plan's accounting reports for it. Neighbours at the worst-case distance:

    * ``"gaussian"`` / ``"laplace"`` (default unit ``"record"``): world 0 releases the sum without the canary,
      world 1 with it; under add/remove the canary adds the whole bound, under replace-one the two sums lie
      at −bound and +bound (the bound convention of :mod:`dpfair.privacy.units`);
    * ``"randomized_response"`` (``buckets`` = k values; it protects one person's value, so its unit is
      ``"sensitive"``, replace-one): the person's value is 0 in world 0 and 1 in world 1, and the statistic
      is whether the released value is 1, kept with probability π = e^ε/(e^ε + k − 1) in world 1 and
      reported with probability (1 − π)/(k − 1) in world 0, a likelihood ratio of e^ε.

    Each coordinate of one vector release is an independent run of the one-person mechanism (its own noise
    draw or coin), so hundreds of thousands of runs cost one call. The released value is the Neyman–Pearson
    statistic, so the bound approaches the primitive's ε as runs grow (a Gaussian's only slowly: its ε at a
    small δ lives in tails that few runs reach). The releases go through a release session
    (:class:`~dpfair.privacy.session.ReleaseSession`) as every estimator's do, so a broken noise scale shows here
    (the tests' planted ``halve_noise``).
    """
    from dpfair.privacy import Part, PrivacyLedger, PrivacyPlan
    from dpfair.privacy.session import ReleaseSession

    mechanism = str(mechanism).replace("-", "_")
    if mechanism not in RELEASE_MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(RELEASE_MECHANISMS)}, got {mechanism!r}")
    rr = mechanism == "randomized_response"
    relation = check_privacy_unit(unit or ("sensitive" if rr else "record"))
    if rr and relation.value != "sensitive":
        raise ValueError("randomized response protects one person's value (a replace-one change): audit it "
                         "under unit 'sensitive'")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    if int(runs) != runs or runs < 4:
        raise ValueError(f"runs must be an integer >= 4 (two per world for calibration and evaluation; hundreds of "
                         f"thousands for a bound near ε), got {runs}")
    if rr and (int(buckets) != buckets or buckets < 2):
        raise ValueError(f"buckets must be an integer >= 2 (the number of values randomized), got {buckets}")
    part = Part("audited release", mechanism=mechanism, buckets=int(buckets) if rr else 2)
    plan = PrivacyPlan((part,))
    sigma = plan.calibrate(epsilon, delta, relation, accountant)[part.name]
    claimed = plan.epsilon({part.name: sigma}, delta, relation, accountant)
    bound = 1.0
    worlds = (0.0, 1.0) if rr or relation.value == "record" else (-bound, bound)
    per_world = int(runs) // 2
    t0 = time.perf_counter()
    draws = []
    for centre in worlds:
        with ReleaseSession(PrivacyLedger(relation.relation), plan=plan, sigmas={part.name: sigma},
                            key=("audit release", centre)) as session:
            release = session.release(part.name)
            if rr:
                out = release.randomize(np.full(per_world, int(centre)), int(buckets))
                draws.append({"released value is world 1's": (out == 1).astype(np.float64)})
            else:
                draws.append({"released value": release.noisy_sum(np.full(per_world, centre), bound=bound)})
    result = epsilon_lower_bound(draws[0], draws[1], delta=delta, confidence=confidence)
    canary = ({"kind": "value changed", "from": 0, "to": 1, "buckets": int(buckets)} if rr
              else {"kind": "canary at the bound", "bound": bound, "world 0": worlds[0], "world 1": worlds[1]})
    name = mechanism.replace("_", " ")
    return AuditReport(f"{name} release", relation.value, float(claimed), float(delta), result,
                       2 * per_world, time.perf_counter() - t0, canary)


#: The figures each frame of :func:`audit_measurement` computes by default: the noisy group sizes and the rates
#: behind demographic parity, equalized odds and accuracy parity (what ``dpfair measure`` reports).
MEASUREMENT_METRICS = ("count", "selection_rate", "true_positive_rate", "false_positive_rate", "accuracy")


def _plain(value):
    """A numpy scalar as the Python value it holds (for the JSON of the canary)."""
    return value.item() if isinstance(value, np.generic) else value


def _measurement_canary(groups, classes, g: np.ndarray, yt: np.ndarray, yp: np.ndarray, unit: str) -> dict:
    """The default canary of :func:`audit_measurement`, from the auditor's own table (codes ``g``, ``yt``, ``yp``).

    It sits in the smallest group present, in that group's least populated cell (y, ŷ) — where one person moves
    the group's rates most; under ``"sensitive"`` it is a person of that cell moved to the largest group, under
    ``"record"`` a person of that group and cell added."""
    k, l = len(groups), len(classes)
    counts = np.bincount(g, minlength=k)
    present = np.flatnonzero(counts)
    if unit == "sensitive" and present.size < 2:
        raise ValueError("the sensitive unit's canary moves one person between two groups, but the rows hold people "
                         "of fewer than two of the groups; pass rows of at least two groups")
    small = int(present[np.argmin(counts[present])])
    mine = g == small
    cells = np.bincount(yt[mine] * l + yp[mine], minlength=l * l)
    if unit == "sensitive":
        cell = int(np.flatnonzero(cells == cells[cells > 0].min())[0])
    else:
        cell = int(np.argmin(cells))
    y_c, p_c = divmod(cell, l)
    canary = {"y_true": _plain(classes[y_c]), "y_pred": _plain(classes[p_c])}
    if unit == "record":
        return {"kind": "add person", "group": _plain(groups[small]), **canary}
    large = int(present[np.argmax(counts[present])])
    row = int(np.flatnonzero(mine & (yt == y_c) & (yp == p_c))[0])
    return {"kind": "flip s", "row": row, "from_group": _plain(groups[small]), "to_group": _plain(groups[large]),
            **canary}


def audit_measurement(y_true, y_pred, sensitive_features, *, groups, classes=(0, 1), epsilon: float = 1.0,
                      delta: float | None = None, unit="sensitive", releases: int = 400,
                      metrics=MEASUREMENT_METRICS, accountant: str = "pld", confidence: float = 0.95,
                      canary: dict | None = None, random_state: int = 0, verbose: bool = False) -> AuditReport:
    """Audit :class:`~dpfair.measurement.frame.PrivateMetricFrame` itself: a distinguishing game on
    the table of people ``(y_true, y_pred, sensitive_features)``, ``releases`` frames (half per world).

    World 0 is the table as given, world 1 its neighbour under ``unit``: ``"sensitive"``, one canary person's
    group moved (from the smallest group present to the largest, y and ŷ kept); ``"record"``, one canary person
    added (to the smallest group). The default canary sits in that group's least populated cell (y, ŷ), where
    one person moves the group's rates most (``canary``: a dict of the same keys to choose another). Every
    release is a fresh frame at ``epsilon`` built through the frame's public constructor only — one public
    ``random_state`` for all, as a user's frames share theirs, so only the secret noise differs — with one
    bootstrap replicate (only the released figures matter here). δ is fixed for both worlds (default 1/n² of
    world 0: the frame's own default would differ between the worlds by the public n). The claimed ε is the
    frames' ``privacy_spent_``.

    The attacker holds what a frame publishes: the table ``noisy_table_``, each released table
    (``noisy_tables_``), ``by_group`` and ``difference()`` of ``metrics``. Its statistics: the canary's cells
    (world 1's minus world 0's cell of the canary under ``"sensitive"``, the canary's cell under ``"record"``:
    the Neyman–Pearson statistic of independent Gaussian cells of equal noise), every released number alone,
    and their projection and Laplace likelihood ratio fitted on the calibration runs (as :func:`audit_epsilon`).
    The statistic and threshold are chosen on half the runs and the bound proved on the others
    (:func:`~dpfair.audit.epsilon.epsilon_lower_bound`). A frame whose counts are released without noise puts
    each world's figures at one point, and the bound then reaches what the runs can prove (about
    ln(r / ln 40) with r evaluation runs per world).
    """
    from dpfair.exceptions import UtilityWarning
    from dpfair.measurement.frame import PrivateMetricFrame

    relation = check_privacy_unit(unit).value
    if int(releases) != releases or releases < 8:
        raise ValueError(f"releases must be an integer >= 8 (two per world for calibration and evaluation, "
                         f"hundreds for a meaningful bound), got {releases}")
    y_true, y_pred, s = np.asarray(y_true), np.asarray(y_pred), np.asarray(sensitive_features)
    n = len(y_true)
    if n == 0:
        raise ValueError("y_true is empty; pass one entry per person")
    delta = 1.0 / n ** 2 if delta is None else float(delta)
    names = [metrics] if isinstance(metrics, str) else list(metrics)

    def frame(yt, yp, ss):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UtilityWarning)  # small groups flagged: the audit reads every figure
            warnings.simplefilter("ignore", RuntimeWarning)  # a figure of an empty denominator (NaN)
            return PrivateMetricFrame(names, yt, yp, ss, groups=groups, classes=classes, epsilon=epsilon,
                                      delta=delta, privacy_unit=relation, accountant=accountant, n_bootstrap=1,
                                      random_state=random_state, sampling=False)

    first = frame(y_true, y_pred, s)  # checks the inputs; its release is not one of the runs
    public_groups, public_classes = first.groups_, first.classes_
    g = np.asarray(pd.Index(public_groups).get_indexer(s), dtype=np.int64)
    yt = np.asarray(pd.Index(public_classes).get_indexer(y_true), dtype=np.int64)
    yp = np.asarray(pd.Index(public_classes).get_indexer(y_pred), dtype=np.int64)
    canary = dict(canary or _measurement_canary(public_groups, public_classes, g, yt, yp, relation))
    group_index, class_index = pd.Index(public_groups), pd.Index(public_classes)
    c_y, c_p = class_index.get_loc(canary["y_true"]), class_index.get_loc(canary["y_pred"])
    if relation == "sensitive":
        row = int(canary["row"])
        if not 0 <= row < n:
            raise ValueError(f"the canary's row {row} is not a row of the table ({n} rows)")
        # the row moved to the end, its group replaced (np.append promotes the dtype to hold the new group)
        world1 = (np.append(np.delete(y_true, row), y_true[row]), np.append(np.delete(y_pred, row), y_pred[row]),
                  np.append(np.delete(s, row), canary["to_group"]))
        plus, minus = group_index.get_loc(canary["to_group"]), group_index.get_loc(s[row])
        if plus == minus:
            raise ValueError(f"the canary's row {row} is already in group {canary['to_group']!r}; move it to another")
    else:
        world1 = (np.append(y_true, canary["y_true"]), np.append(y_pred, canary["y_pred"]),
                  np.append(s, canary["group"]))
        plus, minus = group_index.get_loc(canary["group"]), None
    worlds = ((y_true, y_pred, s), world1)

    def observed(f) -> tuple[float, np.ndarray]:
        """The canary's cells and every released number of one frame."""
        table = np.asarray(f.noisy_table_, dtype=np.float64)
        cells = table[plus, c_y, c_p] - (table[minus, c_y, c_p] if minus is not None else 0.0)
        tables = getattr(f, "noisy_tables_", {})  # each released table, where the frame releases several
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            numbers = np.concatenate([table.ravel(), f.by_group.to_numpy(dtype=np.float64).ravel(),
                                      f.difference().to_numpy(dtype=np.float64),
                                      *(np.asarray(tables[t], dtype=np.float64).ravel() for t in sorted(tables))])
        # any fixed function of the output is a valid statistic: NaN (an empty denominator) becomes 0
        return float(cells), np.nan_to_num(numbers, nan=0.0, posinf=1e12, neginf=-1e12)

    per_world = int(releases) // 2
    t0 = time.perf_counter()
    frames_seen, claims = [], []
    with progress(2 * per_world, "audit", "release", enabled=verbose) as bar:
        for data in worlds:
            seen = []
            for _ in range(per_world):
                f = frame(*data)
                seen.append(observed(f))
                claims.append(f.privacy_spent_)
                bar.update()
            frames_seen.append(seen)
    claimed = max(c[0] for c in claims)
    spent_delta = max(c[1] for c in claims)
    calib = per_world // 2
    released = [np.stack([r for _, r in seen]) for seen in frames_seen]
    scored = _fitted_statistics(released, calib)
    stats = [{"canary cells": np.array([c for c, _ in seen]), **scores} for seen, scores in zip(frames_seen, scored)]
    labels = ([f"released cell {_plain(gr)},{_plain(a)},{_plain(b)}" for gr in public_groups
               for a in public_classes for b in public_classes]
              + [f"{m} of group {_plain(gr)}" for gr in public_groups for m in first.by_group.columns]
              + [f"difference of {m}" for m in first.difference().index]
              + [f"released {t} {j}" for t in sorted(getattr(first, "noisy_tables_", {}))
                 for j in range(np.size(first.noisy_tables_[t]))])
    if released[0].shape[1] <= MAX_COORDINATES:
        for world, r in zip(stats, released):
            world.update({label: r[:, j] for j, label in enumerate(labels)})
    bound = epsilon_lower_bound(stats[0], stats[1], delta=spent_delta, confidence=confidence,
                                calibration=calib / per_world)
    return AuditReport(type(first).__name__, relation, float(claimed), float(spent_delta), bound, 2 * per_world,
                       time.perf_counter() - t0, canary)


def audit_one_run(estimator, X, y, sensitive_features, *, canaries: int = 1000, confidence: float = 0.95,
                  random_state: int = 0, verbose: bool = False) -> dict:
    """Steinke, Nasr, Jagielski (2023): one training run with ``canaries`` crafted records, each in with prob. ½.

    For models too costly to train hundreds of times (record unit). Canaries are random rows with
    flipped labels (input-space canaries; the auditor owns the data); the score of a canary is
    minus its loss (members fit better); :func:`dpfair.audit.epsilon.one_run_epsilon_lower_bound`
    turns the guesses into a bound. The inclusion coins are public randomness of the audit, not of
    the mechanism. ``verbose``: a progress bar on stderr over the training run (:mod:`dpfair.utils.progress`).
    """
    from dpfair.audit.epsilon import one_run_epsilon_lower_bound

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    s = np.asarray(sensitive_features)
    rng = np.random.default_rng(random_state)
    m = int(canaries)
    if not 2 <= m <= len(y):
        raise ValueError(f"canaries must be between 2 and the number of rows ({len(y)}), got {canaries}")
    rows = rng.choice(len(y), size=m, replace=False)
    n_classes = max(int(y.max()) + 1, 2)
    cx, cy, cs = X[rows], (y[rows] + 1) % n_classes, s[rows]
    included = rng.random(m) < 0.5
    keep = np.ones(len(y), dtype=bool)
    keep[rows] = False  # the canaries' source rows never train
    Xt = np.vstack([X[keep], cx[included]])
    yt, st = np.append(y[keep], cy[included]), np.append(s[keep], cs[included])
    t0 = time.perf_counter()
    with progress(1, "one-run audit", "fit", enabled=verbose) as bar:
        model = clone(estimator).set_params(random_state=random_state).fit(Xt, yt, sensitive_features=st)
        bar.update()
    proba = model.predict_proba(cx)
    index = np.searchsorted(model.classes_, cy)
    scores = np.log(np.clip(proba[np.arange(m), index], 1e-300, None))
    eps, delta = model.privacy_spent_
    out = one_run_epsilon_lower_bound(scores, included, delta=delta, confidence=confidence)
    return {**out, "epsilon_claimed": float(eps), "seconds": time.perf_counter() - t0, "unit": "record",
            "method": type(estimator).__name__}
