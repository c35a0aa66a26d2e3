"""Running a sweep: :func:`run_sweep` trains what the store does not hold yet, a task at a time.

The spec's points (:meth:`SweepSpec.points`) whose key is already in the store are skipped; the rest are
grouped into tasks — all points of a batched method (DP-FERMI) on one data set, split and notion form
one task, trained as one batched grid; any other point is a task of its own — and the tasks run on a
backend (:mod:`dpfair.experiments.backends`). Each finished task is stored in one transaction as it
arrives, so a sweep killed at any point and run again trains each model once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dpfair.experiments.backends import get_backend
from dpfair.experiments.runner import BATCHED_METHODS, run_task
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import ResultsStore
from dpfair.progress import progress


@dataclass
class SweepSummary:
    """What one :func:`run_sweep` call did: ``points`` in the spec, ``skipped`` (already stored), ``trained``,
    ``failed`` (``{message: number of points}``), ``warnings`` (``{"Category: message": number of tasks}``,
    what the fits warned), and the store's privacy totals afterwards."""

    points: int
    skipped: int
    trained: int = 0
    failed: dict = field(default_factory=dict)
    warnings: dict = field(default_factory=dict)
    privacy_totals: object = None


def plan_tasks(spec: SweepSpec, done: set[str]) -> list[list]:
    """The points still to train, grouped into tasks (largest first, for an even spread over workers)."""
    tasks: dict = {}
    for point in spec.points():
        if point.key in done:
            continue
        key = point.task_key if point.method in BATCHED_METHODS else point.key
        tasks.setdefault(key, []).append(point)
    return sorted(tasks.values(), key=len, reverse=True)


def run_sweep(spec: SweepSpec, store: ResultsStore, *, backend: str = "local", workers: int | None = None,
              address: str | None = None, verbose: bool = True) -> SweepSummary:
    """Train every point of ``spec`` not yet in ``store`` on ``backend`` and store each task as it finishes."""
    done = store.done_keys()
    points = spec.points()
    tasks = plan_tasks(spec, done)
    summary = SweepSummary(points=len(points), skipped=sum(p.key in done for p in points))
    if tasks:
        with get_backend(backend, workers=workers, address=address) as runner, \
                progress(sum(map(len, tasks)), f"sweep {spec.name}", "model", enabled=verbose) as bar:
            for index, result in runner.map_unordered(run_task, tasks):
                store.add(result, spec.name)
                for line in result["warnings"]:
                    summary.warnings[line] = summary.warnings.get(line, 0) + 1
                if result["failure"] is None:
                    summary.trained += len(tasks[index])
                else:
                    summary.failed[result["failure"]] = summary.failed.get(result["failure"], 0) + len(tasks[index])
                bar.update(len(tasks[index]))
    summary.privacy_totals = store.privacy_totals()
    return summary
