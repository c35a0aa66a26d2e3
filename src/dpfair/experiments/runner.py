"""Training the models of a grid and a sweep's task: :func:`run_grid` and :func:`run_task`.

:func:`run_grid` fits one model per grid point on a loaded :class:`~dpfair.datasets.Dataset` — a grid of a
method that declares batched grids (DP-FERMI) as one computation, its class's
:meth:`~dpfair.algorithms.base.FairEstimator.fit_many`, any other method one fit per point — and evaluates
each on the test part (:func:`~dpfair.experiments.evaluate`).

Privacy. Each fit draws its own secret generator; the models of a batched grid share their Poisson
batches and are released together under their joint event (its ε = ∞ models, if any, as a release of
their own). :class:`GridResult` keeps, for each
release group, the event that accounts for it, so a store composes what was actually released (see
:class:`~dpfair.experiments.store.ResultsStore`). The test metrics read the test part, which no ledger
covers (the guide's privacy model) unless the grid is given an evaluation budget (``eval_epsilon``): each
model's test figures by group are then released through a
:class:`~dpfair.measurement.frame.PrivateMetricFrame` (:func:`~dpfair.experiments.evaluate`), and
its event is composed into the model's release group. Within one split the test people are not the training
people, but another seed's split trains on them, so a sweep (whose totals compose every split of a data set
as one population) counts the evaluations with the fits: an upper bound.
"""

from __future__ import annotations

import functools
import json
import math
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from dpfair.utils.capabilities import capabilities
from dpfair.experiments.evaluate import evaluate
from dpfair.privacy.accounting import event_to_json
from dpfair.privacy.record import PrivacyRecord


@functools.cache
def batched_method(method: str) -> bool:
    """Whether a sweep trains ``method``'s points of one (data, split, notion) as one task: those of a method that
    declares batched grids (:attr:`~dpfair.utils.capabilities.Capabilities.batched_grid`, at its default
    hyper-parameters; :func:`run_grid` asks each grid's own)."""
    from dpfair.algorithms import METHODS

    return method in METHODS and capabilities(METHODS[method]).batched_grid


def _batched(cls, fixed: dict, points: list[dict]) -> bool:
    """Whether a grid of ``cls`` at ``points`` (over ``fixed``) trains as one batched computation: more than one
    point, each declaring batched grids with its hyper-parameters (``secure_mode`` fits one model at a time)."""
    valid = cls().get_params()
    return len(points) > 1 and all(
        capabilities(cls(**{k: v for k, v in {**fixed, **p}.items() if k in valid})).batched_grid for p in points)


@dataclass
class GridResult:
    """What :func:`run_grid` trained: ``rows`` (one dict per model, in the grid's order) and ``releases``
    (one dict per release group: ``event`` (JSON), ``relation``, ``delta``, ``epsilon`` and ``rows``, the
    indices of its models)."""

    rows: list[dict] = field(default_factory=list)
    releases: list[dict] = field(default_factory=list)


def declared_estimator(cls, params: dict, data):
    """``cls(**params)`` given the data set's declared group and label lists (public, never read off the
    private arrays), unless ``params`` sets ``groups`` / ``classes`` itself, and told which features encode the
    sensitive attribute (``data.sensitive_columns``, public schema): a method that reads X as public under
    ``privacy_unit="sensitive"`` refuses them (``ValueError``, :meth:`FairEstimator.declare_sensitive_columns`),
    output perturbation gets them in ``sensitive_feature_columns``. Every fit of the CLI and the sweeps is
    built here."""
    valid = cls().get_params()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise ValueError(f"{cls.__name__} has no hyper-parameter {unknown[0]!r}; valid: {', '.join(valid)}")
    declared = {"groups": data.n_groups, "classes": data.n_classes}
    est = cls(**{**{k: v for k, v in declared.items() if k in valid}, **params})
    return est.declare_sensitive_columns(data.sensitive_columns, data.feature_names, data.sensitive)


def run_grid(method: str, data, grid: dict[str, list] | list[dict] | None = None, *, params: dict | None = None,
             quiet: bool = True, eval_epsilon: float | None = None) -> GridResult:
    """Fit ``method`` at every point of ``grid`` on ``data``'s training part and evaluate it on its test part.

    ``grid``: hyper-parameter lists (their product) or a list of points, e.g. ``{"epsilon": [0.5, 1],
    "lam": [0, 1]}``; ``params``: fixed hyper-parameters of every point (``random_state`` among them).
    Returns a :class:`GridResult`; each row holds ``params`` (the point and the fixed parameters),
    ``metrics`` (:func:`evaluate`), ``violation`` (of the targeted notion; NaN for a method that targets
    none), ``epsilon_spent`` / ``delta_spent`` (this model alone), ``privacy_unit``, ``ledger`` (JSON),
    ``fit_s`` (its share of the fit time) and ``release``, the index of its release group.
    ``eval_epsilon``: each model's test figures by group released privately at this ε (under its privacy
    unit; ``metrics["evaluation"]``), the evaluation's event composed into its release group's event and ε.
    """
    from dpfair.algorithms import METHODS
    from dpfair.algorithms.dpfermi.grid import grid_points

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    cls = METHODS[method]
    fixed = dict(params or {})
    if "verbose" in cls().get_params():
        fixed.setdefault("verbose", not quiet)
    points = grid_points(grid or {})
    X, y, s = data.train
    out = GridResult()
    t0 = time.perf_counter()
    if _batched(cls, fixed, points):  # one batched grid (fit_many), released as one
        fitted = cls.fit_many([declared_estimator(cls, {**fixed, **point}, data) for point in points], X, y, s)
        seconds = (time.perf_counter() - t0) / len(fitted)
        private = [i for i, est in enumerate(fitted) if math.isfinite(est.privacy_spent_[0])]
        for part in (private, [i for i in range(len(fitted)) if i not in private]):
            if part:
                out.releases.append(_joint_release([fitted[i] for i in part], fitted.shared_batches, part))
        release_of = {i: r for r, release in enumerate(out.releases) for i in release["rows"]}
        for i, (point, est) in enumerate(zip(points, fitted)):
            out.rows.append(_row(est, {**fixed, **point}, data, seconds, release_of[i], eval_epsilon))
        return _with_evaluations(out, fitted[0])
    for i, point in enumerate(points or [{}]):
        t1 = time.perf_counter()
        est = declared_estimator(cls, {**fixed, **point}, data)
        est.fit(X, y, sensitive_features=s)
        ledger = est.privacy_ledger_
        eps, delta = est.privacy_spent_
        out.releases.append({"event": event_to_json(ledger.dp_event), "relation": ledger.relation.name,
                             "delta": delta, "epsilon": eps, "rows": [i]})
        out.rows.append(_row(est, {**fixed, **point}, data, time.perf_counter() - t1, i, eval_epsilon))
    return _with_evaluations(out, est)


def _with_evaluations(out: GridResult, est) -> GridResult:
    """Each release group's event composed with its models' private evaluations (their events), its ε again at
    its δ; unchanged where no model was evaluated privately. A non-private group stays ∞."""
    import dp_accounting as dpa

    from dpfair.privacy import epsilon_of
    from dpfair.privacy.accounting import event_from_json

    for release in out.releases:
        evaluations = [out.rows[i]["metrics"]["evaluation"] for i in release["rows"]]
        events = [event_from_json(e["event"]) for e in evaluations if e.get("private")]
        if not events:
            continue
        event = dpa.ComposedDpEvent([event_from_json(release["event"]), *events])
        release["event"] = event_to_json(event)
        if math.isfinite(release["epsilon"]):
            unit = "record" if release["relation"] == "ADD_OR_REMOVE_ONE" else "sensitive"
            release["epsilon"] = epsilon_of(event, release["delta"], unit, getattr(est, "accountant", "pld"))
    return out


def _joint_release(estimators, shared_batches: bool, rows: list[int]) -> dict:
    """The release of a batched grid's private models together (their joint event: they shared Poisson
    batches), or of its ε = ∞ models (non-private). Kept apart, so that the ∞ of the second does not hide
    what publishing only the private models costs; publishing both is ∞ either way."""
    import dp_accounting as dpa

    from dpfair.algorithms.dpfermi.grid import joint_event
    from dpfair.privacy import epsilon_of

    first = estimators[0]
    relation = first.privacy_unit_.relation.name
    delta = min(est.delta_ for est in estimators)
    if not math.isfinite(first.privacy_spent_[0]):
        return {"event": event_to_json(dpa.NonPrivateDpEvent()), "relation": relation, "delta": delta,
                "epsilon": math.inf, "rows": rows}
    event = joint_event(estimators, shared_batches)
    return {"event": event_to_json(event), "relation": relation, "delta": delta,
            "epsilon": epsilon_of(event, delta, first.privacy_unit_, first.accountant), "rows": rows}


def _row(est, params: dict, data, fit_s: float, release: int, eval_epsilon: float | None = None) -> dict:
    record = PrivacyRecord.of_fit(est)
    metrics = evaluate(est, data.X_test, data.y_test, data.s_test, data.group_names, epsilon=eval_epsilon,
                       privacy_unit=record.unit or "sensitive")
    target = est.fairness_target()
    return {"params": {k: v for k, v in params.items() if k != "verbose"}, "metrics": metrics,
            "violation": metrics["fairness"][target["notion"]] if target else float("nan"),
            **record.to_row(), "ledger": est.privacy_ledger_.to_json(), "fit_s": fit_s, "release": release}


# ---- a sweep's task ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=8)
def _load(data_spec, seed: int, test_size: float):
    """A built-in data set (:func:`~dpfair.datasets.load_dataset`), or a user's table
    (:func:`~dpfair.datasets.load_table`, through its declared schema) whose files still hold the bytes the
    spec's keys were made from (a changed file is refused: its rows are another version of the table)."""
    from dpfair.datasets import load_dataset, load_table
    from dpfair.experiments.spec import tables_sha256

    if data_spec.data is None:
        return load_dataset(data_spec.name, **data_spec.load_kwargs(seed, test_size))
    if tables_sha256(data_spec) != data_spec.sha256:
        raise ValueError(f"the file(s) of data set {data_spec.name!r} changed after the spec was read; run the "
                         "sweep again (the new version trains under new keys)")
    return load_table(data_spec.data, **data_spec.load_kwargs(seed, test_size))


@functools.cache
def provenance() -> dict:
    """Where results are computed: the git commit of dpfair's source tree (``+dirty`` with uncommitted
    changes to tracked files; ``None`` outside a checkout), the package versions and the host."""
    from dpfair.persistence import library_versions

    root = Path(__file__).resolve().parents[3]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        commit = head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "") if head.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"commit": commit, "versions": library_versions(), "host": socket.gethostname()}


def data_key(point, data) -> str:
    """The people a point's model is trained on and the attribute it protects: the data set and its
    (resolved) sensitive attribute. Every split (seed), preset and loader option of one data set holds the
    same people, so all their models compose on one ledger. A user's table adds its version (its ``table``
    digests, :class:`~dpfair.experiments.spec.DataSpec`), so no release mixes two versions; the totals still
    compose by name, every version of a table counted as the same people."""
    key = {"dataset": point.data.name, "sensitive": data.sensitive}
    if point.data.table:
        key["table"] = dict(point.data.table)
    return json.dumps(key, sort_keys=True)


def run_task(points: list) -> dict:
    """Train the :class:`~dpfair.experiments.spec.Point` s of one task (same data, split, method, notion)
    and return what a :class:`~dpfair.experiments.store.ResultsStore` stores: ``{"configs", "failure",
    "releases", "warnings"}``, each release with its ``rows``, and the distinct warnings its fits raised. A fit that refuses its input (``ValueError``, whose
    messages read only public quantities) or a data set not on disk (``OSError``) is returned as
    ``failure``, its message, and nothing else."""
    import warnings

    t0 = time.perf_counter()
    first = points[0]
    configs = [{**p.config(), "key": p.key} for p in points]
    grid = []
    for p in points:
        point = dict(p.params)
        if p.epsilon is not None:
            point["epsilon"] = p.epsilon
            if p.delta is not None:
                point["delta"] = p.delta
        if p.notion is not None and "notion" in _params_of(p.method):
            point["notion"] = p.notion
        grid.append(point)
    # the fits' warnings go back to the sweep, which summarises them (a worker's stderr is no place for them)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            data = _load(first.data, first.seed, first.test_size)
            result = run_grid(first.method, data, grid, params={"random_state": first.seed},
                              eval_epsilon=first.eval_epsilon)
        except (ValueError, OSError) as exc:  # a refused input or a data set not on disk
            return {"configs": configs, "failure": str(exc).strip().splitlines()[0], "releases": [],
                    "warnings": _warning_lines(caught)}
    wall = (time.perf_counter() - t0) / len(points)
    where = provenance()
    releases = []
    for release in result.releases:
        rows = [{**result.rows[i], "key": points[i].key, "config": configs[i], "wall_s": wall, **where}
                for i in release["rows"]]
        releases.append({**release, "data_key": data_key(first, data), "rows": rows})
    return {"configs": configs, "failure": None, "releases": releases, "warnings": _warning_lines(caught)}


def _warning_lines(caught) -> list[str]:
    """``"Category: first line"`` of each distinct warning a task raised."""
    return sorted({f"{w.category.__name__}: {str(w.message).strip().splitlines()[0]}" for w in caught})


@functools.cache
def _params_of(method: str) -> frozenset:
    from dpfair.algorithms import METHODS

    return frozenset(METHODS[method]().get_params())
