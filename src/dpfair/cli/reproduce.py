"""``dpfair reproduce SPEC``: a reproduction spec's paper figure redrawn from its runs, with a verdict per cell
against the paper's numbers (:mod:`dpfair.experiments.paper_figure`)."""

from __future__ import annotations

from pathlib import Path

from dpfair.cli.results import writable
from dpfair.utils.files import write_atomic

HELP = "redraw a reproduction spec's paper figure from its runs, with a verdict per cell against the paper's numbers"
DESCRIPTION = ("Draw the figure the paper draws (the spec's [figure] table: panels, axes, "
               "series) from a results store or committed models.csv files, the published "
               "values overlaid, and judge every cell: reproduced, better, worse or not "
               "comparable (and why). Writes DIR/figure.png, DIR/verdicts.md and "
               "DIR/verdicts.csv as one unit.")

#: The files ``--out DIR`` receives, as one unit.
NAMES = ("figure.png", "verdicts.md", "verdicts.csv")


def add_arguments(p) -> None:
    p.add_argument("spec", metavar="SPEC", help="a shipped reproduction spec's name, or a .toml spec with [figure]")
    p.add_argument("--from", dest="models", action="append", default=None, metavar="CSV",
                   help="a models.csv (`dpfair report --tables`); repeat it for the specs of the figure's `with`")
    p.add_argument("--store", default=None, metavar="PATH", help="a results store written by `dpfair sweep`")
    p.add_argument("--out", required=True, metavar="DIR", help="the folder to write figure.png and verdicts.md/.csv in")
    p.add_argument("--overwrite", action="store_true", help="replace existing files in --out")
    p.add_argument("--quiet", action="store_true", help="no progress output")


def run(args) -> int:
    from dpfair.experiments.paper_figure import read_models, reproduction_files
    from dpfair.experiments.spec import SweepSpec

    if (args.models is None) == (args.store is None):
        raise ValueError("pass the runs with --from models.csv (repeatable) or --store PATH, one of the two")
    spec = SweepSpec.load(args.spec)
    if spec.figure is None:
        raise ValueError(f"spec {args.spec!r} has no [figure] table; add one (see `dpfair.experiments.spec`)")
    out = Path(args.out)
    writable(out / NAMES[0], ".png", args.overwrite)  # fails early; write_atomic checks again at write time
    for name in NAMES[1:]:
        if (out / name).exists() and not args.overwrite:
            raise ValueError(f"{out / name} already exists; pass --overwrite or choose another --out")
    if args.store is not None:
        if not Path(args.store).is_file():
            raise ValueError(f"no results store {args.store!r}; run `dpfair sweep {args.spec} --store {args.store}` "
                             "first")
        from dpfair.experiments.store import ResultsStore

        frame = ResultsStore(args.store).frame()
    else:
        import pandas as pd

        frame = pd.concat([read_models(m) for m in args.models], ignore_index=True)
    command = "dpfair reproduce " + " ".join([args.spec, *[f"--from {m}" for m in args.models or []],
                                              *([f"--store {args.store}"] if args.store else []), f"--out {out}"])
    files = reproduction_files(spec, frame, command=command)
    written = write_atomic(out / NAMES[0], lambda target: [(out / name, files[name]) for name in NAMES],
                           overwrite=args.overwrite)
    print(f"{spec.name}: " + ", ".join(str(w) for w in written))
    return 0
