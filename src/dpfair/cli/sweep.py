"""``dpfair sweep SPEC``: train the grid of a sweep spec into a SQLite results store, resumably
(:func:`dpfair.experiments.sweep.run_sweep`), and print the composed ε of every model released per data set."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from dpfair.cli.output import print_table

HELP = "train a grid of methods × data sets × ε × hyper-parameters × seeds into a results store"
DESCRIPTION = ("Run the sweep of a TOML spec (or a reproduction spec shipped with dpfair, by name) and store "
               "one row per model in SQLite. Resumable: run it again after a crash or Ctrl-C and only the "
               "models not stored yet are trained. Prints the composed ε of every model released per data set.")


def add_arguments(p) -> None:
    p.add_argument("spec", metavar="SPEC", help="a .toml sweep spec, or a shipped spec's name")
    p.add_argument("--backend", choices=["local", "dask"], default="local",
                   help="local processes (default) or a Dask cluster (--address, or a local one on loopback)")
    p.add_argument("--store", default=None, metavar="PATH",
                   help="SQLite results store (default dpfair-runs/<sweep name>.sqlite)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: one per core)")
    p.add_argument("--address", default=None, help="a Dask scheduler's address (with --backend dask)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from dpfair.experiments.spec import SweepSpec
    from dpfair.experiments.store import ResultsStore
    from dpfair.experiments.sweep import run_sweep

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be a positive integer, got {args.workers}")
    spec = SweepSpec.load(args.spec)
    store = ResultsStore(args.store or Path("dpfair-runs") / f"{spec.name}.sqlite")
    print(f"sweep {spec.name}: {len(spec.points())} models into {store.path} ({args.backend} backend)")
    try:
        summary = run_sweep(spec, store, backend=args.backend, workers=args.workers, address=args.address,
                            verbose=not args.quiet)
    except KeyboardInterrupt:
        print(f"dpfair: interrupted; {len(store.done_keys())} models are stored in {store.path}; run the same "
              "command again to train the rest", file=sys.stderr)
        return 130
    rows = [("models in the spec", str(summary.points)), ("already stored", str(summary.skipped)),
            ("trained now", str(summary.trained))]
    if summary.elsewhere:
        rows.append(("stored by another sweep", f"{summary.elsewhere} (ran on the same store meanwhile)"))
    rows += [(f"failed ({n})", message) for message, n in summary.failed.items()]
    by_category: dict = {}
    for line, n in summary.warnings.items():
        by_category.setdefault(line.split(":", 1)[0], []).append((line, n))
    for category, lines in sorted(by_category.items()):
        # every privacy warning in full; a kind whose messages differ only in their numbers, once with a count
        shown = lines if category != "UtilityWarning" else [(lines[0][0], sum(n for _, n in lines))]
        rows += [(f"warning ({n} tasks)", line) for line, n in shown]
    for total in summary.privacy_totals.itertuples():
        value = f"{total.epsilon:.4f} at δ = {total.delta:.3g}"
        if math.isinf(total.epsilon):
            value = f"∞ ({total.models - total.private_models} non-private models)"
            if total.private_models:
                value += f"; the {total.private_models} private ones: {total.private_epsilon:.4f}"
        value += f"; {total.models} models, {total.covers}"
        if total.conversion == "group privacy":
            value += " (by group privacy: 2ε)"
        if total.uncovered_models:
            value += (f"; not bounded here: {total.uncovered_models} sensitive-unit models, which protect only the "
                      "attribute they declared")
        rows.append((f"ε on {total.dataset}, {total.protects}", value))
    print_table(rows)
    return 1 if summary.failed else 0
