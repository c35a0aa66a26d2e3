"""Running a sweep: :func:`run_sweep` trains what the store does not hold yet, a task at a time.

The spec's points (:meth:`SweepSpec.points`) whose key is already in the store are skipped; the rest are
grouped into tasks — all points of a batched method (DP-FERMI) on one data set, split and notion form
one task, trained as one batched grid; any other point is a task of its own — and the tasks run on a
backend (:mod:`dpfair.experiments.backends`). Each finished task is stored in one transaction as it
arrives, so a sweep killed at any point and run again trains each model once.

Sweeps running at the same time on one store share the work: a task's points are claimed in the store
(:class:`~dpfair.experiments.store.Claims`) as the backend takes the task, before it trains, and a point
another live sweep claims is left to it. A sweep whose remaining points are all claimed elsewhere waits
for them (looking every :data:`POLL_S` seconds), takes over the claims of a sweep that died, and ends
once every point of its spec is stored or failed, so its summary and totals cover the whole spec.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from dpfair.experiments.backends import get_backend
from dpfair.experiments.runner import batched_method, run_task
from dpfair.experiments.spec import SweepSpec
from dpfair.experiments.store import Claims, ResultsStore
from dpfair.utils.progress import progress

#: Seconds between looks at the store while another sweep trains the last points this one needs.
POLL_S = 2.0


@dataclass
class SweepSummary:
    """What one :func:`run_sweep` call did: ``points`` in the spec, ``skipped`` (already stored), ``trained``
    (here), ``failed`` (``{message: number of points}``, here or in another sweep on the same store),
    ``warnings`` (``{"Category: message": number of tasks}``, what the fits warned), the store's privacy
    totals afterwards, and ``elsewhere``: the points another sweep on the same store stored meanwhile."""

    points: int
    skipped: int
    trained: int = 0
    failed: dict = field(default_factory=dict)
    warnings: dict = field(default_factory=dict)
    privacy_totals: object = None
    elsewhere: int = 0


def group_tasks(points) -> list[list]:
    """``points`` grouped into tasks (largest first, for an even spread over workers)."""
    tasks: dict = {}
    for point in points:
        key = point.task_key if batched_method(point.method) else point.key
        tasks.setdefault(key, []).append(point)
    return sorted(tasks.values(), key=len, reverse=True)


def plan_tasks(spec: SweepSpec, done: set[str]) -> list[list]:
    """The points still to train, grouped into tasks (largest first, for an even spread over workers)."""
    return group_tasks(p for p in spec.points() if p.key not in done)


def _claimed(tasks: list[list], claims: Claims, taken: list[list]) -> Iterator[list]:
    """Each task's points this sweep could claim, claimed as the backend takes the task; appended to
    ``taken`` in the order yielded (the backend's task index)."""
    for task in tasks:
        keys = set(claims.take([p.key for p in task]))
        if keys:
            taken.append([p for p in task if p.key in keys])
            yield taken[-1]


def run_sweep(spec: SweepSpec, store: ResultsStore, *, backend: str = "local", workers: int | None = None,
              address: str | None = None, verbose: bool = True) -> SweepSummary:
    """Train every point of ``spec`` not yet in ``store`` on ``backend`` and store each task as it finishes;
    points claimed by another sweep on the store are left to it and waited for (see the module's text)."""
    done = store.done_keys()
    points = spec.points()
    tasks = plan_tasks(spec, done)
    summary = SweepSummary(points=len(points), skipped=sum(p.key in done for p in points))
    if tasks:
        todo = {p.key for task in tasks for p in task}
        failed_before = {f["key"]: f["created"] for f in store.failures()}
        settled: set[str] = set()  # trained or failed here, or stored or failed elsewhere
        log = store.path.with_suffix(".log")  # where the workers' messages go, not the terminal
        with store.claims() as claims, get_backend(backend, workers=workers, address=address, log=log) as runner, \
                progress(len(todo), f"sweep {spec.name}", "model", enabled=verbose) as bar:
            while tasks:
                taken: list[list] = []
                for index, result in runner.map_unordered(run_task, _claimed(tasks, claims, taken)):
                    store.add(result, spec.name, claims)
                    for line in result["warnings"]:
                        summary.warnings[line] = summary.warnings.get(line, 0) + 1
                    if result["failure"] is None:
                        summary.trained += len(taken[index])
                    else:
                        summary.failed[result["failure"]] = summary.failed.get(result["failure"], 0) \
                            + len(taken[index])
                    settled.update(p.key for p in taken[index])
                    bar.update(len(taken[index]))
                tasks = _left_to_others(points, store, claims, todo, settled, failed_before, summary, bar)
    summary.privacy_totals = store.privacy_totals()
    return summary


def _left_to_others(points, store, claims, todo, settled, failed_before, summary, bar) -> list[list]:
    """After this sweep's own tasks: count what other sweeps stored or failed meanwhile, wait while they
    still train the rest of ``todo``, and return the tasks left to train here (claims released by a sweep
    that stopped, or stale); ``[]`` once every point is settled."""
    waited = False
    while True:
        done = store.done_keys()
        failed = {f["key"]: f["message"] for f in store.failures()
                  if f["key"] in todo and f["created"] != failed_before.get(f["key"])}
        for key in sorted(todo - settled):
            if key in done:
                summary.elsewhere += 1
            elif key in failed:
                summary.failed[failed[key]] = summary.failed.get(failed[key], 0) + 1
            else:
                continue
            settled.add(key)
            bar.update(1)
        rest = [p for p in points if p.key in todo and p.key not in settled]
        held = claims.others([p.key for p in rest]) if rest else {}
        free = [p for p in rest if p.key not in held]
        if free or not rest:
            if waited:
                bar.update(0, waiting="none")
            return group_tasks(free)
        pid, host = next(iter(held.values()))
        bar.update(0, waiting=f"{len(rest)} models claimed by another sweep (pid {pid} on {host})")
        waited = True
        time.sleep(POLL_S)
