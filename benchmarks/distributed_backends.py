"""Ray or Dask for ``dpfair sweep``'s distributed backend (issue 14): what each engine costs here.

Each engine runs a local cluster of ``--workers`` worker processes on 127.0.0.1, as a sweep without
``--address`` does, in a fresh Python process per run (engines alternate, ``--repeats`` runs each):

- ``import``: seconds and memory (PSS, MB) to import the engine (``distributed`` / ``ray``);
- ``start``: seconds from creating the cluster to the first trivial task's result;
- ``cluster MB``: memory (PSS, shared pages split among the processes) of the driver and every process
  it started, after the start; ``idle CPU %``: the CPU time those processes use while idle, over 3 s;
- ``per task``: wall time of ``--tasks`` trivial tasks (``x + 1``) submitted at once and collected as they
  finish, divided by their number (median of three batches);
- ``tiny``: the ``tiny`` sweep spec's tasks (:func:`~dpfair.experiments.sweep.plan_tasks`,
  :func:`~dpfair.experiments.runner.run_task`: DP-FERMI at two λ and ERM on compas, two seeds; the workers
  import dpfair and torch and load the data) on the running cluster, without the results store, which
  is the same for every engine; ``tiny CPU``: the CPU time of all the processes meanwhile (less sensitive
  than wall time to other load on a shared machine); ``sweep`` = start + tiny + close, what a user waits
  for (median and range of the runs);
- ``close``: seconds to shut the cluster down; ``listens on``: the addresses the cluster's listening
  sockets were bound to; ``left``: listening sockets of the process tree after the close.
- ``install MB``: the files of the engine's requirement closure (``dask[distributed]``, ``ray``) beyond
  dpfair's own dependencies, as installed here.

Dask runs through dpfair's backend (:class:`~dpfair.experiments.dask_backend.DaskBackend`: TLS between its
processes, no dashboard); Ray through :class:`RayMap` below, a few lines with the same interface on
``ray.init(num_cpus=workers, include_dashboard=False, _node_ip_address="127.0.0.1")``. The local process
backend's ``tiny`` is measured the same way for reference. Chosen: among the engines whose local
cluster listens on 127.0.0.1 only (a requirement: a sweep's workers hold private data), the one with the
shorter median ``sweep`` time; the footprint columns are reported alongside.

    python benchmarks/distributed_backends.py [--workers 2] [--tasks 50] [--repeats 5]

Writes ``results/experiments/backends.csv`` and ``backends.md`` and prints the table.
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata as md
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _machine import load_average, machine_info

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("DPFAIR_DATA", str(REPO.parent / "shared" / "data"))

ENGINES = {"dask": ("dask[distributed]", "distributed"), "ray": ("ray", "ray")}


def trivial(x):
    return x + 1


class RayMap:
    """Ray with the backend interface (benchmark only): a local Ray instance on 127.0.0.1."""

    def __init__(self, workers: int):
        self.workers = workers

    def __enter__(self):
        import ray

        ray.init(num_cpus=self.workers, include_dashboard=False, _node_ip_address="127.0.0.1",
                 log_to_driver=False, logging_level="ERROR")
        return self

    def __exit__(self, *exc):
        import ray

        ray.shutdown()
        return False

    def map_unordered(self, fn, tasks):
        import ray

        remote = ray.remote(fn)
        refs = {remote.remote(task): i for i, task in enumerate(tasks)}
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield refs[done[0]], ray.get(done[0])


def _backend(engine: str, workers: int):
    if engine == "dask":
        from dpfair.experiments.dask_backend import DaskBackend

        return DaskBackend(workers)
    if engine == "ray":
        return RayMap(workers)
    from dpfair.experiments.backends import LocalBackend

    return LocalBackend(workers)


def _tree():
    import psutil

    me = psutil.Process()
    return [me] + me.children(recursive=True)


def _pss_mb(processes) -> float:
    import psutil

    total = 0
    for p in processes:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total / 2**20


def _listening() -> list[str]:
    import psutil

    out = []
    for p in _tree():
        try:
            out += [c.laddr.ip for c in p.net_connections("inet") if c.status == psutil.CONN_LISTEN]
        except psutil.Error:
            pass
    return out


def _cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each process of the tree, by pid."""
    import psutil

    out = {}
    for p in _tree():
        try:
            times = p.cpu_times()
        except psutil.Error:
            continue
        out[p.pid] = times.user + times.system
    return out


def _cpu_since(before: dict[int, float]) -> float:
    return sum(t - before.get(pid, 0.0) for pid, t in _cpu().items())


def measure(engine: str, workers: int, tasks: int) -> dict:
    """One run of ``engine`` in this (fresh) process."""
    import psutil

    me = psutil.Process()
    row = {"engine": engine}
    if engine in ENGINES:
        before = _pss_mb([me])
        t0 = time.perf_counter()
        __import__(ENGINES[engine][1])
        row["import_s"] = time.perf_counter() - t0
        row["import_mb"] = _pss_mb([me]) - before
    from dpfair.experiments.runner import run_task
    from dpfair.experiments.spec import SweepSpec
    from dpfair.experiments.sweep import plan_tasks

    spec = SweepSpec.load("tiny")
    plan = plan_tasks(spec, set())
    t0 = time.perf_counter()
    with _backend(engine, workers) as backend:
        if engine in ENGINES:
            list(backend.map_unordered(trivial, [0]))
            row["start_s"] = time.perf_counter() - t0
            row["cluster_mb"] = _pss_mb(_tree())
            row["listens_on"] = " ".join(sorted(set(_listening())))
            cpu, t0 = _cpu(), time.perf_counter()
            time.sleep(3)
            row["idle_cpu_pct"] = 100 * _cpu_since(cpu) / (time.perf_counter() - t0)
            batches = []
            for _ in range(3):
                t0 = time.perf_counter()
                got = sorted(i for i, _ in backend.map_unordered(trivial, list(range(tasks))))
                batches.append((time.perf_counter() - t0) / tasks)
                assert got == list(range(tasks))
            row["per_task_ms"] = 1e3 * statistics.median(batches)
        cpu, t0 = _cpu(), time.perf_counter()
        results = [result for _, result in backend.map_unordered(run_task, plan)]
        row["tiny_s"] = time.perf_counter() - t0
        row["tiny_cpu_s"] = _cpu_since(cpu)
        rows = sum(len(release["rows"]) for result in results for release in result["releases"])
        assert rows == len(spec.points()), (rows, len(spec.points()))
        t0 = time.perf_counter()
    row["close_s"] = time.perf_counter() - t0
    if engine in ENGINES:
        row["sweep_s"] = row["start_s"] + row["tiny_s"] + row["close_s"]
        time.sleep(1)
        row["left"] = len(_listening())
    return row


def _closure(requirement: str) -> set[str]:
    """Installed distributions that ``requirement`` pulls in (itself included), markers evaluated here."""
    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = [(Requirement(requirement), "")]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen and not req.extras:
            continue
        seen.add(name)
        for line in md.requires(req.name) or []:
            sub = Requirement(line)
            todo += [(sub, e) for e in (req.extras or {""})]
    return seen


def install_size(requirement: str) -> tuple[float, int]:
    """MB of the files installed for ``requirement`` beyond dpfair's own dependencies, and how many
    distributions they are."""
    extra = _closure(requirement) - _closure("dpfair")
    size = 0
    for name in extra:
        for f in md.distribution(name).files or []:
            path = f.locate()
            if path.is_file():
                size += path.stat().st_size
    return size / 2**20, len(extra)


COLUMNS = ["engine", "version", "install_mb", "packages", "import_s", "import_mb", "start_s", "cluster_mb",
           "idle_cpu_pct", "per_task_ms", "tiny_s", "tiny_cpu_s", "close_s", "sweep_s", "sweep_min_s",
           "sweep_max_s", "listens_on", "left"]
SHOWN = ["import_s", "import_mb", "start_s", "cluster_mb", "idle_cpu_pct", "per_task_ms", "tiny_s", "tiny_cpu_s",
         "close_s", "sweep_s", "listens_on", "left"]


def summarise(runs: list[dict]) -> list[dict]:
    """One row per engine: medians over its runs (``left``: the largest; ``listens_on``: all addresses)."""
    rows = []
    for engine in list(ENGINES) + ["local"]:
        mine = [r for r in runs if r["engine"] == engine]
        row = {"engine": engine if engine in ENGINES else "local processes (reference)"}
        if engine in ENGINES:
            row["version"] = md.version(ENGINES[engine][1])
            row["install_mb"], row["packages"] = install_size(ENGINES[engine][0])
            row["sweep_min_s"] = min(r["sweep_s"] for r in mine)
            row["sweep_max_s"] = max(r["sweep_s"] for r in mine)
        for key in SHOWN:
            values = [r[key] for r in mine if key in r]
            if not values:
                continue
            if key == "listens_on":
                row[key] = " ".join(sorted({ip for v in values for ip in v.split()}))
            else:
                row[key] = max(values) if key == "left" else statistics.median(values)
        rows.append({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
    return rows


def _cell(row: dict, key: str) -> str:
    value = row.get(key, "")
    if key == "sweep_s" and value != "":
        return f"{value:.1f} ({row['sweep_min_s']:.1f}-{row['sweep_max_s']:.1f})"
    if isinstance(value, float):
        return f"{value:.0f}" if key.endswith(("_mb", "_pct")) else f"{value:.2f}"
    return str(value)


def _loopback(row: dict) -> bool:
    return row["listens_on"] == "127.0.0.1"


def markdown(rows: list[dict], meta: dict) -> str:
    header = ["engine", "version", "install MB (pkgs)", "import s", "import MB", "start s", "cluster MB",
              "idle CPU %", "per task ms", "tiny s", "tiny CPU s", "close s", "sweep s (range)", "listens on",
              "left listening"]
    lines = [
        "# Distributed backend for `dpfair sweep`: Dask or Ray",
        "",
        (f"Measured {meta['date']} on {meta['machine']} ({meta['cpus']} CPUs shared with other work, load "
         f"average before {meta['load_before']}, after {meta['load_after']}); Python {meta['python']}. "
         f"Local clusters of {meta['workers']} worker processes on 127.0.0.1; median of {meta['repeats']} runs "
         f"per engine, each in a fresh process, engines alternating; per-task overhead over {meta['tasks']} "
         "trivial tasks. Definitions: `benchmarks/distributed_backends.py` (docstring)."),
        "",
        "| " + " | ".join(header) + " |",
        "|---|---|" + "---:|" * (len(header) - 4) + "---|---:|",
    ]
    for r in rows:
        cells = [r["engine"], r.get("version", ""),
                 f"{r['install_mb']:.0f} ({r['packages']})" if "install_mb" in r else ""]
        cells += [_cell(r, k) for k in SHOWN]
        lines.append("| " + " | ".join(cells) + " |")
    engines = [r for r in rows if r["engine"] in ENGINES]
    chosen = min([r for r in engines if _loopback(r)] or engines, key=lambda r: r["sweep_s"])
    other = next(r for r in engines if r is not chosen)
    lines += ["", f"**Chosen: {chosen['engine']}.**"]
    if _loopback(chosen) and not _loopback(other):
        where = ", ".join(other["listens_on"].split()).replace("::", "`::` (every interface)")
        lines[-1] += (f" {other['engine']}'s local instance listened on {where} although told its node's address is "
                      "127.0.0.1; a sweep's local cluster, whose workers hold private data, must listen "
                      f"on 127.0.0.1 only, as {chosen['engine']}'s did.")
    lines[-1] += (f" Its cluster starts in {chosen['start_s']:.1f} s ({other['engine']}: {other['start_s']:.1f} s), "
                  f"closes in {chosen['close_s']:.1f} s ({other['close_s']:.1f} s), holds {chosen['cluster_mb']:.0f} MB "
                  f"({other['cluster_mb']:.0f} MB) and adds {chosen['install_mb']:.0f} MB to an installation "
                  f"({other['install_mb']:.0f} MB). The `tiny` sweep took {chosen['sweep_s']:.1f} s through it "
                  f"against {other['sweep_s']:.1f} s (runs ranged {chosen['sweep_min_s']:.1f}-{chosen['sweep_max_s']:.1f} "
                  f"and {other['sweep_min_s']:.1f}-{other['sweep_max_s']:.1f} s with the machine's other load; CPU time "
                  f"of all processes {chosen['tiny_cpu_s']:.1f} s against {other['tiny_cpu_s']:.1f} s): training "
                  f"dominates it. Per trivial task it costs {chosen['per_task_ms']:.1f} ms "
                  f"({other['per_task_ms']:.1f} ms), which tasks that train for a second or more do not feel.")
    lines.append("")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=REPO / "results" / "experiments")
    parser.add_argument("--measure", choices=[*ENGINES, "local"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:  # a child run: one engine, one JSON line
        print(json.dumps(measure(args.measure, args.workers, args.tasks)))
        return

    load_before = load_average()
    runs = []
    for _ in range(args.repeats):
        for engine in [*ENGINES, "local"]:
            out = subprocess.run([sys.executable, __file__, "--measure", engine, "--workers", str(args.workers),
                                  "--tasks", str(args.tasks)], capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(runs[-1], flush=True)
    rows = summarise(runs)
    meta = {
        **machine_info(load_before),
        "workers": args.workers, "tasks": args.tasks, "repeats": args.repeats,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "backends.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    text = markdown(rows, meta)
    (args.out / "backends.md").write_text(text)
    print(text)
    print(f"wrote {args.out / 'backends.csv'} and {args.out / 'backends.md'}")


if __name__ == "__main__":
    main()
