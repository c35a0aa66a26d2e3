"""``results/speed/`` before and after a change, on one machine, alternating: the benchmarks' own commands run
from two source trees in turn, so that both meet the same load.

Each tree is a checkout (``git worktree add /tmp/before REV``): every benchmark runs from its own tree (its
``benchmarks/`` script, ``PYTHONPATH`` its ``src``, ``dpfair`` on the ``PATH`` its package), writing into a scratch
folder (but see the sweep below). The rounds alternate before, after, before, after, ...; each round runs

* ``dpfermi_single_model.py`` (one DP-FERMI model through ``dpfair train``: fit and training-loop ms per epoch,
  cold and warm accounting cache),
* ``dpfermi_sweep_timing.py`` (the batched sweep: 660 models × 200 epochs; seconds, training-loop seconds),
* ``private_step.py --methods sgd dpfair`` (a private CNN step ÷ SGD at each batch size).

``report_speed.py --before`` alternates on its own (it is run once, from the after tree). Writes
``NAME.csv`` (every run's figures) and ``NAME.md`` (per figure: each run, the best of each side and
best after ÷ best before) under ``--out``. Run from the repository root:
``python benchmarks/before_after.py --before /tmp/before --after /tmp/after --name issue43_before_after``. The
sweep benchmark rewrites its tree's ``results/dpfermi/timing.md`` and ``results/speed/dpfermi_sweep.csv``: give
both sides as worktrees, so this checkout's committed tables stay as they are.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _command_of(tree: Path, scratch: Path) -> Path:
    """A ``dpfair`` command that runs ``tree``'s package (``python -m dpfair``): the installed one's entry point names
    a module of one tree only (``dpfair.cli.main`` after the CLI became a package)."""
    bin_dir = scratch / "bin"
    bin_dir.mkdir(exist_ok=True)
    command = bin_dir / "dpfair"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dpfair "$@"\n')
    command.chmod(0o755)
    return bin_dir


def _run(tree: Path, script: str, args: list[str], scratch: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "DPFAIR_CACHE_DIR": str(scratch / "cache"),
           "PATH": f"{_command_of(tree, scratch)}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run([sys.executable, str(tree / "benchmarks" / script), *args], cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=3600)


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def single(tree: Path, scratch: Path) -> dict:
    out = scratch / "single"
    _run(tree, "dpfermi_single_model.py", ["--out", str(out)], scratch)
    figures = {}
    for row in _rows(out / "dpfermi_single_model.csv"):
        figures[f"single model, {row['cache']} cache: fit ms/epoch"] = float(row["fit_ms_per_epoch"])
        figures[f"single model, {row['cache']} cache: loop ms/epoch"] = float(row["loop_ms_per_epoch"])
    return figures


def sweep(tree: Path, scratch: Path) -> dict:
    _run(tree, "dpfermi_sweep_timing.py", [], scratch)
    row = _rows(tree / "results" / "speed" / "dpfermi_sweep.csv")[-1]
    return {"sweep (660 models × 200 epochs): s": float(row["seconds"]),
            "sweep: training loop s": float(row["training_loop_seconds"])}


def step(tree: Path, scratch: Path, batches: list[str]) -> dict:
    out = scratch / "step"
    _run(tree, "private_step.py", ["--device", "cpu", "--methods", "sgd", "dpfair", "--batches", *batches,
                                   "--rounds", "1", "--out", str(out)], scratch)
    return {f"CNN step, batch {row['batch']}: dpfair ÷ SGD": float(row["x_sgd"])
            for row in _rows(out / "private_step.csv") if row["method"] == "dpfair"}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the checkout before the change")
    parser.add_argument("--after", type=Path, default=REPO, help="the checkout after it (default: this one)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", nargs="+", default=["64", "256"])
    parser.add_argument("--name", default="before_after")
    parser.add_argument("--note", default="", help="a paragraph for the Markdown: what the two trees hold")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "speed")
    args = parser.parse_args(argv)

    runs = []  # (side, round, figure, value)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for r in range(1, args.rounds + 1):
        for side, tree in (("before", args.before), ("after", args.after)):
            with tempfile.TemporaryDirectory(prefix=f"ba-{side}-") as tmp:
                scratch = Path(tmp)
                figures = {**single(tree, scratch), **sweep(tree, scratch), **step(tree, scratch, args.batches)}
            runs += [(side, r, name, value) for name, value in figures.items()]
            print(f"round {r} {side}: done", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / f"{args.name}.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["side", "round", "figure", "value"])
        writer.writerows((side, r, name, f"{value:.6g}") for side, r, name, value in runs)
    names = list(dict.fromkeys(name for _, _, name, _ in runs))
    lines = [f"# {args.name}: `results/speed/` before and after, alternating", "",
             f"{args.note} Run {started}, {os.cpu_count()} CPUs, load average at the end "
             f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; `python benchmarks/before_after.py` "
             f"(--rounds {args.rounds}). Lower is better for every figure; the best run of each side is compared.",
             "", "| figure | before (each run) | after (each run) | best after ÷ best before |", "|---|---|---|---:|"]
    for name in names:
        before = [v for s, _, n, v in runs if n == name and s == "before"]
        after = [v for s, _, n, v in runs if n == name and s == "after"]
        ratio = min(after) / min(before) if before and after and min(before) > 0 else float("nan")
        lines.append(f"| {name} | {', '.join(f'{v:.4g}' for v in before)} | {', '.join(f'{v:.4g}' for v in after)} "
                     f"| {ratio:.2f} |")
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print((args.out / f"{args.name}.md").read_text())


if __name__ == "__main__":
    main()
